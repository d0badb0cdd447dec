/* backend.h: the compute backend interface. A backend is a small table of function pointers (ggml's
 * idea); the agents in agents/ are written once against it. The CPU backend (kernels/cpu/) is always
 * present and is the readable reference; the CUDA backend (kernels/cuda/) is a separate shared module
 * loaded at run time by the registry (engine/backend_registry.c), so a binary without a GPU, driver or
 * CUDA libraries still starts.
 *
 * Rules every op follows:
 * - Matrices are row-major. Pointers point into the backend's own memory ("device" memory; on the CPU
 *   backend that is host memory). Ops are asynchronous on the backend's current lane (one stream unless
 *   an update uses branch/join); ops on one lane run in order.
 * - Ops return RLT_OK or a negative status after writing a message to bk->err. They check shapes
 *   (negative sizes, leading dimensions smaller than rows) and fail with RLT_EINVAL.
 * - Ops never allocate. Values that change from one update to the next (Adam's step, RNG counters, the
 *   replay size) are read from device memory, never baked in as arguments, so a captured graph replays
 *   correctly. Constant hyper-parameters (lr, gamma, tau) are plain arguments.
 * - Reductions are deterministic (fixed order, no atomics), so a seed gives the same result run to run.
 * - Random numbers come from Philox4x32-10 (base/philox.h) keyed by (seed, stream) with the counter
 *   (*counter, element index): the CPU and CUDA backends draw identical integers.
 */
#ifndef RLT_BACKEND_H
#define RLT_BACKEND_H

#include <stdint.h>
#include "err.h"

typedef enum { RLT_ACT_NONE = 0, RLT_ACT_RELU = 1, RLT_ACT_TANH = 2 } rlt_act;
typedef enum { RLT_COPY_H2D = 0, RLT_COPY_D2H = 1, RLT_COPY_D2D = 2 } rlt_copy_kind;

#define RLT_BACKEND_MAX_GRAPHS 8
/* Convolution layers a backend can hold prepared at once (conv_prepare's slots): DQN's training and acting
 * networks each take one per layer of network.conv (at most RLT_QNET_MAX_CONV, 8). */
#define RLT_BACKEND_MAX_CONVS 16

/* One 2-D convolution layer in NCHW layout, cross-correlation as every deep-learning framework computes
 * it: input x [n, c, h, w], filters w [k, c, kh, kw] (OIHW), bias [k], output y [n, k, out_h, out_w] with
 * out_h = (h + 2 pad - kh) / stride + 1 and out_w likewise (rlt_conv_out_dim). Stride and zero padding are
 * the same along both axes (the Atari and MinAtar networks need nothing else). */
typedef struct rlt_conv_shape {
    int32_t n, c, h, w; /* input: batch, channels, height, width */
    int32_t k, kh, kw;  /* filters: output channels, kernel height and width */
    int32_t stride, pad;
    /* Element type of x, y, w, dy and dx (ABI 4): RLT_LP_F32 (0), or RLT_LP_BF16 / RLT_LP_F16 for a
     * reduced-precision layer, whose products are summed in fp32 (tensor cores on CUDA) and rounded to the
     * type, then bias and activation applied in fp32 and rounded again (as linear_forward_lp). The bias, dw
     * and db stay fp32: dw is the 16-bit weight gradient widened and added. */
    int32_t dtype;
} rlt_conv_shape;

/* Output size along one axis, or 0 when the kernel does not fit (padding included). */
static inline int32_t rlt_conv_out_dim(int32_t in, int32_t kernel, int32_t stride, int32_t pad) {
    if (in < 1 || kernel < 1 || stride < 1 || pad < 0 || in + 2 * pad < kernel) return 0;
    return (in + 2 * pad - kernel) / stride + 1;
}

/* Adam hyper-parameters (Kingma and Ba 2015; PyTorch's defaults for beta and eps). */
typedef struct rlt_adam_hp {
    float lr, beta1, beta2, eps;
} rlt_adam_hp;

/* Element types of the reduced-precision ops (the values of rlt_dtype in include/rltrain.h). */
enum { RLT_LP_F32 = 0, RLT_LP_F16 = 3, RLT_LP_BF16 = 4 };
static inline uint32_t rlt_lp_size(int32_t dtype) { return dtype == RLT_LP_F32 ? 4u : 2u; }

