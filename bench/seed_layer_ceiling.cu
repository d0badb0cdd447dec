/* seed_layer_ceiling.cu: what a seed-batched dense layer costs inside a CUDA graph on each library route, measured
 * before building one (issue #39: "measure the ceiling first"). N agents' layers (TD3 256-256/b256: rows 256, fo 256,
 * fi 256 for the hidden layer and fi 17 + 6 = 23 for the critic's first) live in N regions at one stride, as a seed
 * group's arenas would if they were laid out at a fixed stride. Each route is captured as a graph of REPS dependent
 * layer ops and replayed; the figure is microseconds per layer op (all N agents), the graph's replay time / REPS.
 *   forward y = relu(x W^T + b):
 *     ptr+pass    cublasGemmBatchedEx over pointer arrays, then a bias+ReLU pass (today's route, kernels/cuda/gemm.c)
 *     strided+pass cublasGemmStridedBatchedEx, then the same pass
 *     lt-fused    cuBLASLt strided batch with CUBLASLT_EPILOGUE_RELU_BIAS and the bias at the same stride
 *   weight gradient dW = dy^T x, db = column sums of dy:
 *     ptr+pass    pointer-array product, then a column-sum pass for db (today's route)
 *     lt-fused    cuBLASLt strided batch with CUBLASLT_EPILOGUE_BGRADB (db from the same call)
 * fp32 (CUBLAS_COMPUTE_32F) and TF32 (CUBLAS_COMPUTE_32F_FAST_TF32). "-" where cuBLASLt's heuristic offers no
 * algorithm for the fused epilogue at that shape.
 * Then a whole critic forward (TD3's 23 -> 256 -> 256 ReLU -> 1, batch 256) for N agents, the design question of
 * docs/seeds.md (one launch per network pass and seed, against a launch per layer):
 *     layers      the two layers on the lt-fused route, then the 1-wide head as a warp-per-row kernel: 3 launches
 *     one launch  net_forward_kernel: a block takes 32 rows of one agent through both layers and the head, the
 *                 hidden activations in shared memory (and stored, as a backward needs them); the 256-wide product
 *                 on TF32 tensor cores (wmma m16n16k8) or, in fp32, FFMA from transposed weight chunks
 * Both print microseconds per forward (all N agents) and the largest difference of their outputs q, relative to
 * the largest |q|.
 *   bench_seed_layer_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                                   \
    do {                                                                                                        \
        long rc_ = (long)(x);                                                                                   \
        if (rc_) {                                                                                              \
            fprintf(stderr, "%s:%d: %s failed (%ld)\n", __FILE__, __LINE__, #x, rc_);                             \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

/* y[z][r][c] = max(y + b[c], 0) for each agent z (grid z), regions at stride `stride` floats. */
__global__ void bias_relu_kernel(float *y, const float *b, int rows, int cols, int64_t stride) {
    float *yz = y + (int64_t)blockIdx.z * stride;
    const float *bz = b + (int64_t)blockIdx.z * stride;
    int64_t n = (int64_t)rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = yz[i] + bz[i % cols];
        yz[i] = v > 0.0f ? v : 0.0f;
    }
}

/* db[z][c] = sum_r dy[z][r][c]: one thread per column (what a column-sum pass does). */
__global__ void colsum_kernel(float *db, const float *dy, int rows, int cols, int64_t stride) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const float *d = dy + (int64_t)blockIdx.z * stride;
    float s = 0.0f;
    for (int r = 0; r < rows; r++) s += d[(int64_t)r * cols + c];
    db[(int64_t)blockIdx.z * stride + c] = s;
}

typedef struct bench {
    int n, rows, fi, fo, tf32;
    int64_t stride; /* floats between agents' regions */
    float *base;    /* n regions: W [fo fi], b [fo], x [rows fi], y [rows fo], dy [rows fo], dW [fo fi], db [fo] */
    int64_t oW, ob, ox, oy, ody, odW, odb;
    void **ptrs; /* device pointer arrays: fwd A (W), B (x), C (y); wgrad A (x), B (dy), C (dW) */
    cublasHandle_t h;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    cudaStream_t s;
} bench;

static int64_t align64(int64_t v) { return (v + 63) / 64 * 64; }

