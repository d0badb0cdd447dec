/* fill.cu: the flat block passes that need no arithmetic beyond a store: fill (zero-grad, one launch
 * over a whole params|grads|adam_m|adam_v block), the f32 copy (hard target update) and the device-side
 * counters; the CUDA twins of cpu_fill, cpu_copy_f32 and cpu_counter_add in kernels/cpu/flat.c, and the table's flat op
 * (cuda_flat, which sends RLT_FLAT_POLYAK to polyak.cu).
 * Seed batching (cuda_seeds): grid z is the agent; the memset and memcpy, which cannot move per agent, become
 * kernels while batching (the same bytes). */
#include "cuda_ops.h"

__global__ void fill_kernel(float *x, uint64_t n, float value, cuda_seeds sd) {
    x = cuda_seed_ptr(sd, x);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = value;
}

/* copy_f32 while batching (a cudaMemcpyAsync otherwise). */
__global__ void copy_f32_kernel(float *dst, const float *src, uint64_t n, cuda_seeds sd) {
    dst = cuda_seed_ptr(sd, dst);
    src = cuda_seed_ptr(sd, src);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

/* One thread (per agent): the counter is a single int64 the next ops read (Adam's step, the RNG counter), so
 * it has to live on the device for a captured graph to see it advance. */
__global__ void counter_add_kernel(int64_t *c, int64_t v, cuda_seeds sd) { *cuda_seed_ptr(sd, c) += v; }

/* Blocks of a flat pass over n floats: one element a thread for one agent; batched, FLAT_SEED_PER a thread, so that
 * N agents' zero-grad is not N times the blocks (16 TD3 seeds' critic gradients took 9,040 blocks: 8.9 us in place
 * on an H200). The grid-stride loops write the same values whatever the count. */
#define FLAT_SEED_PER 8
static unsigned flat_blocks(rlt_backend *bk, uint64_t n) {
    if (cuda_seeds_z(bk) == 1) return cuda_blocks(bk, n, CUDA_THREADS);
    return cuda_blocks(bk, (n + FLAT_SEED_PER - 1) / FLAT_SEED_PER, CUDA_THREADS);
}

extern "C" int cuda_fill(rlt_backend *bk, float *x, uint64_t n, float value) {
    if (n == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "fill", 1, x));
    /* Zeroing (the common case: zero-grad) is a memset. As in the CPU twin, -0.0f compares equal to 0.0f
     * and also fills +0.0f, so both backends write the same bits; batched, the kernel writes that +0.0f. */
    if (value == 0.0f) {
        if (cuda_seeds_z(bk) == 1) {
            CUDA_CHECK(bk, cudaMemsetAsync(x, 0, n * sizeof *x, cuda_stream(bk)));
            return RLT_OK;
        }
        value = 0.0f;
    }
    fill_kernel<<<dim3(flat_blocks(bk, n), 1, cuda_seeds_z(bk)), CUDA_THREADS, 0, cuda_stream(bk)>>>(
        x, n, value, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "fill_kernel");
    return RLT_OK;
}

extern "C" int cuda_copy_f32(rlt_backend *bk, float *dst, const float *src, uint64_t n) {
    if (n == 0 || dst == src) return RLT_OK;
    if (cuda_seeds_z(bk) == 1) {
        CUDA_CHECK(bk, cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice, cuda_stream(bk)));
        return RLT_OK;
    }
    RLT_TRY(cuda_seeds_check(bk, "copy_f32", 2, dst, src));
    copy_f32_kernel<<<dim3(flat_blocks(bk, n), 1, cuda_seeds_z(bk)), CUDA_THREADS, 0, cuda_stream(bk)>>>(
        dst, src, n, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "copy_f32_kernel");
    return RLT_OK;
}

extern "C" int cuda_counter_add(rlt_backend *bk, int64_t *c, int64_t v) {
    RLT_TRY(cuda_seeds_check(bk, "counter_add", 1, c));
    counter_add_kernel<<<dim3(1, 1, cuda_seeds_z(bk)), 1, 0, cuda_stream(bk)>>>(c, v, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "counter_add_kernel");
    return RLT_OK;
}

/* The table's flat op: each mode keeps its own launcher and kernel, so the arithmetic is what it was. */
extern "C" int cuda_flat(rlt_backend *bk, rlt_flat_mode mode, float *dst, const float *src, uint64_t n, float scalar) {
    switch (mode) {
    case RLT_FLAT_FILL: return cuda_fill(bk, dst, n, scalar);
    case RLT_FLAT_COPY: return cuda_copy_f32(bk, dst, src, n);
    case RLT_FLAT_POLYAK: return cuda_polyak(bk, dst, src, n, scalar);
    }
    return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "flat: unknown mode %d", (int)mode);
}

extern "C" cudaError_t cuda_preload_fill(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, fill_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, copy_f32_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, counter_add_kernel);
    return rc;
}
