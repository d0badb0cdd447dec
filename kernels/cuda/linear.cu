/* linear.cu: fused dense layers. linear_forward is the GEMM, the bias and the activation in one launch;
 * linear_backward is the weight gradient, the bias gradient and the input gradient (through the previous
 * layer's activation) in one launch. The CUDA twins of cpu_linear_forward and cpu_linear_backward
 * (kernels/cpu/fused.c), which are the plain gemm, bias_act, bias_grad and act_grad in sequence.
 *
 * Why our own kernels: at RL sizes (batches of 128-256 rows, layers of 64-512 units) one layer is at most a
 * few million multiply-adds, under a microsecond of the GPU's fp32 arithmetic. An update is a chain of such
 * layers, and what it costs is the number of dependent launches, each a few microseconds: cuBLAS plus our
 * elementwise kernels made a layer's forward two launches and its backward four. Here each is one.
 *
 * One kernel serves every problem, chosen per block from up to two problem descriptors (a backward launch
 * carries the weight-gradient problem and the input-gradient problem; both read only dy). Each problem is
 * C[m, n] = sum_k A(m, k) B(k, n) followed by an epilogue:
 *   FWD  C = act(acc + bias[n])                        (A = x, B = W^T)
 *   DW   C = beta C + acc, and the bias gradient as an extra column of B equal to 1, so db comes out of the
 *        same sums in the same order                   (A = dy^T, B = x)
 *   DX   C = act'(x) * acc, act' through the activation's output x, as act_grad   (A = dy, B = W)
 * and runs one of three paths:
 *   GEMM   32x32 (or 16x32) output tiles, 256 threads, the K range of each chunk split over 4 (or 8) groups
 *          of threads whose partial sums are added in a fixed order at the end; operands stream through
 *          shared memory in chunks of 32 k, 4 chunks in flight (cp.async on sm_80 and later).
 *   ROWDOT narrow outputs (N <= 8, a critic's single Q or an actor's few actions): a warp per row, lanes
 *          over k, a butterfly of shuffles (every lane ends with the same bits) to finish.
 *   COLSUM weight gradients of narrow layers (M <= 8 outputs): lanes over columns, warps over k, partial
 *          sums added in warp order.
 * Every sum runs in an order fixed by the shapes alone: the same bits on every run. The order differs from
 * OpenBLAS's, so results agree with the CPU to the rounding of a length-K dot product (the parity test's
 * GEMM bound), not bit for bit. The epilogues' expressions are the CPU twins' term for term (no FMA
 * contraction in this module; the products inside the sums are explicit fmaf). K above LIN_MAX_K (a
 * Nature CNN's 3136-wide flatten) goes to cuBLAS, which splits K across blocks. */
#include <string.h>

#include "cp_async.cuh"
#include "cuda_ops.h"

enum { LIN_EPI_FWD = 0, LIN_EPI_DW = 1, LIN_EPI_DX = 2 };
enum { LIN_PATH_GEMM32 = 0, LIN_PATH_GEMM16 = 1, LIN_PATH_ROWDOT = 2, LIN_PATH_COLSUM = 3 };

#define LIN_THREADS 256
#define LIN_BN 32
#define LIN_BK 32
#define LIN_STAGES 4
#define LIN_PAD 4 /* floats added to each shared-memory row: keeps 16-byte alignment, spreads the banks */
#define LIN_SK (LIN_BK + LIN_PAD) /* row stride of a tile stored a row of k per m (n) */
#define LIN_SMEM_FLOATS (LIN_STAGES * LIN_BK * ((32 + LIN_PAD) + (LIN_BN + LIN_PAD)))
#define LIN_ROWDOT_MAXN 8
#define LIN_COLSUM_MAXM 8
/* Above this K, our kernels (which never split K across blocks) would leave most of the GPU idle. */
#define LIN_MAX_K 1024
/* A problem with fewer 32x32 tiles than this uses 16x32 tiles: twice the blocks, half the work each. */
#define LIN_SMALL_TILES 96

