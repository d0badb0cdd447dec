/* gemm.c: row-major single-precision GEMM through CBLAS (OpenBLAS), with one exception below. */
#include <cblas.h>

#include "cpu_ops.h"

/* OpenBLAS 0.3.21 (Debian 12) sends small products (m*n*k <= 100^3) to "small matrix" kernels, and its
 * SkylakeX kernel for the non-transposed case calls malloc on every call for many output widths (seen
 * with n = 1..8, 17..24, 33..40: tests/test_noalloc.c counts them). The engine promises no allocation
 * after init, so exactly those products run in this loop instead. They are at most 10^6 multiply-adds;
 * the i-k-j order streams rows of B and C so the compiler vectorises the inner loop. */
CPU_HOT static void gemm_nn_small(int32_t m, int32_t n, int32_t k, float alpha, const float *restrict A, int32_t lda,
                          const float *restrict B, int32_t ldb, float beta, float *restrict C, int32_t ldc) {
    for (int32_t i = 0; i < m; i++) {
        float *c = C + (int64_t)i * ldc;
        if (beta == 0.0f)
            for (int32_t j = 0; j < n; j++) c[j] = 0.0f;
        else if (beta != 1.0f)
            for (int32_t j = 0; j < n; j++) c[j] *= beta;
        const float *a = A + (int64_t)i * lda;
        for (int32_t p = 0; p < k; p++) {
            float s = alpha * a[p];
            const float *b = B + (int64_t)p * ldb;
            for (int32_t j = 0; j < n; j++) c[j] += s * b[j];
        }
    }
}

int cpu_gemm(rlt_backend *bk, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k, float alpha, const float *A,
             int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    CPU_REQUIRE(bk, m >= 0 && n >= 0 && k >= 0, "gemm");
    CPU_REQUIRE(bk, lda >= (ta ? m : k) && lda >= 1, "gemm");
    CPU_REQUIRE(bk, ldb >= (tb ? k : n) && ldb >= 1, "gemm");
    CPU_REQUIRE(bk, ldc >= n && ldc >= 1, "gemm");
    if (m == 0 || n == 0) return RLT_OK;
    if (!ta && !tb && (double)m * n * k <= 1e6) {
        gemm_nn_small(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return RLT_OK;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                B, ldb, beta, C, ldc);
    return RLT_OK;
}
