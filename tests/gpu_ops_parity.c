/* gpu_ops_parity.c: every op of the CUDA backend's table against the CPU (its CPU twin, or the CPU's oracles,
 * the readable references of kernels/cpu/cpu_ops.h), on fresh random inputs and several shapes (odd sizes,
 * leading dimensions larger than the row): the flat ops, the optimiser step (plain Adam over several steps with
 * the step counter on the device; with clipping and the Polyak target), act_grad, sampling and the gathers,
 * sum, TD3's target smoothing and critic loss, the DQN loss, the dense layers on every kernel path, a captured
 * graph of a small training step replayed three times against the same ops run eagerly on the CPU, and the
 * lanes (the lane op's branches and joins). The convolutions, u8 gathers and the clipping's edge cases are in gpu_dqn_parity, the
 * 16-bit ops in gpu_lowp. Skipped (exit 77) when no CUDA device can be opened.
 *
 * Tolerances (u = 2^-24, the unit roundoff of fp32):
 * - Exact (bit for bit): the integer ops (gather_fields with and without fields, counter_add), stores (fill,
 *   copy_f32), and the elementwise arithmetic (act_grad, polyak, Adam's m and v, the TD3 and DQN targets and
 *   loss gradients). Their expressions are term for term the CPU's, the module is built without FMA
 *   contraction, and IEEE +,-,*,/ and sqrt round identically on both. A mismatch here is a bug, not rounding.
 * - Dot products: a rigorous per-element bound instead of a guessed constant. Any summation order of k
 *   products is within gamma(k+2) * S of the exact value, S the sum of the terms' magnitudes and
 *   gamma(n) = n u / (1 - n u) (Higham, Accuracy and Stability, 3.5), so two orders differ by at most
 *   2 gamma(k+2) S. It holds only in true fp32 (TF32 would exceed it: the backend disables it). The normalised
 *   error |gpu - cpu| / |cpu| is printed; it is typically ~1e-7.
 * - tanh: CUDA's tanhf is within 2 ulp, glibc's within 2 ulp: 4 ulp = 4 * 2^-23 relative.
 * - Reductions (the losses, sum): the GPU adds in a tree, the CPU left to right; each is within
 *   gamma(n) sum|x| of the exact sum, so they differ by at most 2 gamma(n) sum|x| (+ 2u for the final
 *   scaling).
 * - Adam's parameters: the bias corrections use powf (CUDA: up to 4 ulp; glibc: under 1), and
 *   1 - beta2^t cancels, amplifying that error by about 1 / (1 - beta2^t) ~ 1000 / t; that reaches the
 *   update (about lr in size) as ~2e-4 relative, and the subtraction from p may round to a neighbouring
 *   float. Per step: 2^-22 |p| + 2e-4 lr. With clipping, see test_adam_clip_polyak.
 * - td3_target_action: the normal uses logf (1 ulp on CUDA) and cosf (2 ulp), so it differs by under
 *   ~8 ulp relative, and |N| < 5.8 for 24-bit uniforms: 5.8 * 8 u * std < 3e-6 std, plus one ulp of the
 *   result (|a| <= 1) when the sum rounds the other way: 1e-5 std + 2^-22.
 * - The graph test chains ten ops over three steps: per-op bounds compound, so it uses 1e-5 absolute and
 *   relative; ordering or replay bugs (stale counters, missed ops) give differences of order 1.
 * - linear_forward / linear_backward (our fused kernels, or cuBLAS past K = 1024): each output is a dot
 *   product plus at most one more term (the bias, or beta times the old gradient), so the bound
 *   2 gamma(k+2) S applies per element, S the sum of the terms' magnitudes; ReLU and its derivative are
 *   exact and 1-Lipschitz; tanh adds 8u |y| (both libraries' 2 ulp); the input gradient's factor act'(x)
 *   is computed from the same x on both, so it scales the bound by |act'(x)| (+ 4u |dx| for its roundings).
 *   The bias gradient is a sum in the kernel's order, not the CPU's: the same bound with the row count.
 *   Outputs not asked for, padding columns and rows = 0 must stay untouched: bound 0.
 * - gather_fields (indices drawn or given, direct and indirect fields, 16-, 4- and 1-byte words): exact; with
 *   fp16/bf16 sources (compact replay) exact too: widening to fp32 is exact and both backends do it with the
 *   same integer arithmetic (base/lowp.h), NaN payloads included.
 * - td3_critic_loss, dqn_loss: targets and gradients exact (the oracles' expressions); losses within the
 *   reduction bound.
 * - td3_critic_loss with the critics' output layers folded in: every output exactly what the ops it folds together
 *   give on the same backend.
 * - Lanes: a chain of forwards on side lanes, joins and a dependency between steps, run eagerly twice and
 *   replayed from a graph four times: a missing fork or join edge reads stale data (order-1 errors); the
 *   chained fp32 ops stay within 1e-5 absolute and relative. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_pair.h"
#include "backend_registry.h"
#include "harness.h"
#include "kernels/cpu/cpu_ops.h"
#include "philox.h"

#define U (1.0 / 16777216.0) /* fp32 unit roundoff, 2^-24 */
#define ARENA_BYTES (192ull << 20) /* the routed products' cases take up to ~50 MiB at once */

/* The shared CPU/GPU pair (backend_pair.h) under this file's short names. */
#define rnd_u64 pair_rnd_u64
#define rnd_f pair_rnd_f
#define rnd_fill pair_rnd_fill
#define die_on pair_die_on
#define take pair_take
#define reset pair_reset
#define put pair_put
#define fetch pair_fetch
static double gamma_n(double n) { return n * U / (1.0 - n * U); }

/* Byte-exact comparison; reports the first differing element. */
static void expect_exact(const char *what, const void *gpu, const void *cpu, size_t n, size_t elem) {
    const unsigned char *g = gpu, *c = cpu;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(g + i * elem, c + i * elem, elem) != 0 && bad++ == 0) first = i;
    if (bad && elem == 4) {
        float gf, cf;
        uint32_t gu, cu;
        memcpy(&gf, g + first * 4, 4);
        memcpy(&cf, c + first * 4, 4);
        memcpy(&gu, g + first * 4, 4);
        memcpy(&cu, c + first * 4, 4);
        CHECK(bad == 0, "%s: %zu of %zu elements differ; first at %zu: gpu %.9g (0x%08x) cpu %.9g (0x%08x)", what, bad,
              n, first, gf, (unsigned)gu, cf, (unsigned)cu);
    } else {
        CHECK(bad == 0, "%s: %zu of %zu elements differ; first at %zu", what, bad, n, first);
    }
}

/* |gpu - cpu| <= bound[i] for every element (bound NULL: atol + rtol |cpu|); also prints the normalised
 * error |gpu - cpu|_2 / |cpu|_2 for the log. */
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
        if (!(excess <= 0)) { /* also catches NaN */
            if (bad++ == 0 || excess > worst) {
                worst = excess;
                at = i;
            }
        }
    }
    double nerr = den > 0 ? sqrt(num / den) : sqrt(num);
    printf("  %-44s n=%-8zu nerr=%.2e\n", what, n, nerr);
    CHECK(bad == 0, "%s: %zu of %zu elements outside the bound; worst at %zu: gpu %.9g cpu %.9g bound %.3g", what, bad,
          n, at, g[at], c[at], bound ? bound[at] : atol + rtol * fabs((double)c[at]));
}

/* ---------------------------------------------------------------------------------------------- */

/* act_grad on both backends through the same activation outputs y (made by the CPU's bias_act oracle from
 * random pre-activations, so relu's zeros and tanh's range are real): exact. */
static void test_act_grad(void) {
    static const struct {
        int rows, cols, pad;
    } cases[] = {{1, 1, 0}, {7, 33, 5}, {256, 64, 0}, {300, 17, 3}, {1000, 257, 1}, {3, 1000, 0}};
    printf("act_grad\n");
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int rows = cases[t].rows, cols = cases[t].cols, ld = cols + cases[t].pad;
        size_t ny = (size_t)rows * ld;
        float *hy = malloc(ny * 4), *hd = malloc(ny * 4), *rc = malloc(ny * 4), *rg = malloc(ny * 4);
        void *cy, *gy, *cd, *gd;
        take(ny * 4, &cy, &gy);
        take(ny * 4, &cd, &gd);
        for (int act = RLT_ACT_NONE; act <= RLT_ACT_TANH; act++) {
            char what[96];
            rnd_fill(hy, ny, -3, 3);
            CHECK(cpu_bias_act(&P.cpu, hy, ld, NULL, rows, cols, act) == RLT_OK, "bias_act oracle");
            put(cy, gy, hy, ny * 4);
            rnd_fill(hd, ny, -1, 1);
            put(cd, gd, hd, ny * 4);
            int r1 = P.cpu.ops->act_grad(&P.cpu, cd, ld, cy, ld, rows, cols, act);
            int r2 = P.gpu.ops->act_grad(&P.gpu, gd, ld, gy, ld, rows, cols, act);
            CHECK(r1 == RLT_OK && r2 == RLT_OK, "act_grad: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
            fetch(rc, rg, cd, gd, ny * 4);
            snprintf(what, sizeof what, "act_grad act=%d %dx%d ld=%d", act, rows, cols, ld);
            expect_exact(what, rg, rc, ny, 4);
        }
        free(hy), free(hd), free(rc), free(rg);
        reset();
    }
}