/* Lanes an update may use at once (branch/join): lane 0 and up to three side lanes. */
#define RLT_BACKEND_MAX_LANES 4
/* Fields one gather_fields call moves. */
#define RLT_GATHER_MAX_FIELDS 8

/* One field of gather_fields: rows of row_bytes bytes from src (row j at src + j*row_bytes) to dst (row i at
 * dst + i*dst_stride bytes); via non-NULL: the source row is via[idx[i]] instead of idx[i].
 * src_dtype (ABI 5) says what the source row holds: RLT_LP_F32 (0, what a zero-initialised member gives) copies
 * the row's bytes as they are, whatever they hold (floats, ints, u8 frames); RLT_LP_F16 or RLT_LP_BF16 (a
 * compact replay field) widens each of the row's row_bytes / 2 elements to fp32, so the destination row is
 * 2 * row_bytes bytes of floats (dst_stride >= 2 * row_bytes). Widening is exact (base/lowp.h, the same
 * integer arithmetic on every backend), so CPU and GPU batches agree bit for bit. */
typedef struct rlt_gather_field {
    void *dst;
    uint64_t dst_stride;
    const void *src;
    uint64_t row_bytes;
    const int32_t *via;
    int32_t src_dtype;
} rlt_gather_field;

/* Bytes one gathered row of field f takes at its destination. */
static inline uint64_t rlt_gather_dst_bytes(const rlt_gather_field *f) {
    return f->src_dtype == RLT_LP_F16 || f->src_dtype == RLT_LP_BF16 ? 2 * f->row_bytes : f->row_bytes;
}

/* Replay sampling folded into gather_fields: the arguments of sample_indices, plus where the n rows sit in
 * the batch of `batch` rows whose draw they are (micro-batch m of size n: row0 = m n). */
typedef struct rlt_sample_spec {
    const int64_t *size;
    const uint8_t *valid;
    uint64_t seed;
    uint32_t stream;
    int32_t row0, batch;
    const int64_t *counter;
} rlt_sample_spec;

/* What adam_ex does besides the step: max_grad_norm > 0 clips g first (norm, a device float, receives the
 * norm before clipping); target non-NULL takes a Polyak step toward the updated parameters. */
typedef struct rlt_adam_extra {
    float max_grad_norm;
    float *norm;
    float *target;
    float tau;
    /* Reduced precision (ABI 4). lp_dtype RLT_LP_BF16 or RLT_LP_F16 with p_lp non-NULL: after the step,
     * p_lp[i] = p[i] rounded to lp_dtype (the compute copy), and target_lp[i] likewise from target[i] when
     * both are non-NULL. skip non-NULL (a device int): when *skip != 0 the op changes nothing at all (an
     * fp16 step whose gradients were not finite; see amp_unscale). */
    void *p_lp;
    void *target_lp;
    int32_t lp_dtype;
    const int32_t *skip;
} rlt_adam_extra;


/* Dynamic loss scaling state for fp16 (device memory; see amp_unscale and amp_update). */
typedef struct rlt_amp_state {
    float scale;        /* the loss scale S: loss gradients are multiplied by S before the backward pass */
    int32_t good_steps; /* updates with finite gradients since S last changed */
    int32_t found_inf;  /* set by amp_unscale when a gradient is not finite; cleared by amp_update */
    int32_t reserved_;
    int64_t skipped;    /* updates whose optimiser steps were skipped */
} rlt_amp_state;

/* What a plan's dense layers will ask of a backend, gathered while planning (plan_use_dense in engine/plan.h), so
 * that the backend can size its library workspaces and create its library handles from shapes alone, before the
 * arena is reserved (plan_workspace, ABI 7). Maxima and a flag over the planned layers: a backend's rule is of the
 * form "some layer is wider than a limit, or runs in 16 bits", which these answer exactly. Convolutions need no
 * entry: the backend knows the slots conv_prepare gave it. */
typedef struct rlt_op_use {
    int32_t dense_rows; /* most rows a dense layer runs forward and backward at (its activation set's batch) */
    int32_t dense_in;   /* widest dense-layer input */
    int32_t dense_out;  /* widest dense-layer output */
    int32_t dense_lp;   /* 1: some dense layer computes in bf16 or fp16 */
} rlt_op_use;

typedef struct rlt_backend rlt_backend;

