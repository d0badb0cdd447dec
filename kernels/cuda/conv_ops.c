/* conv_ops.c: the CUDA backend's convolution ops (the twins of kernels/cpu/conv.c): the slot table, the checks,
 * the warm-up at prepare, and the choice of implementation per slot.
 *
 * fp32 slots run on our own GEMM-form kernels (conv_gemm.cu, conv_igemm.cu), in every build of the module:
 * 5-10x faster than cuDNN's fp32 algorithms at RL batch sizes (docs/gpu_kernels.md), and they need no cuDNN at
 * all. 16-bit slots (shape dtype bf16/fp16) use cuDNN's tensor-core kernels through kernels/cuda/cudnn/, or,
 * in a module built without cuDNN, fail at prepare with a message that says so (kernels/cuda/no_cudnn/).
 *
 * Everything that allocates or decides happens in conv_prepare, at init: the implementation's state, and one
 * warm-up run of every pass on scratch memory, which makes the CUDA runtime (and cuDNN) load their kernels now
 * rather than inside the sealed arena's lifetime or a graph capture, and proves the slot runs on this GPU.
 * conv_forward and conv_backward then only launch. */
#include <string.h>

#include "cuda_ops.h"

static int conv_find_slot(rlt_backend *bk, int32_t slot, const char *op, cuda_conv_slot **out) {
    if (slot < 0 || slot >= RLT_BACKEND_MAX_CONVS)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: convolution slot %d is outside 0..%d", op,
                           (int)slot, RLT_BACKEND_MAX_CONVS - 1);
    cuda_conv_slot *sl = &cuda_get(bk)->conv_slots[slot];
    if (!sl->ready)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "%s: convolution slot %d was not prepared", op,
                           (int)slot);
    *out = sl;
    return RLT_OK;
}

static int conv_check_call(rlt_backend *bk, const cuda_conv_slot *sl, int32_t act, const void *ws, uint64_t ws_bytes,
                           const char *op) {
    if (act < RLT_ACT_NONE || act > RLT_ACT_TANH)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: unknown activation %d", op, (int)act);
    if (ws_bytes < sl->ws_bytes || (sl->ws_bytes && !ws) || ((uintptr_t)ws & 255u))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "%s: workspace of %llu bytes at %p, but conv_prepare asked for %llu, 256-byte aligned", op,
                           (unsigned long long)ws_bytes, ws, (unsigned long long)sl->ws_bytes);
    return RLT_OK;
}

int cuda_conv_forward(rlt_backend *bk, const rlt_conv_fwd *d) {
    cuda_conv_slot *sl = NULL;
    RLT_TRY(cuda_aside_refuse(bk, "conv_forward"));
    RLT_TRY(conv_find_slot(bk, d->slot, "conv_forward", &sl));
    /* Batched over seeds: the fp32 slots (our implicit GEMMs, conv_gemm.cu) when RLT_CUDA_SEEDS_CONV=1 (cuda_impl's
     * seeds_conv); cuDNN's never. */
    if (!sl->gemm || !cuda_get(bk)->seeds_conv) RLT_TRY(cuda_seeds_refuse(bk, "conv_forward"));
    RLT_TRY(conv_check_call(bk, sl, d->act, d->ws, d->ws_bytes, "conv_forward"));
    if (sl->gemm) return cuda_conv_gemm_forward(bk, &sl->s, d->y, d->x, d->w, d->b, d->act, d->ws);
    return cuda_dnn_conv_forward(bk, d->slot, d->y, d->x, d->w, d->b, d->act, d->ws);
}

int cuda_conv_backward(rlt_backend *bk, const rlt_conv_bwd *d) {
    cuda_conv_slot *sl = NULL;
    RLT_TRY(conv_find_slot(bk, d->slot, "conv_backward", &sl));
    if (!sl->gemm || !cuda_get(bk)->seeds_conv) RLT_TRY(cuda_seeds_refuse(bk, "conv_backward"));
    RLT_TRY(conv_check_call(bk, sl, d->act, d->ws, d->ws_bytes, "conv_backward"));
    if (sl->gemm)
        return cuda_conv_gemm_backward(bk, &sl->s, d->dx, d->dw, d->db, d->dy, d->y, d->x, d->w, d->act, d->ws);
    return cuda_dnn_conv_backward(bk, d->slot, d->dx, d->dw, d->db, d->dy, d->y, d->x, d->w, d->act, d->ws);
}

/* Runs forward (with bias and ReLU) and the full backward once on zeroed scratch buffers, then frees them:
 * see the file comment. Called at init only (it allocates and synchronises). */
