/* replay.cu: replay sampling on the device: uniform indices from Philox and the multi-field gather that copies
 * the sampled transitions into the batch (widening compact fp16/bf16 observations to fp32); the CUDA twins
 * of cpu_sample_rows (kernels/cpu/replay.c) and cpu_gather_fields (kernels/cpu/fused.c). Philox is pure
 * integer arithmetic (base/philox.h), so the indices are bit-identical to the CPU's. The replay size and the
 * RNG counter are read from device memory: they change between updates and a captured graph must see the
 * current values. */
#include <string.h>

#include "lowp.h"
#include "philox.h"
#include "cuda_ops.h"

/* gather_fields: every field of one batch in one launch. Narrow rows of many seeds (gather_rows_kernel): a block per
 * run of rows, each row's index drawn once into shared memory, then every field's words of those rows. Otherwise
 * (gather_fields_kernel): blockIdx.y picks the field; within it, one thread per
 * word over the flattened (row, word) space (every thread busy whatever the row width, an observation row
 * often being a few dozen bytes, and consecutive threads on consecutive words of a row), with the widest word
 * that divides the field's addresses and strides. With a sample spec each thread draws its row's index itself
 * (Philox is a pure function of the counter, so every thread of a row draws the same one) and the row's first
 * thread of field 0 stores it: no launch, and no dependency between threads, for the sampling.
 * A compact replay field (fp16 or bf16 source) is widened to fp32 as it is copied: a "word" is then 4
 * elements (an 8-byte load, a 16-byte store) when both sides are aligned for it, else one element. The
 * widening is base/lowp.h's integer arithmetic, the CPU twin's very functions, so the batches agree bit
 * for bit (NaN payloads included, which a hardware conversion need not keep). */
enum { GATHER_RAW = 0, GATHER_F16 = RLT_LP_F16, GATHER_BF16 = RLT_LP_BF16 };

typedef struct gather_args {
    rlt_gather_field f[RLT_GATHER_MAX_FIELDS];
    uint64_t words[RLT_GATHER_MAX_FIELDS];
    int32_t wsize[RLT_GATHER_MAX_FIELDS]; /* raw: bytes per word (16, 4, 1); widened: elements per word (4, 1) */
    int32_t n, sample;
    int32_t nf, rows; /* gather_rows_kernel: the fields, and the rows a block copies */
    rlt_sample_spec s;
    cuda_seeds sd; /* seed batching: grid z is the agent, every pointer above moved by its delta, s.seed its seed */
} gather_args;

template <int D>
__device__ __forceinline__ float widen(uint16_t h) {
    return D == GATHER_F16 ? rlt_f16_to_f32(h) : rlt_bf16_to_f32(h);
}

/* Word w of a row: a raw copy of one W, or K 16-bit elements of type D widened to K floats. */
template <typename W, int D, int K>
__device__ __forceinline__ void gather_word(unsigned char *dst, const unsigned char *src, uint64_t w) {
    if (D == GATHER_RAW) {
        ((W *)dst)[w] = ((const W *)src)[w];
    } else if (K == 4) {
        uint2 v = ((const uint2 *)src)[w];
        float4 o = make_float4(widen<D>((uint16_t)(v.x & 0xffffu)), widen<D>((uint16_t)(v.x >> 16)),
                               widen<D>((uint16_t)(v.y & 0xffffu)), widen<D>((uint16_t)(v.y >> 16)));
        ((float4 *)dst)[w] = o;
    } else {
        ((float *)dst)[w] = widen<D>(((const uint16_t *)src)[w]);
    }
}

/* An agent's draw of replay slots (sample spec g.s, the agent of grid z): the replay size, read from the device once and
 * clamped at 0 (a negative size makes every index 0, never a wild one; the CPU twin refuses size < 1, which here would
 * need a host sync), and the update counter. The three gather kernels draw through it. */
