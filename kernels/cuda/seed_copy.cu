/* seed_copy.cu: the copy op while seeds are batched (rlt_seeds_desc.host_delta): one launch moves bytes between the
 * host and device arenas of every agent, where a cudaMemcpyAsync could move only the lead's. Block z is agent z: its
 * device side is the lead's moved by seeds.delta[z], its host side by host_delta[z], and the host side is pinned
 * memory the kernel reads or writes through unified addressing (a mapped pinned page's device address is its host
 * address). The bytes are the copy's, so each agent gets what its own cudaMemcpyAsync would have given it. A
 * kernel rather than one memcpy node per agent: a graph's memcpy nodes run one after another on the copy engines
 * (microseconds each, so 64 agents' acting would wait for 128 of them), while this is one launch that moves a few
 * hundred bytes per agent over the bus. The same reach runs the seeds' held transition stores (copy_lists). */
#include "cuda_ops.h"

__global__ void seed_copy_kernel(char *dst, const char *src, uint64_t bytes, int32_t h2d, cuda_seeds sd,
                                 const int64_t *host_delta) {
    int64_t dd = sd.delta[blockIdx.z], hd = host_delta[blockIdx.z];
    char *d = dst + (h2d ? dd : hd);
    const char *s = src + (h2d ? hd : dd);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x, i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if ((((uintptr_t)d | (uintptr_t)s | bytes) & 3u) == 0) {
        uint32_t *d4 = (uint32_t *)(void *)d;
        const uint32_t *s4 = (const uint32_t *)(const void *)s;
        for (uint64_t i = i0; i < bytes / 4; i += stride) d4[i] = s4[i];
    } else {
        for (uint64_t i = i0; i < bytes; i += stride) d[i] = s[i];
    }
}

extern "C" int cuda_seed_copy(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, int32_t h2d) {
    cuda_impl *c = cuda_get(bk);
    CUDA_REQUIRE(bk, c->seeds.n > 1 && c->seeds_host_delta && dst && src, "seed_copy");
    if (bytes == 0) return RLT_OK;
    seed_copy_kernel<<<dim3(cuda_blocks(bk, (bytes + 3) / 4, CUDA_THREADS), 1, cuda_seeds_z(bk)), CUDA_THREADS, 0,
                       cuda_stream(bk)>>>((char *)dst, (const char *)src, bytes, h2d, cuda_seeds_of(bk),
                                          c->seeds_host_delta);
    CUDA_CHECK_LAUNCH(bk, "seed_copy_kernel");
    return RLT_OK;
}

/* The seeds' held transition stores (rlt_copy_list), one block per agent: the block reads its agent's list once from
 * pinned host memory into shared memory (agent z's list is the lead's moved by host_delta[z]), then its threads copy
 * each entry's bytes from the agent's pinned staging to its device replay, entry after entry, in the order they were
 * held, so a later entry over an earlier one's bytes wins as its own copies would have. */
__global__ void copy_lists_kernel(const rlt_copy_list *lead, const int64_t *host_delta) {
    __shared__ rlt_copy_list l;
    const rlt_copy_list *mine = (const rlt_copy_list *)(const void *)((const char *)(const void *)lead + host_delta[blockIdx.z]);
    const uint64_t *from = (const uint64_t *)(const void *)mine;
    uint64_t *to = (uint64_t *)(void *)&l;
    for (uint32_t i = threadIdx.x; i < sizeof l / sizeof(uint64_t); i += blockDim.x) to[i] = from[i];
    __syncthreads();
    const int64_t n = l.n < 0 ? 0 : (l.n > RLT_COPY_LIST_MAX ? RLT_COPY_LIST_MAX : l.n);
    for (int64_t e = 0; e < n; e++) {
        char *d = (char *)(uintptr_t)l.e[e].dst;
        const char *s = (const char *)(uintptr_t)l.e[e].src;
        const uint64_t bytes = l.e[e].bytes;
        if ((((uintptr_t)d | (uintptr_t)s | bytes) & 3u) == 0) {
            for (uint64_t i = threadIdx.x; i < bytes / 4; i += blockDim.x)
                ((uint32_t *)(void *)d)[i] = ((const uint32_t *)(const void *)s)[i];
        } else {
            for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) d[i] = s[i];
        }
        __syncthreads(); /* entry by entry: a later one may write where an earlier one did */
    }
}

extern "C" int cuda_copy_lists(rlt_backend *bk, const rlt_copy_list *lead_list, const int64_t *host_delta, int32_t n) {
    CUDA_REQUIRE(bk, lead_list && host_delta && n >= 1 && n <= CUDA_SEEDS_MAX, "copy_lists");
    cuda_impl *c = cuda_get(bk);
    copy_lists_kernel<<<dim3(1, 1, (unsigned)n), CUDA_THREADS, 0, c->streams[0]>>>(lead_list, host_delta);
    CUDA_CHECK_LAUNCH(bk, "copy_lists_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_seed_copy(void) {
    struct cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, seed_copy_kernel);
    return rc == cudaSuccess ? cudaFuncGetAttributes(&a, copy_lists_kernel) : rc;
}
