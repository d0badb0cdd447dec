/* conv_no_cudnn.c: the cuDNN side of the convolution ops in a CUDA module built without cuDNN (CMake did not
 * find it, or -DRLT_CUDNN=OFF). CMake compiles this file instead of kernels/cuda/cudnn/conv_cudnn.c, so no source
 * needs an #ifdef. fp32 convolutions need no cuDNN (kernels/cuda/conv_ops.c runs them on our own kernels); a
 * 16-bit slot fails at init with a clear message rather than at its first update. */
#include "../cuda_ops.h"

int cuda_dnn_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes) {
    (void)shape;
    (void)ws_bytes;
    return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__,
                       "conv_prepare: slot %d is a 16-bit convolution, which needs cuDNN on the GPU, and this CUDA module "
                       "was built without it; install cuDNN 9 and rebuild (set CUDNN_ROOT if CMake does not find it), "
                       "or use fp32 convolutions (precision: fp32), or device: cpu",
                       (int)slot);
}

/* Unreachable: no slot is ever prepared on this side. */
int cuda_dnn_conv_forward(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                          int32_t act, void *ws) {
    return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "conv_forward: slot %d has no cuDNN state", (int)slot);
}

int cuda_dnn_conv_backward(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                           const void *x, const void *w, int32_t act, void *ws) {
    return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "conv_backward: slot %d has no cuDNN state", (int)slot);
}

/* Nothing was ever created. */
void cuda_dnn_conv_close(rlt_backend *bk) { (void)bk; }
