/* gpu_dqn_parity.c: the DQN and convolution ops of the CUDA backend against their CPU twins (the
 * readable reference) on fresh random inputs: gather_u8_f32, the optimiser's gradient clipping (adam with
 * max_grad_norm, against the clip_grad_norm oracle; eagerly and replayed from a captured graph), and
 * conv_prepare/forward/backward for the Nature DQN torso (batch 32, 4x84x84 -> 32@8x8/4 -> 64@4x4/2 ->
 * 64@3x3/1), the MinAtar torso (4x10x10 -> 16@3x3/1) and a small padded, odd-sized case; plus run-to-run
 * determinism of the GPU convolution, a captured forward + backward replayed against the eager result, and
 * the refused calls. The DQN loss (target and TD loss in one op) is compared in gpu_ops_parity. Skipped
 * (exit 77) when no CUDA device can be opened.
 *
 * Tolerances (u = 2^-24, the fp32 unit roundoff; gamma(m) = m u / (1 - m u)):
 * - Exact (bit for bit): gather_u8_f32 (one multiply; the module is built without FMA contraction), and
 *   the clipped gradients when the norm is under max_norm (nothing is scaled).
 * - The clipping's norm: the CPU sums squares in double (exact to ~1e-16); the GPU's fp32 sum runs
 *   ceil(n / 65536) terms per thread and two 256-way trees, so it is within gamma(n/65536 + 17) of the
 *   exact sum of squares (all terms positive), and the square root halves that (+ u for its rounding).
 *   The scaled gradients inherit the norm's relative error through max_norm / (norm + 1e-6), plus two
 *   roundings (the division and the product): |g| (rel(norm) + 4u).
 * - Convolutions: cuDNN is restricted to GEMM-family algorithms in plain fp32 (no TF32, no FFT or
 *   Winograd transforms), so every output is a sum of products in some order: within gamma(m) S of the
 *   exact value, S the sum of the products' magnitudes and m the number of terms (Higham 3.5), and the CPU
 *   likewise; the two differ by at most 2 gamma(m + 2) S per element, S computed here in double:
 *     y  (before the activation): m = c*kh*kw products + the bias; ReLU is exact and 1-Lipschitz;
 *     dw: m = n*out_h*out_w products + the value accumulated into; db the same with dy alone;
 *     dx: m <= k*kh*kw products (the taps that reach the pixel).
 *   The normalised error |gpu - cpu|_2 / |cpu|_2 is printed (typically ~1e-7, far inside the ~1e-6 that
 *   a different summation order can cost); a wrong index or a TF32 path would show as 1e-3 or worse.
 * - Determinism and graph replay of the GPU convolution: bit for bit (same algorithms, same inputs).
 * - Every convolution case again under precision: tf32 (the products on TF32 tensor cores): the bounds above plus
 *   PAIR_TF32_REL times the sum of the magnitudes, bit-for-bit determinism and graph replay again, and TF32 engaged
 *   (the fp32 run's outputs differ). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_pair.h"
#include "backend_registry.h"
#include "harness.h"
#include "kernels/cpu/cpu_ops.h"

#define U (1.0 / 16777216.0)
#define ARENA_BYTES (320ull << 20)

/* The shared CPU/GPU pair (backend_pair.h) under this file's short names. */
#define rnd_u64 pair_rnd_u64
#define rnd_f pair_rnd_f
#define rnd_fill pair_rnd_fill
#define die_on pair_die_on
#define take pair_take
#define reset pair_reset
#define put pair_put
#define fetch pair_fetch
#define set_tf32 pair_set_tf32
static double gamma_n(double m) { return m * U / (1.0 - m * U); }
static void fetch_gpu(void *host, const void *g, uint64_t bytes) {
    die_on(P.gpu.ops->sync(&P.gpu), &P.egpu, "gpu sync before fetch");
    die_on(P.gpu.ops->copy(&P.gpu, host, g, bytes, RLT_COPY_D2H), &P.egpu, "gpu copy back");
    die_on(P.gpu.ops->sync(&P.gpu), &P.egpu, "gpu sync after fetch");
}

static void expect_exact(const char *what, const void *gpu, const void *cpu, size_t n, size_t elem) {
    const unsigned char *g = gpu, *c = cpu;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(g + i * elem, c + i * elem, elem) != 0 && bad++ == 0) first = i;
    printf("  %-58s n=%-8zu %s\n", what, n, bad ? "DIFFERS" : "exact");
    if (bad && elem == 4) {
        float gf, cf;
        int32_t gi, ci;
        memcpy(&gf, g + first * 4, 4);
        memcpy(&cf, c + first * 4, 4);
        memcpy(&gi, g + first * 4, 4);
        memcpy(&ci, c + first * 4, 4);
        CHECK(bad == 0, "%s: %zu of %zu differ; first at %zu: gpu %.9g (int %d) cpu %.9g (int %d)", what, bad, n, first,
              gf, gi, cf, ci);
    } else {
        CHECK(bad == 0, "%s: %zu of %zu differ; first at %zu", what, bad, n, first);
    }
}

/* |gpu - cpu| <= bound[i] (bound NULL: atol + rtol |cpu|); prints the normalised error. */
static void expect_close(const char *what, const float *g, const float *c, size_t n, const double *bound, double atol,
                         double rtol) {
    double num = 0, den = 0, worst = 0;
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)g[i] - (double)c[i];
        num += d * d;
        den += (double)c[i] * c[i];
        double lim = bound ? bound[i] : atol + rtol * fabs((double)c[i]);
        double excess = fabs(d) - lim;
        if (!(excess <= 0) && (bad++ == 0 || excess > worst)) {
            worst = excess;
            at = i;
        }
    }
    double nerr = den > 0 ? sqrt(num / den) : sqrt(num);
    printf("  %-58s n=%-8zu nerr=%.2e\n", what, n, nerr);
    CHECK(bad == 0, "%s: %zu of %zu outside the bound; worst at %zu: gpu %.9g cpu %.9g bound %.3g", what, bad, n, at,
          g[at], c[at], bound ? bound[at] : atol + rtol * fabs((double)c[at]));
}