typedef struct lin_problem {
    const float *A, *B;
    float *C;          /* [M, N], row stride ldc */
    float *C2;         /* DW with the ones column: db [M] */
    const float *aux;  /* FWD: bias [N] or NULL; DX: the activation's output x [M, N], row stride ld_aux */
    int32_t M, N, K;   /* N real output columns; with ones, column N is the bias gradient */
    int32_t lda, ldb, ldc, ld_aux;
    int32_t a_kcont;   /* A(m, k) = a_kcont ? A[m lda + k] : A[k lda + m] */
    int32_t b_kcont;   /* B(k, n) = b_kcont ? B[n ldb + k] : B[k ldb + n] */
    int32_t ones, epi, act, path;
    int32_t a_vec, b_vec; /* the operand's rows are 16-byte aligned: copied 4 floats at a time */
    int32_t tiles_n;   /* GEMM: output tiles along n */
    int32_t tiles;     /* blocks this problem takes */
    float beta;
} lin_problem;

typedef struct lin_launch {
    lin_problem p[2];
} lin_launch;

/* The epilogue of one output element (see the file comment). */
__device__ __forceinline__ void lin_store(const lin_problem &p, int32_t m, int32_t n, float v) {
    if (p.epi == LIN_EPI_DW) {
        float *d = n == p.N ? p.C2 + m : p.C + (int64_t)m * p.ldc + n;
        *d = p.beta == 0.0f ? v : p.beta * *d + v;
    } else if (p.epi == LIN_EPI_FWD) {
        p.C[(int64_t)m * p.ldc + n] = cuda_act(v + (p.aux ? p.aux[n] : 0.0f), p.act);
    } else {
        float x = p.aux[(int64_t)m * p.ld_aux + n];
        if (p.act == RLT_ACT_RELU) v = x > 0.0f ? v : 0.0f;
        else if (p.act == RLT_ACT_TANH) v *= 1.0f - x * x;
        p.C[(int64_t)m * p.ldc + n] = v;
    }
}

/* The copies of one operand's tiles (R rows of m or n, LIN_BK of k per chunk) into shared memory. An operand
 * contiguous along k (ROWK: x and W in a forward, dy in an input gradient) is stored a row of k per m (n), row
 * stride LIN_SK; one contiguous along m (n) (dy and x in a weight gradient, W in an input gradient) is stored a
 * row of m (n) per k, row stride R + LIN_PAD. Either way the copies follow the contiguous direction, in groups
 * of 4 floats (16-byte copies) when the operand's rows are 16-byte aligned, else float by float. A group past
 * the operand's edge reads only its real floats and zero-fills the rest; the ones column of a weight gradient's
 * x (the bias gradient, see the file comment) is written element by element. The values in shared memory, and
 * so the sums, do not depend on how they were copied. */
template <int R, bool ROWK>
struct lin_copier {
    static constexpr int BK = LIN_BK;
    static constexpr int E = R * BK / LIN_THREADS;               /* floats per thread per chunk */
    static constexpr int G = (R * BK / 4 + LIN_THREADS - 1) / LIN_THREADS; /* groups of 4 per thread */
    static_assert(E >= G && (R * BK) % LIN_THREADS == 0, "whole floats per thread");
    const float *base;
    int64_t step;      /* floats from one chunk to the next */
    int32_t K, vec;
    int so[E], kl[E], rv[E]; /* smem offset; k in the chunk (BK: nothing to copy); row ok, or floats along r */
    bool one[E];       /* the element (k-major) or group (vec) holding the ones column */
    const float *src[E];

