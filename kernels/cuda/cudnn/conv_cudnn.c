/* conv_cudnn.c: the convolution ops on cuDNN (built when CMake finds cuDNN; kernels/cuda/no_cudnn/ holds
 * the stand-in otherwise). The CUDA twins of kernels/cpu/conv.c.
 *
 * fp32 slots run on our own im2col + GEMM kernels (conv_gemm.cu), 5-10x faster than cuDNN's fp32 algorithms
 * at RL batch sizes (bench/GPU_NOTES.md), and never create the cuDNN handle; 16-bit slots use cuDNN's
 * tensor-core kernels as below. RLT_CUDA_CONV=cudnn (read at prepare) puts fp32 slots on cuDNN too.
 *
 * Everything that allocates or decides happens in conv_prepare, at init: the cuDNN handle (created at the
 * first prepare, so dense-only agents never pay for cuDNN), the descriptors of the slot, the algorithms,
 * and one warm-up run of every pass on scratch memory, which makes cuDNN and the CUDA runtime load (or
 * compile) their kernels now rather than inside the sealed arena's lifetime or a graph capture, and proves
 * the chosen algorithms run on this GPU. conv_forward and conv_backward then only launch.
 *
 * Numerics and determinism. The convolution descriptors ask for CUDNN_FMA_MATH: plain fp32 arithmetic,
 * never TF32 (whose 10-bit mantissa would put the GPU ~1e-3 away from the CPU reference). Only
 * algorithms that compute the convolution as plain sums of products (the GEMM family) are used: their
 * error is bounded like a GEMM's, which is what the parity test checks, whereas FFT and Winograd
 * transforms add errors of their own. Backward data and backward filter use ALGO_1, which cuDNN documents
 * as deterministic (ALGO_0 and filter ALGO_3 accumulate with atomics), so a seed gives the same bits run
 * to run. Bias and activation are our kernels (conv_bias.cu), for the same reason.
 *
 * A 16-bit slot (shape dtype bf16/fp16) describes its tensors in that type with fp32 accumulation and lets
 * cuDNN use tensor-core math (CUDNN_TENSOR_OP_MATH); its algorithms come from cuDNN's heuristic ranking, the
 * first deterministic one within the workspace cap.
 *
 * Developer switch RLT_CUDNN_FIND=1 (read at prepare): instead of those fixed choices, time every
 * algorithm with cuDNN's Find calls at init and take the fastest that is deterministic and within the
 * workspace cap (=2 also prints the choices and their times); for measuring what the fixed choice costs.
 * RLT_CUDNN_TF32=1 additionally lets cuDNN use TF32 tensor cores (numerics change: parity tests assume
 * neither). */
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_ops.h"

/* Forward algorithms may use at most this much workspace: the plan reserves it once, so an algorithm a
 * few percent faster is not worth hundreds of MiB. */
#define CONV_MAX_WS_BYTES (256ull << 20)

