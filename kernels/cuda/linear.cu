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
 * and runs one of four paths:
 *   GEMM   32x32 (or 16x32) output tiles, 256 threads, the K range of each chunk split over 4 (or 8) groups
 *          of threads whose partial sums are added in a fixed order at the end; operands stream through
 *          shared memory in chunks of 32 k, 4 chunks in flight (cp.async on sm_80 and later), 4 bytes a copy
 *          (lin_gemm_tile4) or, where the operands' rows are aligned, 16 (lin_gemm_tile): the same sums in the
 *          same order, one for latency, one for throughput (see linear_kernel).
 *   ROWDOT narrow outputs (N <= 8, a critic's single Q or an actor's few actions): a warp per row, lanes
 *          over k, a butterfly of shuffles (every lane ends with the same bits) to finish.
 *   COLSUM weight gradients of narrow layers (M <= 8 outputs): lanes over columns, warps over k, partial
 *          sums added in warp order.
 *   OUTER  forwards and input gradients with K <= 4 (a critic's Q layer seen from its input gradient, a
 *          CartPole network's first layer): a thread per column of two rows, the threads laid along the columns
 *          of one row pair and on into the next, so no thread idles however narrow the layer (a 120-wide
 *          one took 64 blocks of 256 threads for 128 rows, half of them idle; now 30); no shared memory.
 * Every sum runs in an order fixed by the shapes alone: the same bits on every run. The order differs from
 * OpenBLAS's, so results agree with the CPU to the rounding of a length-K dot product (the parity test's
 * GEMM bound), not bit for bit. The epilogues' expressions are the CPU twins' term for term (no FMA
 * contraction in this module; the products inside the sums are explicit fmaf).
 *
 * Products beyond these kernels go to the library, chosen by shape alone: K above LIN_MAX_K (a Nature CNN's
 * 3136-wide flatten), where the library splits K across blocks, products of at least LIN_BLAS_MACS
 * multiply-adds (1024-wide layers at a batch of 1024 or more), where its large tiles win, and the forwards (under
 * tf32 also the input gradients) of wide layers, CUDA_LIN_BLAS_WIDE elements or more (1024-wide at batch 4096). They
 * run on cuBLASLt with the bias, ReLU and bias gradient in its epilogue (gemm_lt.c; cuBLAS plus our bias_act.cu
 * passes when it offers no algorithm), in fp32, or on TF32 tensor cores when the plan asked for precision: tf32.
 *
 * Seed batching (cuda_seeds): grid z is the agent. Its buffers lie dz = delta[z] bytes from the lead's, added
 * where an address is formed from a descriptor's pointer (cuda_at); the descriptors stay in parameter space.
 * linear_kernel<false, ...> (not batching) has dz the constant 0, linear_kernel<true, true> reads it (80 registers
 * on sm_90; the small single kernel 8 bytes of spill, the others none). Batched seeds' products from
 * CUDA_LIN_SEEDS_BLAS_MACS multiply-adds per agent (all of them under tf32, from 16 in every dimension) and every product
 * a single agent would send to the library run as one batched library GEMM over the seeds (cuda_gemm_seeds: agent z's
 * operands through pointer arrays) with our batched bias/activation and bias-gradient kernels around it. */
#include <string.h>

#include "cp_async.cuh"
#include "cuda_ops.h"

enum { LIN_EPI_FWD = 0, LIN_EPI_DW = 1, LIN_EPI_DX = 2 };
enum { LIN_PATH_GEMM32 = 0, LIN_PATH_GEMM16 = 1, LIN_PATH_ROWDOT = 2, LIN_PATH_COLSUM = 3, LIN_PATH_OUTER = 4 };

#define LIN_THREADS 256
#define LIN_BN 32
#define LIN_BK 32
#define LIN_STAGES 4
#define LIN_PAD 4 /* floats added to each shared-memory row: keeps 16-byte alignment, spreads the banks */
#define LIN_SMEM_FLOATS (LIN_STAGES * LIN_BK * ((32 + LIN_PAD) + (LIN_BN + LIN_PAD)))
#define LIN_ROWDOT_MAXN 8
#define LIN_COLSUM_MAXM 8
#define LIN_OUTER_MAXK 4 /* no more k than one k-group of either GEMM tile holds: see lin_outer_tile */
#define LIN_OUTER_SEEDS_MAXK 8 /* batched seeds' input gradients: see lin_choose_path */
#define LIN_OUTER_ROWS 2 /* rows per thread (one agent; batched seeds up to LIN_OUTER_MAX_ROWS: lin_choose_path) */
#define LIN_OUTER_MAX_ROWS 16
#define LIN_ROWDOT_MAX_ROWS 4 /* rows per warp of batched seeds (one agent: 1) */
/* Batched seeds' narrow paths take more rows per thread (OUTER) or warp (ROWDOT) while the launch keeps at least
 * this many blocks: 16 TD3 seeds' head gradients (OUTER, 256 x 256 outputs each, 2 rows a thread) were 2,192 blocks
 * of 256 threads, five waves at three blocks an SM, 16.5 us in place on an H200 (ncu, no cache flush) for 1 MMAC.
 * RLT_CUDA_SEEDS_ROWS=1 keeps one agent's rows (cuda_impl.seeds_rows), for A/B runs. */
#define LIN_SEEDS_MIN_BLOCKS 256
/* Above this K, our kernels (which never split K across blocks) would leave most of the GPU idle (the value and the
 * two below are the plan's rules, cuda_plan_rules.h, which a plan without a GPU follows too). */
#define LIN_MAX_K CUDA_LIN_MAX_K
/* A product of at least this many multiply-adds (M N K) goes to cuBLAS: there the GPU is busy with any
 * kernel, and cuBLAS's large tiles beat our latency-bound 2x2 micro-tiles (a 4096-row batch through
 * 1024-wide layers). Below it, our fused kernels keep an update's chain short. Shape only, so the same
 * shapes always take the same path and give the same bits. */
#define LIN_BLAS_MACS CUDA_LIN_BLAS_MACS
static __host__ __device__ inline int lin_big(int32_t m, int32_t n, int32_t k) {
    return (int64_t)m * n * k >= LIN_BLAS_MACS;
}
/* Wide layers go to the library too, whatever their K: in fp32 a forward with at least CUDA_LIN_BLAS_WIDE outputs
 * (rows x fo); under precision: tf32, whose library products run on the tensor cores, the forward and the input
 * gradient of a layer with at least CUDA_LIN_BLAS_WIDE inputs or outputs (rows x the larger of fi, fo). That is the rest
 * of a 4096-row batch through 1024-wide layers, where our kernels spent 49 us on a first layer's forward (17 or
 * 23 inputs: 4096 of our 32x32 tiles; cuBLASLt 12 us with its bias/ReLU epilogue), 20 us on a critic head's
 * forward (a warp per row) and 44-58 us on the input gradients of a head or an actor's last layer (K of 1 or 6),
 * on an H100. Measured whole (bench/RESULTS.md): the first layer's forward helps in both precisions; the rest
 * helps under tf32 (1,030 -> 1,110 updates/s) and costs in fp32 (363 -> 335), where the library's products for
 * these skinny shapes are its SIMT kernels. */
