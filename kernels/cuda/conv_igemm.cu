/* conv_igemm.cu: fp32 convolutions as implicit GEMMs: the im2col matrix col [R, K] (row = output pixel,
 * column = filter tap) is never written; each tile loader gathers its entries straight from the NCHW input.
 *
 *   forward      y = act(col(x) w^T + b): one kernel per layer, bias and activation in the epilogue, stored
 *                as NCHW; or, when the layer has too few pixels to fill the GPU, its taps split into S chunks
 *                whose partial sums a second kernel adds in chunk order before the bias and activation.
 *   weight grad  dw += dyr^T col(x), a sum over all R output pixels: split into S chunks of pixels (split-K)
 *                whose partial [k, K] products go to a scratch block, then summed in chunk order and added
 *                to dw by a second kernel. S depends on the shape alone, so the bits do not depend on the GPU.
 *
 * Why: at RL batch sizes the explicit path (im2col into the workspace, a cuBLAS GEMM, a bias/activation
 * pass; for dw the im2col again and a GEMM whose reduction runs over thousands of pixels in few blocks) costs
 * three or four dependent graph nodes per layer and pass, each 5-55 us for well under 1 us of arithmetic at the
 * H100's rate (docs/gpu_kernels.md). Here a layer's forward is one node and its weight gradient two.
 *
 * Tiles: 256 threads as 16 x 16; a thread owns a contiguous TM x TN block of outputs, read from shared memory
 * with vector loads. IGEMM_BK reduction steps per shared-memory tile. The forward's tiles arrive through a
 * cp.async ring of IGEMM_STAGES stages; the weight gradient's next tile is loaded into registers while the current
 * one is used. What bounds these tiles now is the latency of their shared-memory loads (ncu: short-scoreboard
 * stalls, 35% of the samples of the conv1 forward), not the FMAs, L1 or L2 (docs/gpu_kernels.md).
 *
 * Under precision: tf32 (cuda_conv_tc) both kernels keep their tiles, loaders, splits and epilogues and run the
 * tile's products on the TF32 tensor cores instead (igemm_tile_tc: WMMA m16n16k8, each input rounded to TF32, fp32
 * sums): the warps' 16 x 16 accumulators go through shared memory to the threads that own those outputs, so the
 * stores, bias, activation and split-K sums are the fp32 kernels' own. The sum order is fixed by the shape, so the
 * bits repeat run to run. */
#include <mma.h>

#include <type_traits>

#include "conv_geom.cuh"
#include "cp_async.cuh"

#define IGEMM_THREADS 256
#define IGEMM_BK 32
/* Pixels per split-K chunk at most (the chunk's pixel decompositions are kept in shared memory), and the
 * blocks the split aims at (about two per SM on an H100; a constant, so S is a function of the shape). */
#define IGEMM_CHUNK_MAX 512
#define IGEMM_DW_BLOCKS 256
/* Taps at most for the forward (its tap table lives in shared memory); wider layers take the explicit path. */
#define IGEMM_TAPS_MAX 2048

/* Where output pixel r's receptive field starts: the input offset of tap (0, 0, 0) and its row/column. */
struct igemm_pix {
    int32_t base, y0, x0;
};

__device__ __forceinline__ igemm_pix igemm_pixel(const conv_geom &g, int32_t r) {
    const int32_t P = g.oh * g.ow, img = r / P, p = r - img * P, oy = p / g.ow, ox = p - oy * g.ow;
    igemm_pix q;
    q.y0 = oy * g.stride - g.pad;
    q.x0 = ox * g.stride - g.pad;
    q.base = (img * g.c * g.h + q.y0) * g.w + q.x0;
    return q;
}

/* Tap t = (ci, ky, kx) in the order of a filter's OIHW row: its offset from a pixel's base, and (ky, kx). */
struct igemm_tap {
    int32_t off, ky, kx;
};

__device__ __forceinline__ igemm_tap igemm_tap_of(const conv_geom &g, int32_t t) {
    const int32_t khw = g.kh * g.kw, ci = t / khw, rem = t - ci * khw;
    igemm_tap q;
    q.ky = rem / g.kw;
    q.kx = rem - q.ky * g.kw;
    q.off = (ci * g.h + q.ky) * g.w + q.kx;
    return q;
}

/* col(x)[pixel, tap]: the input value under the tap, 0 in the padding. */
__device__ __forceinline__ float igemm_col(const float *__restrict__ x, const conv_geom &g, const igemm_pix &p,
                                           const igemm_tap &t) {
    const int32_t iy = p.y0 + t.ky, ix = p.x0 + t.kx;
    return (unsigned)iy < (unsigned)g.h && (unsigned)ix < (unsigned)g.w ? x[p.base + t.off] : 0.0f;
}

/* out[0..N-1] = p[0..N-1] from shared memory, as one vector load where N allows (p is N-float aligned). */
template <int N>
__device__ __forceinline__ void igemm_lds(float (&out)[N], const float *p) {
    if (N == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    } else if (N == 2) {
        const float2 v = *reinterpret_cast<const float2 *>(p);
        out[0] = v.x, out[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) out[i] = p[i];
    }
}

/* acc[i][j] += As[kk][am + i] * Bs[kk][bn + j] for kk = 0..IGEMM_BK-1, in that order. A thread's TM (TN) values
 * are contiguous, so each step is one or two vector loads from shared memory per operand: with one scalar
 * load per value, the shared-memory pipe (one 128-byte wavefront per cycle per SM) and not the FMAs would set
 * the pace. */
