/* cuda_ops.h: the CUDA backend's private state, its check macros and its ops, one per backend table entry
 * (see kernels/backend.h for what each op computes). Each op has a CPU twin of the same name in
 * kernels/cpu/ (cuda_linear_forward <-> cpu_linear_forward), which the parity test compares it against.
 *
 * This header is shared by the C files (cuda_backend.c, gemm.c) and the .cu files, so every declaration
 * has C linkage: the backend table is filled from C. Only this module includes CUDA headers; the engine
 * sees the backend through kernels/backend.h alone. */
#ifndef RLT_CUDA_OPS_H
#define RLT_CUDA_OPS_H

/* The C headers below are included before the extern "C" block so their own C++ wrappers are not forced
 * into C linkage; the engine headers inside the block then find them already included. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../backend.h"
#include "cuda_plan_rules.h" /* the plan's rules: library layers, lanes, workspace (shared with kernels/described/) */

/* Threads per block for the elementwise kernels. Reductions use their own fixed block size (losses.cu):
 * the summation order must not depend on the device. */
#define CUDA_THREADS 256

/* The most agents one batched op covers (train/seed_batch.h's SEED_BATCH_MAX), and the most distinct library
 * products the batched captures of one backend may issue (cuda_gemm_seeds: a TD3 update's two variants issue 17). */
#define CUDA_SEEDS_MAX 256
#define CUDA_SEED_GEMMS 96

/* The seed-batching state a kernel receives by value (cuda_impl.seeds): n agents; delta[z] (bytes) moves a
 * pointer into the leading agent's arena to agent z's, seed[z] is agent z's config seed. n 0 or 1: off (delta
 * NULL). Both arrays live in the leading agent's arena (its plan's "group.seed_table"). */
typedef struct cuda_seeds {
    const int64_t *delta;
    const uint64_t *seed;
    int32_t n;
} cuda_seeds;

/* One developer switch, read from the environment at open: RLT_CUDA_LANES=1 makes branch a no-op, so every op
 * runs on lane 0 in call order. tests/gpu_train.c runs a conv network with it and without it and requires the
 * same checkpoint bytes, which is how a missing dependency between lanes would show; it changes no result.
 * A benchmark switch, also read at open: RLT_CUDA_SEEDS_BLAS=0 keeps batched seeds' products on linear.cu's kernels
 * (the route before the library's batched GEMM), for an A/B in one build (bench/RESULTS.md); RLT_CUDA_SEEDS_LT=0
 * takes pointer arrays and a bias pass instead of the fused strided forward; RLT_CUDA_SEEDS_RULE=shape|old|all|macs|dims
 * picks another rule for which batched products go to the library (cuda_plan_rules.h, cuda_rule_seeds_blas_as). */

/* A prepared convolution slot (conv_ops.c): fp32 slots on our GEMM-form kernels (gemm 1), the others on
 * cuDNN. */
typedef struct cuda_conv_slot {
    int32_t ready, gemm;
    rlt_conv_shape s;
    uint64_t ws_bytes;
} cuda_conv_slot;

