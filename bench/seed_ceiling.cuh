/* seed_ceiling.cuh: what the ceiling benchmarks (seed_layer_ceiling.cu, seed_net_ceiling.cu, lt_algos.cu,
 * pdl_ceiling.cu, stride_ceiling.cu, tc_layer_ceiling.cu) share: N agents' buffers in regions at one stride
 * (`bench`), the cuBLASLt strided-batch products over them (forward with bias and ReLU, weight gradient with the bias
 * gradient, input gradient), the timing of a captured graph or chain of ops, and the command line. */
#pragma once
#include <math.h>

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

typedef struct bench {
    int n, rows, fi, fo, tf32;
    int64_t stride; /* floats between agents' regions */
    float *base;    /* n regions: W [fo fi], b [fo], x [rows fi], y [rows fo], dy [rows fo], dW [fo fi], db [fo],
                     * dx [rows fi] (offsets in floats) */
    int64_t oW, ob, ox, oy, ody, odW, odb, odx;
    int64_t omask, odbp; /* seed_layer_ceiling's AUX routes: the ReLU bit matrix, the layer below's bias gradient */
    void **ptrs; /* device pointer arrays: fwd A (W), B (x), C (y); wgrad A (x), B (dy), C (dW) */
    cublasHandle_t h;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    cudaStream_t s, s2; /* s2: the second branch of seed_layer_ceiling's twin routes */
} bench;

static int64_t align64(int64_t v) { return (v + 63) / 64 * 64; }

typedef struct lt_plan {
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int ok;
} lt_plan;

/* A batch of B->n matrices at B->stride floats apart, or (ptr) named by a device array of pointers
 * (CUBLASLT_BATCH_MODE_POINTER_ARRAY: any layout, such as the twin critics' regions of every agent). */
static cublasLtMatrixLayout_t lt_layout(bench *B, uint64_t rows, uint64_t cols, int64_t ld, int ptr) {
    cublasLtMatrixLayout_t l;
    CK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld));
    int32_t n = B->n;
    int64_t st = B->stride;
    CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
    if (ptr) {
        uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof mode));
    } else {
        CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
    }
    return l;
}

/* The heuristic's first algorithm for P within the workspace (P->ok 0 when it offers none). */
static void lt_pick(bench *B, lt_plan *P) {
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &B->ws_bytes,
                                            sizeof B->ws_bytes));
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(B->lt, P->d, P->la, P->lb, P->lc, P->lc, pref, 1, &r, &found) ==
            CUBLAS_STATUS_SUCCESS &&
        found > 0) {
        P->algo = r.algo;
        P->ok = 1;
    }
    cublasLtMatmulPreferenceDestroy(pref);
}

/* What an lt_plan computes (column-major views of the row-major layers, as gemm_lt.c maps them):
 *   LT_FWD    y = relu(x W^T + b): D[fo x rows] = A = W (fi x fo, T) times B = x (fi x rows, N), RELU_BIAS
 *   LT_WGRAD  dW = dy^T x, db: D[fi x fo] = A = x (fi x rows, N) times B = dy (fo x rows, T), BGRADB
 *   LT_DGRAD  dx = dy W: D[fi x rows] = A = W (fi x fo, N) times B = dy (fo x rows, N), no epilogue */
enum { LT_FWD = 0, LT_WGRAD = 1, LT_DGRAD = 2 };
/* The forward through pointer arrays p (A = W, B = x, C = D = y, B->n entries each, on the device). */
static void lt_run_ptr(bench *B, lt_plan *P, void **p) {
    const float one = 1.0f, zero = 0.0f;
    CK(cublasLtMatmul(B->lt, P->d, &one, p, P->la, p + B->n, P->lb, &zero, p + 2 * B->n, P->lc, p + 2 * B->n, P->lc,
                      &P->algo, B->ws, B->ws_bytes, B->s));
}

/* P's three matrix layouts for `kind` (strided, or through pointer arrays). */
static void lt_layouts(bench *B, lt_plan *P, int kind, int ptr) {
    if (kind == LT_WGRAD) {
        P->la = lt_layout(B, B->fi, B->rows, B->fi, ptr); /* x */
        P->lb = lt_layout(B, B->fo, B->rows, B->fo, ptr); /* dy, transposed */
        P->lc = lt_layout(B, B->fi, B->fo, B->fi, ptr);   /* dW */
    } else if (kind == LT_DGRAD) {
        P->la = lt_layout(B, B->fi, B->fo, B->fi, ptr);   /* W */
        P->lb = lt_layout(B, B->fo, B->rows, B->fo, ptr); /* dy */
        P->lc = lt_layout(B, B->fi, B->rows, B->fi, ptr); /* dx */
    } else {
        P->la = lt_layout(B, B->fi, B->fo, B->fi, ptr);   /* W, transposed */
        P->lb = lt_layout(B, B->fi, B->rows, B->fi, ptr); /* x */
        P->lc = lt_layout(B, B->fo, B->rows, B->fo, ptr); /* y */
    }
}

