/* conv_cudnn.c: the cuDNN side of the convolution ops (built when CMake finds cuDNN; kernels/cuda/no_cudnn/
 * holds the stand-in otherwise): the slots that kernels/cuda/conv_ops.c does not run on our own fp32 kernels,
 * that is the 16-bit ones (shape dtype bf16/fp16).
 *
 * Everything that allocates or decides happens in prepare, at init: the cuDNN handle (created at the first
 * slot that needs it, so fp32 and dense-only agents never pay for cuDNN), the descriptors of the slot and the
 * algorithms; conv_ops.c then warms the slot up once. Forward and backward only launch.
 *
 * Numerics and determinism. A slot describes its tensors in its 16-bit type with fp32 accumulation and lets
 * cuDNN use tensor-core math (CUDNN_TENSOR_OP_MATH). Its algorithms come from cuDNN's heuristic ranking: the
 * first deterministic one of each pass within the workspace cap (for the forward, of the GEMM family: plain
 * sums of products, whose error is bounded like a GEMM's, whereas FFT and Winograd transforms add errors of
 * their own), so a seed gives the same bits run to run. Bias and activation are our kernels (conv_bias.cu),
 * for the same reason. */
#include <cudnn.h>
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
    int32_t out_h, out_w;
    rlt_conv_shape s;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    /* cuDNN's own workspace is the first dnn_ws_bytes of the slot's; the slot's 16-bit weight gradient follows it
     * (cuDNN writes dw in the tensors' type; it is then widened and added to the fp32 gradient). */
    uint64_t dnn_ws_bytes;
} conv_slot;

typedef struct cuda_conv {
    cudnnHandle_t dnn;
    int32_t lane; /* the lane whose stream the handle is bound to now */
    conv_slot slot[RLT_BACKEND_MAX_CONVS];
} cuda_conv;

static cuda_conv *conv_get(rlt_backend *bk) { return (cuda_conv *)cuda_get(bk)->conv; }

