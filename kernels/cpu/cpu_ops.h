/* cpu_ops.h: the CPU backend's ops and its readable references.
 * - The table ops, one per backend table entry (semantics in kernels/backend.h). Each has a CUDA twin of the
 *   same name in kernels/cuda/ (cpu_linear_forward <-> cuda_linear_forward).
 * - The oracles: plain, unfused references (GEMM through CBLAS, bias and activation, the MSE and TD losses,
 *   the clipped double-Q and DQN targets, gradient-norm clipping, one Adam step, the row gather) that the
 *   fused table ops are written in terms of, and that tests compare the table ops of both backends against.
 *   The engine never calls them; they are not in the table. */
#ifndef RLT_CPU_OPS_H
#define RLT_CPU_OPS_H

#include <stddef.h>

#include "../backend.h"

/* ---- table ops ---- */
int cpu_fill(rlt_backend *bk, float *x, uint64_t n, float value);
int cpu_copy_f32(rlt_backend *bk, float *dst, const float *src, uint64_t n);
int cpu_polyak(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau);
/* The table's flat op: cpu_fill, cpu_copy_f32 or cpu_polyak by mode. */
int cpu_flat(rlt_backend *bk, rlt_flat_mode mode, float *dst, const float *src, uint64_t n, float scalar);
int cpu_counter_add(rlt_backend *bk, int64_t *c, int64_t v);
/* Clipping, then Adam and Polyak in one pass (cpu_adam_polyak), then the 16-bit copies (fused.c). */
int cpu_adam(rlt_backend *bk, const rlt_adam_step *d);
/* The dense layers (dense.c): fp32 on the fast kernels of dense_kernel.h where this CPU has them (the
 * reference below elsewhere); 16-bit layers on the reference. */
int cpu_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d);
int cpu_linear_chain_forward(rlt_backend *bk, const rlt_linear_fwd *layers, int32_t n);
int cpu_linear_backward(rlt_backend *bk, const rlt_linear_bwd *d);
int cpu_act_grad(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows, int32_t cols,
                 rlt_act act);
int cpu_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes);
int cpu_conv_forward(rlt_backend *bk, const rlt_conv_fwd *d);
int cpu_conv_backward(rlt_backend *bk, const rlt_conv_bwd *d);
int cpu_gather_fields(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample, int32_t n_fields,
                      const rlt_gather_field *fields);
int cpu_gather_u8_f32(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, int32_t n,
                      float scale);
int cpu_sum(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale);
int cpu_td3_target_action(rlt_backend *bk, const rlt_target_noise *d);
/* The fused losses (fused.c): each is the sequence of oracles it stands for, called in the same order with the
 * same arguments, so a CPU run through the fused ops produces exactly the oracles' bits. */
int cpu_td3_critic_loss(rlt_backend *bk, const rlt_td3_loss *d);
int cpu_dqn_loss(rlt_backend *bk, const rlt_q_loss *d);
int cpu_branch(rlt_backend *bk, int32_t lane);
int cpu_join(rlt_backend *bk);
/* The table's lane op: cpu_join for RLT_LANE_JOIN, cpu_branch otherwise (lanes.c). */
int cpu_lane(rlt_backend *bk, int32_t lane);
/* Reduced precision and fp16 loss scaling (lowp.c). */
int cpu_cast(rlt_backend *bk, const rlt_cast *d);
int cpu_amp_unscale(rlt_backend *bk, float *g, uint64_t n, rlt_amp_state *amp);
int cpu_amp_update(rlt_backend *bk, rlt_amp_state *amp, int64_t *step, float growth, float backoff,
                   int32_t growth_interval);
/* The table's amp op: cpu_amp_unscale or cpu_amp_update by d->mode. */
int cpu_amp(rlt_backend *bk, const rlt_amp_op *d);

/* ---- oracles (not in the table) ---- */
/* C[m,n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X^T when tX != 0. A is m x k (k x m when ta),
 * B is k x n (n x k when tb). */
int cpu_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
             int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
/* y[r, c] = act(y[r, c] + b[c]) for r < rows, c < cols (b may be NULL). */
int cpu_bias_act(rlt_backend *bk, float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols, rlt_act act);
/* act_grad run on the calling thread (the table's act_grad may queue it on a side lane): for ops that use it
 * inside themselves. */
int cpu_act_grad_plain(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows,
                       int32_t cols, rlt_act act);
