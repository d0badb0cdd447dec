/* dense.c: the backend's dense-layer ops (linear_forward, linear_backward) on the fast kernels of
 * dense_kernel.h, and the choice of kernels for this CPU. The reference twins in fused.c (GEMM through
 * CBLAS, then bias_act; act_grad) stay the readable oracle: tests/test_dense.c checks these against them. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

const cpu_dense_kernels *cpu_dense_select(const char *want) {
    int any = !want || !*want;
    if (want && !strcmp(want, "reference")) return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512dq");
    int has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if ((any || !strcmp(want, "avx512")) && has512) return &cpu_dense512_kernels;
    if ((any || !strcmp(want, "avx2")) && has256) return &cpu_dense256_kernels;
#endif
    return NULL;
}

int cpu_linear_forward_fast(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx,
                            const float *W, const float *b, float *y, int32_t ldy, int32_t act) {
    cpu_impl *im = bk->impl;
    /* A few rows (acting on one observation) are faster through CBLAS than through packing a panel. */
    if (!im || !im->dense || rows < CPU_DENSE_MIN_ROWS)
        return cpu_linear_forward(bk, rows, fi, fo, x, ldx, W, b, y, ldy, act);
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CPU_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "linear_forward");
    im->dense->linear_forward(rows, fi, fo, x, ldx, W, b, y, ldy, act == RLT_ACT_RELU, im->pack);
    if (act == RLT_ACT_TANH)
        for (int32_t r = 0; r < rows; r++)
            for (int32_t c = 0; c < fo; c++) y[(int64_t)r * ldy + c] = tanhf(y[(int64_t)r * ldy + c]);
    return RLT_OK;
}

int cpu_linear_backward_fast(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy,
                             const float *x, int32_t ldx, int32_t act_x, const float *W, float *dW, float *db,
                             float beta, float *dx, int32_t lddx) {
    cpu_impl *im = bk->impl;
    if (!im || !im->dense)
        return cpu_linear_backward(bk, rows, fi, fo, dy, lddy, x, ldx, act_x, W, dW, db, beta, dx, lddx);
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi, "linear_backward");
    CPU_REQUIRE(bk, !dx || lddx >= fi, "linear_backward");
    CPU_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    im->dense->linear_backward(rows, fi, fo, dy, lddy, x, ldx, act_x, W, dW, beta, dx, lddx);
    /* Column sums in row order: the reference op's own loop, so db is bit for bit the reference's. */
    if (db) RLT_TRY(cpu_bias_grad(bk, db, dy, lddy, rows, fo, beta));
    return RLT_OK;
}
