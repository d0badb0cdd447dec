/* test_dense.c: the CPU backend's fast dense-layer kernels (kernels/cpu/dense_kernel.h, every instruction set
 * this CPU runs) against the reference ops (CBLAS GEMM, then bias_act / act_grad / bias_grad: fused.c) on
 * random shapes, edge sizes included: 0, 1 and a few rows, widths below, at and just past a vector and a
 * register tile, inputs narrower than a vector (the transposed dW path), strided rows, every activation,
 * beta 0, 1 and 0.5. Also: results are the same bits when repeated, the kernels touch nothing outside
 * the outputs' rows, the adam op's one-pass Adam + Polyak matches the plain Adam step then polyak, and two
 * threads (cpu.threads: 2, ops split with the worker) give exactly one thread's bits.
 *
 * Tolerance. Both sides compute each output as a sum of k products in fp32 in different orders (the
 * reference through OpenBLAS, without FMA; the fast path one FMA chain per element). Each side's error is
 * at most gamma_k * sum_p |a_p b_p| with gamma_k ~ k u (u = 2^-24, Higham, Accuracy and Stability, 3.1),
 * so they differ by at most 2 k u sum|a b|. We allow 2 (k + 4) u sum|a b| + 1e-30: the +4 covers the bias
 * add, the beta term and the activation (ReLU and tanh are 1-Lipschitz; tanhf itself is within an ulp or
 * two, covered by the 4 u |y| term below; the act' factor 1 - y^2 is computed from identical inputs).
 * sum |a b| is computed in double from the same inputs. db is the reference's own loop: exact. */
#include <string.h>

#include "harness.h"
#include "kernels/cpu/cpu_ops.h"
#include "mem.h"

static rlt_err err;

static uint32_t lcg_state = 12345u;
static float frand(void) { /* uniform in [-1, 1) */
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)(lcg_state >> 8) / 8388608.0f - 1.0f;
}
static int irand(int n) {
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (int)((lcg_state >> 8) % (uint32_t)n);
}

#define U 5.9604645e-8 /* 2^-24 */

typedef struct bufs {
    float *x, *W, *b, *y_ref, *y_fast, *dy, *dW_ref, *dW_fast, *db_ref, *db_fast, *dx_ref, *dx_fast;
} bufs;

/* The backend's dense-layer ops with their operands in a call's order. */
static int lin_fwd(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx, const float *W,
                   const float *b, float *y, int32_t ldy, int32_t act) {
    rlt_linear_fwd d = {.rows = rows, .fi = fi, .fo = fo, .x = x, .ldx = ldx, .W = W, .b = b, .y = y, .ldy = ldy,
                        .act = act};
    return bk->ops->linear_forward(bk, &d);
}

static int lin_bwd(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy, const float *x,
                   int32_t ldx, int32_t act_x, const float *W, float *dW, float *db, float beta, float *dx,
                   int32_t lddx) {
    rlt_linear_bwd d = {.rows = rows, .fi = fi, .fo = fo, .dy = dy, .lddy = lddy, .x = x, .ldx = ldx, .act_x = act_x,
                        .W = W, .dW = dW, .db = db, .beta = beta, .dx = dx, .lddx = lddx};
    return bk->ops->linear_backward(bk, &d);
}

/* Canary around every output: the kernels must not write past their rows or columns. */
#define CANARY 1234.5f

static int check_close(const float *got, const float *want, const double *bound, int64_t n, const char *what) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= bound[i]) || isnan(got[i])) {
            if (!bad)
                fprintf(stderr, "%s: element %lld got %.9g want %.9g (bound %.3g)\n", what, (long long)i, got[i],
                        want[i], bound[i]);
            bad++;
        }
    }
    return bad;
}

