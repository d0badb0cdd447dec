/* backend.h: the compute backend interface. A backend is a small table of function pointers (ggml's
 * idea); the agents in agents/ are written once against it. The CPU backend (kernels/cpu/) is always
 * present and is the readable reference; the CUDA backend (kernels/cuda/) is a separate shared module
 * loaded at run time by the registry (engine/backend_registry.c), so a binary without a GPU, driver or
 * CUDA libraries still starts.
 *
 * Rules every op follows:
 * - Matrices are row-major. Pointers point into the backend's own memory ("device" memory; on the CPU
 *   backend that is host memory). Ops are asynchronous on the backend's current lane (one stream unless
 *   an update uses the lane op); ops on one lane run in order.
 * - Ops return RLT_OK or a negative status after writing a message to bk->err. They check shapes
 *   (negative sizes, leading dimensions smaller than rows) and fail with RLT_EINVAL.
 * - Ops never allocate. Values that change from one update to the next (Adam's step, RNG counters, the
 *   replay size) are read from device memory, never baked in as arguments, so a captured graph replays
 *   correctly. Constant hyper-parameters (lr, gamma, tau, noise) are plain values, or device values where a
 *   descriptor has a `*_dev` pointer for them (an agent's hparams block): a graph captured for several agents at
 *   once (seed_batch) then reads each agent's own. A `*_dev` pointer left NULL means the plain value; set, its
 *   float is read when the op runs and used exactly as the plain value would be (the same arithmetic, so the same
 *   bits).
 * - Ops with many operands take one descriptor struct (rlt_linear_fwd, rlt_adam_step, ...), read during the
 *   call only: a captured graph keeps the values, not the struct.
 * - Reductions are deterministic (fixed order, no atomics), so a seed gives the same result run to run.
 * - Random numbers come from Philox4x32-10 (base/philox.h) keyed by (seed, stream) with the counter
 *   (*counter, element index): the CPU and CUDA backends draw identical integers.
 */
#ifndef RLT_BACKEND_H
#define RLT_BACKEND_H

#include <stdint.h>
#include "adam.h"
#include "comm.h"
#include "err.h"

typedef enum rlt_act { RLT_ACT_NONE = 0, RLT_ACT_RELU = 1, RLT_ACT_TANH = 2 } rlt_act;
typedef enum rlt_copy_kind { RLT_COPY_H2D = 0, RLT_COPY_D2H = 1, RLT_COPY_D2D = 2 } rlt_copy_kind;
/* Element types of the ops' tensors: fp32, or a 16-bit compute type (the values of rlt_dtype in
 * include/rltrain.h). RLT_LP_F32 is 0, so a zero-initialised descriptor field means fp32. RLT_LP_U8 is a
 * source type of cast only (a dict observation's uint8 part, converted to fp32 on its way into a network). */
typedef enum rlt_lp { RLT_LP_F32 = 0, RLT_LP_U8 = 1, RLT_LP_F16 = 3, RLT_LP_BF16 = 4 } rlt_lp;
static inline uint32_t rlt_lp_size(rlt_lp dtype) { return dtype == RLT_LP_F32 ? 4u : 2u; }

#define RLT_BACKEND_MAX_GRAPHS 8
/* What one call of the graph op does (see rlt_backend_ops.graph). */
typedef enum rlt_graph_mode {
    RLT_GRAPH_SUPPORTED = 0,
    RLT_GRAPH_BEGIN = 1,
    RLT_GRAPH_END = 2,
    RLT_GRAPH_LAUNCH = 3,
    RLT_GRAPH_ASIDE_MARK = 4,
    RLT_GRAPH_ASIDE_BEGIN = 5,
    RLT_GRAPH_ASIDE_END = 6,
    RLT_GRAPH_ASIDE_LAUNCH = 7
} rlt_graph_mode;
/* What one call of the flat op computes (see rlt_backend_ops.flat). */
typedef enum rlt_flat_mode { RLT_FLAT_FILL = 0, RLT_FLAT_COPY = 1, RLT_FLAT_POLYAK = 2 } rlt_flat_mode;
/* Convolution layers a backend can hold prepared at once (conv_prepare's slots): DQN's training and acting
 * networks each take one per layer of network.conv (at most RLT_QNET_MAX_CONV, 8). */
#define RLT_BACKEND_MAX_CONVS 16
/* Lanes an update may use at once (the lane op's branches): lane 0 and up to three side lanes. */
#define RLT_BACKEND_MAX_LANES 4
/* The lane op's argument that joins the side lanes back into lane 0 (see rlt_backend_ops.lane). */
#define RLT_LANE_JOIN (-1)
/* Fields one gather_fields call moves. */
#define RLT_GATHER_MAX_FIELDS 8

/* ---- descriptors: what the ops with many operands take, one struct each ----
 * Callers fill them with designated initialisers; a member left out is 0 or NULL, which every descriptor
 * reads as "fp32", "none" or "skipped" as its comments say. */

/* One 2-D convolution layer in NCHW layout, cross-correlation as every deep-learning framework computes
 * it: input x [n, c, h, w], filters w [k, c, kh, kw] (OIHW), bias [k], output y [n, k, out_h, out_w] with
 * out_h = (h + 2 pad - kh) / stride + 1 and out_w likewise (rlt_conv_out_dim). Stride and zero padding are
 * the same along both axes (the Atari and MinAtar networks need nothing else). */
typedef struct rlt_conv_shape {
    int32_t n, c, h, w; /* input: batch, channels, height, width */
    int32_t k, kh, kw;  /* filters: output channels, kernel height and width */
    int32_t stride, pad;
    /* Element type of x, y, w, dy and dx: RLT_LP_F32, or RLT_LP_BF16 / RLT_LP_F16 for a reduced-precision
     * layer, whose products are summed in fp32 (tensor cores on CUDA) and rounded to the type, then bias and
     * activation applied in fp32 and rounded again (as a 16-bit linear_forward). The bias, dw and db stay
     * fp32: dw is the 16-bit weight gradient widened and added. */
    rlt_lp dtype;
} rlt_conv_shape;