static void bench_layout(bench *B) {
    int64_t o = 0;
    B->oW = o, o += align64((int64_t)B->fo * B->fi);
    B->ob = o, o += align64(B->fo);
    B->ox = o, o += align64((int64_t)B->rows * B->fi);
    B->oy = o, o += align64((int64_t)B->rows * B->fo);
    B->ody = o, o += align64((int64_t)B->rows * B->fo);
    B->odW = o, o += align64((int64_t)B->fo * B->fi);
    B->odb = o, o += align64(B->fo);
    B->stride = o;
}

/* Column-major view (as gemm_lt.c maps our row-major layers): forward D[fo x rows] = W^T-op(A = W, fi x fo, T)
 * times B = x (fi x rows, N); weight gradient D[fi x fo] = A = x (fi x rows, N) times B = dy (fo x rows, T). */
static void fwd_ptr(bench *B, int pass) {
    const float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    void **p = B->ptrs;
    CK(cublasGemmBatchedEx(B->h, CUBLAS_OP_T, CUBLAS_OP_N, B->fo, B->rows, B->fi, &one, (const void *const *)p,
                           CUDA_R_32F, B->fi, (const void *const *)(p + B->n), CUDA_R_32F, B->fi, &zero, p + 2 * B->n,
                           CUDA_R_32F, B->fo, B->n, ct, CUBLAS_GEMM_DEFAULT));
    if (pass)
        bias_relu_kernel<<<dim3(64, 1, B->n), 256, 0, B->s>>>(B->base + B->oy, B->base + B->ob, B->rows, B->fo,
                                                              B->stride);
}

static void fwd_strided(bench *B) {
    const float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CK(cublasGemmStridedBatchedEx(B->h, CUBLAS_OP_T, CUBLAS_OP_N, B->fo, B->rows, B->fi, &one, B->base + B->oW,
                                  CUDA_R_32F, B->fi, B->stride, B->base + B->ox, CUDA_R_32F, B->fi, B->stride, &zero,
                                  B->base + B->oy, CUDA_R_32F, B->fo, B->stride, B->n, ct, CUBLAS_GEMM_DEFAULT));
    bias_relu_kernel<<<dim3(64, 1, B->n), 256, 0, B->s>>>(B->base + B->oy, B->base + B->ob, B->rows, B->fo, B->stride);
}

typedef struct lt_plan {
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int ok;
} lt_plan;

static cublasLtMatrixLayout_t lt_layout(bench *B, uint64_t rows, uint64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t l;
    CK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld));
    int32_t n = B->n;
    int64_t st = B->stride;
    CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
    CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
    return l;
}

/* wgrad 0: the forward with RELU_BIAS; 1: the weight gradient with BGRADB. */
static lt_plan lt_make(bench *B, int wgrad) {
    lt_plan P;
    memset(&P, 0, sizeof P);
    CK(cublasLtMatmulDescCreate(&P.d, B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = wgrad ? CUBLAS_OP_N : CUBLAS_OP_T, tb = wgrad ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = wgrad ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_RELU_BIAS;
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const float *bias = B->base + (wgrad ? B->odb : B->ob);
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    int64_t bst = B->stride;
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bst, sizeof bst));
    if (wgrad) {
        P.la = lt_layout(B, B->fi, B->rows, B->fi); /* x */
        P.lb = lt_layout(B, B->fo, B->rows, B->fo); /* dy, transposed */
        P.lc = lt_layout(B, B->fi, B->fo, B->fi);   /* dW */
    } else {
        P.la = lt_layout(B, B->fi, B->fo, B->fi);   /* W, transposed */
        P.lb = lt_layout(B, B->fi, B->rows, B->fi); /* x */
        P.lc = lt_layout(B, B->fo, B->rows, B->fo); /* y */
    }
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &B->ws_bytes,
                                            sizeof B->ws_bytes));
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(B->lt, P.d, P.la, P.lb, P.lc, P.lc, pref, 1, &r, &found) == CUBLAS_STATUS_SUCCESS &&
        found > 0) {
        P.algo = r.algo;
        P.ok = 1;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    return P;
}

static void lt_run(bench *B, lt_plan *P, int wgrad) {
    const float one = 1.0f, zero = 0.0f;
    const float *A = B->base + (wgrad ? B->ox : B->oW), *Bm = B->base + (wgrad ? B->ody : B->ox);
    float *C = B->base + (wgrad ? B->odW : B->oy);
    CK(cublasLtMatmul(B->lt, P->d, &one, A, P->la, Bm, P->lb, &zero, C, P->lc, C, P->lc, &P->algo, B->ws, B->ws_bytes,
                      B->s));
}