/* ptr 0: strided (lt_make); 1: through pointer arrays (lt_run_ptr), with the kind's epilogue; 2: through pointer
 * arrays, the product alone. P.ok is 0 when the heuristic offers no algorithm. */
static lt_plan lt_make_as(bench *B, int kind, int ptr) {
    lt_plan P;
    memset(&P, 0, sizeof P);
    CK(cublasLtMatmulDescCreate(&P.d, B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = kind == LT_FWD ? CUBLAS_OP_T : CUBLAS_OP_N, tb = kind == LT_WGRAD ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (kind != LT_DGRAD && ptr != 2) {
        cublasLtEpilogue_t epi = kind == LT_WGRAD ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_RELU_BIAS;
        CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        const float *bias = B->base + (kind == LT_WGRAD ? B->odb : B->ob);
        CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        int64_t bst = B->stride;
        CK(cublasLtMatmulDescSetAttribute(P.d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bst, sizeof bst));
    }
    lt_layouts(B, &P, kind, ptr != 0);
    lt_pick(B, &P);
    return P;
}
static lt_plan lt_make(bench *B, int kind) { return lt_make_as(B, kind, 0); }


/* Where an lt_plan of `kind` writes agent 0's output (dW, dx or y). */
static float *lt_out(bench *B, int kind) {
    return B->base + (kind == LT_WGRAD ? B->odW : kind == LT_DGRAD ? B->odx : B->oy);
}

/* P's product of `kind` on B's stream; the library's status (bench_lt_space tries configurations that may fail). */
static cublasStatus_t lt_issue(bench *B, lt_plan *P, int kind) {
    const float one = 1.0f, zero = 0.0f;
    const float *A = B->base + (kind == LT_WGRAD ? B->ox : B->oW);
    const float *Bm = B->base + (kind == LT_FWD ? B->ox : B->ody);
    float *C = lt_out(B, kind);
    return cublasLtMatmul(B->lt, P->d, &one, A, P->la, Bm, P->lb, &zero, C, P->lc, C, P->lc, &P->algo, B->ws,
                          B->ws_bytes, B->s);
}

static void lt_run(bench *B, lt_plan *P, int kind) { CK(lt_issue(B, P, kind)); }

/* p[0 .. n) = hashed values in [-0.5, 0.5): inputs that make a wrong product show (zeros would not). */
__global__ void ceiling_fill(float *p, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t v = (uint32_t)i * 2654435761u;
        v ^= v >> 15, v *= 2246822519u, v ^= v >> 13;
        p[i] = (float)(v & 0xffff) / 65536.0f - 0.5f;
    }
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


/* B emptied and set to n agents' 256-row layer of fi inputs and 256 outputs (TD3 256-256/b256's hidden layer at fi
 * 256, its critic's first layer at 23), in TF32 or fp32. */
static void bench_shape(bench *B, int n, int fi, int tf32) {
    memset(B, 0, sizeof *B);
    B->n = n, B->rows = 256, B->fi = fi, B->fo = 256, B->tf32 = tf32;
}

/* The plain layer's regions (W, b, x, y, dy, dW, db, dx, each at a multiple of 64 floats) for B's shape: sets the
 * offsets and returns the floats one agent uses (the stride of agents back to back). */
static int64_t bench_plain_layout(bench *B) {
    int64_t o = 0;
    B->oW = o, o += align64((int64_t)B->fo * B->fi);
    B->ob = o, o += align64(B->fo);
    B->ox = o, o += align64((int64_t)B->rows * B->fi);
    B->oy = o, o += align64((int64_t)B->rows * B->fo);
    B->ody = o, o += align64((int64_t)B->rows * B->fo);
    B->odW = o, o += align64((int64_t)B->fo * B->fi);
    B->odb = o, o += align64(B->fo);
    B->odx = o, o += align64((int64_t)B->rows * B->fi);
    return o;
}

/* B's stream, a 32 MiB workspace and a cuBLASLt handle; with base NULL also B->n zeroed regions at B->stride in one
 * cudaMalloc (bench_close frees them), else the caller's regions at base. */
static void bench_open(bench *B, float *base) {
    CK(cudaStreamCreateWithFlags(&B->s, cudaStreamNonBlocking));
    if (base) {
        B->base = base;
    } else {
        CK(cudaMalloc((void **)&B->base, (size_t)B->stride * B->n * sizeof(float)));
        CK(cudaMemsetAsync(B->base, 0, (size_t)B->stride * B->n * sizeof(float), B->s));
    }
    B->ws_bytes = 32u << 20;
    CK(cudaMalloc(&B->ws, B->ws_bytes));
    CK(cublasLtCreate(&B->lt));
}

static void bench_close(bench *B, int owns_base) {
    cublasLtDestroy(B->lt);
    cudaFree(B->ws);
    if (owns_base) cudaFree(B->base);
    cudaStreamDestroy(B->s);
}

/* Microseconds per op: reps calls of op(B, ctx), each one op on B's stream, captured as a graph and replayed. */
static double chain_us(bench *B, void (*op)(bench *, const void *), const void *ctx, int reps, int replays) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(B->s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) op(B, ctx);
    CK(cudaStreamEndCapture(B->s, &g));
    return graph_us(B->s, g, reps, replays);
}

typedef struct lt_call {
    lt_plan *P;
    int kind;
} lt_call;

static void lt_call_op(bench *B, const void *ctx) {
    const lt_call *c = (const lt_call *)ctx;
    lt_run(B, c->P, c->kind);
}

/* Microseconds per product of plan P (kind) as a graph of reps dependent calls, replayed. */
static double lt_chain_us(bench *B, lt_plan *P, int kind, int reps, int replays) {
    const lt_call c = {P, kind};
    return chain_us(B, lt_call_op, &c, reps, replays);
}

/* The ceiling programs' options: [--reps N] [--replays N] [--agents 16,64] (at most 8 counts of 1 to 256 agents). */
typedef struct ceiling_opts {
    int reps, replays, agents[8], n_agents;
    cudaDeviceProp prop; /* device 0's */
} ceiling_opts;

/* Parses the command line into o, checks for a GPU of compute capability min_major or later, and prints the program's
 * first line, "WHAT, <device>, <reps> UNIT per graph x <replays> replays": 0, 2 on a bad argument, 77 without such a
 * GPU. */
static int ceiling_start(int argc, char **argv, const char *what, const char *unit, int min_major, ceiling_opts *o) {
    o->reps = 20, o->replays = 200, o->agents[0] = 16, o->agents[1] = 64, o->n_agents = 2;
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--reps")) o->reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--replays")) o->replays = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--agents")) {
            o->n_agents = 0;
            for (char *t = strtok(argv[++i], ","); t && o->n_agents < 8; t = strtok(NULL, ",")) {
                const int n = atoi(t);
                bad |= n < 1 || n > 256;
                o->agents[o->n_agents++] = n;
            }
        } else {
            bad = 1;
        }
    }
    if (bad) {
        fprintf(stderr, "usage: %s [--reps N] [--replays N] [--agents 16,64] (1 to 256 agents)\n", argv[0]);
        return 2;
    }
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count < 1) {
        fprintf(stderr, "no GPU\n");
        return 77;
    }
    CK(cudaGetDeviceProperties(&o->prop, 0));
    if (o->prop.major < min_major) {
        fprintf(stderr, "%s: compute capability %d.%d, this program needs %d.0\n", o->prop.name, o->prop.major,
                o->prop.minor, min_major);
        return 77;
    }
    printf("%s, %s, %d %s per graph x %d replays\n", what, o->prop.name, o->reps, unit, o->replays);
    return 0;
}