static void test_flat(void) {
    printf("flat (fill, copy, polyak) / counter_add\n");
    static const uint64_t sizes[] = {1, 1000, (1u << 20) + 3};
    for (size_t t = 0; t < 3; t++) {
        uint64_t n = sizes[t], guard = 8;
        float *h = malloc((n + guard) * 4), *h2 = malloc((n + guard) * 4), *rc = malloc((n + guard) * 4),
              *rg = malloc((n + guard) * 4);
        void *cx, *gx, *cy, *gy;
        take((n + guard) * 4, &cx, &gx);
        take((n + guard) * 4, &cy, &gy);
        static const float values[] = {0.0f, -0.0f, 3.5f};
        for (int vi = 0; vi < 3; vi++) {
            rnd_fill(h, n + guard, -1, 1);
            put(cx, gx, h, (n + guard) * 4);
            int r1 = P.cpu.ops->flat(&P.cpu, RLT_FLAT_FILL, cx, NULL, n, values[vi]);
            int r2 = P.gpu.ops->flat(&P.gpu, RLT_FLAT_FILL, gx, NULL, n, values[vi]);
            CHECK(r1 == RLT_OK && r2 == RLT_OK, "fill: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
            fetch(rc, rg, cx, gx, (n + guard) * 4);
            char what[64];
            snprintf(what, sizeof what, "fill n=%llu value=%g (guard after)", (unsigned long long)n, values[vi]);
            expect_exact(what, rg, rc, n + guard, 4);
        }
        rnd_fill(h, n + guard, -1, 1);
        rnd_fill(h2, n + guard, -1, 1);
        put(cx, gx, h, (n + guard) * 4);
        put(cy, gy, h2, (n + guard) * 4);
        int r1 = P.cpu.ops->flat(&P.cpu, RLT_FLAT_COPY, cy, cx, n, 0.0f);
        int r2 = P.gpu.ops->flat(&P.gpu, RLT_FLAT_COPY, gy, gx, n, 0.0f);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "copy_f32: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        fetch(rc, rg, cy, gy, (n + guard) * 4);
        expect_exact("copy_f32 (guard after)", rg, rc, n + guard, 4);

        static const float taus[] = {0.005f, 0.0f, 1.0f, 0.37f};
        for (int ti = 0; ti < 4; ti++) {
            rnd_fill(h, n + guard, -2, 2);
            rnd_fill(h2, n + guard, -2, 2);
            put(cx, gx, h, (n + guard) * 4);
            put(cy, gy, h2, (n + guard) * 4);
            r1 = P.cpu.ops->flat(&P.cpu, RLT_FLAT_POLYAK, cy, cx, n, taus[ti]);
            r2 = P.gpu.ops->flat(&P.gpu, RLT_FLAT_POLYAK, gy, gx, n, taus[ti]);
            CHECK(r1 == RLT_OK && r2 == RLT_OK, "polyak: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
            fetch(rc, rg, cy, gy, (n + guard) * 4);
            char what[64];
            snprintf(what, sizeof what, "polyak n=%llu tau=%g", (unsigned long long)n, taus[ti]);
            expect_exact(what, rg, rc, n + guard, 4);
        }
        free(h), free(h2), free(rc), free(rg);
        reset();
    }
    void *cc, *gc;
    take(2 * sizeof(int64_t), &cc, &gc);
    int64_t init[2] = {5, -7}, rc2[2], rg2[2];
    put(cc, gc, init, sizeof init);
    static const int64_t adds[] = {1, 1, -3, 1ll << 40, 0};
    for (int i = 0; i < 5; i++) {
        CHECK(P.cpu.ops->counter_add(&P.cpu, (int64_t *)cc, adds[i]) == RLT_OK, "cpu counter_add");
        CHECK(P.gpu.ops->counter_add(&P.gpu, (int64_t *)gc, adds[i]) == RLT_OK, "gpu counter_add: %s", P.egpu.msg);
    }
    fetch(rc2, rg2, cc, gc, sizeof rc2);
    CHECK(rg2[0] == rc2[0] && rg2[1] == rc2[1] && rc2[0] == 5 + 1 + 1 - 3 + (1ll << 40),
          "counter_add: gpu %lld %lld cpu %lld %lld", (long long)rg2[0], (long long)rg2[1], (long long)rc2[0],
          (long long)rc2[1]);
    reset();
}

/* The optimiser op without its extras on the GPU against the plain Adam oracle on the CPU, over several steps
 * with the step counter on the device. */
static void test_adam(void) {
    printf("adam (step counter on the device) vs the plain Adam oracle\n");
    static const uint64_t sizes[] = {1, 100003};
    for (size_t t = 0; t < 2; t++) {
        uint64_t n = sizes[t];
        rlt_adam_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f};
        float *hp_ = malloc(n * 4), *hg = malloc(n * 4), *rc = malloc(n * 4), *rg = malloc(n * 4);
        float *mc = malloc(n * 4), *mg = malloc(n * 4);
        void *cp, *gp, *cg, *gg, *cm, *gm, *cv, *gv, *cs, *gs;
        take(n * 4, &cp, &gp);
        take(n * 4, &cg, &gg);
        take(n * 4, &cm, &gm);
        take(n * 4, &cv, &gv);
        take(8, &cs, &gs);
        rnd_fill(hp_, n, -1, 1);
        put(cp, gp, hp_, n * 4);
        memset(hg, 0, n * 4);
        put(cm, gm, hg, n * 4);
        put(cv, gv, hg, n * 4);
        int64_t zero = 0;
        put(cs, gs, &zero, 8);
        int steps = 6;
        for (int s = 0; s < steps; s++) {
            rnd_fill(hg, n, -0.5f, 0.5f);
            put(cg, gg, hg, n * 4);
            CHECK(P.cpu.ops->counter_add(&P.cpu, (int64_t *)cs, 1) == RLT_OK, "cpu step");
            CHECK(P.gpu.ops->counter_add(&P.gpu, (int64_t *)gs, 1) == RLT_OK, "gpu step");
            int r1 = cpu_adam_plain(&P.cpu, cp, cg, cm, cv, n, hp, (const int64_t *)cs);
            rlt_adam_step st = {.p = gp, .g = gg, .m = gm, .v = gv, .n = n, .hp = hp, .step = gs};
            int r2 = P.gpu.ops->adam(&P.gpu, &st);
            CHECK(r1 == RLT_OK && r2 == RLT_OK, "adam: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        }
        char what[64];
        fetch(mc, mg, cm, gm, n * 4);
        snprintf(what, sizeof what, "adam m n=%llu after %d steps", (unsigned long long)n, steps);
        expect_exact(what, mg, mc, n, 4);
        fetch(mc, mg, cv, gv, n * 4);
        snprintf(what, sizeof what, "adam v n=%llu after %d steps", (unsigned long long)n, steps);
        expect_exact(what, mg, mc, n, 4);
        fetch(rc, rg, cp, gp, n * 4);
        snprintf(what, sizeof what, "adam p n=%llu after %d steps", (unsigned long long)n, steps);
        expect_close(what, rg, rc, n, NULL, steps * 2e-4 * hp.lr, steps * 2.0 * 2.0 * U);
        free(hp_), free(hg), free(rc), free(rg), free(mc), free(mg);
        reset();
    }
}

static void seeds_batch_n(int n, void *const *gs, void *cd, void *gd, void *ck, void *gk, int64_t *delta);

static void test_replay(void) {
    printf("the draw alone (gather_fields with no field) / one-field gather_fields vs gather_rows\n");
    static const int32_t ns[] = {1, 256, 1000};
    static const int64_t sizes[] = {1, 7, 1000000, INT32_MAX};
    static const int64_t ctrs[] = {0, 12345, 1ll << 40};
    void *ci, *gi, *cz, *gz, *cc, *gc;
    take(1000 * 4, &ci, &gi);
    take(8, &cz, &gz);
    take(8, &cc, &gc);
    int32_t ic[1000], ig[1000];
    for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 4; b++) {
            for (int c = 0; c < 3; c++) {
                put(cz, gz, &sizes[b], 8);
                put(cc, gc, &ctrs[c], 8);
                uint64_t seed = rnd_u64();
                rlt_sample_spec sc = {.size = cz, .seed = seed, .stream = RLT_STREAM_SAMPLE, .batch = ns[a],
                                      .counter = cc};
                rlt_sample_spec sg = sc;
                sg.size = gz, sg.counter = gc;
                int r1 = P.cpu.ops->gather_fields(&P.cpu, ci, ns[a], &sc, 0, NULL);
                int r2 = P.gpu.ops->gather_fields(&P.gpu, gi, ns[a], &sg, 0, NULL);
                CHECK(r1 == RLT_OK && r2 == RLT_OK, "the draw alone: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
                fetch(ic, ig, ci, gi, (size_t)ns[a] * 4);
                char what[96];
                snprintf(what, sizeof what, "draw n=%d size=%lld ctr=%lld", ns[a], (long long)sizes[b],
                         (long long)ctrs[c]);
                expect_exact(what, ig, ic, (size_t)ns[a], 4);
                int in_range = 1;
                for (int i = 0; i < ns[a]; i++) in_range &= ic[i] >= 0 && ic[i] < sizes[b];
                CHECK(in_range, "%s: an index is out of range", what);
            }
        }
    }
    reset();

    /* One field at a time, given indices, against the gather_rows oracle: rows of 16-byte multiples (the uint4
     * path), of 4-byte multiples (uint32), and odd byte rows (u8 observations), with strides larger than the
     * row and, for bytes, an unaligned destination. */
    static const struct {
        uint64_t row_bytes, dst_stride, dst_off;
        int32_t n, src_rows;
    } cases[] = {{64, 64, 0, 256, 1000}, {68, 80, 0, 257, 999}, {13, 16, 0, 100, 50},
                 {13, 13, 1, 33, 7},     {4, 4, 0, 1, 1},       {28224, 28224, 0, 32, 40}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        uint64_t rb = cases[t].row_bytes, ds = cases[t].dst_stride, off = cases[t].dst_off;
        int32_t n = cases[t].n, sr = cases[t].src_rows;
        uint64_t src_bytes = rb * (uint64_t)sr, dst_bytes = ds * (uint64_t)n + off + 16;
        unsigned char *hs = malloc(src_bytes), *hd = malloc(dst_bytes), *oc = malloc(dst_bytes),
                      *og = malloc(dst_bytes);
        int32_t *hi = malloc((size_t)n * 4);
        for (uint64_t i = 0; i < src_bytes; i++) hs[i] = (unsigned char)rnd_u64();
        for (uint64_t i = 0; i < dst_bytes; i++) hd[i] = (unsigned char)rnd_u64();
        for (int32_t i = 0; i < n; i++) hi[i] = (int32_t)(rnd_u64() % (uint64_t)sr);
        void *cs, *gs, *cd, *gd, *cx, *gx;
        take(src_bytes, &cs, &gs);
        take(dst_bytes, &cd, &gd);
        take((size_t)n * 4, &cx, &gx);
        put(cs, gs, hs, src_bytes);
        put(cd, gd, hd, dst_bytes);
        put(cx, gx, hi, (size_t)n * 4);
        rlt_gather_field fg = {.dst = (unsigned char *)gd + off, .dst_stride = ds, .src = gs, .row_bytes = rb};
        int r1 = cpu_gather_rows(&P.cpu, (unsigned char *)cd + off, ds, cs, rb, cx, n);
        int r2 = P.gpu.ops->gather_fields(&P.gpu, gx, n, NULL, 1, &fg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "gather_fields (one field): cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        fetch(oc, og, cd, gd, dst_bytes);
        char what[96];
        snprintf(what, sizeof what, "gather_fields row=%llu stride=%llu off=%llu n=%d", (unsigned long long)rb,
                 (unsigned long long)ds, (unsigned long long)off, n);
        expect_exact(what, og, oc, dst_bytes, 1);
        printf("  %-44s exact\n", what);
        free(hs), free(hd), free(oc), free(og), free(hi);
        reset();
    }

    /* A TD3 batch: indices drawn, four fields at once (a 17-float observation, a 6-float action, a reward, and the
     * next observation through a via list), over batch sizes that leave a block of rows short, for one agent and
     * for 8 batched over seeds (seed z's buffers a fixed distance from seed 0's, its key z + 1): every row's index
     * and every byte as the CPU draws and copies them for that seed. Batched, the CUDA twin draws each row's index
     * once per block of rows (gather_rows_kernel); alone, once per word (gather_fields_kernel). */
    enum { GZ = 8, SRC_ROWS = 700 };
    static const int32_t bn[] = {1, 33, 256, 1000};
    static const uint64_t rbs[4] = {68, 24, 4, 68};
    for (int zn = 1; zn <= GZ; zn += GZ - 1) {
        for (size_t t = 0; t < sizeof bn / sizeof bn[0]; t++) {
            const int32_t n = bn[t];
            void *cs[GZ][4], *gs[GZ][4], *cd[GZ][4], *gd[GZ][4], *cv[GZ], *gv[GZ], *cx[GZ], *gx[GZ];
            void *cz[GZ], *gz[GZ], *cc[GZ], *gc[GZ];
            const int64_t size = SRC_ROWS - 13, ctr = 777;
            for (int z = 0; z < zn; z++) { /* seed z's buffers, taken in the same order and sizes as seed 0's */
                int32_t via[SRC_ROWS];
                for (int32_t i = 0; i < SRC_ROWS; i++) via[i] = (int32_t)(rnd_u64() % (uint64_t)SRC_ROWS);
                take((size_t)SRC_ROWS * 4, &cv[z], &gv[z]);
                put(cv[z], gv[z], via, (size_t)SRC_ROWS * 4);
                for (int f = 0; f < 4; f++) {
                    uint64_t sb = rbs[f] * SRC_ROWS, db = rbs[f] * (uint64_t)n;
                    unsigned char *h = malloc(sb > db ? sb : db);
                    take(sb, &cs[z][f], &gs[z][f]);
                    take(db, &cd[z][f], &gd[z][f]);
                    for (uint64_t i = 0; i < sb; i++) h[i] = (unsigned char)rnd_u64();
                    put(cs[z][f], gs[z][f], h, sb);
                    for (uint64_t i = 0; i < db; i++) h[i] = (unsigned char)rnd_u64();
                    put(cd[z][f], gd[z][f], h, db);
                    free(h);
                }
                take((size_t)n * 4, &cx[z], &gx[z]);
                take(8, &cz[z], &gz[z]);
                take(8, &cc[z], &gc[z]);
                put(cz[z], gz[z], &size, 8);
                put(cc[z], gc[z], &ctr, 8);
            }
            const uint64_t key = rnd_u64();
            rlt_gather_field fc[4], fg[4];
            int rc = RLT_OK;
            for (int z = 0; z < zn && rc == RLT_OK; z++) { /* the CPU, one seed at a time */
                for (int f = 0; f < 4; f++)
                    fc[f] = (rlt_gather_field){.dst = cd[z][f], .dst_stride = rbs[f], .src = cs[z][f],
                                               .row_bytes = rbs[f], .via = f == 3 ? cv[z] : NULL};
                rlt_sample_spec sc = {.size = cz[z], .seed = zn > 1 ? (uint64_t)z + 1 : key,
                                      .stream = RLT_STREAM_SAMPLE, .batch = n, .counter = cc[z]};
                rc = P.cpu.ops->gather_fields(&P.cpu, cx[z], n, &sc, 4, fc);
            }
            for (int f = 0; f < 4; f++)
                fg[f] = (rlt_gather_field){.dst = gd[0][f], .dst_stride = rbs[f], .src = gs[0][f], .row_bytes = rbs[f],
                                           .via = f == 3 ? gv[0] : NULL};
            rlt_sample_spec sg = {.size = gz[0], .seed = key, .stream = RLT_STREAM_SAMPLE, .batch = n, .counter = gc[0]};
            int r0 = RLT_OK, r2 = RLT_OK;
            if (zn > 1) {
                void *cdl, *gdl, *ck, *gk, *lead[GZ];
                int64_t delta[GZ];
                take(GZ * sizeof(int64_t), &cdl, &gdl);
                take(GZ * sizeof(uint64_t), &ck, &gk);
                for (int z = 0; z < zn; z++) lead[z] = gv[z];
                seeds_batch_n(zn, lead, cdl, gdl, ck, gk, delta);
                r0 = P.gpu.ops->seed_batch(&P.gpu, &(rlt_seeds_desc){.n = zn, .delta = gdl, .seed = gk,
                                                                     .delta_host = delta});
            }
            int r1 = r0 == RLT_OK ? P.gpu.ops->gather_fields(&P.gpu, gx[0], n, &sg, 4, fg) : r0;
            if (zn > 1) r2 = P.gpu.ops->seed_batch(&P.gpu, NULL);
            CHECK(rc == RLT_OK && r1 == RLT_OK && r2 == RLT_OK, "gather_fields (four fields, drawn, %d seeds): cpu %d "
                  "gpu %d %d (%s)", zn, rc, r1, r2, P.egpu.msg);
            char what[96];
            for (int z = 0; z < zn; z++) {
                int32_t *ic = malloc((size_t)n * 4), *ig = malloc((size_t)n * 4);
                fetch(ic, ig, cx[z], gx[z], (size_t)n * 4);
                snprintf(what, sizeof what, "gather_fields four fields drawn n=%d seeds=%d: seed %d's indices", n, zn, z);
                expect_exact(what, ig, ic, (size_t)n, 4);
                for (int f = 0; f < 4; f++) {
                    uint64_t db = rbs[f] * (uint64_t)n;
                    unsigned char *oc = malloc(db), *og = malloc(db);
                    fetch(oc, og, cd[z][f], gd[z][f], db);
                    snprintf(what, sizeof what, "gather_fields four fields drawn n=%d seeds=%d: seed %d field %d", n,
                             zn, z, f);
                    expect_exact(what, og, oc, db, 1);
                    free(oc), free(og);
                }
                free(ic), free(ig);
            }
            printf("  gather_fields four fields drawn n=%-4d seeds=%d exact\n", n, zn);
            reset();
        }
    }
}

static void test_sum(void) {
    printf("sum\n");
    static const int32_t ns[] = {1, 2, 255, 256, 257, 1000, 4096};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int32_t n = ns[t];
        float *hq = malloc((size_t)n * 4);
        void *cq, *gq, *cl, *gl;
        take((size_t)n * 4, &cq, &gq);
        take(4, &cl, &gl);
        rnd_fill(hq, (size_t)n, -10, 10);
        put(cq, gq, hq, (size_t)n * 4);
        for (int32_t ldx = 1; ldx <= 3; ldx += 2) {
            int32_t m = n / ldx;
            float scale = m ? 1.0f / (float)m : 1.0f;
            float oc, og;
            char what[64];
            int r1 = P.cpu.ops->sum(&P.cpu, cl, cq, ldx, m, scale);
            int r2 = P.gpu.ops->sum(&P.gpu, gl, gq, ldx, m, scale);
            CHECK(r1 == RLT_OK && r2 == RLT_OK, "sum: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
            fetch(&oc, &og, cl, gl, 4);
            double sa = 0;
            for (int32_t i = 0; i < m; i++) sa += fabs((double)hq[(size_t)i * ldx]);
            double b2 = 2.0 * gamma_n(m) * sa * scale + 2.0 * U * fabs(oc) + 1e-37;
            snprintf(what, sizeof what, "sum n=%d ldx=%d", m, ldx);
            expect_close(what, &og, &oc, 1, &b2, 0, 0);
        }
        free(hq);
        reset();
    }
    /* sum over nothing is 0 on both. */
    void *cl, *gl;
    take(4, &cl, &gl);
    float oc = 1, og = 1;
    CHECK(P.cpu.ops->sum(&P.cpu, cl, cl, 1, 0, 1.0f) == RLT_OK && P.gpu.ops->sum(&P.gpu, gl, gl, 1, 0, 1.0f) == RLT_OK,
          "sum n=0: %s", P.egpu.msg);
    fetch(&oc, &og, cl, gl, 4);
    CHECK(oc == 0.0f && og == 0.0f, "sum n=0: cpu %g gpu %g", oc, og);
    reset();
}

static void test_td3(void) {
    printf("td3_target_action\n");
    static const struct {
        int rows, cols, pad;
        float std, clip;
        int64_t ctr;
    } cases[] = {{1, 1, 0, 0.2f, 0.5f, 0},
                 {100, 6, 2, 0.2f, 0.5f, 99},
                 {256, 17, 0, 1.0f, 10.0f, 1ll << 33},
                 {257, 3, 1, 0.5f, 0.3f, 7}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int rows = cases[t].rows, cols = cases[t].cols, ld = cols + cases[t].pad;
        size_t na = (size_t)rows * ld;
        float *ha = malloc(na * 4), *rc = malloc(na * 4), *rg = malloc(na * 4);
        void *ca, *ga, *cc, *gc;
        take(na * 4, &ca, &ga);
        take(8, &cc, &gc);
        rnd_fill(ha, na, -1, 1);
        put(ca, ga, ha, na * 4);
        put(cc, gc, &cases[t].ctr, 8);
        uint64_t seed = rnd_u64();
        rlt_target_noise nc = {.a = ca, .lda = ld, .rows = rows, .cols = cols, .std = cases[t].std, .clip = cases[t].clip,
                               .seed = seed, .stream = RLT_STREAM_TARGET, .counter = cc, .row0 = (int32_t)(t * 37)};
        rlt_target_noise ng = nc;
        ng.a = ga, ng.counter = gc;
        int r1 = P.cpu.ops->td3_target_action(&P.cpu, &nc);
        int r2 = P.gpu.ops->td3_target_action(&P.gpu, &ng);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "td3_target_action: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        fetch(rc, rg, ca, ga, na * 4);
        char what[96];
        snprintf(what, sizeof what, "td3_target_action %dx%d ld=%d std=%g clip=%g", rows, cols, ld, cases[t].std,
                 cases[t].clip);
        expect_close(what, rg, rc, na, NULL, 1e-5 * cases[t].std + 4.0 * U, 0);
        free(ha), free(rc), free(rg);
        reset();
    }
}

/* ---- a small training step: sample, gather, forward, loss, backward, Adam ---- */

enum { G_ROWS = 500, G_IN = 12, G_OUT = 8, G_B = 64 };

typedef struct gstep {
    float *replay, *x, *w, *b, *h, *target, *y, *zero, *dh, *dh2, *gw, *gb, *mw, *vw, *mb, *vb, *loss;
    int32_t *idx;
    int64_t *ctr, *step, *size;
} gstep;

/* A tanh layer fitted to targets by MSE: the MSE gradient is td3_critic_loss's with gamma 0 (its target y is then
 * r, here the targets, exactly). */
static int run_step(rlt_backend *bk, const gstep *s) {
    const rlt_backend_ops *o = bk->ops;
    rlt_adam_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f};
    RLT_TRY(o->counter_add(bk, s->ctr, 1));
    rlt_sample_spec smp = {.size = s->size, .seed = 7, .stream = RLT_STREAM_SAMPLE, .batch = G_B, .counter = s->ctr};
    RLT_TRY(o->gather_fields(bk, s->idx, G_B, &smp, 0, NULL));
    rlt_gather_field f = {.dst = s->x, .dst_stride = G_IN * 4, .src = s->replay, .row_bytes = G_IN * 4};
    RLT_TRY(o->gather_fields(bk, s->idx, G_B, NULL, 1, &f));
    rlt_linear_fwd fw = {.rows = G_B, .fi = G_IN, .fo = G_OUT, .x = s->x, .ldx = G_IN, .W = s->w, .b = s->b, .y = s->h,
                         .ldy = G_OUT, .act = RLT_ACT_TANH};
    RLT_TRY(o->linear_forward(bk, &fw));
    rlt_td3_loss l = {.y = s->y, .dq1 = s->dh, .dq2 = s->dh2, .loss1 = s->loss, .q1 = s->h, .q2 = s->h,
                      .qt1 = s->target, .qt2 = s->target, .r = s->target, .term = s->zero, .n = G_B * G_OUT,
                      .gamma = 0.0f, .grad_scale = 1.0f};
    RLT_TRY(o->td3_critic_loss(bk, &l));
    RLT_TRY(o->act_grad(bk, s->dh, G_OUT, s->h, G_OUT, G_B, G_OUT, RLT_ACT_TANH));
    rlt_linear_bwd bw = {.rows = G_B, .fi = G_IN, .fo = G_OUT, .dy = s->dh, .lddy = G_OUT, .x = s->x, .ldx = G_IN,
                         .W = s->w, .dW = s->gw, .db = s->gb, .beta = 0.0f};
    RLT_TRY(o->linear_backward(bk, &bw));
    RLT_TRY(o->counter_add(bk, s->step, 1));
    rlt_adam_step aw = {.p = s->w, .g = s->gw, .m = s->mw, .v = s->vw, .n = G_IN * G_OUT, .hp = hp, .step = s->step};
    rlt_adam_step ab = {.p = s->b, .g = s->gb, .m = s->mb, .v = s->vb, .n = G_OUT, .hp = hp, .step = s->step};
    RLT_TRY(o->adam(bk, &aw));
    RLT_TRY(o->adam(bk, &ab));
    return RLT_OK;
}

static void test_graph(void) {
    printf("graph capture (GPU, replayed 3 times) vs eager (CPU, 3 times)\n");
    gstep c, g;
#define TAKE(field, count, type)                                   \
    do {                                                           \
        void *pc_, *pg_;                                           \
        take((uint64_t)(count) * sizeof(type), &pc_, &pg_);        \
        c.field = pc_;                                             \
        g.field = pg_;                                             \
    } while (0)
    TAKE(replay, G_ROWS * G_IN, float);
    TAKE(x, G_B * G_IN, float);
    TAKE(w, G_IN * G_OUT, float);
    TAKE(b, G_OUT, float);
    TAKE(h, G_B * G_OUT, float);
    TAKE(target, G_B * G_OUT, float);
    TAKE(y, G_B * G_OUT, float);
    TAKE(zero, G_B * G_OUT, float);
    TAKE(dh, G_B * G_OUT, float);
    TAKE(dh2, G_B * G_OUT, float);
    TAKE(gw, G_IN * G_OUT, float);
    TAKE(gb, G_OUT, float);
    TAKE(mw, G_IN * G_OUT, float);
    TAKE(vw, G_IN * G_OUT, float);
    TAKE(mb, G_OUT, float);
    TAKE(vb, G_OUT, float);
    TAKE(loss, 1, float);
    TAKE(idx, G_B, int32_t);
    TAKE(ctr, 1, int64_t);
    TAKE(step, 1, int64_t);
    TAKE(size, 1, int64_t);
#undef TAKE
    float *hbuf = malloc(G_ROWS * G_IN * 4);
    rnd_fill(hbuf, G_ROWS * G_IN, -1, 1);
    put(c.replay, g.replay, hbuf, G_ROWS * G_IN * 4);
    rnd_fill(hbuf, G_IN * G_OUT, -0.5f, 0.5f);
    put(c.w, g.w, hbuf, G_IN * G_OUT * 4);
    rnd_fill(hbuf, G_OUT, -0.1f, 0.1f);
    put(c.b, g.b, hbuf, G_OUT * 4);
    rnd_fill(hbuf, G_B * G_OUT, -0.9f, 0.9f);
    put(c.target, g.target, hbuf, G_B * G_OUT * 4);
    /* Adam's moments and the terminal flags start at zero (the arena is reused between tests, so it is not zero
     * here). */
    memset(hbuf, 0, G_B * G_OUT * 4);
    put(c.zero, g.zero, hbuf, G_B * G_OUT * 4);
    put(c.mw, g.mw, hbuf, G_IN * G_OUT * 4);
    put(c.vw, g.vw, hbuf, G_IN * G_OUT * 4);
    put(c.mb, g.mb, hbuf, G_OUT * 4);
    put(c.vb, g.vb, hbuf, G_OUT * 4);
    int64_t counters[3] = {100, 0, G_ROWS};
    put(c.ctr, g.ctr, &counters[0], 8);
    put(c.step, g.step, &counters[1], 8);
    put(c.size, g.size, &counters[2], 8);

    CHECK(P.cpu.ops->graph(&P.cpu, RLT_GRAPH_SUPPORTED, 0) == 0, "the CPU backend should not claim graph support");
    CHECK(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_SUPPORTED, 0) == 1, "the CUDA backend should support graphs");
    int rb = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 3);
    int rs = rb == RLT_OK ? run_step(&P.gpu, &g) : rb;
    int re = rb == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 3) : rb;
    CHECK(rb == RLT_OK && rs == RLT_OK && re == RLT_OK, "capture: begin %d ops %d end %d (%s)", rb, rs, re,
          P.egpu.msg);
    for (int it = 0; it < 3; it++) {
        CHECK(run_step(&P.cpu, &c) == RLT_OK, "cpu step %d: %s", it, P.ecpu.msg);
        int rl = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 3);
        CHECK(rl == RLT_OK, "graph_launch %d: %s", it, P.egpu.msg);
    }
    int64_t kc[2], kg[2];
    fetch(&kc[0], &kg[0], c.ctr, g.ctr, 8);
    fetch(&kc[1], &kg[1], c.step, g.step, 8);
    CHECK(kc[0] == 103 && kg[0] == 103 && kc[1] == 3 && kg[1] == 3, "counters after 3 steps: cpu %lld %lld gpu %lld %lld",
          (long long)kc[0], (long long)kc[1], (long long)kg[0], (long long)kg[1]);
    int32_t ic[G_B], ig[G_B];
    fetch(ic, ig, c.idx, g.idx, sizeof ic);
    expect_exact("graph: last sampled indices", ig, ic, G_B, 4);
    float *fc = malloc(G_B * G_IN * 4), *fg = malloc(G_B * G_IN * 4);
    fetch(fc, fg, c.x, g.x, G_B * G_IN * 4);
    expect_exact("graph: last gathered batch", fg, fc, G_B * G_IN, 4);
    fetch(fc, fg, c.h, g.h, G_B * G_OUT * 4);
    expect_close("graph: activations", fg, fc, G_B * G_OUT, NULL, 1e-5, 1e-5);
    fetch(fc, fg, c.w, g.w, G_IN * G_OUT * 4);
    expect_close("graph: weights after 3 Adam steps", fg, fc, G_IN * G_OUT, NULL, 1e-5, 1e-5);
    fetch(fc, fg, c.b, g.b, G_OUT * 4);
    expect_close("graph: biases after 3 Adam steps", fg, fc, G_OUT, NULL, 1e-5, 1e-5);
    fetch(fc, fg, c.loss, g.loss, 4);
    expect_close("graph: last loss", fg, fc, 1, NULL, 1e-6, 1e-5);
    free(hbuf), free(fc), free(fg);
    reset();
}

