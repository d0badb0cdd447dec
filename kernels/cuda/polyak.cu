/* polyak.cu: Polyak (soft target) averaging over a whole flat block in one launch; the CUDA twin of
 * cpu_polyak in kernels/cpu/flat.c. The expression is written exactly as the CPU's and the module is
 * built without FMA contraction (cuda_module.cmake), so both backends produce the same bits. */
#include "cuda_ops.h"

__global__ void polyak_kernel(float *target, const float *src, uint64_t n, float tau, cuda_seeds sd) {
    target = cuda_seed_ptr(sd, target); /* seed batching: grid z is the agent */
    src = cuda_seed_ptr(sd, src);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        target[i] = tau * src[i] + (1.0f - tau) * target[i];
}

extern "C" int cuda_polyak(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau) {
    CUDA_REQUIRE(bk, tau >= 0.0f && tau <= 1.0f, "polyak");
    if (n == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "polyak", 2, target, src));
    polyak_kernel<<<dim3(cuda_blocks(bk, n, CUDA_THREADS), 1, cuda_seeds_z(bk)), CUDA_THREADS, 0, cuda_stream(bk)>>>(
        target, src, n, tau, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "polyak_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_polyak(void) {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, polyak_kernel);
}
