/* cpu_ops.h: the CPU backend's ops, one per backend table entry (see engine/backend.h for semantics).
 * Each has a CUDA twin of the same name in kernels/cuda/. These are the readable reference: tests use
 * them as the oracle for the CUDA backend and for any faster CPU path. */
#ifndef RLT_CPU_OPS_H
#define RLT_CPU_OPS_H

#include "../../engine/backend.h"

int cpu_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
             int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
int cpu_bias_act(rlt_backend *bk, float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols, int32_t act);
int cpu_act_grad(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows, int32_t cols,
                 int32_t act);
int cpu_bias_grad(rlt_backend *bk, float *db, const float *dy, int32_t lddy, int32_t rows, int32_t cols, float beta);
int cpu_fill(rlt_backend *bk, float *x, uint64_t n, float value);
int cpu_copy_f32(rlt_backend *bk, float *dst, const float *src, uint64_t n);
int cpu_counter_add(rlt_backend *bk, int64_t *c, int64_t v);
int cpu_adam(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
             const int64_t *step);
int cpu_polyak(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau);
/* adam then polyak (target NULL: none) in one pass, one division per element fewer than cpu_adam (flat.c). */
int cpu_adam_polyak(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                    const int64_t *step, float *target, float tau);
int cpu_sample_indices(rlt_backend *bk, int32_t *idx, int32_t n, const int64_t *size, const uint8_t *valid,
                       uint64_t seed, uint32_t stream, const int64_t *counter);
int cpu_gather_rows(rlt_backend *bk, void *dst, uint64_t dst_stride, const void *src, uint64_t row_bytes,
                    const int32_t *idx, int32_t n);
int cpu_mse_grad(rlt_backend *bk, float *dq, float *loss, const float *q, const float *y, int32_t n, float grad_scale);
int cpu_sum(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale);
int cpu_td3_target_action(rlt_backend *bk, float *a, int32_t lda, int32_t rows, int32_t cols, float std, float clip,
                          uint64_t seed, uint32_t stream, const int64_t *counter, int32_t row0);
int cpu_td3_target(rlt_backend *bk, float *y, const float *r, const float *term, const float *q1, const float *q2,
                   int32_t ldq, int32_t n, float gamma);

int cpu_gather_u8_f32(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, int32_t n,
                      float scale);
int cpu_dqn_target(rlt_backend *bk, float *y, int32_t *a_next, const float *r, const float *term,
                   const float *q_target_next, const float *q_online_next, int32_t ldq, int32_t n, int32_t n_act,
                   float gamma);
int cpu_q_loss_grad(rlt_backend *bk, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                    const int32_t *act, const float *y, int32_t n, int32_t n_act, float huber_delta, float grad_scale);
int cpu_clip_grad_norm(rlt_backend *bk, float *g, uint64_t n, float max_norm, float *norm);
int cpu_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes);
int cpu_conv_forward(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                     int32_t act, void *ws, uint64_t ws_bytes);
int cpu_conv_backward(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                      const void *x, const void *w, int32_t act, void *ws, uint64_t ws_bytes);
/* The fused ops (fused.c): each is the sequence of plain ops it stands for (see engine/backend.h). */
int cpu_branch(rlt_backend *bk, int32_t lane);
int cpu_join(rlt_backend *bk);
int cpu_linear_forward(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx,
                       const float *W, const float *b, float *y, int32_t ldy, int32_t act);
int cpu_linear_backward(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy,
                        const float *x, int32_t ldx, int32_t act_x, const float *W, float *dW, float *db, float beta,
                        float *dx, int32_t lddx);
int cpu_gather_fields(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample, int32_t n_fields,
                      const rlt_gather_field *fields);
int cpu_td3_critic_loss(rlt_backend *bk, float *y, float *dq1, float *dq2, float *loss1, float *loss2, const float *q1,
                        const float *q2, const float *qt1, const float *qt2, const float *r, const float *term, int32_t n,
                        float gamma, float grad_scale);
int cpu_dqn_loss(rlt_backend *bk, float *y, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                 const int32_t *act, const float *r, const float *term, const float *q_next_target,
                 const float *q_next_online, int32_t ldqn, int32_t n, int32_t n_act, float gamma, float huber_delta,
                 float grad_scale);
int cpu_adam_ex(rlt_backend *bk, float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                const int64_t *step, const rlt_adam_extra *extra);
/* Reduced precision and fp16 loss scaling (lowp.c). */
int cpu_cast(rlt_backend *bk, int32_t rows, int64_t cols, void *dst, int32_t dst_dtype, int64_t ldd, const void *src,
             int32_t src_dtype, int64_t lds, const float *scale);
int cpu_linear_forward_lp(rlt_backend *bk, int32_t dtype, int32_t rows, int32_t fi, int32_t fo, const void *x,
                          int32_t ldx, const void *W, const float *b, void *y, int32_t y_dtype, int32_t ldy, int32_t act);
