/* seed_layer_ceiling.cu: what a seed-batched dense layer costs inside a CUDA graph on each library route, measured
 * before building one (issue #39: "measure the ceiling first"). N agents' layers (TD3 256-256/b256: rows 256, fo 256,
 * fi 256 for the hidden layer and fi 17 + 6 = 23 for the critic's first) live in N regions at one stride, as a seed
 * group's arenas would if they were laid out at a fixed stride. Each route is captured as a graph of REPS dependent
 * layer ops and replayed; the figure is microseconds per layer op (all N agents), the graph's replay time / REPS.
 *   forward y = relu(x W^T + b):
 *     ptr+pass    cublasGemmBatchedEx over pointer arrays, then a bias+ReLU pass (today's route, kernels/cuda/gemm.c)
 *     strided+pass cublasGemmStridedBatchedEx, then the same pass
 *     lt-fused    cuBLASLt strided batch with CUBLASLT_EPILOGUE_RELU_BIAS and the bias at the same stride
 *     lt-ptr      cuBLASLt over pointer arrays (CUBLASLT_BATCH_MODE_POINTER_ARRAY), the product alone and with the
 *                 RELU_BIAS epilogue ("-" where the heuristic offers no algorithm): whether the twin critics of every
 *                 agent, which no one stride reaches, could run as one fused batched call
 *   weight gradient dW = dy^T x, db = column sums of dy:
 *     ptr+pass    pointer-array product, then a column-sum pass for db (today's route)
 *     lt-fused    cuBLASLt strided batch with CUBLASLT_EPILOGUE_BGRADB (db from the same call)
 *   input gradient dx = (dy W) * relu'(x) of a layer whose input x is the ReLU output of the layer below (the 256-wide
 *   layers only), and the bias gradient of that layer below, db' = column sums of dx:
 *     ptr+pass    pointer-array product, then the ReLU-gradient pass over x (today's route: gemm.c, cuda_act_grad)
 *     ptr+2 pass  the same and then db' as a column-sum pass (today's two results, in order)
 *     lt-drelu    cuBLASLt strided batch with CUBLASLT_EPILOGUE_DRELU: the mask is a bit matrix the forward below
 *                 writes (CUBLASLT_EPILOGUE_RELU_AUX_BIAS, timed as "fwd lt-aux" against lt-fused's RELU_BIAS)
 *     lt-dr-bgrad the same with CUBLASLT_EPILOGUE_DRELU_BGRAD: db' from the same call
 *   twins side by side: two chains of the fused forward (or of the input gradient and its pass) forked onto two
 *   streams of the graph, as the TD3 update runs its twin critics on two lanes, timed per pair: against one call over
 *   twice the agents (the next row's lt-fused), what merging the twins into one batch would gain beyond the overlap
 * Each agent count runs the 256-input layer, the critic's 23-input first layer, and that layer padded to 24 inputs
 * (rows of 16 bytes, which TF32's tensor-core kernels need: the padding a parameter layout change would bring).
 * fp32 (CUBLAS_COMPUTE_32F) and TF32 (CUBLAS_COMPUTE_32F_FAST_TF32). "-" where cuBLASLt's heuristic offers no
 * algorithm for the fused epilogue at that shape.
 * A whole network's passes as one launch: seed_net_ceiling.cu.
 *   bench_seed_layer_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include "seed_ceiling.cuh"

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

/* dx[z][i] = x[z][i] > 0 ? dx[z][i] : 0 over rows x cols (what cuda_act_grad does after a library input gradient). */
__global__ void relu_grad_kernel(float *dx, const float *x, int64_t n, int64_t stride) {
    float *d = dx + (int64_t)blockIdx.z * stride;
    const float *xz = x + (int64_t)blockIdx.z * stride;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = xz[i] > 0.0f ? d[i] : 0.0f;
}

/* The ReLU bit matrices of cuBLASLt's AUX epilogues: a leading dimension of at least the output's rows, a multiple of
 * 128 bits. One region serves the forward's mask (fo x rows) and the input gradient's (fi x rows). */
static int64_t mask_ld(const bench *B, int64_t m) { return (m + 127) / 128 * 128; }

static void bench_layout(bench *B) {
    int64_t o = bench_plain_layout(B);
    const int64_t ld = mask_ld(B, B->fi > B->fo ? B->fi : B->fo);
    B->omask = o, o += align64(ld * B->rows / 32);
    B->odbp = o, o += align64(B->fi);
    B->stride = o;
}

/* One pointer-array product over pointer set `set` of B->ptrs (its A, B and C arrays, B->n entries each). */
static void ptr_gemm(bench *B, int set, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda,
                     int ldb, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    void **p = B->ptrs + 3 * set * B->n;
    CK(cublasGemmBatchedEx(B->h, ta, tb, m, n, k, &one, (const void *const *)p, CUDA_R_32F, lda,
                           (const void *const *)(p + B->n), CUDA_R_32F, ldb, &zero, p + 2 * B->n, CUDA_R_32F, ldc, B->n,
                           ct, CUBLAS_GEMM_DEFAULT));
}

