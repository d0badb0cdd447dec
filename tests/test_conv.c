/* test_conv.c: the CPU backend's convolution and DQN ops against their definitions.
 * - conv_forward (im2col + GEMM) against a direct 7-loop convolution written here in double;
 * - conv_backward's dw, db and dx against central finite differences of conv_forward, with and without
 *   ReLU, for strides 1-3, padding 0 and 1, batches 2-3 and 1-4 channels; accumulation into dw and db,
 *   the NULL (skipped) outputs, and the refused calls;
 * - the oracles dqn_target (double and vanilla, ties, terminals), q_loss_grad (Huber in both regions, MSE)
 *   against their formulas and finite differences, clip_grad_norm and gather_u8_f32 against their formulas;
 *   the table's dqn_loss and adam (clipping) against those oracles, bit for bit.
 *
 * Tolerances (u = 2^-24, the fp32 unit roundoff):
 * - Forward vs the double 7-loop: a sum of K = c*kh*kw products plus the bias, in any order, is within
 *   gamma(K+1) S of the exact value, S = |b| + sum |w||x| (Higham 3.5; gamma(m) = m u / (1 - m u)); ReLU is
 *   1-Lipschitz and exact, so the bound carries through it. The double reference is exact to ~1e-16 S.
 * - Finite differences: x, w and b are multiples of 2^-6 in [-1, 1] and the step is h = 2^-6, so every
 *   product has at most 14 significant bits and every sum of at most 2^10 of them is exact in fp32: the
 *   forward is computed without rounding. The convolution is linear in each input, so central
 *   differences have no truncation error either, and the quotient, with L = sum_i p_i y_i accumulated in
 *   double, is the exact derivative to ~1e-12. What remains is the rounding of the backward itself
 *   (sums of up to n*out_h*out_w products p*x in fp32): gamma(m) sum|p x| <= ~1e-5 for these sizes, hence
 *   1e-5 absolute + 1e-5 relative. A wrong index, flipped kernel or missed stride gives errors of order 1.
 *   With ReLU, a perturbation that moves a pre-activation across 0 makes the quotient meaningless; those
 *   coordinates are skipped (detected by comparing the active sets) and most must still be checked.
 * - DQN ops: targets, chosen actions, loss gradients and clipped gradients use one or two float
 *   operations, so they are compared with the same float expression (exactly) or with the double formula
 *   to a few ulp; the loss against finite differences of itself uses h = 1e-3 away from Huber's kink. */
#include <string.h>

#include "backend_registry.h"
#include "harness.h"
#include "kernels/cpu/cpu_ops.h"

#define U (1.0 / 16777216.0)

static rlt_backend bk;
static rlt_err err;
static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rnd_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)((rnd_u64() >> 40) * (1.0 / 16777216.0)); }
static void rnd_fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = rnd_f(lo, hi);
}
static double gamma_n(double m) { return m * U / (1.0 - m * U); }
/* Multiples of 2^-6 in [lo, hi]: see the finite-difference note above. */
static void rnd_fill_q(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = roundf(rnd_f(lo, hi) * 64.0f) / 64.0f;
}

/* ---- convolution ---- */

/* The conv ops with their operands in a call's order. */
static int conv_fwd(int32_t slot, void *y, const void *x, const void *w, const float *b, int act, void *ws,
                    uint64_t ws_bytes) {
    rlt_conv_fwd d = {.slot = slot, .y = y, .x = x, .w = w, .b = b, .act = act, .ws = ws, .ws_bytes = ws_bytes};
    return bk.ops->conv_forward(&bk, &d);
}

static int conv_bwd(int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y, const void *x, const void *w,
                    int act, void *ws, uint64_t ws_bytes) {
    rlt_conv_bwd d = {.slot = slot, .dx = dx, .dw = dw, .db = db, .dy = dy, .y = y, .x = x, .w = w, .act = act, .ws = ws,
                      .ws_bytes = ws_bytes};
    return bk.ops->conv_backward(&bk, &d);
}