template <int TM, int TN, int LDA, int LDB>
__device__ __forceinline__ void igemm_tile(float (&acc)[TM][TN], const float (*As)[LDA], const float (*Bs)[LDB],
                                           int32_t am, int32_t bn) {
#pragma unroll 8
    for (int32_t kk = 0; kk < IGEMM_BK; kk++) {
        float a[TM], b[TN];
        igemm_lds<TM>(a, &As[kk][am]);
        igemm_lds<TN>(b, &Bs[kk][bn]);
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* ---- the tile's products on TF32 tensor cores (precision: tf32) ----
 * The block's BM x BN outputs are MT x NT tiles of 16 x 16, spread over its 8 warps: with 8 or more tiles each warp
 * owns TILES / 8 of them over the whole tile of taps; with fewer, KS = 8 / TILES warps share a tile, warp group s
 * taking the tile's k-steps of 8 taps kq with kq mod KS = s, and the KS partial sums are added in s order when the
 * accumulators are read back (igemm_tc_read). A is As[k][m] (AROW false) or As[m][k] (AROW), B Bs[k][n] (BCOL false)
 * or Bs[n][k] (BCOL), with leading dimensions LDA and LDB: multiples of 4 floats, and every fragment's start 32-byte
 * aligned, as WMMA asks. */
namespace wm = nvcuda::wmma;

/* The device passes for GPUs before sm_80 have no TF32 fragments: there the TC kernels are stand-ins that trap, never
 * launched (cuda_conv_tc asks for compute capability 8.0). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800 /* mma.h's own test, whose macro it undefines at its end */
#define IGEMM_TF32 1
typedef wm::fragment<wm::accumulator, 16, 16, 8, float> igemm_acc_t;
#else
struct igemm_acc_t {
    float x[1];
};
#endif

template <int MT, int NT>
struct igemm_tc {
    static constexpr int W = IGEMM_THREADS / 32, TILES = MT * NT;
    static constexpr int TPW = TILES >= W ? TILES / W : 1, KS = TILES >= W ? 1 : W / TILES;
    static_assert(TILES % W == 0 || W % TILES == 0, "tiles and warps");
    typedef igemm_acc_t acc_t;
    /* The q-th tile of this warp and its k-step group. */
    static __device__ __forceinline__ int tile(int warp, int q) { return TILES >= W ? warp + q * W : warp % TILES; }
    static __device__ __forceinline__ int group(int warp) { return TILES >= W ? 0 : warp / TILES; }
};

template <int MT, int NT, bool AROW, int LDA, bool BCOL, int LDB>
__device__ __forceinline__ void igemm_tile_tc(typename igemm_tc<MT, NT>::acc_t (&acc)[igemm_tc<MT, NT>::TPW],
                                              const float *As, const float *Bs) {
#ifndef IGEMM_TF32
    __trap();
#else
    typedef igemm_tc<MT, NT> T;
    const int warp = (int)(threadIdx.x >> 5), ks = T::group(warp);
#pragma unroll
    for (int kq = 0; kq < IGEMM_BK / 8; kq++) {
        if (kq % T::KS != ks) continue;
#pragma unroll
        for (int q = 0; q < T::TPW; q++) {
            const int t = T::tile(warp, q), mt = t % MT, nt = t / MT;
            wm::fragment<wm::matrix_a, 16, 16, 8, wm::precision::tf32,
                         typename std::conditional<AROW, wm::row_major, wm::col_major>::type> a;
            wm::fragment<wm::matrix_b, 16, 16, 8, wm::precision::tf32,
                         typename std::conditional<BCOL, wm::col_major, wm::row_major>::type> bf;
            wm::load_matrix_sync(a, As + (AROW ? mt * 16 * LDA + kq * 8 : kq * 8 * LDA + mt * 16), LDA);
            wm::load_matrix_sync(bf, Bs + (BCOL ? nt * 16 * LDB + kq * 8 : kq * 8 * LDB + nt * 16), LDB);
#pragma unroll
            for (int i = 0; i < a.num_elements; i++) a.x[i] = wm::__float_to_tf32(a.x[i]);
#pragma unroll
            for (int i = 0; i < bf.num_elements; i++) bf.x[i] = wm::__float_to_tf32(bf.x[i]);
            wm::mma_sync(acc[q], a, bf, acc[q]);
        }
    }
#endif
}

__device__ __forceinline__ void igemm_tc_zero(igemm_acc_t &acc) {
#ifdef IGEMM_TF32
    wm::fill_fragment(acc, 0.0f);
#else
    acc.x[0] = 0.0f;
#endif
}

/* The floats of shared memory igemm_tc_read needs for a BM x BN block: KS row-major copies, rows padded by 4. */
template <int MT, int NT>
__host__ __device__ constexpr int igemm_tc_floats() {
    return igemm_tc<MT, NT>::KS * 16 * MT * (16 * NT + 4);
}

/* Every warp stores its accumulators to csm (after a barrier: the tiles may share that memory), then each thread
 * reads back its own TM x TN outputs, rows m0 + i, columns n0 + j, adding the k-step groups in order. */
template <int MT, int NT, int TM, int TN>
__device__ __forceinline__ void igemm_tc_read(float (&out)[TM][TN], typename igemm_tc<MT, NT>::acc_t (&acc)[igemm_tc<MT, NT>::TPW],
                                              float *csm, int32_t m0, int32_t n0) {
    typedef igemm_tc<MT, NT> T;
    constexpr int LDC = 16 * NT + 4, PART = 16 * MT * LDC;
    const int warp = (int)(threadIdx.x >> 5);
    __syncthreads();
#ifdef IGEMM_TF32
#pragma unroll
    for (int q = 0; q < T::TPW; q++) {
        const int t = T::tile(warp, q), mt = t % MT, nt = t / MT;
        wm::store_matrix_sync(csm + T::group(warp) * PART + mt * 16 * LDC + nt * 16, acc[q], LDC, wm::mem_row_major);
    }
#else
    (void)warp, (void)acc;
#endif
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            float v = csm[(m0 + i) * LDC + n0 + j];
#pragma unroll
            for (int s = 1; s < T::KS; s++) v += csm[s * PART + (m0 + i) * LDC + n0 + j];
            out[i][j] = v;
        }
}

/* Forward: a block computes BM = 16 TM output pixels x BN = 16 TN output channels over the taps of chunk
 * blockIdx.z ([kb, kb + kchunk), all K when there is one chunk). Thread (tx, ty) owns pixels m0 + TM tx + i and
 * channels n0 + TN ty + j. A tile: As[tap][pixel]; B tile: Bs[tap][channel] = w[channel, tap] (rows padded by 4
 * floats: vector-aligned, and the column-wise stores spread over 8 banks). kind = IGEMM_PARTIAL: the chunk's
 * sums go to part[chunk, channel, pixel] for conv_igemm_fwd_sum_kernel; otherwise kind is the activation: bias,
 * activation, NCHW store. kind is an argument, not a template parameter: the epilogue's branch is uniform and costs
 * nothing measurable (Nature DQN, H200, same call: 3,142 against 3,118 updates/s in fp32, 3,854 against 3,877 under
 * tf32, the same losses), while four epilogues per tile shape and mode were 72 forward kernels for each architecture
 * (this file's build for five of them on one core of the dev VM: 404 s, now 64 s).
 * Chunks exist because one pass over all taps is a chain of K dependent steps per thread: with few blocks (a
 * layer of 1,568 pixels makes 25) the SMs wait on latency, not arithmetic (ncu: 0.36 instructions per cycle).
 * The tiles stream through a ring of IGEMM_STAGES shared-memory stages filled by cp.async, so a block waits on
 * one round trip to L2 per IGEMM_STAGES - 1 tiles and holds no prefetch registers (48-64 registers, against 99
 * with one tile prefetched into registers: up to 5 blocks per SM instead of 2). */
#define IGEMM_PARTIAL (-1)
#define IGEMM_STAGES 4

/* How a forward runs its tiles: IGEMM_SIMT, fp32 FMAs (As[tap][pixel], Bs[tap][channel]); IGEMM_TC, TF32 tensor cores
 * with A gathered as in IGEMM_SIMT and B as Bs[channel][tap], copied 16 bytes at a time where K is a multiple of 4;
 * IGEMM_TC_AV, the same with A as As[pixel][tap] in 16-byte copies too, for layers whose taps come in aligned
 * fours (igemm_fwd_avec: a filter width, stride, padding and input width that are multiples of 4, as the Nature
 * torso's first layer's). ncu on that layer's forward for 16 agents (tf32, batched): L1 85% busy with the 4-byte
 * copies, SM issue 63%; the tensor cores alone did not make it faster. */
#define IGEMM_SIMT 0
#define IGEMM_TC 1
#define IGEMM_TC_AV 2

/* The forward's dynamic shared memory: IGEMM_STAGES tiles (A, then B at B_AT), then the chunk's tap table. A row of
 * taps is LDK = IGEMM_BK + 4 floats (16-byte aligned rows, stores spread over the banks). */
template <int BM, int BN, int MODE>
struct igemm_fwd_smem {
    static constexpr int LDK = IGEMM_BK + 4;
    static constexpr int LDA = MODE == IGEMM_TC_AV ? LDK : BM, LDB = MODE == IGEMM_SIMT ? BN + 4 : LDK;
    static constexpr int B_AT = MODE == IGEMM_TC_AV ? BM * LDK : IGEMM_BK * BM;
    static constexpr int STAGE = B_AT + (MODE == IGEMM_SIMT ? IGEMM_BK * LDB : BN * LDK);
    static size_t bytes(int32_t kchunk_tiles) {
        return (size_t)IGEMM_STAGES * STAGE * 4 + (size_t)kchunk_tiles * IGEMM_BK * sizeof(int2);
    }
};

template <int TM, int TN, int MODE>
__global__ void __launch_bounds__(IGEMM_THREADS)
    conv_igemm_fwd_kernel(float *__restrict__ y, float *__restrict__ part, const float *__restrict__ x,
                          const float *__restrict__ w, const float *__restrict__ b, conv_geom g, int32_t kchunk,
                          cuda_seeds sd, int32_t S, int32_t kind) {
    constexpr int BM = 16 * TM, BN = 16 * TN;
    /* blockIdx.z = agent * S + chunk: batched over seeds, the agent's buffers lie its delta from the lead's. */
    const int32_t zc = (int32_t)blockIdx.z % S;
    if (sd.delta) {
        const int64_t dz = sd.delta[blockIdx.z / S];
        y = cuda_at(y, dz), part = cuda_at(part, dz), x = cuda_at(x, dz), w = cuda_at(w, dz);
        if (b) b = cuda_at(b, dz);
    }
    constexpr bool TC = MODE != IGEMM_SIMT;
    typedef igemm_fwd_smem<BM, BN, MODE> SM;
    constexpr int LDA = SM::LDA, LDB = SM::LDB, LDK = SM::LDK;
    constexpr int ASTEP = IGEMM_THREADS / BM, AQ = IGEMM_BK / ASTEP;        /* A copies per thread per tile */
    constexpr int BSTEP = IGEMM_THREADS / IGEMM_BK, BQ = BN / BSTEP;        /* B copies per thread per tile */
    /* 16-byte copies: a tile row of taps is 8 of them; thread tid takes rows (tid + 256 q) / 8. */
    constexpr int AVQ = (BM * 8 + IGEMM_THREADS - 1) / IGEMM_THREADS, BVQ = (BN * 8 + IGEMM_THREADS - 1) / IGEMM_THREADS;
    extern __shared__ __align__(128) float sm[];
    /* The chunk's taps as (offset, ky << 16 | kx), decomposed once per block: the per-element divisions would
     * otherwise cost more instructions than the FMAs they feed. Taps past the chunk get ky out of range, so
     * they read as 0. */
    int2 *taps = reinterpret_cast<int2 *>(sm + IGEMM_STAGES * SM::STAGE);
    const int32_t K = g.c * g.kh * g.kw, P = g.oh * g.ow, R = g.n * P;
    const int32_t kb = zc * kchunk, ke = min(K, kb + kchunk);
    const int32_t T = (ke - kb + IGEMM_BK - 1) / IGEMM_BK; /* tiles of this chunk */
    const int32_t tid = (int32_t)threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int32_t m0 = (int32_t)blockIdx.x * BM, n0 = (int32_t)blockIdx.y * BN;
    for (int32_t i = tid; i < T * IGEMM_BK; i += IGEMM_THREADS) {
        const int32_t t = kb + i;
        const igemm_tap q = igemm_tap_of(g, t < ke ? t : 0);
        taps[i] = make_int2(q.off, t < ke ? (q.ky << 16) | q.kx : 0x4000 << 16);
    }
    /* This thread always copies the same pixel row of A (BM divides the block) and the same tap column of B; a
     * row past R gets a receptive field that starts out of range, so it reads as 0 too. */
    const int32_t am = tid % BM, at = tid / BM, bt = tid % IGEMM_BK, bn = tid / IGEMM_BK;
    igemm_pix pix = igemm_pixel(g, m0 + am < R ? m0 + am : 0);
    if (m0 + am >= R) pix.y0 = -0x40000;
    igemm_pix pv[AVQ]; /* IGEMM_TC_AV: the pixels of this thread's 16-byte rows */
    if (MODE == IGEMM_TC_AV)
#pragma unroll
        for (int q = 0; q < AVQ; q++) {
            const int32_t r = m0 + ((tid + q * IGEMM_THREADS) >> 3);
            pv[q] = igemm_pixel(g, r < R ? r : 0);
            if (r >= R) pv[q].y0 = -0x40000;
        }
    const bool bvec = TC && ((K & 3) | ((uintptr_t)w & 15)) == 0; /* B's rows start 16-byte aligned */
    float acc[TM][TN] = {};
    typename igemm_tc<TM, TN>::acc_t tacc[igemm_tc<TM, TN>::TPW];
    if (TC)
#pragma unroll
        for (int q = 0; q < igemm_tc<TM, TN>::TPW; q++) igemm_tc_zero(tacc[q]);
    __syncthreads();
    cuda_pdl_wait();
    cuda_pdl_trigger();
    auto load = [&](int32_t i) { /* tile i (chunk taps i BK ..) into stage i mod IGEMM_STAGES */
        float *As = sm + (i % IGEMM_STAGES) * SM::STAGE, *Bs = As + SM::B_AT;
        const int32_t i0 = i * IGEMM_BK;
        if (MODE == IGEMM_TC_AV) {
            /* Four taps (ci, ky, kx..kx+3) are four floats of x, 16-byte aligned, all inside a row or all outside
             * (igemm_fwd_avec). */
#pragma unroll
            for (int q = 0; q < AVQ; q++) {
                const int32_t e = tid + q * IGEMM_THREADS, m = e >> 3, kg = (e & 7) * 4;
                if (BM * 8 % IGEMM_THREADS != 0 && m >= BM) break;
                const int2 tp = taps[i0 + kg];
                const int32_t iy = pv[q].y0 + (tp.y >> 16), ix = pv[q].x0 + (tp.y & 0xffff);
                const bool ok = (unsigned)iy < (unsigned)g.h && (unsigned)ix < (unsigned)g.w;
                cp_async16<true>(&As[m * LDK + kg], ok ? x + pv[q].base + tp.x : x, ok ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int q = 0; q < AQ; q++) {
                const int2 tp = taps[i0 + at + q * ASTEP];
                const int32_t iy = pix.y0 + (tp.y >> 16), ix = pix.x0 + (tp.y & 0xffff);
                const bool ok = (unsigned)iy < (unsigned)g.h && (unsigned)ix < (unsigned)g.w;
                cp_async4(&As[(at + q * ASTEP) * LDA + am], ok ? x + pix.base + tp.x : x, ok);
            }
        }
        if (MODE == IGEMM_SIMT) {
#pragma unroll
            for (int q = 0; q < BQ; q++) {
                const int32_t n = n0 + bn + q * BSTEP, t = kb + i0 + bt;
                const bool ok = n < g.k && t < ke;
                cp_async4(&Bs[bt * LDB + bn + q * BSTEP], ok ? w + (int64_t)n * K + t : w, ok);
            }
        } else if (bvec) { /* Bs[channel][tap], four taps a copy (the chunk ends on a multiple of 4 taps too) */
#pragma unroll
            for (int q = 0; q < BVQ; q++) {
                const int32_t e = tid + q * IGEMM_THREADS, nl = e >> 3, kg = (e & 7) * 4, t = kb + i0 + kg;
                if (BN * 8 % IGEMM_THREADS != 0 && nl >= BN) break;
                const bool ok = n0 + nl < g.k && t < ke;
                cp_async16<true>(&Bs[nl * LDK + kg], ok ? w + (int64_t)(n0 + nl) * K + t : w, ok ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int q = 0; q < BQ; q++) {
                const int32_t nl = bn + q * BSTEP, t = kb + i0 + bt;
                const bool ok = n0 + nl < g.k && t < ke;
                cp_async4(&Bs[nl * LDK + bt], ok ? w + (int64_t)(n0 + nl) * K + t : w, ok);
            }
        }
    };
    cp_async_ring<IGEMM_STAGES>(T, load, [&](int32_t i) {
        const float *As = sm + (i % IGEMM_STAGES) * SM::STAGE, *Bs = As + SM::B_AT;
        if (TC) igemm_tile_tc<TM, TN, MODE == IGEMM_TC_AV, LDA, true, LDB>(tacc, As, Bs);
        else igemm_tile<TM, TN, LDA, LDB>(acc, reinterpret_cast<const float(*)[LDA]>(As),
                                          reinterpret_cast<const float(*)[LDB]>(Bs), TM * tx, TN * ty);
    });
    /* The ring is free now: the tensor cores' sums come back through it (IGEMM_FWD checks that they fit). */
    if (TC) igemm_tc_read<TM, TN, TM, TN>(acc, tacc, sm, TM * tx, TN * ty);
    auto store = [&](int32_t r, int32_t o, float v) { /* output pixel r, channel o */
        if (kind == IGEMM_PARTIAL) {
            part[((int64_t)zc * g.k + o) * R + r] = v;
            return;
        }
        const int32_t img = r / P, p = r - img * P;
        y[((int64_t)img * g.k + o) * P + p] = cuda_act(v + (b ? b[o] : 0.0f), kind);
    };
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int32_t r = m0 + TM * tx + i;
        if (r >= R) continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int32_t o = n0 + TN * ty + j;
            if (o < g.k) store(r, o, acc[i][j]);
        }
    }
}

/* y[img, o, p] = act(part[0, o, r] + ... + part[S-1, o, r] + b[o]) with r = img P + p, chunks in order. */
__global__ void conv_igemm_fwd_sum_kernel(float *__restrict__ y, const float *__restrict__ part,
                                          const float *__restrict__ b, int32_t k, int32_t P, int32_t R, int32_t S,
                                          cuda_seeds sd, int32_t act) {
    cuda_pdl_wait();
    cuda_pdl_trigger();
    y = cuda_seed_ptr(sd, y), part = cuda_seed_ptr(sd, part), b = cuda_seed_ptr(sd, b); /* grid z: the agent */
    const int32_t total = R * k;
    for (int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); e < total; e += (int32_t)(gridDim.x * blockDim.x)) {
        const int32_t q = e / P, p = e - q * P, img = q / k, o = q - img * k, r = img * P + p;
        float z = 0.0f;
#pragma unroll 4
        for (int32_t s = 0; s < S; s++) z += part[((int64_t)s * k + o) * R + r];
        z += b ? b[o] : 0.0f;
        y[e] = cuda_act(z, act);
    }
}