static inline int lin_wide(int32_t rows, int32_t fi, int32_t fo, int dx, int tf32) {
    return cuda_rule_wide(rows, fi, fo, dx, tf32);
}
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
    int32_t a_vec, b_vec; /* GEMM paths: the operand's rows are 16-byte aligned, copied 4 floats at a time */
    int32_t tiles_n;   /* GEMM: output tiles along n */
    int32_t tiles;     /* blocks this problem takes */
    int32_t per;       /* OUTER: rows per thread; ROWDOT: rows per warp (a function of the shape and the seeds) */
    int32_t kg;        /* OUTER: the k-group size of the GEMM path the shape would otherwise take */
    float beta;
} lin_problem;

typedef struct lin_launch {
    lin_problem p[2];
    cuda_seeds sd;
} lin_launch;

/* Seed batching: the bytes agent blockIdx.z's buffers lie from the lead's; sd NULL (not batching): 0. */
__device__ __forceinline__ int64_t lin_dz(const cuda_seeds *sd) { return sd ? sd->delta[blockIdx.z] : 0; }
/* The epilogue of one output element (see the file comment). */
__device__ __forceinline__ void lin_store(const lin_problem &p, int32_t m, int32_t n, float v, int64_t dz) {
    if (p.epi == LIN_EPI_DW) {
        float *d = n == p.N ? cuda_at(p.C2, dz) + m : cuda_at(p.C, dz) + (int64_t)m * p.ldc + n;
        *d = p.beta == 0.0f ? v : p.beta * *d + v;
    } else if (p.epi == LIN_EPI_FWD) {
        cuda_at(p.C, dz)[(int64_t)m * p.ldc + n] = cuda_act(v + (p.aux ? cuda_at(p.aux, dz)[n] : 0.0f), p.act);
    } else {
        float x = cuda_at(p.aux, dz)[(int64_t)m * p.ld_aux + n];
        if (p.act == RLT_ACT_RELU) v = x > 0.0f ? v : 0.0f;
        else if (p.act == RLT_ACT_TANH) v *= 1.0f - x * x;
        cuda_at(p.C, dz)[(int64_t)m * p.ldc + n] = v;
    }
}

/* The end of a GEMM tile: each thread's 4x4 partial sums (rows tm.., columns c0 + cs j) into shared memory, then
 * each output the k-groups' partials added in group order, and its epilogue. smem is free: the ring has ended. */
template <int BM, int KG>
__device__ __forceinline__ void lin_gemm_finish(const lin_problem &p, const float (&acc)[4][4], float *smem, int g,
                                                int tm, int c0, int cs, int32_t m0, int32_t n0, const cuda_seeds *sd) {
    constexpr int BN = LIN_BN;
    float *red = smem;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) red[(g * BM + tm + i) * BN + c0 + cs * j] = acc[i][j];
    __syncthreads();
    /* dz read again rather than held through the main loop, where its register costs spills (batched: 8 bytes
     * of spill, as the single kernel, instead of 16). */
    const int64_t dz_out = lin_dz(sd);
    const int32_t n_out = p.N + p.ones;
    for (int o = threadIdx.x; o < BM * BN; o += LIN_THREADS) {
        const int ml = o / BN, nl = o % BN;
        float v = red[ml * BN + nl];
        for (int q = 1; q < KG; q++) v += red[(q * BM + ml) * BN + nl];
        const int32_t m = m0 + ml, n = n0 + nl;
        if (m < p.M && n < n_out) lin_store(p, m, n, v, dz_out);
    }
}

/* The single-agent kernel's tile for latency-bound layers (see lin_run): one BM x 32 output tile by 4-byte
 * copies. Shared memory holds each chunk k-major (As[k][m], Bs[k][n]) so a thread reads its
 * 4 rows and 4 columns of one k as two 16-byte loads. Elements are copied so that the 32 lanes of a warp
 * write 32 different banks: along m (or n) when the operand is contiguous there, else as 4 rows of 8
 * consecutive k (one 32-byte sector of global memory per row). */
