/* tc_layer_ceiling.cu: whether a TF32 tensor-core layer kernel of our own beats cuBLASLt on N agents' 256-wide
 * forward (issue #39), measured before building one. cuBLASLt runs 16 agents' 256 x 256 x 256 TF32 forward in 7.4 us
 * (an sm80 mma.sync kernel, 64 x 64 tiles); its arithmetic at mma.sync's rate would allow 2-3 us. The kernel here:
 * y = relu(x W^T + b) per agent (grid z), BM x 64 output tiles, 4 warps, k-tiles of 32 streamed through a ring of
 * cp.async stages, mma.sync.m16n8k8 on TF32 operands (rounded to nearest, as cvt.rna), bias and ReLU applied from the
 * accumulators (and variants that hand the tensor cores the fp32 bits, which they truncate, and that read the
 * fragments from shared memory by ldmatrix; bench/RESULTS.md has the figures). Each route is a graph
 * of REPS dependent forwards, replayed; microseconds per forward for all N agents, and the largest difference from
 * cuBLASLt's result relative to its largest entry (both TF32: about 1e-3 expected).
 *   bench_tc_layer_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU of compute capability 8.0 or later (exit 77 without one); built with the CUDA backend. */
#include <math.h>

#include "../kernels/cuda/cp_async.cuh"
#include "seed_ceiling.cuh"

#define TC_BK 32
#define TC_LD (TC_BK + 4) /* a tile row in shared memory: conflict-free fragment reads, 16-byte aligned rows */
#define TC_STAGES 3

/* An operand as TF32: rounded to nearest (RN), or its fp32 bits as they are, which the tensor cores truncate. */
/* TF32 operands and mma.sync need sm_80: the passes for older GPUs build stand-ins that trap, never launched (main
 * refuses such a GPU). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TC_SM80 1
#endif

template <bool RN>
static __device__ __forceinline__ uint32_t tf32_of(float f) {
    uint32_t r = __float_as_uint(f);
#ifdef TC_SM80
    if (RN) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
#endif
    return r;
}

/* C (16 x 8) += A (16 x 8, row) B (8 x 8, col), TF32 operands, fp32 accumulators. */
static __device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifndef TC_SM80
    (void)c, (void)a, (void)b;
    __trap();
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* Four 8 x 4 blocks of 32-bit words from shared memory, one row address a thread (threads 8q .. 8q + 7 name block q's
 * rows): r[q] is word lane % 4 of row lane / 4 of block q, an m16n8k8 TF32 fragment's layout. */
static __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const float *row) {
#ifdef TC_SM80
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    (void)row;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/* Agent z's y [rows fo] = relu(x [rows fi] W^T + b), W [fo fi]; rows a multiple of BM, fo of 64, fi of TC_BK. Warps
 * 2 x 2 over the BM x 64 tile, each (BM / 2) x 32: MI = BM / 32 m16 tiles by 4 n8 tiles. LDM: the fragments come
 * from shared memory by ldmatrix (one instruction for an A fragment or two B fragments) instead of a 4-byte load
 * each. */
template <int BM, bool RN, bool LDM>
__global__ void __launch_bounds__(128) tc_fwd_kernel(float *y, const float *x, const float *W, const float *b,
                                                     int fi, int fo, int64_t stride) {
    constexpr int BN = 64, MI = BM / 32, WM = BM / 2;
    extern __shared__ __align__(16) float sm[];
    const int64_t zo = (int64_t)blockIdx.z * stride;
    x += zo, W += zo, b += zo, y += zo;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, wm = (warp & 1) * WM, wn = (warp >> 1) * 32;
    auto load = [&](int stage, int k0) {
        float *As = sm + stage * (BM + BN) * TC_LD, *Bs = As + BM * TC_LD;
        for (int i = tid; i < BM * TC_BK / 4; i += 128) {
            const int r = i / (TC_BK / 4), c = (i % (TC_BK / 4)) * 4;
            cp_async16(As + r * TC_LD + c, x + (int64_t)(m0 + r) * fi + k0 + c, 16);
        }
        for (int i = tid; i < BN * TC_BK / 4; i += 128) {
            const int r = i / (TC_BK / 4), c = (i % (TC_BK / 4)) * 4;
            cp_async16(Bs + r * TC_LD + c, W + (int64_t)(n0 + r) * fi + k0 + c, 16);
        }
    };
    float acc[MI][4][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    const int KT = fi / TC_BK;
#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; s++) {
        if (s < KT) load(s, s * TC_BK);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<TC_STAGES - 2>();
        __syncthreads();
        if (kt + TC_STAGES - 1 < KT) load((kt + TC_STAGES - 1) % TC_STAGES, (kt + TC_STAGES - 1) * TC_BK);
        cp_async_commit();
        const float *As = sm + (kt % TC_STAGES) * (BM + BN) * TC_LD, *Bs = As + BM * TC_LD;
#pragma unroll
        for (int kk = 0; kk < TC_BK; kk += 8) {
            uint32_t a[MI][4], bf[4][2];
            if (LDM) {
                /* A: blocks (rows +0, k +0), (+8, +0), (+0, +4), (+8, +4); B: two n8 tiles, (+0, +0), (+0, +4),
                 * (+8, +0), (+8, +4). */
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const int row = wm + 16 * i + (lane & 7) + ((lane >> 3) & 1) * 8;
                    ldsm_x4(a[i], As + row * TC_LD + kk + (lane >> 4) * 4);
#pragma unroll
                    for (int e = 0; e < 4; e++) a[i][e] = tf32_of<RN>(__uint_as_float(a[i][e]));
                }
#pragma unroll
                for (int j = 0; j < 4; j += 2) {
                    uint32_t r[4];
                    ldsm_x4(r, Bs + (wn + 8 * j + (lane & 7) + (lane >> 4) * 8) * TC_LD + kk + ((lane >> 3) & 1) * 4);
                    bf[j][0] = tf32_of<RN>(__uint_as_float(r[0])), bf[j][1] = tf32_of<RN>(__uint_as_float(r[1]));
                    bf[j + 1][0] = tf32_of<RN>(__uint_as_float(r[2]));
                    bf[j + 1][1] = tf32_of<RN>(__uint_as_float(r[3]));
                }
            } else {
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const float *p = As + (wm + 16 * i + g) * TC_LD + kk + t;
                    a[i][0] = tf32_of<RN>(p[0]), a[i][1] = tf32_of<RN>(p[8 * TC_LD]);
                    a[i][2] = tf32_of<RN>(p[4]), a[i][3] = tf32_of<RN>(p[8 * TC_LD + 4]);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float *p = Bs + (wn + 8 * j + g) * TC_LD + kk + t;
                    bf[j][0] = tf32_of<RN>(p[0]), bf[j][1] = tf32_of<RN>(p[4]);
                }
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) mma_tf32(acc[i][j], a[i], bf[j]);
        }
    }
    /* c0, c1: row g, columns 2t and 2t + 1; c2, c3: row g + 8. */
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int n = n0 + wn + 8 * j + 2 * t;
        const float b0 = b[n], b1 = b[n + 1];