typedef struct conv_case {
    rlt_conv_shape s;
    int32_t oh, ow;
    size_t nx, nw, ny;
} conv_case;

static conv_case conv_case_of(rlt_conv_shape s) {
    conv_case c = {.s = s};
    c.oh = rlt_conv_out_dim(s.h, s.kh, s.stride, s.pad);
    c.ow = rlt_conv_out_dim(s.w, s.kw, s.stride, s.pad);
    c.nx = (size_t)s.n * s.c * s.h * s.w;
    c.nw = (size_t)s.k * s.c * s.kh * s.kw;
    c.ny = (size_t)s.n * s.k * c.oh * c.ow;
    return c;
}

/* The definition, seven loops deep, in double: ref = b + sum w x (before the activation), and the bound's
 * S = |b| + sum |w||x|. */
static void naive_conv(const conv_case *cc, const float *x, const float *w, const float *b, double *ref, double *absum) {
    const rlt_conv_shape *s = &cc->s;
    for (int n = 0; n < s->n; n++)
        for (int ko = 0; ko < s->k; ko++)
            for (int oy = 0; oy < cc->oh; oy++)
                for (int ox = 0; ox < cc->ow; ox++) {
                    double acc = b ? b[ko] : 0.0, mag = b ? fabs(b[ko]) : 0.0;
                    for (int ci = 0; ci < s->c; ci++)
                        for (int i = 0; i < s->kh; i++)
                            for (int j = 0; j < s->kw; j++) {
                                int iy = oy * s->stride - s->pad + i, ix = ox * s->stride - s->pad + j;
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w) continue;
                                double p = (double)w[((ko * s->c + ci) * s->kh + i) * s->kw + j] *
                                           x[((n * s->c + ci) * s->h + iy) * s->w + ix];
                                acc += p;
                                mag += fabs(p);
                            }
                    size_t at = (((size_t)n * s->k + ko) * cc->oh + oy) * cc->ow + ox;
                    ref[at] = acc;
                    absum[at] = mag;
                }
}

static void check_forward_vs_naive(const conv_case *cc, int32_t slot, void *ws, uint64_t ws_bytes, int act,
                                   const char *name) {
    float *x = malloc(cc->nx * 4), *w = malloc(cc->nw * 4), *b = malloc((size_t)cc->s.k * 4), *y = malloc(cc->ny * 4);
    double *ref = malloc(cc->ny * 8), *mag = malloc(cc->ny * 8);
    rnd_fill(x, cc->nx, -1, 1);
    rnd_fill(w, cc->nw, -1, 1);
    rnd_fill(b, (size_t)cc->s.k, -1, 1);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *bb = with_bias ? b : NULL;
        CHECK(conv_fwd(slot, y, x, w, bb, act, ws, ws_bytes) == RLT_OK, "%s forward: %s", name, err.msg);
        naive_conv(cc, x, w, bb, ref, mag);
        int K = cc->s.c * cc->s.kh * cc->s.kw, bad = 0;
        double worst = 0;
        for (size_t i = 0; i < cc->ny; i++) {
            double want = act == RLT_ACT_RELU ? (ref[i] > 0 ? ref[i] : 0) : ref[i];
            double lim = gamma_n(K + 1) * mag[i] + 1e-30, d = fabs(y[i] - want);
            if (!(d <= lim)) bad++;
            if (d / lim > worst) worst = d / lim;
        }
        CHECK(bad == 0, "%s forward (bias %d, act %d) vs the 7-loop definition: %d of %zu outside gamma(K+1) S "
              "(worst %.2f of the bound)", name, with_bias, act, bad, cc->ny, worst);
    }
    free(x), free(w), free(b), free(y), free(ref), free(mag);
}

/* L = sum_i p_i y_i in double, y from the op under test. */
static double conv_loss(const conv_case *cc, int32_t slot, void *ws, uint64_t ws_bytes, const float *x, const float *w,
                        const float *b, int act, const float *p, float *y) {
    CHECK(conv_fwd(slot, y, x, w, b, act, ws, ws_bytes) == RLT_OK, "forward: %s", err.msg);
    double L = 0;
    for (size_t i = 0; i < cc->ny; i++) L += (double)p[i] * y[i];
    return L;
}

