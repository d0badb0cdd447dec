/* gemm_lt.c: the dense layers' library products on cuBLASLt, with the bias, the ReLU and the bias gradient
 * computed in the product's epilogue: the products linear.cu routes to the library (M N K >= 2^30, or K beyond
 * its kernels) and every product of a 16-bit layer (lowp.cu).
 *
 * Why: such a layer was a cuBLAS GEMM plus passes over its output, bias and activation after the forward and a
 * column sum for the bias gradient. cuBLASLt applies them in the GEMM's epilogue while the tile is in registers:
 *   forward   y = act(x W^T + b)       CUBLASLT_EPILOGUE_RELU_BIAS, BIAS, RELU or DEFAULT (tanh: a pass after it)
 *   weights   dW = beta dW + dy^T x    CUBLASLT_EPILOGUE_BGRADB: db, the column sums of dy, from the same call
 *   input     dx = dy W                DEFAULT, then act_x'(x) as a pass
 * The input gradient's ReLU derivative stays a pass: CUBLASLT_EPILOGUE_DRELU reads a bit mask that only a
 * RELU_AUX forward writes, while our backward reads the derivative from the layer's output x (x > 0, the same
 * mask), so fusing it would need a mask buffer per layer and activation set in the plan. BGRADB overwrites its
 * vector (it has no beta): with beta != 0 (the agents accumulate) the column sums go to scratch memory at the end
 * of the lane's workspace and one small kernel adds them (cuda_bias_grad_add).
 *
 * Row-major as gemm.c maps it: C[m, n] = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so cuBLASLt's A is
 * our B and its B is our A, each keeping its own transpose flag and leading dimension, and its D is [n x m] with
 * leading dimension ldc. The forward's bias runs along n, which is D's rows (cuBLASLt's bias vector has one entry
 * per row of D); the weight gradient's bias gradient runs along m, D's columns, summed over k of cuBLASLt's B (our
 * A, dy): that is BGRADB.
 *
 * Reproducibility: each distinct problem (shape, leading dimensions, types, compute type, epilogue and the
 * alignment of its pointers, which the heuristic takes into account) gets one entry the first time it runs, which
 * for an agent is the graph capture at init: descriptors initialised in place (no allocation) and the heuristic's
 * first algorithm for a workspace of CUDA_LT_WORKSPACE bytes, which every lane's slice holds. Later calls reuse the
 * entry, so a problem always runs one algorithm on any lane and a captured graph replays it: the same bits for a
 * given shape and GPU. When the heuristic offers nothing for a fused epilogue, the entry says so and the call runs
 * the plain product plus our elementwise kernels; when it offers nothing for the plain product either, the caller
 * runs its cuBLAS path (gemm.c).
 *
 * Precision: fp32 products sum in CUBLAS_COMPUTE_32F (fp32, no TF32) unless the plan asked for TF32 (precision:
 * tf32, plan_workspace's dense_tf32), which uses CUBLAS_COMPUTE_32F_FAST_TF32 on the tensor cores; 16-bit inputs
 * always sum in fp32 (CUBLAS_COMPUTE_32F) on the tensor cores. */
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "cuda_ops.h"

/* Distinct problems one backend keeps: a TD3 or DQN update has a few dozen dense products at most, and only the
 * routed ones (or the 16-bit ones) come here; batched seeds past 2^31 bytes of arenas make one per run of seeds. A
 * problem beyond a full table runs the caller's cuBLAS path (which batched seeds refuse). */
#define LT_ENTRIES 192

/* Everything the heuristic's choice depends on (all int32_t: compared with memcmp, no padding). */
typedef struct lt_key {
    int32_t ta, tb, m, n, k, lda, ldb, ldc;
    int32_t ab_dtype, c_dtype, tf32;
    int32_t epi;                                   /* a cublasLtEpilogue_t */
    int32_t align_a, align_b, align_c, align_bias; /* bytes: the largest power of two up to 256 (0: no vector) */
    int32_t batch;                                 /* 0: one product; n: n seeds' products at one stride */
    int32_t stride_lo, stride_hi;                  /* that stride in bytes (int64 in two halves) */
} lt_key;