/* ---- fused ops ---- */

/* linear_forward on both backends against the GEMM bound: each output is a dot product of length fi plus the
 * bias, so the two differ by at most 2 gamma(fi + 2) S, S = sum |x w| + |b| (ReLU is 1-Lipschitz and exact;
 * tanh adds both libraries' 2-ulp errors: 8u |y|). */
static void test_linear_forward(void) {
    static const struct {
        int rows, fi, fo, px, py, bias, act;
    } cases[] = {
        {256, 23, 256, 0, 0, 1, RLT_ACT_RELU},   /* 16x32 tiles, one k chunk */
        {256, 256, 256, 0, 0, 1, RLT_ACT_RELU},  /* 16x32 tiles, 8 chunks */
        {512, 256, 300, 3, 5, 1, RLT_ACT_NONE},  /* 32x32 tiles (the 16-byte tile), ragged n, x by 4 bytes */
        {512, 384, 300, 0, 0, 1, RLT_ACT_RELU},  /* the same with every operand by 16 bytes */
        {256, 256, 1, 0, 0, 1, RLT_ACT_NONE},    /* a critic's head: a warp per row */
        {100, 17, 6, 2, 1, 1, RLT_ACT_TANH},     /* an actor's head */
        {7, 33, 9, 1, 2, 0, RLT_ACT_TANH},       /* odd everything */
        {1, 1, 1, 0, 0, 1, RLT_ACT_RELU},        {3, 1000, 5, 0, 0, 1, RLT_ACT_NONE},
        {128, 84, 2, 0, 0, 1, RLT_ACT_NONE},     /* CartPole DQN's head */
        {128, 4, 120, 0, 0, 1, RLT_ACT_RELU},    /* CartPole DQN's first layer: K <= 4, a thread per element */
        {7, 3, 300, 2, 3, 1, RLT_ACT_NONE},      /* the same path past 256 columns, odd rows, padded rows */
        {64, 1500, 40, 0, 0, 1, RLT_ACT_RELU},   /* K beyond the fused kernels: cuBLAS */
        {0, 16, 16, 0, 0, 1, RLT_ACT_RELU},
    };
    printf("linear_forward\n");
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int rows = cases[t].rows, fi = cases[t].fi, fo = cases[t].fo, act = cases[t].act;
        int ldx = fi + cases[t].px, ldy = fo + cases[t].py;
        size_t nx = (size_t)(rows ? rows : 1) * ldx, nw = (size_t)fo * fi, ny = (size_t)(rows ? rows : 1) * ldy;
        float *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hb = malloc((size_t)fo * 4), *hy = malloc(ny * 4),
              *rc = malloc(ny * 4), *rg = malloc(ny * 4);
        double *bound = malloc(ny * sizeof *bound);
        rnd_fill(hx, nx, -1, 1);
        rnd_fill(hw, nw, -0.5f, 0.5f);
        rnd_fill(hb, (size_t)fo, -0.5f, 0.5f);
        rnd_fill(hy, ny, -9, 9); /* poison: every output must be written, the padding left alone */
        void *cx, *gx, *cw, *gw, *cb, *gb, *cy, *gy;
        take(nx * 4, &cx, &gx);
        take(nw * 4, &cw, &gw);
        take((size_t)fo * 4, &cb, &gb);
        take(ny * 4, &cy, &gy);
        put(cx, gx, hx, nx * 4);
        put(cw, gw, hw, nw * 4);
        put(cb, gb, hb, (size_t)fo * 4);
        put(cy, gy, hy, ny * 4);
        rlt_linear_fwd fc = {.rows = rows, .fi = fi, .fo = fo, .x = cx, .ldx = ldx, .W = cw,
                             .b = cases[t].bias ? cb : NULL, .y = cy, .ldy = ldy, .act = act};
        rlt_linear_fwd fg = fc;
        fg.x = gx, fg.W = gw, fg.b = cases[t].bias ? gb : NULL, fg.y = gy;
        int r1 = P.cpu.ops->linear_forward(&P.cpu, &fc);
        int r2 = P.gpu.ops->linear_forward(&P.gpu, &fg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "linear_forward case %zu: cpu %d gpu %d (%s)", t, r1, r2, P.egpu.msg);
        fetch(rc, rg, cy, gy, ny * 4);
        for (int r = 0; r < (rows ? rows : 1); r++)
            for (int o = 0; o < ldy; o++) {
                size_t at = (size_t)r * ldy + o;
                if (o >= fo || rows == 0) {
                    bound[at] = 0.0;
                    continue;
                }
                double s = cases[t].bias ? fabs(hb[o]) : 0.0;
                for (int i = 0; i < fi; i++) s += fabs((double)hx[(size_t)r * ldx + i] * hw[(size_t)o * fi + i]);
                bound[at] = 2.0 * gamma_n(fi + 2) * s + (act == RLT_ACT_TANH ? 8.0 * U * fabs(rc[at]) : 0.0) + 1e-37;
            }
        char what[96];
        snprintf(what, sizeof what, "linear_forward %dx%d->%d ldx=%d ldy=%d act=%d", rows, fi, fo, ldx, ldy, act);
        expect_close(what, rg, rc, ny, bound, 0, 0);
        free(hx), free(hw), free(hb), free(hy), free(rc), free(rg), free(bound);
        reset();
    }
}

/* linear_backward against the same kind of bound, per output: dW and db are sums over the rows (plus the
 * accumulated beta part), dx a sum over fo multiplied by act'(x), which both sides compute from the same x.
 * beta 0 must overwrite even NaN. */
static void test_linear_backward(void) {
    static const struct {
        int rows, fi, fo, act, want_w, want_b, want_x;
        float beta;
    } cases[] = {
        {256, 256, 256, RLT_ACT_RELU, 1, 1, 1, 1.0f}, /* hidden layer: both problems on 16x32 / 32x32 tiles */
        {512, 384, 384, RLT_ACT_RELU, 1, 1, 1, 1.0f}, /* both on 32x32 tiles: the 16-byte tile's single kernel */
        {256, 256, 1, RLT_ACT_RELU, 1, 1, 1, 1.0f},   /* critic head: column sums, dx with k = 1 */
        {256, 23, 256, RLT_ACT_NONE, 1, 1, 0, 0.0f},  /* first layer, overwrite */
        {128, 84, 2, RLT_ACT_RELU, 1, 1, 1, 1.0f},    {128, 4, 120, RLT_ACT_NONE, 1, 1, 0, 1.0f},
        {100, 17, 6, RLT_ACT_TANH, 1, 1, 1, 0.5f},    {33, 7, 9, RLT_ACT_TANH, 1, 1, 1, 1.0f},
        {33, 300, 3, RLT_ACT_RELU, 1, 1, 1, 1.0f},    /* dx with k = 3 past 256 columns, odd rows */
        {256, 300, 40, RLT_ACT_RELU, 0, 0, 1, 1.0f},  /* input gradient only (the actor step's critic) */
        {256, 64, 64, RLT_ACT_RELU, 0, 1, 0, 0.0f},   /* bias gradient alone */
        {1100, 16, 16, RLT_ACT_NONE, 1, 1, 1, 1.0f},  /* rows beyond the fused kernels: dW, db on cuBLAS */
        {32, 64, 1500, RLT_ACT_RELU, 1, 1, 1, 1.0f},  /* fo beyond them: dx on cuBLAS */
        {0, 8, 8, RLT_ACT_RELU, 1, 1, 1, 0.5f},       /* no rows: dW = beta dW */
    };
    printf("linear_backward\n");
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int rows = cases[t].rows, fi = cases[t].fi, fo = cases[t].fo, act = cases[t].act;
        float beta = cases[t].beta;
        int lddy = fo + 1, ldx = fi + 2, lddx = fi + 3, R = rows ? rows : 1;
        size_t ndy = (size_t)R * lddy, nx = (size_t)R * ldx, nw = (size_t)fo * fi, ndx = (size_t)R * lddx;
        float *hdy = malloc(ndy * 4), *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hdw = malloc(nw * 4),
              *hdb = malloc((size_t)fo * 4), *hdx = malloc(ndx * 4);
        float *oc = malloc((nw > ndx ? nw : ndx) * 4), *og = malloc((nw > ndx ? nw : ndx) * 4);
        double *bound = malloc((nw > ndx ? nw : ndx) * sizeof *bound);
        rnd_fill(hdy, ndy, -1, 1);
        rnd_fill(hx, nx, act == RLT_ACT_TANH ? -1.0f : -2.0f, act == RLT_ACT_TANH ? 1.0f : 2.0f);
        rnd_fill(hw, nw, -0.5f, 0.5f);
        rnd_fill(hdw, nw, -1, 1);
        rnd_fill(hdb, (size_t)fo, -1, 1);
        rnd_fill(hdx, ndx, -9, 9);
        if (beta == 0.0f) hdw[0] = hdb[0] = NAN;
        void *cdy, *gdy, *cx, *gx, *cw, *gw, *cdw, *gdw, *cdb, *gdb, *cdx, *gdx;
        take(ndy * 4, &cdy, &gdy);
        take(nx * 4, &cx, &gx);
        take(nw * 4, &cw, &gw);
        take(nw * 4, &cdw, &gdw);
        take((size_t)fo * 4, &cdb, &gdb);
        take(ndx * 4, &cdx, &gdx);
        put(cdy, gdy, hdy, ndy * 4);
        put(cx, gx, hx, nx * 4);
        put(cw, gw, hw, nw * 4);
        put(cdw, gdw, hdw, nw * 4);
        put(cdb, gdb, hdb, (size_t)fo * 4);
        put(cdx, gdx, hdx, ndx * 4);
        int ww = cases[t].want_w, wb = cases[t].want_b, wx = cases[t].want_x;
        rlt_linear_bwd bc = {.rows = rows, .fi = fi, .fo = fo, .dy = cdy, .lddy = lddy, .x = cx, .ldx = ldx, .act_x = act,
                             .W = cw, .dW = ww ? cdw : NULL, .db = wb ? cdb : NULL, .beta = beta, .dx = wx ? cdx : NULL,
                             .lddx = lddx};
        rlt_linear_bwd bg = bc;
        bg.dy = gdy, bg.x = gx, bg.W = gw, bg.dW = ww ? gdw : NULL, bg.db = wb ? gdb : NULL, bg.dx = wx ? gdx : NULL;
        int r1 = P.cpu.ops->linear_backward(&P.cpu, &bc);
        int r2 = P.gpu.ops->linear_backward(&P.gpu, &bg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "linear_backward case %zu: cpu %d gpu %d (%s)", t, r1, r2, P.egpu.msg);
        char what[112];
        /* dW (untouched when not asked for: bound 0) */
        fetch(oc, og, cdw, gdw, nw * 4);
        for (int o = 0; o < fo; o++)
            for (int i = 0; i < fi; i++) {
                double s = beta == 0.0f ? 0.0 : fabs((double)beta * hdw[(size_t)o * fi + i]);
                for (int r = 0; r < rows; r++) s += fabs((double)hdy[(size_t)r * lddy + o] * hx[(size_t)r * ldx + i]);
                bound[(size_t)o * fi + i] = ww ? 2.0 * gamma_n(rows + 2) * s + 1e-37 : 0.0;
            }
        snprintf(what, sizeof what, "linear_backward dW %d rows %d->%d beta=%g%s", rows, fi, fo, beta, ww ? "" : " (untouched)");
        if (ww) expect_close(what, og, oc, nw, bound, 0, 0);
        else expect_exact(what, og, oc, nw, 4);
        /* db */
        fetch(oc, og, cdb, gdb, (size_t)fo * 4);
        for (int o = 0; o < fo; o++) {
            double s = beta == 0.0f ? 0.0 : fabs((double)beta * hdb[o]);
            for (int r = 0; r < rows; r++) s += fabs((double)hdy[(size_t)r * lddy + o]);
            bound[o] = 2.0 * gamma_n(rows + 2) * s + 1e-37;
        }
        snprintf(what, sizeof what, "linear_backward db %d rows fo=%d%s", rows, fo, wb ? "" : " (untouched)");
        if (wb) expect_close(what, og, oc, (size_t)fo, bound, 0, 0);
        else expect_exact(what, og, oc, (size_t)fo, 4);
        /* dx, padding columns untouched */
        fetch(oc, og, cdx, gdx, ndx * 4);
        for (int r = 0; r < R; r++)
            for (int i = 0; i < lddx; i++) {
                size_t at = (size_t)r * lddx + i;
                if (!wx || i >= fi || rows == 0) {
                    bound[at] = 0.0;
                    continue;
                }
                double s = 0.0, xv = hx[(size_t)r * ldx + i];
                for (int o = 0; o < fo; o++) s += fabs((double)hdy[(size_t)r * lddy + o] * hw[(size_t)o * fi + i]);
                double f = act == RLT_ACT_TANH ? fabs(1.0 - xv * xv) : 1.0;
                bound[at] = 2.0 * gamma_n(fo + 2) * s * f + 4.0 * U * fabs(oc[at]) + 1e-37;
            }
        snprintf(what, sizeof what, "linear_backward dx %d rows %d<-%d act=%d", rows, fi, fo, act);
        expect_close(what, og, oc, ndx, bound, 0, 0);
        free(hdy), free(hx), free(hw), free(hdw), free(hdb), free(hdx), free(oc), free(og), free(bound);
        reset();
    }
}