static void wgrad_ptr(bench *B) {
    const float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    void **p = B->ptrs + 3 * B->n;
    CK(cublasGemmBatchedEx(B->h, CUBLAS_OP_N, CUBLAS_OP_T, B->fi, B->fo, B->rows, &one, (const void *const *)p,
                           CUDA_R_32F, B->fi, (const void *const *)(p + B->n), CUDA_R_32F, B->fo, &zero, p + 2 * B->n,
                           CUDA_R_32F, B->fi, B->n, ct, CUBLAS_GEMM_DEFAULT));
    colsum_kernel<<<dim3((B->fo + 127) / 128, 1, B->n), 128, 0, B->s>>>(B->base + B->odb, B->base + B->ody, B->rows,
                                                                      B->fo, B->stride);
}

/* Microseconds per op of a captured graph of `ops` ops, replayed `replays` times after 5 warm-up replays; frees g. */
static double graph_us(cudaStream_t s, cudaGraph_t g, int ops, int replays) {
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; i++) CK(cudaGraphLaunch(ge, s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < replays; i++) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return 1000.0 * ms / ((double)ops * replays);
}

/* Microseconds per op of route `which`, as a graph of reps ops replayed `replays` times. */
static double time_route(bench *B, int which, lt_plan *fwd, lt_plan *wg, int reps, int replays) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(B->s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) {
        switch (which) {
        case 0: fwd_ptr(B, 1); break;
        case 1: fwd_strided(B); break;
        case 2: lt_run(B, fwd, 0); break;
        case 3: wgrad_ptr(B); break;
        case 4: lt_run(B, wg, 1); break;
        case 5: fwd_ptr(B, 0); break;
        }
    }
    CK(cudaStreamEndCapture(B->s, &g));
    return graph_us(B->s, g, reps, replays);
}

static void bench_case(int n, int fi, int tf32, int reps, int replays) {
    bench B;
    memset(&B, 0, sizeof B);
    B.n = n, B.rows = 256, B.fi = fi, B.fo = 256, B.tf32 = tf32;
    bench_layout(&B);
    CK(cudaStreamCreateWithFlags(&B.s, cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&B.base, (size_t)B.stride * n * sizeof(float)));
    CK(cudaMemsetAsync(B.base, 0, (size_t)B.stride * n * sizeof(float), B.s));
    B.ws_bytes = 32u << 20;
    CK(cudaMalloc(&B.ws, B.ws_bytes));
    CK(cublasCreate(&B.h));
    CK(cublasSetStream(B.h, B.s));
    CK(cublasSetWorkspace(B.h, B.ws, B.ws_bytes));
    CK(cublasLtCreate(&B.lt));
    void **host = (void **)malloc(sizeof(void *) * 6 * n);
    const int64_t off[6] = {B.oW, B.ox, B.oy, B.ox, B.ody, B.odW};
    for (int j = 0; j < 6; j++)
        for (int z = 0; z < n; z++) host[j * n + z] = B.base + off[j] + (int64_t)z * B.stride;
    CK(cudaMalloc((void **)&B.ptrs, sizeof(void *) * 6 * n));
    CK(cudaMemcpy(B.ptrs, host, sizeof(void *) * 6 * n, cudaMemcpyHostToDevice));
    free(host);
    lt_plan fwd = lt_make(&B, 0), wg = lt_make(&B, 1);
    double t[6];
    for (int w = 0; w < 6; w++) {
        int lt_route = w == 2 || w == 4;
        lt_plan *p = w == 2 ? &fwd : &wg;
        t[w] = lt_route && !p->ok ? -1.0 : time_route(&B, w, &fwd, &wg, reps, replays);
    }
    char a[32], b[32];
    snprintf(a, sizeof a, t[2] < 0 ? "-" : "%.2f", t[2]);
    snprintf(b, sizeof b, t[4] < 0 ? "-" : "%.2f", t[4]);
    printf("%6d  %4s  256x%3dx256  fwd: ptr-only %6.2f  ptr+pass %6.2f  strided+pass %6.2f  lt-fused %6s   "
           "wgrad: ptr+pass %6.2f  lt-fused %6s  (us per layer op, all agents)\n",
           n, tf32 ? "tf32" : "fp32", fi, t[5], t[0], t[1], a, t[3], b);
    fflush(stdout);
    cublasLtDestroy(B.lt);
    cublasDestroy(B.h);
    cudaFree(B.ptrs);
    cudaFree(B.ws);
    cudaFree(B.base);
    cudaStreamDestroy(B.s);
}

