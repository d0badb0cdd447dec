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

/* A part of a dense op, as one thread runs it: a forward over outputs [o0, o1) of rows [r0, r1); a backward's dW
 * over outputs [o0, o1), its dx over rows [r0, r1), and db when `db` is set. A whole op is one part; a split op is
 * two, run by the two threads at once (each forward part packs its own panel of W^T, cpu_lane_panel). Every output
 * element is computed by the same code, in the same order, whatever the parts: splits never change a bit. */
typedef struct dense_part {
    rlt_backend *bk;
    int32_t o0, o1, r0, r1, db;
    union {
        rlt_linear_fwd f;
        rlt_linear_bwd b;
    } d;
} dense_part;
_Static_assert(sizeof(dense_part) <= CPU_JOB_BYTES, "a dense part fits one job");

static void forward_part(void *arg) {
    const dense_part *p = arg;
    const rlt_linear_fwd *d = &p->d.f;
    const cpu_impl *im = p->bk->impl;
    int32_t rows = p->r1 - p->r0, fo = p->o1 - p->o0, fi = d->fi, ldy = d->ldy;
    const float *x = (const float *)d->x + (int64_t)p->r0 * d->ldx, *W = (const float *)d->W + (int64_t)p->o0 * fi;
    float *y = (float *)d->y + (int64_t)p->r0 * ldy + p->o0;
    im->dense->linear_forward(rows, fi, fo, x, d->ldx, W, d->b ? d->b + p->o0 : NULL, y, ldy, d->act == RLT_ACT_RELU,
                              cpu_lane_panel(im));
    /* tanh after the kernels, which apply ReLU themselves. */
    if (d->act == RLT_ACT_TANH)
        for (int32_t r = 0; r < rows; r++)
            for (int32_t c = 0; c < fo; c++) y[(int64_t)r * ldy + c] = tanhf(y[(int64_t)r * ldy + c]);
}

static void backward_part(void *arg) {
    const dense_part *p = arg;
    const rlt_linear_bwd *d = &p->d.b;
    const cpu_dense_kernels *k = ((const cpu_impl *)p->bk->impl)->dense;
    const float *dy = d->dy, *x = d->x, *W = d->W;
    int32_t fi = d->fi, fo = d->fo;
    if (d->dW && p->o1 > p->o0)
        k->linear_backward(d->rows, fi, p->o1 - p->o0, dy + p->o0, d->lddy, x, d->ldx, d->act_x,
                           W + (int64_t)p->o0 * fi, d->dW + (int64_t)p->o0 * fi, d->beta, NULL, 0);
    if (d->dx && p->r1 > p->r0)
        k->linear_backward(p->r1 - p->r0, fi, fo, dy + (int64_t)p->r0 * d->lddy, d->lddy,
                           x + (int64_t)p->r0 * d->ldx, d->ldx, d->act_x, W, NULL, 0.0f,
                           (float *)d->dx + (int64_t)p->r0 * d->lddx, d->lddx);
    /* Column sums in row order: the reference op's own loop, so db is bit for bit the reference's. Its shapes
     * were checked when the op was issued, so this cannot fail. */
    if (p->db && d->db) (void)cpu_bias_grad(p->bk, d->db, dy, d->lddy, d->rows, fo, d->beta);
}

/* The split point of n rows: half, rounded to whole register tiles (6 rows) so both halves run full tiles. */
static int32_t split_rows(int32_t n) { return (n / 2 + 5) / 6 * 6 < n ? (n / 2 + 5) / 6 * 6 : n / 2; }

/* Runs an op whose parts `whole` describes, split in two when `split` (`half` sets the halves up): on a side lane
 * the op goes to the worker's queue, a split op as two halves queued beside each other (either thread may take
 * either, both at once); on lane 0 the calling thread runs the first half while the worker runs the second, or
 * runs the whole op. */
static int run_parts(rlt_backend *bk, void (*fn)(void *), dense_part *whole, int split, int side,
                     void (*half)(dense_part *first, dense_part *second)) {
    cpu_impl *im = bk->impl;
    if (!split) {
        if (side) return cpu_lane_defer(bk, fn, whole, sizeof *whole);
        fn(whole);
        return RLT_OK;
    }
    dense_part second = *whole;
    half(whole, &second);
    if (side) {
        cpu_lane_defer(bk, fn, whole, sizeof *whole);
        return cpu_lane_defer_beside(bk, fn, &second, sizeof second);
    }
    uint64_t t = cpu_worker_post(im->worker, CPU_JOB_FREE, 0, fn, &second, sizeof second);
    fn(whole);
    cpu_worker_wait(im->worker, t);
    return RLT_OK;
}