#define CUDNN_CHECK(bk, call)                                                                          \
    do {                                                                                               \
        cudnnStatus_t cudnn_rc_ = (call);                                                              \
        if (cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                                         \
            return rlt_err_set((bk)->err, RLT_ERUNTIME, __FILE__, __LINE__, "%s failed: %s (%d)", #call, \
                               cudnnGetErrorString(cudnn_rc_), (int)cudnn_rc_);                        \
    } while (0)

typedef struct conv_slot {
    int32_t ready;
    int32_t gemm; /* an fp32 slot on our im2col + GEMM kernels (conv_gemm.cu): no cuDNN state */
    int32_t out_h, out_w;
    rlt_conv_shape s;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    uint64_t ws_bytes;
    /* A 16-bit slot: cuDNN's own workspace is the first dnn_ws_bytes; the 16-bit weight gradient follows at
     * dw_off (cuDNN writes dw in the tensors' type; it is then widened and added to the fp32 gradient). */
    uint64_t dnn_ws_bytes, dw_off;
} conv_slot;

typedef struct cuda_conv {
    cudnnHandle_t dnn;
    int32_t lane; /* the lane whose stream the handle is bound to now */
    conv_slot slot[RLT_BACKEND_MAX_CONVS];
} cuda_conv;

static cuda_conv *conv_get(rlt_backend *bk) { return (cuda_conv *)cuda_get(bk)->conv; }

void cuda_conv_close(rlt_backend *bk) {
    cuda_conv *cv = conv_get(bk);
    if (!cv) return;
    for (int32_t i = 0; i < RLT_BACKEND_MAX_CONVS; i++) {
        conv_slot *sl = &cv->slot[i];
        if (sl->x_desc) cudnnDestroyTensorDescriptor(sl->x_desc);
        if (sl->y_desc) cudnnDestroyTensorDescriptor(sl->y_desc);
        if (sl->w_desc) cudnnDestroyFilterDescriptor(sl->w_desc);
        if (sl->conv_desc) cudnnDestroyConvolutionDescriptor(sl->conv_desc);
    }
    if (cv->dnn) cudnnDestroy(cv->dnn);
    free(cv);
    cuda_get(bk)->conv = NULL;
}

/* The slots' state, created at the first prepare. The cuDNN handle (tens of MiB of device memory) comes
 * with the first slot that uses cuDNN, bound to lane 0's stream; conv_check_call rebinds it to the lane of
 * each call (as cuda_gemm does with the cuBLAS handle). Convolutions on two lanes at once never share
 * scratch memory: cuDNN's is the workspace each call passes, and each activation set of a network has its
 * own. */
static int conv_state(rlt_backend *bk, int need_dnn, cuda_conv **out) {
    cuda_impl *c = cuda_get(bk);
    if (!c->conv) {
        cuda_conv *cv = calloc(1, sizeof *cv);
        if (!cv) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for cuDNN state");
        c->conv = cv; /* from here cuda_conv_close owns it, whatever fails next */
    }
    cuda_conv *cv = c->conv;
    if (need_dnn && !cv->dnn) {
        cudnnStatus_t rc = cudnnCreate(&cv->dnn);
        if (rc != CUDNN_STATUS_SUCCESS) {
            cv->dnn = NULL; /* nothing half-made stays behind: the next prepare tries again */
            return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__,
                               "cudnnCreate failed: %s; this module was built against cuDNN %d.%d.%d (the library "
                               "loaded is %zu): check the cuDNN installation, or use device: cpu",
                               cudnnGetErrorString(rc), CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL,
                               cudnnGetVersion());
        }
        cv->lane = 0;
        CUDNN_CHECK(bk, cudnnSetStream(cv->dnn, c->streams[0]));
    }
    *out = cv;
    return RLT_OK;
}

static int conv_find_slot(rlt_backend *bk, int32_t slot, const char *op, conv_slot **out) {
    cuda_conv *cv = conv_get(bk);
    if (slot < 0 || slot >= RLT_BACKEND_MAX_CONVS)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: convolution slot %d is outside 0..%d", op,
                           (int)slot, RLT_BACKEND_MAX_CONVS - 1);
    if (!cv || !cv->slot[slot].ready)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "%s: convolution slot %d was not prepared", op,
                           (int)slot);
    *out = &cv->slot[slot];
    return RLT_OK;
}

/* The first forward algorithm of cuDNN's heuristic ranking that is of the GEMM family, deterministic and
 * within the workspace cap; implicit GEMM (no workspace, always supported) otherwise. */