/* ---- DQN ops ---- */

static void test_gather_u8(void) {
    printf("gather_u8_f32\n");
    static const struct {
        uint64_t row;
        int32_t rows, n, use_idx;
    } cases[] = {{400, 1000, 32, 1}, {28224, 200, 32, 1}, {28224, 8, 8, 0}, {7, 50, 1, 1}, {3, 5, 0, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        uint64_t row = cases[t].row, ring_bytes = row * (uint64_t)cases[t].rows, out = row * (uint64_t)cases[t].n;
        uint8_t *ring = malloc(ring_bytes);
        for (uint64_t i = 0; i < ring_bytes; i++) ring[i] = (uint8_t)rnd_u64();
        int32_t idx[64];
        for (int i = 0; i < cases[t].n; i++) idx[i] = (int32_t)(rnd_u64() % (uint64_t)cases[t].rows);
        void *cr, *gr, *ci, *gi, *co, *go;
        take(ring_bytes, &cr, &gr);
        take(sizeof idx, &ci, &gi);
        take(out * 4 + 4, &co, &go);
        put(cr, gr, ring, ring_bytes);
        put(ci, gi, idx, sizeof idx);
        float *rc = malloc(out * 4 + 4), *rg = malloc(out * 4 + 4);
        rnd_fill(rc, out + 1, -1, 1);
        put(co, go, rc, out * 4 + 4); /* a guard float after the rows must survive */
        const int32_t *ic = cases[t].use_idx ? ci : NULL, *ig = cases[t].use_idx ? gi : NULL;
        int r1 = P.cpu.ops->gather_u8_f32(&P.cpu, co, cr, row, ic, cases[t].n, 1.0f / 255.0f);
        int r2 = P.gpu.ops->gather_u8_f32(&P.gpu, go, gr, row, ig, cases[t].n, 1.0f / 255.0f);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "gather_u8_f32: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        fetch(rc, rg, co, go, out * 4 + 4);
        char what[96];
        snprintf(what, sizeof what, "gather_u8_f32 row=%llu n=%d idx=%d (+guard)", (unsigned long long)row,
                 cases[t].n, cases[t].use_idx);
        expect_exact(what, rg, rc, out + 1, 4);
        free(ring), free(rc), free(rg);
        reset();
    }
}

/* One clip: the CPU's oracle (cpu_clip_grad_norm) against the GPU's optimiser step with clipping (adam, which
 * leaves g clipped in place and the norm in *norm), either eagerly or replayed from graph slot `graph` (>= 0).
 * Adam's own results are not looked at here (gpu_ops_parity checks them). */
static void clip_case(uint64_t n, float max_norm, int graph) {
    float *h = malloc(n * 4 + 4), *rc = malloc(n * 4 + 4), *rg = malloc(n * 4 + 4);
    rnd_fill(h, n + 1, -1, 1);
    void *cg, *gg, *cn, *gn, *cp, *gp, *cs, *gs;
    take(n * 4 + 4, &cg, &gg);
    take(4, &cn, &gn);
    take(3 * n * 4 + 4, &cp, &gp); /* p, m, v */
    take(8, &cs, &gs);
    die_on(P.gpu.ops->flat(&P.gpu, RLT_FLAT_FILL, gp, NULL, 3 * n + 1, 0.0f), &P.egpu, "fill");
    int64_t one = 1;
    put(cs, gs, &one, 8);
    float *p = gp;
    rlt_adam_step st = {.p = p, .g = gg, .m = p + n, .v = p + 2 * n, .n = n, .hp = {1e-3f, 0.9f, 0.999f, 1e-8f},
                        .step = gs, .max_grad_norm = max_norm, .norm = gn};
    int r2;
    if (graph >= 0) {
        /* Capture on stale data, then load the real gradients and replay: the scaling must read the norm
         * computed in the replay, from device memory. */
        rnd_fill(rc, n + 1, -1, 1);
        put(cg, gg, rc, n * 4 + 4);
        die_on(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, graph), &P.egpu, "graph_begin");
        r2 = P.gpu.ops->adam(&P.gpu, &st);
        die_on(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, graph), &P.egpu, "graph_end");
        put(cg, gg, h, n * 4 + 4);
        die_on(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, graph), &P.egpu, "graph_launch");
    } else {
        put(cg, gg, h, n * 4 + 4);
        r2 = P.gpu.ops->adam(&P.gpu, &st);
    }
    int r1 = cpu_clip_grad_norm(&P.cpu, cg, n, max_norm, cn);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "clipping: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
    float nc, ng;
    fetch(&nc, &ng, cn, gn, 4);
    fetch(rc, rg, cg, gg, n * 4 + 4);
    double rel = 0.5 * gamma_n((double)((n + 65535) / 65536) + 17.0) + 2.0 * U;
    double nb = rel * fabs(nc) + 1e-37;
    char what[96];
    snprintf(what, sizeof what, "adam's clipping n=%llu max=%g%s: norm", (unsigned long long)n, max_norm,
             graph >= 0 ? " (graph)" : "");
    expect_close(what, &ng, &nc, 1, &nb, 0, 0);
    snprintf(what, sizeof what, "adam's clipping n=%llu max=%g%s: g (+guard)", (unsigned long long)n, max_norm,
             graph >= 0 ? " (graph)" : "");
    if (max_norm / (nc + 1e-6f) >= 1.0f && max_norm / (ng + 1e-6f) >= 1.0f) {
        expect_exact(what, rg, rc, n + 1, 4);
    } else {
        double *b = malloc((n + 1) * sizeof *b);
        for (uint64_t i = 0; i < n; i++) b[i] = fabs((double)h[i]) * (rel + 4.0 * U) + 1e-37;
        b[n] = 0; /* the guard is never touched */
        expect_close(what, rg, rc, n + 1, b, 0, 0);
        free(b);
    }
    free(h), free(rc), free(rg);
    reset();
}

