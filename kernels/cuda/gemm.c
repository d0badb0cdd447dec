/* gemm.c: row-major GEMM through cuBLAS: fp32 (the CUDA twin of kernels/cpu/gemm.c; TF32 only where
 * precision: tf32 asked for it) and bf16/fp16 inputs summed in fp32. The convolutions' GEMMs come here; the dense
 * layers' library products go to cuBLASLt (gemm_lt.c) and come here only when it offers no algorithm.
 *
 * cuBLAS is column-major. A row-major matrix read as column-major is its transpose, so the row-major
 * product C = op(A) op(B) is computed as the column-major product C^T = op(B)^T op(A)^T: swap the operands
 * (B first), swap m and n, keep each operand's own transpose flag and leading dimension. No data moves.
 * The handle runs in CUBLAS_DEFAULT_MATH (plain fp32, no TF32; set at open) so results agree with the CPU
 * to fp32 rounding. */
#include "cuda_ops.h"

/* The one handle follows the lane: its stream, then (cublasSetStream resets it) that lane's workspace. */
static int cuda_blas_bind(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    RLT_TRY(cuda_aside_refuse(bk, "a cuBLAS product"));
    /* The handle exists when the plan said some op calls cuBLAS (cuda_blas_ensure); creating it here, inside
     * the sealed arena's lifetime or a capture, would allocate behind the plan's back. */
    if (!c->blas)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "a GEMM needs cuBLAS, but the plan created no cuBLAS handle: plan_workspace's rule of which "
                           "shapes call cuBLAS missed this op (a bug), or the backend runs ops without a workspace handed over");
    if (c->blas_lane != c->lane) {
        CUBLAS_CHECK(bk, cublasSetStream(c->blas, c->streams[c->lane]));
        CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->lane], (size_t)c->lane_ws_bytes[c->lane]));
        c->blas_lane = c->lane;
    }
    return RLT_OK;
}

/* The fp32 product, summed in fp32 (cublasSgemm in the handle's CUBLAS_DEFAULT_MATH) or, with tf32, on the TF32
 * tensor cores (cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32: precision: tf32 asked for it). */
static int gemm_f32(rlt_backend *bk, int32_t tf32, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                    const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    /* A library product cannot move its pointers per agent: never batched over seeds (cuda_seeds). */
    RLT_TRY(cuda_seeds_refuse(bk, "gemm"));
    CUDA_REQUIRE(bk, m >= 0 && n >= 0 && k >= 0, "gemm");
    CUDA_REQUIRE(bk, lda >= (ta ? m : k) && lda >= 1, "gemm");
    CUDA_REQUIRE(bk, ldb >= (tb ? k : n) && ldb >= 1, "gemm");
    CUDA_REQUIRE(bk, ldc >= n && ldc >= 1, "gemm");
    if (m == 0 || n == 0) return RLT_OK;
    cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    RLT_TRY(cuda_blas_bind(bk));
    if (tf32)
        CUBLAS_CHECK(bk, cublasGemmEx(cuda_get(bk)->blas, op_b, op_a, n, m, k, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F,
                                      lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(bk, cublasSgemm(cuda_get(bk)->blas, op_b, op_a, n, m, k, &alpha, B, ldb, A, lda, &beta, C, ldc));
    return RLT_OK;
}

int cuda_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
              int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    return gemm_f32(bk, 0, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* gemm_f32 with the same workspace size on every lane and with any number of lanes: the side lanes' size.
 * cuBLAS picks its algorithm (and so its summation order) by shape and workspace, and lane 0's workspace is
 * larger than the side lanes', so a product that may run on any lane (a forward over one of several
 * activation sets) would otherwise give other bits on a side lane than on lane 0. */
static int gemm_f32_uniform(rlt_backend *bk, int32_t tf32, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k,
                            float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C,
                            int32_t ldc) {
    RLT_TRY(cuda_seeds_refuse(bk, "gemm"));
    cuda_impl *c = cuda_get(bk);
    uint64_t ws = c->lane_ws_bytes[c->lane] < CUDA_SIDE_WORKSPACE ? c->lane_ws_bytes[c->lane] : CUDA_SIDE_WORKSPACE;
    RLT_TRY(cuda_blas_bind(bk));
    CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->lane], (size_t)ws));
    int rc = gemm_f32(bk, tf32, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->lane], (size_t)c->lane_ws_bytes[c->lane]));
    return rc;
}