typedef struct cuda_impl {
    int32_t device;          /* the CUDA device index this backend was opened on */
    int32_t cc_major, cc_minor;
    int32_t sm_count;
    int32_t smem_optin; /* shared memory a block may opt in to (linear_chain.cu) */
    /* One stream per lane (the lane op). streams[0] is the main stream, where copies, syncs and graph capture
     * happen; all are non-blocking (no syncs with the legacy default stream). Lanes 0 and 1 have the
     * device's highest priority (they carry an update's critical path). */
    cudaStream_t streams[RLT_BACKEND_MAX_LANES];
    /* One cuBLAS handle for every lane (a handle costs device memory: tens of MiB each on Hopper): cuda_gemm
     * rebinds it to the current lane's stream and that lane's slice of the workspace when the lane changes
     * (host-side calls, allowed during capture). Each lane keeps its own slice, so GEMMs running at once on
     * two lanes never share scratch memory. The handle exists only once an op of the plan calls cuBLAS
     * (cuda_blas_ensure: plan_workspace, conv_prepare of an fp32 slot, or a caller's workspace); NULL otherwise. */
    cublasHandle_t blas;
    int32_t blas_lane;       /* the lane the handle is bound to now */
    void *lane_ws[RLT_BACKEND_MAX_LANES];
    uint64_t lane_ws_bytes[RLT_BACKEND_MAX_LANES];
    int32_t lane;            /* the lane ops run on now */
    /* The aside stream (the graph op's ASIDE modes; kernels/backend.h): acting beside an update, after aside_event
     * (recorded on lane 0 by MARK). aside 1 between BEGIN and END: every op issues there, and ops that would share lane
     * 0's state refuse (cuda_aside_refuse). NULL stream where the caller asked for one lane (a seed group's other
     * members). */
    cudaStream_t aside_stream;
    cudaEvent_t aside_event;
    int32_t aside, aside_marked;
    int32_t pending;         /* bit k: side lane k has work that lane 0 has not joined yet */
    int32_t n_lanes;         /* lanes in use: RLT_BACKEND_MAX_LANES, or 1 with RLT_CUDA_LANES=1 (branch is a no-op) */
    cudaEvent_t fork_event;  /* recorded on lane 0, waited for by a side lane at branch */
    cudaEvent_t join_event[RLT_BACKEND_MAX_LANES]; /* recorded on side lane k, waited for by lane 0 at join */
    void *workspace;         /* cuBLAS workspace inside the arena (the workspace op), or NULL */
    uint64_t workspace_bytes;
    /* The process budget's accounting (process_memory.c): NVML's state (NULL without NVML), the bytes held
     * through reserve(RLT_LOC_DEVICE) (the arena: the rest of what the process holds is context), and what creating the
     * library handles took, measured around each creation. */
    struct cuda_procmem *procmem;
    uint64_t reserved_bytes;
    void *reserved_last;
    uint64_t reserved_last_bytes;
    /* The device arena when it is mapped into the seed group's span (rlt_backend.span; cuda_backend.c): the
     * physical allocation's handle and mapped bytes (a multiple of the granularity); 0 when it is a cudaMalloc block. */
    unsigned long long span_handle;
    uint64_t span_bytes;
    /* When the arena's first part is also mapped at the span's hot slot (rlt_arena_span.hot_va): the arena is two
     * physical allocations, the first of span_hot_bytes (span_handle), the rest (span_handle2), and span_alias is
     * the hot slot's address; 0 otherwise. span_hot: 0 with RLT_CUDA_SPAN_HOT=0 (one allocation, no hot slot). */
    unsigned long long span_handle2;
    uint64_t span_hot_bytes, span_alias;
    int32_t span_hot;
    int32_t gather_rows; /* 0 with RLT_CUDA_GATHER_ROWS=0: every batch gathers as wide rows do (replay.cu; A/B) */
    /* 1 with RLT_CUDA_SEEDS_CONV=1: fp32 convolutions run batched over seeds (conv_ops.c). Off by default: 16 Nature
     * DQN agents ran no faster batched than with a graph each, and a 16-seed MinAtar group ran slower end to end
     * (bench/RESULTS.md), so groups with convolutions keep a graph per seed unless asked. */
    int32_t seeds_conv;
    /* 0 with RLT_CUDA_CONV_TF32=0: under precision: tf32 the convolutions stay on fp32 arithmetic (A/B; cuda_conv_tc). */
    int32_t conv_tf32;
    uint64_t handle_bytes, blas_bytes; /* all library handles; the cuBLAS handle's part */
    int32_t capturing;       /* the slot being captured, or -1 */
    int32_t reserved_;
    cudaGraphExec_t graphs[RLT_BACKEND_MAX_GRAPHS];
    /* Device scratch for multi-stage reductions (the gradient clipping's per-block partial sums), allocated at
     * open, before the seal, and so counted in context_bytes. Only lane 0 uses it (adam with clipping checks
     * this), so ops in order on that lane can share it. */
    float *scratch;
    /* The cuDNN state (handle, per-slot descriptors and algorithms), owned by kernels/cuda/cudnn/ (or the
     * stand-in in kernels/cuda/no_cudnn/, chosen by CMake); opaque here so this header needs no cuDNN header.
     * NULL until the first slot that uses cuDNN. */
    void *conv;
    cuda_conv_slot conv_slots[RLT_BACKEND_MAX_CONVS]; /* conv_ops.c */
    /* cuBLASLt's handle and the table of its problems (gemm_lt.c): the dense layers' library products with their
     * epilogues. Created with the cuBLAS handle's rule (cuda_lt_ensure, when the plan has such a product); NULL
     * otherwise. lt_bytes: what creating the handle took (part of handle_bytes). */
    struct cuda_lt *lt;
    uint64_t lt_bytes;
    /* 1: the plan asked for TF32 (precision: tf32, rlt_op_use.dense_tf32): the fp32 dense products that go to the
     * library run on TF32 tensor cores; everything else stays fp32. Set by plan_workspace. */
    int32_t tf32;
    int32_t planned; /* 1 once plan_workspace ran: handles follow the plan's shapes, not the workspace op */
    /* Data-parallel rank (nccl.c): this rank's NCCL communicator (owned by the group's host comm) and the
     * number of ranks; NULL and 1 otherwise. */
    void *nccl;
    int32_t nranks;
    /* The comm lane (allreduce_mean's async buckets, nccl.c): a stream of the highest priority made by comm_attach
     * (NULL before, and without a communicator), forked from the issuing lane by comm_fork and joined into lane 0
     * by the next join through comm_join while comm_pending. */
    cudaStream_t comm_stream;
    cudaEvent_t comm_fork, comm_join;
    int32_t comm_pending;
    /* Seed batching (seed_batch, seed groups on one GPU): while seeds.n > 1 every op issued launches its kernels
     * once for seeds.n agents of identical plans (grid z = the agent), each block moving its arena pointers by
     * the agent's delta and keying its random streams with the agent's seed (cuda_seeds, below). seeds_lo/hi:
     * the leading agent's device arena, the only memory a batched op may name besides the scratch; max_seeds:
     * rlt_backend.seeds at open (the scratch holds that many agents' partial sums). */
    cuda_seeds seeds;
    uint64_t seeds_lo, seeds_hi;
    int32_t max_seeds;
    /* The batched library products (cuda_gemm_seeds, gemm.c): the host's copy of seeds.delta, and one slot of
     * pointer arrays per distinct product a batched capture issued (agent z's B, A and C in slot s at
     * seed_ptrs[(3 s + 0, 1, 2) max_seeds + z]), in device memory taken at open (NULL unless max_seeds > 1) and
     * mirrored on the host; the mirror is uploaded at graph END (seed_ptrs_dirty), before any launch reads it.
     * seed_keys: each slot's lead pointers, so a product captured again (another variant) reuses its slot. */
    int64_t seeds_delta_host[CUDA_SEEDS_MAX];
    void **seed_ptrs, **seed_ptrs_host;
    const void *seed_keys[CUDA_SEED_GEMMS][3];
    int32_t seed_slots, seed_ptrs_dirty;
    int32_t seeds_blas; /* 0 with RLT_CUDA_SEEDS_BLAS=0 (see above): batched products stay on our kernels */
    /* Bytes from each batched agent's arena to the next when agent z's delta is z times it (the arenas of a seed
     * group's span), else 0: the batched forward then runs as one strided cuBLASLt product with the bias and ReLU in
     * its epilogue (cuda_lt_linear_forward_seeds). seeds_lt: 0 with RLT_CUDA_SEEDS_LT=0 (pointer arrays and a bias
     * pass, for A/B runs). */
    int64_t seeds_stride;
    /* While the batched seeds' hot parts are all mapped (rlt_arena_span.hot_va): an operand of the lead's below
     * seeds_hot_hi is read at its address plus seeds_hot_delta, agent z's seeds_hot_stride bytes further each (a
     * shorter stride than the arenas', so one strided library product spans more agents); 0 otherwise. */
    int64_t seeds_hot_delta, seeds_hot_stride;
    uint64_t seeds_hot_hi;
    int32_t seeds_lt;
    int32_t seeds_rule; /* which rule sends seed-batched products to the library (cuda_rule_seeds_env) */
    int32_t seeds_rows; /* 0 with RLT_CUDA_SEEDS_ROWS=1: batched narrow layers keep one agent's rows per thread (A/B) */
    cudaEvent_t seed_event; /* an agent's: its work before a batched launch (seed_mark); the lead's: the launch */
    /* Batched copies (rlt_seeds_desc.host_delta, seed_copy.cu): agent z's host side is the lead's moved by
     * seeds_host_delta[z] (device memory), within the lead's host arena [seeds_host_lo, seeds_host_hi); NULL: copies
     * are refused while batching. seeds_exact: the batch must give single-agent bits, so seeds_blas is off for its
     * duration (seeds_blas_saved restores it) and seed_slots_at_begin tells whether a batched library product was
     * issued all the same (a layer beyond our kernels: the end of the batch then refuses it). */
    const int64_t *seeds_host_delta;
    uint64_t seeds_host_lo, seeds_host_hi;
    int32_t seeds_exact, seeds_blas_saved, seed_slots_at_begin, reserved2_;
} cuda_impl;