/* Column-major view (as gemm_lt.c maps our row-major layers): forward D[fo x rows] = W^T-op(A = W, fi x fo, T)
 * times B = x (fi x rows, N); weight gradient D[fi x fo] = A = x (fi x rows, N) times B = dy (fo x rows, T). */
static void fwd_ptr(bench *B, int pass) {
    ptr_gemm(B, 0, CUBLAS_OP_T, CUBLAS_OP_N, B->fo, B->rows, B->fi, B->fi, B->fi, B->fo);
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

static void wgrad_ptr(bench *B) {
    ptr_gemm(B, 1, CUBLAS_OP_N, CUBLAS_OP_T, B->fi, B->fo, B->rows, B->fi, B->fo, B->fi);
    colsum_kernel<<<dim3((B->fo + 127) / 128, 1, B->n), 128, 0, B->s>>>(B->base + B->odb, B->base + B->ody, B->rows,
                                                                      B->fo, B->stride);
}

/* dx = dy W through pointer arrays (A = W, B = dy, C = dx), then the ReLU-gradient pass, then (bias) db'. */
static void dgrad_ptr(bench *B, int bias) {
    ptr_gemm(B, 2, CUBLAS_OP_N, CUBLAS_OP_N, B->fi, B->rows, B->fo, B->fi, B->fo, B->fi);
    relu_grad_kernel<<<dim3(64, 1, B->n), 256, 0, B->s>>>(B->base + B->odx, B->base + B->ox,
                                                          (int64_t)B->rows * B->fi, B->stride);
    if (bias)
        colsum_kernel<<<dim3((B->fi + 127) / 128, 1, B->n), 128, 0, B->s>>>(B->base + B->odbp, B->base + B->odx,
                                                                          B->rows, B->fi, B->stride);
}

/* The AUX plans: the forward writing its ReLU mask (RELU_AUX_BIAS), and the input gradient reading it (DRELU, or
 * DRELU_BGRAD with db' at the region's odbp). The mask's batch stride is in bits. */
static lt_plan lt_make_aux(bench *B, int kind, cublasLtEpilogue_t epi) {
    lt_plan P;
    memset(&P, 0, sizeof P);
    CK(cublasLtMatmulDescCreate(&P.d, B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = kind == LT_FWD ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const void *mask = B->base + B->omask;
    const int64_t ld = mask_ld(B, kind == LT_FWD ? B->fo : B->fi), mst = B->stride * 32, bst = B->stride;
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask, sizeof mask));
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &mst, sizeof mst));
    if (epi != CUBLASLT_EPILOGUE_DRELU) {
        const float *bias = B->base + (kind == LT_FWD ? B->ob : B->odbp);
        CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bst, sizeof bst));
    }
    lt_layouts(B, &P, kind, 0);
    lt_pick(B, &P);
    return P;
}

/* One op of route `which` on B->s. */
static void route_op(bench *B, int which, lt_plan *fwd, lt_plan *wg, lt_plan *ptr, lt_plan *aux) {
    switch (which) {
    case 0: fwd_ptr(B, 1); break;
    case 1: fwd_strided(B); break;
    case 2: lt_run(B, fwd, LT_FWD); break;
    case 3: wgrad_ptr(B); break;
    case 4: lt_run(B, wg, LT_WGRAD); break;
    case 5: fwd_ptr(B, 0); break;
    case 6: lt_run_ptr(B, &ptr[0], B->ptrs); break;
    case 7: lt_run_ptr(B, &ptr[1], B->ptrs); break;
    case 8: lt_run(B, &aux[0], LT_FWD); break;
    case 9: dgrad_ptr(B, 0); break;
    case 10: dgrad_ptr(B, 1); break;
    case 11: lt_run(B, &aux[1], LT_DGRAD); break;
    case 12: lt_run(B, &aux[2], LT_DGRAD); break;
    case 13: lt_run(B, &aux[3], LT_DGRAD); break;
    }
}

/* Microseconds per op of route `which`, as a graph of reps ops replayed `replays` times. Routes 14 and 15 are the
 * twins side by side: two chains of reps ops of route 2 (the fused forward) or 9 (the input gradient and its pass),
 * forked onto two streams in the graph as the update's lanes run Q1 and Q2; the figure is per pair. */
static double time_route(bench *B, int which, lt_plan *fwd, lt_plan *wg, lt_plan *ptr, lt_plan *aux, int reps,
                         int replays) {
    cudaGraph_t g;
    cudaStream_t s0 = B->s;
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    CK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
    const int twins = which >= 14, op = which == 14 ? 2 : which == 15 ? 9 : which;
    if (twins) {
        CK(cudaEventRecord(fork, s0));
        CK(cudaStreamWaitEvent(B->s2, fork, 0));
    }
    for (int i = 0; i < reps; i++) route_op(B, op, fwd, wg, ptr, aux);
    if (twins) {
        B->s = B->s2;
        CK(cublasSetStream(B->h, B->s2));
        for (int i = 0; i < reps; i++) route_op(B, op, fwd, wg, ptr, aux);
        B->s = s0;
        CK(cublasSetStream(B->h, s0));
        CK(cudaEventRecord(join, B->s2));
        CK(cudaStreamWaitEvent(s0, join, 0));
    }
    CK(cudaStreamEndCapture(s0, &g));
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    return graph_us(s0, g, reps, replays);
}