static int conv_warm_up(rlt_backend *bk, int32_t slot, cuda_conv_slot *sl) {
    const rlt_conv_shape *s = &sl->s;
    const int32_t oh = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad), ow = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    uint64_t nx = (uint64_t)s->n * s->c * s->h * s->w, nw = (uint64_t)s->k * s->c * s->kh * s->kw;
    uint64_t ny = (uint64_t)s->n * s->k * oh * ow;
    /* One block: x, dx, w, dw, y, dy, b, db, then the workspace, each 256-byte aligned (fp32 sizes: enough for
     * 16-bit tensors too). */
    uint64_t sizes[9] = {nx * 4, nx * 4, nw * 4, nw * 4, ny * 4, ny * 4, (uint64_t)s->k * 4, (uint64_t)s->k * 4,
                         sl->ws_bytes};
    uint64_t off[9], total = 0;
    for (int i = 0; i < 9; i++) {
        off[i] = total;
        total += (sizes[i] + 255) & ~255ull;
    }
    unsigned char *base = NULL;
    cudaError_t arc = cudaMalloc((void **)&base, total ? total : 256);
    if (arc != cudaSuccess) {
        cudaGetLastError();
        return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                           "conv_prepare: no device memory (%.1f MiB) to try slot %d's convolution once: %s",
                           total / 1048576.0, (int)slot, cudaGetErrorString(arc));
    }
    int rc = RLT_OK;
    cudaError_t mrc = cudaMemsetAsync(base, 0, total, cuda_stream(bk));
    if (mrc != cudaSuccess)
        rc = rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "cudaMemsetAsync failed: %s",
                         cudaGetErrorString(mrc));
    float *x = (float *)(base + off[0]), *dx = (float *)(base + off[1]), *w = (float *)(base + off[2]);
    float *dw = (float *)(base + off[3]), *y = (float *)(base + off[4]), *dy = (float *)(base + off[5]);
    float *b = (float *)(base + off[6]), *db = (float *)(base + off[7]);
    void *ws = sl->ws_bytes ? base + off[8] : NULL;
    sl->ready = 1; /* the ops below look the slot up */
    rlt_conv_fwd f = {.slot = slot, .y = y, .x = x, .w = w, .b = b, .act = RLT_ACT_RELU, .ws = ws,
                      .ws_bytes = sl->ws_bytes};
    rlt_conv_bwd g = {.slot = slot, .dx = dx, .dw = dw, .db = db, .dy = dy, .y = y, .x = x, .w = w, .act = RLT_ACT_RELU,
                      .ws = ws, .ws_bytes = sl->ws_bytes};
    if (rc == RLT_OK) rc = cuda_conv_forward(bk, &f);
    if (rc == RLT_OK) rc = cuda_conv_backward(bk, &g);
    if (rc == RLT_OK) {
        cudaError_t src = cudaStreamSynchronize(cuda_stream(bk));
        if (src != cudaSuccess)
            rc = rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                             "conv_prepare: slot %d's convolution failed on its trial run: %s", (int)slot,
                             cudaGetErrorString(src));
    }
    cudaFree(base); /* synchronises the device, so nothing still uses the block */
    if (rc != RLT_OK) sl->ready = 0;
    return rc;
}

int cuda_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes) {
    cuda_impl *c = cuda_get(bk);
    RLT_TRY(cuda_seeds_refuse(bk, "conv_prepare"));
    CUDA_REQUIRE(bk, shape != NULL && ws_bytes != NULL, "conv_prepare");
    CUDA_REQUIRE(bk, slot >= 0 && slot < RLT_BACKEND_MAX_CONVS, "conv_prepare");
    const rlt_conv_shape *s = shape;
    CUDA_REQUIRE(bk, s->n >= 1 && s->c >= 1 && s->h >= 1 && s->w >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, s->k >= 1 && s->kh >= 1 && s->kw >= 1 && s->stride >= 1 && s->pad >= 0, "conv_prepare");
    CUDA_REQUIRE(bk, rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad) >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad) >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, (uint64_t)s->n * s->c * s->h * s->w <= INT32_MAX && (uint64_t)s->k * s->h * s->w <= INT32_MAX,
                 "conv_prepare");
    CUDA_REQUIRE(bk, s->dtype == RLT_LP_F32 || s->dtype == RLT_LP_BF16 || s->dtype == RLT_LP_F16, "conv_prepare");
    if (c->capturing >= 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "conv_prepare during the capture of graph slot %d: prepare every convolution at init",
                           (int)c->capturing);
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    cuda_conv_slot *sl = &c->conv_slots[slot];
    memset(sl, 0, sizeof *sl);
    sl->gemm = cuda_rule_conv_calls_blas(s->dtype); /* the plan's rule (cuda_plan_rules.h) */
    sl->s = *s;
    if (sl->gemm) {
        RLT_TRY(cuda_conv_gemm_prepare(bk, s, &sl->ws_bytes));
        /* The input gradient is a cuBLAS GEMM (conv_gemm.cu), and the trial run below computes one. */
        RLT_TRY(cuda_blas_ensure(bk));
    } else {
        /* The first cuDNN slot creates cuDNN's handle: its cost is a library handle's (measure_memory). */
        int first = c->conv == NULL;
        uint64_t before = 0, after = 0;
        if (first) RLT_TRY(cuda_procmem_now(bk, &before));
        RLT_TRY(cuda_dnn_conv_prepare(bk, slot, s, &sl->ws_bytes));
        if (first && c->conv) {
            RLT_TRY(cuda_procmem_now(bk, &after));
            c->handle_bytes += after > before ? after - before : 0;
        }
    }
    RLT_TRY(conv_warm_up(bk, slot, sl));
    *ws_bytes = sl->ws_bytes;
    return RLT_OK;
}

void cuda_conv_close(rlt_backend *bk) {
    cuda_dnn_conv_close(bk);
    memset(cuda_get(bk)->conv_slots, 0, sizeof cuda_get(bk)->conv_slots);
}