/* Weight gradient, one chunk of pixels: part[s, o, t] = sum over pixels r of chunk s (in order) of
 * dyr[r, o] col(x)[r, t]. A block computes BM = 16 TM channels x 64 taps; thread (tx, ty) owns channels
 * o0 + TM ty + i and taps t0 + 4 tx + j (a warp's stores cover 64 consecutive taps).
 * A tile: As[pixel][channel] = dyr rows; B tile: Bs[pixel][tap] gathered from x. */
template <int TM, bool TC>
__global__ void __launch_bounds__(IGEMM_THREADS)
    conv_igemm_dw_kernel(float *__restrict__ part, const float *__restrict__ dyr, const float *__restrict__ x,
                         conv_geom g, int32_t chunk, cuda_seeds sd, int32_t S) {
    constexpr int BM = 16 * TM, BN = 64, TN = 4;
    constexpr int ASTEP = IGEMM_THREADS / BM, AQ = IGEMM_BK / ASTEP;
    constexpr int BSTEP = IGEMM_THREADS / BN, BQ = IGEMM_BK / BSTEP;
    /* The A and B tiles, and under TC the accumulators' way back (igemm_tc_read) in the same memory. */
    constexpr int TILES = IGEMM_BK * (BM + BN), READ = TC ? igemm_tc_floats<TM, BN / 16>() : 0;
    __shared__ __align__(128) float smem[TILES > READ ? TILES : READ];
    float(*As)[BM] = reinterpret_cast<float(*)[BM]>(smem);
    float(*Bs)[BN] = reinterpret_cast<float(*)[BN]>(smem + IGEMM_BK * BM);
    __shared__ igemm_pix pixs[IGEMM_CHUNK_MAX];
    const int32_t K = g.c * g.kh * g.kw, R = g.n * g.oh * g.ow;
    const int32_t tid = (int32_t)threadIdx.x, tx = tid & 15, ty = tid >> 4;
    /* blockIdx.z = agent * S + chunk, as in the forward. */
    const int32_t t0 = (int32_t)blockIdx.x * BN, o0 = (int32_t)blockIdx.y * BM, s = (int32_t)blockIdx.z % S;
    if (sd.delta) {
        const int64_t dz = sd.delta[blockIdx.z / S];
        part = cuda_at(part, dz), dyr = cuda_at(dyr, dz), x = cuda_at(x, dz);
    }
    const int32_t r0 = s * chunk, rn = min(chunk, R - r0);
    const int32_t am = tid % BM, ar = tid / BM, bt = tid % BN, br = tid / BN;
    for (int32_t i = tid; i < rn; i += IGEMM_THREADS) pixs[i] = igemm_pixel(g, r0 + i);
    const bool tcol = t0 + bt < K;
    const igemm_tap tap = igemm_tap_of(g, tcol ? t0 + bt : 0);
    float ra[AQ], rb[BQ], acc[TM][TN] = {};
    typename igemm_tc<TM, BN / 16>::acc_t tacc[igemm_tc<TM, BN / 16>::TPW];
    if (TC)
#pragma unroll
        for (int q = 0; q < igemm_tc<TM, BN / 16>::TPW; q++) igemm_tc_zero(tacc[q]);
    __syncthreads();
    cuda_pdl_wait();
    cuda_pdl_trigger();
    auto load = [&](int32_t k0) {
#pragma unroll
        for (int q = 0; q < AQ; q++) {
            const int32_t rr = k0 + ar + q * ASTEP;
            ra[q] = rr < rn && o0 + am < g.k ? dyr[(int64_t)(r0 + rr) * g.k + o0 + am] : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < BQ; q++) {
            const int32_t rr = k0 + br + q * BSTEP;
            rb[q] = rr < rn && tcol ? igemm_col(x, g, pixs[rr], tap) : 0.0f;
        }
    };
    load(0);
    for (int32_t k0 = 0; k0 < rn; k0 += IGEMM_BK) {
#pragma unroll
        for (int q = 0; q < AQ; q++) As[ar + q * ASTEP][am] = ra[q];
#pragma unroll
        for (int q = 0; q < BQ; q++) Bs[br + q * BSTEP][bt] = rb[q];
        __syncthreads();
        if (k0 + IGEMM_BK < rn) load(k0 + IGEMM_BK);
        if (TC) igemm_tile_tc<TM, BN / 16, false, BM, false, BN>(tacc, &As[0][0], &Bs[0][0]);
        else igemm_tile<TM, TN, BM, BN>(acc, As, Bs, TM * ty, TN * tx);
        __syncthreads();
    }
    if (TC) igemm_tc_read<TM, BN / 16, TM, TN>(acc, tacc, smem, TM * ty, TN * tx);
    float *dst = part + (int64_t)s * g.k * K;
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int32_t o = o0 + TM * ty + i;
        if (o >= g.k) continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int32_t t = t0 + TN * tx + j;
            if (t < K) dst[(int64_t)o * K + t] = acc[i][j];
        }
    }
}

