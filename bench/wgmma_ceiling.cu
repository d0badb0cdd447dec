/* wgmma_ceiling.cu: whether Hopper's warpgroup tensor-core instructions (wgmma, sm_90a) reach past cuBLASLt on N
 * agents' 256-wide TF32 forward (issue #39), measured before building anything on them. cuBLASLt's whole algorithm
 * space (bench_lt_space) runs 16 agents' 256 x 256 x 256 TF32 forward in 7.2-7.4 us on sm80 mma.sync kernels, and
 * a plain mma.sync kernel of ours in 9-11 us (bench_tc_layer_ceiling). The kernels here: y = relu(x W^T + b) per
 * agent (grid z), one warpgroup (128 threads) per 64 output rows issuing wgmma.m64nNk8 on TF32 operands read from
 * shared memory (K-major), bias and ReLU applied from the accumulators. Three designs:
 *   staged     64 x 64 tiles, k-chunks of 32 floats streamed by cp.async through a ring of 4 stages, each 8-row x
 *              16-byte core matrix contiguous (no swizzle);
 *   resident   the whole K (256) in shared memory: a block of BM / 64 warpgroups copies its x and W slices at once, one
 *              cp.async group per chunk, and multiplies each chunk as it lands; the same core-matrix layout;
 *   swizzled   as resident, in the 128-byte swizzled layout wgmma reads natively (a 128-byte chunk row contiguous, its
 *              16-byte pieces permuted by the row): a quarter-warp copies one row's full 128 bytes.
 * Operands as the tensor cores take them (the fp32 bits, truncated to TF32) or rounded to nearest first (RN: a pass
 * over each chunk in shared memory, as cuBLASLt rounds them). Each route is a graph of REPS dependent forwards,
 * replayed; microseconds per forward for all N agents, and the largest difference from cuBLASLt's result relative to
 * its largest entry (7e-4 truncated, 2e-4 rounded: summation order and rounding, not layout).
 *   bench_wgmma_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs an sm_90 GPU and a build for sm_90a (CMake builds this target for 90a alone; exit 77 without such a GPU). */
#include <math.h>

#include "../kernels/cuda/cp_async.cuh"
#include "seed_ceiling.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_SM90A 1
#endif

#define WG_BK 32 /* floats of K a stage holds: 8 core matrices of 4 */
#define WG_STAGES 4

/* A shared-memory matrix descriptor: no swizzle, lbo the bytes between core matrices adjacent in K, sbo between
 * core matrices adjacent in M (or N). */
static __device__ __forceinline__ uint64_t wg_desc(const void *smem, uint32_t lbo, uint32_t sbo) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}

static __device__ __forceinline__ void wg_fence(void) {
#ifdef WG_SM90A
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void wg_commit(void) {
#ifdef WG_SM90A
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
static __device__ __forceinline__ void wg_wait(void) {
#ifdef WG_SM90A
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* Makes this thread's generic-proxy writes to shared memory (cp.async's, the rounding pass's) visible to the async
 * proxy that wgmma reads its operands through. */
static __device__ __forceinline__ void fence_proxy_async(void) {
#ifdef WG_SM90A
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/* d (64 x 64, this thread's 32 accumulators) += A (64 x 8) B (64 x 8)^T, both K-major in shared memory. */
static __device__ __forceinline__ void wgmma_n64(float (&d)[32], uint64_t da, uint64_t db, int acc) {
#ifdef WG_SM90A
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
#else
    (void)d, (void)da, (void)db, (void)acc;
    __trap();
#endif
}

/* d (64 x 128, this thread's 64 accumulators) += A (64 x 8) B (128 x 8)^T, both K-major in shared memory. */
static __device__ __forceinline__ void wgmma_n128(float (&d)[64], uint64_t da, uint64_t db, int acc) {
#ifdef WG_SM90A
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
#else
    (void)d, (void)da, (void)db, (void)acc;
    __trap();
#endif
}

static __device__ __forceinline__ uint64_t wg_desc_sw128(const void *smem) { /* K-major, 128-byte swizzle */
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

/* The 16-byte piece c (of a chunk's R x 8) in the unswizzled layout: core matrix (c / 64, (c / 8) % 8), row c % 8, so a
 * quarter-warp writes one core matrix's 128 contiguous bytes; and the row it holds. */
static __device__ __forceinline__ float *wg_piece(float *chunk, int c) {
    return chunk + (c / 64) * 256 + ((c / 8) % 8) * 32 + (c % 8) * 4;
}
static __device__ __forceinline__ int wg_piece_row(int c) { return (c % 8) + 8 * (c / 64); }
/* The same in the 128-byte swizzled layout wgmma reads natively: piece c is 16-byte piece j = c % 8 of chunk row
 * r = c / 8, stored at j ^ (r % 8) of the row's 128 contiguous bytes (each 8-row group 1024 bytes, 1024-aligned). A
 * quarter-warp copies one row's 128 contiguous bytes (full sectors) into 8 distinct bank groups. */
static __device__ __forceinline__ float *sw_piece(float *chunk, int c) {
    const int r = c / 8, j = c % 8;
    return chunk + r * 32 + ((j ^ (r % 8)) * 4);
}

static __device__ __forceinline__ void wg_round4(float *q) { /* 4 floats rounded to nearest TF32 in place */
#ifdef WG_SM90A
    float4 *p = (float4 *)q;
    float4 v = *p;
    uint32_t r[4];
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r[0]) : "f"(v.x));
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r[1]) : "f"(v.y));
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r[2]) : "f"(v.z));
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r[3]) : "f"(v.w));
    *p = make_float4(__uint_as_float(r[0]), __uint_as_float(r[1]), __uint_as_float(r[2]), __uint_as_float(r[3]));
