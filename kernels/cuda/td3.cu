/* td3.cu: the two TD3-specific pieces on the device: target policy smoothing and the clipped double-Q
 * target (Fujimoto et al. 2018, eqs. 14-15); the CUDA twins of kernels/cpu/td3.c. */
#include "philox.h"
#include "cuda_ops.h"

__device__ __forceinline__ float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* The noise for element (r, c) is drawn from Philox at index r * cols + c, the same index the CPU uses,
 * so both backends draw the same uniforms; the normal then differs only by the last-ulp differences
 * between CUDA's and glibc's logf/cosf. The RNG counter is read from device memory so a captured graph
 * draws fresh noise on each replay. */
__global__ void td3_target_action_kernel(float *a, int32_t lda, int32_t rows, int32_t cols, float std, float clip,
                                         uint64_t seed, uint32_t stream, const int64_t *counter, int32_t row0) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    uint64_t ctr = (uint64_t)*counter;
    for (int32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {
        for (int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
            float eps = std * rlt_philox_normal(seed, stream, ctr, (uint64_t)(row0 + r) * (uint64_t)cols + (uint64_t)c);
            float *x = &a[(int64_t)r * lda + c];
            *x = clampf(*x + clampf(eps, -clip, clip), -1.0f, 1.0f);
        }
    }
}

__global__ void td3_target_kernel(float *y, const float *r, const float *term, const float *q1, const float *q2,
                                  int32_t ldq, int32_t n, float gamma) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float a = q1[(int64_t)i * ldq], b = q2[(int64_t)i * ldq];
        y[i] = r[i] + gamma * (1.0f - term[i]) * (a < b ? a : b);
    }
}

extern "C" int cuda_td3_target_action(rlt_backend *bk, float *a, int32_t lda, int32_t rows, int32_t cols, float std,
                                      float clip, uint64_t seed, uint32_t stream, const int64_t *counter, int32_t row0) {
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && lda >= cols && counter != NULL && row0 >= 0, "td3_target_action");
    if (rows == 0 || cols == 0) return RLT_OK;
    /* Actions are narrow (a handful of columns): blocks of 8 columns by 32 rows waste fewer threads than
     * the 32-wide tiles of bias_act. */
    dim3 block(8, 32);
    unsigned gx = (unsigned)((cols + 7) / 8);
    if (gx > 64) gx = 64;
    unsigned gy = (unsigned)((rows + 31) / 32);
    unsigned cap = (unsigned)cuda_get(bk)->sm_count * 8u;
    if (gy > cap) gy = cap;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, td3_target_action_kernel, dim3(gx, gy), block, a, lda, rows, cols, std, clip, seed,
                                   stream, counter, row0));
    CUDA_CHECK_LAUNCH(bk, "td3_target_action_kernel");
    return RLT_OK;
}

extern "C" int cuda_td3_target(rlt_backend *bk, float *y, const float *r, const float *term, const float *q1,
                               const float *q2, int32_t ldq, int32_t n, float gamma) {
    CUDA_REQUIRE(bk, n >= 0 && ldq >= 1, "td3_target");
    if (n == 0) return RLT_OK;
    td3_target_kernel<<<cuda_blocks(bk, (uint64_t)n, CUDA_THREADS), CUDA_THREADS, 0, cuda_stream(bk)>>>(
        y, r, term, q1, q2, ldq, n, gamma);
    CUDA_CHECK_LAUNCH(bk, "td3_target_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_td3(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, td3_target_action_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, td3_target_kernel);
    return rc;
}