/* ---- routed products: cuBLASLt with fused epilogues (kernels/cuda/gemm_lt.c) ----
 * Layers whose product has at least 2^30 multiply-adds leave the fused kernels for cuBLASLt: the forward with its
 * bias and ReLU in the epilogue (tanh as a pass after it), the weight gradient with the bias gradient in its
 * epilogue (written to scratch and added when beta != 0), the input gradient with act' as a pass. Checked against
 * the CPU with the bounds of test_linear_forward / test_linear_backward, whose S (the sum of the terms'
 * magnitudes) is computed here by the CPU's own ops on |x|, |W|, |dy| (in fp32, so S is off by at most gamma(k)
 * relative; the bounds use S (1 + 2^-10)). Covered: rows whose starts are not 16-byte aligned (the heuristic is
 * told the alignment), both bias-gradient routes, a side lane giving the bits of lane 0 (one algorithm per
 * problem, whatever the lane), a problem first met inside a graph capture replaying the bits of the same op run
 * eagerly, and precision: tf32 (plan_workspace's dense_tf32): the routed products within the TF32 bound and NOT
 * bit-identical to fp32 (TF32 engaged), a small product bit-identical to fp32 (it stays on our kernels).
 * TF32 bound: each input is rounded to 10 mantissa bits (2^-11 relative when rounded to nearest, 2^-10 when
 * truncated), so each product is off by at most 2^-9 + 2^-20 relative; with the fp32 summation bounds of both
 * sides, 2^-8 S + 2 gamma(k+2) S covers it with room. */
#define S_SLACK (1.0 + 1.0 / 1024.0)

#define set_tf32 pair_set_tf32

static void fabs_fill(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = fabsf(x[i]);
}

typedef struct routed_fwd {
    int rows, fi, fo, px, py, bias, act;
} routed_fwd;

/* How routed_forward_case runs the GPU's op a second time on the same inputs, into a second buffer. */
enum { TWIN_NONE, TWIN_LANE2, TWIN_GRAPH, TWIN_TF32 };

/* Runs fg on the GPU: captured into graph slot 7 and replayed (graph), or eagerly on `lane`. */
static int routed_gpu_forward(const rlt_linear_fwd *fg, int lane, int graph) {
    if (graph) {
        int rb = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 7);
        int ro = rb == RLT_OK ? P.gpu.ops->linear_forward(&P.gpu, fg) : rb;
        int re = rb == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 7) : rb;
        if (rb != RLT_OK || ro != RLT_OK || re != RLT_OK) return rb != RLT_OK ? rb : ro != RLT_OK ? ro : re;
        return P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 7);
    }
    RLT_TRY(P.gpu.ops->lane(&P.gpu, lane));
    RLT_TRY(P.gpu.ops->linear_forward(&P.gpu, fg));
    return P.gpu.ops->lane(&P.gpu, RLT_LANE_JOIN);
}

/* One routed forward on both backends: run A (fp32; captured first for TWIN_GRAPH, else eager on lane 0) within
 * the bound of the CPU, and its twin (see the enum) on the same inputs: bit-identical to run A (LANE2: on side
 * lane 2; GRAPH: eagerly after the captured run A), or for TF32 within the TF32 bound and different from run A in
 * at least 90% of the outputs. */
static void routed_forward_case(routed_fwd t, int twin) {
    int rows = t.rows, fi = t.fi, fo = t.fo, act = t.act, ldx = fi + t.px, ldy = fo + t.py;
    size_t nx = (size_t)rows * ldx, nw = (size_t)fo * fi, ny = (size_t)rows * ldy;
    float *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hb = malloc((size_t)fo * 4), *hy = malloc(ny * 4),
          *rc = malloc(ny * 4), *rg = malloc(ny * 4), *rg2 = malloc(ny * 4), *hs = malloc(ny * 4);
    double *bound = malloc(ny * sizeof *bound);
    rnd_fill(hx, nx, -1, 1);
    rnd_fill(hw, nw, -0.5f, 0.5f);
    rnd_fill(hb, (size_t)fo, -0.5f, 0.5f);
    rnd_fill(hy, ny, -9, 9); /* poison: every output must be written, the padding left alone */
    void *cx, *gx, *cw, *gw, *cb, *gb, *cy, *gy, *cy2, *gy2, *cs, *gs;
    take(nx * 4, &cx, &gx);
    take(nw * 4, &cw, &gw);
    take((size_t)fo * 4, &cb, &gb);
    take(ny * 4, &cy, &gy);
    take(ny * 4, &cy2, &gy2);
    put(cx, gx, hx, nx * 4);
    put(cw, gw, hw, nw * 4);
    put(cb, gb, hb, (size_t)fo * 4);
    put(cy, gy, hy, ny * 4);
    put(cy2, gy2, hy, ny * 4);
    rlt_linear_fwd fc = {.rows = rows, .fi = fi, .fo = fo, .x = cx, .ldx = ldx, .W = cw, .b = t.bias ? cb : NULL,
                         .y = cy, .ldy = ldy, .act = act};
    rlt_linear_fwd fg = fc;
    fg.x = gx, fg.W = gw, fg.b = t.bias ? gb : NULL, fg.y = gy;
    rlt_linear_fwd fg2 = fg;
    fg2.y = gy2;
    int r1 = P.cpu.ops->linear_forward(&P.cpu, &fc);
    int r2 = routed_gpu_forward(&fg, 0, twin == TWIN_GRAPH);
    int r3 = RLT_OK;
    if (twin == TWIN_TF32) set_tf32(1);
    if (twin != TWIN_NONE) r3 = routed_gpu_forward(&fg2, twin == TWIN_LANE2 ? 2 : 0, 0);
    if (twin == TWIN_TF32) set_tf32(0);
    CHECK(r1 == RLT_OK && r2 == RLT_OK && r3 == RLT_OK, "routed linear_forward %dx%d->%d: cpu %d gpu %d twin %d (%s)",
          rows, fi, fo, r1, r2, r3, P.egpu.msg);
    fetch(rc, rg, cy, gy, ny * 4);
    fetch(hy, rg2, cy2, gy2, ny * 4);
    /* S = |x| |W|^T + |b| by the CPU's own forward, into cy2 (the CPU's copy is free). */
    fabs_fill(hx, nx);
    fabs_fill(hw, nw);
    fabs_fill(hb, (size_t)fo);
    put(cx, gx, hx, nx * 4);
    put(cw, gw, hw, nw * 4);
    put(cb, gb, hb, (size_t)fo * 4);
    take(ny * 4, &cs, &gs);
    rlt_linear_fwd fs = fc;
    fs.y = cs, fs.act = RLT_ACT_NONE;
    die_on(P.cpu.ops->linear_forward(&P.cpu, &fs), &P.ecpu, "S for the bound");
    memcpy(hs, cs, ny * 4);
    for (int pass = 0; pass < (twin == TWIN_TF32 ? 2 : 1); pass++) {
        double rel = 2.0 * gamma_n(fi + 2) + (pass ? PAIR_TF32_REL : 0.0);
        for (size_t r = 0; r < (size_t)rows; r++)
            for (size_t o = 0; o < (size_t)ldy; o++) {
                size_t at = r * ldy + o;
                bound[at] = (int)o >= fo ? 0.0
                                         : rel * hs[at] * S_SLACK + (act == RLT_ACT_TANH ? 8.0 * U * fabs(rc[at]) : 0.0) +
                                               1e-37;
            }
        char what[128];
        snprintf(what, sizeof what, "routed fwd%s %dx%d->%d ld %d/%d act=%d%s%s", pass ? " tf32" : "", rows, fi, fo, ldx,
                 ldy, act, t.bias ? " bias" : "", twin == TWIN_GRAPH ? " (graph)" : "");
        expect_close(what, pass ? rg2 : rg, rc, ny, bound, 0, 0);
    }
    if (twin == TWIN_LANE2 || twin == TWIN_GRAPH)
        expect_exact(twin == TWIN_LANE2 ? "routed fwd: side lane 2 gives lane 0's bits"
                                        : "routed fwd: eager run gives the captured run's bits",
                     rg2, rg, ny, 4);
    if (twin == TWIN_TF32) {
        size_t differ = 0, outputs = (size_t)rows * fo;
        for (size_t r = 0; r < (size_t)rows; r++)
            for (size_t o = 0; o < (size_t)fo; o++) differ += memcmp(&rg[r * ldy + o], &rg2[r * ldy + o], 4) != 0;
        printf("  tf32 against fp32 on the GPU: %zu of %zu outputs differ\n", differ, outputs);
        CHECK(differ * 10 >= outputs * 9, "tf32 engaged: only %zu of %zu outputs differ from fp32", differ, outputs);
    }
    free(hx), free(hw), free(hb), free(hy), free(rc), free(rg), free(rg2), free(hs), free(bound);
    reset();
}

typedef struct routed_bwd {
    int rows, fi, fo, act, pdy;
    float beta;
} routed_bwd;

/* One routed backward (dW, db and dx all asked for) on both backends against the bounds (tf32: computed with
 * dense_tf32, against the TF32 bounds). */
static void routed_backward_case(routed_bwd t, int tf32) {
    int rows = t.rows, fi = t.fi, fo = t.fo, act = t.act;
    float beta = t.beta;
    int lddy = fo + t.pdy, ldx = fi, lddx = fi;
    size_t ndy = (size_t)rows * lddy, nx = (size_t)rows * ldx, nw = (size_t)fo * fi, ndx = (size_t)rows * lddx;
    size_t nmax = nw > ndx ? nw : ndx;
    float *hdy = malloc(ndy * 4), *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hdw = malloc(nw * 4),
          *hdb = malloc((size_t)fo * 4), *hdx = malloc(ndx * 4), *oc = malloc(nmax * 4), *og = malloc(nmax * 4),
          *hs = malloc(nmax * 4);
    double *bound = malloc(nmax * sizeof *bound);
    rnd_fill(hdy, ndy, -1, 1);
    rnd_fill(hx, nx, act == RLT_ACT_TANH ? -1.0f : -2.0f, act == RLT_ACT_TANH ? 1.0f : 2.0f);
    rnd_fill(hw, nw, -0.5f, 0.5f);
    rnd_fill(hdw, nw, -1, 1);
    rnd_fill(hdb, (size_t)fo, -1, 1);
    rnd_fill(hdx, ndx, -9, 9);
    if (beta == 0.0f) hdw[0] = hdb[0] = NAN; /* beta 0 overwrites, never reads */
    void *cdy, *gdy, *cx, *gx, *cw, *gw, *cdw, *gdw, *cdb, *gdb, *cdx, *gdx;
    take(ndy * 4, &cdy, &gdy);
    take(nx * 4, &cx, &gx);
    take(nw * 4, &cw, &gw);
    take(nw * 4, &cdw, &gdw);
    take((size_t)fo * 4, &cdb, &gdb);
    take(ndx * 4, &cdx, &gdx);
    put(cdy, gdy, hdy, ndy * 4);
    put(cx, gx, hx, nx * 4);
    put(cw, gw, hw, nw * 4);
    put(cdw, gdw, hdw, nw * 4);
    put(cdb, gdb, hdb, (size_t)fo * 4);
    put(cdx, gdx, hdx, ndx * 4);
    rlt_linear_bwd bc = {.rows = rows, .fi = fi, .fo = fo, .dy = cdy, .lddy = lddy, .x = cx, .ldx = ldx, .act_x = act,
                         .W = cw, .dW = cdw, .db = cdb, .beta = beta, .dx = cdx, .lddx = lddx};
    rlt_linear_bwd bg = bc;
    bg.dy = gdy, bg.x = gx, bg.W = gw, bg.dW = gdw, bg.db = gdb, bg.dx = gdx;
    int r1 = P.cpu.ops->linear_backward(&P.cpu, &bc);
    if (tf32) set_tf32(1);
    int r2 = P.gpu.ops->linear_backward(&P.gpu, &bg);
    if (tf32) set_tf32(0);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "routed linear_backward %d rows %d<->%d: cpu %d gpu %d (%s)", rows, fi, fo, r1, r2,
          P.egpu.msg);
    /* The results of both, then S for dW, db and dx by the CPU's backward on magnitudes, into the CPU's buffers:
     * dW0 and db0 times |beta| (0 when beta is 0), dx with no activation (act'(x) is applied below). */
    float *rdw = malloc(nw * 4), *gdwh = malloc(nw * 4), *rdb = malloc((size_t)fo * 4), *gdbh = malloc((size_t)fo * 4);
    fetch(rdw, gdwh, cdw, gdw, nw * 4);
    fetch(rdb, gdbh, cdb, gdb, (size_t)fo * 4);
    fetch(oc, og, cdx, gdx, ndx * 4);
    for (size_t i = 0; i < nw; i++) hdw[i] = beta == 0.0f ? 0.0f : fabsf(beta * hdw[i]);
    for (int o = 0; o < fo; o++) hdb[o] = beta == 0.0f ? 0.0f : fabsf(beta * hdb[o]);
    float *hax = malloc(nx * 4);
    memcpy(hax, hx, nx * 4);
    fabs_fill(hdy, ndy);
    fabs_fill(hax, nx);
    fabs_fill(hw, nw);
    put(cdy, gdy, hdy, ndy * 4);
    put(cx, gx, hax, nx * 4);
    put(cw, gw, hw, nw * 4);
    put(cdw, gdw, hdw, nw * 4);
    put(cdb, gdb, hdb, (size_t)fo * 4);
    rlt_linear_bwd bs = bc;
    bs.act_x = RLT_ACT_NONE, bs.beta = 1.0f;
    die_on(P.cpu.ops->linear_backward(&P.cpu, &bs), &P.ecpu, "S for the bounds");
    double extra = tf32 ? PAIR_TF32_REL : 0.0;
    char what[128];
    /* dW */
    memcpy(hs, cdw, nw * 4);
    for (size_t i = 0; i < nw; i++) bound[i] = (2.0 * gamma_n(rows + 2) + extra) * hs[i] * S_SLACK + 1e-37;
    snprintf(what, sizeof what, "routed bwd%s dW %d rows %d->%d beta=%g", tf32 ? " tf32" : "", rows, fi, fo, beta);
    expect_close(what, gdwh, rdw, nw, bound, 0, 0);
    /* db: a sum over the rows of dy (the values cuBLASLt loads, TF32-rounded or not) */
    memcpy(hs, cdb, (size_t)fo * 4);
    for (int o = 0; o < fo; o++) bound[o] = (2.0 * gamma_n(rows + 2) + extra) * hs[o] * S_SLACK + 1e-37;
    snprintf(what, sizeof what, "routed bwd%s db %d rows fo=%d beta=%g", tf32 ? " tf32" : "", rows, fo, beta);
    expect_close(what, gdbh, rdb, (size_t)fo, bound, 0, 0);
    /* dx */
    memcpy(hs, cdx, ndx * 4);
    for (size_t r = 0; r < (size_t)rows; r++)
        for (size_t i = 0; i < (size_t)fi; i++) {
            size_t at = r * lddx + i;
            double xv = hx[r * ldx + i], f = act == RLT_ACT_TANH ? fabs(1.0 - xv * xv) : 1.0;
            bound[at] = (2.0 * gamma_n(fo + 2) + extra) * hs[at] * S_SLACK * f + 4.0 * U * fabs(oc[at]) + 1e-37;
        }
    snprintf(what, sizeof what, "routed bwd%s dx %d rows %d<-%d act=%d", tf32 ? " tf32" : "", rows, fi, fo, act);
    expect_close(what, og, oc, ndx, bound, 0, 0);
    free(hdy), free(hx), free(hax), free(hw), free(hdw), free(hdb), free(hdx), free(oc), free(og), free(hs), free(bound);
    free(rdw), free(gdwh), free(rdb), free(gdbh);
    reset();
}

/* CUDA fuses a chain only while at least this many seeds are batched (linear_chain.cu's CHAIN_MIN_SEEDS). */
#define CHAIN_SEEDS 8

/* Seed batching for the chain tests: seed z's buffers lie gs[z] - gs[0] bytes from seed 0's, its RNG seed z + 1;
 * delta: the host's copy of the offsets, which seed_batch also takes. */
#define LIB_SEEDS 32 /* from 32 batched agents every product goes to the library (cuda_rule_seeds_blas_as) */
static void seeds_batch_n(int n, void *const *gs, void *cd, void *gd, void *ck, void *gk, int64_t *delta) {
    uint64_t seed[LIB_SEEDS];
    for (int z = 0; z < n; z++) delta[z] = (int64_t)((char *)gs[z] - (char *)gs[0]), seed[z] = (uint64_t)z + 1;
    put(cd, gd, delta, (size_t)n * sizeof *delta);
    put(ck, gk, seed, (size_t)n * sizeof *seed);
}
static void chain_seed_batch(void *const *gs, void *cd, void *gd, void *ck, void *gk, int64_t *delta) {
    seeds_batch_n(CHAIN_SEEDS, gs, cd, gd, ck, gk, delta);
}

/* linear_chain_forward against linear_forward layer by layer, all on the GPU: the chain runs for CHAIN_SEEDS seeds
 * batched (seed_batch: seed z's buffers a fixed distance from seed 0's, its own inputs), which is when CUDA fuses it
 * into one launch; each seed's every layer output must equal, byte for byte, linear_forward run alone on that seed's
 * inputs (the chain repeats each layer kernel's sums in their order), the output's padding columns untouched. The networks
 * take each path of the fused chain (K <= 4 products, the GEMM's 8 and 4 k-groups, a warp per row, zeros past a
 * narrow layer's output feeding a GEMM) and the layer-by-layer fallback (a 256-wide one). */