template <int BM>
__device__ __forceinline__ void lin_gemm_tile4(const lin_problem &p, int32_t tile, float *smem, const cuda_seeds *sd) {
    constexpr int BN = LIN_BN, BK = LIN_BK;
    constexpr int SA = BM + LIN_PAD, SB = BN + LIN_PAD;
    constexpr int TPG = (BM / 4) * (BN / 4); /* threads per k-group, each owning a 4x4 block of the tile */
    constexpr int KG = LIN_THREADS / TPG;     /* k-groups */
    constexpr int KPG = BK / KG;              /* k per group per chunk */
    constexpr int STAGE = BK * (SA + SB);
    static_assert(LIN_STAGES * STAGE <= LIN_SMEM_FLOATS, "stages must fit the shared buffer");
    static_assert(KG * BM * BN <= LIN_SMEM_FLOATS, "the partial sums must fit the shared buffer");
    static_assert((BM * BK) % LIN_THREADS == 0 && (BK * BN) % LIN_THREADS == 0, "whole elements per thread");
    const int t = threadIdx.x;
    const int32_t m0 = (tile / p.tiles_n) * BM, n0 = (tile % p.tiles_n) * BN;
    const int g = t / TPG, r = t % TPG;
    const int tm = (r / (BN / 4)) * 4, tn = (r % (BN / 4)) * 4;
    const int32_t chunks = (p.K + BK - 1) / BK;
    const int64_t dz = lin_dz(sd);
    const float *A = cuda_at(p.A, dz), *B = cuda_at(p.B, dz);

    /* Each thread copies the same elements of every chunk: where they go in shared memory and where they
     * come from at chunk 0 are worked out once; chunk c reads c steps further along k. */
    constexpr int EA = BM * BK / LIN_THREADS, EB = BK * BN / LIN_THREADS;
    int a_so[EA], a_kl[EA], b_so[EB], b_kl[EB];
    bool a_ok[EA], b_ok[EB], b_one[EB];
    const float *a_src[EA], *b_src[EB];
#pragma unroll
    for (int i = 0; i < EA; i++) {
        const int e = t + i * LIN_THREADS;
        int ml, kl;
        if (p.a_kcont) {
            const int w = e >> 5, l = e & 31;
            ml = (w % (BM / 4)) * 4 + (l >> 3);
            kl = (w / (BM / 4)) * 8 + (l & 7);
        } else {
            ml = e % BM;
            kl = e / BM;
        }
        const int32_t m = m0 + ml;
        a_so[i] = kl * SA + ml;
        a_kl[i] = kl;
        a_ok[i] = m < p.M;
        const int64_t mm = a_ok[i] ? m : 0;
        a_src[i] = p.a_kcont ? A + mm * p.lda + kl : A + (int64_t)kl * p.lda + mm;
    }
#pragma unroll
    for (int i = 0; i < EB; i++) {
        const int e = t + i * LIN_THREADS;
        int nl, kl;
        if (p.b_kcont) {
            const int w = e >> 5, l = e & 31;
            nl = (w % (BN / 4)) * 4 + (l >> 3);
            kl = (w / (BN / 4)) * 8 + (l & 7);
        } else {
            nl = e % BN;
            kl = e / BN;
        }
        const int32_t n = n0 + nl;
        b_so[i] = kl * SB + nl;
        b_kl[i] = kl;
        b_ok[i] = n < p.N;
        b_one[i] = p.ones && n == p.N;
        const int64_t nn = b_ok[i] ? n : 0;
        b_src[i] = p.b_kcont ? B + nn * p.ldb + kl : B + (int64_t)kl * p.ldb + nn;
    }
    const int64_t a_step = p.a_kcont ? BK : (int64_t)BK * p.lda, b_step = p.b_kcont ? BK : (int64_t)BK * p.ldb;

    auto load = [&](int32_t c) {
        float *as = smem + (c % LIN_STAGES) * STAGE, *bs = as + BK * SA;
        const int32_t k0 = c * BK;
#pragma unroll
        for (int i = 0; i < EA; i++) {
            if (a_ok[i] && k0 + a_kl[i] < p.K) cp_async4(as + a_so[i], a_src[i] + c * a_step, true);
            else as[a_so[i]] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < EB; i++) {
            const bool in_k = k0 + b_kl[i] < p.K;
            if (b_ok[i] && in_k) cp_async4(bs + b_so[i], b_src[i] + c * b_step, true);
            else bs[b_so[i]] = (b_one[i] && in_k) ? 1.0f : 0.0f;
        }
    };

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

    /* Out-of-range k are zero in both operands, so they add exact zeros. */
    cp_async_ring<LIN_STAGES>(chunks, load, [&](int32_t c) {
        const float *as = smem + (c % LIN_STAGES) * STAGE, *bs = as + BK * SA;
#pragma unroll
        for (int kk = 0; kk < KPG; kk++) {
            const int k = g * KPG + kk;
            const float4 a = *reinterpret_cast<const float4 *>(as + k * SA + tm);
            const float4 b = *reinterpret_cast<const float4 *>(bs + k * SB + tn);
            const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
    });

    lin_gemm_finish<BM, KG>(p, acc, smem, g, tm, tn, 1, m0, n0, sd);
}

/* One BM x 32 output tile, for A contiguous along k (AK) or along m, and B contiguous along k (BK_) or along n.
 * Shared memory holds each chunk in the operand's own order, so both kinds arrive by 16-byte copies: an operand
 * contiguous along k as rows of 32 k (As[m][k], Bs[n][k]), the other k-major (As[k][m], Bs[k][n]); where an
 * operand's rows are not 16-byte aligned (a leading dimension of 17 inputs), 4-byte copies fill the same layout.
 * A thread reads 4 rows and 4 columns of 2 k as 4 to 8 loads of 8 or 16 bytes. A thread's columns are 4 adjacent
 * ones when B is k-major, 4 spaced 8 apart when it is n-major: the 8 threads of a load phase then read 8
 * consecutive rows, 8 different banks. The order of every sum is the same in all four layouts and both copy
 * widths (k ascending within a k-group, then the groups in order): the layout changes no bit. */
template <int BM, bool AK, bool BK_>
__device__ __forceinline__ void lin_gemm_tile(const lin_problem &p, int32_t tile, float *smem, const cuda_seeds *sd) {
    constexpr int BN = LIN_BN, BK = LIN_BK;
    constexpr int SK = BK + LIN_PAD;                         /* row stride of an operand stored along k */
    constexpr int SA = AK ? SK : BM + LIN_PAD, SB = BK_ ? SK : BN + LIN_PAD;
    constexpr int A_FLOATS = AK ? BM * SK : BK * SA, B_FLOATS = BK_ ? BN * SK : BK * SB;
    constexpr int TPG = (BM / 4) * (BN / 4); /* threads per k-group, each owning a 4x4 block of the tile */
    constexpr int KG = LIN_THREADS / TPG;     /* k-groups */
    constexpr int KPG = BK / KG;              /* k per group per chunk */
    constexpr int STAGE = A_FLOATS + B_FLOATS;
    static_assert(LIN_STAGES * STAGE <= LIN_SMEM_FLOATS, "stages must fit the shared buffer");
    static_assert(KG * BM * BN <= LIN_SMEM_FLOATS, "the partial sums must fit the shared buffer");
    static_assert(KPG % 4 == 0 && BK == BN && BK == 32, "k in quads; B's two layouts the same size");
    const int t = threadIdx.x;
    const int32_t m0 = (tile / p.tiles_n) * BM, n0 = (tile % p.tiles_n) * BN;
    const int g = t / TPG, r = t % TPG;
    const int tm = (r / (BN / 4)) * 4, rn = r % (BN / 4);
    const int32_t chunks = (p.K + BK - 1) / BK;
    const int64_t dz = lin_dz(sd);
    const float *A = cuda_at(p.A, dz), *B = cuda_at(p.B, dz);

    /* The copies. Vector (p.a_vec, p.b_vec): unit t of a chunk is 4 floats along the operand's contiguous
     * dimension (A has 8 BM units: all threads or the first half; B 256). Element-wise (an operand whose rows are
     * not 16-byte aligned: a first layer's x): elements t + i LIN_THREADS, laid so a warp reads along the
     * contiguous dimension; element i lies i rows (AK, BK_) or i k-steps further than element 0. Where each
     * thread's first copy goes and comes from is worked out once; chunk c reads c chunks further along k. */
    constexpr int EA = BM * BK / LIN_THREADS, EB = BK * BN / LIN_THREADS;
    /* element-wise, between elements: a k-major A's k, else rows along k or B's k (BK == BN) */
    constexpr int A_KSTEP = LIN_THREADS / BM, ROW_STEP = LIN_THREADS / BK;
    const bool a_vec = p.a_vec, b_vec = p.b_vec;
    const int a_ml = a_vec ? (AK ? t / (BK / 4) : (t % (BM / 4)) * 4) : (AK ? t / BK : t % BM);
    const int a_kl = a_vec ? (AK ? (t % (BK / 4)) * 4 : t / (BM / 4)) : (AK ? t % BK : t / BM);
    const int b_nl = b_vec ? (BK_ ? t / (BK / 4) : (t % (BN / 4)) * 4) : (BK_ ? t / BK : t % BN);
    const int b_kl = b_vec ? (BK_ ? (t % (BK / 4)) * 4 : t / (BN / 4)) : (BK_ ? t % BK : t / BN);
    const int a_so = AK ? a_ml * SA + a_kl : a_kl * SA + a_ml, b_so = BK_ ? b_nl * SB + b_kl : b_kl * SB + b_nl;
    /* vector, along m or n: the bytes of the quad inside M or N; the ones column (DW, B k-major) inside B's quad */
    const int a_bytes = AK ? 16 : 4 * max(0, min(4, p.M - (m0 + a_ml)));
    const int b_bytes = BK_ ? 16 : 4 * max(0, min(4, p.N - (n0 + b_nl)));
    const bool b_one = !BK_ && p.ones && n0 + b_nl <= p.N && p.N < n0 + b_nl + (b_vec ? 4 : 1);
    const float *a_src = AK ? A + (int64_t)(m0 + a_ml) * p.lda + a_kl : A + (int64_t)a_kl * p.lda + m0 + a_ml;
    const float *b_src = BK_ ? B + (int64_t)(n0 + b_nl) * p.ldb + b_kl : B + (int64_t)b_kl * p.ldb + n0 + b_nl;
    const int64_t a_step = AK ? BK : (int64_t)BK * p.lda, b_step = BK_ ? BK : (int64_t)BK * p.ldb;

    auto load = [&](int32_t c) {
        float *as = smem + (c % LIN_STAGES) * STAGE, *bs = as + A_FLOATS;
        const int32_t k0 = c * BK;
        if (a_vec) {
            const int32_t k = k0 + a_kl;
            const bool ok = t < 8 * BM && m0 + a_ml < p.M;
            const int bytes = !ok ? 0 : AK ? 4 * max(0, min(4, p.K - k)) : (k < p.K ? a_bytes : 0);
            if (t < 8 * BM) cp_async16(as + a_so, bytes ? a_src + c * a_step : A, bytes);
        } else {
#pragma unroll
            for (int i = 0; i < EA; i++) { /* AK: rows a_ml + 8 i; else k a_kl + A_KSTEP i */
                const bool ok = AK ? m0 + a_ml + ROW_STEP * i < p.M && k0 + a_kl < p.K
                                   : m0 + a_ml < p.M && k0 + a_kl + A_KSTEP * i < p.K;
                const int64_t off = c * a_step + (int64_t)i * (AK ? ROW_STEP : A_KSTEP) * p.lda;
                cp_async4(as + a_so + i * (AK ? ROW_STEP : A_KSTEP) * SA, ok ? a_src + off : A, ok);
            }
        }
        if (b_vec) {
            const int32_t k = k0 + b_kl;
            if (b_one) { /* B k-major: the quad of columns that holds the ones column, element by element */
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int32_t n = n0 + b_nl + j;
                    if (n < p.N) cp_async4(bs + b_so + j, k < p.K ? b_src + c * b_step + j : B, k < p.K);
                    else bs[b_so + j] = n == p.N && k < p.K ? 1.0f : 0.0f;
                }
            } else {
                const int bytes = n0 + b_nl >= p.N ? 0 : BK_ ? 4 * max(0, min(4, p.K - k)) : (k < p.K ? b_bytes : 0);
                cp_async16(bs + b_so, bytes ? b_src + c * b_step : B, bytes);
            }
        } else {
#pragma unroll
            for (int i = 0; i < EB; i++) { /* BK_: columns b_nl + 8 i; else k b_kl + 8 i */
                const bool in_k = k0 + b_kl + (BK_ ? 0 : ROW_STEP * i) < p.K;
                const bool ok = n0 + b_nl + (BK_ ? ROW_STEP * i : 0) < p.N && in_k;
                float *d = bs + b_so + i * ROW_STEP * SB;
                if (b_one) *d = in_k ? 1.0f : 0.0f;
                else cp_async4(d, ok ? b_src + c * b_step + (int64_t)i * ROW_STEP * p.ldb : B, ok);
            }
        }
    };

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

    /* Out-of-range k are zero in both operands, so they add exact zeros. */
    cp_async_ring<LIN_STAGES>(chunks, load, [&](int32_t c) {
        const float *as = smem + (c % LIN_STAGES) * STAGE, *bs = as + A_FLOATS;
        /* Two k at a time: 8 values of each operand. Unrolled in a 16-row tile (two rounds); in a 32-row one
         * (four), unrolled, or four k at a time, the next round's loads are hoisted and spill. */
#pragma unroll(BM == 16 ? 2 : 1)
        for (int kq = 0; kq < KPG; kq += 2) {
            const int k = g * KPG + kq;
            float a[4][2], b[4][2]; /* [row or column][k] */
            if (AK) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float2 v = *reinterpret_cast<const float2 *>(as + (tm + i) * SA + k);
                    a[i][0] = v.x, a[i][1] = v.y;
                }
            } else {
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    const float4 v = *reinterpret_cast<const float4 *>(as + (k + x) * SA + tm);
                    a[0][x] = v.x, a[1][x] = v.y, a[2][x] = v.z, a[3][x] = v.w;
                }
            }
            if (BK_) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 v = *reinterpret_cast<const float2 *>(bs + (rn + 8 * j) * SB + k);
                    b[j][0] = v.x, b[j][1] = v.y;
                }
            } else {
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    const float4 v = *reinterpret_cast<const float4 *>(bs + (k + x) * SB + rn * 4);
                    b[0][x] = v.x, b[1][x] = v.y, b[2][x] = v.z, b[3][x] = v.w;
                }
            }
