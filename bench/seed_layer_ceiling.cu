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
 *   bench_seed_layer_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
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

/* Microseconds per op of route `which`, as a graph of reps ops replayed `replays` times. */
static double time_route(bench *B, int which, lt_plan *fwd, lt_plan *wg, int reps, int replays) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
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
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; i++) CK(cudaGraphLaunch(ge, B->s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, B->s));
    for (int i = 0; i < replays; i++) CK(cudaGraphLaunch(ge, B->s));
    CK(cudaEventRecord(e1, B->s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return 1000.0 * ms / ((double)reps * replays);
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
    return 0;
}
