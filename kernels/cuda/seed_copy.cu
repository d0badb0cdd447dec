/* seed_copy.cu: the copy op while seeds are batched (rlt_seeds_desc.host_delta): one launch moves bytes between the
 * host and device arenas of every agent, where a cudaMemcpyAsync could move only the lead's. Block z is agent z: its
 * device side is the lead's moved by seeds.delta[z], its host side by host_delta[z], and the host side is pinned
 * memory the kernel reads or writes through unified addressing (a mapped pinned page's device address is its host
 * address). The bytes are the copy's, so each agent gets what its own cudaMemcpyAsync would have given it. A
 * kernel rather than one memcpy node per agent: a graph's memcpy nodes run one after another on the copy engines
 * (microseconds each, so 64 agents' acting would wait for 128 of them), while this is one launch that moves a few
 * hundred bytes per agent over the bus. */
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

extern "C" cudaError_t cuda_preload_seed_copy(void) {
    struct cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, seed_copy_kernel);
}