static void one_case(rlt_backend *ref, rlt_backend *fast, int32_t rows, int32_t fi, int32_t fo, int32_t act,
                     float beta, int strided) {
    char what[160];
    snprintf(what, sizeof what, "%s rows %d fi %d fo %d act %d beta %g ld+%d",
             ((cpu_impl *)fast->impl)->dense->name, rows, fi, fo, act, beta, strided);
    int32_t ldx = fi + strided, ldy = fo + strided;
    int64_t nx = (int64_t)(rows + 1) * ldx, ny = (int64_t)(rows + 1) * ldy, nw = (int64_t)fo * fi;
    float *x = rlt_mem_alloc(nx * 4, 64), *W = rlt_mem_alloc((nw + 1) * 4, 64), *b = rlt_mem_alloc(fo * 4, 64);
    float *y1 = rlt_mem_alloc(ny * 4, 64), *y2 = rlt_mem_alloc(ny * 4, 64), *dy = rlt_mem_alloc(ny * 4, 64);
    float *dW1 = rlt_mem_alloc((nw + 1) * 4, 64), *dW2 = rlt_mem_alloc((nw + 1) * 4, 64);
    float *db1 = rlt_mem_alloc((fo + 1) * 4, 64), *db2 = rlt_mem_alloc((fo + 1) * 4, 64);
    float *dx1 = rlt_mem_alloc(nx * 4, 64), *dx2 = rlt_mem_alloc(nx * 4, 64);
    double *bound = rlt_mem_alloc((size_t)(nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw)) * 8 + 8, 64);
    for (int64_t i = 0; i < nx; i++) x[i] = act == RLT_ACT_RELU && frand() < -0.5f ? 0.0f : frand();
    if (act == RLT_ACT_TANH)
        for (int64_t i = 0; i < nx; i++) x[i] *= 0.9f; /* an activation's output lies in (-1, 1) */
    for (int64_t i = 0; i < nw; i++) W[i] = frand() / sqrtf((float)fi);
    for (int32_t i = 0; i < fo; i++) b[i] = 0.1f * frand();
    for (int64_t i = 0; i < ny; i++) {
        dy[i] = frand();
        y1[i] = y2[i] = CANARY;
    }
    for (int64_t i = 0; i <= nw; i++) dW1[i] = dW2[i] = i < nw ? frand() : CANARY;
    for (int32_t i = 0; i <= fo; i++) db1[i] = db2[i] = i < fo ? frand() : CANARY;
    for (int64_t i = 0; i < nx; i++) dx1[i] = dx2[i] = CANARY;

    /* Forward. */
    CHECK(lin_fwd(ref, rows, fi, fo, x, ldx, W, b, y1, ldy, act) == RLT_OK, "%s: ref fwd", what);
    CHECK(lin_fwd(fast, rows, fi, fo, x, ldx, W, b, y2, ldy, act) == RLT_OK, "%s: fast fwd", what);
    for (int32_t r = 0; r <= rows; r++)
        for (int32_t o = 0; o < ldy; o++) {
            int64_t at = (int64_t)r * ldy + o;
            if (r == rows || o >= fo) {
                bound[at] = 0.0;
                continue;
            }
            double s = fabs(b[o]);
            for (int32_t i = 0; i < fi; i++) s += fabs((double)x[(int64_t)r * ldx + i] * W[(int64_t)o * fi + i]);
            bound[at] = 2.0 * (fi + 4) * U * s + 4.0 * U * fabs(y1[at]) + 1e-30;
        }
    CHECK(check_close(y2, y1, bound, ny, what) == 0, "%s: forward differs", what);

    /* Backward: dW (beta), db (beta), dx through act (x plays the previous layer's activation output). */
    CHECK(lin_bwd(ref, rows, fi, fo, dy, ldy, x, ldx, act, W, dW1, db1, beta, dx1, ldx) == RLT_OK,
          "%s: ref bwd", what);
    CHECK(lin_bwd(fast, rows, fi, fo, dy, ldy, x, ldx, act, W, dW2, db2, beta, dx2, ldx) == RLT_OK,
          "%s: fast bwd", what);
    for (int32_t o = 0; o < fo; o++)
        for (int32_t i = 0; i < fi; i++) {
            double s = fabs((double)beta * dW1[(int64_t)o * fi + i]) + 1.0; /* beta * old (old |.| <= 1) */
            for (int32_t r = 0; r < rows; r++) s += fabs((double)dy[(int64_t)r * ldy + o] * x[(int64_t)r * ldx + i]);
            bound[(int64_t)o * fi + i] = 2.0 * (rows + 4) * U * s + 1e-30;
        }
    bound[nw] = 0.0;
    CHECK(check_close(dW2, dW1, bound, nw + 1, what) == 0, "%s: dW differs", what);
    CHECK(memcmp(db1, db2, (fo + 1) * sizeof(float)) == 0, "%s: db differs (must be exact)", what);
    for (int32_t r = 0; r <= rows; r++)
        for (int32_t i = 0; i < ldx; i++) {
            int64_t at = (int64_t)r * ldx + i;
            if (r == rows || i >= fi) {
                bound[at] = 0.0;
                continue;
            }
            double s = 0.0;
            for (int32_t o = 0; o < fo; o++) s += fabs((double)dy[(int64_t)r * ldy + o] * W[(int64_t)o * fi + i]);
            bound[at] = 2.0 * (fo + 4) * U * s + 1e-30;
        }
    CHECK(check_close(dx2, dx1, bound, nx, what) == 0, "%s: dx differs", what);

    /* Repeatable: the same call gives the same bits. */
    memcpy(dx1, dx2, nx * 4);
    CHECK(lin_bwd(fast, rows, fi, fo, dy, ldy, x, ldx, act, W, NULL, NULL, beta, dx2, ldx) == RLT_OK,
          "%s: fast bwd again", what);
    CHECK(memcmp(dx1, dx2, nx * 4) == 0, "%s: dx not repeatable", what);
    memcpy(y1, y2, ny * 4);
    CHECK(lin_fwd(fast, rows, fi, fo, x, ldx, W, b, y2, ldy, act) == RLT_OK, "%s: fast fwd again",
          what);
    CHECK(memcmp(y1, y2, ny * 4) == 0, "%s: forward not repeatable", what);

    rlt_mem_free(x); rlt_mem_free(W); rlt_mem_free(b); rlt_mem_free(y1); rlt_mem_free(y2); rlt_mem_free(dy);
    rlt_mem_free(dW1); rlt_mem_free(dW2); rlt_mem_free(db1); rlt_mem_free(db2); rlt_mem_free(dx1);
    rlt_mem_free(dx2); rlt_mem_free(bound);
}

