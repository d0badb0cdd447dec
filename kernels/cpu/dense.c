/* dense.c: the backend's dense-layer ops (linear_forward, linear_backward) on the fast kernels of
 * dense_kernel.h, and the choice of kernels for this CPU. The references in fused.c (GEMM through CBLAS,
 * then bias_act; act_grad) stay the readable oracle: tests/test_dense.c checks these against them. */
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

/* One half of a split dense op, as the worker runs it: a forward over a range of rows, or a backward's dW
 * over a range of outputs plus its dx over a range of rows. */
typedef struct dense_job {
    const cpu_dense_kernels *k;
    int32_t rows, fi, fo;
    const float *x, *W, *b, *dy;
    int32_t ldx, ldy, lddy, lddx, act;
    float *y, *pack, *dW, *dx;
    float beta;
    int backward;
} dense_job;

static void dense_job_run(void *arg) {
    const dense_job *j = arg;
    if (!j->backward) {
        j->k->linear_forward(j->rows, j->fi, j->fo, j->x, j->ldx, j->W, j->b, j->y, j->ldy, j->act, j->pack);
        return;
    }
    if (j->dW) j->k->linear_backward(j->rows, j->fi, j->fo, j->dy, j->lddy, j->x, j->ldx, j->act, j->W, j->dW, j->beta,
                                     NULL, 0);
    if (j->dx) j->k->linear_backward(j->rows, j->fi, j->fo, j->dy, j->lddy, j->x, j->ldx, j->act, j->W, NULL, 0.0f,
                                     j->dx, j->lddx);
}

/* Both halves of a backward's worker share: dW's outputs (job 0), then dx's rows (job 1). */
static void dense_pair_run(void *arg) {
    const dense_job *j = arg;
    if (j[0].dW) dense_job_run((void *)&j[0]);
    if (j[1].dx) dense_job_run((void *)&j[1]);
}

/* The split point of n rows: half, rounded to whole register tiles (6 rows) so both halves run full tiles. */
static int32_t split_rows(int32_t n) { return (n / 2 + 5) / 6 * 6 < n ? (n / 2 + 5) / 6 * 6 : n / 2; }

int cpu_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d) {
    cpu_impl *im = bk->impl;
    /* A few rows (acting on one observation) are faster through CBLAS than through packing a panel; 16-bit
     * layers have only the reference. */
    if (!im || !im->dense || d->rows < CPU_DENSE_MIN_ROWS || d->dtype != RLT_LP_F32)
        return cpu_linear_forward_ref(bk, d);
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, ldx = d->ldx, ldy = d->ldy;
    const float *x = d->x, *W = d->W, *b = d->b;
    float *y = d->y;
    rlt_act act = d->act;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CPU_REQUIRE(bk, d->y_dtype == RLT_LP_F32, "linear_forward");
    CPU_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "linear_forward");
    int32_t relu = act == RLT_ACT_RELU;
    if (im->worker && im->pack2 && (int64_t)rows * fi * fo >= CPU_SPLIT_MIN_MACS && fo >= 2 * CPU_DENSE_PACK_W) {
        /* Wide layers split by outputs at a whole panel (CPU_DENSE_PACK_W, a multiple of every kernel's panel
         * width): each thread packs only its own half of W^T, and every element of y still comes from the same
         * panels, tiles and FMA chain as unsplit. */
        int32_t oh = fo / 2 / CPU_DENSE_PACK_W * CPU_DENSE_PACK_W;
        dense_job j = {im->dense, rows, fi, fo - oh, x, W + (int64_t)oh * fi, b ? b + oh : NULL, NULL, ldx, ldy, 0, 0,
                       relu, y + oh, im->pack2, NULL, NULL, 0.0f, 0};
        cpu_worker_post(im->worker, dense_job_run, &j);
        im->dense->linear_forward(rows, fi, oh, x, ldx, W, b, y, ldy, relu, im->pack);
        cpu_worker_wait(im->worker);
    } else if (im->worker && im->pack2 && (int64_t)rows * fi * fo >= CPU_SPLIT_MIN_MACS && rows >= 12) {
        /* Rows split in two; each thread packs its own panel of W^T (a few percent of the work, no wait). */
        int32_t h = split_rows(rows);
        dense_job j = {im->dense, rows - h, fi, fo, x + (int64_t)h * ldx, W, b, NULL, ldx, ldy, 0, 0, relu,
                       y + (int64_t)h * ldy, im->pack2, NULL, NULL, 0.0f, 0};
        cpu_worker_post(im->worker, dense_job_run, &j);
        im->dense->linear_forward(h, fi, fo, x, ldx, W, b, y, ldy, relu, im->pack);
        cpu_worker_wait(im->worker);
    } else {
        im->dense->linear_forward(rows, fi, fo, x, ldx, W, b, y, ldy, relu, im->pack);
    }
    if (act == RLT_ACT_TANH)
        for (int32_t r = 0; r < rows; r++)
            for (int32_t c = 0; c < fo; c++) y[(int64_t)r * ldy + c] = tanhf(y[(int64_t)r * ldy + c]);
    return RLT_OK;
}