#pragma unroll
        for (int i = 0; i < MI; i++) {
            const int m = m0 + wm + 16 * i + g;
            float2 lo = make_float2(fmaxf(acc[i][j][0] + b0, 0.0f), fmaxf(acc[i][j][1] + b1, 0.0f));
            float2 hi = make_float2(fmaxf(acc[i][j][2] + b0, 0.0f), fmaxf(acc[i][j][3] + b1, 0.0f));
            *(float2 *)(y + (int64_t)m * fo + n) = lo;
            *(float2 *)(y + (int64_t)(m + 8) * fo + n) = hi;
        }
    }
}

template <int BM, bool RN = true, bool LDM = false>
static void tc_fwd(bench *B) {
    const size_t bytes = (size_t)TC_STAGES * (BM + 64) * TC_LD * sizeof(float);
    static int set = 0;
    if (!set)
        CK(cudaFuncSetAttribute(tc_fwd_kernel<BM, RN, LDM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    set = 1;
    tc_fwd_kernel<BM, RN, LDM><<<dim3(B->fo / 64, B->rows / BM, B->n), 128, bytes, B->s>>>(
        B->base + B->oy, B->base + B->ox, B->base + B->oW, B->base + B->ob, B->fi, B->fo, B->stride);
    CK(cudaGetLastError());
}

/* bm 64 or 32: rounded operands; 0: 64 x 64 tiles with truncated operands; 1 and 2: 64 x 64 tiles with the fragments
 * by ldmatrix, rounded and truncated. */
static void tc_run(bench *B, int bm) {
    if (bm == 64) tc_fwd<64>(B);
    else if (bm == 32) tc_fwd<32>(B);
    else if (bm == 0) tc_fwd<64, false>(B);
    else if (bm == 1) tc_fwd<64, true, true>(B);
    else tc_fwd<64, false, true>(B);
}

static void tc_op(bench *B, const void *bm) { tc_run(B, *(const int *)bm); }

static double tc_us(bench *B, int bm, int reps, int replays) {
    tc_run(B, bm); /* outside the capture: the kernel's one-time shared-memory attribute */
    CK(cudaStreamSynchronize(B->s));
    return chain_us(B, tc_op, &bm, reps, replays);
}

static void bench_case(int n, int reps, int replays) {
    bench B;
    lt_plan P;
    const double lib = ceiling_fwd_reference(&B, n, 256, &P, reps, replays);
    const int route[5] = {64, 32, 0, 1, 2};
    double t[5], e[5];
    for (int r = 0; r < 5; r++) {
        t[r] = tc_us(&B, route[r], reps, replays);
        e[r] = P.ok ? ceiling_fwd_diff(&B, &P, tc_op, &route[r], n - 1) : -1.0;
    }
    printf("%6d  tf32  256x256x256 forward (bias, ReLU): cuBLASLt %6.2f  ours 64x64 tiles %6.2f (diff %.1e)  32x64 "
           "tiles %6.2f (diff %.1e)  64x64 truncated %6.2f (diff %.1e)  ldmatrix %6.2f (diff %.1e)  ldmatrix "
           "truncated %6.2f (diff %.1e)  (us per forward, all agents)\n",
           n, lib, t[0], e[0], t[1], e[1], t[2], e[2], t[3], e[3], t[4], e[4]);
    fflush(stdout);
    bench_close(&B, 1);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "a TF32 mma.sync layer kernel of our own against cuBLASLt", "ops", 8, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++) bench_case(o.agents[a], o.reps, o.replays);
    return 0;
}