/* Floats in cuda_impl.scratch; dqn.cu's reductions use at most this many partial sums. */
#define CUDA_SCRATCH_FLOATS 1024

static inline cuda_impl *cuda_get(rlt_backend *bk) { return (cuda_impl *)bk->impl; }
/* 1: the fp32 convolutions' products run on TF32 tensor cores (precision: tf32, unless RLT_CUDA_CONV_TF32=0, on a GPU
 * that has them: compute capability 8.0 on). */
static inline int cuda_conv_tc(rlt_backend *bk) {
    const cuda_impl *c = cuda_get(bk);
    return c->tf32 && c->conv_tf32 && c->cc_major >= 8;
}
/* The stream of the lane ops run on now: every op launches here. */
static inline cudaStream_t cuda_stream(rlt_backend *bk) {
    cuda_impl *c = (cuda_impl *)bk->impl;
    return c->aside ? c->aside_stream : c->streams[c->lane];
}

/* Blocks for a grid-stride loop over n items: enough to fill the device several times over, never more
 * than the items need, at least one (so a launch over zero items is still valid and cheap). */
static inline unsigned cuda_blocks(rlt_backend *bk, uint64_t n, unsigned threads) {
    uint64_t want = (n + threads - 1) / threads;
    uint64_t cap = (uint64_t)cuda_get(bk)->sm_count * 32u;
    if (want > cap) want = cap;
    return want ? (unsigned)want : 1u;
}

/* ---- seed batching, host side ----
 * The grid z extent of every launch (1 when not batching), and the state a kernel takes. */