#else
    (void)q;
#endif
}

/* Copies k-chunk kt of R rows (rows of ld floats at src) into chunk dst, NT threads, unswizzled or swizzled; with RN
 * rounding instead the pieces this thread copied (after they landed). */
template <int R, int NT, bool SW>
static __device__ __forceinline__ void wg_load(float *dst, const float *src, int ld, int kt) {
    for (int c = threadIdx.x; c < R * 8; c += NT) {
        const int r = SW ? c / 8 : wg_piece_row(c), kc = SW ? c % 8 : (c / 8) % 8;
        cp_async16(SW ? sw_piece(dst, c) : wg_piece(dst, c), src + (size_t)r * ld + kt * WG_BK + kc * 4, 16);
    }
}
template <int R, int NT, bool SW>
static __device__ __forceinline__ void wg_round(float *dst) {
    for (int c = threadIdx.x; c < R * 8; c += NT) wg_round4(SW ? sw_piece(dst, c) : wg_piece(dst, c));
}

/* d += A B^T over one k8 step, the descriptors' matrices 64 x 8 and BN x 8. */
template <int BN>
static __device__ __forceinline__ void wg_mma(float (&d)[BN / 2], uint64_t da, uint64_t db) {
    if constexpr (BN == 64) wgmma_n64(d, da, db, 1);
    else wgmma_n128(d, da, db, 1);
}

/* y = relu(d + b) for warpgroup wg's 64 x BN part of the block's tile (rows from row_base, columns from col_base).
 * Accumulator j of a thread: row 16 warp + lane / 4 (+ 8 for j % 4 >= 2), column 8 (j / 4) + 2 (lane % 4) + j % 2. */
template <int BN>
static __device__ __forceinline__ void wg_store(const float (&d)[BN / 2], float *y, const float *b, int row_base,
                                                int col_base, int fo) {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int row0 = row_base + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < BN / 2; j += 2) {
        const int col = col_base + (j / 4) * 8 + 2 * (lane % 4), row = row0 + ((j % 4) >= 2 ? 8 : 0);
        const float v0 = fmaxf(d[j] + b[col], 0.0f), v1 = fmaxf(d[j + 1] + b[col + 1], 0.0f);
        *(float2 *)(y + (size_t)row * fo + col) = make_float2(v0, v1);
    }
}

/* Staged: one agent's 64 x BN tile (blockIdx.x: BN-column block, y: 64-row block, z: agent), k-chunks through a ring
 * of WG_STAGES, unswizzled. K = fi (a multiple of 32), rows of x and W of fi floats, of y of fo floats. */