/* Output size along one axis, or 0 when the kernel does not fit (padding included). */
static inline int32_t rlt_conv_out_dim(int32_t in, int32_t kernel, int32_t stride, int32_t pad) {
    if (in < 1 || kernel < 1 || stride < 1 || pad < 0 || in + 2 * pad < kernel) return 0;
    return (in + 2 * pad - kernel) / stride + 1;
}

/* conv_forward: y = act(conv(x, w) + b) with the prepared slot's shape (see conv_forward). */
typedef struct rlt_conv_fwd {
    int32_t slot;
    void *y;          /* [n, k, out_h, out_w], the slot's dtype */
    const void *x;    /* [n, c, h, w] */
    const void *w;    /* [k, c, kh, kw] */
    const float *b;   /* [k], fp32; NULL: no bias */
    rlt_act act;
    void *ws;         /* workspace: 256-byte aligned, at least what conv_prepare returned */
    uint64_t ws_bytes;
} rlt_conv_fwd;

/* conv_backward: the backward of conv_forward through its output y (see conv_backward). */
typedef struct rlt_conv_bwd {
    int32_t slot;
    void *dx;         /* dL/dx (overwritten); NULL: skipped (the first layer) */
    float *dw, *db;   /* accumulated (+=), fp32; db NULL: skipped */
    void *dy;         /* dL/dy in, and overwritten with dL/d(pre-activation) */
    const void *y, *x, *w;
    rlt_act act;
    void *ws;
    uint64_t ws_bytes;
} rlt_conv_bwd;

#define RLT_CHAIN_MAX_LAYERS 9 /* linear_chain_forward's most layers: an MLP's (agents/mlp.h) */

/* linear_forward: one dense layer, y[r, o] = act(sum_i x[r, i] W[o, i] + b[o]) for r < rows, o < fo, i < fi. */
typedef struct rlt_linear_fwd {
    int32_t rows, fi, fo;
    /* Type of x and W: RLT_LP_F32, or RLT_LP_BF16 / RLT_LP_F16 (the products summed in fp32, tensor cores on
     * CUDA, then act(sum + b) computed in fp32 and rounded to y_dtype: the CPU twin rounds the sum to y_dtype
     * first and so rounds twice; CUDA rounds once where cuBLASLt's epilogue adds the bias, twice where a pass
     * does, so the two agree within two roundings). */
    rlt_lp dtype;
    const void *x;    /* [rows, fi], row stride ldx */
    int32_t ldx;
    const void *W;    /* [fo, fi] row-major (as stored, used transposed) */
    const float *b;   /* [fo], fp32; NULL: no bias */
    void *y;          /* [rows, fo], row stride ldy */
    int32_t ldy;
    rlt_lp y_dtype;   /* RLT_LP_F32 (the only choice for an fp32 layer), or dtype */
    rlt_act act;
} rlt_linear_fwd;

/* linear_chain_forward's contract on its layers: 1 .. RLT_CHAIN_MAX_LAYERS of them, each after the first reading the
 * previous one's output (x equal to its y, the same row stride, fi its fo, dtype its y_dtype). */
static inline int rlt_chain_ok(const rlt_linear_fwd *layers, int32_t n) {
    if (n < 1 || n > RLT_CHAIN_MAX_LAYERS) return 0;
    for (int32_t l = 1; l < n; l++)
        if (layers[l].x != layers[l - 1].y || layers[l].ldx != layers[l - 1].ldy || layers[l].fi != layers[l - 1].fo ||
            layers[l].dtype != layers[l - 1].y_dtype)
            return 0;
    return 1;
}

/* linear_backward: the backward of linear_forward given dy = dL/d(pre-activation output) [rows, fo], read only:
 *   dW[o, i] = beta dW[o, i] + sum_r dy[r, o] x[r, i]   (dW NULL: skipped; W's layout, [fo, fi])
 *   db[o]    = beta db[o]    + sum_r dy[r, o]           (db NULL: skipped)
 *   dx[r, i] = act_x'(x[r, i]) * sum_o dy[r, o] W[o, i] (dx NULL: skipped; [rows, fi], row stride lddx)
 * where act_x is the activation that produced x, its derivative expressed through its output as in act_grad
 * (NONE for a network's input). */
typedef struct rlt_linear_bwd {
    int32_t rows, fi, fo;
    rlt_lp dtype;     /* type of dy, x and W (as linear_forward's dtype) */
    const void *dy;
    int32_t lddy;
    const void *x;
    int32_t ldx;
    rlt_act act_x;
    const void *W;
    float *dW, *db;   /* fp32, sums in fp32 */
    float beta;       /* 0 overwrites (the old values are never read) */
    void *dx;
    int32_t lddx;
    /* RLT_LP_F32 (the only choice for an fp32 layer), or dtype: the product dy W rounded to it, then multiplied
     * by act_x'(x) in fp32. */
    rlt_lp dx_dtype;
} rlt_linear_bwd;

/* One field of gather_fields: rows of row_bytes bytes from src (row j at src + j*row_bytes) to dst (row i at
 * dst + i*dst_stride bytes); via non-NULL: the source row is via[idx[i]] instead of idx[i].
 * src_dtype says what the source row holds: RLT_LP_F32 (0, what a zero-initialised member gives) copies the
 * row's bytes as they are, whatever they hold (floats, ints, u8 frames); RLT_LP_F16 or RLT_LP_BF16 (a compact
 * replay field) widens each of the row's row_bytes / 2 elements to fp32, so the destination row is
 * 2 * row_bytes bytes of floats (dst_stride >= 2 * row_bytes). Widening is exact (base/lowp.h, the same
 * integer arithmetic on every backend), so CPU and GPU batches agree bit for bit. */
typedef struct rlt_gather_field {
    void *dst;
    uint64_t dst_stride;
    const void *src;
    uint64_t row_bytes;
    const int32_t *via;
    rlt_lp src_dtype;
} rlt_gather_field;

/* Bytes one gathered row of field f takes at its destination. */
static inline uint64_t rlt_gather_dst_bytes(const rlt_gather_field *f) {
    return f->src_dtype == RLT_LP_F16 || f->src_dtype == RLT_LP_BF16 ? 2 * f->row_bytes : f->row_bytes;
}