/* A forward's halves: by outputs at a whole panel when the layer is wide (CPU_DENSE_PACK_W, a multiple of every
 * kernel's panel width: each thread packs only its half of W^T), else by rows. */
static void forward_halves(dense_part *a, dense_part *b) {
    int32_t fo = a->o1, rows = a->r1;
    if (fo >= 2 * CPU_DENSE_PACK_W) a->o1 = b->o0 = fo / 2 / CPU_DENSE_PACK_W * CPU_DENSE_PACK_W;
    else a->r1 = b->r0 = split_rows(rows);
}

/* A backward's halves: dW by outputs, dx by rows; db in the first. */
static void backward_halves(dense_part *a, dense_part *b) {
    a->o1 = b->o0 = a->o1 / 2;
    a->r1 = b->r0 = split_rows(a->r1);
    b->db = 0;
}

int cpu_linear_forward(rlt_backend *bk, const rlt_linear_fwd *d) {
    cpu_impl *im = bk->impl;
    /* A few rows (acting on one observation) are faster through CBLAS than through packing a panel; 16-bit
     * layers have only the reference. Both run on the calling thread (CBLAS never on the worker). */
    if (!im || !im->dense || d->rows < CPU_DENSE_MIN_ROWS || d->dtype != RLT_LP_F32) {
        cpu_lane_fence(bk);
        return cpu_linear_forward_ref(bk, d);
    }
    int32_t rows = d->rows, fi = d->fi, fo = d->fo;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && d->ldx >= fi && d->ldy >= fo, "linear_forward");
    CPU_REQUIRE(bk, d->y_dtype == RLT_LP_F32, "linear_forward");
    CPU_REQUIRE(bk, d->act >= RLT_ACT_NONE && d->act <= RLT_ACT_TANH, "linear_forward");
    int64_t macs = (int64_t)rows * fi * fo;
    /* Only with both panels (a workspace planned for two threads) does a forward leave this thread. */
    int side = im->pack2 && cpu_lane_side(bk), big = macs >= CPU_SPLIT_BUSY_MACS;
    if (!side) cpu_lane_fence(bk);
    int split = im->pack2 && macs >= CPU_SPLIT_MIN_MACS && (fo >= 2 * CPU_DENSE_PACK_W || rows >= 12) &&
                (side ? macs >= 2 * CPU_SPLIT_MIN_MACS : cpu_lane_can_split(bk, big));
    dense_part whole = {bk, 0, fo, 0, rows, 0, {.f = *d}};
    return run_parts(bk, forward_part, &whole, split, side, forward_halves);
}

/* The CPU runs a chain layer by layer: the dense kernels gain nothing from fusing, and its bits are linear_forward's
 * by construction. */
int cpu_linear_chain_forward(rlt_backend *bk, const rlt_linear_fwd *layers, int32_t n) {
    CPU_REQUIRE(bk, rlt_chain_ok(layers, n),
                "linear_chain_forward: 1 to 9 layers, each reading the previous one's output");
    for (int32_t l = 0; l < n; l++) RLT_TRY(cpu_linear_forward(bk, &layers[l]));
    return RLT_OK;
}

int cpu_linear_backward(rlt_backend *bk, const rlt_linear_bwd *d) {
    cpu_impl *im = bk->impl;
    if (!im || !im->dense || d->dtype != RLT_LP_F32) {
        cpu_lane_fence(bk);
        return cpu_linear_backward_ref(bk, d);
    }
    int32_t rows = d->rows, fi = d->fi, fo = d->fo;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && d->lddy >= fo && d->ldx >= fi, "linear_backward");
    CPU_REQUIRE(bk, !d->dx || (d->lddx >= fi && d->dx_dtype == RLT_LP_F32), "linear_backward");
    CPU_REQUIRE(bk, d->act_x >= RLT_ACT_NONE && d->act_x <= RLT_ACT_TANH, "linear_backward");
    int64_t macs = (int64_t)rows * fi * fo * ((d->dW ? 1 : 0) + (d->dx ? 1 : 0));
    int side = cpu_lane_side(bk), big = (int64_t)rows * fi * fo >= CPU_SPLIT_BUSY_MACS;
    if (!side) cpu_lane_fence(bk);
    int split = macs >= CPU_SPLIT_MIN_MACS && rows >= 12 && (!d->dW || fo >= 2) &&
                (side ? macs >= 2 * CPU_SPLIT_MIN_MACS : cpu_lane_can_split(bk, big));
    dense_part whole = {bk, 0, fo, 0, rows, 1, {.b = *d}};
    return run_parts(bk, backward_part, &whole, split, side, backward_halves);
}