void cuda_dnn_conv_close(rlt_backend *bk) {
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

/* The slots' state and the cuDNN handle (tens of MiB of device memory), created at the first slot that uses
 * cuDNN, bound to lane 0's stream; conv_bind_lane rebinds it to the lane of
 * each call (as cuda_gemm does with the cuBLAS handle). Convolutions on two lanes at once never share
 * scratch memory: cuDNN's is the workspace each call passes, and each activation set of a network has its
 * own. */
static int conv_state(rlt_backend *bk, cuda_conv **out) {
    cuda_impl *c = cuda_get(bk);
    if (!c->conv) {
        cuda_conv *cv = calloc(1, sizeof *cv);
        if (!cv) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for cuDNN state");
        c->conv = cv; /* from here cuda_conv_close owns it, whatever fails next */
    }
    cuda_conv *cv = c->conv;
    if (!cv->dnn) {
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
        if (perf[i].status == CUDNN_STATUS_SUCCESS && gemm_family && perf[i].determinism == CUDNN_DETERMINISTIC &&
            perf[i].memory <= CONV_MAX_WS_BYTES) {
            sl->fwd = a;
            break;
        }
    }
    return RLT_OK;
}

/* The backward algorithms: the first deterministic ones of cuDNN's heuristic ranking; ALGO_1 of each pass
 * (documented as deterministic) when the ranking offers none. */
static int conv_pick_backward(rlt_backend *bk, cudnnHandle_t dnn, conv_slot *sl) {
    int got = 0;
    sl->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    sl->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
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

int cuda_dnn_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes) {
    const rlt_conv_shape *s = shape;
    CUDA_REQUIRE(bk, s->dtype == RLT_LP_BF16 || s->dtype == RLT_LP_F16, "conv_prepare");
    cuda_conv *cv = NULL;
    RLT_TRY(conv_state(bk, &cv));
    conv_slot *sl = &cv->slot[slot];
    sl->s = *s;
    sl->out_h = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad);
    sl->out_w = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    if (!sl->x_desc) CUDNN_CHECK(bk, cudnnCreateTensorDescriptor(&sl->x_desc));
    if (!sl->y_desc) CUDNN_CHECK(bk, cudnnCreateTensorDescriptor(&sl->y_desc));
    if (!sl->w_desc) CUDNN_CHECK(bk, cudnnCreateFilterDescriptor(&sl->w_desc));
    if (!sl->conv_desc) CUDNN_CHECK(bk, cudnnCreateConvolutionDescriptor(&sl->conv_desc));
    cudnnDataType_t dt = s->dtype == RLT_LP_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    CUDNN_CHECK(bk, cudnnSetTensor4dDescriptor(sl->x_desc, CUDNN_TENSOR_NCHW, dt, s->n, s->c, s->h, s->w));
    CUDNN_CHECK(bk, cudnnSetFilter4dDescriptor(sl->w_desc, dt, CUDNN_TENSOR_NCHW, s->k, s->c, s->kh, s->kw));
    /* Sums in fp32. */
    CUDNN_CHECK(bk, cudnnSetConvolution2dDescriptor(sl->conv_desc, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(bk, cudnnSetConvolutionMathType(sl->conv_desc, CUDNN_TENSOR_OP_MATH));
    int on = 0, ok = 0, oh = 0, ow = 0;
    CUDNN_CHECK(bk, cudnnGetConvolution2dForwardOutputDim(sl->conv_desc, sl->x_desc, sl->w_desc, &on, &ok, &oh, &ow));
    if (on != s->n || ok != s->k || oh != sl->out_h || ow != sl->out_w)
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                           "conv_prepare: cuDNN computes output %dx%dx%dx%d, the contract %dx%dx%dx%d", on, ok, oh, ow,
                           (int)s->n, (int)s->k, (int)sl->out_h, (int)sl->out_w);
    CUDNN_CHECK(bk, cudnnSetTensor4dDescriptor(sl->y_desc, CUDNN_TENSOR_NCHW, dt, s->n, s->k, oh, ow));

    RLT_TRY(conv_pick_forward(bk, cv->dnn, sl));
    RLT_TRY(conv_pick_backward(bk, cv->dnn, sl));
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
    uint64_t nw = (uint64_t)s->k * s->c * s->kh * s->kw;
    *ws_bytes = sl->dnn_ws_bytes + ((nw * 2 + 255) & ~255ull);
    return RLT_OK;
}

/* cudnnSetStream is a host-side setting, allowed during a capture: the kernels of this call go to the current
 * lane's stream. */
static int conv_bind_lane(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    cuda_conv *cv = conv_get(bk);
    if (cv->lane != c->lane) {
        CUDNN_CHECK(bk, cudnnSetStream(cv->dnn, c->streams[c->lane]));
        cv->lane = c->lane;
    }
    return RLT_OK;
}

int cuda_dnn_conv_forward(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                          int32_t act, void *ws) {
    conv_slot *sl = &conv_get(bk)->slot[slot];
    RLT_TRY(conv_bind_lane(bk));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(bk, cudnnConvolutionForward(conv_get(bk)->dnn, &one, sl->x_desc, x, sl->w_desc, w, sl->conv_desc, sl->fwd,
                                            ws, (size_t)sl->dnn_ws_bytes, &zero, sl->y_desc, y));
    return cuda_conv_bias_act(bk, y, sl->s.dtype, b, sl->s.n, sl->s.k, sl->out_h * sl->out_w, act);
}

int cuda_dnn_conv_backward(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                           const void *x, const void *w, int32_t act, void *ws) {
    conv_slot *sl = &conv_get(bk)->slot[slot];
    RLT_TRY(conv_bind_lane(bk));
    cudnnHandle_t dnn = conv_get(bk)->dnn;
    int32_t P = sl->out_h * sl->out_w, row = sl->s.k * P;
    /* dy becomes the gradient of the pre-activation output, in place (the contract's order). */
    int32_t dt = sl->s.dtype;
    RLT_TRY(cuda_lp_act_grad(bk, dy, dt, row, y, dt, row, sl->s.n, row, act));
    if (db) RLT_TRY(cuda_conv_bias_grad(bk, db, dy, dt, sl->s.n, sl->s.k, P));
    const float one = 1.0f, zero = 0.0f;
    size_t dnn_ws = (size_t)sl->dnn_ws_bytes;
    /* The 16-bit weight gradient lands beside cuDNN's workspace, then is added to the fp32 gradient (dw
     * accumulates, as the contract says). */
    void *dw_lp = (unsigned char *)ws + sl->dnn_ws_bytes;
    CUDNN_CHECK(bk, cudnnConvolutionBackwardFilter(dnn, &one, sl->x_desc, x, sl->y_desc, dy, sl->conv_desc,
                                                   sl->bwd_filter, ws, dnn_ws, &zero, sl->w_desc, dw_lp));
    RLT_TRY(cuda_lp_add(bk, dw, dw_lp, dt, (uint64_t)sl->s.k * sl->s.c * sl->s.kh * sl->s.kw));
    if (dx)
        CUDNN_CHECK(bk, cudnnConvolutionBackwardData(dnn, &one, sl->w_desc, w, sl->y_desc, dy, sl->conv_desc,
                                                     sl->bwd_data, ws, dnn_ws, &zero, sl->x_desc, dx));
    return RLT_OK;
}