/* The optimiser op's one-pass Adam + Polyak against the plain Adam step then polyak (the oracles): m and v bit
 * for bit (no subnormals arise here, which the fast pass would flush to zero); p and the target within 8 ulp of the step plus 4 ulp of the value. The step differs by the way 1 / (sqrt(v) c + eps)
 * is formed: with AVX-512, reciprocal and reciprocal square root estimates (relative error 2^-14) each refined
 * by one Newton step, which leaves (3/2) 2^-28 plus the rounding of the step's ~4 operations, about 3 ulp
 * each; elsewhere one division instead of two (an ulp). p - step and the Polyak mix add an ulp of p. */
static void check_adam_polyak(rlt_backend *bk) {
    enum { N = 1000 };
    static float p1[N], p2[N], g[N], m1[N], m2[N], v1[N], v2[N], t1[N], t2[N];
    for (int i = 0; i < N; i++) {
        p1[i] = p2[i] = frand();
        t1[i] = t2[i] = frand();
        m1[i] = m2[i] = 0.0f;
        v1[i] = v2[i] = 0.0f;
    }
    rlt_adam_hp hp = {3e-4f, 0.9f, 0.999f, 1e-8f};
    int bad = 0;
    for (int64_t step = 1; step <= 20; step++) {
        for (int i = 0; i < N; i++) g[i] = i % 7 == 0 ? 0.0f : frand() * (float)(i % 5);
        float keep[N];
        memcpy(keep, p1, sizeof keep);
        CHECK(cpu_adam_plain(bk, p1, g, m1, v1, N, hp, &step) == RLT_OK && cpu_polyak(bk, t1, p1, N, 0.005f) == RLT_OK,
              "plain adam + polyak");
        rlt_adam_step st = {.p = p2, .g = g, .m = m2, .v = v2, .n = N, .hp = hp, .step = &step, .target = t2,
                            .tau = 0.005f};
        CHECK(bk->ops->adam(bk, &st) == RLT_OK, "adam");
        for (int i = 0; i < N; i++) {
            double stepsz = fabs((double)p1[i] - keep[i]);
            bad += m1[i] != m2[i] || v1[i] != v2[i];
            bad += fabs((double)p1[i] - p2[i]) > 8 * U * stepsz + 4 * U * fabs(p1[i]);
            bad += fabs((double)t1[i] - t2[i]) > 8 * U * stepsz + 8 * U * fabs(t1[i]);
            p2[i] = p1[i]; /* the next step starts from the same state */
            t2[i] = t1[i];
        }
    }
    CHECK(bad == 0, "adam (one pass) vs plain adam + polyak: %d elements outside the bound", bad);
}