    __device__ __forceinline__ void init(const float *X, int32_t ld, int32_t rows, int32_t r0, int32_t K_, int32_t vec_,
                                         int32_t kcont, int32_t ones_at) {
        const int t = threadIdx.x;
        base = X, K = K_, vec = vec_ && (ROWK || !kcont);
        step = kcont ? BK : (int64_t)BK * ld;
        if (vec) {
#pragma unroll
            for (int i = 0; i < G; i++) {
                const int e = t + i * LIN_THREADS;
                int rl, kq;
                if (ROWK) rl = e / (BK / 4), kq = (e % (BK / 4)) * 4;
                else kq = e / (R / 4), rl = (e % (R / 4)) * 4;
                const int32_t r = r0 + rl, left = rows - r;
                so[i] = ROWK ? rl * LIN_SK + kq : kq * (R + LIN_PAD) + rl;
                kl[i] = e < R * BK / 4 ? kq : BK;
                one[i] = !ROWK && ones_at >= 0 && r <= ones_at && ones_at <= r + 3;
                rv[i] = ROWK ? left > 0 : (left >= 4 ? 4 : (left > 0 ? left : 0));
                src[i] = (ROWK ? left > 0 : rv[i] > 0) ? X + (ROWK ? (int64_t)r * ld + kq : (int64_t)kq * ld + r) : X;
            }
        } else {
#pragma unroll
            for (int i = 0; i < E; i++) {
                const int e = t + i * LIN_THREADS;
                int rl, k;
                if (ROWK) {
                    rl = e / BK, k = e % BK;
                } else if (kcont) {
                    /* Contiguous along k into a k-major tile: a warp copies 4 rows of 8 consecutive k (one 32-byte
                     * sector each) and writes 32 different banks. */
                    const int w = e >> 5, l = e & 31;
                    rl = (w % (R / 4)) * 4 + (l >> 3), k = (w / (R / 4)) * 8 + (l & 7);
                } else {
                    k = e / R, rl = e % R;
                }
                const int32_t r = r0 + rl;
                so[i] = ROWK ? rl * LIN_SK + k : k * (R + LIN_PAD) + rl;
                kl[i] = k;
                rv[i] = r < rows;
                one[i] = r == ones_at;
                src[i] = rv[i] ? X + (kcont ? (int64_t)r * ld + k : (int64_t)k * ld + r) : X;
            }
        }
    }

    __device__ __forceinline__ void load(float *dst, int32_t c) const {
        const int32_t k0 = c * BK;
        if (vec) {
#pragma unroll
            for (int i = 0; i < G; i++) {
                if (kl[i] >= BK) continue;
                int n;
                if (ROWK) {
                    const int32_t left = K - (k0 + kl[i]);
                    n = rv[i] ? (left >= 4 ? 4 : (left > 0 ? left : 0)) : 0;
                } else {
                    n = k0 + kl[i] < K ? rv[i] : 0;
                }
                if (ROWK || !one[i]) {
                    cp_async16(dst + so[i], n ? src[i] + c * step : base, 4 * n);
                    continue;
                }
                /* The group holding the ones column: its real floats, the one, zeros past it. */
                const bool in_k = k0 + kl[i] < K;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (in_k && j < rv[i]) cp_async4(dst + so[i] + j, src[i] + c * step + j, true);
                    else dst[so[i] + j] = in_k && j == rv[i] ? 1.0f : 0.0f;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < E; i++) {
                const bool in_k = k0 + kl[i] < K;
                if (rv[i] && in_k) cp_async4(dst + so[i], src[i] + c * step, true);
                else dst[so[i]] = (one[i] && in_k) ? 1.0f : 0.0f;
            }
        }
    }
};

/* One BM x 32 output tile; AK (BK): A (B) is contiguous along k, so its tiles are stored a row of k per m (n)
 * (lin_copier). The block's threads form KG k-groups of TPG threads; a thread owns 4 rows and 4 columns of the
 * tile and, in each chunk, KPG consecutive k of its group. It reads them 4 k at a time: from a k-major tile its
 * 4 adjacent rows (columns) of one k in one 16-byte load, from a k-contiguous tile 4 k of one row in one; in the
 * second case its rows (columns) are interleaved (rq, rq + BM/4, ...), which keeps a warp's loads on distinct
 * banks. Every output's sum runs over k in ascending order within each group, whatever the layouts. */