/* dw[e] += part[0, e] + part[1, e] + ... + part[S-1, e], left to right. */
__global__ void conv_igemm_dw_sum_kernel(float *__restrict__ dw, const float *__restrict__ part, int32_t n, int32_t S,
                                         cuda_seeds sd) {
    cuda_pdl_wait();
    cuda_pdl_trigger();
    dw = cuda_seed_ptr(sd, dw), part = cuda_seed_ptr(sd, part); /* grid z: the agent */
    for (int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); e < n; e += (int32_t)(gridDim.x * blockDim.x)) {
        float acc = 0.0f;
#pragma unroll 8
        for (int32_t s = 0; s < S; s++) acc += part[(int64_t)s * n + e];
        dw[e] += acc;
    }
}

/* The split of the weight gradient's R pixels: chunks of a multiple of IGEMM_BK pixels, about IGEMM_DW_BLOCKS
 * blocks in all. A function of the shape alone. */
static int32_t igemm_dw_tm(const conv_geom &g) { return g.k <= 32 ? 2 : 4; }

static int32_t igemm_dw_chunk(const conv_geom &g) {
    const int64_t R = (int64_t)g.n * g.oh * g.ow, K = (int64_t)g.c * g.kh * g.kw;
    const int64_t tiles = ((K + 63) / 64) * ((g.k + 16 * igemm_dw_tm(g) - 1) / (16 * igemm_dw_tm(g)));
    const int64_t want = tiles >= IGEMM_DW_BLOCKS ? 1 : IGEMM_DW_BLOCKS / tiles;
    int64_t chunk = (R + want - 1) / want;
    chunk = (chunk + IGEMM_BK - 1) / IGEMM_BK * IGEMM_BK;
    return (int32_t)(chunk > IGEMM_CHUNK_MAX ? IGEMM_CHUNK_MAX : chunk);
}