#pragma unroll
            for (int kk = 0; kk < 2; kk++)
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i][kk], b[j][kk], acc[i][j]);
        }
    });

    lin_gemm_finish<BM, KG>(p, acc, smem, g, tm, BK_ ? rn : rn * 4, BK_ ? 8 : 1, m0, n0, sd);
}

/* N <= 8 outputs per row, A and B contiguous along k: a warp per row, p.per rows of a tile's 8 p.per in turn
 * (rows r WARPS apart, so the block's warps read neighbouring rows at once). Each row's sum is the same whichever
 * warp forms it. One agent (SEEDS false) has p.per 1, and the row loop is left out of its kernel: with it the DQN
 * MLP's 2-wide head took 4.1 us in place on an H200 instead of 3.3 (ncu). */
template <bool SEEDS>
__device__ __forceinline__ void lin_rowdot_tile(const lin_problem &p, int32_t tile, int64_t dz) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    constexpr int WARPS = LIN_THREADS / 32;
    const float *A = cuda_at(p.A, dz), *B = cuda_at(p.B, dz);
    const int32_t per = SEEDS ? p.per : 1;
    for (int32_t r = 0; r < per; r++) {
        const int32_t m = (tile * per + r) * WARPS + warp;
        if (m >= p.M) return;
        float acc[LIN_ROWDOT_MAXN];
#pragma unroll
        for (int j = 0; j < LIN_ROWDOT_MAXN; j++) acc[j] = 0.0f;
        const float *a = A + (int64_t)m * p.lda;
#pragma unroll 4
        for (int32_t k = lane; k < p.K; k += 32) {
            const float av = a[k];
#pragma unroll
            for (int j = 0; j < LIN_ROWDOT_MAXN; j++)
                if (j < p.N) acc[j] = fmaf(av, B[(int64_t)j * p.ldb + k], acc[j]);
        }
        const float v = cuda_warp_sums<LIN_ROWDOT_MAXN>(acc, LIN_ROWDOT_MAXN, lane);
        if (lane < p.N) lin_store(p, m, lane, v, dz);
    }
}

