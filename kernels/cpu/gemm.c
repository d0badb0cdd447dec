/* gemm.c: row-major single-precision GEMM through CBLAS (OpenBLAS). */
#include <cblas.h>

#include "cpu_ops.h"

int cpu_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
             int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    CPU_REQUIRE(bk, m >= 0 && n >= 0 && k >= 0, "gemm");
    CPU_REQUIRE(bk, lda >= (ta ? m : k) && lda >= 1, "gemm");
    CPU_REQUIRE(bk, ldb >= (tb ? k : n) && ldb >= 1, "gemm");
    CPU_REQUIRE(bk, ldc >= n && ldc >= 1, "gemm");
    if (m == 0 || n == 0) return RLT_OK;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                B, ldb, beta, C, ldc);
    return RLT_OK;
}