/* db[c] = beta * db[c] + sum_r dy[r, c], summed in row order. */
int cpu_bias_grad(rlt_backend *bk, float *db, const float *dy, int32_t lddy, int32_t rows, int32_t cols, float beta);
/* The dense layers as the plain ops they stand for (fused.c): fp32 is cpu_gemm, then cpu_bias_act (forward) or
 * cpu_bias_grad and cpu_act_grad (backward); 16-bit is lowp.c's loops (inputs widened exactly, products summed
 * in fp32 in index order, results rounded to nearest even). */
int cpu_linear_forward_ref(rlt_backend *bk, const rlt_linear_fwd *d);
int cpu_linear_backward_ref(rlt_backend *bk, const rlt_linear_bwd *d);
/* Their 16-bit halves (lowp.c). */
int cpu_linear_forward_lp(rlt_backend *bk, const rlt_linear_fwd *d);
int cpu_linear_backward_lp(rlt_backend *bk, const rlt_linear_bwd *d);
/* One plain Adam step (rlt_adam_step's formula, no clipping, Polyak or copies), step = *step >= 1. */
int cpu_adam_plain(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                   const int64_t *step);
/* adam then polyak (target NULL: none) in one pass, one division per element fewer than cpu_adam_plain
 * (flat.c): the fast path of cpu_adam. */
int cpu_adam_polyak(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                    const int64_t *step, float *target, float tau);
/* Global L2 clipping of one flat gradient block (PyTorch's clip_grad_norm_): *norm = ||g||_2 (summed in double),
 * then g *= min(1, max_norm / (*norm + 1e-6)). */
int cpu_clip_grad_norm(rlt_backend *bk, float *g, uint64_t n, float max_norm, float *norm);
/* gather_fields' draw in two steps: its shape checks, then rows [r0, r1) of idx drawn (what a split gather runs). */
int cpu_sample_check(rlt_backend *bk, int32_t n, const rlt_sample_spec *s);
void cpu_sample_rows(int32_t *idx, int32_t r0, int32_t r1, const rlt_sample_spec *s);
/* dst row i (at dst + i*dst_stride bytes) = src row idx[i] (row_bytes bytes at src + idx[i]*row_bytes). */
int cpu_gather_rows(rlt_backend *bk, void *dst, uint64_t dst_stride, const void *src, uint64_t row_bytes,
                    const int32_t *idx, int32_t n);
/* dq[i] = grad_scale * 2 (q[i] - y[i]) / n; *loss (if non-NULL) = mean (q - y)^2, summed in order. */
int cpu_mse_grad(rlt_backend *bk, float *dq, float *loss, const float *q, const float *y, int32_t n, float grad_scale);
/* y[i] = r[i] + gamma * (1 - term[i]) * min(q1[i * ldq], q2[i * ldq]). */
int cpu_td3_target(rlt_backend *bk, float *y, const float *r, const float *term, const float *q1, const float *q2,
                   int32_t ldq, int32_t n, float gamma);
/* rlt_q_loss's target: y[i] and (a_next non-NULL) the chosen action a[i], rows of stride ldq. */
int cpu_dqn_target(rlt_backend *bk, float *y, int32_t *a_next, const float *r, const float *term,
                   const float *q_target_next, const float *q_online_next, int32_t ldq, int32_t n, int32_t n_act,
                   float gamma);
/* rlt_q_loss's TD loss and gradient given the target y. */
int cpu_q_loss_grad(rlt_backend *bk, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                    const int32_t *act, const float *y, int32_t n, int32_t n_act, float huber_delta, float grad_scale);

/* The fast dense-layer kernels (dense_kernel.h), one table per instruction set; the backend's
 * linear_forward and linear_backward use the best one the CPU runs and fall back to the reference ops
 * above (fused.c) where there is none. linear_forward applies act NONE or RELU (relu != 0); pack is
 * CPU_DENSE_PACK_FLOATS floats of scratch for a panel of W^T, or NULL (then no panel is packed).
 * linear_backward computes dW and dx as the op does (kernels/backend.h) but not db. */
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