static int same_active_set(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((a[i] > 0) != (b[i] > 0)) return 0;
    return 1;
}

/* Central differences of one coordinate v (in x, w or b): returns 0 when ReLU's active set changed. */
static int fd_coord(const conv_case *cc, int32_t slot, void *ws, uint64_t ws_bytes, float *v, float *x, float *w,
                    float *b, int act, const float *p, float *y0, float *yp, float *ym, double h, double *out) {
    float keep = *v;
    *v = keep + (float)h;
    double lp = conv_loss(cc, slot, ws, ws_bytes, x, w, b, act, p, yp);
    *v = keep - (float)h;
    double lm = conv_loss(cc, slot, ws, ws_bytes, x, w, b, act, p, ym);
    *v = keep;
    if (act == RLT_ACT_RELU && (!same_active_set(y0, yp, cc->ny) || !same_active_set(y0, ym, cc->ny))) return 0;
    /* The float step actually taken (keep +- h rounds): divide by it, not by h. */
    *out = (lp - lm) / (2.0 * h); /* keep +- h is exact: keep and h are multiples of 2^-6 */
    return 1;
}

static void check_gradients(const conv_case *cc, int32_t slot, void *ws, uint64_t ws_bytes, int act, const char *name) {
    const rlt_conv_shape *s = &cc->s;
    float *x = malloc(cc->nx * 4), *w = malloc(cc->nw * 4), *b = malloc((size_t)s->k * 4);
    float *p = malloc(cc->ny * 4), *y0 = malloc(cc->ny * 4), *yp = malloc(cc->ny * 4), *ym = malloc(cc->ny * 4);
    float *dy = malloc(cc->ny * 4), *dx = malloc(cc->nx * 4), *dw = malloc(cc->nw * 4), *db = malloc((size_t)s->k * 4);
    float *dw2 = malloc(cc->nw * 4), *db2 = malloc((size_t)s->k * 4), *dy2 = malloc(cc->ny * 4);
    rnd_fill_q(x, cc->nx, -1, 1);
    rnd_fill_q(w, cc->nw, -1, 1);
    rnd_fill_q(b, (size_t)s->k, -0.5f, 0.5f);
    rnd_fill(p, cc->ny, -1, 1);
    conv_loss(cc, slot, ws, ws_bytes, x, w, b, act, p, y0);
    /* dw and db start at 0.5: the op accumulates, so the gradient is what it added. */
    for (size_t i = 0; i < cc->nw; i++) dw[i] = 0.5f;
    for (int i = 0; i < s->k; i++) db[i] = 0.5f;
    for (size_t i = 0; i < cc->nx; i++) dx[i] = 1e30f; /* must be overwritten, not accumulated */
    memcpy(dy, p, cc->ny * 4);
    CHECK(conv_bwd(slot, dx, dw, db, dy, y0, x, w, act, ws, ws_bytes) == RLT_OK, "%s backward: %s",
          name, err.msg);
    const double h = 1.0 / 64.0;
    int checked = 0, total = 0, bad = 0;
    double fd;
    for (size_t i = 0; i < cc->nw; i++, total++) {
        if (!fd_coord(cc, slot, ws, ws_bytes, &w[i], x, w, b, act, p, y0, yp, ym, h, &fd)) continue;
        checked++;
        double g = (double)dw[i] - 0.5;
        if (!(fabs(g - fd) <= 1e-5 + 1e-5 * fabs(fd)) && bad++ < 3)
            fprintf(stderr, "%s act %d: dw[%zu] = %.7g, finite differences %.7g\n", name, act, i, g, fd);
    }
    for (int i = 0; i < s->k; i++, total++) {
        if (!fd_coord(cc, slot, ws, ws_bytes, &b[i], x, w, b, act, p, y0, yp, ym, h, &fd)) continue;
        checked++;
        double g = (double)db[i] - 0.5;
        if (!(fabs(g - fd) <= 1e-5 + 1e-5 * fabs(fd)) && bad++ < 3)
            fprintf(stderr, "%s act %d: db[%d] = %.7g, finite differences %.7g\n", name, act, i, g, fd);
    }
    for (size_t i = 0; i < cc->nx; i++, total++) {
        if (!fd_coord(cc, slot, ws, ws_bytes, &x[i], x, w, b, act, p, y0, yp, ym, h, &fd)) continue;
        checked++;
        if (!(fabs(dx[i] - fd) <= 1e-5 + 1e-5 * fabs(fd)) && bad++ < 3)
            fprintf(stderr, "%s act %d: dx[%zu] = %.7g, finite differences %.7g\n", name, act, i, dx[i], fd);
    }
    CHECK(bad == 0, "%s act %d: %d of %d gradient entries disagree with finite differences", name, act, bad, checked);
    /* ReLU kinks skip some coordinates; most must still have been checked. */
    CHECK(checked >= total * 3 / 4, "%s act %d: only %d of %d coordinates checked", name, act, checked, total);

    /* Skipping dx and db changes nothing else, and a second call with the same dy adds the same dw again. */
    for (size_t i = 0; i < cc->nw; i++) dw2[i] = dw[i];
    for (int i = 0; i < s->k; i++) db2[i] = db[i];
    memcpy(dy2, p, cc->ny * 4);
    CHECK(conv_bwd(slot, NULL, dw2, NULL, dy2, y0, x, w, act, ws, ws_bytes) == RLT_OK,
          "%s backward without dx, db: %s", name, err.msg);
    CHECK(memcmp(dy2, dy, cc->ny * 4) == 0, "%s: dy is rewritten to the pre-activation gradient the same way", name);
    int acc_bad = 0;
    for (size_t i = 0; i < cc->nw; i++) {
        double added = (double)dw2[i] - dw[i], first = (double)dw[i] - 0.5;
        /* Each accumulation rounds once at |dw| ~ |first| + 0.5: a few ulp of that. */
        if (!(fabs(added - first) <= 8 * U * (fabs(dw2[i]) + 1.0) + gamma_n(64) * fabs(first))) acc_bad++;
    }
    CHECK(acc_bad == 0, "%s: a second backward adds the same dw (%d differ)", name, acc_bad);
    CHECK(memcmp(db2, db, (size_t)s->k * 4) == 0, "%s: db NULL leaves db alone", name);
    free(x), free(w), free(b), free(p), free(y0), free(yp), free(ym), free(dy), free(dx), free(dw), free(db);
    free(dw2), free(db2), free(dy2);
}