int conv_igemm_fits(const conv_geom &g) {
    /* The tap table, 32-bit offsets into x, and kx within 16 bits. */
    return (int64_t)g.c * g.kh * g.kw <= IGEMM_TAPS_MAX && g.kw < 0x4000 && g.kh < 0x4000;
}

uint64_t conv_igemm_part_floats(const conv_geom &g) {
    const int64_t R = (int64_t)g.n * g.oh * g.ow, chunk = igemm_dw_chunk(g);
    return (uint64_t)((R + chunk - 1) / chunk) * (uint64_t)g.k * (uint64_t)g.c * g.kh * g.kw;
}

/* Pixels per forward block: 32, or 64 for layers of many pixels (the Nature torso at batch 32 ran fastest with
 * 32 on every layer: 3,131 against 3,045 updates/s with 64 on conv1 and 16 on the others), 16 for tiny ones.
 * The height fixes the tap chunks (below), so it is a function of the shape alone. */
static int32_t igemm_fwd_tm(const conv_geom &g) {
    const int64_t R = (int64_t)g.n * g.oh * g.ow;
    return R >= 64 * 512 ? 4 : R >= 32 * 16 ? 2 : 1;
}

/* Taps per forward chunk (a multiple of IGEMM_BK): one chunk when the tiles alone make IGEMM_FWD_BLOCKS blocks,
 * else enough chunks for about that many, with at most K / k of them so their partial sums fit in col's place
 * (R k S <= R K). A function of the shape alone (the tile height is fixed by the shape too), so the bits do not
 * depend on the GPU. */