/* Replay sampling (gather_fields' sample; with no field, the draw alone): n rows are drawn, rows row0 .. row0+n-1 of
 * the draw of a batch of `batch` rows (micro-batch m of size n: row0 = m n; a whole batch: row0 0, batch n).
 * Row i's index is rlt_replay_slot(seed, stream, *counter, row0 + i, batch, *size, valid) (base/philox.h):
 * uniform over [0, *size), skipping slots whose valid byte is 0 (valid may be NULL); requires *size >= 1 and
 * at least one valid slot. size and counter are device values (read when the op runs). */
typedef struct rlt_sample_spec {
    const int64_t *size;
    const uint8_t *valid;
    uint64_t seed;
    uint32_t stream;
    int32_t row0, batch;
    const int64_t *counter;
} rlt_sample_spec;

/* td3_target_action: target policy smoothing in place on a[r, c] (row stride lda), r < rows, c < cols:
 * a = clamp(a + clamp(std * N(0,1), -clip, clip), -1, 1), the normal drawn by Box-Muller from
 * philox(seed, stream, *counter, (row0 + r) * cols + c). row0 is the first row's index in the whole batch, so
 * micro-batches draw what one full batch would. */
typedef struct rlt_target_noise {
    float *a;
    int32_t lda, rows, cols;
    float std, clip;
    uint64_t seed;
    uint32_t stream;
    const int64_t *counter;
    int32_t row0;
    const float *std_dev, *clip_dev; /* device values replacing std and clip (NULL: the plain ones) */
} rlt_target_noise;

/* td3_critic_loss: both TD3 critic losses. y[i] = r[i] + gamma (1 - term[i]) min(qt1[i], qt2[i]) (the clipped
 * double-Q target, Fujimoto et al. 2018), then for k = 1, 2: dqk[i] = grad_scale * 2 (qk[i] - y[i]) / n and
 * *lossk = mean (qk - y)^2, summed in a fixed order (loss1 and loss2 may be NULL). */
typedef struct rlt_td3_loss {
    float *y, *dq1, *dq2, *loss1, *loss2;
    const float *q1, *q2, *qt1, *qt2, *r, *term;
    int32_t n;
    float gamma, grad_scale;
    const float *gamma_dev; /* a device value replacing gamma (NULL: the plain one) */
    /* hidden > 0: the twin critics' output layers folded in, one op on the update's critical path where the heads'
     * forwards, the loss and the heads' input gradients were three links. For j over Q1, Q2 (the online critics) and
     * Q1', Q2' (their targets), each a ReLU hidden layer h[j] [n, hidden] (row stride hidden) under a 1-wide output
     * layer (w[j] [hidden], b[j] [1]):
     *   q_out[j][i] = sum_c h[j][i, c] w[j][c] + b[j]        (linear_forward's output layer, its bits)
     *   y, dq1, dq2 from q_out as above (q1 .. qt2 are not read; loss1 and loss2 must be NULL: this mode writes no
     *                                                          losses; the plain op afterwards, on a side lane, reading
     *                                                          q_out, gives them and the same y and gradients)
     *   dh[k][i, c] = relu'(h[k][i, c]) dq_k[i] w[k][c]     (k = Q1, Q2: linear_backward's dx of the output layer, its
     *                                                          bits; its weight and bias gradients are left to it)
     * The hidden layers' backward then starts from dh. */
    int32_t hidden;
    const float *h[4], *w[4], *b[4];
    float *q_out[4], *dh[2];
} rlt_td3_loss;

/* dqn_loss: the (double) DQN target and the TD loss on the taken actions. a[i] = argmax_{j < n_act}
 * sel[i * ldqn + j], the lowest j among tied maxima, where sel = q_next_online (double DQN, van Hasselt et al.
 * 2016) or, when that is NULL, q_next_target (vanilla DQN, Mnih et al. 2015: the max of the target network);
 * y[i] = r[i] + gamma (1 - term[i]) q_next_target[i * ldqn + a[i]] (gamma: the transition's discount).
 * Then d_i = q[i * ldq + act[i]] - y[i] and
 *   huber_delta > 0: l(d) = d^2 / 2 for |d| <= delta, delta (|d| - delta / 2) beyond (Huber; delta = 1 is
 *                    PyTorch's smooth_l1_loss and the Nature DQN's error clipping);
 *   huber_delta == 0: l(d) = d^2.
 * dq[i * lddq + j] = grad_scale * l'(d_i) / n for j == act[i] and 0 for the other j < n_act: full rows, ready
 * for the output layer's backward. *loss (if non-NULL) = mean_i l(d_i), summed in a fixed order. An act[i]
 * outside 0..n_act-1 is the caller's bug; the op cannot report it without a sync, so that row gets a zero
 * gradient and adds 0 to the loss (never an out-of-bounds read). */
typedef struct rlt_q_loss {
    float *y;                                  /* [n]: receives the target */
    float *dq;
    int32_t lddq;
    float *loss;
    const float *q;                            /* Q(s, .) of the online network, row stride ldq */
    int32_t ldq;
    const int32_t *act;
    const float *r, *term;
    const float *q_next_target, *q_next_online; /* Q'(s', .) and Q(s', .), row stride ldqn */
    int32_t ldqn;
    int32_t n, n_act;
    float gamma, huber_delta, grad_scale;
    const float *gamma_dev; /* a device value replacing gamma (NULL: the plain one) */
} rlt_q_loss;

/* adam: one optimiser step over a flat block of n parameters, with its neighbours fused.
 * t = *step (already incremented, >= 1); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) (PyTorch's Adam, eps outside the sqrt). Before it,
 * max_grad_norm > 0 clips g in place as PyTorch's clip_grad_norm_ does: *norm (a device float, needed then)
 * = ||g||_2 summed in a fixed order, then g *= min(1, max_grad_norm / (*norm + 1e-6)). After it, target
 * non-NULL takes a Polyak step toward the new p: target = tau p + (1 - tau) target. Reduced precision: with
 * p_lp non-NULL, p_lp[i] = p[i] rounded to lp_dtype (the compute copy), and target_lp[i] likewise from
 * target[i] when both are non-NULL. skip non-NULL (a device int): when *skip != 0 the op changes nothing at all
 * (an fp16 step whose gradients were not finite; see rlt_amp_op). */