static void test_linear_chain(void) {
    static const struct {
        int rows, ldx_pad, n;
        int dims[6];
        int act[5];
    } nets[] = {
        {128, 0, 3, {4, 120, 84, 2}, {RLT_ACT_RELU, RLT_ACT_RELU, RLT_ACT_NONE}}, /* CartPole's DQN */
        {1, 0, 3, {4, 120, 84, 2}, {RLT_ACT_RELU, RLT_ACT_RELU, RLT_ACT_NONE}},   /* one row */
        {37, 2, 3, {3, 64, 64, 1}, {RLT_ACT_TANH, RLT_ACT_RELU, RLT_ACT_NONE}},   /* a ragged last block */
        /* 4 k-groups (32x32 tiles); each product under 2^20 multiply-adds, from which batched seeds' fp32 products
         * with all dimensions of 16 or more go to the library (cuda_rule_seeds_blas) */
        {448, 0, 2, {17, 128, 6}, {RLT_ACT_RELU, RLT_ACT_TANH}},
        {9, 1, 4, {8, 33, 7, 40, 3}, {RLT_ACT_RELU, RLT_ACT_TANH, RLT_ACT_RELU, RLT_ACT_NONE}},
        /* too wide: layer by layer (32 rows keep its 256 x 256 product on linear.cu's kernels; from 2^22 multiply-adds
         * batched seeds' products go to the library: test_seeds_library) */
        {32, 0, 3, {23, 256, 256, 1}, {RLT_ACT_RELU, RLT_ACT_RELU, RLT_ACT_NONE}},
    };
    printf("linear_chain_forward, %d seeds batched, vs linear_forward per layer and seed (GPU)\n", CHAIN_SEEDS);
    for (size_t t = 0; t < sizeof nets / sizeof nets[0]; t++) {
        int rows = nets[t].rows, n = nets[t].n, ldx = nets[t].dims[0] + nets[t].ldx_pad;
        int last = nets[t].dims[n], ldo = last + 3; /* the output's row has 3 padding columns */
        size_t nx = (size_t)rows * ldx, nw = 0, ny = 0;
        for (int l = 0; l < n; l++) {
            nw += (size_t)nets[t].dims[l] * nets[t].dims[l + 1] + nets[t].dims[l + 1];
            ny += (size_t)rows * (l + 1 < n ? nets[t].dims[l + 1] : ldo);
        }
        size_t per = nx + nw + ny; /* a seed's block: x, the weights, the chain's outputs */
        float *h = malloc(per * 4), *ya = malloc(ny * 4), *yb = malloc(ny * 4);
        void *cs[CHAIN_SEEDS], *gs[CHAIN_SEEDS], *cr[CHAIN_SEEDS], *gr[CHAIN_SEEDS], *cd, *gd, *ck, *gk;
        for (int z = 0; z < CHAIN_SEEDS; z++) take(per * 4, &cs[z], &gs[z]);
        for (int z = 0; z < CHAIN_SEEDS; z++) take(ny * 4, &cr[z], &gr[z]); /* the per-layer reference's outputs */
        take(CHAIN_SEEDS * sizeof(int64_t), &cd, &gd);
        take(CHAIN_SEEDS * sizeof(uint64_t), &ck, &gk);
        for (int z = 0; z < CHAIN_SEEDS; z++) {
            rnd_fill(h, nx, -1, 1);
            rnd_fill(h + nx, nw, -0.5f, 0.5f);
            rnd_fill(h + nx + nw, ny, -9, 9); /* poison */
            put(cs[z], gs[z], h, per * 4);
            put(cr[z], gr[z], h + nx + nw, ny * 4);
        }
        int64_t delta[CHAIN_SEEDS];
        chain_seed_batch(gs, cd, gd, ck, gk, delta);
        /* the layers of seed z's block (y in its block) or of its reference (y in gr[z]) */
        rlt_linear_fwd la[5], lb[CHAIN_SEEDS][5];
        for (int z = -1; z < CHAIN_SEEDS; z++) {
            const float *base = gs[z < 0 ? 0 : z], *w = base + nx, *in = base;
            float *y = z < 0 ? (float *)base + nx + nw : gr[z];
            int ld_in = ldx;
            for (int l = 0; l < n; l++) {
                int fi = nets[t].dims[l], fo = nets[t].dims[l + 1], ldy = l + 1 < n ? fo : ldo;
                rlt_linear_fwd f = {.rows = rows, .fi = fi, .fo = fo, .x = in, .ldx = ld_in, .W = w,
                                    .b = w + (size_t)fo * fi, .y = y, .ldy = ldy, .act = nets[t].act[l]};
                if (z < 0) la[l] = f;
                else lb[z][l] = f;
                in = y, ld_in = ldy;
                w += (size_t)fo * fi + fo;
                y += (size_t)rows * ldy;
            }
        }
        int r0 = P.gpu.ops->seed_batch(&P.gpu, &(rlt_seeds_desc){.n = CHAIN_SEEDS, .delta = gd, .seed = gk, .delta_host = delta});
        int r1 = r0 == RLT_OK ? P.gpu.ops->linear_chain_forward(&P.gpu, la, n) : r0;
        int r2 = P.gpu.ops->seed_batch(&P.gpu, NULL);
        for (int z = 0; z < CHAIN_SEEDS; z++)
            for (int l = 0; l < n && r2 == RLT_OK; l++) r2 = P.gpu.ops->linear_forward(&P.gpu, &lb[z][l]);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "linear_chain_forward net %zu: chain %d layers %d (%s)", t, r1, r2,
              P.egpu.msg);
        for (int z = 0; z < CHAIN_SEEDS; z++) {
            fetch(h, ya, cs[z], (char *)gs[z] + (nx + nw) * 4, ny * 4); /* h: the CPU side, unused */
            fetch(h, yb, cr[z], gr[z], ny * 4);
            char what[112];
            snprintf(what, sizeof what, "linear_chain_forward seed %d: %d rows, %d layers %d->..->%d", z, rows, n,
                     nets[t].dims[0], last);
            expect_exact(what, ya, yb, ny, 4);
        }
        free(h), free(ya), free(yb);
        reset();
    }
}

/* Batched seeds' narrow backward passes against a single agent's, byte for byte: CHAIN_SEEDS seeds, each with its own
 * dy, x and W, run one linear_backward of the lead's descriptors, and each seed's dW, db and dx must equal
 * linear_backward run alone on its buffers. With seeds batched, an input gradient of K <= 8 (an actor's 6 actions)
 * takes the OUTER path with rows per thread loaded ahead, where one agent takes a 16- or 32-row GEMM tile (K = 6 at
 * 256 and 448 rows) or OUTER with 2 rows (K = 1, a critic's head): linear.cu repeats that tile's k-groups. */
static void test_seeds_narrow_backward(void) {
    static const struct { int rows, fi, fo, act; } cases[] = {
        {256, 256, 6, RLT_ACT_RELU}, /* one agent: 16-row tiles, 4 k a group */
        {448, 256, 6, RLT_ACT_TANH}, /* one agent: 32-row tiles, 8 k a group */
        {256, 64, 8, RLT_ACT_RELU},  /* two full groups of 4 */
        {200, 96, 5, RLT_ACT_NONE},  /* ragged rows */
        {256, 256, 1, RLT_ACT_RELU}, /* a critic's head */
    };
    printf("batched seeds' narrow backward (%d seeds) vs one agent's, byte for byte (GPU)\n", CHAIN_SEEDS);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int rows = cases[t].rows, fi = cases[t].fi, fo = cases[t].fo;
        /* a seed's block: dy | x | W | dW | db | dx, then the reference's dW | db | dx */
        size_t ndy = (size_t)rows * fo, nx = (size_t)rows * fi, nw = (size_t)fo * fi;
        size_t ody = 0, ox = ody + ndy, ow = ox + nx, odw = ow + nw, odb = odw + nw, odx = odb + (size_t)fo,
               oref = odx + nx, nout = nw + (size_t)fo + nx, per = oref + nout;
        float *h = malloc(per * 4), *got = malloc(per * 4);
        void *cs[CHAIN_SEEDS], *gs[CHAIN_SEEDS], *cd, *gd, *ck, *gk;
        for (int z = 0; z < CHAIN_SEEDS; z++) take(per * 4, &cs[z], &gs[z]);
        take(CHAIN_SEEDS * sizeof(int64_t), &cd, &gd);
        take(CHAIN_SEEDS * sizeof(uint64_t), &ck, &gk);
        for (int z = 0; z < CHAIN_SEEDS; z++) {
            rnd_fill(h, per, -9, 9); /* poison the outputs */
            rnd_fill(h + ody, ndy, -1, 1);
            rnd_fill(h + ox, nx, cases[t].act == RLT_ACT_RELU ? -0.5f : -1, 1); /* activations, zeros among ReLU's */
            for (size_t i = 0; i < nx && cases[t].act == RLT_ACT_RELU; i++) h[ox + i] = h[ox + i] < 0 ? 0 : h[ox + i];
            rnd_fill(h + ow, nw, -0.5f, 0.5f);
            put(cs[z], gs[z], h, per * 4);
        }
        int64_t delta[CHAIN_SEEDS];
        chain_seed_batch(gs, cd, gd, ck, gk, delta);
#define NARROW_BWD(base, out) {.rows = rows, .fi = fi, .fo = fo, .dy = (float *)(base) + ody, .lddy = fo,              \
                               .x = (float *)(base) + ox, .ldx = fi, .W = (float *)(base) + ow,                        \
                               .dW = (float *)(base) + (out), .db = (float *)(base) + (out) + nw, .beta = 0.0f,        \
                               .dx = (float *)(base) + (out) + nw + fo, .lddx = fi, .act_x = cases[t].act}
        rlt_linear_bwd lead = NARROW_BWD(gs[0], odw);
        int r0 = P.gpu.ops->seed_batch(&P.gpu, &(rlt_seeds_desc){.n = CHAIN_SEEDS, .delta = gd, .seed = gk, .delta_host = delta});
        int r1 = r0 == RLT_OK ? P.gpu.ops->linear_backward(&P.gpu, &lead) : r0;
        int r2 = P.gpu.ops->seed_batch(&P.gpu, NULL);
        for (int z = 0; z < CHAIN_SEEDS && r2 == RLT_OK; z++) {
            rlt_linear_bwd one = NARROW_BWD(gs[z], oref);
            r2 = P.gpu.ops->linear_backward(&P.gpu, &one);
        }
#undef NARROW_BWD
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "narrow backward %d rows %d<-%d: batched %d single %d (%s)", rows, fi, fo,
              r1, r2, P.egpu.msg);
        for (int z = 0; z < CHAIN_SEEDS; z++) {
            fetch(h, got, cs[z], gs[z], per * 4);
            char what[112];
            snprintf(what, sizeof what, "batched narrow backward seed %d: %d rows %d<-%d (dW, db, dx)", z, rows, fi, fo);
            expect_exact(what, got + odw, got + oref, nout, 4);
        }
        free(h), free(got);
        reset();
    }
}

/* Under dense_tf32 a product below the routing threshold stays on our fp32 kernels: the same bits as without. */
/* Seed-batched layers on the library (cuda_plan_rules.h, cuda_rule_seeds_blas_as: below 32 agents from 2^20
 * multiply-adds and 2^14 outputs per seed in fp32, from 16 in every dimension under tf32; from 32 agents every
 * product): Z seeds, each with its own x, W, b and dy at its own place in the arena, run
 * as one captured forward and backward (dW, db, dx) of the lead's descriptors; every seed's outputs must be its own
 * CPU forward and backward within the bounds of routed_forward_case (fp32: 2 gamma(K + 2) S for a length-K sum, S
 * the same sum over absolute values; tf32: plus PAIR_TF32_REL S), so each batched agent read and wrote its own
 * buffers. */
static void seeds_library_case(int Z, int rows, int fi, int fo, int act, int tf32) {
    size_t nx = (size_t)rows * fi, nw = (size_t)fo * fi, ny = (size_t)rows * fo;
    /* a seed's block: x | W | b | y | dy | dW | db | dx */
    size_t ox = 0, ow = ox + nx, ob = ow + nw, oy = ob + (size_t)fo, ody = oy + ny, odw = ody + ny, odb = odw + nw,
           odx = odb + (size_t)fo, per = odx + nx;
    float *h = malloc(per * 4), *rc = malloc(per * 4), *rg = malloc(per * 4), *sa = malloc(per * 4);
    double *bound = malloc(per * sizeof *bound);
    void *cs[LIB_SEEDS], *gs[LIB_SEEDS], *ca, *ga, *cd, *gd, *ck, *gk;
    for (int z = 0; z < Z; z++) take(per * 4, &cs[z], &gs[z]);
    take(per * 4, &ca, &ga); /* the CPU's sums over absolute values */
    take(Z * sizeof(int64_t), &cd, &gd);
    take(Z * sizeof(uint64_t), &ck, &gk);
    for (int z = 0; z < Z; z++) {
        rnd_fill(h, per, -9, 9); /* poison the outputs */
        rnd_fill(h + ox, nx, -1, 1);
        rnd_fill(h + ow, nw, -0.5f, 0.5f);
        rnd_fill(h + ob, (size_t)fo, -0.5f, 0.5f);
        rnd_fill(h + ody, ny, -1, 1);
        put(cs[z], gs[z], h, per * 4);
    }
    int64_t delta[LIB_SEEDS];
    seeds_batch_n(Z, gs, cd, gd, ck, gk, delta);
    if (tf32) set_tf32(1);
    /* descriptors of block base (CPU or GPU) */
#define SEEDS_FWD(base) {.rows = rows, .fi = fi, .fo = fo, .x = (float *)(base) + ox, .ldx = fi, .W = (float *)(base) + ow, \
                         .b = (float *)(base) + ob, .y = (float *)(base) + oy, .ldy = fo, .act = act}
#define SEEDS_BWD(base, a) {.rows = rows, .fi = fi, .fo = fo, .dy = (float *)(base) + ody, .lddy = fo,               \
                            .x = (float *)(base) + ox, .ldx = fi, .W = (float *)(base) + ow, .dW = (float *)(base) + odw, \
                            .db = (float *)(base) + odb, .beta = 0.0f, .dx = (float *)(base) + odx, .lddx = fi, .act_x = (a)}
    rlt_linear_fwd fg = SEEDS_FWD(gs[0]);
    rlt_linear_bwd bg = SEEDS_BWD(gs[0], RLT_ACT_RELU);
    int rb = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 7);
    int r0 = rb == RLT_OK ? P.gpu.ops->seed_batch(&P.gpu, &(rlt_seeds_desc){.n = Z, .delta = gd, .seed = gk, .delta_host = delta}) : rb;
    int r1 = r0 == RLT_OK ? P.gpu.ops->linear_forward(&P.gpu, &fg) : r0;
    int r2 = r1 == RLT_OK ? P.gpu.ops->linear_backward(&P.gpu, &bg) : r1;
    P.gpu.ops->seed_batch(&P.gpu, NULL);
    int re = rb == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 7) : rb;
    int rl = re == RLT_OK && r2 == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 7) : re;
    if (tf32) set_tf32(0);
    CHECK(r2 == RLT_OK && rl == RLT_OK, "%d seeds on the library %dx%d->%d%s: capture %d launch %d (%s)", Z, rows, fi,
          fo, tf32 ? " tf32" : "", r2, rl, P.egpu.msg);
    for (int z = 0; z < Z && r2 == RLT_OK && rl == RLT_OK; z++) {
        rlt_linear_fwd fc = SEEDS_FWD(cs[z]);
        rlt_linear_bwd bc = SEEDS_BWD(cs[z], RLT_ACT_RELU);
        die_on(P.cpu.ops->linear_forward(&P.cpu, &fc), &P.ecpu, "cpu forward");
        die_on(P.cpu.ops->linear_backward(&P.cpu, &bc), &P.ecpu, "cpu backward");
        fetch(rc, rg, cs[z], gs[z], per * 4);
        /* S: the same forward and backward over absolute values, no activation, into the scratch block */
        for (size_t i = 0; i < per; i++) sa[i] = fabsf(rc[i]);
        memcpy((char *)ca, sa, per * 4);
        rlt_linear_fwd fa = SEEDS_FWD(ca);
        fa.act = RLT_ACT_NONE;
        rlt_linear_bwd ba = SEEDS_BWD(ca, RLT_ACT_NONE);
        die_on(P.cpu.ops->linear_forward(&P.cpu, &fa), &P.ecpu, "cpu S forward");
        die_on(P.cpu.ops->linear_backward(&P.cpu, &ba), &P.ecpu, "cpu S backward");
        memcpy(sa, ca, per * 4);
        const struct { size_t off, n; int k; const char *name; } part[] = {
            {oy, ny, fi, "y"}, {odw, nw, rows, "dW"}, {odb, (size_t)fo, rows, "db"}, {odx, nx, fo, "dx"}};
        for (int p = 0; p < 4; p++) {
            double rel = 2.0 * gamma_n(part[p].k + 2) + (tf32 ? PAIR_TF32_REL : 0.0);
            for (size_t i = 0; i < part[p].n; i++)
                bound[i] = rel * sa[part[p].off + i] * S_SLACK +
                           (p == 0 && act == RLT_ACT_TANH ? 8.0 * U * fabs(rc[part[p].off + i]) : 0.0) + 1e-37;
            char what[128];
            snprintf(what, sizeof what, "%d seeds lib%s %dx%d->%d seed %d %s", Z, tf32 ? " tf32" : "", rows, fi, fo,
                     z, part[p].name);
            /* db has no product: the library path sums it with our kernel, in another order than the CPU's */
            expect_close(what, rg + part[p].off, rc + part[p].off, part[p].n, bound, 0, 0);
        }
    }
#undef SEEDS_FWD
#undef SEEDS_BWD
    free(h), free(rc), free(rg), free(sa), free(bound);
    reset();
}