#define IGEMM_FWD_BLOCKS 384
static int32_t igemm_fwd_kchunk(const conv_geom &g, int32_t tm) {
    const int64_t R = (int64_t)g.n * g.oh * g.ow, K = (int64_t)g.c * g.kh * g.kw;
    const int64_t bm = 16 * tm, bn = g.k <= 32 ? 32 : 64;
    const int64_t tiles = ((R + bm - 1) / bm) * ((g.k + bn - 1) / bn);
    int64_t S = tiles >= IGEMM_FWD_BLOCKS ? 1 : (IGEMM_FWD_BLOCKS + tiles - 1) / tiles;
    if (S > K / g.k) S = K / g.k;
    if (S > (K + IGEMM_BK - 1) / IGEMM_BK) S = (K + IGEMM_BK - 1) / IGEMM_BK;
    if (S < 1) S = 1;
    int64_t kchunk = (K + S - 1) / S;
    kchunk = (kchunk + IGEMM_BK - 1) / IGEMM_BK * IGEMM_BK;
    return (int32_t)(kchunk > IGEMM_TAPS_MAX ? IGEMM_TAPS_MAX : kchunk);
}

/* kind: IGEMM_PARTIAL (split-K partial sums) or the activation of a one-chunk forward. */
template <int MODE>
static cudaError_t igemm_fwd_mode(rlt_backend *bk, int kind, int32_t tm, int32_t tn, dim3 grid, float *y, float *part,
                                  const float *x, const float *w, const float *b, const conv_geom &g, int32_t kchunk,
                                  int32_t S) {
    const cuda_seeds sd = cuda_seeds_of(bk);
    const dim3 block(IGEMM_THREADS);
    const int32_t kt = (kchunk + IGEMM_BK - 1) / IGEMM_BK;
#define IGEMM_FWD(TM_, TN_) \
    static_assert(igemm_tc_floats<TM_, TN_>() <= igemm_fwd_smem<16 * TM_, 16 * TN_, MODE>::STAGE * IGEMM_STAGES, "read"); \
    if (tm == TM_ && tn == TN_) \
        return cuda_launch_pdl_smem(bk, conv_igemm_fwd_kernel<TM_, TN_, MODE>, grid, block, \
                                    igemm_fwd_smem<16 * TM_, 16 * TN_, MODE>::bytes(kt), y, part, x, w, b, g, kchunk, sd, S, \
                                    (int32_t)kind)
    IGEMM_FWD(4, 2); IGEMM_FWD(2, 2); IGEMM_FWD(1, 2); IGEMM_FWD(4, 4); IGEMM_FWD(2, 4); IGEMM_FWD(1, 4);
#undef IGEMM_FWD
    return cudaErrorInvalidValue;
}