template <int BM, bool AK, bool BK_>
__device__ __forceinline__ void lin_gemm_tile(const lin_problem &p, int32_t tile, float *smem) {
    constexpr int BN = LIN_BN, BK = LIN_BK;
    constexpr int SA = BM + LIN_PAD, SB = BN + LIN_PAD;
    constexpr int A_FLOATS = AK ? BM * LIN_SK : BK * SA, B_FLOATS = BK_ ? BN * LIN_SK : BK * SB;
    constexpr int TPG = (BM / 4) * (BN / 4); /* threads per k-group */
    constexpr int KG = LIN_THREADS / TPG;     /* k-groups */
    constexpr int KPG = BK / KG;              /* k per group per chunk */
    constexpr int STAGE = A_FLOATS + B_FLOATS;
    static_assert(LIN_STAGES * STAGE <= LIN_SMEM_FLOATS, "stages must fit the shared buffer");
    static_assert(KG * BM * BN <= LIN_SMEM_FLOATS, "the partial sums must fit the shared buffer");
    static_assert(KPG % 4 == 0, "k read 4 at a time");
    const int t = threadIdx.x;
    const int32_t m0 = (tile / p.tiles_n) * BM, n0 = (tile % p.tiles_n) * BN;
    const int32_t n_out = p.N + p.ones;
    const int g = t / TPG, r = t % TPG;
    const int rq = r / (BN / 4), cq = r % (BN / 4);
    int row[4], col[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        row[i] = AK ? rq + (BM / 4) * i : rq * 4 + i;
        col[i] = BK_ ? cq + (BN / 4) * i : cq * 4 + i;
    }

    lin_copier<BM, AK> ca;
    lin_copier<BN, BK_> cb;
    ca.init(p.A, p.lda, p.M, m0, p.K, p.a_vec, p.a_kcont, -1);
    cb.init(p.B, p.ldb, p.N, n0, p.K, p.b_vec, p.b_kcont, p.ones ? p.N : -1);
    auto load = [&](int32_t c) {
        float *as = smem + (c % LIN_STAGES) * STAGE;
        ca.load(as, c);
        cb.load(as + A_FLOATS, c);
    };

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

    /* Out-of-range k are zero in both operands, so they add exact zeros. */
    const int32_t chunks = (p.K + BK - 1) / BK;
    cp_async_ring<LIN_STAGES>(chunks, load, [&](int32_t c) {
        const float *as = smem + (c % LIN_STAGES) * STAGE, *bs = as + A_FLOATS;
#pragma unroll
        for (int kq = 0; kq < KPG; kq += 4) {
            const int k = g * KPG + kq;
            float a[4][4], b[4][4]; /* [row or column][k] */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float4 v = *reinterpret_cast<const float4 *>(AK ? as + row[i] * LIN_SK + k : as + (k + i) * SA + rq * 4);
                const float4 w = *reinterpret_cast<const float4 *>(BK_ ? bs + col[i] * LIN_SK + k : bs + (k + i) * SB + cq * 4);
                if (AK) a[i][0] = v.x, a[i][1] = v.y, a[i][2] = v.z, a[i][3] = v.w;
                else a[0][i] = v.x, a[1][i] = v.y, a[2][i] = v.z, a[3][i] = v.w;
                if (BK_) b[i][0] = w.x, b[i][1] = w.y, b[i][2] = w.z, b[i][3] = w.w;
                else b[0][i] = w.x, b[1][i] = w.y, b[2][i] = w.z, b[3][i] = w.w;
            }
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i][q], b[j][q], acc[i][j]);
        }
    });

    /* The k-groups' partial sums, added in group order. */
    float *red = smem;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) red[(g * BM + row[i]) * BN + col[j]] = acc[i][j];
    __syncthreads();
    for (int o = t; o < BM * BN; o += LIN_THREADS) {
        const int ml = o / BN, nl = o % BN;
        float v = red[ml * BN + nl];
        for (int q = 1; q < KG; q++) v += red[(q * BM + ml) * BN + nl];
        const int32_t m = m0 + ml, n = n0 + nl;
        if (m < p.M && n < n_out) lin_store(p, m, n, v);
    }
}

/* N <= 8 outputs per row, A and B contiguous along k: a warp per row. */
__device__ __forceinline__ void lin_rowdot_tile(const lin_problem &p, int32_t tile) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t m = tile * (LIN_THREADS / 32) + warp;
    if (m >= p.M) return;
    float acc[LIN_ROWDOT_MAXN];
#pragma unroll
    for (int j = 0; j < LIN_ROWDOT_MAXN; j++) acc[j] = 0.0f;
    const float *a = p.A + (int64_t)m * p.lda;
#pragma unroll 4
    for (int32_t k = lane; k < p.K; k += 32) {
        const float av = a[k];
#pragma unroll
        for (int j = 0; j < LIN_ROWDOT_MAXN; j++)
            if (j < p.N) acc[j] = fmaf(av, p.B[(int64_t)j * p.ldb + k], acc[j]);
    }
    /* Butterfly: lanes i and i^off add the same two values, so every lane ends with the same bits. */