static void test_seeds_library(void) {
    printf("seed-batched layers on the library (captured), vs the CPU per seed\n");
    seeds_library_case(CHAIN_SEEDS, 256, 256, 256, RLT_ACT_RELU, 0); /* TD3 256-256's hidden layer at batch 256 */
    seeds_library_case(CHAIN_SEEDS, 200, 96, 136, RLT_ACT_TANH, 1);  /* tf32: any product from 16 wide; ragged tiles */
    /* 32 agents: every product, a 64-wide critic's one output and its 6 actions' first layer among them */
    seeds_library_case(LIB_SEEDS, 256, 64, 1, RLT_ACT_NONE, 0);
    seeds_library_case(LIB_SEEDS, 256, 6, 64, RLT_ACT_RELU, 0);
    seeds_library_case(LIB_SEEDS, 130, 64, 64, RLT_ACT_TANH, 1);
}

static void routed_small_stays_fp32(void) {
    const int rows = 256, fi = 256, fo = 256;
    size_t nx = (size_t)rows * fi, nw = (size_t)fo * fi, ny = (size_t)rows * fo;
    float *h = malloc(nx * 4), *r0 = malloc(ny * 4), *r1 = malloc(ny * 4), *junk = malloc(ny * 4);
    void *cx, *gx, *cw, *gw, *cb, *gb, *cy, *gy;
    take(nx * 4, &cx, &gx);
    take(nw * 4, &cw, &gw);
    take((size_t)fo * 4, &cb, &gb);
    take(ny * 4, &cy, &gy);
    rnd_fill(h, nx, -1, 1);
    put(cx, gx, h, nx * 4);
    rnd_fill(h, nw, -0.5f, 0.5f);
    put(cw, gw, h, nw * 4);
    rnd_fill(h, (size_t)fo, -0.5f, 0.5f);
    put(cb, gb, h, (size_t)fo * 4);
    rlt_linear_fwd fg = {.rows = rows, .fi = fi, .fo = fo, .x = gx, .ldx = fi, .W = gw, .b = gb, .y = gy, .ldy = fo,
                         .act = RLT_ACT_RELU};
    int ra = P.gpu.ops->linear_forward(&P.gpu, &fg);
    fetch(junk, r0, cy, gy, ny * 4);
    set_tf32(1);
    int rb = P.gpu.ops->linear_forward(&P.gpu, &fg);
    set_tf32(0);
    fetch(junk, r1, cy, gy, ny * 4);
    CHECK(ra == RLT_OK && rb == RLT_OK, "small forward: %s", P.egpu.msg);
    expect_exact("tf32: a 256x256->256 forward (not routed) keeps fp32's bits", r1, r0, ny, 4);
    free(h), free(r0), free(r1), free(junk);
    reset();
}

static void test_linear_routed(void) {
    printf("routed dense products (cuBLASLt epilogues)\n");
    routed_forward_case((routed_fwd){1024, 1024, 1024, 0, 0, 1, RLT_ACT_RELU}, TWIN_LANE2); /* RELU_BIAS epilogue */
    routed_forward_case((routed_fwd){1024, 1024, 1024, 1, 3, 1, RLT_ACT_TANH}, TWIN_NONE);  /* BIAS, tanh pass; rows unaligned */
    routed_forward_case((routed_fwd){1536, 1024, 1024, 4, 4, 1, RLT_ACT_RELU}, TWIN_GRAPH); /* first met in a capture */
    routed_forward_case((routed_fwd){2048, 512, 1024, 0, 0, 0, RLT_ACT_NONE}, TWIN_TF32);   /* no epilogue; tf32 */
    routed_backward_case((routed_bwd){1024, 1024, 1024, RLT_ACT_RELU, 0, 1.0f}, 0);        /* db via scratch + add */
    routed_backward_case((routed_bwd){2048, 512, 1024, RLT_ACT_TANH, 1, 0.0f}, 0);         /* db from BGRADB itself */
    routed_backward_case((routed_bwd){1024, 1024, 1024, RLT_ACT_RELU, 0, 1.0f}, 1);        /* tf32 */
    routed_small_stays_fp32();
}

/* gather_fields: byte for byte the CPU's gathers, with and without the sampling folded in, with an indirect
 * field (DQN's next frame), rows of 16-, 4- and 1-byte words, and guard bytes after every destination. */
static void test_gather_fields(void) {
    printf("gather_fields\n");
    enum { R = 777, NB = 300, ROW0 = 37, NR = 250 };
    static const uint64_t rb[7] = {68, 24, 4, 4, 68, 13, 64};
    static const uint64_t stride[7] = {92, 92, 4, 4, 92, 16, 64};
    void *cs[7], *gs[7], *cd[7], *gd[7], *cnext, *gnext, *cvalid, *gvalid, *ci, *gi, *csz, *gsz, *cctr, *gctr;
    unsigned char *hs = malloc(R * 68), *hd = malloc(NB * 92 + 64), *oc = malloc(NB * 92 + 64), *og = malloc(NB * 92 + 64);
    for (int f = 0; f < 7; f++) {
        take(R * rb[f], &cs[f], &gs[f]);
        take(NB * stride[f] + 64, &cd[f], &gd[f]);
        for (uint64_t i = 0; i < R * rb[f]; i++) hs[i] = (unsigned char)rnd_u64();
        put(cs[f], gs[f], hs, R * rb[f]);
    }
    /* Fields 0 and 1 share rows of 92 bytes ([obs | action] as TD3 lays them out): field 1 lands at +68. */
    take(R * 4, &cnext, &gnext);
    take(R, &cvalid, &gvalid);
    take(NB * 4, &ci, &gi);
    take(8, &csz, &gsz);
    take(8, &cctr, &gctr);
    int32_t next[R];
    uint8_t valid[R];
    for (int i = 0; i < R; i++) {
        next[i] = (int32_t)(rnd_u64() % R);
        valid[i] = (rnd_u64() % 5) != 0;
    }
    put(cnext, gnext, next, sizeof next);
    put(cvalid, gvalid, valid, sizeof valid);
    int64_t size = R, ctr = 4242;
    put(csz, gsz, &size, 8);
    put(cctr, gctr, &ctr, 8);
    for (int mode = 0; mode < 3; mode++) {
        /* mode 0: indices given; 1: drawn by the op (rows ROW0.. of a batch of NB, with a valid mask);
         * 2: drawn, no field at all. */
        int32_t hidx[NB];
        for (int i = 0; i < NB; i++) hidx[i] = (int32_t)(rnd_u64() % R);
        put(ci, gi, hidx, sizeof hidx);
        for (int f = 0; f < 7; f++) {
            for (uint64_t i = 0; i < NB * stride[f] + 64; i++) hd[i] = (unsigned char)rnd_u64();
            put(cd[f], gd[f], hd, NB * stride[f] + 64);
        }
        rlt_gather_field fc[7], fg[7];
        for (int f = 0; f < 7; f++) {
            uint64_t off = f == 1 ? 68 : 0;
            const void *via_c = f == 4 ? cnext : NULL, *via_g = f == 4 ? gnext : NULL;
            fc[f] = (rlt_gather_field){(unsigned char *)(f == 1 ? cd[0] : cd[f]) + off, stride[f], cs[f], rb[f], via_c, RLT_LP_F32};
            fg[f] = (rlt_gather_field){(unsigned char *)(f == 1 ? gd[0] : gd[f]) + off, stride[f], gs[f], rb[f], via_g, RLT_LP_F32};
        }
        rlt_sample_spec sc = {csz, cvalid, 99, RLT_STREAM_SAMPLE, ROW0, NB, cctr};
        rlt_sample_spec sg = {gsz, gvalid, 99, RLT_STREAM_SAMPLE, ROW0, NB, gctr};
        int n = mode == 0 ? NB : NR, nf = mode == 2 ? 0 : 7;
        int r1 = P.cpu.ops->gather_fields(&P.cpu, ci, n, mode ? &sc : NULL, nf, fc);
        int r2 = P.gpu.ops->gather_fields(&P.gpu, gi, n, mode ? &sg : NULL, nf, fg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "gather_fields mode %d: cpu %d gpu %d (%s)", mode, r1, r2, P.egpu.msg);
        int32_t ic[NB], ig[NB];
        fetch(ic, ig, ci, gi, sizeof ic);
        char what[96];
        snprintf(what, sizeof what, "gather_fields mode %d indices", mode);
        expect_exact(what, ig, ic, NB, 4);
        if (mode) {
            /* The drawn rows are the draw alone's rows ROW0.. of the whole batch's draw. */
            int32_t full[NB];
            void *cf, *gf;
            take(NB * 4, &cf, &gf);
            rlt_sample_spec whole = {csz, cvalid, 99, RLT_STREAM_SAMPLE, 0, NB, cctr};
            CHECK(P.cpu.ops->gather_fields(&P.cpu, cf, NB, &whole, 0, NULL) == RLT_OK, "sample");
            memcpy(full, cf, sizeof full);
            CHECK(memcmp(full + ROW0, ic, NR * 4) == 0, "gather_fields: drawn indices are the draw alone's rows %d..", ROW0);
            int ok = 1;
            for (int i = 0; i < NR; i++) ok &= valid[ic[i]] != 0;
            CHECK(ok, "gather_fields: a drawn index is not a valid slot");
        }
        for (int f = 0; f < 7; f++) {
            if (f == 1) continue; /* inside field 0's rows */
            fetch(oc, og, cd[f], gd[f], NB * stride[f] + 64);
            snprintf(what, sizeof what, "gather_fields mode %d field %d (rows of %llu, stride %llu)", mode, f,
                     (unsigned long long)rb[f], (unsigned long long)stride[f]);
            expect_exact(what, og, oc, NB * stride[f] + 64, 1);
        }
        printf("  gather_fields mode %d: %d rows, %d fields, exact\n", mode, n, nf);
    }
    free(hs), free(hd), free(oc), free(og);
    reset();
}

/* gather_fields with compact replay sources (src_dtype fp16 / bf16): the widened fp32 rows byte for byte
 * the CPU twin's. Every 16-bit pattern is gathered (zeros, subnormals, normals, inf, NaNs with every payload),
 * through the 4-elements-a-word path (aligned rows of 20 and 32 elements) and the one-element path (rows of 3
 * and 17 elements, unaligned strides), with an indirect field, a raw field beside them, the sampling folded in
 * (mode 1), and guard bytes after every destination row and buffer. Widening is exact integer arithmetic on
 * both backends (base/lowp.h), so anything but equality is a bug. */
static void test_gather_widen(void) {
    printf("gather_fields (fp16/bf16 sources)\n");
    enum { R = 4096, NF = 5, NR = 1500, ROW0 = 300, NB = 2000 };
    /* Source row bytes, element types and destination strides (bytes) per field. Field 0 holds every fp16
     * pattern (R * 20 >= 65536 elements), field 1 every bf16 pattern; field 2 goes through `next`. */
    static const uint64_t rb[NF] = {40, 64, 6, 34, 12};
    static const int32_t dt[NF] = {RLT_LP_F16, RLT_LP_BF16, RLT_LP_BF16, RLT_LP_F16, RLT_LP_F32};
    static const uint64_t stride[NF] = {96, 144, 28, 76, 12};
    static const uint64_t dst_off[NF] = {0, 16, 0, 4, 0}; /* field 1 lands 16 bytes into its rows, field 3 at +4 */
    void *cs[NF], *gs[NF], *cd[NF], *gd[NF], *cnext, *gnext, *ci, *gi, *csz, *gsz, *cctr, *gctr;
    uint64_t dbytes[NF];
    uint16_t *h = malloc(R * 64);
    for (int f = 0; f < NF; f++) {
        take(R * rb[f], &cs[f], &gs[f]);
        dbytes[f] = R * stride[f] + 64;
        take(dbytes[f], &cd[f], &gd[f]);
        uint64_t ne = R * rb[f] / 2;
        for (uint64_t i = 0; i < ne; i++) h[i] = (f <= 1 && i < 65536) ? (uint16_t)i : (uint16_t)rnd_u64();
        put(cs[f], gs[f], h, R * rb[f]);
    }
    take(R * 4, &cnext, &gnext);
    take(R * 4, &ci, &gi);
    take(8, &csz, &gsz);
    take(8, &cctr, &gctr);
    static int32_t next[R], hidx[R];
    for (int i = 0; i < R; i++) next[i] = (int32_t)(rnd_u64() % R), hidx[i] = i;
    for (int i = R - 1; i > 0; i--) { /* a permutation: every row, so every 16-bit pattern, is gathered */
        int j = (int)(rnd_u64() % (uint64_t)(i + 1)), t = hidx[i];
        hidx[i] = hidx[j], hidx[j] = t;
    }
    put(cnext, gnext, next, sizeof next);
    int64_t size = R, ctr = 777;
    put(csz, gsz, &size, 8);
    put(cctr, gctr, &ctr, 8);
    unsigned char *hd = malloc(R * 144 + 64), *oc = malloc(R * 144 + 64), *og = malloc(R * 144 + 64);
    for (int mode = 0; mode < 2; mode++) {
        /* mode 0: the permutation given; 1: rows ROW0.. of a drawn batch of NB. */
        put(ci, gi, hidx, sizeof hidx);
        for (int f = 0; f < NF; f++) {
            for (uint64_t i = 0; i < dbytes[f]; i++) hd[i] = (unsigned char)rnd_u64();
            put(cd[f], gd[f], hd, dbytes[f]);
        }
        rlt_gather_field fc[NF], fg[NF];
        for (int f = 0; f < NF; f++) {
            const int32_t *vc = f == 2 ? cnext : NULL, *vg = f == 2 ? gnext : NULL;
            fc[f] = (rlt_gather_field){(unsigned char *)cd[f] + dst_off[f], stride[f], cs[f], rb[f], vc, dt[f]};
            fg[f] = (rlt_gather_field){(unsigned char *)gd[f] + dst_off[f], stride[f], gs[f], rb[f], vg, dt[f]};
        }
        rlt_sample_spec sc = {csz, NULL, 5, RLT_STREAM_SAMPLE, ROW0, NB, cctr};
        rlt_sample_spec sg = {gsz, NULL, 5, RLT_STREAM_SAMPLE, ROW0, NB, gctr};
        int n = mode == 0 ? R : NR;
        int r1 = P.cpu.ops->gather_fields(&P.cpu, ci, n, mode ? &sc : NULL, NF, fc);
        int r2 = P.gpu.ops->gather_fields(&P.gpu, gi, n, mode ? &sg : NULL, NF, fg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "gather_fields widen mode %d: cpu %d gpu %d (%s)", mode, r1, r2, P.egpu.msg);
        int32_t ic[R], ig[R];
        fetch(ic, ig, ci, gi, sizeof ic);
        char what[128];
        snprintf(what, sizeof what, "gather_fields widen mode %d indices", mode);
        expect_exact(what, ig, ic, R, 4);
        for (int f = 0; f < NF; f++) {
            fetch(oc, og, cd[f], gd[f], dbytes[f]);
            snprintf(what, sizeof what, "gather_fields widen mode %d field %d (%s rows of %llu bytes, stride %llu)", mode,
                     f, dt[f] == RLT_LP_F16 ? "fp16" : dt[f] == RLT_LP_BF16 ? "bf16" : "raw", (unsigned long long)rb[f],
                     (unsigned long long)stride[f]);
            expect_exact(what, og, oc, dbytes[f], 1);
        }
        printf("  gather_fields widen mode %d: %d rows, %d fields (every fp16 and bf16 pattern in mode 0), exact\n",
               mode, n, NF);
    }
    /* Malformed 16-bit fields are refused by both: odd row bytes, a stride below the widened row, a misaligned
     * destination, an unknown src_dtype. */
    rlt_gather_field bad[4];
    bad[0] = (rlt_gather_field){cd[0], 96, cs[0], 7, NULL, RLT_LP_F16};
    bad[1] = (rlt_gather_field){cd[0], 60, cs[0], 40, NULL, RLT_LP_F16};
    bad[2] = (rlt_gather_field){(unsigned char *)cd[0] + 2, 96, cs[0], 40, NULL, RLT_LP_BF16};
    bad[3] = (rlt_gather_field){cd[0], 96, cs[0], 40, NULL, 1};
    for (int b = 0; b < 4; b++) {
        rlt_gather_field bg = bad[b];
        bg.dst = (unsigned char *)gd[0] + ((unsigned char *)bad[b].dst - (unsigned char *)cd[0]);
        bg.src = gs[0];
        int r1 = P.cpu.ops->gather_fields(&P.cpu, ci, 4, NULL, 1, &bad[b]);
        int r2 = P.gpu.ops->gather_fields(&P.gpu, gi, 4, NULL, 1, &bg);
        CHECK(r1 == RLT_EINVAL && r2 == RLT_EINVAL, "malformed widen field %d: cpu %d gpu %d", b, r1, r2);
    }
    CHECK(P.gpu.ops->sync(&P.gpu) == RLT_OK, "sync after refused gathers: %s", P.egpu.msg);
    free(h), free(hd), free(oc), free(og);
    reset();
}

/* td3_critic_loss: y, dq1 and dq2 bit for bit (the CPU oracles' expressions); each loss within the bound of a
 * reduction of n squares (2 gamma(n) sum d^2 / n). */