struct gather_draw {
    uint64_t seed, n_rows, ctr;
    const uint8_t *valid;
    __device__ __forceinline__ gather_draw() : seed(0), n_rows(0), ctr(0), valid(nullptr) {} /* no sample spec */
    __device__ __forceinline__ explicit gather_draw(const gather_args &g) {
        const cuda_seeds &sd = g.sd;
        const int64_t sz = *cuda_seed_ptr(sd, g.s.size);
        seed = cuda_seed_key(sd, g.s.seed);
        n_rows = sz > 0 ? (uint64_t)sz : 0u;
        ctr = (uint64_t)*cuda_seed_ptr(sd, g.s.counter);
        valid = cuda_seed_ptr(sd, g.s.valid);
    }
    /* The slot of batch row `row` (the micro-batch's rows start at g.s.row0). */
    __device__ __forceinline__ int32_t at(const gather_args &g, uint64_t row) const {
        return n_rows ? (int32_t)rlt_replay_slot(seed, g.s.stream, ctr, (uint64_t)g.s.row0 + row, (uint64_t)g.s.batch,
                                                 n_rows, valid)
                      : 0;
    }
};

/* One field's words over the flattened (row, word) space of the whole batch (gather_fields_kernel, wide rows). */
template <typename W, int D, int K> struct gather_flat {
    static __device__ __forceinline__ void run(const gather_args &g, const rlt_gather_field &f, uint64_t words,
                                               int32_t *idx, int first_field) {
        const cuda_seeds &sd = g.sd;
        unsigned char *dst = (unsigned char *)cuda_seed_ptr(sd, f.dst);
        const unsigned char *src = (const unsigned char *)cuda_seed_ptr(sd, f.src);
        const int32_t *via = cuda_seed_ptr(sd, f.via);
        idx = cuda_seed_ptr(sd, idx);
        uint64_t total = (uint64_t)g.n * words;
        uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        const gather_draw dr = g.sample ? gather_draw(g) : gather_draw();
        for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
            uint64_t row = t / words, w = t - row * words;
            int32_t j;
            if (g.sample) {
                j = dr.at(g, row);
                if (first_field && w == 0) idx[row] = j;
            } else {
                j = idx[row];
            }
            if (via) j = via[j];
            gather_word<W, D, K>(dst + row * f.dst_stride, src + (uint64_t)j * f.row_bytes, w);
        }
    }
};

/* One field's words for the block's rows r0 .. r0 + nr - 1, whose indices are in s_j (gather_rows_kernel). */
template <typename W, int D, int K> struct gather_block {
    static __device__ __forceinline__ void run(const gather_args &g, const rlt_gather_field &f, uint64_t words,
                                               const int32_t *s_j, int32_t r0, int32_t nr) {
        unsigned char *dst = (unsigned char *)cuda_seed_ptr(g.sd, f.dst);
        const unsigned char *src = (const unsigned char *)cuda_seed_ptr(g.sd, f.src);
        const int32_t *via = cuda_seed_ptr(g.sd, f.via);
        const uint32_t wd = (uint32_t)words, total = (uint32_t)nr * wd;
        for (uint32_t t = threadIdx.x; t < total; t += blockDim.x) {
            const uint32_t r = t / wd, w = t - r * wd;
            int32_t j = s_j[r];
            if (via) j = via[j];
            gather_word<W, D, K>(dst + (uint64_t)(r0 + (int32_t)r) * f.dst_stride, src + (uint64_t)j * f.row_bytes, w);
        }
    }
};

/* Field fi's copy by its source type and word size: Op<W, D, K>::run(g, f, words, a...). */
template <template <typename, int, int> class Op, typename... A>
__device__ __forceinline__ void gather_dispatch(const gather_args &g, int32_t fi, A... a) {
    const rlt_gather_field &f = g.f[fi];
    const uint64_t words = g.words[fi];
    if (f.src_dtype == GATHER_F16) {
        if (g.wsize[fi] == 4) Op<float, GATHER_F16, 4>::run(g, f, words, a...);
        else Op<float, GATHER_F16, 1>::run(g, f, words, a...);
    } else if (f.src_dtype == GATHER_BF16) {
        if (g.wsize[fi] == 4) Op<float, GATHER_BF16, 4>::run(g, f, words, a...);
        else Op<float, GATHER_BF16, 1>::run(g, f, words, a...);
    } else if (g.wsize[fi] == 16) {
        Op<uint4, GATHER_RAW, 1>::run(g, f, words, a...);
    } else if (g.wsize[fi] == 4) {
        Op<uint32_t, GATHER_RAW, 1>::run(g, f, words, a...);
    } else {
        Op<unsigned char, GATHER_RAW, 1>::run(g, f, words, a...);
    }
}