static void check_conv(void) {
    static const rlt_conv_shape shapes[] = {
        /* n, c, h, w, k, kh, kw, stride, pad, dtype */
        {2, 1, 5, 5, 2, 3, 3, 1, 0, 0},  {3, 2, 7, 6, 3, 3, 2, 2, 1, 0}, {2, 4, 8, 8, 4, 4, 4, 2, 0, 0},
        {3, 3, 6, 5, 2, 2, 3, 1, 1, 0},  {2, 2, 9, 9, 3, 3, 3, 3, 1, 0}, {2, 4, 10, 10, 3, 3, 3, 1, 0, 0},
    };
    uint64_t ws_max = 0, ws_bytes[sizeof shapes / sizeof shapes[0]];
    size_t ns = sizeof shapes / sizeof shapes[0];
    for (size_t t = 0; t < ns; t++) {
        CHECK(bk.ops->conv_prepare(&bk, (int32_t)t, &shapes[t], &ws_bytes[t]) == RLT_OK, "prepare %zu: %s", t, err.msg);
        conv_case cc = conv_case_of(shapes[t]);
        CHECK(ws_bytes[t] == (uint64_t)shapes[t].c * shapes[t].kh * shapes[t].kw * cc.oh * cc.ow * 4,
              "workspace of slot %zu is one image's column matrix: %llu", t, (unsigned long long)ws_bytes[t]);
        if (ws_bytes[t] > ws_max) ws_max = ws_bytes[t];
    }
    /* One workspace for all slots, as the plan will hand it out. */
    void *ws = malloc(ws_max);
    for (size_t t = 0; t < ns; t++) {
        conv_case cc = conv_case_of(shapes[t]);
        char name[96];
        snprintf(name, sizeof name, "conv n%d c%d %dx%d -> k%d %dx%d/%d pad %d", shapes[t].n, shapes[t].c, shapes[t].h,
                 shapes[t].w, shapes[t].k, shapes[t].kh, shapes[t].kw, shapes[t].stride, shapes[t].pad);
        check_forward_vs_naive(&cc, (int32_t)t, ws, ws_max, RLT_ACT_NONE, name);
        check_forward_vs_naive(&cc, (int32_t)t, ws, ws_max, RLT_ACT_RELU, name);
        check_gradients(&cc, (int32_t)t, ws, ws_max, RLT_ACT_NONE, name);
        check_gradients(&cc, (int32_t)t, ws, ws_max, RLT_ACT_RELU, name);
        printf("  %s: forward and gradients checked\n", name);
    }

    /* Refused calls: each names the problem and returns, touching nothing. */
    float f[64];
    uint64_t got = 0;
    rlt_conv_shape too_big = {1, 1, 3, 3, 1, 5, 5, 1, 0, 0};
    CHECK(bk.ops->conv_prepare(&bk, 7, &too_big, &got) == RLT_EINVAL, "a kernel larger than the padded input");
    CHECK(bk.ops->conv_prepare(&bk, RLT_BACKEND_MAX_CONVS, &shapes[0], &got) == RLT_EINVAL, "slot out of range");
    CHECK(conv_fwd(7, f, f, f, NULL, RLT_ACT_NONE, ws, ws_max) == RLT_ESTATE,
          "an unprepared slot: %s", err.msg);
    CHECK(conv_fwd(0, f, f, f, NULL, RLT_ACT_NONE, ws, ws_bytes[0] - 4) == RLT_EINVAL,
          "a workspace smaller than prepare asked for");
    CHECK(conv_bwd(0, NULL, f, NULL, f, f, f, f, 9, ws, ws_max) == RLT_EINVAL, "an unknown activation");
    free(ws);
}