int cpu_linear_backward(rlt_backend *bk, const rlt_linear_bwd *d) {
    cpu_impl *im = bk->impl;
    if (!im || !im->dense || d->dtype != RLT_LP_F32) return cpu_linear_backward_ref(bk, d);
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, lddy = d->lddy, ldx = d->ldx, lddx = d->lddx;
    const float *dy = d->dy, *x = d->x, *W = d->W;
    float *dW = d->dW, *db = d->db, beta = d->beta, *dx = d->dx;
    rlt_act act_x = d->act_x;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi, "linear_backward");
    CPU_REQUIRE(bk, !dx || (lddx >= fi && d->dx_dtype == RLT_LP_F32), "linear_backward");
    CPU_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    int64_t macs = (int64_t)rows * fi * fo * ((dW ? 1 : 0) + (dx ? 1 : 0));
    if (im->worker && macs >= CPU_SPLIT_MIN_MACS && rows >= 12 && (!dW || fo >= 2)) {
        /* The worker takes dW's second half of outputs and dx's second half of rows; this thread the first
         * halves and db. Every element is computed by the same code as unsplit. */
        int32_t oh = dW ? fo / 2 : 0, rh = dx ? split_rows(rows) : 0;
        dense_job j[2] = {
            {im->dense, rows, fi, fo - oh, x, W + (int64_t)oh * fi, NULL, dy + oh, ldx, 0, lddy, lddx, act_x, NULL, NULL,
             dW ? dW + (int64_t)oh * fi : NULL, NULL, beta, 1},
            {im->dense, rows - rh, fi, fo, x + (int64_t)rh * ldx, W, NULL, dy + (int64_t)rh * lddy, ldx, 0, lddy, lddx,
             act_x, NULL, NULL, NULL, dx ? dx + (int64_t)rh * lddx : NULL, 0.0f, 1}};
        cpu_worker_post(im->worker, dense_pair_run, j);
        if (dW) im->dense->linear_backward(rows, fi, oh, dy, lddy, x, ldx, act_x, W, dW, beta, NULL, 0);
        if (dx) im->dense->linear_backward(rh, fi, fo, dy, lddy, x, ldx, act_x, W, NULL, 0.0f, dx, lddx);
        int rc = db ? cpu_bias_grad(bk, db, dy, lddy, rows, fo, beta) : RLT_OK;
        cpu_worker_wait(im->worker);
        return rc;
    }
    im->dense->linear_backward(rows, fi, fo, dy, lddy, x, ldx, act_x, W, dW, beta, dx, lddx);
    /* Column sums in row order: the reference op's own loop, so db is bit for bit the reference's. */
    if (db) RLT_TRY(cpu_bias_grad(bk, db, dy, lddy, rows, fo, beta));
    return RLT_OK;
}