int cuda_gemm_uniform(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                      const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    return gemm_f32_uniform(bk, 0, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

int cuda_gemm_tf32(rlt_backend *bk, int32_t uniform, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                   const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    if (uniform) return gemm_f32_uniform(bk, 1, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return gemm_f32(bk, 1, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- one product for every agent of a seed batch ----
 * cuBLAS's batched GEMM takes an array of pointers per operand, in device memory. Arenas never move, so agent z's
 * pointers are fixed at capture: the lead's plus the agent's delta. Each distinct product gets a slot of arrays the
 * first time it is issued (written to the host mirror now, uploaded at graph END before any launch) and keeps it:
 * the other update variant's capture finds it by its lead pointers and reuses it. */
static int32_t gemm_seeds_slot(rlt_backend *bk, const float *A, const float *B, const float *C) {
    cuda_impl *c = cuda_get(bk);
    for (int32_t s = 0; s < c->seed_slots; s++)
        if (c->seed_keys[s][0] == B && c->seed_keys[s][1] == A && c->seed_keys[s][2] == C) return s;
    if (c->seed_slots == CUDA_SEED_GEMMS) return -1;
    int32_t s = c->seed_slots++;
    c->seed_keys[s][0] = B, c->seed_keys[s][1] = A, c->seed_keys[s][2] = C;
    const void *lead[3] = {B, A, C};
    for (int32_t j = 0; j < 3; j++)
        for (int32_t z = 0; z < c->max_seeds; z++)
            c->seed_ptrs_host[((size_t)3 * s + j) * c->max_seeds + z] =
                z < c->seeds.n ? (void *)((char *)(uintptr_t)lead[j] + c->seeds_delta_host[z]) : NULL;
    c->seed_ptrs_dirty = 1;
    return s;
}

int cuda_seed_ptrs_upload(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    if (!c->seed_ptrs_dirty) return RLT_OK;
    CUDA_CHECK(bk, cudaMemcpy(c->seed_ptrs, c->seed_ptrs_host, (size_t)3 * c->seed_slots * c->max_seeds * sizeof(void *),
                              cudaMemcpyHostToDevice));
    c->seed_ptrs_dirty = 0;
    return RLT_OK;
}

int cuda_gemm_seeds(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha,
                    const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    return cuda_gemm_seeds_as(bk, cuda_get(bk)->tf32, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

int cuda_gemm_seeds_as(rlt_backend *bk, int32_t tf32, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k,
                       float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C,
                       int32_t ldc) {
    cuda_impl *c = cuda_get(bk);
    CUDA_REQUIRE(bk, c->seeds.n > 1 && c->seed_ptrs && m >= 0 && n >= 0 && k >= 0, "gemm_seeds");
    CUDA_REQUIRE(bk, lda >= (ta ? m : k) && lda >= 1 && ldb >= (tb ? k : n) && ldb >= 1 && ldc >= n, "gemm_seeds");
    RLT_TRY(cuda_seeds_check(bk, "gemm_seeds", 3, A, B, C));
    if (m == 0 || n == 0) return RLT_OK;
    int32_t s = gemm_seeds_slot(bk, A, B, C);
    if (s < 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "gemm_seeds: more than %d distinct batched library products", CUDA_SEED_GEMMS);
    if (c->capturing < 0) RLT_TRY(cuda_seed_ptrs_upload(bk));
    void **arr = c->seed_ptrs + (size_t)3 * s * c->max_seeds;
    cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* The side lanes' workspace size on any lane, as cuda_gemm_uniform: the same algorithm, so the same bits, on
     * whichever lane the product runs. */
    uint64_t ws = c->lane_ws_bytes[c->lane] < CUDA_SIDE_WORKSPACE ? c->lane_ws_bytes[c->lane] : CUDA_SIDE_WORKSPACE;
    RLT_TRY(cuda_blas_bind(bk));
    CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->lane], (size_t)ws));
    cublasStatus_t st = cublasGemmBatchedEx(
        c->blas, op_b, op_a, n, m, k, &alpha, (const void *const *)arr, CUDA_R_32F, ldb,
        (const void *const *)(arr + c->max_seeds), CUDA_R_32F, lda, &beta, arr + 2 * c->max_seeds, CUDA_R_32F, ldc,
        c->seeds.n, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->lane], (size_t)c->lane_ws_bytes[c->lane]));
    CUBLAS_CHECK(bk, st);
    return RLT_OK;
}

static cudaDataType_t cuda_lp_type(int32_t dtype) {
    return dtype == RLT_LP_BF16 ? CUDA_R_16BF : dtype == RLT_LP_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The same product with A and B in a 16-bit type (ab_dtype) and C in c_dtype (the same type or fp32), summed
 * in fp32 (CUBLAS_COMPUTE_32F): cuBLAS runs it on the tensor cores. */
int cuda_gemm_lp(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const void *A,
                 int32_t lda, const void *B, int32_t ldb, int32_t ab_dtype, float beta, void *C, int32_t c_dtype,
                 int32_t ldc) {
    RLT_TRY(cuda_seeds_refuse(bk, "gemm_lp"));
    CUDA_REQUIRE(bk, m >= 0 && n >= 0 && k >= 0, "gemm_lp");
    CUDA_REQUIRE(bk, lda >= (ta ? m : k) && lda >= 1 && ldb >= (tb ? k : n) && ldb >= 1 && ldc >= n, "gemm_lp");
    CUDA_REQUIRE(bk, ab_dtype == RLT_LP_BF16 || ab_dtype == RLT_LP_F16, "gemm_lp");
    CUDA_REQUIRE(bk, c_dtype == ab_dtype || c_dtype == RLT_LP_F32, "gemm_lp");
    if (m == 0 || n == 0) return RLT_OK;
    cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    RLT_TRY(cuda_blas_bind(bk));
    cudaDataType_t ab = cuda_lp_type(ab_dtype), ct = cuda_lp_type(c_dtype);
    CUBLAS_CHECK(bk, cublasGemmEx(cuda_get(bk)->blas, op_b, op_a, n, m, k, &alpha, B, ab, ldb, A, ab, lda, &beta, C, ct,
                                  ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return RLT_OK;
}