static inline unsigned cuda_seeds_z(rlt_backend *bk) {
    int32_t n = cuda_get(bk)->seeds.n;
    return n > 1 ? (unsigned)n : 1u;
}
static inline cuda_seeds cuda_seeds_of(rlt_backend *bk) { return cuda_get(bk)->seeds; }
/* While batching: RLT_OK when each of the n pointers (NULL ones skipped) lies in the leading agent's device arena
 * or the scratch, so moving it by an agent's delta names the same buffer of that agent; otherwise an error naming
 * op. Not batching: RLT_OK. Every batched launcher checks its pointers with it before launching. */
int cuda_seeds_check(rlt_backend *bk, const char *op, int32_t n, ...);
/* For ops that cannot run batched (library products, convolutions, 16-bit casts, copies): RLT_ESTATE naming op
 * while batching, RLT_OK otherwise. */
int cuda_seeds_refuse(rlt_backend *bk, const char *op);
/* For ops that use state lane 0's work shares (the library handle and workspaces, the reduction scratch, the
 * convolution slots, the side lanes): RLT_ESTATE naming op on the aside stream (between aside BEGIN and END), RLT_OK
 * otherwise. */
int cuda_aside_refuse(rlt_backend *bk, const char *op);
/* A copy of bytes between the leading agent's host arena and its device arena, for every batched agent at once
 * (seed_copy.cu): block z moves the device side by seeds.delta[z] and the host side by seeds_host_delta[z]; the host
 * side is pinned memory the kernel reaches through unified addressing. */
int cuda_seed_copy(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, int32_t h2d);
int cuda_copy_lists(rlt_backend *bk, const rlt_copy_list *lead_list, const int64_t *host_delta, int32_t n);

/* One check macro per library: each records the failing call's text, file:line and the library's error
 * string in bk->err and returns a status from the enclosing function. */
#define CUDA_CHECK(bk, call)                                                                            \
    do {                                                                                                \
        cudaError_t cuda_rc_ = (call);                                                                  \
        if (cuda_rc_ != cudaSuccess)                                                                    \
            return rlt_err_set((bk)->err, RLT_ERUNTIME, __FILE__, __LINE__, "%s failed: %s (%s)", #call, \
                               cudaGetErrorString(cuda_rc_), cudaGetErrorName(cuda_rc_));               \
    } while (0)

/* cuBLAS and cuBLASLt share their status type. */
#define CUBLAS_CHECK(bk, call)                                                                        \
    do {                                                                                              \
        cublasStatus_t cublas_rc_ = (call);                                                           \
        if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return rlt_err_set((bk)->err, RLT_ERUNTIME, __FILE__, __LINE__, "%s failed: %s (%s, %d)", #call, \
                               cublasGetStatusName(cublas_rc_), cublasGetStatusString(cublas_rc_),   \
                               (int)cublas_rc_);                                                      \
    } while (0)

/* A launch's own errors (bad configuration, no kernel image for this GPU) show up at once in
 * cudaGetLastError; faults inside the kernel surface later, at the next sync. */
#define CUDA_CHECK_LAUNCH(bk, what)                                                                      \
    do {                                                                                                 \
        cudaError_t cuda_rc_ = cudaGetLastError();                                                       \
        if (cuda_rc_ != cudaSuccess)                                                                     \
            return rlt_err_set((bk)->err, RLT_ERUNTIME, __FILE__, __LINE__, "launch of %s failed: %s (%s)", \
                               (what), cudaGetErrorString(cuda_rc_), cudaGetErrorName(cuda_rc_));        \
    } while (0)

/* Shape check shared by the ops (the same preconditions as the CPU twins): RLT_EINVAL naming the op. */
#define CUDA_REQUIRE(bk, cond, op)                                                                 \
    do {                                                                                           \
        if (!(cond)) return rlt_err_set((bk)->err, RLT_EINVAL, __FILE__, __LINE__,                 \
                                        "%s: shape precondition failed: %s", (op), #cond);         \
    } while (0)

/* ---- the table's ops (semantics in kernels/backend.h) ---- */
int cuda_fill(rlt_backend *bk, float *x, uint64_t n, float value);
int cuda_copy_f32(rlt_backend *bk, float *dst, const float *src, uint64_t n);
int cuda_counter_add(rlt_backend *bk, int64_t *c, int64_t v);
int cuda_polyak(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau);
/* The table's flat op: cuda_fill, cuda_copy_f32 or cuda_polyak by mode (fill.cu). */
int cuda_flat(rlt_backend *bk, rlt_flat_mode mode, float *dst, const float *src, uint64_t n, float scalar);
/* Clipping, Adam, Polyak and the 16-bit copies in one pass (adam.cu). */
int cuda_adam(rlt_backend *bk, const rlt_adam_step *d);
/* Dense layers (linear.cu): fp32 on our fused kernels (cuBLASLt for the large products and past their K), 16-bit on
 * cuBLASLt (lowp.cu); both with cuBLAS as the fallback (gemm_lt.c). */
int cuda_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d);
int cuda_linear_backward(rlt_backend *bk, const rlt_linear_bwd *d);
/* A small MLP's forward in one launch where it fits (linear_chain.cu), else cuda_linear_forward per layer. */
int cuda_linear_chain_forward(rlt_backend *bk, const rlt_linear_fwd *layers, int32_t n);
/* How cuda_linear_forward sums an fp32 layer of rows x fi -> fo (linear.cu): on the library, or on one of its own
 * paths, whose sums linear_chain.cu repeats in the same order (a warp per row of N <= 8 outputs; K <= 4 products
 * per output; the GEMM tile's 32-k chunks split over 8 or 4 k-groups). */