typedef struct rlt_adam_step {
    float *p, *g, *m, *v;
    uint64_t n;
    rlt_adam_hp hp;
    const int64_t *step;
    float max_grad_norm; /* 0: no clipping */
    float *norm;
    float *target;       /* NULL: no Polyak step */
    float tau;
    void *p_lp, *target_lp;
    rlt_lp lp_dtype;     /* RLT_LP_BF16 or RLT_LP_F16 when p_lp is set */
    const int32_t *skip;
    /* Device values replacing hp.lr, tau and max_grad_norm (NULL: the plain ones). Clipping stays switched by the
     * plain max_grad_norm > 0 (then max_grad_norm_dev, if set, gives the threshold, which must be > 0 too); tau and
     * the threshold are checked on their plain values only (the device ones cannot be read without a sync). */
    const float *lr_dev, *tau_dev, *max_grad_norm_dev;
} rlt_adam_step;

/* cast: dst[r, c] = (dst_dtype)(src[r, c] * s), s = *scale (scale NULL: 1), r < rows, c < cols; row strides in
 * elements. Conversions to a 16-bit type round to nearest even (fp16 overflow gives inf). src_dtype may also be
 * RLT_LP_U8 (bytes widened exactly to float, then scaled); dst_dtype may not. fp32 to fp32 is a strided copy
 * (a dict network's concatenation and its split). */
typedef struct rlt_cast {
    int32_t rows;
    int64_t cols;
    void *dst;
    rlt_lp dst_dtype;
    int64_t ldd;
    const void *src;
    rlt_lp src_dtype;
    int64_t lds;
    const float *scale;
} rlt_cast;

/* Dynamic loss scaling state for fp16 (device memory; see rlt_amp_op). */
typedef struct rlt_amp_state {
    float scale;        /* the loss scale S: loss gradients are multiplied by S before the backward pass */
    int32_t good_steps; /* updates with finite gradients since S last changed */
    int32_t found_inf;  /* set by amp's UNSCALE when a gradient is not finite; cleared by its UPDATE */
    int32_t reserved_;
    int64_t skipped;    /* updates whose optimiser steps were skipped */
} rlt_amp_state;

/* amp: fp16 dynamic loss scaling on the state *amp (device memory, non-NULL), in two halves around the optimiser
 * steps of one update:
 *   RLT_AMP_UNSCALE (first half): g[i] *= 1 / amp->scale for i < n over the flat block, and amp->found_inf = 1
 *     when any element of g is not finite (before or after). Nothing else changes; found_inf is only ever set
 *     here. step, growth, backoff and growth_interval are not read.
 *   RLT_AMP_UPDATE (second half, after each optimiser step that was given &amp->found_inf as its skip flag,
 *     adam): when found_inf, scale *= backoff, good_steps = 0, skipped += 1 and *step -= 1 (step non-NULL: the
 *     skipped step does not count for Adam's bias correction); otherwise good_steps += 1, and when it reaches
 *     growth_interval (>= 1), scale *= growth and good_steps = 0. Then found_inf = 0. One thread, on the
 *     device: the decision never costs a host round trip and is captured with the update. g and n are not read.
 * Another mode is refused with RLT_EINVAL. */
typedef enum rlt_amp_mode { RLT_AMP_UNSCALE = 0, RLT_AMP_UPDATE = 1 } rlt_amp_mode;
typedef struct rlt_amp_op {
    rlt_amp_mode mode;
    rlt_amp_state *amp;
    float *g;                /* UNSCALE: the gradients, n floats */
    uint64_t n;
    int64_t *step;           /* UPDATE: the optimiser's step counter (device), or NULL */
    float growth, backoff;   /* UPDATE */
    int32_t growth_interval; /* UPDATE */
} rlt_amp_op;

/* seed_batch: n agents of identical plans (a seed group's members on one GPU) batched into every op issued while it
 * is on. Agent k's device buffers are this backend's agent's moved by delta[k] bytes, and where an op takes the
 * config seed it uses seed[k] (delta and seed: n entries each in this agent's device arena, written by the
 * caller; delta_host: the caller's host copy of delta, which library products need to build their pointer
 * arrays without reading the device). With host_delta non-NULL (n entries in the device arena too), a copy
 * between this agent's host arena [host_base, host_base + host_bytes) and its device arena runs batched as
 * well: agent k's host side is moved by host_delta[k] bytes (its own host arena; backends whose kernels can
 * reach pinned host memory, CUDA through unified addressing). exact 1: every op must give each agent the bits
 * a single agent's op gives (CUDA: no batched library product; acting, whose results must be the single run's);
 * 0: batched library products may sum in the library's order (the update graphs, docs/seeds.md). */
typedef struct rlt_seeds_desc {
    int32_t n;
    int32_t exact;
    const int64_t *delta;
    const uint64_t *seed;
    const int64_t *delta_host;
    const int64_t *host_delta;
    const void *host_base;
    uint64_t host_bytes;
} rlt_seeds_desc;

/* A seed's transition store held for its group's next batched round (rlt_backend_ops.copy_lists): host-to-device
 * copies, each from the agent's pinned host arena (its replay staging) into its device arena, in the order they were
 * asked. It lies in the agent's own host arena, at the same offset in every agent of a batched group, so a kernel
 * finds agent k's list at the lead's moved by host_delta[k]. n: the entries held (0: nothing pending). */
#define RLT_COPY_LIST_MAX 24
typedef struct rlt_copy_entry {
    uint64_t dst;   /* device address */
    uint64_t src;   /* pinned host address */
    uint64_t bytes;
} rlt_copy_entry;
typedef struct rlt_copy_list {
    int64_t n;
    rlt_copy_entry e[RLT_COPY_LIST_MAX];
} rlt_copy_list;