static void test_clip(void) {
    printf("gradient clipping (adam) vs clip_grad_norm\n");
    /* Norms: about sqrt(n / 3) for uniform [-1, 1] entries. */
    clip_case(1, 10.0f, -1);
    clip_case(1000, 1.0f, -1);
    clip_case(1000, 100.0f, -1);
    clip_case((1u << 20) + 3, 10.0f, -1);
    clip_case(1686180, 10.0f, -1); /* the Nature DQN's parameter count */
    clip_case(0, 1.0f, -1);
    clip_case(100003, 5.0f, 0);
}

/* ---- convolution ---- */

/* The conv ops with their operands in a call's order. */
static int conv_fwd(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b, int act,
                    void *ws, uint64_t ws_bytes) {
    rlt_conv_fwd d = {.slot = slot, .y = y, .x = x, .w = w, .b = b, .act = act, .ws = ws, .ws_bytes = ws_bytes};
    return bk->ops->conv_forward(bk, &d);
}

static int conv_bwd(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                    const void *x, const void *w, int act, void *ws, uint64_t ws_bytes) {
    rlt_conv_bwd d = {.slot = slot, .dx = dx, .dw = dw, .db = db, .dy = dy, .y = y, .x = x, .w = w, .act = act, .ws = ws,
                      .ws_bytes = ws_bytes};
    return bk->ops->conv_backward(bk, &d);
}

typedef struct conv_dims {
    rlt_conv_shape s;
    int32_t oh, ow;
    size_t nx, nw, ny;
} conv_dims;

static conv_dims dims_of(rlt_conv_shape s) {
    conv_dims d = {.s = s};
    d.oh = rlt_conv_out_dim(s.h, s.kh, s.stride, s.pad);
    d.ow = rlt_conv_out_dim(s.w, s.kw, s.stride, s.pad);
    d.nx = (size_t)s.n * s.c * s.h * s.w;
    d.nw = (size_t)s.k * s.c * s.kh * s.kw;
    d.ny = (size_t)s.n * s.k * d.oh * d.ow;
    return d;
}

/* Runs `body` once for every product w[wi_] * x[xi_] that contributes to y[yi_] (taps that fall on the
 * zero padding are skipped): the bounds below sum |products| grouped by one of the three indices. */
#define FOR_EACH_TAP(d, body)                                                                                \
    for (int n_ = 0; n_ < (d)->s.n; n_++)                                                                     \
        for (int ko_ = 0; ko_ < (d)->s.k; ko_++)                                                              \
            for (int oy_ = 0; oy_ < (d)->oh; oy_++)                                                           \
                for (int ox_ = 0; ox_ < (d)->ow; ox_++) {                                                     \
                    size_t yi_ = (((size_t)n_ * (d)->s.k + ko_) * (d)->oh + oy_) * (d)->ow + ox_;             \
                    for (int ci_ = 0; ci_ < (d)->s.c; ci_++)                                                  \
                        for (int i_ = 0; i_ < (d)->s.kh; i_++) {                                              \
                            int iy_ = oy_ * (d)->s.stride - (d)->s.pad + i_;                                  \
                            if (iy_ < 0 || iy_ >= (d)->s.h) continue;                                         \
                            for (int j_ = 0; j_ < (d)->s.kw; j_++) {                                          \
                                int ix_ = ox_ * (d)->s.stride - (d)->s.pad + j_;                              \
                                if (ix_ < 0 || ix_ >= (d)->s.w) continue;                                     \
                                size_t xi_ = (((size_t)n_ * (d)->s.c + ci_) * (d)->s.h + iy_) * (d)->s.w + ix_; \
                                size_t wi_ = (((size_t)ko_ * (d)->s.c + ci_) * (d)->s.kh + i_) * (d)->s.kw + j_; \
                                body;                                                                         \
                            }                                                                                 \
                        }                                                                                     \
                }

/* One slot's forward and backward on both backends against the bounds above; tf32: the GPU under precision: tf32
 * (its products on TF32 tensor cores), against the TF32 bounds, and then checked to differ from its fp32 run. */