enum { CUDA_FWD_LIBRARY = 0, CUDA_FWD_OUTER = 1, CUDA_FWD_ROWDOT = 2, CUDA_FWD_GEMM_KG8 = 3, CUDA_FWD_GEMM_KG4 = 4 };
int cuda_linear_fwd_kind(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo);
int cuda_act_grad(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows, int32_t cols,
                  rlt_act act);
int cuda_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes);
int cuda_conv_forward(rlt_backend *bk, const rlt_conv_fwd *d);
int cuda_conv_backward(rlt_backend *bk, const rlt_conv_bwd *d);
/* The replay's gathers (replay.cu); gather_fields with a sample and no field draws the indices alone. */
int cuda_gather_fields(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample, int32_t n_fields,
                       const rlt_gather_field *fields);
int cuda_gather_u8_f32(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, int32_t n,
                       float scale);
int cuda_sum(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale);
int cuda_td3_target_action(rlt_backend *bk, const rlt_target_noise *d);
int cuda_td3_critic_loss(rlt_backend *bk, const rlt_td3_loss *d);
int cuda_dqn_loss(rlt_backend *bk, const rlt_q_loss *d);
/* Reduced precision and loss scaling (lowp.cu). */
int cuda_cast(rlt_backend *bk, const rlt_cast *d);
int cuda_amp_unscale(rlt_backend *bk, float *g, uint64_t n, rlt_amp_state *amp);
int cuda_amp_update(rlt_backend *bk, rlt_amp_state *amp, int64_t *step, float growth, float backoff,
                    int32_t growth_interval);
/* The table's amp op: cuda_amp_unscale or cuda_amp_update by d->mode (lowp.cu). */
int cuda_amp(rlt_backend *bk, const rlt_amp_op *d);
/* Data-parallel collectives through NCCL (nccl.c). */
int cuda_comm_init(rlt_comm_init_desc *d, void **comms, rlt_err *e);
void cuda_comm_destroy(void *comm);
void cuda_comm_abort(void *comm);
int cuda_comm_attach(rlt_backend *bk, rlt_comm *c, void *device_comm, int32_t rank, int32_t n_ranks);
/* Waits for stream: on a rank of several, by polling with short naps and at most dist.timeout_s (then the NCCL
 * communicator is aborted and the wait fails naming the rank, its GPU, `what` and the NCCL settings to try);
 * otherwise cudaStreamSynchronize. */
int cuda_comm_wait(rlt_backend *bk, cudaStream_t stream, const char *what);
/* 1 when this backend's NCCL communicator was aborted: its streams may hold work that never ends. */
int cuda_comm_released(rlt_backend *bk);
int cuda_allreduce_mean(rlt_backend *bk, float *x, uint64_t n, int32_t async);
/* branch and join live in cuda_backend.c with the streams. */

/* ---- launchers the ops share (not in the table) ---- */
/* C[m,n] = alpha op(A) op(B) + beta C, row-major fp32 through cuBLAS (gemm.c): the dense layers beyond our
 * kernels and the convolutions' GEMMs. */
int cuda_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
              int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
/* y[r, c] = act(y[r, c] + b[c]) (bias_act.cu): a dense layer's forward epilogue where cuBLAS ran its product. */
int cuda_bias_act(rlt_backend *bk, float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols, int32_t act);
/* db[c] = beta db[c] + s[c] for c < n (beta 0: s[c]) (bias_act.cu): a bias gradient cuBLASLt summed into scratch
 * memory, added into the accumulated one. */
int cuda_bias_grad_add(rlt_backend *bk, float *db, const float *s, int32_t n, float beta);
/* The 16-bit dense layers (lowp.cu), which cuda_linear_forward and cuda_linear_backward hand over to. */
int cuda_linear_forward_lp(rlt_backend *bk, const rlt_linear_fwd *d);
int cuda_linear_backward_lp(rlt_backend *bk, const rlt_linear_bwd *d);
/* lowp.cu's epilogue passes for gemm_lt.c: y = act(y + b) over [rows, cols] in y's type yd (fp32 arithmetic, b NULL:
 * none), and db[c] = beta db[c] + sum_r dy[r, c] with dy in type dyd, fp32 included: the bias gradient of every
 * library-routed layer the library did not fuse (rows summed in an order fixed by the shape). */
int cuda_lp_bias_act(rlt_backend *bk, void *y, int32_t yd, int32_t ldy, const float *b, int32_t rows, int32_t cols,
                     int32_t act);
int cuda_lp_bias_grad(rlt_backend *bk, float *db, const void *dy, int32_t dyd, int32_t lddy, int32_t rows, int32_t cols,
                      float beta);