/* What a plan's dense layers will ask of a backend, gathered while planning (plan_use_dense in engine/plan.h), so
 * that the backend can size its library workspaces and create its library handles from shapes alone, before the
 * arena is reserved (plan_workspace). Maxima and a flag over the planned layers: a backend's rule is of the
 * form "some layer is wider than a limit, or runs in 16 bits", which these answer exactly. Convolutions need no
 * entry: the backend knows the slots conv_prepare gave it. */
typedef struct rlt_op_use {
    int32_t dense_rows; /* most rows a dense layer runs forward and backward at (its activation set's batch) */
    int32_t dense_in;   /* widest dense-layer input */
    int32_t dense_out;  /* widest dense-layer output */
    int32_t dense_lp;   /* 1: some dense layer computes in bf16 or fp16 */
    /* 1: precision: tf32. The fp32 dense products a backend hands to a library (CUDA: those beyond its own kernels,
     * chosen by shape) may sum on TF32 tensor cores (10-bit mantissa inputs, fp32 sums); every other op stays
     * fp32. A backend without TF32 ignores it. */
    int32_t dense_tf32;
} rlt_op_use;

typedef struct rlt_backend rlt_backend;

/* The table. Only what the engine and the agents call is here; the readable references the tests compare
 * against (plain GEMM, the unfused losses and Adam) are functions of the CPU backend (kernels/cpu/cpu_ops.h). */
/* comm_init's descriptor (a data-parallel run's device communicators). */
typedef enum { RLT_COMM_INIT_RANKS = 0, RLT_COMM_INIT_ID = 1 } rlt_comm_init_mode;
#define RLT_COMM_ID_BYTES 128
typedef struct rlt_comm_init_desc {
    rlt_comm_init_mode mode;
    int32_t world;             /* ranks of the whole run */
    int32_t first_rank, n;     /* the ranks made here, on devices[0..n) */
    const int32_t *devices;
    double timeout_s;          /* dist.timeout_s: for the set-up, then for each wait on a collective */
    uint8_t id[RLT_COMM_ID_BYTES]; /* the run's id: RLT_COMM_INIT_ID's output; RLT_COMM_INIT_RANKS' input when
                                    * world > n (processes), made inside otherwise */
    char note[256];            /* out: what the backend set in the process environment, for the log ("" if nothing) */
} rlt_comm_init_desc;