static void test_conv_case(int32_t slot, rlt_conv_shape s, const char *label, int tf32) {
    conv_dims d = dims_of(s);
    uint64_t wsc = 0, wsg = 0;
    int r1 = P.cpu.ops->conv_prepare(&P.cpu, slot, &s, &wsc);
    int r2 = P.gpu.ops->conv_prepare(&P.gpu, slot, &s, &wsg);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "%s: conv_prepare: cpu %d gpu %d (%s)", label, r1, r2, P.egpu.msg);
    if (r1 != RLT_OK || r2 != RLT_OK) return;
    printf("%s: n%d c%d %dx%d -> k%d %dx%d/%d pad %d -> %dx%d; workspace cpu %llu, gpu %llu bytes\n", label, s.n, s.c,
           s.h, s.w, s.k, s.kh, s.kw, s.stride, s.pad, d.oh, d.ow, (unsigned long long)wsc, (unsigned long long)wsg);
    uint64_t wsb = wsc > wsg ? wsc : wsg;
    float *x = malloc(d.nx * 4), *w = malloc(d.nw * 4), *b = malloc((size_t)s.k * 4);
    float *yc = malloc(d.ny * 4), *yg = malloc(d.ny * 4), *dy = malloc(d.ny * 4), *dy_pre = malloc(d.ny * 4);
    float *dw0 = malloc(d.nw * 4), *db0 = malloc((size_t)s.k * 4);
    float *dxc = malloc(d.nx * 4), *dxg = malloc(d.nx * 4), *dwc = malloc(d.nw * 4), *dwg = malloc(d.nw * 4);
    float *dbc = malloc((size_t)s.k * 4), *dbg = malloc((size_t)s.k * 4);
    double *by = calloc(d.ny, sizeof(double)), *bw = calloc(d.nw, sizeof(double)), *bx = calloc(d.nx, sizeof(double));
    double *bb = calloc((size_t)s.k, sizeof(double));
    /* Inputs like a network's: pixels in [0, 1], weights within PyTorch's default init bound. */
    float bound = 1.0f / sqrtf((float)(s.c * s.kh * s.kw));
    rnd_fill(x, d.nx, 0, 1);
    rnd_fill(w, d.nw, -bound, bound);
    rnd_fill(b, (size_t)s.k, -bound, bound);
    void *cx, *gx, *cw, *gw, *cb, *gb, *cy, *gy, *cdy, *gdy, *cdx, *gdx, *cdw, *gdw, *cdb, *gdb, *cws, *gws;
    take(d.nx * 4, &cx, &gx);
    take(d.nw * 4, &cw, &gw);
    take((size_t)s.k * 4, &cb, &gb);
    take(d.ny * 4, &cy, &gy);
    take(d.ny * 4, &cdy, &gdy);
    take(d.nx * 4, &cdx, &gdx);
    take(d.nw * 4, &cdw, &gdw);
    take((size_t)s.k * 4, &cdb, &gdb);
    take(wsb ? wsb : 256, &cws, &gws);
    put(cx, gx, x, d.nx * 4);
    put(cw, gw, w, d.nw * 4);
    put(cb, gb, b, (size_t)s.k * 4);
    char what[128];
    int K = s.c * s.kh * s.kw;

    if (tf32) set_tf32(1);
    const double rel_tf32 = tf32 ? PAIR_TF32_REL : 0.0;
    /* Forward, without and with ReLU. Bound: 2 gamma(K + 2) (|b| + sum |w x|), plus PAIR_TF32_REL sum |w x| under
     * tf32. */
    for (size_t i = 0; i < d.ny; i++) by[i] = 0;
    FOR_EACH_TAP(&d, by[yi_] += fabs((double)w[wi_] * x[xi_]));
    for (size_t i = 0; i < d.ny; i++) {
        int ko = (int)((i / ((size_t)d.oh * d.ow)) % (size_t)s.k);
        by[i] = (2.0 * gamma_n(K + 2) + rel_tf32) * (by[i] + fabs(b[ko])) + 1e-37;
    }
    static const int acts[2] = {RLT_ACT_NONE, RLT_ACT_RELU};
    for (int a = 0; a < 2; a++) {
        r1 = conv_fwd(&P.cpu, slot, cy, cx, cw, cb, acts[a], cws, wsb);
        r2 = conv_fwd(&P.gpu, slot, gy, gx, gw, gb, acts[a], gws, wsb);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "%s forward: cpu %d gpu %d (%s)", label, r1, r2, P.egpu.msg);
        fetch(yc, yg, cy, gy, d.ny * 4);
        snprintf(what, sizeof what, "%s%s forward act=%s", label, tf32 ? " (tf32)" : "", acts[a] ? "relu" : "none");
        expect_close(what, yg, yc, d.ny, by, 0, 0);
    }
    /* The ReLU forward's CPU output now sits in yc: both backwards run through the same y. */
    put(cy, gy, yc, d.ny * 4);

    /* Backward through ReLU: dw and db accumulate onto random values, dx is overwritten. */
    rnd_fill(dy, d.ny, -1, 1);
    rnd_fill(dw0, d.nw, -1, 1);
    rnd_fill(db0, (size_t)s.k, -1, 1);
    for (size_t i = 0; i < d.ny; i++) dy_pre[i] = yc[i] > 0.0f ? dy[i] : 0.0f;
    put(cdy, gdy, dy, d.ny * 4);
    put(cdw, gdw, dw0, d.nw * 4);
    put(cdb, gdb, db0, (size_t)s.k * 4);
    rnd_fill(dxc, d.nx, -1, 1);
    put(cdx, gdx, dxc, d.nx * 4);
    r1 = conv_bwd(&P.cpu, slot, cdx, cdw, cdb, cdy, cy, cx, cw, RLT_ACT_RELU, cws, wsb);
    r2 = conv_bwd(&P.gpu, slot, gdx, gdw, gdb, gdy, gy, gx, gw, RLT_ACT_RELU, gws, wsb);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "%s backward: cpu %d gpu %d (%s)", label, r1, r2, P.egpu.msg);
    FOR_EACH_TAP(&d, {
        double dyv = fabs((double)dy_pre[yi_]);
        bw[wi_] += dyv * fabs((double)x[xi_]);
        bx[xi_] += dyv * fabs((double)w[wi_]);
    });
    double m_w = (double)s.n * d.oh * d.ow + 2;
    for (size_t i = 0; i < d.nw; i++) bw[i] = (2.0 * gamma_n(m_w + 1) + rel_tf32) * (bw[i] + fabs(dw0[i])) + 1e-37;
    for (size_t i = 0; i < d.nx; i++) bx[i] = (2.0 * gamma_n((double)s.k * s.kh * s.kw + 2) + rel_tf32) * bx[i] + 1e-37;
    for (int ko = 0; ko < s.k; ko++) {
        double acc = fabs(db0[ko]);
        for (int n = 0; n < s.n; n++)
            for (int p = 0; p < d.oh * d.ow; p++) acc += fabs((double)dy_pre[((size_t)n * s.k + ko) * d.oh * d.ow + p]);
        bb[ko] = 2.0 * gamma_n(m_w + 1) * acc + 1e-37;
    }
    float *dyc = malloc(d.ny * 4), *dyg = malloc(d.ny * 4);
    fetch(dyc, dyg, cdy, gdy, d.ny * 4);
    snprintf(what, sizeof what, "%s%s backward: dy through relu'", label, tf32 ? " (tf32)" : "");
    expect_exact(what, dyg, dyc, d.ny, 4);
    fetch(dwc, dwg, cdw, gdw, d.nw * 4);
    snprintf(what, sizeof what, "%s%s backward: dw (accumulated)", label, tf32 ? " (tf32)" : "");
    expect_close(what, dwg, dwc, d.nw, bw, 0, 0);
    fetch(dbc, dbg, cdb, gdb, (size_t)s.k * 4);
    snprintf(what, sizeof what, "%s%s backward: db (accumulated)", label, tf32 ? " (tf32)" : "");
    expect_close(what, dbg, dbc, (size_t)s.k, bb, 0, 0);
    fetch(dxc, dxg, cdx, gdx, d.nx * 4);
    snprintf(what, sizeof what, "%s%s backward: dx", label, tf32 ? " (tf32)" : "");
    expect_close(what, dxg, dxc, d.nx, bx, 0, 0);

    /* Determinism: a GPU forward + backward (through the GPU's own y), run twice from the same inputs, gives
     * the same bits; so does the same pair captured in a graph and replayed. */
    float *ya = malloc(d.ny * 4), *dwa = malloc(d.nw * 4), *dxa = malloc(d.nx * 4), *dba = malloc((size_t)s.k * 4);
    float *y2 = malloc(d.ny * 4), *dw2 = malloc(d.nw * 4), *dx2 = malloc(d.nx * 4), *db2 = malloc((size_t)s.k * 4);
    for (int run = 0; run < 3; run++) {
        put(cdy, gdy, dy, d.ny * 4);
        put(cdw, gdw, dw0, d.nw * 4);
        put(cdb, gdb, db0, (size_t)s.k * 4);
        if (run < 2) {
            die_on(conv_fwd(&P.gpu, slot, gy, gx, gw, gb, RLT_ACT_RELU, gws, wsb), &P.egpu, "forward");
            die_on(conv_bwd(&P.gpu, slot, gdx, gdw, gdb, gdy, gy, gx, gw, RLT_ACT_RELU, gws, wsb),
                   &P.egpu, "backward");
        } else {
            int rc = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 1);
            CHECK(rc == RLT_OK, "%s: graph_begin: %s", label, P.egpu.msg);
            if (rc != RLT_OK) break;
            int f1 = conv_fwd(&P.gpu, slot, gy, gx, gw, gb, RLT_ACT_RELU, gws, wsb);
            int f2 = conv_bwd(&P.gpu, slot, gdx, gdw, gdb, gdy, gy, gx, gw, RLT_ACT_RELU, gws, wsb);
            rc = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 1);
            CHECK(f1 == RLT_OK && f2 == RLT_OK && rc == RLT_OK, "%s: capture of the conv ops: %d %d %d (%s)", label, f1,
                  f2, rc, P.egpu.msg);
            if (rc != RLT_OK) break;
            /* The capture recorded the work without running it: reload the inputs, then replay. */
            put(cdy, gdy, dy, d.ny * 4);
            put(cdw, gdw, dw0, d.nw * 4);
            put(cdb, gdb, db0, (size_t)s.k * 4);
            die_on(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 1), &P.egpu, "graph_launch");
        }
        float *yo = run ? y2 : ya, *dwo = run ? dw2 : dwa, *dxo = run ? dx2 : dxa, *dbo = run ? db2 : dba;
        fetch_gpu(yo, gy, d.ny * 4);
        fetch_gpu(dwo, gdw, d.nw * 4);
        fetch_gpu(dxo, gdx, d.nx * 4);
        fetch_gpu(dbo, gdb, (size_t)s.k * 4);
        if (run == 0) continue;
        const char *how = run == 1 ? (tf32 ? "GPU run twice (tf32)" : "GPU run twice")
                                   : (tf32 ? "graph replay vs eager (tf32)" : "graph replay vs eager");
        snprintf(what, sizeof what, "%s %s: y", label, how);
        expect_exact(what, y2, ya, d.ny, 4);
        snprintf(what, sizeof what, "%s %s: dw", label, how);
        expect_exact(what, dw2, dwa, d.nw, 4);
        snprintf(what, sizeof what, "%s %s: db", label, how);
        expect_exact(what, db2, dba, (size_t)s.k, 4);
        snprintf(what, sizeof what, "%s %s: dx", label, how);
        expect_exact(what, dx2, dxa, d.nx, 4);
    }

    if (tf32) {
        /* TF32 engaged: the same forward and backward in fp32 (ya, dwa, dxa hold the tf32 run's) differ in at least
         * 90% of the forward's nonzero outputs and half of dw (a few land on the same float by chance) where those
         * are our implicit GEMMs' (K <= 2048). The library's products (dx's; y and dw past 2,048 taps) may stay on
         * fp32 kernels when they are tiny: printed only. */
        set_tf32(0);
        put(cdy, gdy, dy, d.ny * 4);
        put(cdw, gdw, dw0, d.nw * 4);
        die_on(conv_fwd(&P.gpu, slot, gy, gx, gw, gb, RLT_ACT_RELU, gws, wsb), &P.egpu, "forward (fp32)");
        die_on(conv_bwd(&P.gpu, slot, gdx, gdw, gdb, gdy, gy, gx, gw, RLT_ACT_RELU, gws, wsb), &P.egpu, "backward (fp32)");
        fetch_gpu(y2, gy, d.ny * 4);
        fetch_gpu(dw2, gdw, d.nw * 4);
        fetch_gpu(dx2, gdx, d.nx * 4);
        size_t ny_on = 0, ny_diff = 0, nw_diff = 0, nx_diff = 0;
        for (size_t i = 0; i < d.ny; i++)
            if (y2[i] != 0.0f) ny_on++, ny_diff += memcmp(&y2[i], &ya[i], 4) != 0;
        for (size_t i = 0; i < d.nw; i++) nw_diff += memcmp(&dw2[i], &dwa[i], 4) != 0;
        for (size_t i = 0; i < d.nx; i++) nx_diff += memcmp(&dx2[i], &dxa[i], 4) != 0;
        printf("  %s: tf32 against fp32 on the GPU: y %zu of %zu nonzero outputs differ, dw %zu of %zu, dx %zu of %zu\n",
               label, ny_diff, ny_on, nw_diff, d.nw, nx_diff, d.nx);
        CHECK(K > 2048 || (ny_diff * 10 >= ny_on * 9 && ny_on > 0 && nw_diff * 2 >= d.nw),
              "%s: tf32 engaged: y %zu of %zu, dw %zu of %zu differ from fp32", label, ny_diff, ny_on, nw_diff, d.nw);
    }

    free(x), free(w), free(b), free(yc), free(yg), free(dy), free(dy_pre), free(dw0), free(db0);
    free(dxc), free(dxg), free(dwc), free(dwg), free(dbc), free(dbg), free(by), free(bw), free(bx), free(bb);
    free(dyc), free(dyg), free(y2), free(dw2), free(dx2), free(db2), free(ya), free(dwa), free(dxa), free(dba);
    reset();
}