/* ---- the dense layers' library products on cuBLASLt (gemm_lt.c) ----
 * Each runs the layer's products with their epilogues fused where cuBLASLt offers them and sets *done 1, or sets
 * *done 0 having issued nothing (no algorithm for the shape, no workspace, a full table): the caller then runs its
 * cuBLAS path. wgrad computes dW (required) and db (may be NULL; when not fused, its kernel runs on lane db_lane);
 * dgrad computes dx and applies act_x'(x). fp32 descriptors are the routed layers' (linear.cu decides); 16-bit ones
 * any layer's. */
int cuda_lt_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d, int *done);
/* The batched seeds' fp32 forward as one strided cuBLASLt product with the bias (and ReLU) in its epilogue, when the
 * seeds' arenas lie at one stride (seeds_stride) and the heuristic offers an algorithm; *done 0 otherwise (nothing
 * issued: the caller runs its pointer-array product and bias pass). */
int cuda_lt_linear_forward_seeds(rlt_backend *bk, const rlt_linear_fwd *d, int *done);
int cuda_lt_linear_wgrad(rlt_backend *bk, const rlt_linear_bwd *d, int32_t db_lane, int *done);
int cuda_lt_linear_dgrad(rlt_backend *bk, const rlt_linear_bwd *d, int *done);
/* Creates cuBLASLt's handle and table on first need (at init, before the seal; its cost goes to handle_bytes), and
 * releases them (cuda_close, or a later plan without such products). */
int cuda_lt_ensure(rlt_backend *bk);
void cuda_lt_close(rlt_backend *bk);
/* fp32 convolutions in GEMM form (conv_gemm.cu; the contract of the backend's conv ops): prepare checks the
 * shape against the kernels' limits and gives the workspace size; forward and backward take a workspace of that
 * size that conv_ops.c has checked. */
int cuda_conv_gemm_prepare(rlt_backend *bk, const rlt_conv_shape *s, uint64_t *ws_bytes);
int cuda_conv_gemm_forward(rlt_backend *bk, const rlt_conv_shape *s, float *y, const float *x, const float *w,
                           const float *b, int32_t act, void *ws);
int cuda_conv_gemm_backward(rlt_backend *bk, const rlt_conv_shape *s, float *dx, float *dw, float *db, float *dy,
                            const float *y, const float *x, const float *w, int32_t act, void *ws);
/* Creates the cuBLAS handle on first need (at init, before the seal): bound to lane 0 with the lanes' workspace
 * (none until the workspace op hands one over), so cuBLAS never takes a workspace of its own. Its cost goes to handle_bytes. */
int cuda_blas_ensure(rlt_backend *bk);
/* process_memory.c: open reads NVML's figures before the context exists (call it before cudaSetDevice);
 * context_made picks the method once the context exists; now gives what this process holds on the device; method
 * says how, for the plan; close unloads NVML. None of them allocates device memory. */
void cuda_procmem_open(cuda_impl *c);
void cuda_procmem_context_made(cuda_impl *c);
int cuda_procmem_now(rlt_backend *bk, uint64_t *bytes);
const char *cuda_procmem_method(const cuda_impl *c);
void cuda_procmem_close(cuda_impl *c);
/* How gemm_lt.c uses the first CUDA_SIDE_WORKSPACE bytes of the current lane's slice, on every lane alike (so a
 * problem gets the same algorithm on any lane): the algorithm's workspace, then scratch for a bias gradient that
 * is added into an accumulated one (fo <= CUDA_LT_SCRATCH / 4). */