/* ---- a whole critic forward: a launch per layer against one launch ---------------------------------------------- */

enum { NET_IN = 23, NET_H = 256, NET_ROWS = 256, NET_RT = 32, NET_LDH = NET_H + 4, NET_LDW = NET_H + 1 };

/* Offsets (floats) of one agent's region: W1 [H IN], b1, x [ROWS IN], h1 [ROWS H], W2 [H H], b2, h2 [ROWS H], w3 [H],
 * b3, q [ROWS]; agents at `stride`. */
typedef struct net_layout {
    int64_t W1, b1, x, h1, W2, b2, h2, w3, b3, q, stride;
} net_layout;

static net_layout net_make_layout(void) {
    net_layout L;
    int64_t o = 0;
    L.W1 = o, o += align64((int64_t)NET_H * NET_IN);
    L.b1 = o, o += align64(NET_H);
    L.x = o, o += align64((int64_t)NET_ROWS * NET_IN);
    L.h1 = o, o += align64((int64_t)NET_ROWS * NET_H);
    L.W2 = o, o += align64((int64_t)NET_H * NET_H);
    L.b2 = o, o += align64(NET_H);
    L.h2 = o, o += align64((int64_t)NET_ROWS * NET_H);
    L.w3 = o, o += align64(NET_H);
    L.b3 = o, o += align64(1);
    L.q = o, o += align64(NET_ROWS);
    L.stride = o;
    return L;
}

/* Uniform values in [-scale, scale) from a hash of the index: weights, biases and inputs. */
__global__ void net_fill_kernel(float *p, int64_t n, float scale, uint32_t salt) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ salt;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        p[i] = scale * ((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

/* q[r] = dot(h2[r], w3) + b3: a warp per row (the layers route's third launch). */
__global__ void net_head_kernel(float *base, net_layout L) {
    float *a = base + (int64_t)blockIdx.z * L.stride;
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= NET_ROWS) return;
    float s = 0.0f;
    for (int c = lane; c < NET_H; c += 32) s = fmaf(a[L.h2 + (int64_t)r * NET_H + c], a[L.w3 + c], s);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) a[L.q + r] = s + a[L.b3];
}

/* One launch for the whole forward: block (t, z) takes rows 32t .. 32t + 31 of agent z. 256 threads. */
template <bool TF32>
__global__ void __launch_bounds__(256) net_forward_kernel(float *base, net_layout L) {
    extern __shared__ float sm[];
    float *xs = sm, *hs = sm + NET_RT * 24, *wt = hs + NET_RT * NET_LDH;
    float *a = base + (int64_t)blockIdx.z * L.stride;
    const int r0 = blockIdx.x * NET_RT, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    for (int i = tid; i < NET_RT * 24; i += 256) {
        int r = i / 24, k = i % 24;
        xs[i] = k < NET_IN ? a[L.x + (int64_t)(r0 + r) * NET_IN + k] : 0.0f;
    }
    /* Layer 1 (K = 23): thread c keeps W1's row c in registers and runs the block's 32 rows. */
    float w[NET_IN];
#pragma unroll
    for (int k = 0; k < NET_IN; k++) w[k] = a[L.W1 + (int64_t)tid * NET_IN + k];
    const float b1 = a[L.b1 + tid];
    __syncthreads();
    for (int r = 0; r < NET_RT; r++) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < NET_IN; k++) s = fmaf(xs[r * 24 + k], w[k], s);
        float h = fmaxf(s + b1, 0.0f);
        hs[r * NET_LDH + tid] = h;
        a[L.h1 + (int64_t)(r0 + r) * NET_H + tid] = h;
    }
    __syncthreads();
    if (TF32) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
        __trap(); /* TF32 tensor cores from sm_80 (the bench runs on sm_90) */
#else
        /* Layer 2 on tensor cores: warp w owns rows 16 (w & 1) .. + 15 and columns 64 (w >> 1) .. + 63; W2 [out in]
         * read as the column-major B operand straight from global memory (L2). */
        using namespace nvcuda;
        const int rt = warp & 1, ct = (warp >> 1) * 4;
        wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[4];
#pragma unroll
        for (int j = 0; j < 4; j++) wmma::fill_fragment(acc[j], 0.0f);
        for (int k0 = 0; k0 < NET_H; k0 += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, hs + rt * 16 * NET_LDH + k0, NET_LDH);
#pragma unroll
            for (int e = 0; e < fa.num_elements; e++) fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
                wmma::load_matrix_sync(fb, a + L.W2 + (int64_t)(ct + j) * 16 * NET_H + k0, NET_H);