/* Whether a layer's taps come in aligned fours (IGEMM_TC_AV): four consecutive taps (ci, ky, kx..kx+3), kx a multiple
 * of 4, are four consecutive floats of x starting 16-byte aligned, all inside the input row or all in the padding. */
static int igemm_fwd_avec(const conv_geom &g, const float *x) {
    return g.kw % 4 == 0 && g.stride % 4 == 0 && g.pad % 4 == 0 && g.w % 4 == 0 && ((uintptr_t)x & 15) == 0;
}

int conv_igemm_forward(rlt_backend *bk, const conv_geom &g, float *y, const float *x, const float *w, const float *b,
                       int32_t act, float *part) {
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "conv_forward");
    const int32_t tm = igemm_fwd_tm(g), tn = g.k <= 32 ? 2 : 4, kchunk = igemm_fwd_kchunk(g, tm);
    const int32_t R = g.n * g.oh * g.ow, K = g.c * g.kh * g.kw, S = (K + kchunk - 1) / kchunk;
    /* Batched over seeds, grid z runs over the agents' chunks: agent a's chunk c is z = a S + c. */
    const unsigned zn = cuda_seeds_z(bk);
    CUDA_REQUIRE(bk, (uint64_t)S * zn <= 65535u, "conv_forward (seeds x chunks past the grid's z)");
    dim3 grid((unsigned)((R + 16 * tm - 1) / (16 * tm)), (unsigned)((g.k + 16 * tn - 1) / (16 * tn)), (unsigned)S * zn);
    const int kind = S > 1 ? IGEMM_PARTIAL : act;
    cudaError_t rc = !cuda_conv_tc(bk) ? igemm_fwd_mode<IGEMM_SIMT>(bk, kind, tm, tn, grid, y, part, x, w, b, g, kchunk, S)
                     : igemm_fwd_avec(g, x) ? igemm_fwd_mode<IGEMM_TC_AV>(bk, kind, tm, tn, grid, y, part, x, w, b, g, kchunk, S)
                                            : igemm_fwd_mode<IGEMM_TC>(bk, kind, tm, tn, grid, y, part, x, w, b, g, kchunk, S);
    CUDA_CHECK(bk, rc);
    CUDA_CHECK_LAUNCH(bk, "conv_igemm_fwd_kernel");
    if (S == 1) return RLT_OK;
    const int32_t P = g.oh * g.ow;
    const dim3 sg(cuda_blocks(bk, (uint64_t)R * g.k, IGEMM_THREADS), 1, zn), sb(IGEMM_THREADS);
    const cuda_seeds sd = cuda_seeds_of(bk);
    rc = cuda_launch_pdl(bk, conv_igemm_fwd_sum_kernel, sg, sb, y, (const float *)part, b, g.k, P, R, S, sd, act);
    CUDA_CHECK(bk, rc);
    CUDA_CHECK_LAUNCH(bk, "conv_igemm_fwd_sum_kernel");
    return RLT_OK;
}