#define CUDA_LT_SCRATCH (64ull << 10)
#define CUDA_LT_WORKSPACE (CUDA_SIDE_WORKSPACE - CUDA_LT_SCRATCH)
/* cuda_gemm with a workspace of the same size on every lane, so the same bits on any lane (gemm.c). */
int cuda_gemm_uniform(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                      const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
/* cuda_gemm summed on TF32 tensor cores (precision: tf32), with the side lanes' workspace size when uniform (as
 * cuda_gemm_uniform): the routed dense products' fallback when cuBLASLt offers no algorithm (gemm.c). */
int cuda_gemm_tf32(rlt_backend *bk, int32_t uniform, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                   const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
/* gemm.c: C = alpha op(A) op(B) + beta C with A, B in ab_dtype (BF16 or F16), C in c_dtype (that or F32). */
/* The same product for every agent of a seed batch (seeds.n > 1) in one cuBLAS batched call: agent z's operands are
 * the lead's moved by its delta. fp32 (or TF32 under precision: tf32) with the side lanes' workspace size on any
 * lane, as cuda_gemm_uniform; at most CUDA_SEED_GEMMS distinct products per backend (gemm.c). */
int cuda_gemm_seeds(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                    const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
/* The same, on TF32 tensor cores when tf32 is set, fp32 otherwise (a convolution's products follow cuda_conv_tc, which
 * the RLT_CUDA_CONV_TF32=0 switch turns off, rather than the plan's precision alone). */
int cuda_gemm_seeds_as(rlt_backend *bk, int32_t tf32, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k,
                       float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C,
                       int32_t ldc);
/* Uploads the batched products' pointer arrays when a capture added some (graph END, and eager batched calls). */
int cuda_seed_ptrs_upload(rlt_backend *bk);
int cuda_gemm_lp(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const void *A,
                 int32_t lda, const void *B, int32_t ldb, int32_t ab_dtype, float beta, void *C, int32_t c_dtype,
                 int32_t ldc);
/* The optimiser's clipping, first stage (dqn.cu): c->scratch[b] = sum of squares of block b's slice of g (elements
 * b * 256 + t + j * 65536), for the blocks of a fixed grid of CUDA_CLIP_BLOCKS that hold any element: the first
 * cuda_clip_parts(n). cuda_adam reduces them with the rest taken as the +0.0f an empty block would sum to, so the
 * norm's bits are those of the whole grid. Launching only the blocks with data matters when seeds are batched:
 * a DQN CartPole network (10,934 parameters) fills 43 of the 256, and 16 seeds launched 3,408 empty blocks. */
#define CUDA_CLIP_BLOCKS 256
static inline uint32_t cuda_clip_parts(uint64_t n) {
    uint64_t b = (n + 255) / 256;
    return b == 0 ? 1u : b < CUDA_CLIP_BLOCKS ? (uint32_t)b : CUDA_CLIP_BLOCKS;
}
int cuda_sumsq_partial(rlt_backend *bk, const float *g, uint64_t n);

/* A fork and a join inside one op, for its independent chains (a layer's weight and bias gradients beside its
 * input gradient): cuda_fork_side picks the two lanes after the current one (skipping it), makes them wait for
 * everything issued on the current lane, and returns them in side; the op sets c->lane to issue on them; then
 * cuda_merge_side(bk, lane, side) makes `lane` wait for both and makes it current again. A graph capture turns
 * this into parallel branches. With fewer than 3 lanes (RLT_CUDA_LANES=1) side is the current lane twice and
 * both calls only restore it: the same kernels in order, so the same bits. Only memory the op owns may be
 * touched on the side lanes. */
int cuda_fork_side(rlt_backend *bk, int32_t side[2]);
int cuda_merge_side(rlt_backend *bk, int32_t lane, const int32_t side[2]);
/* A batched seed group's one side lane for the current lane (the backward's weight gradients; cuda_backend.c), or
 * the current lane when there is none, -1 on an error; cuda_merge_side(bk, lane, {side, lane}) joins it. */
int32_t cuda_fork_seeds(rlt_backend *bk);

/* Releases the conv slots and cuda_impl.conv (descriptors, the cuDNN handle); safe when nothing was prepared.
 * Called by cuda_close. */
void cuda_conv_close(rlt_backend *bk);

/* The cuDNN side of the conv ops (kernels/cuda/cudnn/, or kernels/cuda/no_cudnn/ whose prepare refuses), for the
 * slots conv_ops.c does not run on its own kernels: the 16-bit ones. conv_ops.c has checked the shape, the slot,
 * the activation and the workspace before each call. */
int cuda_dnn_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *s, uint64_t *ws_bytes);
int cuda_dnn_conv_forward(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                          int32_t act, void *ws);
int cuda_dnn_conv_backward(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                           const void *x, const void *w, int32_t act, void *ws);
void cuda_dnn_conv_close(rlt_backend *bk);

/* ---- launchers shared by the conv implementations (conv_bias.cu), over NCHW tensors [n, k, hw] ---- */
/* y[i, c, p] = act(y[i, c, p] + b[c]) (b may be NULL). */
int cuda_conv_bias_act(rlt_backend *bk, void *y, int32_t dt, const float *b, int32_t n, int32_t k, int32_t hw,
                       int32_t act);
/* db[c] += sum over i < n, p < hw of dy[i, c, p], in a fixed order. */
int cuda_conv_bias_grad(rlt_backend *bk, float *db, const void *dy, int32_t dt, int32_t n, int32_t k, int32_t hw);
/* lowp.cu, for the 16-bit convolutions: dx *= act'(x) elementwise over [rows, cols] (row strides lddx, ldx), and
 * dst[i] += (float)src[i] for i < n (src in dtype). */
int cuda_lp_act_grad(rlt_backend *bk, void *dx, int32_t dxd, int32_t lddx, const void *x, int32_t xd, int32_t ldx,
                     int32_t rows, int32_t cols, int32_t act);
int cuda_lp_add(rlt_backend *bk, float *dst, const void *src, int32_t dtype, uint64_t n);

/* ---- kernel preloading ----
 * CUDA 12+ loads kernels lazily, on first launch, and a load takes device memory. Each kernel file forces
 * its kernels in at open (cudaFuncGetAttributes loads a kernel), so the measured context cost includes
 * them and no load (and allocation) happens later, inside the sealed arena's lifetime or a graph capture. */
cudaError_t cuda_preload_bias_act(void);
cudaError_t cuda_preload_fill(void);
cudaError_t cuda_preload_adam(void);
cudaError_t cuda_preload_polyak(void);
cudaError_t cuda_preload_replay(void);
cudaError_t cuda_preload_losses(void);
cudaError_t cuda_preload_td3(void);
cudaError_t cuda_preload_dqn(void);
cudaError_t cuda_preload_conv_bias(void);
cudaError_t cuda_preload_linear(void);
cudaError_t cuda_preload_linear_chain(void);
cudaError_t cuda_preload_conv_gemm(void);
cudaError_t cuda_preload_lowp(void);
cudaError_t cuda_preload_seed_copy(void);

#ifdef __cplusplus
}

/* A layer's activation of its pre-activation z, the CPU twins' expression (kernels/cpu/bias_act.c) term for
 * term, so every kernel's epilogue gives the CPU's bits for the same z. With act a compile-time constant (the
 * kernels templated on it) the branches fold away. */
__device__ __forceinline__ float cuda_act(float z, int32_t act) {
    if (act == RLT_ACT_RELU) return z > 0.0f ? z : 0.0f;
    if (act == RLT_ACT_TANH) return tanhf(z);
    return z;
}

/* A warp's n <= MAXN dot products, lane l holding its partial sums in acc[j]: each finished by a butterfly of
 * shuffles (lanes i and i^off add the same two values, so every lane ends with the same bits); returns sum j = lane
 * (lanes at or past MAXN: sum 0). linear.cu's one-warp-per-row path; linear_chain.cu repeats its sums with it. */
template <int MAXN> __device__ __forceinline__ float cuda_warp_sums(float (&acc)[MAXN], int n, int lane) {
#pragma unroll
    for (int j = 0; j < MAXN; j++)
        if (j < n)
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
    float v = acc[0];
#pragma unroll
    for (int j = 1; j < MAXN; j++)
        if (lane == j) v = acc[j];
    return v;
}

/* ---- seed batching, device side ----
 * Agent z = blockIdx.z's copy of p (a pointer into the leading agent's arena); NULL stays NULL. */
template <typename T> __device__ __forceinline__ T *cuda_seed_ptr(const cuda_seeds &s, T *p) {
    if (!s.delta || !p) return p;
    return (T *)(void *)((char *)(void *)p + s.delta[blockIdx.z]);
}
template <typename T> __device__ __forceinline__ const T *cuda_seed_ptr(const cuda_seeds &s, const T *p) {
    if (!s.delta || !p) return p;
    return (const T *)(const void *)((const char *)(const void *)p + s.delta[blockIdx.z]);
}
/* p moved dz bytes (a batched agent's copy of a non-NULL pointer into the lead's arena, dz its delta read once per
 * block: linear.cu, linear_chain.cu); a NULL one must be tested before, never moved. */
template <typename T> __device__ __forceinline__ T *cuda_at(T *p, int64_t dz) {
    return (T *)(void *)((char *)(void *)p + dz);
}
template <typename T> __device__ __forceinline__ const T *cuda_at(const T *p, int64_t dz) {
    return (const T *)(const void *)((const char *)(const void *)p + dz);
}
/* Agent z's seed in place of the leading agent's (a kernel's seed argument is always its config seed). */
__device__ __forceinline__ uint64_t cuda_seed_key(const cuda_seeds &s, uint64_t seed) {
    return s.delta ? s.seed[blockIdx.z] : seed;
}
/* Agent z's part of the reduction scratch (CUDA_SCRATCH_FLOATS floats each). */
__device__ __forceinline__ float *cuda_seed_scratch(const cuda_seeds &s, float *scratch) {
    return s.delta ? scratch + (size_t)blockIdx.z * CUDA_SCRATCH_FLOATS : scratch;
}

/* ---- programmatic dependent launch (the .cu files only) ----
 * An update is a chain of short kernels, and each costs a launch latency on top of its work. On Hopper a
 * kernel launched with the programmatic-serialization attribute may start while the kernel before it on the
 * stream is still running: its blocks become resident and wait in cuda_pdl_wait (griddepcontrol.wait) until
 * the previous grid has completed and its memory is visible, so the launch overlaps the previous kernel's
 * tail. Captured into a graph, the edge keeps that meaning. The rule that keeps it correct: a kernel
 * launched through cuda_launch_pdl calls cuda_pdl_wait before its first global memory access (read or
 * write). cuda_pdl_trigger (griddepcontrol.launch_dependents) lets the next kernel launch as soon as every
 * block of this one has started; the next kernel still waits for this one to finish before it touches
 * memory. On older GPUs both are no-ops and launches are ordinary. */
__device__ __forceinline__ void cuda_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cuda_pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

template <typename... Params, typename... Args>
static inline cudaError_t cuda_launch_pdl_smem(rlt_backend *bk, void (*kernel)(Params...), dim3 grid, dim3 block,
                                               size_t smem, Args... args) {
    cuda_impl *c = cuda_get(bk);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = cuda_stream(bk);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = c->cc_major >= 9 ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <typename... Params, typename... Args>
static inline cudaError_t cuda_launch_pdl(rlt_backend *bk, void (*kernel)(Params...), dim3 grid, dim3 block,
                                          Args... args) {
    return cuda_launch_pdl_smem(bk, kernel, grid, block, 0, args...);
}
#endif
#endif
