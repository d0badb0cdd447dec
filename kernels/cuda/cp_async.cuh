/* cp_async.cuh: 4- and 16-byte asynchronous copies from global to shared memory (sm_80 and later; a plain copy
 * on older GPUs), and the ring of stages they fill, for the tile loaders of linear.cu and conv_igemm.cu: a thread issues
 * the copies of several tiles, commits each as a group and waits for the oldest, so a block waits on one round
 * trip to L2 for several tiles instead of one per tile. */
#ifndef RLT_CP_ASYNC_CUH
#define RLT_CP_ASYNC_CUH

#include <stdint.h>

/* *dst = ok ? *src : 0 (the zero written by the copy itself: src is not read when !ok, but must be a valid
 * address all the same). */
__device__ __forceinline__ void cp_async4(float *dst, const float *src, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 4 : 0) : "memory");
#else
    *dst = ok ? *src : 0.0f;
#endif
}

/* The 4 floats at dst = the first bytes / 4 floats at src, the rest zero (written by the copy itself; bytes 0
 * reads nothing, but src must be a valid address all the same). dst and src 16-byte aligned. Through L2 only
 * (.cg, the default: the tiles are read once per block), or with CA through L1 as well (.ca, for tiles whose
 * entries neighbouring rows or blocks read again: a convolution's overlapping receptive fields). */
template <bool CA = false>
__device__ __forceinline__ void cp_async16(float *dst, const float *src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (CA) asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
    else asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
#else
#pragma unroll
    for (int i = 0; i < 4; i++) dst[i] = 4 * i < bytes ? src[i] : 0.0f;
#endif
}

__device__ __forceinline__ void cp_async_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* The ring: tiles 0 .. n - 1 through STAGES shared-memory stages. load(i) issues tile i's copies into stage
 * i mod STAGES; use(i) reads that stage once every thread's copies have landed. STAGES - 1 tiles are in flight
 * while one is used; the barrier after use keeps a later load from overwriting a stage still being read. */
template <int STAGES, typename Load, typename Use>
__device__ __forceinline__ void cp_async_ring(int32_t n, Load &&load, Use &&use) {
#pragma unroll
    for (int32_t i = 0; i < STAGES - 1; i++) {
        if (i < n) load(i);
        cp_async_commit();
    }
    for (int32_t i = 0; i < n; i++) {
        if (i + STAGES - 1 < n) load(i + STAGES - 1); /* into the stage used at i - 1 */
        cp_async_commit();
        cp_async_wait<STAGES - 1>(); /* this thread's copies of tile i have landed */
        __syncthreads();             /* and everyone else's */
        use(i);
        __syncthreads();
    }
    cp_async_wait<0>();
}

#endif