#pragma unroll
                for (int e = 0; e < fb.num_elements; e++) fb.x[e] = wmma::__float_to_tf32(fb.x[e]);
                wmma::mma_sync(acc[j], fa, fb, acc[j]);
            }
        }
        __syncthreads(); /* every warp has read hs */
#pragma unroll
        for (int j = 0; j < 4; j++)
            wmma::store_matrix_sync(hs + rt * 16 * NET_LDH + (ct + j) * 16, acc[j], NET_LDH, wmma::mem_row_major);
#endif
    } else {
        /* Layer 2 in fp32: W2's columns k0 .. k0 + 31 copied transposed into wt, then each thread sums 4 rows
         * (warp w's) by 8 columns (lane + 32 j). */
        float acc[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
        for (int k0 = 0; k0 < NET_H; k0 += 32) {
            for (int i = tid; i < 32 * NET_H; i += 256) {
                int c = i / 32, kk = i % 32;
                wt[kk * NET_LDW + c] = a[L.W2 + (int64_t)c * NET_H + k0 + kk];
            }
            __syncthreads();
#pragma unroll 4
            for (int kk = 0; kk < 32; kk++) {
                float x4[4], w8[8];
#pragma unroll
                for (int i = 0; i < 4; i++) x4[i] = hs[(warp * 4 + i) * NET_LDH + k0 + kk];
#pragma unroll
                for (int j = 0; j < 8; j++) w8[j] = wt[kk * NET_LDW + lane + 32 * j];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[i][j] = fmaf(x4[i], w8[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) hs[(warp * 4 + i) * NET_LDH + lane + 32 * j] = acc[i][j];
    }
    __syncthreads();
    /* Bias, ReLU, the stored activations and the head: warp w's 4 rows, lanes over the columns. */
    for (int i = 0; i < 4; i++) {
        const int r = warp * 4 + i;
        float s = 0.0f;
        for (int c = lane; c < NET_H; c += 32) {
            float h = fmaxf(hs[r * NET_LDH + c] + a[L.b2 + c], 0.0f);
            a[L.h2 + (int64_t)(r0 + r) * NET_H + c] = h;
            s = fmaf(h, a[L.w3 + c], s);
        }
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) a[L.q + r0 + r] = s + a[L.b3];
    }
}

static size_t net_smem(int tf32) {
    return sizeof(float) * (NET_RT * 24 + NET_RT * NET_LDH + (tf32 ? 0 : 32 * NET_LDW));
}

/* route 0: the layers (lt-fused, then the head); 1: one launch. */
static void net_run(bench *L1, bench *L2, lt_plan *p1, lt_plan *p2, net_layout L, int route) {
    if (route == 0) {
        lt_run(L1, p1, 0);
        lt_run(L2, p2, 0);
        net_head_kernel<<<dim3(NET_ROWS / 8, 1, L1->n), 256, 0, L1->s>>>(L1->base, L);
    } else if (L1->tf32) {
        net_forward_kernel<true><<<dim3(NET_ROWS / NET_RT, 1, L1->n), 256, net_smem(1), L1->s>>>(L1->base, L);
    } else {
        net_forward_kernel<false><<<dim3(NET_ROWS / NET_RT, 1, L1->n), 256, net_smem(0), L1->s>>>(L1->base, L);
    }
}

static double net_time(bench *L1, bench *L2, lt_plan *p1, lt_plan *p2, net_layout L, int route, int reps, int replays) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(L1->s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) net_run(L1, L2, p1, p2, L, route);
    CK(cudaStreamEndCapture(L1->s, &g));
    return graph_us(L1->s, g, reps, replays);
}

/* Agent z's q from the last run of a route, for every agent. */
static void net_read_q(const bench *B, net_layout L, float *q) {
    for (int z = 0; z < B->n; z++)
        CK(cudaMemcpy(q + (size_t)z * NET_ROWS, B->base + (int64_t)z * L.stride + L.q, NET_ROWS * sizeof(float),
                      cudaMemcpyDeviceToHost));
}

static void net_case(int n, int tf32, int reps, int replays) {
    net_layout L = net_make_layout();
    bench L1, L2;
    memset(&L1, 0, sizeof L1);
    L1.n = n, L1.rows = NET_ROWS, L1.fi = NET_IN, L1.fo = NET_H, L1.tf32 = tf32, L1.stride = L.stride;
    L1.oW = L.W1, L1.ob = L.b1, L1.ox = L.x, L1.oy = L.h1;
    CK(cudaStreamCreateWithFlags(&L1.s, cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&L1.base, (size_t)L.stride * n * sizeof(float)));
    L1.ws_bytes = 32u << 20;
    CK(cudaMalloc(&L1.ws, L1.ws_bytes));
    CK(cublasLtCreate(&L1.lt));
    L2 = L1;
    L2.fi = NET_H, L2.oW = L.W2, L2.ob = L.b2, L2.ox = L.h1, L2.oy = L.h2;
    for (int z = 0; z < n; z++) {
        float *a = L1.base + (int64_t)z * L.stride;
        const struct { int64_t off, len; float scale; } f[] = {
            {L.W1, (int64_t)NET_H * NET_IN, 0.2085f}, {L.b1, NET_H, 0.2085f}, {L.x, (int64_t)NET_ROWS * NET_IN, 1.0f},
            {L.W2, (int64_t)NET_H * NET_H, 0.0625f},   {L.b2, NET_H, 0.0625f}, {L.w3, NET_H, 0.0625f},
            {L.b3, 1, 0.0625f}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            net_fill_kernel<<<64, 256, 0, L1.s>>>(a + f[i].off, f[i].len, f[i].scale, (uint32_t)(z * 131 + i * 7919));
    }
    CK(cudaFuncSetAttribute(net_forward_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)net_smem(1)));
    CK(cudaFuncSetAttribute(net_forward_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)net_smem(0)));
    lt_plan p1 = lt_make(&L1, 0), p2 = lt_make(&L2, 0);
    double t0 = -1.0, t1;
    float *qa = (float *)malloc(sizeof(float) * (size_t)n * NET_ROWS), *qb = (float *)malloc(sizeof(float) * (size_t)n * NET_ROWS);
    if (p1.ok && p2.ok) {
        t0 = net_time(&L1, &L2, &p1, &p2, L, 0, reps, replays);
        CK(cudaStreamSynchronize(L1.s));
        net_read_q(&L1, L, qa);
    }
    t1 = net_time(&L1, &L2, &p1, &p2, L, 1, reps, replays);
    CK(cudaStreamSynchronize(L1.s));
    CK(cudaGetLastError());
    net_read_q(&L1, L, qb);
    double dmax = 0.0, qmax = 0.0;
    for (size_t i = 0; i < (size_t)n * NET_ROWS && t0 >= 0; i++) {
        double d = fabs((double)qa[i] - (double)qb[i]), m = fabs((double)qa[i]);
        dmax = d > dmax ? d : dmax;
        qmax = m > qmax ? m : qmax;
    }
    char a0[32];
    snprintf(a0, sizeof a0, t0 < 0 ? "-" : "%.2f", t0);
    printf("%6d  %4s  critic 23-256-256-1 forward: layers (3 launches) %6s us  one launch %6.2f us  (%.2fx)  "
           "max |dq| / max |q| %.1e\n",
           n, tf32 ? "tf32" : "fp32", a0, t1, t0 > 0 ? t0 / t1 : 0.0, qmax > 0 ? dmax / qmax : 0.0);
    fflush(stdout);
    free(qa);
    free(qb);
    cublasLtDestroy(L1.lt);
    cudaFree(L1.ws);
    cudaFree(L1.base);
    cudaStreamDestroy(L1.s);
}

int main(int argc, char **argv) {
    int reps = 20, replays = 200;
    int agents[8] = {16, 64}, n_agents = 2;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--replays")) replays = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--agents")) {
            n_agents = 0;
            for (char *t = strtok(argv[++i], ","); t && n_agents < 8; t = strtok(NULL, ",")) agents[n_agents++] = atoi(t);
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--replays N] [--agents 16,64]\n", argv[0]);
            return 2;
        }
    }
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count < 1) {
        fprintf(stderr, "no GPU\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("seed-batched dense layer routes in a CUDA graph, %s, %d ops per graph x %d replays\n", prop.name, reps,
           replays);
    for (int a = 0; a < n_agents; a++)
        for (int tf32 = 0; tf32 < 2; tf32++)
            for (int k = 0; k < 2; k++) bench_case(agents[a], k ? 23 : 256, tf32, reps, replays);
    for (int a = 0; a < n_agents; a++)
        for (int tf32 = 0; tf32 < (prop.major >= 8 ? 2 : 1); tf32++) net_case(agents[a], tf32, reps, replays);
    return 0;
}