/* ---- DQN ops ---- */

static void check_dqn_target(void) {
    /* Rows padded to ldq = 4 (the pad holds a huge value that must never be chosen). Row by row:
     * online   [1 3 3 | 99]: tie between 1 and 2 -> 1;  target [10 20 30 | 99]: max at 2
     * online   [5 2 5 | 99]: tie between 0 and 2 -> 0;  target [ 4  8  6 | 99]: max at 1 (terminal)
     * online   [-1 -2 -3 | 99] -> 0;                     target [ 1  2  3 | 99]: max at 2
     * online   [0 0 7 | 99] -> 2;                        target [ 9  9  1 | 99]: tie 0 and 1 -> 0 */
    float qo[16] = {1, 3, 3, 99, 5, 2, 5, 99, -1, -2, -3, 99, 0, 0, 7, 99};
    float qt[16] = {10, 20, 30, 99, 4, 8, 6, 99, 1, 2, 3, 99, 9, 9, 1, 99};
    float r[4] = {0.5f, -1.0f, 0.25f, 2.0f}, term[4] = {0, 1, 0, 0}, y[4], gamma = 0.99f;
    int32_t a[4];
    static const int32_t want_double[4] = {1, 0, 0, 2}, want_vanilla[4] = {2, 1, 2, 0};
    CHECK(cpu_dqn_target(&bk, y, a, r, term, qt, qo, 4, 4, 3, gamma) == RLT_OK, "double dqn_target: %s", err.msg);
    for (int i = 0; i < 4; i++) {
        CHECK(a[i] == want_double[i], "double DQN row %d chose %d, want %d (first of tied maxima)", i, a[i],
              want_double[i]);
        float want = r[i] + gamma * (1.0f - term[i]) * qt[i * 4 + want_double[i]];
        CHECK(y[i] == want, "double DQN y[%d] = %.9g, want %.9g", i, y[i], want);
    }
    CHECK(y[1] == r[1], "a terminal transition does not bootstrap: %g", y[1]);
    CHECK(cpu_dqn_target(&bk, y, a, r, term, qt, NULL, 4, 4, 3, gamma) == RLT_OK, "vanilla dqn_target");
    for (int i = 0; i < 4; i++) {
        CHECK(a[i] == want_vanilla[i], "vanilla DQN row %d chose %d, want %d", i, a[i], want_vanilla[i]);
        float want = r[i] + gamma * (1.0f - term[i]) * qt[i * 4 + want_vanilla[i]];
        CHECK(y[i] == want, "vanilla DQN y[%d] = %.9g, want %.9g", i, y[i], want);
    }
    CHECK(cpu_dqn_target(&bk, y, NULL, r, term, qt, qo, 4, 4, 3, gamma) == RLT_OK, "a_next may be NULL");
    CHECK(cpu_dqn_target(&bk, y, a, r, term, qt, qo, 2, 4, 3, gamma) == RLT_EINVAL, "ldq < n_act refused");
}