static void bench_case(int n, int fi, int tf32, int reps, int replays) {
    bench B;
    bench_shape(&B, n, fi, tf32);
    bench_layout(&B);
    CK(cudaStreamCreateWithFlags(&B.s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&B.s2, cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&B.base, (size_t)B.stride * n * sizeof(float)));
    CK(cudaMemsetAsync(B.base, 0, (size_t)B.stride * n * sizeof(float), B.s));
    B.ws_bytes = 32u << 20;
    CK(cudaMalloc(&B.ws, B.ws_bytes));
    CK(cublasCreate(&B.h));
    CK(cublasSetStream(B.h, B.s));
    CK(cublasSetWorkspace(B.h, B.ws, B.ws_bytes));
    CK(cublasLtCreate(&B.lt));
    /* Pointer arrays: fwd A (W), B (x), C (y); wgrad A (x), B (dy), C (dW); dgrad A (W), B (dy), C (dx). */
    void **host = (void **)malloc(sizeof(void *) * 9 * n);
    const int64_t off[9] = {B.oW, B.ox, B.oy, B.ox, B.ody, B.odW, B.oW, B.ody, B.odx};
    for (int j = 0; j < 9; j++)
        for (int z = 0; z < n; z++) host[j * n + z] = B.base + off[j] + (int64_t)z * B.stride;
    CK(cudaMalloc((void **)&B.ptrs, sizeof(void *) * 9 * n));
    CK(cudaMemcpy(B.ptrs, host, sizeof(void *) * 9 * n, cudaMemcpyHostToDevice));
    free(host);
    lt_plan fwd = lt_make(&B, LT_FWD), wg = lt_make(&B, LT_WGRAD);
    lt_plan ptr[2] = {lt_make_as(&B, LT_FWD, 1), lt_make_as(&B, LT_FWD, 2)};
    /* The input-gradient routes only where the layer's input is a ReLU output (the 256-wide hidden layer). */
    const int dg = fi > 128;
    lt_plan aux[4];
    memset(aux, 0, sizeof aux);
    aux[0] = lt_make_aux(&B, LT_FWD, CUBLASLT_EPILOGUE_RELU_AUX_BIAS);
    if (dg) {
        aux[1] = lt_make_aux(&B, LT_DGRAD, CUBLASLT_EPILOGUE_DRELU);
        aux[2] = lt_make_aux(&B, LT_DGRAD, CUBLASLT_EPILOGUE_DRELU_BGRAD);
        aux[3] = lt_make(&B, LT_DGRAD);
    }
    double t[16];
    for (int w = 0; w < 16; w++) {
        const lt_plan *p = w == 2 || w == 14 ? &fwd : w == 4 ? &wg : w == 6 ? &ptr[0] : w == 7 ? &ptr[1]
                         : w >= 11 && w <= 13 ? &aux[w - 10] : w == 8 ? &aux[0] : NULL;
        const int skip = (w >= 9 && w != 14 && !dg) || (p && !p->ok);
        t[w] = skip ? -1.0 : time_route(&B, w, &fwd, &wg, ptr, aux, reps, replays);
    }
    char s[16][32];
    for (int i = 0; i < 16; i++) snprintf(s[i], sizeof s[i], t[i] < 0 ? "-" : "%.2f", t[i]);
    printf("%6d  %4s  256x%3dx256  fwd: ptr-only %6.2f  ptr+pass %6.2f  strided+pass %6.2f  lt-fused %6s  "
           "lt-aux %6s  lt-ptr-only %6s  lt-ptr-fused %6s   wgrad: ptr+pass %6.2f  lt-fused %6s   dgrad: lt-only %6s  "
           "ptr+pass %6s  ptr+2 pass %6s  lt-drelu %6s  lt-dr-bgrad %6s   twins side by side: fwd lt-fused %6s  "
           "dgrad ptr+pass %6s  (us per layer op, all agents; twins: per pair)\n",
           n, tf32 ? "tf32" : "fp32", fi, t[5], t[0], t[1], s[2], s[8], s[7], s[6], t[3], s[4], s[13], s[9], s[10],
           s[11], s[12], s[14], s[15]);
    fflush(stdout);
    cublasLtDestroy(B.lt);
    cublasDestroy(B.h);
    cudaFree(B.ptrs);
    cudaFree(B.ws);
    cudaFree(B.base);
    cudaStreamDestroy(B.s);
    cudaStreamDestroy(B.s2);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "seed-batched dense layer routes in a CUDA graph", "ops", 0, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++)
        for (int tf32 = 0; tf32 < 2; tf32++)
            for (int k = 0; k < 3; k++)
                bench_case(o.agents[a], k == 0 ? 256 : k == 1 ? 23 : 24, tf32, o.reps, o.replays);
    return 0;
}