template <int BN, bool RN>
__global__ void __launch_bounds__(128) wg_fwd_kernel(float *y, const float *x, const float *W, const float *b, int fi,
                                                     int fo, int64_t stride) {
    extern __shared__ __align__(128) float sm[];
    float *sa = sm, *sb = sm + WG_STAGES * 64 * WG_BK;
    const int64_t ag = (int64_t)blockIdx.z * stride;
    const float *xa = x + ag + (size_t)blockIdx.y * 64 * fi, *wa = W + ag + (size_t)blockIdx.x * BN * fi;
    const int kts = fi / WG_BK;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
    for (int s = 0; s < WG_STAGES - 1; s++) {
        if (s < kts) {
            wg_load<64, 128, false>(sa + s * 64 * WG_BK, xa, fi, s);
            wg_load<BN, 128, false>(sb + s * BN * WG_BK, wa, fi, s);
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < kts; kt++) {
        const int s = kt % WG_STAGES;
        float *a = sa + s * 64 * WG_BK, *bb = sb + s * BN * WG_BK;
        cp_async_wait<WG_STAGES - 2>();
        if (RN) wg_round<64, 128, false>(a), wg_round<BN, 128, false>(bb);
        fence_proxy_async();
        __syncthreads();
        wg_fence();
#pragma unroll
        for (int k8 = 0; k8 < WG_BK / 8; k8++) wg_mma<BN>(d, wg_desc(a + k8 * 64, 128, 1024), wg_desc(bb + k8 * 64, 128, 1024));
        wg_commit();
        wg_wait<0>(); /* the stage about to be refilled (read by the chunk before) is free */
        __syncthreads();
        const int nk = kt + WG_STAGES - 1;
        if (nk < kts) {
            wg_load<64, 128, false>(sa + (nk % WG_STAGES) * 64 * WG_BK, xa, fi, nk);
            wg_load<BN, 128, false>(sb + (nk % WG_STAGES) * BN * WG_BK, wa, fi, nk);
        }
        cp_async_commit();
    }
    wg_store<BN>(d, y + ag, b + ag, blockIdx.y * 64, blockIdx.x * BN, fo);
}

static __device__ __forceinline__ void cp_wait_upto(int n) { /* cp.async.wait_group with a run-time count */
    if (n <= 0) cp_async_wait<0>();
    else if (n == 1) cp_async_wait<1>();
    else if (n == 2) cp_async_wait<2>();
    else if (n == 3) cp_async_wait<3>();
    else if (n == 4) cp_async_wait<4>();
    else if (n == 5) cp_async_wait<5>();
    else if (n == 6) cp_async_wait<6>();
    else cp_async_wait<7>();
}

/* The whole of K resident: a block of BM / 64 warpgroups copies its BM x 256 slice of x and BN x 256 of W into shared
 * memory at once, one cp.async group per k-chunk, and each warpgroup runs its 64 rows' 32 wgmma steps as the chunks
 * land. K = 256 (8 chunks). SW: the 128-byte swizzled layout (else core matrices unswizzled). */
template <int BM, int BN, bool RN, bool SW>
__global__ void __launch_bounds__(BM * 2) wg_res_kernel(float *y, const float *x, const float *W, const float *b,
                                                        int fi, int fo, int64_t stride) {
    extern __shared__ __align__(1024) float sm_raw[];
    float *sm = (float *)(((uintptr_t)sm_raw + 1023) & ~(uintptr_t)1023); /* the swizzle's 1024-byte alignment */
    constexpr int KT = 8, NT = BM * 2;
    float *sa = sm, *sb = sm + BM * 256;
    const int64_t ag = (int64_t)blockIdx.z * stride;
    const float *xa = x + ag + (size_t)blockIdx.y * BM * fi, *wa = W + ag + (size_t)blockIdx.x * BN * fi;
    const int wg = threadIdx.x / 128;
#pragma unroll
    for (int kt = 0; kt < KT; kt++) {
        wg_load<BM, NT, SW>(sa + kt * BM * 32, xa, fi, kt);
        wg_load<BN, NT, SW>(sb + kt * BN * 32, wa, fi, kt);
        cp_async_commit();
    }
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
#pragma unroll
    for (int kt = 0; kt < KT; kt++) {
        cp_wait_upto(KT - 1 - kt);
        if (RN) wg_round<BM, NT, SW>(sa + kt * BM * 32), wg_round<BN, NT, SW>(sb + kt * BN * 32);
        fence_proxy_async();
        __syncthreads();
        wg_fence();
        const float *a = sa + kt * BM * 32 + wg * 64 * 32, *bb = sb + kt * BN * 32;
#pragma unroll
        for (int k8 = 0; k8 < 4; k8++) {
            if (SW) wg_mma<BN>(d, wg_desc_sw128(a + k8 * 8), wg_desc_sw128(bb + k8 * 8));
            else wg_mma<BN>(d, wg_desc(a + k8 * 64, 128, 1024), wg_desc(bb + k8 * 64, 128, 1024));
        }
        wg_commit();
    }
    wg_wait<0>();
    wg_store<BN>(d, y + ag, b + ag, blockIdx.y * BM + wg * 64, blockIdx.x * BN, fo);
}

/* Launches kernel over B's agents with `bytes` of dynamic shared memory (the attribute set once per kernel). */
template <typename K>
static void wg_launch(bench *B, K kernel, int bm, int bn, int threads, size_t bytes) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess) {
        fprintf(stderr, "%zu bytes of shared memory refused\n", bytes);
        exit(1);
    }
    kernel<<<dim3(B->fo / bn, B->rows / bm, B->n), threads, bytes, B->s>>>(B->base + B->oy, B->base + B->ox,
                                                                         B->base + B->oW, B->base + B->ob, B->fi,
                                                                         B->fo, B->stride);
    CK(cudaGetLastError());
}

