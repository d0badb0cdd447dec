/* td3.cu: TD3's target policy smoothing on the device (Fujimoto et al. 2018, eq. 14); the CUDA twin of
 * cpu_td3_target_action in kernels/cpu/td3.c. The clipped double-Q target (eq. 15) is part of td3_critic_loss
 * (losses.cu). */
#include "philox.h"
#include "cuda_ops.h"

__device__ __forceinline__ float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* The noise for element (r, c) is drawn from Philox at index r * cols + c, the same index the CPU uses,
 * so both backends draw the same uniforms; the normal then differs only by the last-ulp differences
 * between CUDA's and glibc's logf/cosf. The RNG counter is read from device memory so a captured graph
 * draws fresh noise on each replay. */
__global__ void td3_target_action_kernel(float *a, int32_t lda, int32_t rows, int32_t cols, float std, float clip,
                                         uint64_t seed, uint32_t stream, const int64_t *counter, int32_t row0,
                                         const float *std_dev, const float *clip_dev, cuda_seeds sd) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    /* Seed batching: grid z is the agent, drawing from its own seed's stream. */
    a = cuda_seed_ptr(sd, a), counter = cuda_seed_ptr(sd, counter);
    seed = cuda_seed_key(sd, seed);
    /* The agent's hparams block, where the descriptor names it (a batched graph: each agent's own values). */
    std_dev = cuda_seed_ptr(sd, std_dev), clip_dev = cuda_seed_ptr(sd, clip_dev);
    if (std_dev) std = *std_dev;
    if (clip_dev) clip = *clip_dev;
    uint64_t ctr = (uint64_t)*counter;
    for (int32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {
        for (int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
            float *x = &a[(int64_t)r * lda + c];
            const float xv = *x; /* read first: its round trip overlaps the counter's and the draw */
            float eps = std * rlt_philox_normal(seed, stream, ctr, (uint64_t)(row0 + r) * (uint64_t)cols + (uint64_t)c);
            *x = clampf(xv + clampf(eps, -clip, clip), -1.0f, 1.0f);
        }
    }
}

extern "C" int cuda_td3_target_action(rlt_backend *bk, const rlt_target_noise *d) {
    float *a = d->a, std = d->std, clip = d->clip;
    int32_t lda = d->lda, rows = d->rows, cols = d->cols, row0 = d->row0;
    uint64_t seed = d->seed;
    uint32_t stream = d->stream;
    const int64_t *counter = d->counter;
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
    RLT_TRY(cuda_seeds_check(bk, "td3_target_action", 4, a, counter, d->std_dev, d->clip_dev));
    CUDA_CHECK(bk, cuda_launch_pdl(bk, td3_target_action_kernel, dim3(gx, gy, cuda_seeds_z(bk)), block, a, lda, rows, cols,
                                   std, clip, seed, stream, counter, row0, d->std_dev, d->clip_dev,
                                   cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "td3_target_action_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_td3(void) {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, td3_target_action_kernel);
}