/* M <= 8 output rows, A contiguous along m, B along n: lanes over 32 columns, the 8 warps over k. MAXM, UNROLL: the
 * rows the loop is built for and its unrolling; batched seeds' one- or two-row gradients (a critic's head) take 2
 * and 32, so a warp's 32 k of a 256-row batch have their loads in flight at once. The order of the sums is the same. */
template <int MAXM, int UNROLL>
__device__ __forceinline__ void lin_colsum_tile(const lin_problem &p, int32_t tile, float *smem, int64_t dz) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    constexpr int WARPS = LIN_THREADS / 32;
    const int32_t n = tile * 32 + lane;
    const bool real = n < p.N, one = p.ones && n == p.N;
    const float *A = cuda_at(p.A, dz), *B = cuda_at(p.B, dz);
    float acc[LIN_COLSUM_MAXM];
#pragma unroll
    for (int i = 0; i < LIN_COLSUM_MAXM; i++) acc[i] = 0.0f;
#pragma unroll UNROLL
    for (int32_t k = warp; k < p.K; k += WARPS) {
        const float b = real ? B[(int64_t)k * p.ldb + n] : (one ? 1.0f : 0.0f);
        const float *a = A + (int64_t)k * p.lda;
#pragma unroll
        for (int i = 0; i < MAXM; i++)
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
        lin_store(p, i, col, v, dz);
    }
}

/* K <= LIN_OUTER_MAXK (a critic's Q layer seen from its input gradient, a CartPole network's 4 inputs; batched seeds'
 * input gradients up to LIN_OUTER_SEEDS_MAXK, an actor's 6 actions), A contiguous along k: each thread one column of
 * p.per rows (LIN_OUTER_ROWS for one agent).
 * The sums are the GEMM path's that the shape would take otherwise: that path puts k in k-groups of p.kg (4 for
 * 16-row tiles, 8 for 32-row ones), sums each group in k order from zero, and adds the groups' sums in order, the
 * empty groups' zeros last. Here the first group's sum plus the second's (0 for K <= p.kg), then `+ 0.0f` (the empty
 * groups, which turn -0 into +0 as they do): the same bits.
 * A thread loads the operands of CHUNK rows (dy's MAXK k, and the activation an input gradient's epilogue reads)
 * before it computes and stores any of them, so their memory latencies overlap: with batched seeds a thread takes up
 * to 16 rows, and one row at a time left a 16-seed TD3 critic head's gradient at 13.7 us (H200, ncu). */
template <int MAXK, int CHUNK>
__device__ __forceinline__ void lin_outer_tile(const lin_problem &p, int32_t tile, int64_t dz) {
    /* Work item t is column t % N of row pair t / N: every thread of every block has one (except past the
     * end), whatever N is. Each element's sum is the same whichever thread forms it. */
    const int64_t t = (int64_t)tile * LIN_THREADS + threadIdx.x;
    const int32_t n = (int32_t)(t % p.N);
    const int64_t m0 = t / p.N * p.per;
    if (m0 >= p.M) return;
    const float *A = cuda_at(p.A, dz), *B = cuda_at(p.B, dz);
    const float *aux = p.aux ? cuda_at(p.aux, dz) : nullptr;
    float b[MAXK];
#pragma unroll
    for (int k = 0; k < MAXK; k++)
        b[k] = k < p.K ? (p.b_kcont ? B[(int64_t)n * p.ldb + k] : B[(int64_t)k * p.ldb + n]) : 0.0f;
    const float bias = p.epi == LIN_EPI_FWD && aux ? aux[n] : 0.0f;
    for (int32_t i0 = 0; i0 < p.per; i0 += CHUNK) {
        float a[CHUNK][MAXK], x[CHUNK];
#pragma unroll
        for (int r = 0; r < CHUNK; r++) {
            const int64_t m = m0 + i0 + r;
            const bool ok = i0 + r < p.per && m < p.M;
            const float *ar = A + (ok ? m : 0) * p.lda;
#pragma unroll
            for (int k = 0; k < MAXK; k++) a[r][k] = ok && k < p.K ? ar[k] : 0.0f;
            x[r] = ok && p.epi == LIN_EPI_DX ? aux[m * p.ld_aux + n] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < CHUNK; r++) {
            const int64_t m = m0 + i0 + r;
            if (i0 + r >= p.per || m >= p.M) break;
            float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
            for (int k = 0; k < MAXK; k++)
                if (k < p.K) {
                    if (k < p.kg) s0 = fmaf(a[r][k], b[k], s0);
                    else s1 = fmaf(a[r][k], b[k], s1);
                }
            float v = (s0 + s1) + 0.0f;
            /* lin_store's epilogues, with the activation or bias loaded above */
            if (p.epi == LIN_EPI_FWD) v = cuda_act(v + bias, p.act);
            else if (p.act == RLT_ACT_RELU) v = x[r] > 0.0f ? v : 0.0f;
            else if (p.act == RLT_ACT_TANH) v *= 1.0f - x[r] * x[r];
            cuda_at(p.C, dz)[m * p.ldc + n] = v;
        }
    }
}

/* The GEMM tile for the problem's size and operand orders: a forward reads x and W^T along k, a weight gradient
 * dy^T and x across it, an input gradient dy along k and W across it. */
__device__ __forceinline__ void lin_gemm_run(const lin_problem &p, int32_t tile, float *smem, const cuda_seeds *sd) {
    const bool big = p.path == LIN_PATH_GEMM32;
    if (p.a_kcont && p.b_kcont)
        big ? lin_gemm_tile<32, true, true>(p, tile, smem, sd) : lin_gemm_tile<16, true, true>(p, tile, smem, sd);
    else if (p.a_kcont)
        big ? lin_gemm_tile<32, true, false>(p, tile, smem, sd) : lin_gemm_tile<16, true, false>(p, tile, smem, sd);
    else if (p.b_kcont)
        big ? lin_gemm_tile<32, false, true>(p, tile, smem, sd) : lin_gemm_tile<16, false, true>(p, tile, smem, sd);
    else
        big ? lin_gemm_tile<32, false, false>(p, tile, smem, sd) : lin_gemm_tile<16, false, false>(p, tile, smem, sd);
}

/* sd: the seed-batching state, or NULL (a constant) when not batching. VEC: the GEMM paths take the 16-byte tile
 * (lin_gemm_tile), else the 4-byte one (lin_gemm_tile4); the two give the same bits (see linear_kernel). */