/* N agents' 256-row layer of fi inputs in TF32 at their plain layout, filled (ceiling_fill), with cuBLASLt's fused
 * forward planned in *P and timed as a graph of reps forwards: the reference the forward kernels of our own are
 * measured against. Returns its microseconds per forward (-1 when the library offers no algorithm). */
static double ceiling_fwd_reference(bench *B, int n, int fi, lt_plan *P, int reps, int replays) {
    bench_shape(B, n, fi, 1);
    B->stride = bench_plain_layout(B);
    bench_open(B, NULL);
    ceiling_fill<<<1024, 256, 0, B->s>>>(B->base, B->stride * n);
    CK(cudaStreamSynchronize(B->s));
    *P = lt_make(B, LT_FWD);
    return P->ok ? lt_chain_us(B, P, LT_FWD, reps, replays) : -1.0;
}

/* The largest |ours - cuBLASLt| over agent a's forward output, relative to cuBLASLt's largest entry there: op(B, ctx)
 * runs ours for every agent (the output cleared first, every copy after its stream's work). */
static double ceiling_fwd_diff(bench *B, lt_plan *P, void (*op)(bench *, const void *), const void *ctx, int a) {
    const int64_t cnt = (int64_t)B->rows * B->fo, off = B->oy + (int64_t)a * B->stride;
    float *ours = (float *)malloc(cnt * 4), *lib = (float *)malloc(cnt * 4);
    CK(cudaMemsetAsync(B->base + off, 0, cnt * 4, B->s));
    op(B, ctx);
    CK(cudaStreamSynchronize(B->s)); /* B->s does not wait for the legacy stream, nor it for B->s */
    CK(cudaMemcpy(ours, B->base + off, cnt * 4, cudaMemcpyDeviceToHost));
    lt_run(B, P, LT_FWD);
    CK(cudaStreamSynchronize(B->s));
    CK(cudaMemcpy(lib, B->base + off, cnt * 4, cudaMemcpyDeviceToHost));
    double d = 0, m = 0;
    for (int64_t i = 0; i < cnt; i++) d = fmax(d, fabs((double)ours[i] - lib[i])), m = fmax(m, fabs((double)lib[i]));
    free(ours), free(lib);
    return m > 0 ? d / m : d;
}