typedef struct rlt_backend_ops {
    const char *name; /* "cpu", "cuda" */
    int32_t abi_version; /* RLT_BACKEND_ABI: the registry refuses a module built against another */

    /* ---- lifecycle and memory ---- */
    /* Opens device `device_index` (-1 for the backend's default); fills bk->device_name, device_total,
     * device_free and context_bytes (and memory_note). May allocate its private state (bk->impl): it runs
     * before the seal. */
    int (*open)(rlt_backend *bk, int32_t device_index, int32_t cpu_threads);
    void (*close)(rlt_backend *bk);
    /* Bytes of library workspace the backend's ops need inside the arena for any shape (the cuBLAS workspaces;
     * the CPU's dense-kernel panels): what a caller that runs ops without a plan reserves. An agent asks
     * plan_workspace instead, which sizes it from the plan's shapes. */
    uint64_t (*workspace_bytes)(rlt_backend *bk);
    /* Hands the backend its workspace inside the arena (called once after commit): workspace_bytes or
     * plan_workspace bytes, or NULL and 0 for none. */
    int (*set_workspace)(rlt_backend *bk, void *ptr, uint64_t bytes);
    /* The one device reservation and its release. Host arenas that need pinning come through
     * host_reserve (pinned on CUDA, page-aligned and touched on CPU). */
    int (*mem_reserve)(rlt_backend *bk, uint64_t bytes, void **base);
    void (*mem_release)(rlt_backend *bk, void *base);
    int (*host_reserve)(rlt_backend *bk, uint64_t bytes, void **base);
    void (*host_release)(rlt_backend *bk, void *base);
    /* Asynchronous copy on the stream (host side must be host_reserve memory for true asynchrony). */
    int (*copy)(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, int32_t kind);
    int (*sync)(rlt_backend *bk);
    /* Graph capture of a sequence of ops into slot (0..RLT_BACKEND_MAX_GRAPHS-1) and replay of it.
     * On CPU, capture is not supported (graph_supported returns 0) and callers run ops directly. */
    int (*graph_supported)(rlt_backend *bk);
    int (*graph_begin)(rlt_backend *bk, int32_t slot);
    int (*graph_end)(rlt_backend *bk, int32_t slot);
    int (*graph_launch)(rlt_backend *bk, int32_t slot);

    /* ---- dense ops ---- */
    /* C[m,n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X^T when tX != 0.
     * A is m x k (k x m when ta), B is k x n (n x k when tb). */
    int (*gemm)(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc);
    /* y[r, c] = act(y[r, c] + b[c]) for r < rows, c < cols (b may be NULL). */
    int (*bias_act)(rlt_backend *bk, float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols, int32_t act);
    /* dy[r, c] *= act'(.) expressed through the activation's output y: relu: y > 0; tanh: 1 - y^2. */
    int (*act_grad)(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows,
                    int32_t cols, int32_t act);
    /* db[c] = beta * db[c] + sum_r dy[r, c], summed in row order. */
    int (*bias_grad)(rlt_backend *bk, float *db, const float *dy, int32_t lddy, int32_t rows, int32_t cols, float beta);

    /* ---- flat ops over contiguous blocks (zero-grad, Adam, Polyak: one launch each) ---- */
    int (*fill)(rlt_backend *bk, float *x, uint64_t n, float value);
    int (*copy_f32)(rlt_backend *bk, float *dst, const float *src, uint64_t n);
    /* t = *step (already incremented, >= 1); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). (PyTorch's Adam, eps outside the sqrt.) */
    int (*adam)(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                const int64_t *step);
    /* target = tau * src + (1 - tau) * target. */
    int (*polyak)(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau);
    /* *c += v (device-side counters, one thread). */
    int (*counter_add)(rlt_backend *bk, int64_t *c, int64_t v);

    /* ---- replay ---- */
    /* idx[i] = rlt_replay_slot(seed, stream, *counter, i, n, *size, valid) (base/philox.h): uniform over
     * [0, *size), skipping slots whose valid byte is 0 (valid may be NULL); requires *size >= 1 and at least
     * one valid slot. The CUDA twin cannot check *size without a sync: it clamps instead. */
    int (*sample_indices)(rlt_backend *bk, int32_t *idx, int32_t n, const int64_t *size, const uint8_t *valid,
                          uint64_t seed, uint32_t stream, const int64_t *counter);
    /* dst row i (at dst + i*dst_stride bytes) = src row idx[i] (row_bytes bytes at src + idx[i]*row_bytes). */
    int (*gather_rows)(rlt_backend *bk, void *dst, uint64_t dst_stride, const void *src, uint64_t row_bytes,
                       const int32_t *idx, int32_t n);

    /* ---- losses and TD3 pieces ---- */
    /* dq[i] = grad_scale * 2 (q[i] - y[i]) / n; *loss (if non-NULL) = mean (q - y)^2, summed in order. */
    int (*mse_grad)(rlt_backend *bk, float *dq, float *loss, const float *q, const float *y, int32_t n,
                    float grad_scale);
    /* *out = scale * sum_i x[i * ldx], summed in order (losses for the log). */
    int (*sum)(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale);
    /* In place on a[r, c] (row stride lda): a = clamp(a + clamp(std * N(0,1), -clip, clip), -1, 1), the
     * normal drawn by Box-Muller from philox(seed, stream, *counter, (row0 + r) * cols + c). row0 is the
     * first row's index in the whole batch, so micro-batches draw what one full batch would. */
    int (*td3_target_action)(rlt_backend *bk, float *a, int32_t lda, int32_t rows, int32_t cols, float std,
                             float clip, uint64_t seed, uint32_t stream, const int64_t *counter, int32_t row0);
    /* y[i] = r[i] + gamma * (1 - term[i]) * min(q1[i * ldq], q2[i * ldq]). */
    int (*td3_target)(rlt_backend *bk, float *y, const float *r, const float *term, const float *q1,
                      const float *q2, int32_t ldq, int32_t n, float gamma);

    /* ---- DQN pieces ---- */
    /* dst[i * row + j] = scale * (float)src[idx[i] * row + j] for i < n, j < row: sampled u8 observations
     * (frames) gathered out of the replay ring and converted in one pass (scale = 1/255 for pixels). dst is
     * n x row and contiguous: an NCHW batch when row = c*h*w. idx NULL means row i itself (acting on a batch
     * of fresh observations). */
    int (*gather_u8_f32)(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx,
                         int32_t n, float scale);
    /* The (double) DQN target. a[i] = argmax_{j < n_act} sel[i * ldq + j], the lowest j among tied maxima,
     * where sel = q_online_next (double DQN, van Hasselt et al. 2016) or, when q_online_next is NULL,
     * sel = q_target_next (vanilla DQN, Mnih et al. 2015: the max of the target network). Then
     * y[i] = r[i] + gamma * (1 - term[i]) * q_target_next[i * ldq + a[i]]; a_next (may be NULL) receives
     * a[i]. gamma is the transition's discount (gamma^k for k-step returns). */
    int (*dqn_target)(rlt_backend *bk, float *y, int32_t *a_next, const float *r, const float *term,
                      const float *q_target_next, const float *q_online_next, int32_t ldq, int32_t n,
                      int32_t n_act, float gamma);
    /* TD loss on the taken actions: d_i = q[i * ldq + act[i]] - y[i] and
     * huber_delta > 0: l(d) = d^2 / 2 for |d| <= delta, delta (|d| - delta / 2) beyond (Huber; delta = 1
     *                  is PyTorch's smooth_l1_loss and the Nature DQN's error clipping);
     * huber_delta == 0: l(d) = d^2 (as mse_grad).
     * dq[i * lddq + j] = grad_scale * l'(d_i) / n for j == act[i] and 0 for the other j < n_act: full rows,
     * ready for the output layer's backward. *loss (if non-NULL) = mean_i l(d_i), summed in a fixed order.
     * An act[i] outside 0..n_act-1 is the caller's bug; the op cannot report it without a sync, so that
     * row gets a zero gradient and adds 0 to the loss (never an out-of-bounds read). */
    int (*q_loss_grad)(rlt_backend *bk, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                       const int32_t *act, const float *y, int32_t n, int32_t n_act, float huber_delta,
                       float grad_scale);
    /* Global L2 clipping of one flat gradient block (PyTorch's clip_grad_norm_): *norm = ||g||_2 summed in
     * a fixed order, then g *= min(1, max_norm / (*norm + 1e-6)). norm is a device float: the scaling reads
     * it on the device (no host sync, capturable) and it holds the norm before clipping, for the log. */
    int (*clip_grad_norm)(rlt_backend *bk, float *g, uint64_t n, float max_norm, float *norm);

    /* ---- 2-D convolution, NCHW fp32 (see rlt_conv_shape) ---- */
    /* Describes convolution slot `slot` (0..RLT_BACKEND_MAX_CONVS-1) at init, before the seal: it may
     * create library descriptors, choose algorithms and run each pass once on scratch memory so that no
     * kernel is loaded later. Preparing a slot again replaces it. *ws_bytes = the workspace the slot's
     * conv_forward and conv_backward need; the caller plans one workspace of the largest size over its
     * slots and hands it to every call (ops run in order on the one stream, so slots can share it). */
    int (*conv_prepare)(rlt_backend *bk, int32_t slot, const struct rlt_conv_shape *shape, uint64_t *ws_bytes);
    /* y = act(conv(x, w) + b) with the slot's shape: x [n, c, h, w], w [k, c, kh, kw], b [k] (NULL: no
     * bias), y [n, k, out_h, out_w]. act: NONE, RELU or TANH. ws: 256-byte aligned, at least the bytes
     * conv_prepare returned. */
    int (*conv_forward)(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                        int32_t act, void *ws, uint64_t ws_bytes);
    /* Backward of conv_forward through its output y. dy (in, and overwritten) is first multiplied by act'
     * expressed through y, as act_grad does; then dw += dL/dw, db += dL/db (db NULL: skipped; each channel
     * summed over n, out_h, out_w in a fixed order) and dx = dL/dx (overwritten; dx NULL: skipped, as for
     * the first layer, whose input needs no gradient). x, y, w, dy, dx are in the slot's dtype. */
    int (*conv_backward)(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                         const void *x, const void *w, int32_t act, void *ws, uint64_t ws_bytes);

    /* ---- concurrency inside one update (ABI 3) ----
     * An update is a chain of small dependent ops; where two chains are independent (the twin critics, the
     * online and target forwards) they can run side by side. On CUDA a lane is a stream, and a captured
     * graph turns lanes into parallel branches; on the CPU both ops are no-ops and ops run in call order.
     * branch(lane): the following ops run on `lane` (0 is the main lane, 1..RLT_BACKEND_MAX_LANES-1 side
     * lanes); a side lane first waits for everything issued on lane 0 so far. branch(0) returns to lane 0
     * without waiting. join: lane 0 waits for everything issued on the side lanes, and the following ops
     * run on lane 0. Between a branch and the next join, ops on different lanes must touch disjoint memory
     * (what one lane writes, no other lane reads or writes): the caller's promise, as for any two streams.
     * graph_end and sync join first. Lanes 0 and 1 are for the critical path, lanes 2 and 3 for work that can
     * wait: a backend may run them at a lower priority (CUDA does). An op may also fork inside itself (CUDA's
     * conv and wide-layer backward run their weight and bias gradients beside the input gradient on the other
     * lanes) and joins before it returns, so callers see it as one op on their lane. */
    int (*branch)(rlt_backend *bk, int32_t lane);
    int (*join)(rlt_backend *bk);

    /* ---- fused dense layers (ABI 3): one op per layer and pass, so an MLP layer is one graph node ---- */
    /* y[r, o] = act(sum_i x[r, i] W[o, i] + b[o]) for r < rows, o < fo, i < fi: gemm (W as stored, [fo, fi]
     * row-major, transposed) then bias_act, in one op. b may be NULL. */
    int (*linear_forward)(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx,
                          const float *W, const float *b, float *y, int32_t ldy, int32_t act);
    /* The backward of linear_forward given dy = dL/d(pre-activation output) [rows, fo] (read only):
     *   dW[o, i] = beta dW[o, i] + sum_r dy[r, o] x[r, i]   (dW NULL: skipped; W's layout, [fo, fi])
     *   db[o]    = beta db[o]    + sum_r dy[r, o]           (db NULL: skipped)
     *   dx[r, i] = act_x'(x[r, i]) * sum_o dy[r, o] W[o, i] (dx NULL: skipped; [rows, fi], row stride lddx)
     * where act_x is the activation that produced x, its derivative expressed through its output as in
     * act_grad (NONE for a network's input). So dx is already the previous layer's dL/d(pre-activation),
     * and a backward pass through an MLP is one op per layer. beta 0 overwrites (the old values are never
     * read). Sums over r and o run in a fixed order on every backend (deterministic), not necessarily the
     * CPU's order. */
    int (*linear_backward)(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy,
                           const float *x, int32_t ldx, int32_t act_x, const float *W, float *dW, float *db,
                           float beta, float *dx, int32_t lddx);

    /* ---- fused batch ops (ABI 3) ---- */
    /* Several gather_rows sharing one index list in one op: for each field f (n_fields <= RLT_GATHER_MAX_FIELDS)
     * and i < n, dst row i (at dst + i*dst_stride bytes) = src row j (row_bytes bytes at src + j*row_bytes),
     * j = idx[i], or j = via[idx[i]] when the field's via is non-NULL (one indirection: DQN's next slot);
     * a field with an fp16 or bf16 src_dtype is widened to fp32 on the way (see rlt_gather_field). A 16-bit
     * field with an odd row_bytes or source address, a destination or dst_stride that is not a multiple of 4, a
     * dst_stride below rlt_gather_dst_bytes, or another src_dtype is refused with RLT_EINVAL.
     * With sample non-NULL, idx is first drawn as sample_indices would draw rows row0 .. row0+n-1 of a
     * batch of sample->batch (and written to idx), in the same op. */
    int (*gather_fields)(rlt_backend *bk, int32_t *idx, int32_t n, const struct rlt_sample_spec *sample,
                         int32_t n_fields, const struct rlt_gather_field *fields);
    /* Both TD3 critic losses in one op: y[i] = r[i] + gamma (1 - term[i]) min(qt1[i], qt2[i]) (td3_target,
     * ldq 1), then mse_grad(dq1, loss1, q1, y, n, grad_scale) and mse_grad(dq2, loss2, q2, y, n, grad_scale).
     * loss1 and loss2 may be NULL. */
    int (*td3_critic_loss)(rlt_backend *bk, float *y, float *dq1, float *dq2, float *loss1, float *loss2,
                           const float *q1, const float *q2, const float *qt1, const float *qt2, const float *r,
                           const float *term, int32_t n, float gamma, float grad_scale);
    /* dqn_target then q_loss_grad in one op: y (n floats) receives the target; the other arguments are
     * those two ops' (q_next_target, q_next_online and ldqn are dqn_target's q_target_next,
     * q_online_next and ldq; a_next is not produced). */
    int (*dqn_loss)(rlt_backend *bk, float *y, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                    const int32_t *act, const float *r, const float *term, const float *q_next_target,
                    const float *q_next_online, int32_t ldqn, int32_t n, int32_t n_act, float gamma,
                    float huber_delta, float grad_scale);
    /* adam with its neighbours fused (see rlt_adam_extra): clip_grad_norm(g, n, max_grad_norm, norm) first
     * when max_grad_norm > 0, then adam, then polyak(target, p, n, tau) when target is non-NULL. Every
     * result (g clipped in place, *norm, p, m, v, target) is what that sequence of ops produces. */
    int (*adam_ex)(rlt_backend *bk, float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                   const int64_t *step, const struct rlt_adam_extra *extra);

    /* ---- reduced precision (ABI 4): bf16/fp16 compute copies with fp32 masters ----
     * dtypes are RLT_LP_F32, RLT_LP_BF16 or RLT_LP_F16; conversions to a 16-bit type round to nearest even
     * (fp16 overflow gives inf). */
    /* dst[r, c] = (dst_dtype)(src[r, c] * s), s = *scale (scale NULL: 1), r < rows, c < cols; row strides in
     * elements. */
    int (*cast)(rlt_backend *bk, int32_t rows, int64_t cols, void *dst, int32_t dst_dtype, int64_t ldd,
                const void *src, int32_t src_dtype, int64_t lds, const float *scale);
    /* linear_forward with x [rows, fi] and W [fo, fi] in dtype (BF16 or F16), b fp32 (may be NULL): the
     * products are summed in fp32 (tensor cores on CUDA), the sum rounded to y_dtype (dtype or F32), then
     * y = act(y + b) computed in fp32 and rounded to y_dtype again. */
    int (*linear_forward_lp)(rlt_backend *bk, int32_t dtype, int32_t rows, int32_t fi, int32_t fo, const void *x,
                             int32_t ldx, const void *W, const float *b, void *y, int32_t y_dtype, int32_t ldy,
                             int32_t act);
    /* linear_backward with dy, x and W in dtype; dW and db fp32 (sums in fp32; beta as there); dx in dx_dtype
     * (dtype or F32): the product dy W rounded to dx_dtype, then multiplied by act_x'(x) in fp32. */
    int (*linear_backward_lp)(rlt_backend *bk, int32_t dtype, int32_t rows, int32_t fi, int32_t fo, const void *dy,
                              int32_t lddy, const void *x, int32_t ldx, int32_t act_x, const void *W, float *dW,
                              float *db, float beta, void *dx, int32_t dx_dtype, int32_t lddx);
    /* Loss scaling, first half: g *= 1 / amp->scale over the flat block, and amp->found_inf = 1 when any
     * element of g is not finite (before or after). Nothing else changes; found_inf is only ever set here. */
    int (*amp_unscale)(rlt_backend *bk, float *g, uint64_t n, rlt_amp_state *amp);
    /* Second half, after each optimiser step that was given &amp->found_inf as its skip flag (adam_ex): when
     * found_inf, scale *= backoff, good_steps = 0, skipped += 1 and *step -= 1 (step non-NULL: the skipped
     * step does not count for Adam's bias correction); otherwise good_steps += 1, and when it reaches
     * growth_interval, scale *= growth and good_steps = 0. Then found_inf = 0. One thread, on the device: the
     * decision never costs a host round trip and is captured with the update. */
    int (*amp_update)(rlt_backend *bk, rlt_amp_state *amp, int64_t *step, float growth, float backoff,
                      int32_t growth_interval);

    /* ---- memory the plan does not hold (ABI 7); both may be NULL (the CPU: nothing to measure) ---- */
    /* The library workspace the plan's ops need, from their shapes (*use) and the prepared conv slots, into
     * *bytes: 0 when none of them calls a library that wants one. Creates the library handles those ops need and
     * no others (a cuBLAS handle costs tens of MiB of device memory), at plan time, so that nothing is created
     * later; then refreshes the figures measure_memory refreshes. NULL: workspace_bytes, whatever the shapes.
     * set_workspace is then given *bytes (or NULL and 0). */
    int (*plan_workspace)(rlt_backend *bk, const rlt_op_use *use, uint64_t *bytes);
    /* Measures what this process holds on the device now and refreshes bk->context_bytes (everything but the
     * reservations of mem_reserve), bk->handle_bytes and bk->memory_note, and, while nothing is reserved,
     * bk->device_free. No allocation, no sync of the streams. */
    int (*measure_memory)(rlt_backend *bk);
} rlt_backend_ops;