#pragma unroll
    for (int j = 0; j < LIN_ROWDOT_MAXN; j++)
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
    float v = acc[0];
#pragma unroll
    for (int j = 1; j < LIN_ROWDOT_MAXN; j++)
        if (lane == j) v = acc[j];
    if (lane < p.N) lin_store(p, m, lane, v);
}

/* M <= 8 output rows, A contiguous along m, B along n: lanes over 32 columns, the 8 warps over k. */
__device__ __forceinline__ void lin_colsum_tile(const lin_problem &p, int32_t tile, float *smem) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    constexpr int WARPS = LIN_THREADS / 32;
    const int32_t n = tile * 32 + lane;
    const bool real = n < p.N, one = p.ones && n == p.N;
    float acc[LIN_COLSUM_MAXM];
#pragma unroll
    for (int i = 0; i < LIN_COLSUM_MAXM; i++) acc[i] = 0.0f;
#pragma unroll 8
    for (int32_t k = warp; k < p.K; k += WARPS) {
        const float b = real ? p.B[(int64_t)k * p.ldb + n] : (one ? 1.0f : 0.0f);
        const float *a = p.A + (int64_t)k * p.lda;
#pragma unroll
        for (int i = 0; i < LIN_COLSUM_MAXM; i++)
            if (i < p.M) acc[i] = fmaf(a[i], b, acc[i]);
    }
    float *part = smem; /* [warp][row][lane] */
#pragma unroll
    for (int i = 0; i < LIN_COLSUM_MAXM; i++) part[(warp * LIN_COLSUM_MAXM + i) * 32 + lane] = acc[i];
    __syncthreads();
    const int i = threadIdx.x >> 5; /* 256 threads: one per (row < 8, lane) */
    const int32_t col = tile * 32 + lane;
    if (i < p.M && col < p.N + p.ones) {
        float v = part[i * 32 + lane];
        for (int w = 1; w < WARPS; w++) v += part[(w * LIN_COLSUM_MAXM + i) * 32 + lane];
        lin_store(p, i, col, v);
    }
}

__device__ __forceinline__ void lin_run(const lin_problem &p, int32_t tile, float *smem) {
    /* A k-contiguous operand goes into k-rows when it can be copied 4 floats at a time (lin_copier). */
    const int kk = (p.a_kcont && p.a_vec) * 2 + (p.b_kcont && p.b_vec);
    if (p.path == LIN_PATH_GEMM32) {
        if (kk == 3) lin_gemm_tile<32, true, true>(p, tile, smem);        /* forward */
        else if (kk == 2) lin_gemm_tile<32, true, false>(p, tile, smem);  /* input gradient */
        else if (kk == 0) lin_gemm_tile<32, false, false>(p, tile, smem); /* weight gradient */
        else lin_gemm_tile<32, false, true>(p, tile, smem);
    } else if (p.path == LIN_PATH_GEMM16) {
        if (kk == 3) lin_gemm_tile<16, true, true>(p, tile, smem);
        else if (kk == 2) lin_gemm_tile<16, true, false>(p, tile, smem);
        else if (kk == 0) lin_gemm_tile<16, false, false>(p, tile, smem);
        else lin_gemm_tile<16, false, true>(p, tile, smem);
    }
    else if (p.path == LIN_PATH_ROWDOT) lin_rowdot_tile(p, tile);
    else lin_colsum_tile(p, tile, smem);
}

/* Blocks 0 .. p[0].tiles - 1 run problem 0, the rest problem 1 (the branch is uniform within a block). The
 * descriptors are read in place from parameter space (__grid_constant__), never copied per thread. */