/* The shapes, each in fp32 and then under precision: tf32 (tf32 = 1; every implicit-GEMM tile shape and the
 * explicit path have a tf32 case). */
static void test_conv(void) {
    for (int tf32 = 0; tf32 < 2; tf32++) {
        /* Nature DQN (Mnih et al. 2015), batch 32: 4x84x84 -> 32@8x8/4 -> 64@4x4/2 -> 64@3x3/1. */
        test_conv_case(0, (rlt_conv_shape){32, 4, 84, 84, 32, 8, 8, 4, 0, 0}, "nature conv1", tf32);
        test_conv_case(1, (rlt_conv_shape){32, 32, 20, 20, 64, 4, 4, 2, 0, 0}, "nature conv2", tf32);
        test_conv_case(2, (rlt_conv_shape){32, 64, 9, 9, 64, 3, 3, 1, 0, 0}, "nature conv3", tf32);
        /* MinAtar (Young and Tian 2019): 4x10x10 -> 16@3x3/1. */
        test_conv_case(3, (rlt_conv_shape){32, 4, 10, 10, 16, 3, 3, 1, 0, 0}, "minatar conv", tf32);
        /* Padding, odd sizes, a rectangular kernel and stride 2. */
        test_conv_case(4, (rlt_conv_shape){3, 3, 7, 9, 5, 3, 2, 2, 1, 0}, "odd padded conv", tf32);
        /* More channels than one tile of the implicit GEMMs (80 outputs, 630 taps), padding 1. */
        test_conv_case(5, (rlt_conv_shape){2, 70, 6, 6, 80, 3, 3, 1, 1, 0}, "wide padded conv", tf32);
        /* Nature conv1 at batch 128: the weight gradient's pixel chunks reach their cap (conv_igemm.cu); 4 x 4
         * forward tiles. */
        test_conv_case(7, (rlt_conv_shape){128, 4, 84, 84, 32, 8, 8, 4, 0, 0}, "nature conv1, batch 128", tf32);
        /* A filter 9 wide with padding 3 at stride 3, 5 outputs: taps in the padding on every side, a ragged last
         * tile of taps and of pixels. */
        test_conv_case(8, (rlt_conv_shape){3, 3, 17, 23, 5, 5, 9, 3, 3, 0}, "wide filter, padded", tf32);
        /* Taps in aligned fours (filter width, stride, padding and input width multiples of 4: under tf32 the
         * forward copies them 16 bytes at a time), with whole fours in the padding (every output reaches the input
         * too, so every one has products that TF32 rounds) and a ragged last pixel tile. */
        test_conv_case(13, (rlt_conv_shape){3, 2, 12, 16, 8, 8, 8, 4, 4, 0}, "aligned taps, padding 4", tf32);
        /* 2,160 taps, past the implicit GEMMs' tap table: the explicit path (im2col and library products). */
        test_conv_case(12, (rlt_conv_shape){2, 240, 5, 5, 8, 3, 3, 1, 1, 0}, "explicit path (2160 taps)", tf32);
    }
}