template <bool SEEDS, bool VEC>
__device__ __forceinline__ void lin_run(const lin_problem &p, int32_t tile, float *smem, const cuda_seeds *sd) {
    if (VEC && (p.path == LIN_PATH_GEMM32 || p.path == LIN_PATH_GEMM16)) lin_gemm_run(p, tile, smem, sd);
    else if (!VEC && p.path == LIN_PATH_GEMM32) lin_gemm_tile4<32>(p, tile, smem, sd);
    else if (!VEC && p.path == LIN_PATH_GEMM16) lin_gemm_tile4<16>(p, tile, smem, sd);
    else if (p.path == LIN_PATH_ROWDOT) lin_rowdot_tile<SEEDS>(p, tile, lin_dz(sd));
    else if (p.path == LIN_PATH_OUTER) {
        /* batched seeds: one load of all 16 rows a thread takes where K <= 2 (a critic's head), 4 rows at a time up
         * to 8 k; one agent: its 2 rows */
        if (SEEDS && p.K <= 2) lin_outer_tile<2, LIN_OUTER_MAX_ROWS>(p, tile, lin_dz(sd));
        else lin_outer_tile<SEEDS ? LIN_OUTER_SEEDS_MAXK : LIN_OUTER_MAXK, SEEDS ? 4 : LIN_OUTER_ROWS>(p, tile, lin_dz(sd));
    } else if (SEEDS && p.M <= 2) lin_colsum_tile<2, 32>(p, tile, smem, lin_dz(sd));
    else lin_colsum_tile<LIN_COLSUM_MAXM, 8>(p, tile, smem, lin_dz(sd));
}

/* Blocks 0 .. p[0].tiles - 1 run problem 0, the rest problem 1 (the branch is uniform within a block). The
 * descriptors are read in place from parameter space (__grid_constant__), never copied per thread. */
/* Blocks of this kernel that must fit an SM at once (launch bounds): 3 caps it at 80 registers a thread (from
 * 114, with 8 bytes of spill), so 3 blocks share an SM instead of 2. A single run loses nothing measurable and 16
 * seeds sharing a GPU gain 18% (TD3 256-256/b256, H100; bench/RESULTS.md); 4 (64 registers, 172 bytes of spill)
 * costs a single run 6%. Registers change no arithmetic: the same bits whatever the value. */
#ifndef LIN_MIN_BLOCKS
#define LIN_MIN_BLOCKS 3
#endif
/* Built three times (lin_launch_problems picks): <false, false>, a single agent's kernel for the small layers,
 * with the 4-byte tile; <false, true>, a single agent's launches whose every product is a 32-row GEMM tile (layers
 * of 512 at a batch of 1024), with the 16-byte tile; <true, true>, seed batching, with the 16-byte tile. The 16-byte
 * tile runs a third fewer instructions (TD3 256-256/b256's forward GEMM 2.00 -> 1.45 million warp instructions,
 * H100, ncu), which counts where blocks share SMs: 16 batched seeds and wide layers. In the small single kernel it
 * cost latency-bound runs 5-12% (DQN MLP), and merely linking its variants into that kernel cost 2-5% (a larger
 * kernel, same instructions executed: instruction fetch), so that kernel keeps only the 4-byte tile. Both tiles
 * add every product in the same order: the kernel chosen changes no bit (tests/gpu_seed_batch.c, byte-identical
 * checkpoints of batched and single runs; a TD3 run's losses unchanged to the last digit). */
