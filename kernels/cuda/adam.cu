/* adam.cu: Adam over a whole flat parameter block in one launch; the CUDA twin of cpu_adam in
 * kernels/cpu/flat.c (PyTorch's formulation, eps outside the square root).
 *
 * The step count is read from device memory, not passed in, so a captured graph that increments it with
 * counter_add replays correctly. Every thread recomputes the two bias corrections from it: two powf per
 * thread cost nothing next to the five memory streams of the update, and they spare a second launch.
 * The expressions follow the CPU twin term by term; with FMA contraction off (cuda_module.cmake) m and v
 * come out bit-identical to it, and p differs only through powf's last-ulp differences from glibc. */
#include "cuda_ops.h"

__global__ void adam_kernel(float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                            const int64_t *step) {
    int64_t s = *step;
    /* The CPU twin rejects step < 1; here that would need a host sync, so the update is skipped instead
     * (bias correction 1 - beta^0 = 0 would divide by zero). */
    if (s < 1) return;
    float t = (float)s;
    float bc1 = 1.0f - powf(hp.beta1, t);
    float bc2 = 1.0f - powf(hp.beta2, t);
    float step_size = hp.lr / bc1;
    float bc2_sqrt = sqrtf(bc2);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float gi = g[i];
        float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
        float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + hp.eps);
    }
}

extern "C" int cuda_adam(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                         const int64_t *step) {
    CUDA_REQUIRE(bk, step != NULL, "adam");
    if (n == 0) return RLT_OK;
    adam_kernel<<<cuda_blocks(bk, n, CUDA_THREADS), CUDA_THREADS, 0, cuda_stream(bk)>>>(p, g, m, v, n, hp, step);
    CUDA_CHECK_LAUNCH(bk, "adam_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_adam(void) {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, adam_kernel);
}