/* 2: the DQN and convolution ops; 3: lanes, fused layers, fused batch ops; 4: reduced precision;
 * 5: rlt_gather_field.src_dtype (compact replay: fp16/bf16 rows widened to fp32 by gather_fields);
 * 6: 16 conv slots (RLT_BACKEND_MAX_CONVS), for explicit network.conv lists of up to 8 layers;
 * 7: plan_workspace, measure_memory, rlt_backend.handle_bytes and memory_note (the process budget) */
#define RLT_BACKEND_ABI 7

struct rlt_backend {
    const rlt_backend_ops *ops;
    void *impl;     /* the backend's private state */
    rlt_err *err;   /* where ops record failures (the owning agent's error record) */
    int32_t device_is_host; /* 1 on CPU: "device" pointers are host pointers */
    int32_t device_index;
    char device_name[64];   /* "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)" */
    uint64_t device_total, device_free;
    /* Device memory this process holds besides the reservations of mem_reserve: the CUDA context, loaded
     * kernels, library handles (handle_bytes of it, measured as each was created); 0 on CPU. memory_note says
     * how it was measured and which handles exist, for the plan table. */
    uint64_t context_bytes, handle_bytes;
    char memory_note[160];
    void *module;   /* the dlopen handle of the backend's module (NULL for the built-in CPU backend); owned
                     * by the registry, which closes it in rlt_backend_close */
};

/* The CPU backend's table (always present). */
const rlt_backend_ops *rlt_cpu_backend_ops(void);
/* Entry point a CUDA module exports (resolved with dlsym by the registry). */
typedef const rlt_backend_ops *(*rlt_backend_entry_fn)(void);
#define RLT_CUDA_ENTRY_SYMBOL "rlt_cuda_backend_ops"

#endif
