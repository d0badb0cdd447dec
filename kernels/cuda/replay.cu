/* replay.cu: replay sampling on the device: uniform indices from Philox and the row gather that copies
 * the sampled transitions into the batch; the CUDA twins of kernels/cpu/replay.c. Philox is pure integer
 * arithmetic (kernels/philox.h), so the indices are bit-identical to the CPU's. */
#include "../philox.h"
#include "cuda_ops.h"

/* The replay size and the RNG counter are read from device memory: they change between updates and a
 * captured graph must see the current values. */
__global__ void sample_indices_kernel(int32_t *idx, int32_t n, const int64_t *size, const uint8_t *valid,
                                      uint64_t seed, uint32_t stream, const int64_t *counter) {
    int64_t sz = *size;
    /* The CPU twin rejects size < 1; checking it here would need a host sync. A negative size is clamped to
     * 0, which makes every index 0 instead of a wild one. */
    uint64_t n_rows = sz > 0 ? (uint64_t)sz : 0u;
    uint64_t ctr = (uint64_t)*counter;
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        idx[i] = n_rows ? (int32_t)rlt_replay_slot(seed, stream, ctr, (uint64_t)i, (uint64_t)n, n_rows, valid) : 0;
}

/* Copies n rows of `words` words each. One thread per word over the flattened (row, word) space keeps
 * every thread busy whatever the row width (an observation row is often a few dozen bytes) and makes
 * consecutive threads touch consecutive words of a row. */
template <typename W>
__global__ void gather_rows_kernel(unsigned char *dst, uint64_t dst_stride, const unsigned char *src,
                                   uint64_t row_bytes, const int32_t *idx, int32_t n, uint64_t words) {
    uint64_t total = (uint64_t)n * words;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        uint64_t row = t / words, w = t - row * words;
        const W *s = (const W *)(src + (uint64_t)idx[row] * row_bytes);
        W *d = (W *)(dst + row * dst_stride);
        d[w] = s[w];
    }
}

extern "C" int cuda_sample_indices(rlt_backend *bk, int32_t *idx, int32_t n, const int64_t *size, const uint8_t *valid,
                                   uint64_t seed, uint32_t stream, const int64_t *counter) {
    CUDA_REQUIRE(bk, n >= 0 && size != NULL && counter != NULL, "sample_indices");
    if (n == 0) return RLT_OK;
    sample_indices_kernel<<<cuda_blocks(bk, (uint64_t)n, CUDA_THREADS), CUDA_THREADS, 0, cuda_stream(bk)>>>(
        idx, n, size, valid, seed, stream, counter);
    CUDA_CHECK_LAUNCH(bk, "sample_indices_kernel");
    return RLT_OK;
}

extern "C" int cuda_gather_rows(rlt_backend *bk, void *dst, uint64_t dst_stride, const void *src, uint64_t row_bytes,
                                const int32_t *idx, int32_t n) {
    CUDA_REQUIRE(bk, n >= 0 && dst_stride >= row_bytes, "gather_rows");
    if (n == 0 || row_bytes == 0) return RLT_OK;
    /* The widest word that divides both addresses and both strides: 16-byte copies for the usual float rows
     * whose size is a multiple of 4 floats, 4-byte for other float rows, bytes for u8 rows of odd size. */
    uint64_t align = (uint64_t)(uintptr_t)dst | (uint64_t)(uintptr_t)src | dst_stride | row_bytes;
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    cudaStream_t st = cuda_stream(bk);
    if (align % 16 == 0) {
        uint64_t words = row_bytes / 16;
        gather_rows_kernel<uint4><<<cuda_blocks(bk, (uint64_t)n * words, CUDA_THREADS), CUDA_THREADS, 0, st>>>(
            d, dst_stride, s, row_bytes, idx, n, words);
    } else if (align % 4 == 0) {
        uint64_t words = row_bytes / 4;
        gather_rows_kernel<uint32_t><<<cuda_blocks(bk, (uint64_t)n * words, CUDA_THREADS), CUDA_THREADS, 0, st>>>(
            d, dst_stride, s, row_bytes, idx, n, words);
    } else {
        gather_rows_kernel<unsigned char><<<cuda_blocks(bk, (uint64_t)n * row_bytes, CUDA_THREADS), CUDA_THREADS, 0,
                                            st>>>(d, dst_stride, s, row_bytes, idx, n, row_bytes);
    }
    CUDA_CHECK_LAUNCH(bk, "gather_rows_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_replay(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, sample_indices_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, gather_rows_kernel<uint4>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, gather_rows_kernel<uint32_t>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, gather_rows_kernel<unsigned char>);
    return rc;
}