static int conv_pick_forward(rlt_backend *bk, cudnnHandle_t dnn, conv_slot *sl) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    CUDNN_CHECK(bk, cudnnGetConvolutionForwardAlgorithm_v7(dnn, sl->x_desc, sl->w_desc, sl->conv_desc, sl->y_desc,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
    sl->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    for (int i = 0; i < got; i++) {
        cudnnConvolutionFwdAlgo_t a = perf[i].algo;
        int gemm_family = a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
                          a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
        int fp32_math = perf[i].mathType != CUDNN_TENSOR_OP_MATH && perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (perf[i].status == CUDNN_STATUS_SUCCESS && gemm_family && perf[i].determinism == CUDNN_DETERMINISTIC &&
            (fp32_math || sl->s.dtype != RLT_LP_F32) && perf[i].memory <= CONV_MAX_WS_BYTES) {
            sl->fwd = a;
            break;
        }
    }
    return RLT_OK;
}

/* A 16-bit slot's backward algorithms: the first deterministic ones of cuDNN's heuristic ranking. */
static int conv_pick_backward_lp(rlt_backend *bk, cudnnHandle_t dnn, conv_slot *sl) {
    int got = 0;
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(bk, cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, sl->w_desc, sl->y_desc, sl->conv_desc, sl->x_desc,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd));
    for (int i = 0; i < got; i++)
        if (pd[i].status == CUDNN_STATUS_SUCCESS && pd[i].determinism == CUDNN_DETERMINISTIC &&
            pd[i].memory <= CONV_MAX_WS_BYTES) {
            sl->bwd_data = pd[i].algo;
            break;
        }
    cudnnConvolutionBwdFilterAlgoPerf_t pg[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(bk, cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, sl->x_desc, sl->y_desc, sl->conv_desc, sl->w_desc,
                                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pg));
    for (int i = 0; i < got; i++)
        if (pg[i].status == CUDNN_STATUS_SUCCESS && pg[i].determinism == CUDNN_DETERMINISTIC &&
            pg[i].memory <= CONV_MAX_WS_BYTES) {
            sl->bwd_filter = pg[i].algo;
            break;
        }
    return RLT_OK;
}

/* RLT_CUDNN_FIND: the fastest deterministic algorithm of each pass, timed by cuDNN at init (its Find calls
 * allocate their own scratch; this runs before the seal). */