__global__ void __launch_bounds__(LIN_THREADS) linear_kernel(const __grid_constant__ lin_launch L) {
    __shared__ __align__(16) float smem[LIN_SMEM_FLOATS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl: nothing touches memory before this */
    cuda_pdl_trigger();
    const int32_t b = (int32_t)blockIdx.x;
    if (b < L.p[0].tiles) lin_run(L.p[0], b, smem);
    else lin_run(L.p[1], b - L.p[0].tiles, smem);
}

/* Chooses the path and the block count of a problem from its shape alone (so the summation order, and the
 * bits, depend on nothing else). */
static void lin_choose_path(lin_problem *p, int32_t tiles_pref) {
    int32_t n_out = p->N + p->ones;
    if (p->M == 0 || n_out == 0) {
        p->tiles = 0;
        return;
    }
    if (p->epi == LIN_EPI_FWD && p->N <= LIN_ROWDOT_MAXN && p->a_kcont && p->b_kcont) {
        p->path = LIN_PATH_ROWDOT;
        p->tiles = (p->M + LIN_THREADS / 32 - 1) / (LIN_THREADS / 32);
        return;
    }
    if (p->epi == LIN_EPI_DW && p->M <= LIN_COLSUM_MAXM && !p->a_kcont && !p->b_kcont) {
        p->path = LIN_PATH_COLSUM;
        p->tiles = (n_out + 31) / 32;
        return;
    }
    p->tiles_n = (n_out + LIN_BN - 1) / LIN_BN;
    int32_t tiles32 = ((p->M + 31) / 32) * p->tiles_n;
    if (tiles_pref == 16 || (tiles_pref != 32 && tiles32 < LIN_SMALL_TILES)) {
        p->path = LIN_PATH_GEMM16;
        p->tiles = ((p->M + 15) / 16) * p->tiles_n;
    } else {
        p->path = LIN_PATH_GEMM32;
        p->tiles = tiles32;
    }
}

/* Whether an operand's rows are 16-byte aligned, so its tiles can be copied in groups of 4 floats (lin_copier). */
static int32_t lin_vec_ok(const float *x, int32_t ld) { return ((uintptr_t)x & 15) == 0 && ld % 4 == 0; }

static int lin_launch_problems(rlt_backend *bk, lin_launch *L) {
    for (int i = 0; i < 2; i++) {
        lin_problem *p = &L->p[i];
        lin_choose_path(p, cuda_get(bk)->tiles);
        const int32_t c4 = cuda_get(bk)->lin_copy4;
        p->a_vec = lin_vec_ok(p->A, p->lda) && !(c4 & (p->a_kcont ? 1 : 2));
        p->b_vec = lin_vec_ok(p->B, p->ldb) && !(c4 & (p->b_kcont ? 1 : 2));
    }
    int64_t blocks = (int64_t)L->p[0].tiles + L->p[1].tiles;
    if (blocks == 0) return RLT_OK;
    CUDA_REQUIRE(bk, blocks <= INT32_MAX, "linear: grid size");
    CUDA_CHECK(bk, cuda_launch_pdl(bk, linear_kernel, dim3((unsigned)blocks), dim3(LIN_THREADS), *L));
    CUDA_CHECK_LAUNCH(bk, "linear_kernel");
    return RLT_OK;
}

extern "C" int cuda_linear_forward(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx,
                                   const float *W, const float *b, float *y, int32_t ldy, int32_t act) {
    CUDA_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "linear_forward");
    if (rows == 0) return RLT_OK;
    if (cuda_get(bk)->linear_mode == CUDA_LINEAR_CUBLAS || fi > LIN_MAX_K) {
        /* A forward may run on any lane: the same cuBLAS workspace size on all of them keeps its bits. */
        RLT_TRY(cuda_gemm_uniform(bk, 0, 1, rows, fo, fi, 1.0f, x, ldx, W, fi, 0.0f, y, ldy));
        return cuda_bias_act(bk, y, ldy, b, rows, fo, act);
    }
    lin_launch L;
    memset(&L, 0, sizeof L);
    lin_problem *p = &L.p[0];
    p->A = x, p->lda = ldx, p->a_kcont = 1;
    p->B = W, p->ldb = fi, p->b_kcont = 1;
    p->C = y, p->ldc = ldy, p->aux = b;
    p->M = rows, p->N = fo, p->K = fi;
    p->epi = LIN_EPI_FWD, p->act = act;
    return lin_launch_problems(bk, &L);
}

