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
static double time_route(bench *B, int which, lt_plan *fwd, lt_plan *wg, lt_plan *ptr, int reps, int replays) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(B->s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) {
        switch (which) {
        case 0: fwd_ptr(B, 1); break;
        case 1: fwd_strided(B); break;
        case 2: lt_run(B, fwd, LT_FWD); break;
        case 3: wgrad_ptr(B); break;
        case 4: lt_run(B, wg, LT_WGRAD); break;
        case 5: fwd_ptr(B, 0); break;
        case 6: lt_run_ptr(B, &ptr[0], B->ptrs); break;
        case 7: lt_run_ptr(B, &ptr[1], B->ptrs); break;
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
    lt_plan fwd = lt_make(&B, LT_FWD), wg = lt_make(&B, LT_WGRAD);
    lt_plan ptr[2] = {lt_make_as(&B, LT_FWD, 1), lt_make_as(&B, LT_FWD, 2)};
    double t[8];
    for (int w = 0; w < 8; w++) {
        const lt_plan *p = w == 2 ? &fwd : w == 4 ? &wg : w == 6 ? &ptr[0] : w == 7 ? &ptr[1] : NULL;
        t[w] = p && !p->ok ? -1.0 : time_route(&B, w, &fwd, &wg, ptr, reps, replays);
    }
    char s[4][32];
    const int shown[4] = {2, 4, 6, 7};
    for (int i = 0; i < 4; i++) snprintf(s[i], sizeof s[i], t[shown[i]] < 0 ? "-" : "%.2f", t[shown[i]]);
    printf("%6d  %4s  256x%3dx256  fwd: ptr-only %6.2f  ptr+pass %6.2f  strided+pass %6.2f  lt-fused %6s  "
           "lt-ptr-only %6s  lt-ptr-fused %6s   wgrad: ptr+pass %6.2f  lt-fused %6s  (us per layer op, all agents)\n",
           n, tf32 ? "tf32" : "fp32", fi, t[5], t[0], t[1], s[0], s[3], s[2], t[3], s[1]);
    fflush(stdout);
    cublasLtDestroy(B.lt);
    cublasDestroy(B.h);
    cudaFree(B.ptrs);
    cudaFree(B.ws);
    cudaFree(B.base);
    cudaStreamDestroy(B.s);
}

int main(int argc, char **argv) {
    int reps, replays, agents[8], n_agents;
    cudaDeviceProp prop;
    int rc = ceiling_args(argc, argv, &reps, &replays, agents, &n_agents, &prop);
    if (rc) return rc;
    printf("seed-batched dense layer routes in a CUDA graph, %s, %d ops per graph x %d replays\n", prop.name, reps,
           replays);
    for (int a = 0; a < n_agents; a++)
        for (int tf32 = 0; tf32 < 2; tf32++)
            for (int k = 0; k < 2; k++) bench_case(agents[a], k ? 23 : 256, tf32, reps, replays);
    return 0;
}