/* The loss by its definition, in double. */
static double loss_def(const float *q, int ldq, const int32_t *act, const float *y, int n, int n_act, double delta) {
    double L = 0;
    for (int i = 0; i < n; i++) {
        if (act[i] < 0 || act[i] >= n_act) continue;
        double d = (double)q[i * ldq + act[i]] - y[i];
        if (delta == 0) L += d * d;
        else L += fabs(d) <= delta ? 0.5 * d * d : delta * (fabs(d) - 0.5 * delta);
    }
    return L / n;
}

static void check_q_loss(void) {
    enum { N = 8, A = 3, LD = 5 };
    float q[N * LD], y[N], dq[N * LD], loss;
    /* TD errors chosen in both Huber regions, none within 1e-2 of the kink at |d| = 1; row 7's action is
     * out of range (a caller bug): zero gradient, no loss. */
    static const float d[N] = {0.3f, -0.7f, 2.5f, -4.0f, 0.05f, 1.5f, -0.95f, 0.0f};
    int32_t act[N] = {0, 2, 1, 0, 2, 1, 1, 5};
    rnd_fill(q, N * LD, -2, 2);
    for (int i = 0; i < N; i++) y[i] = q[i * LD + (act[i] < A ? act[i] : 0)] - d[i];
    static const float deltas[2] = {1.0f, 0.0f};
    for (int k = 0; k < 2; k++) {
        float delta = deltas[k], scale = 0.5f;
        for (int i = 0; i < N * LD; i++) dq[i] = 1e30f;
        CHECK(cpu_q_loss_grad(&bk, dq, LD, &loss, q, LD, act, y, N, A, delta, scale) == RLT_OK, "q_loss_grad: %s",
              err.msg);
        double L = loss_def(q, LD, act, y, N, A, delta);
        CHECK_NEAR(loss, L, 1e-7, 8 * N * U, delta > 0 ? "Huber loss" : "MSE loss");
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < A; j++) {
                if (j != act[i]) {
                    CHECK(dq[i * LD + j] == 0.0f, "delta %g: dq[%d,%d] of an untaken action is %g", delta, i, j,
                          dq[i * LD + j]);
                    continue;
                }
                /* d loss / d q[i, a] by central differences of the definition, times grad_scale. */
                float keep = q[i * LD + j];
                double hh = 1e-3;
                q[i * LD + j] = keep + (float)hh;
                double lp = loss_def(q, LD, act, y, N, A, delta);
                q[i * LD + j] = keep - (float)hh;
                double lm = loss_def(q, LD, act, y, N, A, delta);
                q[i * LD + j] = keep;
                double fd = scale * (lp - lm) / ((double)(keep + (float)hh) - (double)(keep - (float)hh));
                CHECK_NEAR(dq[i * LD + j], fd, 1e-5, 1e-4, delta > 0 ? "Huber gradient" : "MSE gradient");
            }
            CHECK(dq[i * LD + 3] == 1e30f && dq[i * LD + 4] == 1e30f, "padding of dq row %d untouched", i);
        }
        /* The Huber gradient is clipped to +-delta * scale / n beyond the kink. */
        if (delta > 0) CHECK(fabsf(dq[3 * LD + 0]) == scale / N, "clipped gradient %g", dq[3 * LD + 0]);
    }
    CHECK(cpu_q_loss_grad(&bk, dq, LD, NULL, q, LD, act, y, N, A, 1.0f, 1.0f) == RLT_OK, "loss may be NULL");
    CHECK(cpu_q_loss_grad(&bk, dq, LD, &loss, q, LD, act, y, 0, A, 1.0f, 1.0f) == RLT_EINVAL, "n = 0 refused");
}