static int conv_find(rlt_backend *bk, cudnnHandle_t dnn, conv_slot *sl, int verbose) {
    const char *tf32 = getenv("RLT_CUDNN_TF32");
    if (tf32 && atoi(tf32) > 0) CUDNN_CHECK(bk, cudnnSetConvolutionMathType(sl->conv_desc, CUDNN_DEFAULT_MATH));
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_CHECK(bk, cudnnFindConvolutionForwardAlgorithm(dnn, sl->x_desc, sl->w_desc, sl->conv_desc, sl->y_desc,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf));
    for (int i = 0; i < got; i++)
        if (pf[i].status == CUDNN_STATUS_SUCCESS && pf[i].determinism == CUDNN_DETERMINISTIC &&
            pf[i].memory <= CONV_MAX_WS_BYTES) {
            sl->fwd = pf[i].algo;
            if (verbose) fprintf(stderr, "cudnn find: fwd algo %d %.1f us\n", (int)pf[i].algo, 1e3 * pf[i].time);
            break;
        }
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(bk, cudnnFindConvolutionBackwardDataAlgorithm(dnn, sl->w_desc, sl->y_desc, sl->conv_desc, sl->x_desc,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd));
    for (int i = 0; i < got; i++)
        if (pd[i].status == CUDNN_STATUS_SUCCESS && pd[i].determinism == CUDNN_DETERMINISTIC &&
            pd[i].memory <= CONV_MAX_WS_BYTES) {
            sl->bwd_data = pd[i].algo;
            if (verbose) fprintf(stderr, "cudnn find: bwd data algo %d %.1f us\n", (int)pd[i].algo, 1e3 * pd[i].time);
            break;
        }
    cudnnConvolutionBwdFilterAlgoPerf_t pg[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(bk, cudnnFindConvolutionBackwardFilterAlgorithm(dnn, sl->x_desc, sl->y_desc, sl->conv_desc, sl->w_desc,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pg));
    for (int i = 0; i < got; i++)
        if (pg[i].status == CUDNN_STATUS_SUCCESS && pg[i].determinism == CUDNN_DETERMINISTIC &&
            pg[i].memory <= CONV_MAX_WS_BYTES) {
            sl->bwd_filter = pg[i].algo;
            if (verbose) fprintf(stderr, "cudnn find: bwd filter algo %d %.1f us\n", (int)pg[i].algo, 1e3 * pg[i].time);
            break;
        }
    return RLT_OK;
}

/* Runs forward (with bias and ReLU) and the full backward once on zeroed scratch buffers, then frees them:
 * see the file comment. Called at init only (it allocates and synchronises). */
static int conv_warm_up(rlt_backend *bk, int32_t slot, conv_slot *sl) {
    const rlt_conv_shape *s = &sl->s;
    uint64_t nx = (uint64_t)s->n * s->c * s->h * s->w, nw = (uint64_t)s->k * s->c * s->kh * s->kw;
    uint64_t ny = (uint64_t)s->n * s->k * sl->out_h * sl->out_w;
    /* One block: x, dx, w, dw, y, dy, b, db, then the workspace, each 256-byte aligned. */
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
    if (rc == RLT_OK) rc = cuda_conv_forward(bk, slot, y, x, w, b, RLT_ACT_RELU, ws, sl->ws_bytes);
    if (rc == RLT_OK) rc = cuda_conv_backward(bk, slot, dx, dw, db, dy, y, x, w, RLT_ACT_RELU, ws, sl->ws_bytes);
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
    CUDA_REQUIRE(bk, shape != NULL && ws_bytes != NULL, "conv_prepare");
    CUDA_REQUIRE(bk, slot >= 0 && slot < RLT_BACKEND_MAX_CONVS, "conv_prepare");
    const rlt_conv_shape *s = shape;
    CUDA_REQUIRE(bk, s->n >= 1 && s->c >= 1 && s->h >= 1 && s->w >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, s->k >= 1 && s->kh >= 1 && s->kw >= 1 && s->stride >= 1 && s->pad >= 0, "conv_prepare");
    CUDA_REQUIRE(bk, rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad) >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad) >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, (uint64_t)s->n * s->c * s->h * s->w <= INT32_MAX && (uint64_t)s->k * s->h * s->w <= INT32_MAX,
                 "conv_prepare");
    if (c->capturing >= 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "conv_prepare during the capture of graph slot %d: prepare every convolution at init",
                           (int)c->capturing);
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    CUDA_REQUIRE(bk, s->dtype == RLT_LP_F32 || s->dtype == RLT_LP_BF16 || s->dtype == RLT_LP_F16, "conv_prepare");
    const char *mode = getenv("RLT_CUDA_CONV");
    int gemm = s->dtype == RLT_LP_F32 && !(mode && !strcmp(mode, "cudnn"));
    cuda_conv *cv = NULL;
    RLT_TRY(conv_state(bk, !gemm, &cv));
    conv_slot *sl = &cv->slot[slot];
    sl->ready = 0;
    sl->gemm = gemm;
    sl->s = *s;
    sl->out_h = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad);
    sl->out_w = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    if (gemm) {
        sl->ws_bytes = cuda_conv_gemm_ws_bytes(s);
        RLT_TRY(conv_warm_up(bk, slot, sl));
        *ws_bytes = sl->ws_bytes;
        return RLT_OK;
    }
    if (!sl->x_desc) CUDNN_CHECK(bk, cudnnCreateTensorDescriptor(&sl->x_desc));
    if (!sl->y_desc) CUDNN_CHECK(bk, cudnnCreateTensorDescriptor(&sl->y_desc));
    if (!sl->w_desc) CUDNN_CHECK(bk, cudnnCreateFilterDescriptor(&sl->w_desc));
    if (!sl->conv_desc) CUDNN_CHECK(bk, cudnnCreateConvolutionDescriptor(&sl->conv_desc));
    cudnnDataType_t dt = s->dtype == RLT_LP_BF16 ? CUDNN_DATA_BFLOAT16 : s->dtype == RLT_LP_F16 ? CUDNN_DATA_HALF
                                                                                                 : CUDNN_DATA_FLOAT;
    CUDNN_CHECK(bk, cudnnSetTensor4dDescriptor(sl->x_desc, CUDNN_TENSOR_NCHW, dt, s->n, s->c, s->h, s->w));
    CUDNN_CHECK(bk, cudnnSetFilter4dDescriptor(sl->w_desc, dt, CUDNN_TENSOR_NCHW, s->k, s->c, s->kh, s->kw));
    /* Sums in fp32 in every precision. */
    CUDNN_CHECK(bk, cudnnSetConvolution2dDescriptor(sl->conv_desc, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(bk, cudnnSetConvolutionMathType(sl->conv_desc, s->dtype == RLT_LP_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    int on = 0, ok = 0, oh = 0, ow = 0;
    CUDNN_CHECK(bk, cudnnGetConvolution2dForwardOutputDim(sl->conv_desc, sl->x_desc, sl->w_desc, &on, &ok, &oh, &ow));
    if (on != s->n || ok != s->k || oh != sl->out_h || ow != sl->out_w)
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                           "conv_prepare: cuDNN computes output %dx%dx%dx%d, the contract %dx%dx%dx%d", on, ok, oh, ow,
                           (int)s->n, (int)s->k, (int)sl->out_h, (int)sl->out_w);
    CUDNN_CHECK(bk, cudnnSetTensor4dDescriptor(sl->y_desc, CUDNN_TENSOR_NCHW, dt, s->n, s->k, oh, ow));

    RLT_TRY(conv_pick_forward(bk, cv->dnn, sl));
    sl->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    sl->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    const char *find = getenv("RLT_CUDNN_FIND");
    if (s->dtype != RLT_LP_F32) RLT_TRY(conv_pick_backward_lp(bk, cv->dnn, sl));
    if (find && atoi(find) > 0) RLT_TRY(conv_find(bk, cv->dnn, sl, atoi(find) > 1));
    size_t f = 0, d = 0, g = 0;
    CUDNN_CHECK(bk, cudnnGetConvolutionForwardWorkspaceSize(cv->dnn, sl->x_desc, sl->w_desc, sl->conv_desc, sl->y_desc,
                                                            sl->fwd, &f));
    CUDNN_CHECK(bk, cudnnGetConvolutionBackwardDataWorkspaceSize(cv->dnn, sl->w_desc, sl->y_desc, sl->conv_desc,
                                                                 sl->x_desc, sl->bwd_data, &d));
    CUDNN_CHECK(bk, cudnnGetConvolutionBackwardFilterWorkspaceSize(cv->dnn, sl->x_desc, sl->y_desc, sl->conv_desc,
                                                                   sl->w_desc, sl->bwd_filter, &g));
    uint64_t need = f > d ? f : d;
    if (g > need) need = g;
    sl->dnn_ws_bytes = (need + 255) & ~255ull;
    sl->dw_off = sl->dnn_ws_bytes;
    uint64_t nw = (uint64_t)s->k * s->c * s->kh * s->kw;
    sl->ws_bytes = sl->dnn_ws_bytes + (s->dtype != RLT_LP_F32 ? ((nw * 2 + 255) & ~255ull) : 0);
    RLT_TRY(conv_warm_up(bk, slot, sl));
    *ws_bytes = sl->ws_bytes;
    return RLT_OK;
}

static int conv_check_call(rlt_backend *bk, const conv_slot *sl, int32_t act, const void *ws, uint64_t ws_bytes,
                           const char *op) {
    if (act < RLT_ACT_NONE || act > RLT_ACT_TANH)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: unknown activation %d", op, (int)act);
    /* cudnnSetStream is a host-side setting, allowed during a capture: the kernels of this call go to the
     * current lane's stream. */
    cuda_impl *c = cuda_get(bk);
    cuda_conv *cv = conv_get(bk);
    if (!sl->gemm && cv->lane != c->lane) {
        CUDNN_CHECK(bk, cudnnSetStream(cv->dnn, c->streams[c->lane]));
        cv->lane = c->lane;
    }
    if (ws_bytes < sl->ws_bytes || (sl->ws_bytes && !ws) || ((uintptr_t)ws & 255u))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "%s: workspace of %llu bytes at %p, but conv_prepare asked for %llu, 256-byte aligned", op,
                           (unsigned long long)ws_bytes, ws, (unsigned long long)sl->ws_bytes);
    return RLT_OK;
}

int cuda_conv_forward(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                      int32_t act, void *ws, uint64_t ws_bytes) {
    conv_slot *sl = NULL;
    RLT_TRY(conv_find_slot(bk, slot, "conv_forward", &sl));
    RLT_TRY(conv_check_call(bk, sl, act, ws, ws_bytes, "conv_forward"));
    if (sl->gemm) return cuda_conv_gemm_forward(bk, &sl->s, y, x, w, b, act, ws, ws_bytes);
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(bk, cudnnConvolutionForward(conv_get(bk)->dnn, &one, sl->x_desc, x, sl->w_desc, w, sl->conv_desc, sl->fwd,
                                            ws, (size_t)sl->dnn_ws_bytes, &zero, sl->y_desc, y));
    return cuda_conv_bias_act(bk, y, sl->s.dtype, b, sl->s.n, sl->s.k, sl->out_h * sl->out_w, act);
}

int cuda_conv_backward(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                       const void *x, const void *w, int32_t act, void *ws, uint64_t ws_bytes) {
    conv_slot *sl = NULL;
    RLT_TRY(conv_find_slot(bk, slot, "conv_backward", &sl));
    RLT_TRY(conv_check_call(bk, sl, act, ws, ws_bytes, "conv_backward"));
    if (sl->gemm) return cuda_conv_gemm_backward(bk, &sl->s, dx, dw, db, dy, y, x, w, act, ws, ws_bytes);
    cudnnHandle_t dnn = conv_get(bk)->dnn;
    int32_t P = sl->out_h * sl->out_w, row = sl->s.k * P;
    /* dy becomes the gradient of the pre-activation output, in place (the contract's order). */
    int32_t dt = sl->s.dtype;
    if (dt == RLT_LP_F32) RLT_TRY(cuda_act_grad(bk, dy, row, y, row, sl->s.n, row, act));
    else RLT_TRY(cuda_lp_act_grad(bk, dy, dt, row, y, dt, row, sl->s.n, row, act));
    if (db) RLT_TRY(cuda_conv_bias_grad(bk, db, dy, dt, sl->s.n, sl->s.k, P));
    const float one = 1.0f, zero = 0.0f;
    size_t dnn_ws = (size_t)sl->dnn_ws_bytes;
    if (dt == RLT_LP_F32) {
        /* beta = 1: dw accumulates, as the contract says (zero-grad is one flat fill per update). */
        CUDNN_CHECK(bk, cudnnConvolutionBackwardFilter(dnn, &one, sl->x_desc, x, sl->y_desc, dy, sl->conv_desc,
                                                       sl->bwd_filter, ws, dnn_ws, &one, sl->w_desc, dw));
    } else {
        /* The 16-bit weight gradient lands beside cuDNN's workspace, then is added to the fp32 gradient. */
        void *dw_lp = (unsigned char *)ws + sl->dw_off;
        CUDNN_CHECK(bk, cudnnConvolutionBackwardFilter(dnn, &one, sl->x_desc, x, sl->y_desc, dy, sl->conv_desc,
                                                       sl->bwd_filter, ws, dnn_ws, &zero, sl->w_desc, dw_lp));
        RLT_TRY(cuda_lp_add(bk, dw, dw_lp, dt, (uint64_t)sl->s.k * sl->s.c * sl->s.kh * sl->s.kw));
    }
    if (dx)
        CUDNN_CHECK(bk, cudnnConvolutionBackwardData(dnn, &one, sl->w_desc, w, sl->y_desc, dy, sl->conv_desc,
                                                     sl->bwd_data, ws, dnn_ws, &zero, sl->x_desc, dx));
    return RLT_OK;
}