typedef struct rlt_backend_ops {
    const char *name; /* "cpu", "cuda" */
    int32_t abi_version; /* RLT_BACKEND_ABI: the registry refuses a module built against another */

    /* ---- lifecycle and memory ---- */
    /* Opens device `device_index` (-1 for the backend's default); fills bk->device_name, device_total,
     * device_free and context_bytes (and memory_note). May allocate its private state (bk->impl): it runs
     * before the seal. */
    int (*open)(rlt_backend *bk, int32_t device_index, int32_t cpu_threads);
    void (*close)(rlt_backend *bk);
    /* The library workspace inside the arena (the cuBLAS workspaces; the CPU's dense-kernel panels).
     * need non-NULL asks: *need = the bytes the backend's ops need for any shape, what a caller that runs ops
     * without a plan reserves (an agent asks plan_workspace instead, which sizes it from the plan's shapes); ptr
     * and bytes are not read and nothing changes. need NULL hands the backend its workspace (called once after
     * commit): ptr and bytes are what the query or plan_workspace gave, or NULL and 0 for none; CUDA refuses
     * with RLT_EINVAL a ptr that is not 256-byte aligned, or a non-NULL ptr with bytes below the query's answer.
     * rlt_backend_workspace_need below is the query as a value. */
    int (*workspace)(rlt_backend *bk, void *ptr, uint64_t bytes, uint64_t *need);
    /* The arenas: *base = a zeroed block of `bytes` bytes at loc. RLT_LOC_DEVICE: the one device reservation
     * (cudaMalloc on CUDA; host memory on the CPU, as for RLT_LOC_HOST). RLT_LOC_HOST: a host arena that is real,
     * not a promise (pinned on CUDA, so copies from it are truly asynchronous; page-aligned and touched on the
     * CPU). Memory that cannot be had is RLT_ENOFIT, with *base NULL; another loc is refused with RLT_EINVAL. */
    int (*reserve)(rlt_backend *bk, rlt_location loc, uint64_t bytes, void **base);
    /* Releases a block reserve(loc) returned (base NULL: nothing); loc must be the one it was reserved at. */
    void (*release)(rlt_backend *bk, rlt_location loc, void *base);
    /* Asynchronous copy on the stream (host side must be reserve(RLT_LOC_HOST) memory for true asynchrony). */
    int (*copy)(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, rlt_copy_kind kind);
    int (*sync)(rlt_backend *bk);
    /* Graph capture of a sequence of ops into slot (0..RLT_BACKEND_MAX_GRAPHS-1) and replay of it, by mode
     * (rlt_graph_mode): SUPPORTED returns 1 when the backend captures graphs and 0 when it does not (slot
     * ignored); BEGIN starts capturing the ops issued from now on into slot (joining the side lanes first);
     * END ends that capture (joining first) and instantiates it, replacing what slot held; LAUNCH replays slot on
     * lane 0. BEGIN, END and LAUNCH return RLT_OK or a negative status. On CPU, capture is not supported
     * (SUPPORTED returns 0, the other modes fail with RLT_ESTATE) and callers run ops directly.
     * The ASIDE modes run acting beside an update (the aside stream). A policy forward that reads nothing an update
     * in flight writes (TD3's actor while a critic-only update runs) may run beside that update instead of after
     * it, with the same bits. ASIDE_MARK remembers the point reached on lane 0 now (everything issued there so
     * far). ASIDE_BEGIN: the ops issued from now on run on the aside stream, after that point and nothing issued on
     * lane 0 since; an op that would use state lane 0's work shares (a library handle or workspace, the reduction
     * scratch, a convolution slot, a side lane) refuses with RLT_ESTATE and issues nothing. ASIDE_END: waits for
     * the aside stream's work (not lane 0's), and ops issue on lane 0 again (always call it after ASIDE_BEGIN, even
     * after a failed op). ASIDE_LAUNCH: replays graph slot on the aside stream after the mark and waits for it,
     * without changing where ops issue (a seed group's acting graph, launched by whichever member's thread ends the
     * round). The caller's promise: what the aside work reads, nothing issued on lane 0 after the mark writes, and
     * what it writes, nothing there reads or writes. RLT_ESTATE where the backend has no aside stream (the CPU, one
     * lane), during a capture and in a data-parallel rank. */
    int (*graph)(rlt_backend *bk, rlt_graph_mode mode, int32_t slot);

    /* ---- flat ops over contiguous blocks (zero-grad, target copy, Polyak: one launch each) ---- */
    /* One pass over dst[0..n), by mode (rlt_flat_mode):
     *   RLT_FLAT_FILL:   dst[i] = scalar (src ignored; 0 and -0 both write +0: the zero-grad);
     *   RLT_FLAT_COPY:   dst[i] = src[i] (scalar ignored; the hard target copy);
     *   RLT_FLAT_POLYAK: dst[i] = scalar * src[i] + (1 - scalar) * dst[i] in fp32, evaluated as written (the CUDA
     *                    module is built without FMA contraction), so the CPU and CUDA write the same bits
     *                    (Polyak averaging with tau = scalar, which must lie in [0, 1], else RLT_EINVAL).
     * n 0 writes nothing. */
    int (*flat)(rlt_backend *bk, rlt_flat_mode mode, float *dst, const float *src, uint64_t n, float scalar);
    /* *c += v (device-side counters, one thread). */
    int (*counter_add)(rlt_backend *bk, int64_t *c, int64_t v);
    /* One optimiser step (see rlt_adam_step): gradient clipping, Adam, the Polyak target update, the 16-bit
     * copies and the fp16 skip in one pass over the block. Every result (g clipped in place, *norm, p, m, v,
     * target) is what clipping, then Adam, then Polyak compute one after the other. */
    int (*adam)(rlt_backend *bk, const rlt_adam_step *d);

    /* ---- dense layers: one op per layer and pass, so an MLP layer is one graph node ---- */
    /* See rlt_linear_fwd; fp32 or 16-bit by d->dtype. */
    int (*linear_forward)(rlt_backend *bk, const rlt_linear_fwd *d);
    /* n (1 .. RLT_CHAIN_MAX_LAYERS) layers in a row, each reading the previous one's output (layers[i].x equal to
     * layers[i - 1].y with the same row stride): every y, bit for bit, what linear_forward on each in order writes
     * on the same backend. A backend may run them as one launch (CUDA, while 8 or more seeds are batched: fp32
     * networks at most 128 wide, one graph node instead of n); otherwise it runs them one by one. */
    int (*linear_chain_forward)(rlt_backend *bk, const rlt_linear_fwd *layers, int32_t n);
    /* See rlt_linear_bwd. dx is already the previous layer's dL/d(pre-activation), so a backward pass through
     * an MLP is one op per layer. Sums over r and o run in a fixed order on every backend (deterministic), not
     * necessarily the CPU's order. */
    int (*linear_backward)(rlt_backend *bk, const rlt_linear_bwd *d);
    /* dy[r, c] *= act'(.) expressed through the activation's output y: relu: y > 0; tanh: 1 - y^2 (a network's
     * output activation, which no layer above applies). */
    int (*act_grad)(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows,
                    int32_t cols, rlt_act act);

    /* ---- 2-D convolution, NCHW (see rlt_conv_shape) ---- */
    /* Describes convolution slot `slot` (0..RLT_BACKEND_MAX_CONVS-1) at init, before the seal: it may
     * create library descriptors, choose algorithms and run each pass once on scratch memory so that no
     * kernel is loaded later. Preparing a slot again replaces it. *ws_bytes = the workspace the slot's
     * conv_forward and conv_backward need; the caller plans one workspace of the largest size over its
     * slots and hands it to every call (ops run in order on the one stream, so slots can share it). */
    int (*conv_prepare)(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes);
    /* y = act(conv(x, w) + b) with the slot's shape (see rlt_conv_fwd); act NONE, RELU or TANH. */
    int (*conv_forward)(rlt_backend *bk, const rlt_conv_fwd *d);
    /* Backward of conv_forward through its output y (see rlt_conv_bwd). dy is first multiplied by act'
     * expressed through y, as act_grad does; then dw += dL/dw, db += dL/db (each channel summed over n, out_h,
     * out_w in a fixed order) and dx = dL/dx. x, y, w, dy, dx are in the slot's dtype. */
    int (*conv_backward)(rlt_backend *bk, const rlt_conv_bwd *d);

    /* ---- replay ---- */
    /* Several fields sharing one index list in one op: for each field f (n_fields <= RLT_GATHER_MAX_FIELDS)
     * and i < n, dst row i (at dst + i*dst_stride bytes) = src row j (row_bytes bytes at src + j*row_bytes),
     * j = idx[i], or j = via[idx[i]] when the field's via is non-NULL (one indirection: DQN's next slot);
     * a field with an fp16 or bf16 src_dtype is widened to fp32 on the way (see rlt_gather_field). A 16-bit
     * field with an odd row_bytes or source address, a destination or dst_stride that is not a multiple of 4, a
     * dst_stride below rlt_gather_dst_bytes, or another src_dtype is refused with RLT_EINVAL.
     * With sample non-NULL, idx is first drawn and written, in the same op: idx[i] for i < n is row row0 + i of the
     * draw that *sample describes (rlt_sample_spec); with n_fields 0 that draw is all the op does (the indices
     * alone). The CPU refuses a *size below 1 with RLT_EINVAL; the CUDA twin cannot check *size without a sync,
     * so it clamps instead (a size below 1 draws index 0). */
    int (*gather_fields)(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample,
                         int32_t n_fields, const rlt_gather_field *fields);
    /* dst[i * row + j] = scale * (float)src[idx[i] * row + j] for i < n, j < row: sampled u8 observations
     * (frames) gathered out of the replay ring and converted in one pass (scale = 1/255 for pixels). dst is
     * n x row and contiguous: an NCHW batch when row = c*h*w. idx NULL means row i itself (acting on a batch
     * of fresh observations). */
    int (*gather_u8_f32)(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx,
                         int32_t n, float scale);

    /* ---- losses ---- */
    /* *out = scale * sum_i x[i * ldx], summed in order (losses for the log). */
    int (*sum)(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale);
    /* TD3's target policy smoothing (see rlt_target_noise). */
    int (*td3_target_action)(rlt_backend *bk, const rlt_target_noise *d);
    /* Both TD3 critic losses and gradients in one op (see rlt_td3_loss). */
    int (*td3_critic_loss)(rlt_backend *bk, const rlt_td3_loss *d);
    /* The DQN target and TD loss in one op (see rlt_q_loss). */
    int (*dqn_loss)(rlt_backend *bk, const rlt_q_loss *d);

    /* ---- concurrency inside one update ----
     * An update is a chain of small dependent ops; where two chains are independent (the twin critics, the
     * online and target forwards) they can run side by side. On CUDA a lane is a stream, and a captured
     * graph turns lanes into parallel branches; on the CPU with one thread ops run in call order (the lane is
     * only recorded), and with its worker (cpu.threads >= 2) side lanes' ops run on the worker (kernels/cpu/lanes.c).
     * lane(lane), lane 0..RLT_BACKEND_MAX_LANES-1 (a branch): the following ops run on `lane` (0 is the main lane,
     * 1..RLT_BACKEND_MAX_LANES-1 side lanes); a side lane first waits for everything issued on lane 0 so far.
     * lane(0) returns to lane 0 without waiting. lane(RLT_LANE_JOIN) (a join): lane 0 waits for everything issued
     * on the side lanes, and the following ops run on lane 0. Any other value is refused with RLT_EINVAL.
     * Between a branch and the next join, ops on different lanes must touch disjoint memory (what one lane
     * writes, no other lane reads or writes): the caller's promise, as for any two streams. graph (END) and sync
     * join first. Lanes 0 and 1 are for the critical path, lanes 2 and 3 for work that can wait: a backend may
     * run them at a lower priority (CUDA does). An op may also fork inside itself (CUDA's conv and wide-layer
     * backward run their weight and bias gradients beside the input gradient on the other lanes) and joins
     * before it returns, so callers see it as one op on their lane. adam with clipping runs on lane 0 only
     * (CUDA's reduction scratch is lane 0's). */
    int (*lane)(rlt_backend *bk, int32_t lane);

    /* ---- reduced precision: bf16/fp16 compute copies with fp32 masters ---- */
    /* See rlt_cast; dtypes RLT_LP_F32, RLT_LP_BF16 or RLT_LP_F16. */
    int (*cast)(rlt_backend *bk, const rlt_cast *d);
    /* fp16 dynamic loss scaling, one half per call by d->mode (see rlt_amp_op). */
    int (*amp)(rlt_backend *bk, const rlt_amp_op *d);

    /* ---- memory the plan does not hold; both may be NULL (the CPU: nothing to measure) ---- */
    /* The library workspace the plan's ops need, from their shapes (*use) and the prepared conv slots, into
     * *bytes: 0 when none of them calls a library that wants one. Creates the library handles those ops need and
     * no others (a cuBLAS handle costs tens of MiB of device memory), at plan time, so that nothing is created
     * later; then refreshes the figures measure_memory refreshes. NULL: the workspace op's query, whatever the
     * shapes. The workspace op is then given *bytes (or NULL and 0). */
    int (*plan_workspace)(rlt_backend *bk, const rlt_op_use *use, uint64_t *bytes);
    /* Measures what this process holds on the device now and refreshes bk->context_bytes (everything but the
     * device reservations of reserve), bk->handle_bytes and bk->memory_note, and bk->device_free (the device's free
     * memory now, also during training; the plan keeps its figure from before the reservation). No allocation, no
     * sync of the streams. */
    int (*measure_memory)(rlt_backend *bk);

    /* ---- data-parallel groups: R ranks, one backend each, one agent's replicas (base/comm.h) ---- */
    /* Makes the device communicators of d->n ranks (d->first_rank .. of d->world) on device indices d->devices[]
     * into comms[0..n), from one thread, before the ranks' backends plan anything (CUDA: NCCL, whose buffers are
     * then part of each device's context), or with d->mode RLT_COMM_INIT_ID only the run's id (rank 0's process,
     * handed to the others before they call with it). Waits at most d->timeout_s for the other ranks, then
     * aborts and fails naming what it waited for. NULL where the backend has none: the CPU reduces through the
     * host comm. */
    int (*comm_init)(rlt_comm_init_desc *d, void **comms, rlt_err *e);
    /* Releases one of them (NULL where comm_init is). */
    void (*comm_destroy)(void *comm);
    /* Aborts one of them, from any thread: collectives waiting on it return (NULL where comm_init is). */
    void (*comm_abort)(void *comm);
    /* Makes this backend rank `rank` of the n_ranks of host comm c, its device communicator device_comm
     * (rlt_comm_device(c, rank): comm_init's, or NULL on the CPU): from then on allreduce_mean averages across the
     * ranks. Called once after open, before any capture. */
    int (*comm_attach)(rlt_backend *bk, rlt_comm *c, void *device_comm, int32_t rank, int32_t n_ranks);
    /* x[0..n) = the mean of x over the ranks (each rank the same n, the same bits on every rank), captured like
     * any op. With no comm attached, or one of a single rank, it does nothing. async 0: on the current lane.
     * async 1 (a bucket of a gradient still being computed, see engine/agent_core.h): on the backend's comm lane,
     * after everything issued on the current lane so far; the current lane goes on at once, and the next join
     * (lane(RLT_LANE_JOIN), graph END, sync) waits for it, so until then no lane may touch x. The comm lane runs
     * its averages one at a time in call order (one communicator, the same order on every rank). A backend
     * without a comm lane (the CPU) runs async ones like the others, in call order. */
    int (*allreduce_mean)(rlt_backend *bk, float *x, uint64_t n, int32_t async);

    /* ---- seed batching (seed groups on one GPU); NULL where not supported (the CPU) ---- */
    /* d->n > 1: every op issued from now on runs for d->n agents whose plans are identical to this backend's agent's,
     * in one launch (see rlt_seeds_desc). d NULL or d->n <= 1: back to one agent; after an exact batch
     * (d->exact) this call returns RLT_ESTATE when an op issued during it could not give each agent a single
     * agent's bits. Meant around a capture: an op that cannot run batched (a convolution, a 16-bit cast, a copy
     * other than rlt_seeds_desc's, or in exact mode a dense product on the library, whose batched
     * sums differ from a single agent's) or that names memory outside the arenas returns RLT_ESTATE naming itself, and the caller keeps
     * one graph per agent. */
    int (*seed_batch)(rlt_backend *bk, const rlt_seeds_desc *d);
    /* The hand-over around a batched launch, so that each agent's stream orders its own work without the launching
     * thread touching it: seed_mark (in the agent's thread, before the launch) marks the work the agent issued so
     * far; graph_launch_seeds launches graph slot of bk (captured batched over the n agents of members, members[0]
     * == bk) after every other member's mark; seed_follow (in the agent's thread, after it) orders the agent's
     * later work after the latest batched launch of lead. */
    int (*seed_mark)(rlt_backend *bk);
    int (*graph_launch_seeds)(rlt_backend *bk, int32_t slot, rlt_backend *const *members, int32_t n);
    int (*seed_follow)(rlt_backend *bk, rlt_backend *lead);
    /* Runs n agents' held copies in one launch on bk's stream: agent k's list lies at lead_list moved by the device
     * array host_delta[k] (rlt_copy_list). The lists and their sources are read when the launch runs: the caller
     * keeps them unchanged until bk's stream has passed it. */
    int (*copy_lists)(rlt_backend *bk, const rlt_copy_list *lead_list, const int64_t *host_delta, int32_t n);

} rlt_backend_ops;