static void check_clip(void) {
    float g[3] = {3.0f, 0.0f, -4.0f}, norm = 0;
    CHECK(cpu_clip_grad_norm(&bk, g, 3, 10.0f, &norm) == RLT_OK, "clip: %s", err.msg);
    CHECK(norm == 5.0f && g[0] == 3.0f && g[1] == 0.0f && g[2] == -4.0f, "under max_norm: unchanged, norm %g", norm);
    CHECK(cpu_clip_grad_norm(&bk, g, 3, 1.0f, &norm) == RLT_OK, "clip");
    double coef = 1.0 / (5.0 + 1e-6);
    CHECK(norm == 5.0f, "norm before clipping %g", norm);
    CHECK_NEAR(g[0], 3.0 * coef, 0, 4 * U, "clipped g[0]");
    CHECK_NEAR(g[2], -4.0 * coef, 0, 4 * U, "clipped g[2]");
    /* A long block: the norm after clipping is max_norm (to rounding), directions are kept. */
    enum { N = 100003 };
    float *v = malloc(N * 4), *v0 = malloc(N * 4);
    rnd_fill(v, N, -1, 1);
    memcpy(v0, v, N * 4);
    double s = 0;
    for (int i = 0; i < N; i++) s += (double)v[i] * v[i];
    CHECK(cpu_clip_grad_norm(&bk, v, N, 2.0f, &norm) == RLT_OK, "clip long");
    CHECK_NEAR(norm, sqrt(s), 0, 2 * U, "norm of a long block");
    double after = 0;
    for (int i = 0; i < N; i++) after += (double)v[i] * v[i];
    CHECK_NEAR(sqrt(after), 2.0, 0, 1e-6, "norm after clipping");
    CHECK_NEAR(v[123] / v0[123], 2.0 / (sqrt(s) + 1e-6), 0, 4 * U, "every element scaled alike");
    free(v), free(v0);
    CHECK(cpu_clip_grad_norm(&bk, g, 3, 0.0f, &norm) == RLT_EINVAL, "max_norm 0 refused");
    CHECK(cpu_clip_grad_norm(&bk, g, 0, 1.0f, &norm) == RLT_OK && norm == 0.0f, "an empty block has norm 0");
}

/* The table's fused ops are these oracles in sequence: dqn_loss is dqn_target then q_loss_grad with the same
 * operands, and adam with max_grad_norm clips g as clip_grad_norm does. Both compared bit for bit (the CPU
 * twins call the very same functions; this checks that every descriptor field reaches its place). */