/* Two threads (cpu.threads: 2): the worker takes half of each large op; every element is computed by the same
 * code, so the results must be the same bits as one thread's. */
static void check_two_threads(rlt_backend *one, rlt_backend *two) {
    const int32_t shapes[][3] = {{100, 64, 64}, {100, 4, 64}, {100, 3, 64}, {256, 256, 256}, {256, 23, 256},
                                 {256, 256, 6}, {37, 100, 50}, {12, 64, 64}, {100, 64, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int32_t rows = shapes[s][0], fi = shapes[s][1], fo = shapes[s][2];
        size_t nx = (size_t)rows * fi, ny = (size_t)rows * fo, nw = (size_t)fi * fo;
        float *x = rlt_mem_alloc(nx * 4, 64), *W = rlt_mem_alloc(nw * 4, 64), *b = rlt_mem_alloc(fo * 4, 64);
        float *y1 = rlt_mem_alloc(ny * 4, 64), *y2 = rlt_mem_alloc(ny * 4, 64), *dy = rlt_mem_alloc(ny * 4, 64);
        float *dW1 = rlt_mem_alloc(nw * 4, 64), *dW2 = rlt_mem_alloc(nw * 4, 64), *db1 = rlt_mem_alloc(fo * 4, 64);
        float *db2 = rlt_mem_alloc(fo * 4, 64), *dx1 = rlt_mem_alloc(nx * 4, 64), *dx2 = rlt_mem_alloc(nx * 4, 64);
        for (size_t i = 0; i < nx; i++) x[i] = frand() > 0.0f ? frand() : 0.0f;
        for (size_t i = 0; i < nw; i++) W[i] = frand() * 0.1f;
        for (int32_t i = 0; i < fo; i++) b[i] = frand() * 0.1f;
        for (size_t i = 0; i < ny; i++) dy[i] = frand();
        for (size_t i = 0; i < nw; i++) dW1[i] = dW2[i] = frand();
        for (int32_t i = 0; i < fo; i++) db1[i] = db2[i] = frand();
        for (int act = RLT_ACT_NONE; act <= RLT_ACT_TANH; act++) {
            CHECK(lin_fwd(one, rows, fi, fo, x, fi, W, b, y1, fo, act) == RLT_OK, "fwd 1");
            CHECK(lin_fwd(two, rows, fi, fo, x, fi, W, b, y2, fo, act) == RLT_OK, "fwd 2");
            CHECK(memcmp(y1, y2, ny * 4) == 0, "two threads: forward %dx%dx%d act %d differs", rows, fi, fo, act);
            CHECK(lin_bwd(one, rows, fi, fo, dy, fo, x, fi, act, W, dW1, db1, 1.0f, dx1, fi) == RLT_OK,
                  "bwd 1");
            CHECK(lin_bwd(two, rows, fi, fo, dy, fo, x, fi, act, W, dW2, db2, 1.0f, dx2, fi) == RLT_OK,
                  "bwd 2");
            CHECK(memcmp(dW1, dW2, nw * 4) == 0 && memcmp(db1, db2, fo * 4) == 0 && memcmp(dx1, dx2, nx * 4) == 0,
                  "two threads: backward %dx%dx%d act %d differs", rows, fi, fo, act);
            CHECK(lin_bwd(two, rows, fi, fo, dy, fo, x, fi, act, W, NULL, NULL, 1.0f, dx2, fi) ==
                      RLT_OK && memcmp(dx1, dx2, nx * 4) == 0,
                  "two threads: dx alone %dx%dx%d differs", rows, fi, fo);
        }
        rlt_mem_free(x); rlt_mem_free(W); rlt_mem_free(b); rlt_mem_free(y1); rlt_mem_free(y2); rlt_mem_free(dy);
        rlt_mem_free(dW1); rlt_mem_free(dW2); rlt_mem_free(db1); rlt_mem_free(db2); rlt_mem_free(dx1);
        rlt_mem_free(dx2);
    }
}

int main(void) {
    rlt_backend ref = {0}, fast = {0};
    ref.ops = fast.ops = rlt_cpu_backend_ops();
    ref.err = fast.err = &err;
    CHECK(ref.ops->open(&ref, -1, 1) == RLT_OK && fast.ops->open(&fast, -1, 1) == RLT_OK, "open: %s", err.msg);
    ((cpu_impl *)ref.impl)->dense = NULL;
    float *pack = rlt_mem_alloc(CPU_DENSE_PACK_FLOATS * sizeof(float), 64);
    CHECK(fast.ops->workspace(&fast, pack, CPU_DENSE_PACK_FLOATS * sizeof(float), NULL) == RLT_OK, "workspace");
    const char *isas[] = {"avx512", "avx2"};
    int tested = 0;
    for (int k = 0; k < 2; k++) {
        const cpu_dense_kernels *dk = cpu_dense_select(isas[k]);
        if (!dk) {
            printf("test_dense: %s kernels not supported by this CPU, not tested\n", isas[k]);
            continue;
        }
        tested++;
        ((cpu_impl *)fast.impl)->dense = dk;
        /* The layer shapes of the shipped configs, then edges, then random shapes. */
        const int32_t shapes[][3] = {{100, 4, 64}, {100, 64, 64}, {100, 64, 1}, {100, 3, 64}, {256, 23, 256},
                                     {256, 256, 256}, {256, 256, 6}, {256, 17, 256}, {64, 3, 64},
                                     {0, 5, 7}, {1, 1, 1}, {3, 64, 64}, {4, 64, 64}, {5, 1, 17}, {7, 16, 16},
                                     {13, 15, 33}, {6, 17, 65}, {12, 300, 70}, {9, 129, 8}, {11, 2, 200},
                                     {8, 7, 9}, {17, 31, 4}};
        int acts[] = {RLT_ACT_NONE, RLT_ACT_RELU, RLT_ACT_TANH};
        float betas[] = {1.0f, 0.0f, 0.5f};
        int n = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++, n++)
            one_case(&ref, &fast, shapes[s][0], shapes[s][1], shapes[s][2], acts[n % 3], betas[(n / 3) % 3], n % 4 == 3);
        for (int t = 0; t < 60; t++) {
            int32_t rows = irand(40), fi = 1 + irand(90), fo = 1 + irand(90);
            one_case(&ref, &fast, rows, fi, fo, acts[irand(3)], betas[irand(3)], irand(3) == 0 ? 1 + irand(5) : 0);
        }
    }
    check_adam_polyak(&fast);
    if (((cpu_impl *)fast.impl)->dense) {
        /* The best kernels on one thread against the same on two. */
        rlt_backend two = {0};
        two.ops = rlt_cpu_backend_ops();
        two.err = &err;
        CHECK(two.ops->open(&two, -1, 2) == RLT_OK, "open with 2 threads: %s", err.msg);
        uint64_t ws = rlt_backend_workspace_need(&two);
        float *pack2 = rlt_mem_alloc(ws, 64);
        CHECK(ws == 2u * CPU_DENSE_PACK_FLOATS * sizeof(float) && ((cpu_impl *)two.impl)->worker,
              "two threads: a worker and two panels");
        two.ops->workspace(&two, pack2, ws, NULL);
        ((cpu_impl *)fast.impl)->dense = ((cpu_impl *)two.impl)->dense;
        check_two_threads(&fast, &two);
        two.ops->close(&two);
        rlt_mem_free(pack2);
    }
    if (!tested) printf("test_dense: no fast kernels on this CPU; the backend runs the reference ops\n");
    rlt_mem_free(pack);
    fast.ops->close(&fast);
    ref.ops->close(&ref);
    return test_summary("test_dense");
}
