/* cp_async.cuh: 4-byte asynchronous copies from global to shared memory (sm_80 and later; a plain copy on older
 * GPUs), for the multi-stage tile loaders of linear.cu and conv_igemm.cu: a thread issues the copies of several
 * k-chunks, commits each as a group and waits for the oldest, so a tile waits on one round trip to L2 for many
 * chunks instead of one per chunk. */
#ifndef RLT_CP_ASYNC_CUH
#define RLT_CP_ASYNC_CUH

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

#endif