static void test_td3_critic_loss(void) {
    printf("td3_critic_loss\n");
    static const int ns[] = {1, 256, 1000};
    for (size_t t = 0; t < 3; t++) {
        int n = ns[t];
        float *h[6];
        void *c[11], *g[11];
        for (int k = 0; k < 6; k++) {
            h[k] = malloc((size_t)n * 4);
            rnd_fill(h[k], (size_t)n, -20, 20);
        }
        for (int i = 0; i < n; i++) h[5][i] = (rnd_u64() & 3) == 0 ? 1.0f : 0.0f; /* term */
        for (int k = 0; k < 11; k++) take((size_t)n * 4, &c[k], &g[k]);
        for (int k = 0; k < 6; k++) put(c[k], g[k], h[k], (size_t)n * 4);
        /* inputs: q1 q2 qt1 qt2 r term; outputs: y dq1 dq2 loss1 loss2 */
        float gs = t == 1 ? 0.5f : 1.0f;
        rlt_td3_loss lc = {.y = c[6], .dq1 = c[7], .dq2 = c[8], .loss1 = c[9], .loss2 = c[10], .q1 = c[0], .q2 = c[1],
                           .qt1 = c[2], .qt2 = c[3], .r = c[4], .term = c[5], .n = n, .gamma = 0.99f, .grad_scale = gs};
        rlt_td3_loss lg = {.y = g[6], .dq1 = g[7], .dq2 = g[8], .loss1 = g[9], .loss2 = g[10], .q1 = g[0], .q2 = g[1],
                           .qt1 = g[2], .qt2 = g[3], .r = g[4], .term = g[5], .n = n, .gamma = 0.99f, .grad_scale = gs};
        int r1 = P.cpu.ops->td3_critic_loss(&P.cpu, &lc);
        int r2 = P.gpu.ops->td3_critic_loss(&P.gpu, &lg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "td3_critic_loss: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        float *rc = malloc((size_t)n * 4), *rg = malloc((size_t)n * 4);
        const char *names[3] = {"y", "dq1", "dq2"};
        for (int k = 0; k < 3; k++) {
            char what[64];
            fetch(rc, rg, c[6 + k], g[6 + k], (size_t)n * 4);
            snprintf(what, sizeof what, "td3_critic_loss %s n=%d", names[k], n);
            expect_exact(what, rg, rc, (size_t)n, 4);
        }
        fetch(rc, rg, c[6], g[6], (size_t)n * 4); /* y, for the bound */
        for (int k = 0; k < 2; k++) {
            float lc, lg;
            fetch(&lc, &lg, c[9 + k], g[9 + k], 4);
            double sq = 0;
            for (int i = 0; i < n; i++) {
                float d = h[k][i] - rc[i];
                sq += (double)(d * d);
            }
            double bound = 2.0 * gamma_n(n) * sq / n + 2.0 * U * fabs(lc);
            char what[64];
            snprintf(what, sizeof what, "td3_critic_loss loss%d n=%d", k + 1, n);
            expect_close(what, &lg, &lc, 1, &bound, 0, 0);
        }
        for (int k = 0; k < 6; k++) free(h[k]);
        free(rc), free(rg);
        reset();
    }
}

/* td3_critic_loss with the output layers folded in (hidden > 0) on each backend: every output bit for bit what the
 * ops it stands for give on that backend (four
 * 1-wide linear_forwards, td3_critic_loss, two linear_backwards for dx through a ReLU layer's output), at widths that
 * are and are not multiples of a warp, a row count that is not a multiple of the kernel's rows a block, one row, and
 * ReLU outputs with exact zeros (the mask) and a gamma from the device. */
static void test_td3_critic_heads(void) {
    printf("td3_critic_loss with its heads\n");
    static const struct { int n, H; } cs[] = {{1, 64}, {256, 256}, {300, 400}, {37, 17}};
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        const int n = cs[t].n, H = cs[t].H;
        const size_t nh = (size_t)n * H;
        float *hh = malloc(nh * 4), *hv = malloc((size_t)(H + 1) * 4), *hr = malloc((size_t)n * 4);
        void *ch[4], *gh[4], *cw[4], *gw[4], *cr, *gr, *ct, *gt, *cgam, *ggam;
        void *cq[2][4], *gq[2][4], *cy[2], *gy[2], *cd[2][2], *gd[2][2], *cdh[2][2], *gdh[2][2];
        for (int j = 0; j < 4; j++) {
            take(nh * 4, &ch[j], &gh[j]);
            rnd_fill(hh, nh, -1, 2);
            for (size_t i = 0; i < nh; i++) hh[i] = hh[i] > 0.0f ? hh[i] : 0.0f; /* a ReLU layer's output */
            put(ch[j], gh[j], hh, nh * 4);
            take((size_t)(H + 1) * 4, &cw[j], &gw[j]); /* w [H], then b */
            rnd_fill(hv, (size_t)H + 1, -0.3f, 0.3f);
            if (j == 0) hv[1] = 0.0f; /* a zero weight: the gradient's sign of zero */
            put(cw[j], gw[j], hv, (size_t)(H + 1) * 4);
        }
        take((size_t)n * 4, &cr, &gr);
        rnd_fill(hr, (size_t)n, -2, 2);
        put(cr, gr, hr, (size_t)n * 4);
        take((size_t)n * 4, &ct, &gt);
        for (int i = 0; i < n; i++) hr[i] = (rnd_u64() & 3) == 0 ? 1.0f : 0.0f;
        put(ct, gt, hr, (size_t)n * 4);
        take(4, &cgam, &ggam);
        const float gam = 0.98f;
        put(cgam, ggam, &gam, 4);
        for (int v = 0; v < 2; v++) { /* v 0: the op; v 1: the ops it stands for */
            for (int j = 0; j < 4; j++) take((size_t)n * 4, &cq[v][j], &gq[v][j]);
            take((size_t)n * 4, &cy[v], &gy[v]);
            for (int k = 0; k < 2; k++) take((size_t)n * 4, &cd[v][k], &gd[v][k]);
            for (int k = 0; k < 2; k++) take(nh * 4, &cdh[v][k], &gdh[v][k]);
        }
        for (int b = 0; b < 2; b++) {
            rlt_backend *bk = b ? &P.gpu : &P.cpu;
            void **h = b ? gh : ch, **w = b ? gw : cw, *r = b ? gr : cr, *term = b ? gt : ct, *gd_ = b ? ggam : cgam;
            void *(*q)[4] = b ? gq : cq, **y = b ? gy : cy, *(*dq)[2] = b ? gd : cd, *(*dh)[2] = b ? gdh : cdh;
            rlt_td3_loss th = {.n = n, .hidden = H, .r = r, .term = term, .gamma = 0.5f, .grad_scale = 0.5f,
                                .gamma_dev = gd_, .y = y[0], .dq1 = dq[0][0], .dq2 = dq[0][1]};
            for (int j = 0; j < 4; j++) {
                th.h[j] = h[j], th.w[j] = w[j], th.b[j] = (const float *)w[j] + H, th.q_out[j] = q[0][j];
            }
            th.dh[0] = dh[0][0], th.dh[1] = dh[0][1];
            int rc = bk->ops->td3_critic_loss(bk, &th);
            for (int j = 0; j < 4 && rc == RLT_OK; j++) {
                rlt_linear_fwd f = {.rows = n, .fi = H, .fo = 1, .x = h[j], .ldx = H, .W = w[j],
                                    .b = (const float *)w[j] + H, .y = q[1][j], .ldy = 1, .act = RLT_ACT_NONE};
                rc = bk->ops->linear_forward(bk, &f);
            }
            rlt_td3_loss l = {.y = y[1], .dq1 = dq[1][0], .dq2 = dq[1][1], .q1 = q[1][0], .q2 = q[1][1],
                              .qt1 = q[1][2], .qt2 = q[1][3], .r = r, .term = term, .n = n, .gamma = 0.5f,
                              .grad_scale = 0.5f, .gamma_dev = gd_};
            if (rc == RLT_OK) rc = bk->ops->td3_critic_loss(bk, &l);
            for (int k = 0; k < 2 && rc == RLT_OK; k++) {
                rlt_linear_bwd bw = {.rows = n, .fi = H, .fo = 1, .dy = dq[1][k], .lddy = 1, .x = h[k], .ldx = H,
                                     .act_x = RLT_ACT_RELU, .W = w[k], .beta = 1.0f, .dx = dh[1][k], .lddx = H};
                rc = bk->ops->linear_backward(bk, &bw);
            }
            CHECK(rc == RLT_OK, "td3_critic_loss heads n=%d H=%d on the %s: %s", n, H, b ? "GPU" : "CPU",
                  b ? P.egpu.msg : "cpu");
        }
        float *oc = malloc(nh * 4), *og = malloc(nh * 4), *pc = malloc(nh * 4), *pg = malloc(nh * 4);
        const char *names[7] = {"q1", "q2", "qt1", "qt2", "y", "dq1", "dq2"};
        char what[96];
        for (int j = 0; j < 7; j++) {
            void *c0 = j < 4 ? cq[0][j] : j == 4 ? cy[0] : cd[0][j - 5];
            void *g0 = j < 4 ? gq[0][j] : j == 4 ? gy[0] : gd[0][j - 5];
            void *c1 = j < 4 ? cq[1][j] : j == 4 ? cy[1] : cd[1][j - 5];
            void *g1 = j < 4 ? gq[1][j] : j == 4 ? gy[1] : gd[1][j - 5];
            fetch(oc, og, c0, g0, (size_t)n * 4);
            fetch(pc, pg, c1, g1, (size_t)n * 4);
            snprintf(what, sizeof what, "td3_critic_loss heads %s n=%d H=%d (GPU)", names[j], n, H);
            expect_exact(what, og, pg, (size_t)n, 4);
            snprintf(what, sizeof what, "td3_critic_loss heads %s n=%d H=%d (CPU)", names[j], n, H);
            expect_exact(what, oc, pc, (size_t)n, 4);
        }
        for (int k = 0; k < 2; k++) {
            fetch(oc, og, cdh[0][k], gdh[0][k], nh * 4);
            fetch(pc, pg, cdh[1][k], gdh[1][k], nh * 4);
            snprintf(what, sizeof what, "td3_critic_loss heads dh%d n=%d H=%d (GPU)", k + 1, n, H);
            expect_exact(what, og, pg, nh, 4);
            snprintf(what, sizeof what, "td3_critic_loss heads dh%d n=%d H=%d (CPU)", k + 1, n, H);
            expect_exact(what, oc, pc, nh, 4);
        }
        free(hh), free(hv), free(hr), free(oc), free(og), free(pc), free(pg);
        reset();
    }
}

/* dqn_loss: the targets and gradients bit for bit, the loss within the reduction bound (as for the CPU oracle
 * q_loss_grad's sum); double and vanilla, Huber and squared, with exact ties in the argmax, out-of-range actions,
 * and three different row strides (q, dq and the next-state values). */