int cpu_linear_backward_lp(rlt_backend *bk, int32_t dtype, int32_t rows, int32_t fi, int32_t fo, const void *dy,
                           int32_t lddy, const void *x, int32_t ldx, int32_t act_x, const void *W, float *dW,
                           float *db, float beta, void *dx, int32_t dx_dtype, int32_t lddx);
int cpu_amp_unscale(rlt_backend *bk, float *g, uint64_t n, rlt_amp_state *amp);
int cpu_amp_update(rlt_backend *bk, rlt_amp_state *amp, int64_t *step, float growth, float backoff,
                   int32_t growth_interval);

/* The fast dense-layer kernels (dense_kernel.h), one table per instruction set; the backend's
 * linear_forward and linear_backward use the best one the CPU runs and fall back to the reference ops
 * above (fused.c) where there is none. linear_forward applies act NONE or RELU (relu != 0); pack is
 * CPU_DENSE_PACK_FLOATS floats of scratch for a panel of W^T, or NULL (then no panel is packed).
 * linear_backward computes dW and dx as the op does (engine/backend.h) but not db. */
typedef struct cpu_dense_kernels {
    const char *name;
    void (*linear_forward)(int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx, const float *W,
                           const float *b, float *y, int32_t ldy, int32_t relu, float *pack);
    void (*linear_backward)(int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy, const float *x,
                            int32_t ldx, int32_t act_x, const float *W, float *dW, float beta, float *dx,
                            int32_t lddx);
} cpu_dense_kernels;
#define CPU_DENSE_PACK_K 128 /* inputs per packed panel of W^T (the panel, 32 KiB, stays in L1) */
#define CPU_DENSE_PACK_W 64  /* outputs per panel, the widest register tile (AVX-512: 4 x 16) */
#define CPU_DENSE_MIN_ROWS 4 /* forwards of fewer rows use the reference op (no panel to amortise) */
#define CPU_DENSE_PACK_FLOATS (CPU_DENSE_PACK_K * CPU_DENSE_PACK_W)
extern const cpu_dense_kernels cpu_dense512_kernels, cpu_dense256_kernels;
/* The kernels to use: `want` is "reference" (none: the reference ops), "avx2", "avx512" or NULL/"" for
 * the best this CPU runs. NULL when the choice is the reference or the CPU cannot run the one asked for. */
const cpu_dense_kernels *cpu_dense_select(const char *want);
int cpu_linear_forward_fast(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx,
                            const float *W, const float *b, float *y, int32_t ldy, int32_t act);
int cpu_linear_backward_fast(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy,
                             const float *x, int32_t ldx, int32_t act_x, const float *W, float *dW, float *db,
                             float beta, float *dx, int32_t lddx);

/* The second thread (worker.c): started at open when cpu.threads >= 2, it runs one posted job at a time. */
typedef struct cpu_worker cpu_worker;
int cpu_worker_start(cpu_worker **out);
void cpu_worker_stop(cpu_worker *w);
/* Runs fn(arg) on the worker; cpu_worker_wait returns once it has finished (or runs it on the calling thread
 * when the worker has not started it yet). One job at a time. */
void cpu_worker_post(cpu_worker *w, void (*fn)(void *), void *arg);
void cpu_worker_wait(cpu_worker *w);
/* Multiply-adds below which a dense op runs on the calling thread alone (handing over costs ~1 us). */
#define CPU_SPLIT_MIN_MACS 65536

/* The CPU backend's private state (bk->impl), allocated by cpu_open before the seal: per-backend, never
 * global, so two CPU backends in one process do not share convolution slots. */
typedef struct cpu_impl {
    rlt_conv_shape conv[RLT_BACKEND_MAX_CONVS]; /* each prepared slot's shape */
    int32_t conv_ready[RLT_BACKEND_MAX_CONVS];  /* 1 once conv_prepare accepted the slot */
    const cpu_dense_kernels *dense;             /* NULL: the reference dense layers */
    float *pack;                                /* the planned workspace: a panel of W^T (NULL until set) */
    float *pack2;                               /* the worker's panel (second half of the workspace) */
    cpu_worker *worker;                         /* NULL: one thread */
} cpu_impl;

/* The hot elementwise loops are compiled for several x86-64 levels (AVX-512, AVX2, baseline) and the
 * loader picks the best one this CPU runs (GCC's target_clones, an ifunc): one portable binary, wide
 * vectors where they exist. Contraction to FMA stays off (-ffp-contract=off), so every level computes
 * the same bits. Other architectures compile the loops once. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_HOT
#endif

/* Shape check shared by the ops: fails with RLT_EINVAL naming the op and the values. */
#define CPU_REQUIRE(bk, cond, op)                                                                  \
    do {                                                                                           \
        if (!(cond)) return rlt_err_set((bk)->err, RLT_EINVAL, __FILE__, __LINE__,                 \
                                        "%s: shape precondition failed: %s", (op), #cond);         \
    } while (0)

#endif