/* Seed batching (seed_batch): Z agents, agent z's buffers CONV_SEED_STRIDE bytes apart from agent z - 1's, run one
 * batched forward and backward of the slot's convolution; each agent's output, dy through relu', dw and db must equal
 * that agent's own forward and backward run alone on the GPU bit for bit (the same kernels and block sums, grid z the
 * agent), and its dx must agree within the fp32 bound of its dcol product (a batched library product, summed in the
 * library's order). */
static void test_conv_seeds_case(int32_t slot, rlt_conv_shape s, const char *label, int tf32) {
    enum { Z = 8 };
    conv_dims d = dims_of(s);
    uint64_t ws = 0;
    if (tf32) set_tf32(1); /* both runs on TF32 tensor cores: the same kernels, so the same bits again */
    CHECK(P.gpu.ops->conv_prepare(&P.gpu, slot, &s, &ws) == RLT_OK, "%s: conv_prepare: %s", label, P.egpu.msg);
    const uint64_t sz[9] = {d.nx * 4, d.nw * 4, (uint64_t)s.k * 4, d.ny * 4, d.ny * 4, d.nx * 4, d.nw * 4,
                            (uint64_t)s.k * 4, ws ? ws : 256};
    uint64_t off[9], per = 0;
    for (int i = 0; i < 9; i++) off[i] = per, per += (sz[i] + 255) & ~255ull;
    /* two sets of Z agents: [0] run batched, [1] each alone; same inputs */
    void *cb[2], *gb[2];
    take(per * Z, &cb[0], &gb[0]);
    take(per * Z, &cb[1], &gb[1]);
    float *x = malloc(d.nx * 4), *w = malloc(d.nw * 4), *b = malloc((size_t)s.k * 4), *dy = malloc(d.ny * 4);
    float *dw0 = malloc(d.nw * 4), *db0 = malloc((size_t)s.k * 4), *ha = malloc(d.nx * 4 + d.ny * 4 + d.nw * 4),
          *hb = malloc(d.nx * 4 + d.ny * 4 + d.nw * 4);
    double *bx = malloc(d.nx * sizeof(double));
    const float bound = 1.0f / sqrtf((float)(s.c * s.kh * s.kw));
    for (int z = 0; z < Z; z++) {
        rnd_fill(x, d.nx, 0, 1);
        rnd_fill(w, d.nw, -bound, bound);
        rnd_fill(b, (size_t)s.k, -bound, bound);
        rnd_fill(dy, d.ny, -1, 1);
        rnd_fill(dw0, d.nw, -1, 1);
        rnd_fill(db0, (size_t)s.k, -1, 1);
        const float *src[8] = {x, w, b, NULL, dy, NULL, dw0, db0};
        for (int set = 0; set < 2; set++)
            for (int i = 0; i < 8; i++)
                if (src[i]) put((char *)cb[set] + z * per + off[i], (char *)gb[set] + z * per + off[i], src[i], sz[i]);
    }
    /* each alone */
    int rc = RLT_OK;
    for (int z = 0; z < Z && rc == RLT_OK; z++) {
        char *g = (char *)gb[1] + z * per;
        rc = conv_fwd(&P.gpu, slot, g + off[3], g + off[0], g + off[1], (const float *)(g + off[2]), RLT_ACT_RELU,
                      g + off[8], ws);
        if (rc == RLT_OK)
            rc = conv_bwd(&P.gpu, slot, g + off[5], (float *)(g + off[6]), (float *)(g + off[7]), g + off[4], g + off[3],
                          g + off[0], g + off[1], RLT_ACT_RELU, g + off[8], ws);
    }
    CHECK(rc == RLT_OK, "%s: each agent alone: %s", label, P.egpu.msg);
    /* batched */
    void *cdl, *gdl, *ck, *gk;
    take(Z * sizeof(int64_t), &cdl, &gdl);
    take(Z * sizeof(uint64_t), &ck, &gk);
    int64_t delta[Z];
    uint64_t seed[Z];
    for (int z = 0; z < Z; z++) delta[z] = (int64_t)(z * per), seed[z] = (uint64_t)z + 1;
    put(cdl, gdl, delta, sizeof delta);
    put(ck, gk, seed, sizeof seed);
    char *g = gb[0];
    int r0 = P.gpu.ops->seed_batch(&P.gpu, &(rlt_seeds_desc){.n = Z, .delta = gdl, .seed = gk, .delta_host = delta});
    int r1 = r0 == RLT_OK ? conv_fwd(&P.gpu, slot, g + off[3], g + off[0], g + off[1], (const float *)(g + off[2]),
                                     RLT_ACT_RELU, g + off[8], ws) : r0;
    int r2 = r1 == RLT_OK ? conv_bwd(&P.gpu, slot, g + off[5], (float *)(g + off[6]), (float *)(g + off[7]), g + off[4],
                                     g + off[3], g + off[0], g + off[1], RLT_ACT_RELU, g + off[8], ws) : r1;
    int r3 = P.gpu.ops->seed_batch(&P.gpu, NULL);
    CHECK(r2 == RLT_OK && r3 == RLT_OK, "%s: %d agents batched: forward %d, backward %d, end %d (%s)", label, Z, r1, r2,
          r3, P.egpu.msg);
    char what[128];
    for (int z = 0; z < Z; z++) {
        const char *names[5] = {"y", "dy through relu'", "dw (accumulated)", "db (accumulated)", "dx"};
        const int idx[5] = {3, 4, 6, 7, 5};
        for (int i = 0; i < 5; i++) {
            const uint64_t n = sz[idx[i]];
            fetch(hb, ha, (char *)cb[1] + z * per + off[idx[i]], (char *)gb[0] + z * per + off[idx[i]], n);
            float *alone = malloc(n);
            fetch(hb, alone, (char *)cb[1] + z * per + off[idx[i]], (char *)gb[1] + z * per + off[idx[i]], n);
            snprintf(what, sizeof what, "%s%s, %d agents batched: agent %d's %s", label, tf32 ? " (tf32)" : "", Z, z,
                     names[i]);
            if (i < 4) {
                expect_exact(what, ha, alone, n / 4, 4);
            } else {
                /* dx: 2 gamma(k kh kw + 2) (plus PAIR_TF32_REL under tf32: dcol is a library product, batched or not)
                 * times the sum of |dy' w| over the taps that reach the pixel, as in test_conv_case; dy' and w read
                 * back from this agent's buffers */
                float *dyp = malloc(d.ny * 4), *wz = malloc(d.nw * 4);
                fetch(hb, dyp, (char *)cb[1] + z * per + off[4], (char *)gb[1] + z * per + off[4], d.ny * 4);
                fetch(hb, wz, (char *)cb[1] + z * per + off[1], (char *)gb[1] + z * per + off[1], d.nw * 4);
                for (size_t e = 0; e < d.nx; e++) bx[e] = 0;
                FOR_EACH_TAP(&d, bx[xi_] += fabs((double)dyp[yi_]) * fabs((double)wz[wi_]));
                const double rel = 2.0 * gamma_n((double)s.k * s.kh * s.kw + 2) + (tf32 ? PAIR_TF32_REL : 0.0);
                for (size_t e = 0; e < d.nx; e++) bx[e] = rel * bx[e] + 1e-37;
                expect_close(what, ha, alone, d.nx, bx, 0, 0);
                free(dyp), free(wz);
            }
            free(alone);
        }
    }
    printf("%s%s: %d agents batched, each as alone (y, dy, dw, db exact; dx within its bound)\n", label,
           tf32 ? " (tf32)" : "", Z);
    if (tf32) set_tf32(0);
    free(x), free(w), free(b), free(dy), free(dw0), free(db0), free(ha), free(hb), free(bx);
    reset();
}