typedef struct lt_entry {
    lt_key key;
    int32_t usable; /* 1: algo is the heuristic's choice; 0: it offered none (the caller falls back) */
    int32_t reserved_;
    cublasLtMatmulDescOpaque_t desc;
    cublasLtMatrixLayoutOpaque_t la, lb, lc; /* cuBLASLt's A (our B), its B (our A), C and D */
    cublasLtMatmulAlgo_t algo;
} lt_entry;

struct cuda_lt {
    cublasLtHandle_t handle;
    int32_t n;
    lt_entry e[LT_ENTRIES];
};

/* One product in row-major terms, as cuda_gemm takes it: C[m, n] = op(A) op(B) + beta C. */
typedef struct lt_op {
    int32_t ta, tb, m, n, k;
    const void *A;
    int32_t lda;
    const void *B;
    int32_t ldb;
    int32_t ab_dtype; /* RLT_LP_F32, RLT_LP_BF16 or RLT_LP_F16 */
    float beta;
    void *C;
    int32_t ldc;
    int32_t c_dtype; /* ab_dtype or RLT_LP_F32 */
    const void *bias; /* BIAS epilogues: the bias [n] (fp32); BGRADB: where the bias gradient [m] goes (fp32) */
    int32_t batch;    /* 0: one product; n > 1: n products, each operand and the bias `stride` bytes apart */
    int64_t stride;
} lt_op;

int cuda_lt_ensure(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    if (c->lt) return RLT_OK;
    if (c->capturing >= 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "an op needs cuBLASLt during the capture of graph slot %d, but the plan did not ask for it "
                           "(plan_workspace's rule missed this op's shape: a bug)",
                           (int)c->capturing);
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    struct cuda_lt *lt = calloc(1, sizeof *lt);
    if (!lt) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for cuBLASLt's table");
    uint64_t before = 0, after = 0;
    int rc = cuda_procmem_now(bk, &before);
    if (rc != RLT_OK) {
        free(lt);
        return rc;
    }
    cublasStatus_t st = cublasLtCreate(&lt->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(lt);
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "cublasLtCreate failed: %s (%s)",
                           cublasGetStatusName(st), cublasGetStatusString(st));
    }
    c->lt = lt;
    CUDA_CHECK(bk, cudaDeviceSynchronize());
    RLT_TRY(cuda_procmem_now(bk, &after));
    c->lt_bytes = after > before ? after - before : 0;
    c->handle_bytes += c->lt_bytes;
    return RLT_OK;
}

void cuda_lt_close(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    if (!c || !c->lt) return;
    cublasLtDestroy(c->lt->handle);
    free(c->lt);
    c->lt = NULL;
    c->handle_bytes -= c->lt_bytes < c->handle_bytes ? c->lt_bytes : c->handle_bytes;
    c->lt_bytes = 0;
}

static cudaDataType_t lt_type(int32_t dtype) {
    return dtype == RLT_LP_BF16 ? CUDA_R_16BF : dtype == RLT_LP_F16 ? CUDA_R_16F : CUDA_R_32F;
}
static int64_t lt_size(int32_t dtype) { return dtype == RLT_LP_F32 ? 4 : 2; }

static int32_t lt_has_vector(int32_t epi) {
    return epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_RELU_BIAS || epi == CUBLASLT_EPILOGUE_BGRADB;
}

/* The largest power of two (up to 256, cuBLASLt's default assumption) that divides the address. */
static int32_t lt_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int32_t al = 1;
    while (al < 256 && (a & (uintptr_t)al) == 0) al <<= 1;
    return al;
}

/* Whether a weight gradient dW[fo, fi] asks for its bias gradient in the epilogue (BGRADB) or runs the plain
 * product and our column sum. Skinny products went badly with BGRADB on an H100 at batch 4096 (bench/RESULTS.md):
 * a narrow input (a critic's 23 observation-and-action columns) got a 16-block kernel, 257 us against 15 us for the
 * plain product plus 10 for the column sum; a narrow output (an actor's 6 actions) got a 16-block
 * magma_sgemmEx_kernel, 293 us. One output (a critic's head) stays fused: its BGRADB kernels took 19 us. By shape
 * alone, so a shape keeps its bits. */
#define LT_BGRAD_MIN_WIDTH 64
static int lt_bgrad_fused(int32_t fi, int32_t fo) {
    return fi > LT_BGRAD_MIN_WIDTH && (fo == 1 || fo > LT_BGRAD_MIN_WIDTH);
}