static void test_dqn_loss(void) {
    printf("dqn_loss\n");
    static const struct {
        int n, n_act, dbl;
        float delta;
    } cases[] = {{128, 2, 1, 1.0f}, {32, 6, 0, 0.0f}, {300, 5, 1, 0.0f}, {1, 2, 0, 1.0f}};
    for (size_t t = 0; t < 4; t++) {
        int n = cases[t].n, A = cases[t].n_act, ldq = A + 1, ldd = A + 2, ldqn = A + 3;
        size_t nq = (size_t)n * ldq, nd = (size_t)n * ldd, nn = (size_t)n * ldqn;
        float *hq = malloc(nq * 4), *ht = malloc(nn * 4), *ho = malloc(nn * 4), *hr = malloc((size_t)n * 4),
              *hterm = malloc((size_t)n * 4), *hd = malloc(nd * 4), *oc = malloc(nd * 4), *og = malloc(nd * 4);
        int32_t *ha = malloc((size_t)n * 4);
        rnd_fill(hq, nq, -5, 5);
        rnd_fill(ht, nn, -5, 5);
        for (size_t i = 0; i < nn; i++) ho[i] = (float)(int)rnd_f(-3, 3); /* many ties */
        rnd_fill(hr, (size_t)n, -1, 1);
        rnd_fill(hd, nd, -9, 9);
        for (int i = 0; i < n; i++) {
            hterm[i] = (rnd_u64() & 3) == 0 ? 1.0f : 0.0f;
            ha[i] = (int32_t)(rnd_u64() % (uint64_t)(A + 1)) - (i % 17 == 0 ? 1 : 0); /* some out of range */
        }
        void *cq, *gq, *ct, *gt, *co, *go, *cr, *gr, *cterm, *gterm, *cd, *gd, *ca, *ga, *cy, *gy, *cl, *gl;
        take(nq * 4, &cq, &gq);
        take(nn * 4, &ct, &gt);
        take(nn * 4, &co, &go);
        take((size_t)n * 4, &cr, &gr);
        take((size_t)n * 4, &cterm, &gterm);
        take(nd * 4, &cd, &gd);
        take((size_t)n * 4, &ca, &ga);
        take((size_t)n * 4, &cy, &gy);
        take(4, &cl, &gl);
        put(cq, gq, hq, nq * 4);
        put(ct, gt, ht, nn * 4);
        put(co, go, ho, nn * 4);
        put(cr, gr, hr, (size_t)n * 4);
        put(cterm, gterm, hterm, (size_t)n * 4);
        put(cd, gd, hd, nd * 4);
        put(ca, ga, ha, (size_t)n * 4);
        int dbl = cases[t].dbl;
        rlt_q_loss qc = {.y = cy, .dq = cd, .lddq = ldd, .loss = cl, .q = cq, .ldq = ldq, .act = ca, .r = cr,
                         .term = cterm, .q_next_target = ct, .q_next_online = dbl ? co : NULL, .ldqn = ldqn, .n = n,
                         .n_act = A, .gamma = 0.97f, .huber_delta = cases[t].delta, .grad_scale = 0.5f};
        rlt_q_loss qg = {.y = gy, .dq = gd, .lddq = ldd, .loss = gl, .q = gq, .ldq = ldq, .act = ga, .r = gr,
                         .term = gterm, .q_next_target = gt, .q_next_online = dbl ? go : NULL, .ldqn = ldqn, .n = n,
                         .n_act = A, .gamma = 0.97f, .huber_delta = cases[t].delta, .grad_scale = 0.5f};
        int r1 = P.cpu.ops->dqn_loss(&P.cpu, &qc);
        int r2 = P.gpu.ops->dqn_loss(&P.gpu, &qg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "dqn_loss: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
        char what[96];
        fetch(oc, og, cy, gy, (size_t)n * 4);
        snprintf(what, sizeof what, "dqn_loss y n=%d acts=%d double=%d", n, A, dbl);
        expect_exact(what, og, oc, (size_t)n, 4);
        float *yc = malloc((size_t)n * 4);
        memcpy(yc, oc, (size_t)n * 4);
        fetch(oc, og, cd, gd, nd * 4);
        snprintf(what, sizeof what, "dqn_loss dq n=%d delta=%g", n, cases[t].delta);
        expect_exact(what, og, oc, nd, 4);
        float lc, lg;
        fetch(&lc, &lg, cl, gl, 4);
        double sl = 0;
        for (int i = 0; i < n; i++) {
            if (ha[i] < 0 || ha[i] >= A) continue;
            double d = fabs((double)hq[(size_t)i * ldq + ha[i]] - yc[i]);
            double de = cases[t].delta;
            sl += de == 0 ? d * d : (d <= de ? 0.5 * d * d : de * (d - 0.5 * de));
        }
        double bound = 2.0 * gamma_n(n) * sl / n + 2.0 * U * fabs(lc) + 1e-37;
        snprintf(what, sizeof what, "dqn_loss loss n=%d", n);
        expect_close(what, &lg, &lc, 1, &bound, 0, 0);
        free(hq), free(ht), free(ho), free(hr), free(hterm), free(hd), free(oc), free(og), free(ha), free(yc);
        reset();
    }
}

/* The optimiser op with clipping and the Polyak target (its 16-bit copies and skip flag are gpu_lowp's) on the
 * GPU against the CPU oracles clip_grad_norm, plain Adam and polyak in sequence, one step at a time from
 * identical state: before each step the GPU's state is put into both arenas. Six steps with the step counter on
 * the device; even steps are not clipped (max_grad_norm far above the norm), odd steps are (0.01).
 * - Not clipped: g untouched on both and m, v bit for bit (the same expressions of the same g); p and the
 *   target within Adam's bound (the file comment; tau <= 1 passes p's error on unamplified, the mix adds
 *   roundings). The norm within the clipping's bound below.
 * - Clipped: the norm within rel |norm|, rel = gamma(ceil(n / 65536) + 17) / 2 + 2u (the GPU's fp32 sum in a
 *   strided pass and two 256-way trees against the CPU's sum in double; gpu_dqn_parity explains it); the
 *   clipped g inherits it through max_norm / (norm + 1e-6): |g| (rel + 4u). m = b1 m + (1 - b1) g then differs
 *   by (1 - b1) times g's bound plus a few roundings, v = b2 v + (1 - b2) g^2 by (1 - b2) (2|g| + dg) dg plus
 *   roundings. A relative change e of this step's gradients moves an Adam step of these six by at most
 *   ~3.3 lr e (the m term by lr (1 - b1) sqrt(1 - b2^t) / (sqrt(1 - b2) (1 - b1^t)) e <= lr e, the v term by
 *   the step's size, at most ~2.3 lr here, times e): p and the target get 20 lr (rel + 4u) on top of Adam's
 *   bound. */
static void test_adam_clip_polyak(void) {
    printf("adam with clipping and Polyak vs clip_grad_norm + adam + polyak\n");
    static const uint64_t sizes[] = {1, 100003};
    for (size_t t = 0; t < 2; t++) {
        uint64_t n = sizes[t];
        rlt_adam_hp hp = {1e-3f, 0.9f, 0.999f, 1e-8f};
        const float tau = 0.3f;
        enum { BP, BM, BV, BT, BG, NB };
        static const char *names[NB] = {"p", "m", "v", "target", "g"};
        float *h[NB], *rc = malloc(n * 4), *rg = malloc(n * 4);
        double *bound = malloc(n * sizeof *bound);
        void *c[NB], *g[NB], *cs, *gs, *cn, *gn;
        for (int k = 0; k < NB; k++) {
            h[k] = malloc(n * 4);
            take(n * 4, &c[k], &g[k]);
        }
        take(8, &cs, &gs);
        take(4, &cn, &gn);
        rnd_fill(h[BP], n, -1, 1);
        rnd_fill(h[BT], n, -1, 1);
        memset(h[BM], 0, n * 4);
        memset(h[BV], 0, n * 4);
        int64_t zero = 0;
        put(cs, gs, &zero, 8);
        double rel = 0.5 * gamma_n((double)((n + 65535) / 65536) + 17.0) + 2.0 * U;
        for (int s = 0; s < 6; s++) {
            int clip = s % 2;
            float max_norm = clip ? 0.01f : 1e6f;
            rnd_fill(h[BG], n, -0.5f, 0.5f);
            for (int k = 0; k < NB; k++) put(c[k], g[k], h[k], n * 4);
            CHECK(P.cpu.ops->counter_add(&P.cpu, (int64_t *)cs, 1) == RLT_OK, "cpu step");
            CHECK(P.gpu.ops->counter_add(&P.gpu, (int64_t *)gs, 1) == RLT_OK, "gpu step");
            rlt_adam_step st = {.p = g[BP], .g = g[BG], .m = g[BM], .v = g[BV], .n = n, .hp = hp, .step = gs,
                                .max_grad_norm = max_norm, .norm = gn, .target = g[BT], .tau = tau};
            int r2 = P.gpu.ops->adam(&P.gpu, &st);
            int r1 = cpu_clip_grad_norm(&P.cpu, c[BG], n, max_norm, cn);
            if (r1 == RLT_OK) r1 = cpu_adam_plain(&P.cpu, c[BP], c[BG], c[BM], c[BV], n, hp, cs);
            if (r1 == RLT_OK) r1 = cpu_polyak(&P.cpu, c[BT], c[BP], n, tau);
            CHECK(r1 == RLT_OK && r2 == RLT_OK, "adam: cpu %d gpu %d (%s)", r1, r2, P.egpu.msg);
            char what[112];
            float nc, ng;
            fetch(&nc, &ng, cn, gn, 4);
            double nb = rel * fabs(nc) + 1e-37;
            snprintf(what, sizeof what, "adam n=%llu step %d: norm", (unsigned long long)n, s + 1);
            expect_close(what, &ng, &nc, 1, &nb, 0, 0);
            /* The clipped gradients first: m and v's bounds build on them. */
            float *gc = malloc(n * 4), *gg = malloc(n * 4);
            double *bg = malloc(n * sizeof *bg);
            fetch(gc, gg, c[BG], g[BG], n * 4);
            for (uint64_t i = 0; i < n; i++) bg[i] = fabs((double)h[BG][i]) * (rel + 4.0 * U) + 1e-37;
            snprintf(what, sizeof what, "adam n=%llu step %d%s: g", (unsigned long long)n, s + 1,
                     clip ? " (clipped)" : "");
            if (clip) expect_close(what, gg, gc, n, bg, 0, 0);
            else expect_exact(what, gg, gc, n, 4);
            for (int k = BP; k <= BT; k++) {
                fetch(rc, rg, c[k], g[k], n * 4);
                snprintf(what, sizeof what, "adam n=%llu step %d%s: %s", (unsigned long long)n, s + 1,
                         clip ? " (clipped)" : "", names[k]);
                if (!clip && (k == BM || k == BV)) {
                    expect_exact(what, rg, rc, n, 4);
                    continue;
                }
                double extra = clip ? 20.0 * hp.lr * (rel + 4.0 * U) : 0.0;
                for (uint64_t i = 0; i < n; i++) {
                    double gv = fabs((double)gc[i]), ac = fabs((double)rc[i]);
                    if (k == BM) bound[i] = (1.0 - hp.beta1) * bg[i] + 4.0 * U * ((1.0 - hp.beta1) * gv + ac) + 1e-37;
                    else if (k == BV)
                        bound[i] = (1.0 - hp.beta2) * (2.0 * gv + bg[i]) * bg[i] +
                                   4.0 * U * ((1.0 - hp.beta2) * gv * gv + ac) + 1e-37;
                    else bound[i] = 2e-4 * hp.lr + extra + (k == BP ? 2.0 : 4.0) * 2.0 * U * ac;
                }
                expect_close(what, rg, rc, n, bound, 0, 0);
            }
            free(gc), free(gg), free(bg);
            /* The next step starts from the GPU's state. */
            for (int k = BP; k <= BT; k++) {
                fetch(rc, rg, c[k], g[k], n * 4);
                memcpy(h[k], rg, n * 4);
            }
        }
        for (int k = 0; k < NB; k++) free(h[k]);
        free(rc), free(rg), free(bound);
        reset();
    }
}

/* Lanes: ops spread over side lanes, eagerly and inside a captured graph, give the CPU's results; the
 * refused calls. The graph is replayed several times, each replay reading what the previous one wrote, so
 * a missing fork or join edge (an op running before its input is ready) shows up as a wrong value. */
enum { L_ROWS = 256, L_IN = 40, L_H = 256 };
typedef struct lane_bufs {
    float *x, *w1, *b1, *w2, *b2, *h1, *h2, *sum1, *sum2, *out;
    int64_t *ctr;
} lane_bufs;

static int lane_step(rlt_backend *bk, const lane_bufs *s) {
    const rlt_backend_ops *o = bk->ops;
    RLT_TRY(o->lane(bk, 3));
    RLT_TRY(o->counter_add(bk, s->ctr, 1));
    RLT_TRY(o->lane(bk, 1));
    rlt_linear_fwd f1 = {.rows = L_ROWS, .fi = L_IN, .fo = L_H, .x = s->x, .ldx = L_IN, .W = s->w1, .b = s->b1,
                         .y = s->h1, .ldy = L_H, .act = RLT_ACT_RELU};
    rlt_linear_fwd f2 = {.rows = L_ROWS, .fi = L_IN, .fo = L_H, .x = s->x, .ldx = L_IN, .W = s->w2, .b = s->b2,
                         .y = s->h2, .ldy = L_H, .act = RLT_ACT_TANH};
    RLT_TRY(o->linear_forward(bk, &f1));
    RLT_TRY(o->sum(bk, s->sum1, s->h1, L_H, L_ROWS, 1.0f / L_ROWS));
    RLT_TRY(o->lane(bk, 2));
    RLT_TRY(o->linear_forward(bk, &f2));
    RLT_TRY(o->sum(bk, s->sum2, s->h2, L_H, L_ROWS, 1.0f / L_ROWS));
    RLT_TRY(o->lane(bk, RLT_LANE_JOIN));
    /* Lane 0 reads both side lanes' results (out moves halfway to h1, then halfway to h2) ... */
    RLT_TRY(o->flat(bk, RLT_FLAT_POLYAK, s->out, s->h1, (uint64_t)L_ROWS * L_H, 0.5f));
    RLT_TRY(o->flat(bk, RLT_FLAT_POLYAK, s->out, s->h2, (uint64_t)L_ROWS * L_H, 0.5f));
    /* ... and the next step's input moves halfway to pieces of out, so every step depends on the last. */
    for (int r = 0; r < 4; r++)
        RLT_TRY(o->flat(bk, RLT_FLAT_POLYAK, s->x + (size_t)r * 64 * L_IN, s->out + (size_t)r * 64 * L_H, 64 * L_IN, 0.5f));
    return RLT_OK;
}

static void test_lanes(void) {
    printf("lanes (branch and join), eager and in a graph\n");
    lane_bufs c, g;
#define LTAKE(field, count, type)                            \
    do {                                                     \
        void *pc_, *pg_;                                     \
        take((uint64_t)(count) * sizeof(type), &pc_, &pg_);  \
        c.field = pc_;                                       \
        g.field = pg_;                                       \
    } while (0)
    LTAKE(x, L_ROWS * L_IN, float);
    LTAKE(w1, L_H * L_IN, float);
    LTAKE(b1, L_H, float);
    LTAKE(w2, L_H * L_IN, float);
    LTAKE(b2, L_H, float);
    LTAKE(h1, L_ROWS * L_H, float);
    LTAKE(h2, L_ROWS * L_H, float);
    LTAKE(sum1, 1, float);
    LTAKE(sum2, 1, float);
    LTAKE(out, L_ROWS * L_H, float);
    LTAKE(ctr, 1, int64_t);
#undef LTAKE
    float *h = malloc((size_t)L_ROWS * L_H * 4);
    rnd_fill(h, L_ROWS * L_IN, -1, 1);
    put(c.x, g.x, h, L_ROWS * L_IN * 4);
    rnd_fill(h, L_H * L_IN, -0.3f, 0.3f);
    put(c.w1, g.w1, h, L_H * L_IN * 4);
    rnd_fill(h, L_H * L_IN, -0.3f, 0.3f);
    put(c.w2, g.w2, h, L_H * L_IN * 4);
    rnd_fill(h, L_H, -0.1f, 0.1f);
    put(c.b1, g.b1, h, L_H * 4);
    rnd_fill(h, L_H, -0.1f, 0.1f);
    put(c.b2, g.b2, h, L_H * 4);
    rnd_fill(h, (size_t)L_ROWS * L_H, -1, 1);
    put(c.out, g.out, h, (size_t)L_ROWS * L_H * 4);
    int64_t zero = 0;
    put(c.ctr, g.ctr, &zero, 8);
    /* Two eager steps, then a captured step replayed four times. */
    for (int it = 0; it < 2; it++) {
        CHECK(lane_step(&P.cpu, &c) == RLT_OK, "cpu lane step: %s", P.ecpu.msg);
        CHECK(lane_step(&P.gpu, &g) == RLT_OK, "gpu lane step (eager): %s", P.egpu.msg);
    }
    int rb = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 4);
    int rs = rb == RLT_OK ? lane_step(&P.gpu, &g) : rb;
    int re = rb == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 4) : rb;
    CHECK(rb == RLT_OK && rs == RLT_OK && re == RLT_OK, "lane capture: begin %d ops %d end %d (%s)", rb, rs, re, P.egpu.msg);
    for (int it = 0; it < 4; it++) {
        CHECK(lane_step(&P.cpu, &c) == RLT_OK, "cpu lane step: %s", P.ecpu.msg);
        CHECK(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 4) == RLT_OK, "graph_launch: %s", P.egpu.msg);
    }
    int64_t kc, kg;
    fetch(&kc, &kg, c.ctr, g.ctr, 8);
    CHECK(kc == 6 && kg == 6, "lane counter after 6 steps: cpu %lld gpu %lld", (long long)kc, (long long)kg);
    float *fc = malloc((size_t)L_ROWS * L_H * 4), *fg = malloc((size_t)L_ROWS * L_H * 4);
    fetch(fc, fg, c.out, g.out, (size_t)L_ROWS * L_H * 4);
    expect_close("lanes: output after 6 steps (4 replayed)", fg, fc, (size_t)L_ROWS * L_H, NULL, 1e-5, 1e-5);
    fetch(fc, fg, c.x, g.x, (size_t)L_ROWS * L_IN * 4);
    expect_close("lanes: chained input after 6 steps", fg, fc, (size_t)L_ROWS * L_IN, NULL, 1e-5, 1e-5);
    float sc, sg;
    fetch(&sc, &sg, c.sum1, g.sum1, 4);
    expect_close("lanes: lane 1's reduction", &sg, &sc, 1, NULL, 1e-5, 1e-5);
    fetch(&sc, &sg, c.sum2, g.sum2, 4);
    expect_close("lanes: lane 2's reduction", &sg, &sc, 1, NULL, 1e-5, 1e-5);

    /* Refusals: lanes out of range (RLT_LANE_JOIN, -1, is a join; -2 is nothing); adam with clipping (lane 0's
     * scratch) on a side lane; a graph END with a lane left open still joins it (the capture ends cleanly). */
    CHECK(P.gpu.ops->lane(&P.gpu, -2) == RLT_EINVAL && P.gpu.ops->lane(&P.gpu, RLT_BACKEND_MAX_LANES) == RLT_EINVAL,
          "branch out of range refused");
    CHECK(P.cpu.ops->lane(&P.cpu, RLT_BACKEND_MAX_LANES) == RLT_EINVAL, "cpu branch out of range refused");
    CHECK(P.gpu.ops->lane(&P.gpu, 1) == RLT_OK, "branch 1");
    rlt_adam_step st = {.p = g.h1, .g = g.h2, .m = g.out, .v = g.out, .n = 16, .hp = {1e-3f, 0.9f, 0.999f, 1e-8f},
                        .step = g.ctr, .max_grad_norm = 1.0f, .norm = g.sum1};
    int rc = P.gpu.ops->adam(&P.gpu, &st);
    CHECK(rc == RLT_ESTATE, "adam with clipping on a side lane: %d", rc);
    CHECK(P.gpu.ops->lane(&P.gpu, RLT_LANE_JOIN) == RLT_OK, "join");
    rb = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 6);
    int ro = rb == RLT_OK ? P.gpu.ops->lane(&P.gpu, 2) : rb;
    if (ro == RLT_OK) ro = P.gpu.ops->counter_add(&P.gpu, g.ctr, 1);
    re = rb == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 6) : rb;
    CHECK(rb == RLT_OK && ro == RLT_OK && re == RLT_OK, "capture left on lane 2: %d %d %d (%s)", rb, ro, re, P.egpu.msg);
    CHECK(P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 6) == RLT_OK && P.gpu.ops->sync(&P.gpu) == RLT_OK, "replay: %s", P.egpu.msg);
    fetch(&kc, &kg, c.ctr, g.ctr, 8);
    CHECK(kg == 7, "the open lane's op was captured and replayed: %lld", (long long)kg);
    free(h), free(fc), free(fg);
    reset();
}

static void test_errors(void) {
    printf("errors\n");
    void *ca, *ga;
    take(1024, &ca, &ga);
    rlt_err_clear(&P.egpu);
    rlt_linear_fwd f = {.rows = 4, .fi = 8, .fo = 4, .x = ga, .ldx = 4 /* < fi */, .W = ga, .y = ga, .ldy = 4};
    int rc = P.gpu.ops->linear_forward(&P.gpu, &f);
    CHECK(rc == RLT_EINVAL && strstr(P.egpu.msg, "linear_forward"), "linear_forward with ldx < fi: %d (%s)", rc,
          P.egpu.msg);
    rc = P.gpu.ops->act_grad(&P.gpu, ga, 3, ga, 4, 2, 4, RLT_ACT_RELU);
    CHECK(rc == RLT_EINVAL, "act_grad with lddy < cols: %d", rc);
    rc = P.gpu.ops->flat(&P.gpu, RLT_FLAT_POLYAK, ga, ga, 4, 1.5f);
    CHECK(rc == RLT_EINVAL, "polyak with tau > 1: %d", rc);
    rlt_td3_loss l = {.y = ga, .dq1 = ga, .dq2 = ga, .q1 = ga, .q2 = ga, .qt1 = ga, .qt2 = ga, .r = ga, .term = ga};
    rc = P.gpu.ops->td3_critic_loss(&P.gpu, &l);
    CHECK(rc == RLT_EINVAL, "td3_critic_loss with n = 0: %d", rc);
    rc = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 5);
    CHECK(rc == RLT_ESTATE, "graph LAUNCH of an empty slot: %d", rc);
    rc = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, RLT_BACKEND_MAX_GRAPHS);
    CHECK(rc == RLT_EINVAL, "graph BEGIN of slot %d: %d", RLT_BACKEND_MAX_GRAPHS, rc);
    rc = P.gpu.ops->graph(&P.gpu, (rlt_graph_mode)9, 0);
    CHECK(rc == RLT_EINVAL, "graph with an unknown mode: %d", rc);
    rc = P.gpu.ops->flat(&P.gpu, (rlt_flat_mode)9, ga, ga, 4, 0.5f);
    CHECK(rc == RLT_EINVAL, "flat with an unknown mode: %d", rc);
    rc = P.gpu.ops->copy(&P.gpu, ga, ca, 4, 7);
    CHECK(rc == RLT_EINVAL, "copy of unknown kind: %d", rc);
    rc = P.gpu.ops->workspace(&P.gpu, (unsigned char *)P.gbase + 8, 1024, NULL);
    CHECK(rc == RLT_EINVAL, "misaligned workspace: %d", rc);
    /* The stream is still healthy after all of that. */
    CHECK(P.gpu.ops->sync(&P.gpu) == RLT_OK, "sync after rejected ops: %s", P.egpu.msg);
    reset();
}

int main(void) {
    pair_open(ARENA_BYTES);
    printf("device %s: total %.1f MiB, free %.1f MiB, context_bytes %llu (%.1f MiB), cuBLAS workspace %llu bytes\n",
           P.gpu.device_name, P.gpu.device_total / 1048576.0, P.gpu.device_free / 1048576.0,
           (unsigned long long)P.gpu.context_bytes, P.gpu.context_bytes / 1048576.0,
           (unsigned long long)rlt_backend_workspace_need(&P.gpu));

    test_act_grad();
    test_flat();
    test_adam();
    test_replay();
    test_sum();
    test_td3();
    test_graph();
    test_linear_forward();
    test_linear_backward();
    test_linear_chain();
    test_seeds_narrow_backward();
    test_seeds_library();
    test_linear_routed();
    test_gather_fields();
    test_gather_widen();
    test_td3_critic_loss();
    test_td3_critic_heads();
    test_dqn_loss();
    test_adam_clip_polyak();
    test_lanes();
    test_errors();
    die_on(P.gpu.ops->workspace(&P.gpu, P.gbase, rlt_backend_workspace_need(&P.gpu), NULL), &P.egpu, "workspace again");
    pair_close();
    return test_summary("gpu_ops_parity");
}