extern "C" int cuda_linear_backward(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy,
                                    int32_t lddy, const float *x, int32_t ldx, int32_t act_x, const float *W, float *dW,
                                    float *db, float beta, float *dx, int32_t lddx) {
    CUDA_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi, "linear_backward");
    CUDA_REQUIRE(bk, !dx || lddx >= fi, "linear_backward");
    CUDA_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    int cublas = cuda_get(bk)->linear_mode == CUDA_LINEAR_CUBLAS;
    /* Each part runs fused unless its K is beyond our kernels; the parts left to cuBLAS run first. */
    /* A layer wider than LIN_MAX_K inputs (a Nature DQN's 3136-wide head) makes thousands of small tiles
     * here for its weight gradient and long ones for its input gradient; cuBLAS runs both in a few large ones
     * (the whole update 3% faster for dW, bench/GPU_NOTES.md). */
    int fuse_w = (dW || db) && !cublas && rows <= LIN_MAX_K && fi <= LIN_MAX_K;
    int fuse_x = dx && !cublas && fo <= LIN_MAX_K && fi <= LIN_MAX_K;
    if (!fuse_w && !fuse_x && !cublas) {
        /* Both parts on cuBLAS (a wide layer): dW and db on two side lanes beside dx (cuda_fork_side). dW's
         * product uses the side lanes' workspace size on any lane, so the same algorithm and bits either way. */
        const int32_t lane = cuda_get(bk)->lane;
        int32_t side[2];
        RLT_TRY(cuda_fork_side(bk, side));
        int rc = RLT_OK;
        cuda_get(bk)->lane = side[0];
        if (dW) rc = cuda_gemm_uniform(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, x, ldx, beta, dW, fi);
        cuda_get(bk)->lane = side[1];
        if (rc == RLT_OK && db) rc = cuda_bias_grad(bk, db, dy, lddy, rows, fo, beta);
        cuda_get(bk)->lane = lane;
        if (rc == RLT_OK && dx) rc = cuda_gemm(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, W, fi, 0.0f, dx, lddx);
        if (rc == RLT_OK && dx) rc = cuda_act_grad(bk, dx, lddx, x, ldx, rows, fi, act_x);
        int rc2 = cuda_merge_side(bk, lane, side);
        return rc != RLT_OK ? rc : rc2;
    }
    if (!fuse_w) {
        if (dW) RLT_TRY(cuda_gemm(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, x, ldx, beta, dW, fi));
        if (db) RLT_TRY(cuda_bias_grad(bk, db, dy, lddy, rows, fo, beta));
    }
    if (dx && !fuse_x) {
        RLT_TRY(cuda_gemm(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, W, fi, 0.0f, dx, lddx));
        RLT_TRY(cuda_act_grad(bk, dx, lddx, x, ldx, rows, fi, act_x));
    }
    if (!fuse_w && !fuse_x) return RLT_OK;
    lin_launch L;
    memset(&L, 0, sizeof L);
    int np = 0;
    if (fuse_w) {
        /* dW[o, i] = sum_r dy[r, o] x[r, i]: A(o, r) = dy[r lddy + o] (contiguous along o), B(r, i) = x[r ldx + i]. */
        lin_problem *p = &L.p[np++];
        p->A = dy, p->lda = lddy, p->a_kcont = 0;
        p->B = x, p->ldb = ldx, p->b_kcont = 0;
        p->C = dW, p->ldc = fi, p->C2 = db;
        p->M = fo, p->N = dW ? fi : 0, p->K = rows, p->ones = db != NULL;
        p->epi = LIN_EPI_DW, p->beta = beta;
    }
    if (fuse_x) {
        /* dx[r, i] = act'(x[r, i]) sum_o dy[r, o] W[o, i]: A(r, o) = dy[r lddy + o], B(o, i) = W[o fi + i]. */
        lin_problem *p = &L.p[np++];
        p->A = dy, p->lda = lddy, p->a_kcont = 1;
        p->B = W, p->ldb = fi, p->b_kcont = 0;
        p->C = dx, p->ldc = lddx, p->aux = x, p->ld_aux = ldx;
        p->M = rows, p->N = fi, p->K = fo;
        p->epi = LIN_EPI_DX, p->act = act_x;
    }
    return lin_launch_problems(bk, &L);
}

extern "C" cudaError_t cuda_preload_linear(void) {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, linear_kernel);
}