/* Fills e's descriptors for its key and asks the heuristic. Returns the first failing status (and *what names
 * the call); CUBLAS_STATUS_SUCCESS with e->usable 0 when the heuristic offered no algorithm. */
static cublasStatus_t lt_entry_init(cublasLtHandle_t h, lt_entry *e, const void *vector, const char **what) {
    const lt_key *k = &e->key;
    cublasStatus_t st;
#define LT_STEP(call)               \
    do {                            \
        st = (call);                \
        if (st != CUBLAS_STATUS_SUCCESS) { \
            *what = #call;          \
            return st;              \
        }                           \
    } while (0)
    cublasComputeType_t compute = k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT_STEP(cublasLtMatmulDescInit(&e->desc, compute, CUDA_R_32F));
    /* cuBLASLt's A is our B, its B our A (see the file comment). */
    int32_t op_a = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_STEP(cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    LT_STEP(cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    uint32_t epi = (uint32_t)k->epi;
    LT_STEP(cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (lt_has_vector(k->epi)) {
        /* The bias is always fp32 (the masters); by default cuBLASLt takes it in D's type, which for a 16-bit
         * output is not ours. A bias gradient comes in C's type, fp32 for every weight gradient. */
        if (k->epi != CUBLASLT_EPILOGUE_BGRADB && k->c_dtype != RLT_LP_F32) {
            int32_t bias_type = CUDA_R_32F;
            LT_STEP(cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                   sizeof bias_type));
        }
        /* The heuristic reads the pointer's alignment from it. */
        LT_STEP(cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof vector));
    }
    cudaDataType_t ab = lt_type(k->ab_dtype), ct = lt_type(k->c_dtype);
    /* Column-major shapes as stored: our B is [k, n] row-major (tb 0), read as [n x k], or [n, k] (tb 1), read as
     * [k x n]; our A likewise with m; C is [m, n] row-major, read as [n x m]. */
    LT_STEP(cublasLtMatrixLayoutInit(&e->la, ab, (uint64_t)(k->tb ? k->k : k->n), (uint64_t)(k->tb ? k->n : k->k),
                                     k->ldb));
    LT_STEP(cublasLtMatrixLayoutInit(&e->lb, ab, (uint64_t)(k->ta ? k->m : k->k), (uint64_t)(k->ta ? k->k : k->m),
                                     k->lda));
    LT_STEP(cublasLtMatrixLayoutInit(&e->lc, ct, (uint64_t)k->n, (uint64_t)k->m, k->ldc));
    if (k->batch > 1) {
        /* The seeds' products: every operand, the output and the bias one stride further per seed, each layout's
         * stride in its own elements (a 16-bit product's fp32 output and bias move half as many). */
        int32_t count = k->batch;
        const int64_t bytes = (int64_t)(((uint64_t)(uint32_t)k->stride_hi << 32) | (uint32_t)k->stride_lo);
        cublasLtMatrixLayoutOpaque_t *ls[3] = {&e->la, &e->lb, &e->lc};
        const int64_t el[3] = {bytes / lt_size(k->ab_dtype), bytes / lt_size(k->ab_dtype), bytes / lt_size(k->c_dtype)};
        for (int i = 0; i < 3; i++) {
            LT_STEP(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
            LT_STEP(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &el[i],
                                                     sizeof el[i]));
        }
        const int64_t bias_el = bytes / (int64_t)sizeof(float); /* the bias and the bias gradient are fp32 */
        if (lt_has_vector(k->epi))
            LT_STEP(cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_el,
                                                   sizeof bias_el));
    }
    cublasLtMatmulPreferenceOpaque_t pref;
    LT_STEP(cublasLtMatmulPreferenceInit(&pref));
    uint64_t ws = CUDA_LT_WORKSPACE;
    LT_STEP(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    uint32_t al_a = (uint32_t)k->align_b, al_b = (uint32_t)k->align_a, al_c = (uint32_t)k->align_c;
    LT_STEP(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    LT_STEP(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    LT_STEP(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    LT_STEP(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(h, &e->desc, &e->la, &e->lb, &e->lc, &e->lc, &pref, 1, &res, &found);
    /* NOT_SUPPORTED is the heuristic's "nothing for this problem", like found == 0. */
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return CUBLAS_STATUS_SUCCESS;
    if (st != CUBLAS_STATUS_SUCCESS) {
        *what = "cublasLtMatmulAlgoGetHeuristic";
        return st;
    }
    if (found >= 1 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize <= CUDA_LT_WORKSPACE) {
        e->algo = res.algo;
        e->usable = 1;
    }
    return CUBLAS_STATUS_SUCCESS;
#undef LT_STEP
}

/* The entry for op with epilogue epi, made on first use; NULL when the table is full. strict: a failure to describe
 * the problem is an error (the plain product: our layouts and transposes must be right); otherwise (a fused
 * epilogue, whose support varies by type and version) it only makes the entry unusable. */
static int lt_entry_get(rlt_backend *bk, const lt_op *op, int32_t epi, int32_t strict, lt_entry **out) {
    cuda_impl *c = cuda_get(bk);
    struct cuda_lt *lt = c->lt;
    lt_key key;
    memset(&key, 0, sizeof key);
    key.ta = op->ta, key.tb = op->tb, key.m = op->m, key.n = op->n, key.k = op->k;
    key.lda = op->lda, key.ldb = op->ldb, key.ldc = op->ldc;
    key.ab_dtype = op->ab_dtype, key.c_dtype = op->c_dtype;
    key.tf32 = c->tf32 && op->ab_dtype == RLT_LP_F32;
    key.epi = epi;
    key.align_a = lt_align(op->A), key.align_b = lt_align(op->B), key.align_c = lt_align(op->C);
    key.align_bias = lt_has_vector(epi) ? lt_align(op->bias) : 0;
    if (op->batch > 1) {
        key.batch = op->batch;
        key.stride_lo = (int32_t)(uint32_t)((uint64_t)op->stride & 0xffffffffu);
        key.stride_hi = (int32_t)(uint32_t)((uint64_t)op->stride >> 32);
    }
    *out = NULL;
    for (int32_t i = 0; i < lt->n; i++)
        if (memcmp(&lt->e[i].key, &key, sizeof key) == 0) {
            *out = &lt->e[i];
            return RLT_OK;
        }
    if (lt->n >= LT_ENTRIES) return RLT_OK;
    lt_entry *e = &lt->e[lt->n];
    memset(e, 0, sizeof *e);
    e->key = key;
    const char *what = "";
    cublasStatus_t st = lt_entry_init(lt->handle, e, lt_has_vector(epi) ? op->bias : NULL, &what);
    if (st != CUBLAS_STATUS_SUCCESS) {
        if (strict)
            return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                               "%s failed: %s (%s), for the product [%d x %d] = op(A) op(B) with k %d (ta %d, tb %d, "
                               "lda %d, ldb %d, ldc %d, types %d/%d, epilogue %d)",
                               what, cublasGetStatusName(st), cublasGetStatusString(st), (int)op->m, (int)op->n,
                               (int)op->k, (int)op->ta, (int)op->tb, (int)op->lda, (int)op->ldb, (int)op->ldc,
                               (int)op->ab_dtype, (int)op->c_dtype, (int)epi);
        e->usable = 0;
    }
    lt->n++;
    *out = e;
    return RLT_OK;
}

/* 1 when op can run here at all: the table exists and the lane has a workspace slice of the side lanes' size (the
 * algorithm's CUDA_LT_WORKSPACE and the bias-gradient scratch after it). */
static int lt_ready(rlt_backend *bk, const lt_op *op) {
    cuda_impl *c = cuda_get(bk);
    return c->lt && !c->aside /* the aside stream has no workspace of its own */ &&
           c->lane_ws[c->lane] && c->lane_ws_bytes[c->lane] >= CUDA_SIDE_WORKSPACE && op->m >= 1 &&
           op->n >= 1 && op->k >= 1;
}

/* Runs op with epilogue epi when the heuristic offers an algorithm for it (*ran 1); otherwise *ran 0 and nothing
 * was issued. */
static int lt_try(rlt_backend *bk, const lt_op *op, int32_t epi, int32_t strict, int *ran) {
    cuda_impl *c = cuda_get(bk);
    lt_entry *e = NULL;
    *ran = 0;
    RLT_TRY(lt_entry_get(bk, op, epi, strict, &e));
    if (!e || !e->usable) return RLT_OK;
    /* The entry's vector pointer is this call's (same alignment, by the key); a graph keeps the value. */
    if (lt_has_vector(epi))
        CUBLAS_CHECK(bk, cublasLtMatmulDescSetAttribute(&e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &op->bias,
                                                        sizeof op->bias));
    const float alpha = 1.0f, beta = op->beta;
    CUBLAS_CHECK(bk, cublasLtMatmul(c->lt->handle, &e->desc, &alpha, op->B, &e->la, op->A, &e->lb, &beta, op->C, &e->lc,
                                    op->C, &e->lc, &e->algo, c->lane_ws[c->lane], (size_t)CUDA_LT_WORKSPACE,
                                    cuda_stream(bk)));
    *ran = 1;
    return RLT_OK;
}

/* The scratch vector after the algorithm's workspace in the current lane's slice, for n floats; NULL when they
 * do not fit. */
static float *lt_scratch(rlt_backend *bk, int32_t n) {
    cuda_impl *c = cuda_get(bk);
    if ((uint64_t)n * sizeof(float) > CUDA_LT_SCRATCH) return NULL;
    return (float *)(void *)((unsigned char *)c->lane_ws[c->lane] + CUDA_LT_WORKSPACE);
}

/* y = act(y + b) over [rows, cols] in y's type (b NULL: none). */
static int lt_bias_act(rlt_backend *bk, void *y, int32_t y_dtype, int32_t ldy, const float *b, int32_t rows,
                       int32_t cols, int32_t act) {
    if (!b && act == RLT_ACT_NONE) return RLT_OK;
    if (y_dtype == RLT_LP_F32) return cuda_bias_act(bk, (float *)y, ldy, b, rows, cols, act);
    return cuda_lp_bias_act(bk, y, y_dtype, ldy, b, rows, cols, act);
}

static int lt_seeds_allow(rlt_backend *bk, int32_t dtype, const char *what);
static int lt_go(rlt_backend *bk, const lt_op *op, int32_t epi, int32_t strict, int *ran);

int cuda_lt_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d, int *done) {
    *done = 0;
    /* Batched seeds: 16-bit layers only, as strided calls over the seeds' arenas (lt_go); an fp32 layer's batched
     * forward is cuda_lt_linear_forward_seeds. */
    RLT_TRY(lt_seeds_allow(bk, d->dtype, "linear_forward (cuBLASLt)"));
    RLT_TRY(cuda_seeds_check(bk, "linear_forward (cuBLASLt)", 4, d->x, d->W, d->b, d->y));
    /* y[rows, fo] = x[rows, fi] W^T: A = x (ta 0), B = W stored [fo, fi] (tb 1). */
    lt_op op = {.ta = 0, .tb = 1, .m = d->rows, .n = d->fo, .k = d->fi, .A = d->x, .lda = d->ldx, .B = d->W,
                .ldb = d->fi, .ab_dtype = d->dtype, .beta = 0.0f, .C = d->y, .ldc = d->ldy, .c_dtype = d->y_dtype,
                .bias = d->b};
    if (!lt_ready(bk, &op)) return RLT_OK;
    int32_t epi = d->act == RLT_ACT_RELU ? (d->b ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                         : (d->b ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    int ran = 0;
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) RLT_TRY(lt_go(bk, &op, epi, 0, &ran));
    if (ran) {
        /* tanh is no cuBLASLt epilogue: the bias went in above, the activation is a pass. */
        if (d->act == RLT_ACT_TANH) RLT_TRY(lt_bias_act(bk, d->y, d->y_dtype, d->ldy, NULL, d->rows, d->fo, d->act));
        *done = 1;
        return RLT_OK;
    }
    op.bias = NULL;
    RLT_TRY(lt_go(bk, &op, CUBLASLT_EPILOGUE_DEFAULT, 1, &ran));
    if (!ran) return RLT_OK;
    RLT_TRY(lt_bias_act(bk, d->y, d->y_dtype, d->ldy, d->b, d->rows, d->fo, d->act));
    *done = 1;
    return RLT_OK;
}

/* The run of agents z0.. (at most run of the n): op's batch cut to it and its pointers moved by agent z0's offset
 * (z0 times the seeds' stride in bytes). */
static lt_op lt_seeds_run(const lt_op *op, int32_t z0, int32_t run, int32_t n, int64_t stride_bytes) {
    const int64_t dz = (int64_t)z0 * stride_bytes;
    lt_op part = *op;
    part.batch = n - z0 < run ? n - z0 : run;
    part.A = (const char *)op->A + dz, part.B = (const char *)op->B + dz, part.C = (char *)op->C + dz;
    part.bias = (const char *)op->bias + dz;
    return part;
}

/* Batched seeds whose arenas lie at one stride (cuda_seed_batch's seeds_stride: a seed group's span): the seeds'
 * forward products as one strided cuBLASLt call with the bias and ReLU in its epilogue, instead of a pointer-array
 * product and a pass over its output. On an H200 the pass was a third of such a layer (bench_seed_layer_ceiling: 16
 * seeds of a 256 x 256 layer at batch 256, TF32, 11.2 us as product and pass, 7.5 us fused). A layer without a bias
 * or with another activation than ReLU (tanh) keeps the caller's route. Only fp32 layers batch.
 * The library forms agent z's offset, z times the stride in elements, in 32 bits: past 2^31 elements it faulted (an
 * H200, CUDA 13: 128 agents of bench_td3_update's 256-256 critic, whose arenas lie about 70 MiB apart; a 128-seed
 * td3_pendulum group at 58 MiB, 1.95e9 elements, did not). Under TF32 (other algorithms) 96 of those agents faulted
 * and 64 did not, short of 2^31 elements, so there a run spans at most 2^31 bytes (under 64 agents there). So the
 * seeds go in runs of at most that span / stride agents, a strided call each, every run's pointers the lead's moved
 * by its first agent's offset. */
#define LT_SEEDS_SPAN(tf32) ((tf32) ? (int64_t)INT32_MAX / (int64_t)sizeof(float) : (int64_t)INT32_MAX)

/* 1 when every operand lies in the lead's hot part (cuda_impl.seeds_hot_hi: mapped a second time at a shorter
 * stride, cuda_backend.c's span_alias), so the product may read all agents there. */
static int lt_seeds_hot(const cuda_impl *c, const void *x, const void *W, const void *b, const void *y) {
    const void *p[4] = {x, W, b, y};
    if (!c->seeds_hot_stride) return 0;
    for (int i = 0; i < 4; i++)
        if (p[i] && ((uint64_t)(uintptr_t)p[i] < c->seeds_lo || (uint64_t)(uintptr_t)p[i] >= c->seeds_hot_hi)) return 0;
    return 1;
}

/* Batched seeds (cuda_seeds) reach the three functions around here for 16-bit layers only: each product runs for all
 * seeds as strided calls over their arenas, when those lie at one stride (cuda_seed_batch's seeds_stride) and the
 * batch need not give single-run bits (batched acting's exact mode turns seeds_blas off: a strided call may take
 * another algorithm than the single product). Anything else while batching is refused, naming `what`. */
static int lt_seeds_allow(rlt_backend *bk, int32_t dtype, const char *what) {
    const cuda_impl *c = cuda_get(bk);
    if (c->seeds.n <= 1) return RLT_OK;
    if (dtype != RLT_LP_F32 && c->seeds_stride > 0 && c->seeds_stride % (int64_t)sizeof(float) == 0 &&
        c->seeds_blas && !c->seeds_exact)
        return RLT_OK;
    return cuda_seeds_refuse(bk, what);
}

/* op on the current lane, with epilogue epi: one product, or with batched seeds (lt_seeds_allow said yes) every
 * seed's, in strided calls of at most 2^31 bytes of arenas each (LT_SEEDS_SPAN's tighter bound: the library forms
 * the offsets in 32 bits). *ran 0 when the heuristic offers no algorithm for a call; nothing was issued then. */
static int lt_go(rlt_backend *bk, const lt_op *op, int32_t epi, int32_t strict, int *ran) {
    const cuda_impl *c = cuda_get(bk);
    *ran = 0;
    if (c->seeds.n <= 1) return lt_try(bk, op, epi, strict, ran);
    /* At the hot slots when every operand lies in the hot part (as cuda_lt_linear_forward_seeds reads them). */
    const int hot = lt_seeds_hot(c, op->A, op->B, lt_has_vector(epi) ? op->bias : NULL, op->C);
    const int64_t stride = hot ? c->seeds_hot_stride : c->seeds_stride, moved = hot ? c->seeds_hot_delta : 0;
    const int32_t n = c->seeds.n;
    const int32_t run = stride >= (int64_t)INT32_MAX ? 1 : (int32_t)((int64_t)INT32_MAX / stride);
    lt_op all = *op;
    all.A = (const char *)op->A + moved, all.B = (const char *)op->B + moved, all.C = (char *)op->C + moved;
    if (all.bias) all.bias = (const char *)op->bias + moved;
    all.batch = n < run ? n : run;
    all.stride = stride;
    /* Every run's algorithm first, so that nothing is issued unless all run. */
    for (int32_t z0 = 0; z0 < n; z0 += run) {
        lt_op part = lt_seeds_run(&all, z0, run, n, stride);
        lt_entry *e = NULL;
        RLT_TRY(lt_entry_get(bk, &part, epi, strict, &e));
        if (!e || !e->usable) return RLT_OK;
    }
    for (int32_t z0 = 0; z0 < n; z0 += run) {
        lt_op part = lt_seeds_run(&all, z0, run, n, stride);
        RLT_TRY(lt_try(bk, &part, epi, strict, ran));
        if (!*ran)
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                               "a 16-bit product for batched seeds: agents %d.. lost their algorithm", (int)z0);
    }
    return RLT_OK;
}

int cuda_lt_linear_forward_seeds(rlt_backend *bk, const rlt_linear_fwd *d, int *done) {
    cuda_impl *c = cuda_get(bk);
    *done = 0;
    if (c->seeds.n <= 1 || !c->seeds_stride || !c->seeds_lt || !c->seeds_blas || !d->b || d->dtype != RLT_LP_F32 ||
        d->y_dtype != RLT_LP_F32 || (d->act != RLT_ACT_RELU && d->act != RLT_ACT_NONE) ||
        c->seeds_stride % (int64_t)sizeof(float) != 0)
        return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "linear_forward (cuBLASLt, seeds)", 4, d->x, d->W, d->b, d->y));
    /* Read at the hot slots when all four operands are there: the same memory at a stride of the hot part only. */
    const int hot = lt_seeds_hot(c, d->x, d->W, d->b, d->y);
    const int64_t stride_bytes = hot ? c->seeds_hot_stride : c->seeds_stride, moved = hot ? c->seeds_hot_delta : 0;
    const int64_t stride = stride_bytes / (int64_t)sizeof(float);
    const int32_t n = c->seeds.n;
    const int64_t span = LT_SEEDS_SPAN(c->tf32);
    const int32_t run = stride >= span ? 1 : (int32_t)(span / stride);
    if (run < 2) return RLT_OK; /* a call per agent: the pointer arrays do better */
    lt_op op = {.ta = 0, .tb = 1, .m = d->rows, .n = d->fo, .k = d->fi, .A = (const char *)d->x + moved,
                .lda = d->ldx, .B = (const char *)d->W + moved, .ldb = d->fi, .ab_dtype = RLT_LP_F32, .beta = 0.0f,
                .C = (char *)d->y + moved, .ldc = d->ldy, .c_dtype = RLT_LP_F32, .bias = (const char *)d->b + moved,
                .batch = n < run ? n : run, .stride = stride_bytes};
    if (!lt_ready(bk, &op)) return RLT_OK;
    int32_t epi = d->act == RLT_ACT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    /* Every run's algorithm first (the full runs' and the last one's), so that nothing is issued unless all run. */
    for (int32_t z0 = 0; z0 < n; z0 += run) {
        lt_op part = lt_seeds_run(&op, z0, run, n, stride_bytes);
        lt_entry *e = NULL;
        RLT_TRY(lt_entry_get(bk, &part, epi, 0, &e));
        if (!e || !e->usable) return RLT_OK;
    }
    for (int32_t z0 = 0; z0 < n; z0 += run) {
        lt_op part = lt_seeds_run(&op, z0, run, n, stride_bytes);
        int ran = 0;
        RLT_TRY(lt_try(bk, &part, epi, 0, &ran));
        if (!ran)
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                               "linear_forward (cuBLASLt, seeds): agents %d.. lost their algorithm", (int)z0);
    }
    *done = 1;
    return RLT_OK;
}