static void check_fused(void) {
    enum { N = 4, A = 3, LDQ = 4, LDD = 5 };
    float qo[N * LDQ] = {1, 3, 3, 99, 5, 2, 5, 99, -1, -2, -3, 99, 0, 0, 7, 99};
    float qt[N * LDQ] = {10, 20, 30, 99, 4, 8, 6, 99, 1, 2, 3, 99, 9, 9, 1, 99};
    float q[N * A] = {0.5f, 1.5f, -2.0f, 3.0f, 0.25f, 1.0f, -1.0f, 2.0f, 4.0f, 0.0f, 1.0f, -0.5f};
    float r[N] = {0.5f, -1.0f, 0.25f, 2.0f}, term[N] = {0, 1, 0, 0};
    int32_t act[N] = {2, 0, 1, 7}; /* the last out of range */
    for (int dbl = 0; dbl < 2; dbl++) {
        float y1[N], y2[N], dq1[N * LDD], dq2[N * LDD], l1 = 0, l2 = 0;
        for (int i = 0; i < N * LDD; i++) dq1[i] = dq2[i] = 7.0f;
        CHECK(cpu_dqn_target(&bk, y1, NULL, r, term, qt, dbl ? qo : NULL, LDQ, N, A, 0.9f) == RLT_OK, "dqn_target");
        CHECK(cpu_q_loss_grad(&bk, dq1, LDD, &l1, q, A, act, y1, N, A, 1.0f, 0.5f) == RLT_OK, "q_loss_grad");
        rlt_q_loss d = {.y = y2, .dq = dq2, .lddq = LDD, .loss = &l2, .q = q, .ldq = A, .act = act, .r = r,
                        .term = term, .q_next_target = qt, .q_next_online = dbl ? qo : NULL, .ldqn = LDQ, .n = N,
                        .n_act = A, .gamma = 0.9f, .huber_delta = 1.0f, .grad_scale = 0.5f};
        CHECK(bk.ops->dqn_loss(&bk, &d) == RLT_OK, "dqn_loss: %s", err.msg);
        CHECK(memcmp(y1, y2, sizeof y1) == 0 && memcmp(dq1, dq2, sizeof dq1) == 0 && memcmp(&l1, &l2, 4) == 0,
              "dqn_loss (double %d) is dqn_target then q_loss_grad", dbl);
    }
    float g1[5] = {3.0f, 0.0f, -4.0f, 1.0f, 2.0f}, g2[5], p[5] = {0}, m[5] = {0}, v[5] = {0}, n1 = 0, n2 = 0;
    memcpy(g2, g1, sizeof g1);
    int64_t step = 1;
    CHECK(cpu_clip_grad_norm(&bk, g1, 5, 1.0f, &n1) == RLT_OK, "clip");
    rlt_adam_step st = {.p = p, .g = g2, .m = m, .v = v, .n = 5, .hp = {1e-3f, 0.9f, 0.999f, 1e-8f}, .step = &step,
                        .max_grad_norm = 1.0f, .norm = &n2};
    CHECK(bk.ops->adam(&bk, &st) == RLT_OK, "adam with clipping: %s", err.msg);
    CHECK(memcmp(g1, g2, sizeof g1) == 0 && n1 == n2, "adam clips g as clip_grad_norm does (norm %g vs %g)", n2, n1);
}

static void check_gather(void) {
    uint8_t ring[5 * 6];
    for (int i = 0; i < 30; i++) ring[i] = (uint8_t)(i * 9);
    int32_t idx[3] = {4, 0, 4};
    float out[18];
    CHECK(bk.ops->gather_u8_f32(&bk, out, ring, 6, idx, 3, 1.0f / 255.0f) == RLT_OK, "gather_u8_f32");
    int bad = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++) bad += out[i * 6 + j] != (1.0f / 255.0f) * (float)ring[idx[i] * 6 + j];
    CHECK(bad == 0, "gathered frames scaled: %d wrong", bad);
    CHECK(bk.ops->gather_u8_f32(&bk, out, ring, 6, NULL, 2, 2.0f) == RLT_OK && out[7] == 2.0f * ring[7],
          "idx NULL converts rows in place order: %g", out[7]);
}

int main(void) {
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend: %s", err.msg);
    check_conv();
    check_dqn_target();
    check_q_loss();
    check_clip();
    check_fused();
    check_gather();
    rlt_backend_close(&bk);
    return test_summary("test_conv");
}
