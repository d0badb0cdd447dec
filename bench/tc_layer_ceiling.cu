/* tc_layer_ceiling.cu: whether a TF32 tensor-core layer kernel of our own beats cuBLASLt on N agents' 256-wide
 * forward (issue #39), measured before building one. cuBLASLt runs 16 agents' 256 x 256 x 256 TF32 forward in 7.4 us
 * (an sm80 mma.sync kernel, 64 x 64 tiles); its arithmetic at mma.sync's rate would allow 2-3 us. The kernel here:
 * y = relu(x W^T + b) per agent (grid z), BM x 64 output tiles, 4 warps, k-tiles of 32 streamed through a ring of
 * cp.async stages, mma.sync.m16n8k8 on TF32 operands (rounded to nearest, as cvt.rna), bias and ReLU applied from the
 * accumulators (and a variant that hands the tensor cores the fp32 bits, which they truncate). Each route is a graph
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

/* Agent z's y [rows fo] = relu(x [rows fi] W^T + b), W [fo fi]; rows a multiple of BM, fo of 64, fi of TC_BK. Warps
 * 2 x 2 over the BM x 64 tile, each (BM / 2) x 32: MI = BM / 32 m16 tiles by 4 n8 tiles. */
template <int BM, bool RN>
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

template <int BM, bool RN = true>
static void tc_fwd(bench *B) {
    const size_t bytes = (size_t)TC_STAGES * (BM + 64) * TC_LD * sizeof(float);
    static int set = 0;
    if (!set) CK(cudaFuncSetAttribute(tc_fwd_kernel<BM, RN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    set = 1;
    tc_fwd_kernel<BM, RN><<<dim3(B->fo / 64, B->rows / BM, B->n), 128, bytes, B->s>>>(
        B->base + B->oy, B->base + B->ox, B->base + B->oW, B->base + B->ob, B->fi, B->fo, B->stride);
    CK(cudaGetLastError());
}

/* bm 64 or 32: rounded operands; 0: 64 x 64 tiles with truncated operands. */
static void tc_run(bench *B, int bm) {
    if (bm == 64) tc_fwd<64>(B);
    else if (bm == 32) tc_fwd<32>(B);
    else tc_fwd<64, false>(B);
}

static void tc_op(bench *B, const void *bm) { tc_run(B, *(const int *)bm); }

static double tc_us(bench *B, int bm, int reps, int replays) {
    tc_run(B, bm); /* outside the capture: the kernel's one-time shared-memory attribute */
    CK(cudaStreamSynchronize(B->s));
    return chain_us(B, tc_op, &bm, reps, replays);
}

__global__ void fill_kernel(float *p, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t v = (uint32_t)i * 2654435761u;
        v ^= v >> 15, v *= 2246822519u, v ^= v >> 13;
        p[i] = (float)(v & 0xffff) / 65536.0f - 0.5f;
    }
}

/* The largest |ours - cuBLASLt| over agent n - 1's output, relative to cuBLASLt's largest entry there. */
static double tc_check(bench *B, lt_plan *P, int bm) {
    const int64_t cnt = (int64_t)B->rows * B->fo, off = B->oy + (int64_t)(B->n - 1) * B->stride;
    float *ours = (float *)malloc(cnt * 4), *lib = (float *)malloc(cnt * 4);
    tc_run(B, bm);
    CK(cudaMemcpy(ours, B->base + off, cnt * 4, cudaMemcpyDeviceToHost));
    lt_run(B, P, LT_FWD);
    CK(cudaMemcpy(lib, B->base + off, cnt * 4, cudaMemcpyDeviceToHost));
    double d = 0, m = 0;
    for (int64_t i = 0; i < cnt; i++) d = fmax(d, fabs((double)ours[i] - lib[i])), m = fmax(m, fabs((double)lib[i]));
    free(ours), free(lib);
    return m > 0 ? d / m : d;
}

static void bench_case(int n, int reps, int replays) {
    bench B;
    memset(&B, 0, sizeof B);
    B.n = n, B.rows = 256, B.fi = 256, B.fo = 256, B.tf32 = 1;
    B.stride = bench_plain_layout(&B);
    bench_open(&B, NULL);
    fill_kernel<<<1024, 256, 0, B.s>>>(B.base, B.stride * n);
    CK(cudaStreamSynchronize(B.s));
    lt_plan P = lt_make(&B, LT_FWD);
    const double lib = P.ok ? lt_chain_us(&B, &P, LT_FWD, reps, replays) : -1.0;
    const double t64 = tc_us(&B, 64, reps, replays), t32 = tc_us(&B, 32, reps, replays);
    const double tt = tc_us(&B, 0, reps, replays);
    const double e64 = P.ok ? tc_check(&B, &P, 64) : -1.0, e32 = P.ok ? tc_check(&B, &P, 32) : -1.0;
    const double et = P.ok ? tc_check(&B, &P, 0) : -1.0;
    printf("%6d  tf32  256x256x256 forward (bias, ReLU): cuBLASLt %6.2f  ours 64x64 tiles %6.2f (diff %.1e)  32x64 "
           "tiles %6.2f (diff %.1e)  64x64 truncated %6.2f (diff %.1e)  (us per forward, all agents)\n",
           n, lib, t64, e64, t32, e32, tt, et);
    fflush(stdout);
    bench_close(&B, 1);
}

int main(int argc, char **argv) {
    int reps, replays, agents[8], n_agents;
    cudaDeviceProp prop;
    int rc = ceiling_args(argc, argv, &reps, &replays, agents, &n_agents, &prop);
    if (rc) return rc;
    if (prop.major < 8) {
        fprintf(stderr, "%s has no TF32 tensor cores (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
        return 77;
    }
    printf("a TF32 mma.sync layer kernel of our own against cuBLASLt, %s, %d ops per graph x %d replays\n", prop.name,
           reps, replays);
    for (int a = 0; a < n_agents; a++) bench_case(agents[a], reps, replays);
    return 0;
}
