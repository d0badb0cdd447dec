/* gemm.c: row-major single-precision GEMM through cuBLAS; the CUDA twin of kernels/cpu/gemm.c.
 *
 * cuBLAS is column-major. A row-major matrix read as column-major is its transpose, so the row-major
 * product C = op(A) op(B) is computed as the column-major product C^T = op(B)^T op(A)^T: swap the operands
 * (B first), swap m and n, keep each operand's own transpose flag and leading dimension. No data moves.
 * The handle runs in CUBLAS_DEFAULT_MATH (plain fp32, no TF32; set at open) so results agree with the CPU
 * to fp32 rounding. */
#include "cuda_ops.h"

int cuda_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
              int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    CUDA_REQUIRE(bk, m >= 0 && n >= 0 && k >= 0, "gemm");
    CUDA_REQUIRE(bk, lda >= (ta ? m : k) && lda >= 1, "gemm");
    CUDA_REQUIRE(bk, ldb >= (tb ? k : n) && ldb >= 1, "gemm");
    CUDA_REQUIRE(bk, ldc >= n && ldc >= 1, "gemm");
    if (m == 0 || n == 0) return RLT_OK;
    cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* The one handle follows the lane: its stream, then (cublasSetStream resets it) that lane's workspace. */
    cuda_impl *c = cuda_get(bk);
    if (c->blas_lane != c->lane) {
        CUBLAS_CHECK(bk, cublasSetStream(c->blas, c->streams[c->lane]));
        CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->lane], (size_t)c->lane_ws_bytes[c->lane]));
        c->blas_lane = c->lane;
    }
    CUBLAS_CHECK(bk, cublasSgemm(c->blas, op_b, op_a, n, m, k, &alpha, B, ldb, A, lda, &beta, C, ldc));
    return RLT_OK;
}