/* Every other batch (a single agent's, wide rows such as an image's): blockIdx.y is the field, and each thread draws
 * its own row's index. */
__global__ void gather_fields_kernel(const __grid_constant__ gather_args g, int32_t *idx) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    const int32_t fi = (int32_t)blockIdx.y;
    gather_dispatch<gather_flat>(g, fi, idx, fi == 0 ? 1 : 0);
}

/* Narrow rows, batched over seeds (every field of a row together GATHER_ROW_WORDS_MIN to GATHER_ROW_WORDS words; the
 * rule is cuda_gather_fields'): block x holds rows x * g.rows .. (x + 1) * g.rows - 1 of every field. Each row's
 * index is drawn (or read) once, by one thread, into shared memory, and the block's threads then copy all its
 * fields' words; gather_fields_kernel draws a row's index
 * again for every word of every field (42 Philox draws and 64-bit divisions a row of TD3 at HalfCheetah sizes, which
 * ncu found compute-bound: 80% SM throughput, 85-105 us of a 256-agent TD3 64-64 update on an H200). */
#define GATHER_ROW_WORDS 256
#define GATHER_ROW_WORDS_MIN 32
#define GATHER_BLOCK_ROWS 32
__global__ void gather_rows_kernel(const __grid_constant__ gather_args g, int32_t *idx) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    __shared__ int32_t s_j[GATHER_BLOCK_ROWS];
    const cuda_seeds &sd = g.sd;
    const int32_t r0 = (int32_t)blockIdx.x * g.rows;
    const int32_t nr = g.n - r0 < g.rows ? g.n - r0 : g.rows;
    if ((int32_t)threadIdx.x < nr) {
        const int32_t row = r0 + (int32_t)threadIdx.x;
        int32_t *ix = cuda_seed_ptr(sd, idx);
        int32_t j;
        if (g.sample) {
            j = gather_draw(g).at(g, (uint64_t)row);
            ix[row] = j;
        } else {
            j = ix[row];
        }
        s_j[threadIdx.x] = j;
    }
    __syncthreads();
    for (int32_t fi = 0; fi < g.nf; fi++) gather_dispatch<gather_block>(g, fi, (const int32_t *)s_j, r0, nr);
}

/* Draws idx alone when there is no field to gather (gather_fields with n_fields 0). */
__global__ void gather_sample_only_kernel(const __grid_constant__ gather_args g, int32_t *idx) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    idx = cuda_seed_ptr(g.sd, idx);
    const gather_draw dr(g);
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += gridDim.x * blockDim.x) idx[i] = dr.at(g, (uint64_t)i);
}