template <int BN, bool RN>
static void wg_fwd(bench *B) {
    wg_launch(B, wg_fwd_kernel<BN, RN>, 64, BN, 128, (size_t)WG_STAGES * (64 + BN) * WG_BK * sizeof(float));
}
template <int BM, int BN, bool RN, bool SW>
static void wg_res(bench *B) {
    if (B->fi != 256) {
        fprintf(stderr, "the resident routes take K = 256\n");
        exit(1);
    }
    wg_launch(B, wg_res_kernel<BM, BN, RN, SW>, BM, BN, BM * 2, (size_t)(BM + BN) * 256 * sizeof(float) + 1024);
}

#define WG_ROUTES 7
static const char *const wg_route_name[WG_ROUTES] = {"staged 64x64",         "resident 128x64",    "swizzled 128x64",
                                                     "swizzled 128x64 RN",    "swizzled 64x64",     "swizzled 64x128",
                                                     "staged 64x64 RN"};
static void wg_run(bench *B, int r) {
    switch (r) {
    case 0: wg_fwd<64, false>(B); break;
    case 1: wg_res<128, 64, false, false>(B); break;
    case 2: wg_res<128, 64, false, true>(B); break;
    case 3: wg_res<128, 64, true, true>(B); break;
    case 4: wg_res<64, 64, false, true>(B); break;
    case 5: wg_res<64, 128, false, true>(B); break;
    default: wg_fwd<64, true>(B); break;
    }
}
static void wg_op(bench *B, const void *r) { wg_run(B, *(const int *)r); }

static void bench_case(int n, int reps, int replays) {
    bench B;
    lt_plan P;
    const double lib = ceiling_fwd_reference(&B, n, 256, &P, reps, replays);
    printf("%4d agents, tf32 256x256x256 forward (bias, ReLU), us per forward of all agents: cuBLASLt %6.2f\n", n, lib);
    for (int r = 0; r < WG_ROUTES; r++) {
        wg_run(&B, r); /* outside the capture: the kernel's one-time shared-memory attribute */
        CK(cudaStreamSynchronize(B.s));
        /* the first agent and the last */
        const double e = P.ok ? fmax(ceiling_fwd_diff(&B, &P, wg_op, &r, 0), ceiling_fwd_diff(&B, &P, wg_op, &r, n - 1))
                              : -1.0;
        const double t = chain_us(&B, wg_op, &r, reps, replays);
        printf("      wgmma %-15s %6.2f us  (%.2fx cuBLASLt)  diff %.1e\n", wg_route_name[r], t, lib / t, e);
        fflush(stdout);
    }
    bench_close(&B, 1);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "a TF32 wgmma layer kernel of our own against cuBLASLt", "ops", 9, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++) bench_case(o.agents[a], o.reps, o.replays);
    return 0;
}