int cuda_lt_linear_wgrad(rlt_backend *bk, const rlt_linear_bwd *d, int32_t db_lane, int *done) {
    cuda_impl *c = cuda_get(bk);
    *done = 0;
    RLT_TRY(lt_seeds_allow(bk, d->dtype, "linear_backward (cuBLASLt)"));
    RLT_TRY(cuda_seeds_check(bk, "linear_backward (cuBLASLt)", 4, d->dy, d->x, d->dW, d->db));
    if (!d->dW) return RLT_OK; /* a bias gradient alone is no product: the caller's kernel */
    /* dW[fo, fi] = beta dW + dy^T x: A = dy stored [rows, fo] (ta 1), B = x [rows, fi] (tb 0), k = rows. */
    lt_op op = {.ta = 1, .tb = 0, .m = d->fo, .n = d->fi, .k = d->rows, .A = d->dy, .lda = d->lddy, .B = d->x,
                .ldb = d->ldx, .ab_dtype = d->dtype, .beta = d->beta, .C = d->dW, .ldc = d->fi,
                .c_dtype = RLT_LP_F32};
    if (!lt_ready(bk, &op)) return RLT_OK;
    int ran = 0;
    /* With beta != 0 the fused bias gradient goes to the lane's scratch, one vector: not for batched seeds. */
    if (d->db && lt_bgrad_fused(d->fi, d->fo) && (d->beta == 0.0f || c->seeds.n <= 1)) {
        float *dst = d->beta == 0.0f ? d->db : lt_scratch(bk, d->fo);
        if (dst) {
            op.bias = dst;
            RLT_TRY(lt_go(bk, &op, CUBLASLT_EPILOGUE_BGRADB, 0, &ran));
            if (ran && dst != d->db) RLT_TRY(cuda_bias_grad_add(bk, d->db, dst, d->fo, d->beta));
        }
    }
    if (!ran) {
        op.bias = NULL;
        RLT_TRY(lt_go(bk, &op, CUBLASLT_EPILOGUE_DEFAULT, 1, &ran));
        if (!ran) return RLT_OK;
        if (d->db) {
            /* No fused bias gradient: our column sum, on its own lane when the caller forked one. */
            const int32_t lane = c->lane;
            c->lane = db_lane;
            int rc = cuda_lp_bias_grad(bk, d->db, d->dy, d->dtype, d->lddy, d->rows, d->fo, d->beta);
            c->lane = lane;
            RLT_TRY(rc);
        }
    }
    *done = 1;
    return RLT_OK;
}