/* The second thread (worker.c): started at open when cpu.threads >= 2, it runs jobs posted by the calling
 * thread. A job's lane orders it: jobs of one lane run in the order posted, except that a job posted `beside`
 * the previous one (same lane) may run at the same time as it; jobs of different lanes, or of lane CPU_JOB_FREE
 * (split halves: ordered with nothing), may run at the same time, one on each thread. cpu_worker_post copies
 * `bytes` (at most CPU_JOB_BYTES) of arg into the job's slot and returns its ticket; cpu_worker_wait(ticket)
 * returns once that job (of lane CPU_JOB_FREE) has run, running it on the calling thread when the worker has not
 * started it; cpu_worker_drain returns once every job posted has run, running the ready ones on the calling
 * thread meanwhile; idle: none is queued or running. One thread at a time posts and waits: the one running the
 * backend's ops. cpu_worker_self: 1 on w's thread. */
#define CPU_JOB_BYTES 256
#define CPU_JOB_FREE (-1)
typedef struct cpu_worker cpu_worker;
int cpu_worker_start(cpu_worker **out);
void cpu_worker_stop(cpu_worker *w);
uint64_t cpu_worker_post(cpu_worker *w, int32_t lane, int beside, void (*fn)(void *), const void *arg,
                         size_t bytes);
void cpu_worker_wait(cpu_worker *w, uint64_t ticket);
void cpu_worker_drain(cpu_worker *w);
int cpu_worker_idle(cpu_worker *w);
int cpu_worker_self(cpu_worker *w);
/* 1 while the worker asks the caller to run alone: another process has been taking its core (worker.c). */
int cpu_worker_contended(cpu_worker *w);
/* Multiply-adds (rows x fi x fo, twice that for a backward with dW and dx) below which a dense op is never split
 * in two (handing half over costs about a microsecond). On a side lane an op of at least twice this goes to
 * the queue as two halves that may run at once (dense.c), so that whichever thread is free takes one. */
#define CPU_SPLIT_MIN_MACS 65536
/* Multiply-adds (rows x fi x fo) from which an op on lane 0 is split even while the worker has side-lane jobs
 * queued, its half waiting behind them: past about 40 us of arithmetic, halving the op beats leaving it to
 * one thread. Below it, lane 0's ops are split only when the worker is idle (lanes.c). */
#define CPU_SPLIT_BUSY_MACS 4194304

/* Lanes on two threads (lanes.c): with a worker, ops issued on a side lane (lane(1..3)) go to the worker's
 * queue when they can (cpu_lane_defer), lane 0 runs on the calling thread, and join waits for the queue.
 * cpu_lane_side: the op being issued should go to the queue. cpu_lane_fence: the op runs here now, so when it
 * was issued on a side lane, the ops queued before it finish first. cpu_lane_can_split: the worker may take
 * half of an op issued here: when its queue is empty, or, for a `big` op (one that lasts much longer than the
 * small side-lane jobs it would queue behind), always. */
int cpu_lane_side(rlt_backend *bk);
int cpu_lane_defer(rlt_backend *bk, void (*fn)(void *), const void *arg, size_t bytes);
/* The same, beside the job deferred just before (the second half of a split op: the two may run at once). */
int cpu_lane_defer_beside(rlt_backend *bk, void (*fn)(void *), const void *arg, size_t bytes);
void cpu_lane_fence(rlt_backend *bk);
int cpu_lane_can_split(rlt_backend *bk, int big);

/* The CPU backend's private state (bk->impl), allocated by cpu_open before the seal: per-backend, never
 * global, so two CPU backends in one process do not share convolution slots. */
typedef struct cpu_impl {
    rlt_conv_shape conv[RLT_BACKEND_MAX_CONVS]; /* each prepared slot's shape */
    int32_t conv_ready[RLT_BACKEND_MAX_CONVS];  /* 1 once conv_prepare accepted the slot */
    const cpu_dense_kernels *dense;             /* NULL: the reference dense layers */
    float *pack;                                /* the planned workspace: a panel of W^T (NULL until set) */
    float *pack2;                               /* the worker's panel (second half of the workspace) */
    cpu_worker *worker;                         /* NULL: one thread */
    int32_t lane;                               /* the lane ops are issued on (the lane op: lanes.c) */
    int32_t solo;                               /* 1: the worker is left alone until the next join */
    rlt_comm *comm;                             /* data-parallel rank `rank` of comm (comm_attach), or NULL */
    int32_t rank;
} cpu_impl;

/* The panel of W^T for a forward running on this thread (lanes.c): each thread has its own (the workspace's
 * two halves), so two jobs can pack at the same time. */
float *cpu_lane_panel(const cpu_impl *im);

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