template <bool SEEDS, bool VEC>
__global__ void __launch_bounds__(LIN_THREADS, LIN_MIN_BLOCKS) linear_kernel(const __grid_constant__ lin_launch L) {
    __shared__ __align__(16) float smem[LIN_SMEM_FLOATS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl: nothing touches memory before this */
    cuda_pdl_trigger();
    const cuda_seeds *sd = SEEDS ? &L.sd : nullptr; /* seed batching: block (x, 0, z) runs block x for agent z */
    const int32_t b = (int32_t)blockIdx.x;
    if (b < L.p[0].tiles) lin_run<SEEDS, VEC>(L.p[0], b, smem, sd);
    else lin_run<SEEDS, VEC>(L.p[1], b - L.p[0].tiles, smem, sd);
}

/* An agent's blocks on ROWDOT (per rows a warp) and OUTER (per rows a thread). */
static int64_t lin_rowdot_blocks(const lin_problem *p, int32_t per) {
    const int64_t rows = (int64_t)(LIN_THREADS / 32) * per;
    return (p->M + rows - 1) / rows;
}
static int64_t lin_outer_blocks(const lin_problem *p, int32_t per) {
    const int64_t items = (int64_t)((p->M + per - 1) / per) * p->N;
    return (items + LIN_THREADS - 1) / LIN_THREADS;
}

/* The rows a thread or warp takes: per0 for one agent; with z agents batched, doubled up to max while the launch
 * keeps at least LIN_SEEDS_MIN_BLOCKS blocks over all of them. */
static int32_t lin_seeds_per(const lin_problem *p, unsigned z, int32_t per0, int32_t max,
                             int64_t (*blocks)(const lin_problem *, int32_t)) {
    int32_t per = per0;
    while (z > 1 && per < max && blocks(p, per * 2) * z >= LIN_SEEDS_MIN_BLOCKS) per *= 2;
    return per;
}

/* Chooses the path and the block count of a problem from its shape and the agents batched (z) alone (so the
 * summation order, and the bits, depend on nothing else; the rows a thread or warp takes change no sum). */
static void lin_choose_path(lin_problem *p, unsigned z) {
    int32_t n_out = p->N + p->ones;
    if (p->M == 0 || n_out == 0) {
        p->tiles = 0;
        return;
    }
    if (p->epi == LIN_EPI_FWD && p->N <= LIN_ROWDOT_MAXN && p->a_kcont && p->b_kcont) {
        p->path = LIN_PATH_ROWDOT;
        p->per = lin_seeds_per(p, z, 1, LIN_ROWDOT_MAX_ROWS, lin_rowdot_blocks);
        p->tiles = (int32_t)lin_rowdot_blocks(p, p->per);
        return;
    }
    if (p->epi == LIN_EPI_DW && p->M <= LIN_COLSUM_MAXM && !p->a_kcont && !p->b_kcont) {
        p->path = LIN_PATH_COLSUM;
        p->tiles = (n_out + 31) / 32;
        return;
    }
    p->tiles_n = (n_out + LIN_BN - 1) / LIN_BN;
    const int32_t tiles32 = ((p->M + 31) / 32) * p->tiles_n;
    /* Batched seeds' input gradients with a few more k (an actor's last layer seen from its 6 actions) take OUTER
     * too, with the sums of the GEMM tile they would have taken (p->kg): 16 TD3 seeds' 256 x 256 outputs at K = 6 were
     * 2,048 16-row tiles, 22.8 us in place on an H200 (ncu) for 0.4 MMAC an agent. */
    const int32_t outer_k = z > 1 && p->epi == LIN_EPI_DX ? LIN_OUTER_SEEDS_MAXK : LIN_OUTER_MAXK;
    if (p->epi != LIN_EPI_DW && p->K <= outer_k && p->a_kcont) {
        p->path = LIN_PATH_OUTER;
        p->kg = tiles32 < LIN_SMALL_TILES ? 4 : 8; /* GEMM16: 8 k-groups of 4 k a chunk; GEMM32: 4 of 8 */
        p->per = lin_seeds_per(p, z, LIN_OUTER_ROWS, LIN_OUTER_MAX_ROWS, lin_outer_blocks);
        p->tiles = (int32_t)lin_outer_blocks(p, p->per);
        return;
    }
    if (tiles32 < LIN_SMALL_TILES) {
        p->path = LIN_PATH_GEMM16;
        p->tiles = ((p->M + 15) / 16) * p->tiles_n;
    } else {
        p->path = LIN_PATH_GEMM32;
        p->tiles = tiles32;
    }
}

/* A routed product on cuBLAS (gemm_lt.c had no algorithm for it): fp32, or TF32 under precision: tf32; uniform:
 * with the side lanes' workspace size on any lane (see cuda_gemm_uniform). */
static int lin_blas_gemm(rlt_backend *bk, int32_t uniform, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k,
                         const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    if (cuda_get(bk)->tf32) return cuda_gemm_tf32(bk, uniform, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    if (uniform) return cuda_gemm_uniform(bk, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    return cuda_gemm(bk, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

/* A routed backward's weight and bias gradients on the current lane; the bias gradient's own kernel (when
 * cuBLASLt did not fuse it) runs on db_lane. The weight gradient's product uses the side lanes' workspace size on
 * any lane, so the same algorithm and bits either way. */
static int lin_blas_wgrad(rlt_backend *bk, const rlt_linear_bwd *d, int32_t db_lane) {
    if (!d->dW && !d->db) return RLT_OK;
    int done = 0;
    RLT_TRY(cuda_lt_linear_wgrad(bk, d, db_lane, &done));
    if (done) return RLT_OK;
    if (d->dW)
        RLT_TRY(lin_blas_gemm(bk, 1, 1, 0, d->fo, d->fi, d->rows, (const float *)d->dy, d->lddy, (const float *)d->x,
                              d->ldx, d->beta, d->dW, d->fi));
    if (!d->db) return RLT_OK;
    cuda_impl *c = cuda_get(bk);
    const int32_t lane = c->lane;
    c->lane = db_lane;
    int rc = cuda_lp_bias_grad(bk, d->db, d->dy, RLT_LP_F32, d->lddy, d->rows, d->fo, d->beta);
    c->lane = lane;
    return rc;
}

/* A routed backward's input gradient on the current lane: the product, then act_x'(x). */
static int lin_blas_dgrad(rlt_backend *bk, const rlt_linear_bwd *d) {
    int done = 0;
    RLT_TRY(cuda_lt_linear_dgrad(bk, d, &done));
    if (done) return RLT_OK;
    RLT_TRY(lin_blas_gemm(bk, 0, 0, 0, d->rows, d->fi, d->fo, (const float *)d->dy, d->lddy, (const float *)d->W, d->fi,
                          0.0f, (float *)d->dx, d->lddx));
    return cuda_act_grad(bk, (float *)d->dx, d->lddx, (const float *)d->x, d->ldx, d->rows, d->fi, d->act_x);
}

/* 16-byte copies for an operand whose rows all start 16-byte aligned. A seed's buffers lie a multiple of the
 * arenas' cudaMalloc alignment (256 bytes) from the lead's, so the lead's alignment is every seed's. */
static int32_t lin_vec_ok(const float *p, int32_t ld) { return ((uintptr_t)p % 16 == 0) && ld % 4 == 0; }

static int lin_launch_problems(rlt_backend *bk, lin_launch *L) {
    const unsigned z = cuda_seeds_z(bk);
    for (int i = 0; i < 2; i++) {
        lin_problem *p = &L->p[i];
        lin_choose_path(p, cuda_get(bk)->seeds_rows ? z : 1);
        p->a_vec = lin_vec_ok(p->A, p->lda);
        p->b_vec = lin_vec_ok(p->B, p->ldb);
        /* the ones column is written element by element into a k-major B */
        CUDA_REQUIRE(bk, !p->ones || !p->b_kcont, "linear: bias gradient with B along k");
    }
    int64_t blocks = (int64_t)L->p[0].tiles + L->p[1].tiles;
    if (blocks == 0) return RLT_OK;
    CUDA_REQUIRE(bk, blocks <= INT32_MAX, "linear: grid size");
    for (int i = 0; i < 2; i++)
        if (L->p[i].tiles)
            RLT_TRY(cuda_seeds_check(bk, "linear", 5, L->p[i].A, L->p[i].B, L->p[i].C, L->p[i].C2, L->p[i].aux));
    L->sd = cuda_seeds_of(bk);
    /* The 16-byte tile for seeds, and for a single agent's launches of 32-row GEMM tiles only (see linear_kernel). */
    int wide = 1;
    for (int i = 0; i < 2; i++) wide &= !L->p[i].tiles || L->p[i].path == LIN_PATH_GEMM32;
    void (*kernel)(lin_launch) =
        z > 1 ? linear_kernel<true, true> : wide ? linear_kernel<false, true> : linear_kernel<false, false>;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, kernel, dim3((unsigned)blocks, 1, z), dim3(LIN_THREADS), *L));
    CUDA_CHECK_LAUNCH(bk, "linear_kernel");
    return RLT_OK;
}

/* Whether cuda_linear_forward runs an fp32 layer of this shape on the library (beyond our kernels' K, big or wide). */
static int lin_fwd_on_library(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo) {
    const cuda_impl *c = cuda_get(bk);
    return fi > LIN_MAX_K || lin_big(rows, fo, fi) || lin_wide(rows, fi, fo, 0, c->tf32) ||
           (c->seeds.n > 1 && c->seeds_blas &&
            cuda_rule_seeds_blas_as(c->seeds_rule, c->tf32, c->seeds.n, rows, fo, fi));
}

extern "C" int cuda_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d) {
    /* 16-bit layers are cuBLAS GEMMs on the tensor cores with elementwise epilogues (lowp.cu). */
    if (d->dtype != RLT_LP_F32) return cuda_linear_forward_lp(bk, d);
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, ldx = d->ldx, ldy = d->ldy, act = d->act;
    const float *x = (const float *)d->x, *W = (const float *)d->W, *b = d->b;
    float *y = (float *)d->y;
    CUDA_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CUDA_REQUIRE(bk, d->y_dtype == RLT_LP_F32, "linear_forward");
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "linear_forward");
    if (rows == 0) return RLT_OK;
    if (lin_fwd_on_library(bk, rows, fi, fo)) {
        if (cuda_get(bk)->seeds.n > 1) {
            /* Seeds at one stride: one strided cuBLASLt product with the bias and ReLU in its epilogue. */
            int done = 0;
            RLT_TRY(cuda_lt_linear_forward_seeds(bk, d, &done));
            if (done) return RLT_OK;
            /* Every batched seed's product in one library call, then the bias and activation for all of them. */
            RLT_TRY(cuda_gemm_seeds(bk, 0, 1, rows, fo, fi, 1.0f, x, ldx, W, fi, 0.0f, y, ldy));
            return cuda_bias_act(bk, y, ldy, b, rows, fo, act);
        }
        int done = 0;
        RLT_TRY(cuda_lt_linear_forward(bk, d, &done));
        if (done) return RLT_OK;
        /* A forward may run on any lane: the same cuBLAS workspace size on all of them keeps its bits. */
        RLT_TRY(lin_blas_gemm(bk, 1, 0, 1, rows, fo, fi, x, ldx, W, fi, 0.0f, y, ldy));
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

extern "C" int cuda_linear_backward(rlt_backend *bk, const rlt_linear_bwd *d) {
    if (d->dtype != RLT_LP_F32) return cuda_linear_backward_lp(bk, d);
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, lddy = d->lddy, ldx = d->ldx, lddx = d->lddx;
    rlt_act act_x = d->act_x;
    const float *dy = (const float *)d->dy, *x = (const float *)d->x, *W = (const float *)d->W;
    float *dW = d->dW, *db = d->db, beta = d->beta, *dx = (float *)d->dx;
    CUDA_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi, "linear_backward");
    CUDA_REQUIRE(bk, !dx || (lddx >= fi && d->dx_dtype == RLT_LP_F32), "linear_backward");
    CUDA_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    /* Each part runs fused unless its K is beyond our kernels or it is big; the parts left to the library run first.
     * A layer wider than LIN_MAX_K inputs (a Nature DQN's 3136-wide head) makes thousands of small tiles here for
     * its weight gradient and long ones for its input gradient; the library runs both in a few large ones (the
     * whole update 3% faster for dW, commit 18adc9c). */
    const cuda_impl *c = cuda_get(bk);
    const int seeds = c->seeds.n > 1, seeds_lib = seeds && c->seeds_blas;
    int fuse_w = (dW || db) && rows <= LIN_MAX_K && fi <= LIN_MAX_K && !lin_big(fo, fi, rows) &&
                 !(seeds_lib && cuda_rule_seeds_blas_as(c->seeds_rule, c->tf32, c->seeds.n, fo, fi, rows));
    int fuse_x = dx && fo <= LIN_MAX_K && fi <= LIN_MAX_K && !lin_big(rows, fi, fo) &&
                 !lin_wide(rows, fi, fo, 1, c->tf32) &&
                 !(seeds_lib && cuda_rule_seeds_blas_as(c->seeds_rule, c->tf32, c->seeds.n, rows, fi, fo));
    if (seeds) {
        /* Batched seeds: the parts left to the library as one batched product each. The weight and bias gradients,
         * which nothing in the backward's chain reads, run on a side lane beside the input gradient (cuda_fork_seeds)
         * when there is one: on the critical path they were 11.7 + 3.7 us of each 256-wide layer's 30 (16 TD3 seeds,
         * tf32, H200, ncu). Each op is the same on either lane (cuda_gemm_seeds' workspace is uniform): the same bits. */
        const int lib_w = !fuse_w && (dW || db), lib_x = dx && !fuse_x;
        const int32_t lane = c->lane, side = lib_w && lib_x ? cuda_fork_seeds(bk) : lane;
        if (side < 0) return RLT_ERUNTIME;
        cuda_get(bk)->lane = side;
        int rc = RLT_OK;
        if (!fuse_w && dW) rc = cuda_gemm_seeds(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, x, ldx, beta, dW, fi);
        if (rc == RLT_OK && !fuse_w && db) rc = cuda_lp_bias_grad(bk, db, dy, RLT_LP_F32, lddy, rows, fo, beta);
        cuda_get(bk)->lane = lane;
        if (rc == RLT_OK && lib_x) {
            rc = cuda_gemm_seeds(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, W, fi, 0.0f, dx, lddx);
            if (rc == RLT_OK) rc = cuda_act_grad(bk, dx, lddx, x, ldx, rows, fi, act_x);
        }
        if (side != lane) {
            const int32_t sides[2] = {side, lane};
            int rc2 = cuda_merge_side(bk, lane, sides);
            if (rc == RLT_OK) rc = rc2;
        }
        RLT_TRY(rc);
    } else if (!fuse_w && !fuse_x) {
        /* Both parts in the library (a wide layer): dW with db in its epilogue on a side lane beside dx
         * (cuda_fork_side); db's own kernel, when not fused, on the other side lane. */
        const int32_t lane = cuda_get(bk)->lane;
        int32_t side[2];
        RLT_TRY(cuda_fork_side(bk, side));
        cuda_get(bk)->lane = side[0];
        int rc = lin_blas_wgrad(bk, d, side[1]);
        cuda_get(bk)->lane = lane;
        if (rc == RLT_OK && dx) rc = lin_blas_dgrad(bk, d);
        int rc2 = cuda_merge_side(bk, lane, side);
        return rc != RLT_OK ? rc : rc2;
    } else {
        if (!fuse_w) RLT_TRY(lin_blas_wgrad(bk, d, cuda_get(bk)->lane));
        if (dx && !fuse_x) RLT_TRY(lin_blas_dgrad(bk, d));
    }
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

/* How cuda_linear_forward sums an fp32 layer of this shape (see cuda_ops.h), for linear_chain.cu, which repeats
 * those sums. */
extern "C" int cuda_linear_fwd_kind(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo) {
    if (lin_fwd_on_library(bk, rows, fi, fo)) return CUDA_FWD_LIBRARY;
    lin_problem p;
    memset(&p, 0, sizeof p);
    p.M = rows, p.N = fo, p.K = fi, p.a_kcont = 1, p.b_kcont = 1, p.epi = LIN_EPI_FWD;
    lin_choose_path(&p, 1);
    if (p.tiles == 0) return CUDA_FWD_LIBRARY; /* no rows: nothing a chain would fuse */
    static_assert(LIN_BK == 32 && LIN_THREADS == 256, "linear_chain.cu's sums assume 32-k chunks over 256 threads");
    switch (p.path) {
    case LIN_PATH_OUTER: return CUDA_FWD_OUTER;
    case LIN_PATH_ROWDOT: return CUDA_FWD_ROWDOT;
    case LIN_PATH_GEMM16: return CUDA_FWD_GEMM_KG8; /* 16x32 tiles: 8 k-groups of 4 k per chunk */
    default: return CUDA_FWD_GEMM_KG4;              /* 32x32 tiles: 4 k-groups of 8 k per chunk */
    }
}

extern "C" cudaError_t cuda_preload_linear(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, linear_kernel<false, false>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, linear_kernel<false, true>);
    return rc == cudaSuccess ? cudaFuncGetAttributes(&a, linear_kernel<true, true>) : rc;
}

/* The rule cuda_linear_forward and cuda_linear_backward follow above is the plan's (cuda_plan_rules.h,
 * cuda_rule_linear_calls_blas): the forward calls the library when fi > LIN_MAX_K or the product is big or the
 * layer wide, the backward when a part of it is beyond the fused kernels, big or wide, and with several seeds batched
 * their library products (cuda_rule_seeds_blas). */
static_assert(LIN_MAX_K == CUDA_LIN_MAX_K && LIN_BLAS_MACS == CUDA_LIN_BLAS_MACS, "the plan's rules are linear.cu's");