int cuda_lt_linear_dgrad(rlt_backend *bk, const rlt_linear_bwd *d, int *done) {
    *done = 0;
    RLT_TRY(lt_seeds_allow(bk, d->dtype, "linear_backward (cuBLASLt)"));
    if (!d->dx) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "linear_backward (cuBLASLt)", 4, d->dy, d->W, d->dx, d->x));
    int32_t dx_dtype = d->dtype == RLT_LP_F32 ? RLT_LP_F32 : d->dx_dtype;
    /* dx[rows, fi] = dy W: A = dy [rows, fo] (ta 0), B = W [fo, fi] (tb 0), k = fo. */
    lt_op op = {.ta = 0, .tb = 0, .m = d->rows, .n = d->fi, .k = d->fo, .A = d->dy, .lda = d->lddy, .B = d->W,
                .ldb = d->fi, .ab_dtype = d->dtype, .beta = 0.0f, .C = d->dx, .ldc = d->lddx, .c_dtype = dx_dtype};
    if (!lt_ready(bk, &op)) return RLT_OK;
    int ran = 0;
    RLT_TRY(lt_go(bk, &op, CUBLASLT_EPILOGUE_DEFAULT, 1, &ran));
    if (!ran) return RLT_OK;
    if (d->dtype == RLT_LP_F32)
        RLT_TRY(cuda_act_grad(bk, (float *)d->dx, d->lddx, (const float *)d->x, d->ldx, d->rows, d->fi, d->act_x));
    else
        RLT_TRY(cuda_lp_act_grad(bk, d->dx, dx_dtype, d->lddx, d->x, d->dtype, d->ldx, d->rows, d->fi, d->act_x));
    *done = 1;
    return RLT_OK;
}