static void test_conv_seeds(void) {
    /* Nature conv1 at batch 4 (the forward's taps split in chunks, summed by a second kernel), conv2 and the MinAtar
     * layer at batch 8. */
    for (int tf32 = 0; tf32 < 2; tf32++) { /* fp32, then on TF32 tensor cores (conv1 with its 16-byte input tiles) */
        test_conv_seeds_case(9, (rlt_conv_shape){4, 4, 84, 84, 32, 8, 8, 4, 0, 0}, "nature conv1, batch 4", tf32);
        test_conv_seeds_case(10, (rlt_conv_shape){8, 32, 20, 20, 64, 4, 4, 2, 0, 0}, "nature conv2, batch 8", tf32);
        test_conv_seeds_case(11, (rlt_conv_shape){8, 4, 10, 10, 16, 3, 3, 1, 0, 0}, "minatar conv, batch 8", tf32);
    }
}

static void test_errors(void) {
    printf("errors\n");
    void *ca, *ga;
    take(4096, &ca, &ga);
    rlt_err_clear(&P.egpu);
    uint64_t ws = 0;
    int rc = conv_fwd(&P.gpu, 6, ga, ga, ga, NULL, RLT_ACT_NONE, ga, 4096);
    CHECK(rc == RLT_ESTATE, "forward on an unprepared slot: %d (%s)", rc, P.egpu.msg);
    rlt_conv_shape bad = {1, 1, 3, 3, 1, 5, 5, 1, 0, 0};
    rc = P.gpu.ops->conv_prepare(&P.gpu, 6, &bad, &ws);
    CHECK(rc == RLT_EINVAL, "a kernel larger than the input: %d", rc);
    rc = P.gpu.ops->conv_prepare(&P.gpu, RLT_BACKEND_MAX_CONVS, &bad, &ws);
    CHECK(rc == RLT_EINVAL, "slot out of range: %d", rc);
    rlt_conv_shape ok = {2, 1, 5, 5, 2, 3, 3, 1, 0, 0};
    rc = P.gpu.ops->conv_prepare(&P.gpu, 6, &ok, &ws);
    CHECK(rc == RLT_OK, "prepare: %s", P.egpu.msg);
    rc = conv_fwd(&P.gpu, 6, ga, ga, ga, NULL, 7, ga, 4096);
    CHECK(rc == RLT_EINVAL, "unknown activation: %d", rc);
    rc = conv_fwd(&P.gpu, 6, ga, ga, ga, NULL, RLT_ACT_NONE, (unsigned char *)ga + 8, 4096);
    CHECK(rc == RLT_EINVAL || ws == 0, "misaligned workspace: %d", rc);
    rlt_q_loss ql = {.y = ga, .dq = ga, .lddq = 2, .q = ga, .ldq = 3, .act = ga, .r = ga, .term = ga, .q_next_target = ga,
                     .ldqn = 3, .n = 4, .n_act = 3, .gamma = 0.99f, .huber_delta = 1.0f, .grad_scale = 1.0f};
    rc = P.gpu.ops->dqn_loss(&P.gpu, &ql);
    CHECK(rc == RLT_EINVAL, "dqn_loss lddq < n_act: %d", rc);
    ql.lddq = 3, ql.ldqn = 2;
    rc = P.gpu.ops->dqn_loss(&P.gpu, &ql);
    CHECK(rc == RLT_EINVAL, "dqn_loss ldqn < n_act: %d", rc);
    rlt_adam_step st = {.p = ga, .g = ga, .m = ga, .v = ga, .n = 4, .step = ga, .max_grad_norm = 1.0f};
    rc = P.gpu.ops->adam(&P.gpu, &st);
    CHECK(rc == RLT_EINVAL, "adam with clipping but no norm: %d", rc);
    CHECK(P.gpu.ops->sync(&P.gpu) == RLT_OK, "sync after rejected ops: %s", P.egpu.msg);
    reset();
}

int main(void) {
    setenv("RLT_CUDA_SEEDS_CONV", "1", 1); /* test_conv_seeds: convolutions batched over seeds, an opt-in */
    pair_open(ARENA_BYTES);
    printf("device %s: context_bytes %.1f MiB\n", P.gpu.device_name, P.gpu.context_bytes / 1048576.0);

    test_gather_u8();
    test_clip();
    test_conv();
    test_conv_seeds();
    test_errors();
    pair_close();
    return test_summary("gpu_dqn_parity");
}