/* The version of this interface, bumped whenever this table or a struct it uses changes: librltrain and
 * librltrain_cuda.so are built together, and the registry refuses a module built against another. */
#define RLT_BACKEND_ABI 20


/* The seed group's arena span (rlt_backend.span): owned by the caller, zeroed but for n, shared by the n backends of
 * the group's agents on one GPU; the backends fill and use the rest. */
typedef struct rlt_arena_span {
    int32_t n;         /* slots: the group's agents on this GPU */
    int32_t users;     /* slots mapped now (the backends', atomically) */
    uint64_t va;       /* the reserved address range of n slots (0: none yet) */
    uint64_t stride;   /* bytes between slots: agent 0's arena rounded up to the mapping granularity */
    /* The arenas' first parts (rlt_backend.arena_hot, rounded up to the granularity) mapped a second time, packed:
     * agent z's at hot_va + z * hot_stride. hot_users: the slots mapped there now; the batched products read their
     * operands there only while every slot mapped is (cuda_seed_batch). 0 when not mapped. */
    uint64_t hot_va, hot_stride;
    int32_t hot_users, reserved_;
    char why[120];     /* why an arena was not mapped at its slot (the first reason), "" otherwise */
} rlt_arena_span;

struct rlt_backend {
    const rlt_backend_ops *ops;
    void *impl;     /* the backend's private state */
    rlt_err *err;   /* where ops record failures (the owning agent's error record) */
    int32_t device_is_host; /* 1 on CPU: "device" pointers are host pointers */
    int32_t device_index;
    char device_name[64];   /* "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)" */
    uint64_t device_total, device_free;
    /* Device memory this process holds besides the device reservations of reserve: the CUDA context, loaded
     * kernels, library handles (handle_bytes of it, measured as each was created); 0 on CPU. memory_note says
     * how it was measured and which handles exist, for the plan table. */
    uint64_t context_bytes, handle_bytes;
    char memory_note[160];
    /* Set by the caller before the open, kept by it: the most lanes (the lane op) ops may use; 0 is the backend's
     * own choice. 1 runs every op of an update in order on one stream: what several trainers sharing one GPU want
     * (a seed group), since their updates overlap each other instead, and each stream costs the device one of its
     * hardware queues (CUDA_DEVICE_MAX_CONNECTIONS). The schedule changes, never the results. */
    int32_t lanes;
    /* Set by the caller before the open, kept by it: the most agents a seed_batch of this backend may cover (the
     * seed group's agents on this device); 0 or 1: no batching. */
    int32_t seeds;
    /* Set by the caller before the open, kept by it (NULL: none): the seed group's arena span. A backend that can
     * place its device arena (CUDA, through virtual memory mapping) puts it at span->va + span_slot * span->stride,
     * so every agent's buffer X lies slot * stride bytes from agent 0's and batched library products can address
     * the seeds at one stride (strided batches, a bias at a batch stride: kernels/cuda/gemm_lt.c). Agent 0 (slot 0)
     * reserves first and fixes the stride; a later arena larger than the stride, or a device without virtual memory
     * management, is reserved as usual (the seeds are then batched over pointer arrays). Others ignore it. */
    rlt_arena_span *span;
    int32_t span_slot;
    int32_t reserved_slot_;
    /* Set by plan_commit before the device reservation: the bytes at the device arena's start that precede the replay
     * and the workspaces (rlt_plan.arena_hot). A backend in a span maps them a second time at the span's hot slot. */
    uint64_t arena_hot;
    void *module;   /* the dlopen handle of the backend's module (NULL for the built-in CPU backend); owned
                     * by the registry, which closes it in rlt_backend_close */
};

/* The workspace op's query: the bytes of library workspace the backend's ops need for any shape. */
static inline uint64_t rlt_backend_workspace_need(rlt_backend *bk) {
    uint64_t need = 0;
    return bk->ops->workspace(bk, NULL, 0, &need) == RLT_OK ? need : 0;
}

/* The CPU backend's table (always present). */
const rlt_backend_ops *rlt_cpu_backend_ops(void);
/* Entry point a CUDA module exports (resolved with dlsym by the registry). */
typedef const rlt_backend_ops *(*rlt_backend_entry_fn)(void);
#define RLT_CUDA_ENTRY_SYMBOL "rlt_cuda_backend_ops"

#endif