extern "C" int cuda_gather_fields(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample,
                                  int32_t n_fields, const rlt_gather_field *fields) {
    CUDA_REQUIRE(bk, n >= 0 && n_fields >= 0 && n_fields <= RLT_GATHER_MAX_FIELDS && idx != NULL, "gather_fields");
    CUDA_REQUIRE(bk, !sample || (sample->size && sample->counter && sample->row0 >= 0 &&
                                 sample->batch >= sample->row0 + n), "gather_fields");
    if (n == 0) return RLT_OK;
    gather_args g;
    memset(&g, 0, sizeof g);
    g.n = n;
    g.sample = sample != NULL;
    if (sample) g.s = *sample;
    /* Batched over seeds, the word sizes chosen below from the leading agent's addresses hold for every agent: each
     * arena is one cudaMalloc (256-byte aligned) of the same plan, so the deltas are multiples of 256. */
    g.sd = cuda_seeds_of(bk);
    RLT_TRY(cuda_seeds_check(bk, "gather_fields", 4, idx, g.s.size, g.s.valid, g.s.counter));
    uint64_t most = 0;
    int32_t used = 0;
    for (int32_t i = 0; i < n_fields; i++) {
        const rlt_gather_field *f = &fields[i];
        int wide = f->src_dtype == RLT_LP_F16 || f->src_dtype == RLT_LP_BF16;
        /* 16-bit rows: even row bytes, a 2-byte aligned source, float-aligned destination rows. */
        CUDA_REQUIRE(bk, f->src_dtype == RLT_LP_F32 || (wide && f->row_bytes % 2 == 0 && (uintptr_t)f->src % 2 == 0 &&
                                                   (uintptr_t)f->dst % 4 == 0 && f->dst_stride % 4 == 0),
                     "gather_fields");
        CUDA_REQUIRE(bk, f->dst_stride >= rlt_gather_dst_bytes(f), "gather_fields");
        if (f->row_bytes == 0) continue;
        RLT_TRY(cuda_seeds_check(bk, "gather_fields", 3, f->dst, f->src, f->via));
        int32_t ws;
        if (wide) {
            /* Four elements a word: 8-byte source words and 16-byte destination words, both aligned. */
            uint64_t sa = (uint64_t)(uintptr_t)f->src | f->row_bytes;
            uint64_t da = (uint64_t)(uintptr_t)f->dst | f->dst_stride;
            ws = (sa % 8 == 0 && da % 16 == 0) ? 4 : 1;
            g.words[used] = f->row_bytes / 2 / (uint64_t)ws;
        } else {
            uint64_t align = (uint64_t)(uintptr_t)f->dst | (uint64_t)(uintptr_t)f->src | f->dst_stride | f->row_bytes;
            ws = align % 16 == 0 ? 16 : (align % 4 == 0 ? 4 : 1);
            g.words[used] = f->row_bytes / (uint64_t)ws;
        }
        g.f[used] = *f;
        g.wsize[used] = ws;
        if ((uint64_t)n * g.words[used] > most) most = (uint64_t)n * g.words[used];
        used++;
    }
    if (used == 0) {
        if (!sample) return RLT_OK;
        CUDA_CHECK(bk, cuda_launch_pdl(bk, gather_sample_only_kernel,
                                       dim3(cuda_blocks(bk, (uint64_t)n, CUDA_THREADS), 1, cuda_seeds_z(bk)),
                                       dim3(CUDA_THREADS), g, idx));
        CUDA_CHECK_LAUNCH(bk, "gather_sample_only_kernel");
        return RLT_OK;
    }
    uint64_t row_words = 0;
    for (int32_t i = 0; i < used; i++) row_words += g.words[i];
    /* By blocks of rows when batched over seeds and a row has enough words for its redrawn indices to cost more than a
     * second step: 256 agents of TD3 64-64 at HalfCheetah sizes (42 words a row) gained 3% (an H200, both precisions),
     * while a single agent lost 1.4% (TD3) and 7% (the DQN MLP, 11 words), and 64 DQN MLP agents 2.4%. */
    if (cuda_seeds_z(bk) > 1 && row_words >= GATHER_ROW_WORDS_MIN && row_words <= GATHER_ROW_WORDS &&
        cuda_get(bk)->gather_rows) {
        /* Rows by the block: up to 4 words a thread, and enough blocks to fill the device twice over. */
        const uint64_t z = cuda_seeds_z(bk), want = 2u * (uint64_t)cuda_get(bk)->sm_count;
        int32_t rows = GATHER_BLOCK_ROWS;
        while (rows > 1 && (uint64_t)rows * row_words > 4u * CUDA_THREADS) rows /= 2;
        while (rows > 1 && ((uint64_t)n + (uint64_t)rows - 1) / (uint64_t)rows * z < want) rows /= 2;
        g.nf = used;
        g.rows = rows;
        dim3 grid((unsigned)((n + rows - 1) / rows), 1, (unsigned)z);
        CUDA_CHECK(bk, cuda_launch_pdl(bk, gather_rows_kernel, grid, dim3(CUDA_THREADS), g, idx));
        CUDA_CHECK_LAUNCH(bk, "gather_rows_kernel");
        return RLT_OK;
    }
    /* The field that stores the drawn indices (field 0) must cover every row: it does, since every used
     * field has at least one word per row. */
    dim3 grid(cuda_blocks(bk, most, CUDA_THREADS), (unsigned)used, cuda_seeds_z(bk));
    CUDA_CHECK(bk, cuda_launch_pdl(bk, gather_fields_kernel, grid, dim3(CUDA_THREADS), g, idx));
    CUDA_CHECK_LAUNCH(bk, "gather_fields_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_replay(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, gather_fields_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, gather_rows_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, gather_sample_only_kernel);
    return rc;
}