int conv_igemm_weight_grad(rlt_backend *bk, const conv_geom &g, float *dw, const float *dyr, const float *x, float *part) {
    const int32_t R = g.n * g.oh * g.ow, K = g.c * g.kh * g.kw, tm = igemm_dw_tm(g), chunk = igemm_dw_chunk(g);
    const int32_t S = (R + chunk - 1) / chunk;
    const unsigned zn = cuda_seeds_z(bk);
    const cuda_seeds sd = cuda_seeds_of(bk);
    CUDA_REQUIRE(bk, (uint64_t)S * zn <= 65535u, "conv_backward (seeds x chunks past the grid's z)");
    dim3 grid((unsigned)((K + 63) / 64), (unsigned)((g.k + 16 * tm - 1) / (16 * tm)), (unsigned)S * zn);
    const dim3 block(IGEMM_THREADS);
    if (cuda_conv_tc(bk)) {
        if (tm == 2) CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_igemm_dw_kernel<2, true>, grid, block, part, dyr, x, g, chunk, sd, S));
        else CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_igemm_dw_kernel<4, true>, grid, block, part, dyr, x, g, chunk, sd, S));
    } else if (tm == 2) CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_igemm_dw_kernel<2, false>, grid, block, part, dyr, x, g, chunk, sd, S));
    else CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_igemm_dw_kernel<4, false>, grid, block, part, dyr, x, g, chunk, sd, S));
    CUDA_CHECK_LAUNCH(bk, "conv_igemm_dw_kernel");
    const int32_t n = g.k * K;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_igemm_dw_sum_kernel, dim3(cuda_blocks(bk, (uint64_t)n, IGEMM_THREADS), 1, zn),
                                   dim3(IGEMM_THREADS), dw, (const float *)part, n, S, sd));
    CUDA_CHECK_LAUNCH(bk, "conv_igemm_dw_sum_kernel");
    return RLT_OK;
}

/* Loads a forward kernel and allows it the dynamic shared memory of the largest tap chunk. */
template <int TM, int TN, int MODE>
static cudaError_t igemm_fwd_allow_mode(cudaError_t rc) {
    if (rc != cudaSuccess) return rc;
    return cudaFuncSetAttribute(conv_igemm_fwd_kernel<TM, TN, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)igemm_fwd_smem<16 * TM, 16 * TN, MODE>::bytes(IGEMM_TAPS_MAX / IGEMM_BK));
}

template <int TM, int TN>
static cudaError_t igemm_fwd_allow(cudaError_t rc) {
    rc = igemm_fwd_allow_mode<TM, TN, IGEMM_SIMT>(rc);
    rc = igemm_fwd_allow_mode<TM, TN, IGEMM_TC>(rc);
    return igemm_fwd_allow_mode<TM, TN, IGEMM_TC_AV>(rc);
}

cudaError_t conv_igemm_preload(void) {
    cudaFuncAttributes a;
    cudaError_t rc = igemm_fwd_allow<1, 2>(cudaSuccess);
    rc = igemm_fwd_allow<2, 2>(rc);
    rc = igemm_fwd_allow<4, 2>(rc);
    rc = igemm_fwd_allow<1, 4>(rc);
    rc = igemm_fwd_allow<2, 4>(rc);
    rc = igemm_fwd_allow<4, 4>(rc);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_igemm_fwd_sum_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_igemm_dw_kernel<2, false>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_igemm_dw_kernel<4, false>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_igemm_dw_kernel<2, true>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_igemm_dw_kernel<4, true>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_igemm_dw_sum_kernel);
    return rc;
}
