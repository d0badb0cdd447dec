/* conv_no_cudnn.c: the convolution ops of a CUDA module built without cuDNN (CMake did not find it, or
 * -DRLT_CUDNN=OFF). CMake compiles this file instead of kernels/cuda/cudnn/conv_cudnn.c, so no source needs
 * an #ifdef. Dense (MLP) agents work as usual; a convolutional network fails at init with a clear message
 * rather than at its first update. */
#include "../cuda_ops.h"

static int conv_unavailable(rlt_backend *bk, const char *op) {
    return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__,
                       "%s: this CUDA module was built without cuDNN, which convolutional networks need on the GPU; "
                       "install cuDNN 9 and rebuild (set CUDNN_ROOT if CMake does not find it), or use device: cpu",
                       op);
}

int cuda_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes) {
    return conv_unavailable(bk, "conv_prepare");
}

int cuda_conv_forward(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b,
                      int32_t act, void *ws, uint64_t ws_bytes) {
    return conv_unavailable(bk, "conv_forward");
}

int cuda_conv_backward(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                       const void *x, const void *w, int32_t act, void *ws, uint64_t ws_bytes) {
    return conv_unavailable(bk, "conv_backward");
}

/* Nothing was ever created. */
void cuda_conv_close(rlt_backend *bk) { (void)bk; }
