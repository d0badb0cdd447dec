/* gpu_lowp.c: reduced precision on the GPU (precision: bf16 | fp16).
 * - Op parity against the CPU twins (kernels/cpu/lowp.c), on random inputs:
 *   cast: exact (both round to nearest even from the same float; fp16 overflow to inf on both).
 *   16-bit linear_forward / linear_backward: cuBLASLt sums the 16-bit products in fp32 on the tensor cores in
 *   its own order, the twin left to right. Each fp32 sum is within gamma(k+2) S of the exact value (S the
 *   sum of the terms' magnitudes; Higham 3.5), so the two differ by at most 2 gamma(k+2) S before rounding;
 *   a 16-bit result may then round to the neighbouring value, once after the product (the twin; CUDA adds the
 *   bias in cuBLASLt's epilogue, before rounding) and once after bias and activation: 2 ulp = 4 u_lp (|y| + S),
 *   with u_lp = 2^-8 (bf16) or 2^-11 (fp16). tanh adds its library error (8 u |y|, as in gpu_ops_parity).
 *   Wrong strides, transposes or types give order-1 errors. The bias gradient comes out of the weight
 *   gradient's epilogue (CUBLASLT_EPILOGUE_BGRADB) in cuBLASLt's order, plus beta db0: the fp32 sum bound
 *   2 gamma(rows+2) (|db0| + sum |dy|). The 512 x 1024 -> 512 cases are the size the tensor cores are for.
 *   The same layers for several seeds batched (seed_batch: one strided cuBLASLt call per product for all of them),
 *   each seed within those bounds of the CPU twin run on it alone.
 *   amp (UNSCALE, UPDATE), adam's skip: exact (the same IEEE operations, or nothing at all).
 *   conv_forward / conv_backward on 16-bit slots (cuDNN's tensor cores against the widened fp32 im2col twin):
 *   the same two roundings as a dense layer, checked as a normalised error ||gpu - cpu|| / ||cpu|| <= 4 u_lp
 *   for y, dx and dw (one 16-bit ulp is 2 u_lp; an indexing or layout bug gives order 1), db within 1e-5.
 * - Overflow injection: a TD3 fp16 agent whose loss scale is set to 3e38 overflows fp16 in its backward
 *   pass; the update must leave every state tensor (weights, 16-bit copies, targets, Adam's moments,
 *   counters) bit-identical, halve the scale, count one skipped step, and the next updates with a sane
 *   scale must train again. All on the device, inside the captured graph.
 * - Agreement: 30 TD3 updates in bf16 stay close to the same 30 in fp32 (relative parameter distance below
 *   0.05: 16-bit gradient noise flips the sign of Adam's first steps for the smallest gradients; a wrong op
 *   gives order 1).
 * - Learning: TD3 on the built-in Pendulum reaches -250 within 20,000 steps in bf16 and in fp16, DQN on
 *   CartPole 475 within 50,000 steps in fp16: the fp32 tests' thresholds.
 * Skipped without a usable GPU. */
#include <math.h>
#include <string.h>

#include "../agents/td3.h"
#include "../agents/dqn.h"
#include "agent.h"
#include "backend_pair.h"
#include "harness.h"
#include "lowp.h"
#include "mem.h"

#define U (1.0 / 16777216.0)
static double gamma_n(double n) { return n * U / (1.0 - n * U); }
static double u_lp(int32_t dt) { return dt == RLT_LP_BF16 ? 1.0 / 256.0 : dt == RLT_LP_F16 ? 1.0 / 2048.0 : 0.0; }
static const char *dt_name(int32_t dt) { return dt == RLT_LP_BF16 ? "bf16" : dt == RLT_LP_F16 ? "fp16" : "fp32"; }

static float hx[1 << 22], hc[1 << 22], hg[1 << 22];
static uint16_t h16[1 << 22];

/* Random floats rounded to dtype, stored as dtype into both arenas; the float values go to vals. */
static void put_lp(void *c, void *g, int32_t dt, float *vals, size_t n, float lo, float hi) {
    pair_rnd_fill(vals, n, lo, hi);
    for (size_t i = 0; i < n; i++) {
        rlt_lp_store(h16, dt, (int64_t)i, vals[i]);
        vals[i] = rlt_lp_load(h16, dt, (int64_t)i);
    }
    pair_put(c, g, h16, n * 2);
}

static void fetch_as_float(float *outc, float *outg, const void *c, const void *g, int32_t dt, size_t n) {
    static uint16_t ac[1 << 22], ag16[1 << 22];
    if (dt == RLT_LP_F32) {
        pair_fetch(outc, outg, c, g, n * 4);
        return;
    }
    pair_fetch(ac, ag16, c, g, n * 2);
    for (size_t i = 0; i < n; i++) {
        outc[i] = rlt_lp_load(ac, dt, (int64_t)i);
        outg[i] = rlt_lp_load(ag16, dt, (int64_t)i);
    }
}

static void test_cast(void) {
    const int32_t types[] = {RLT_LP_F32, RLT_LP_BF16, RLT_LP_F16};
    size_t rows = 37, cols = 129, ld = 131, n = rows * ld;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            int32_t sd = types[a], dd = types[b];
            void *cs, *gs, *cd, *gd, *csc, *gsc;
            pair_take(n * 4, &cs, &gs);
            pair_take(n * 4, &cd, &gd);
            pair_take(4, &csc, &gsc);
            /* Magnitudes from 1e-9 to 1e6: subnormal fp16, rounding ties and fp16 overflow all occur. */
            for (size_t i = 0; i < n; i++) hx[i] = pair_rnd_f(-1.0f, 1.0f) * powf(10.0f, pair_rnd_f(-9.0f, 6.0f));
            if (sd == RLT_LP_F32) pair_put(cs, gs, hx, n * 4);
            else {
                for (size_t i = 0; i < n; i++) rlt_lp_store(h16, sd, (int64_t)i, hx[i]);
                pair_put(cs, gs, h16, n * 2);
            }
            float scale = 3.0f;
            pair_put(csc, gsc, &scale, 4);
            for (int with_scale = 0; with_scale < 2; with_scale++) {
                const float *sc = with_scale ? csc : NULL, *sg = with_scale ? gsc : NULL;
                rlt_cast kc = {.rows = (int32_t)rows, .cols = (int64_t)cols, .dst = cd, .dst_dtype = dd,
                               .ldd = (int64_t)ld, .src = cs, .src_dtype = sd, .lds = (int64_t)ld, .scale = sc};
                rlt_cast kg = kc;
                kg.dst = gd, kg.src = gs, kg.scale = sg;
                int r1 = P.cpu.ops->cast(&P.cpu, &kc);
                int r2 = P.gpu.ops->cast(&P.gpu, &kg);
                CHECK(r1 == RLT_OK && r2 == RLT_OK, "cast %s->%s: %s", dt_name(sd), dt_name(dd), P.egpu.msg);
                fetch_as_float(hc, hg, cd, gd, dd, n);
                size_t bad = 0;
                for (size_t r = 0; r < rows; r++)
                    for (size_t k = 0; k < cols; k++) {
                        size_t i = r * ld + k;
                        if (memcmp(&hc[i], &hg[i], 4) != 0 && !(isnan(hc[i]) && isnan(hg[i]))) bad++;
                    }
                CHECK(bad == 0, "cast %s->%s (scale %d): %zu of %zu elements differ", dt_name(sd), dt_name(dd), with_scale,
                      bad, rows * cols);
            }
            pair_reset();
        }
}

/* The uint8 source of cast (a dict observation's image part, network.inputs): strided rows of bytes widened
 * to float and scaled by 1/255, into each destination type; exact integers times one float, so bit-equal. */
static void test_cast_u8(void) {
    const int32_t types[] = {RLT_LP_F32, RLT_LP_BF16, RLT_LP_F16};
    size_t rows = 37, cols = 129, lds = 203, ldd = 131;
    static uint8_t bytes[37 * 203];
    for (size_t i = 0; i < rows * lds; i++) bytes[i] = (uint8_t)(i * 2654435761u >> 24);
    for (int b = 0; b < 3; b++) {
        void *cs, *gs, *cd, *gd, *csc, *gsc;
        pair_take(rows * lds, &cs, &gs);
        pair_take(rows * ldd * 4, &cd, &gd);
        pair_take(4, &csc, &gsc);
        pair_put(cs, gs, bytes, rows * lds);
        float scale = 1.0f / 255.0f;
        pair_put(csc, gsc, &scale, 4);
        rlt_cast kc = {.rows = (int32_t)rows, .cols = (int64_t)cols, .dst = cd, .dst_dtype = types[b],
                       .ldd = (int64_t)ldd, .src = (const uint8_t *)cs + 3, .src_dtype = RLT_LP_U8, .lds = (int64_t)lds,
                       .scale = csc};
        rlt_cast kg = kc;
        kg.dst = gd, kg.src = (const uint8_t *)gs + 3, kg.scale = gsc;
        int r1 = P.cpu.ops->cast(&P.cpu, &kc);
        int r2 = P.gpu.ops->cast(&P.gpu, &kg);
        CHECK(r1 == RLT_OK && r2 == RLT_OK, "cast u8->%s: %s", dt_name(types[b]), P.egpu.msg);
        fetch_as_float(hc, hg, cd, gd, types[b], rows * ldd);
        size_t bad = 0;
        for (size_t r = 0; r < rows; r++)
            for (size_t k = 0; k < cols; k++) bad += memcmp(&hc[r * ldd + k], &hg[r * ldd + k], 4) != 0;
        CHECK(bad == 0, "cast u8->%s: %zu of %zu elements differ", dt_name(types[b]), bad, rows * cols);
        pair_reset();
    }
}

static double act_slack(int32_t act, double y) { return act == RLT_ACT_TANH ? 8 * U * fabs(y) : 0.0; }

static void linear_case(int32_t dt, int32_t y_dt, int32_t rows, int32_t fi, int32_t fo, int32_t act) {
    void *cx, *gx, *cw, *gw, *cb, *gb, *cy, *gy;
    static float xv[1 << 21], wv[1 << 21], bv[4096];
    pair_take((uint64_t)rows * fi * 2, &cx, &gx);
    pair_take((uint64_t)fo * fi * 2, &cw, &gw);
    pair_take((uint64_t)fo * 4, &cb, &gb);
    pair_take((uint64_t)rows * fo * 4, &cy, &gy);
    put_lp(cx, gx, dt, xv, (size_t)rows * fi, -1.0f, 1.0f);
    put_lp(cw, gw, dt, wv, (size_t)fo * fi, -0.2f, 0.2f);
    pair_rnd_fill(bv, (size_t)fo, -0.5f, 0.5f);
    pair_put(cb, gb, bv, (uint64_t)fo * 4);
    rlt_linear_fwd fc = {.rows = rows, .fi = fi, .fo = fo, .dtype = dt, .x = cx, .ldx = fi, .W = cw, .b = cb, .y = cy,
                         .ldy = fo, .y_dtype = y_dt, .act = act};
    rlt_linear_fwd fg = fc;
    fg.x = gx, fg.W = gw, fg.b = gb, fg.y = gy;
    int r1 = P.cpu.ops->linear_forward(&P.cpu, &fc);
    int r2 = P.gpu.ops->linear_forward(&P.gpu, &fg);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "16-bit linear_forward: %s", P.egpu.msg);
    fetch_as_float(hc, hg, cy, gy, y_dt, (size_t)rows * fo);
    double worst = 0;
    size_t bad = 0;
    for (int32_t r = 0; r < rows; r++)
        for (int32_t o = 0; o < fo; o++) {
            double S = fabs(bv[o]);
            for (int32_t i = 0; i < fi; i++) S += fabs((double)xv[(size_t)r * fi + i] * wv[(size_t)o * fi + i]);
            double c = hc[(size_t)r * fo + o], g = hg[(size_t)r * fo + o];
            double bound = 2 * gamma_n(fi + 2) * S + 4 * u_lp(y_dt) * (fabs(c) + S) + act_slack(act, c) + 1e-30;
            double err = fabs(g - c);
            if (!(err <= bound)) bad++;
            if (S > 0 && err / S > worst) worst = err / S;
        }
    printf("linear_forward %s->%s %dx%dx%d act %d: worst |gpu-cpu|/S %.2e\n", dt_name(dt), dt_name(y_dt), rows, fi, fo,
           act, worst);
    CHECK(bad == 0, "linear_forward %s->%s %dx%dx%d: %zu elements beyond the bound", dt_name(dt), dt_name(y_dt), rows,
          fi, fo, bad);
    pair_reset();
}

static void linear_backward_case(int32_t dt, int32_t dx_dt, int32_t rows, int32_t fi, int32_t fo, int32_t act_x) {
    void *cdy, *gdy, *cx, *gx, *cw, *gw, *cdw, *gdw, *cdb, *gdb, *cdx, *gdx;
    static float dyv[1 << 21], xv[1 << 21], wv[1 << 21], dw0[1 << 21], db0[4096];
    pair_take((uint64_t)rows * fo * 2, &cdy, &gdy);
    pair_take((uint64_t)rows * fi * 2, &cx, &gx);
    pair_take((uint64_t)fo * fi * 2, &cw, &gw);
    pair_take((uint64_t)fo * fi * 4, &cdw, &gdw);
    pair_take((uint64_t)fo * 4, &cdb, &gdb);
    pair_take((uint64_t)rows * fi * 4, &cdx, &gdx);
    put_lp(cdy, gdy, dt, dyv, (size_t)rows * fo, -1.0f, 1.0f);
    /* x as the output of act_x: non-negative for ReLU, in (-1, 1) for tanh. */
    put_lp(cx, gx, dt, xv, (size_t)rows * fi, act_x == RLT_ACT_RELU ? -0.5f : -0.9f, 0.9f);
    if (act_x == RLT_ACT_RELU) {
        for (size_t i = 0; i < (size_t)rows * fi; i++) {
            xv[i] = xv[i] > 0 ? xv[i] : 0.0f;
            rlt_lp_store(h16, dt, (int64_t)i, xv[i]);
        }
        pair_put(cx, gx, h16, (uint64_t)rows * fi * 2);
    }
    put_lp(cw, gw, dt, wv, (size_t)fo * fi, -0.2f, 0.2f);
    pair_rnd_fill(dw0, (size_t)fo * fi, -1.0f, 1.0f);
    pair_put(cdw, gdw, dw0, (uint64_t)fo * fi * 4);
    pair_rnd_fill(db0, (size_t)fo, -1.0f, 1.0f);
    pair_put(cdb, gdb, db0, (uint64_t)fo * 4);
    rlt_linear_bwd bc = {.rows = rows, .fi = fi, .fo = fo, .dtype = dt, .dy = cdy, .lddy = fo, .x = cx, .ldx = fi,
                         .act_x = act_x, .W = cw, .dW = cdw, .db = cdb, .beta = 1.0f, .dx = cdx, .lddx = fi,
                         .dx_dtype = dx_dt};
    rlt_linear_bwd bg = bc;
    bg.dy = gdy, bg.x = gx, bg.W = gw, bg.dW = gdw, bg.db = gdb, bg.dx = gdx;
    int r1 = P.cpu.ops->linear_backward(&P.cpu, &bc);
    int r2 = P.gpu.ops->linear_backward(&P.gpu, &bg);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "16-bit linear_backward: %s", P.egpu.msg);
    size_t bad_w = 0, bad_b = 0, bad_x = 0;
    pair_fetch(hc, hg, cdw, gdw, (uint64_t)fo * fi * 4);
    for (int32_t o = 0; o < fo; o++)
        for (int32_t i = 0; i < fi; i++) {
            double S = fabs(dw0[(size_t)o * fi + i]);
            for (int32_t r = 0; r < rows; r++) S += fabs((double)dyv[(size_t)r * fo + o] * xv[(size_t)r * fi + i]);
            size_t k = (size_t)o * fi + i;
            if (!(fabs((double)hg[k] - hc[k]) <= 2 * gamma_n(rows + 2) * S + 1e-30)) bad_w++;
        }
    pair_fetch(hc, hg, cdb, gdb, (uint64_t)fo * 4);
    for (int32_t o = 0; o < fo; o++) {
        double S = fabs(db0[o]);
        for (int32_t r = 0; r < rows; r++) S += fabs((double)dyv[(size_t)r * fo + o]);
        if (!(fabs((double)hg[o] - hc[o]) <= 2 * gamma_n(rows + 2) * S + 1e-30)) bad_b++;
    }
    fetch_as_float(hc, hg, cdx, gdx, dx_dt, (size_t)rows * fi);
    for (int32_t r = 0; r < rows; r++)
        for (int32_t i = 0; i < fi; i++) {
            double S = 0;
            for (int32_t o = 0; o < fo; o++) S += fabs((double)dyv[(size_t)r * fo + o] * wv[(size_t)o * fi + i]);
            double x = xv[(size_t)r * fi + i], d = act_x == RLT_ACT_TANH ? 1 - x * x : 1.0;
            size_t k = (size_t)r * fi + i;
            double c = hc[k], bound = d * (2 * gamma_n(fo + 2) * S + 4 * u_lp(dx_dt) * S) + 4 * u_lp(dx_dt) * fabs(c) +
                                      4 * U * fabs(c) + 1e-30;
            if (!(fabs((double)hg[k] - c) <= bound)) bad_x++;
        }
    printf("linear_backward %s->%s %dx%dx%d act_x %d: dW %zu, db %zu, dx %zu beyond the bounds\n", dt_name(dt),
           dt_name(dx_dt), rows, fi, fo, act_x, bad_w, bad_b, bad_x);
    CHECK(bad_w == 0 && bad_b == 0 && bad_x == 0, "linear_backward %s %dx%dx%d: dW %zu, db %zu, dx %zu", dt_name(dt), rows,
          fi, fo, bad_w, bad_b, bad_x);
    pair_reset();
}

/* Seed batching: Z seeds' 16-bit layers (each seed's block x | W | b | y | dy | dW | db | dx at one stride, its own
 * random values) as one captured forward and backward over all seeds (cuBLASLt's strided batched products, the
 * passes with grid z the agent), each seed against the CPU twin run on that seed alone, within linear_case's and
 * linear_backward_case's bounds. An agent that read another's operands, or a stride in the wrong elements (a 16-bit
 * product's fp32 output and bias move half as many), gives order-1 errors. beta 1: the bias gradient from our
 * column sum (the fused one needs the lane's one scratch vector); beta 0: from the product's BGRADB epilogue. */
#define LP_SEEDS_MAX 8
static void seeds_case(int32_t dt, int32_t Z, int32_t rows, int32_t fi, int32_t fo, int32_t act, float beta) {
    const uint64_t al = 256;
#define LP_UP(v) (((v) + al - 1) / al * al)
    const uint64_t ox = 0, ow = ox + LP_UP((uint64_t)rows * fi * 2), ob = ow + LP_UP((uint64_t)fo * fi * 2),
                   oy = ob + LP_UP((uint64_t)fo * 4), ody = oy + LP_UP((uint64_t)rows * fo * 2),
                   odw = ody + LP_UP((uint64_t)rows * fo * 2), odb = odw + LP_UP((uint64_t)fo * fi * 4),
                   odx = odb + LP_UP((uint64_t)fo * 4), per = odx + LP_UP((uint64_t)rows * fi * 2);
#undef LP_UP
    static float xv[LP_SEEDS_MAX][1 << 16], wv[LP_SEEDS_MAX][1 << 16], dyv[LP_SEEDS_MAX][1 << 16],
        dw0[LP_SEEDS_MAX][1 << 16], bv[LP_SEEDS_MAX][512], db0[LP_SEEDS_MAX][512];
    if (Z > LP_SEEDS_MAX || (size_t)rows * fi > (1u << 16) || (size_t)fo * fi > (1u << 16) ||
        (size_t)rows * fo > (1u << 16) || fo > 512) {
        CHECK(0, "seeds_case: shape beyond the test's buffers");
        return;
    }
    unsigned char *cs[LP_SEEDS_MAX], *gs[LP_SEEDS_MAX];
    for (int32_t z = 0; z < Z; z++) pair_take(per, (void **)&cs[z], (void **)&gs[z]);
    void *cd, *gd, *ck, *gk;
    pair_take((uint64_t)Z * 8, &cd, &gd);
    pair_take((uint64_t)Z * 8, &ck, &gk);
    for (int32_t z = 0; z < Z; z++) {
        put_lp(cs[z] + ox, gs[z] + ox, dt, xv[z], (size_t)rows * fi, act == RLT_ACT_RELU ? -0.5f : -0.9f, 0.9f);
        if (act == RLT_ACT_RELU) { /* x as the output of the layer below's ReLU, for the backward's derivative */
            for (size_t i = 0; i < (size_t)rows * fi; i++) {
                xv[z][i] = xv[z][i] > 0 ? xv[z][i] : 0.0f;
                rlt_lp_store(h16, dt, (int64_t)i, xv[z][i]);
            }
            pair_put(cs[z] + ox, gs[z] + ox, h16, (uint64_t)rows * fi * 2);
        }
        put_lp(cs[z] + ow, gs[z] + ow, dt, wv[z], (size_t)fo * fi, -0.2f, 0.2f);
        pair_rnd_fill(bv[z], (size_t)fo, -0.5f, 0.5f);
        pair_put(cs[z] + ob, gs[z] + ob, bv[z], (uint64_t)fo * 4);
        put_lp(cs[z] + ody, gs[z] + ody, dt, dyv[z], (size_t)rows * fo, -1.0f, 1.0f);
        pair_rnd_fill(dw0[z], (size_t)fo * fi, -1.0f, 1.0f);
        pair_put(cs[z] + odw, gs[z] + odw, dw0[z], (uint64_t)fo * fi * 4);
        pair_rnd_fill(db0[z], (size_t)fo, -1.0f, 1.0f);
        pair_put(cs[z] + odb, gs[z] + odb, db0[z], (uint64_t)fo * 4);
    }
    int64_t delta[LP_SEEDS_MAX];
    uint64_t seed[LP_SEEDS_MAX];
    for (int32_t z = 0; z < Z; z++) delta[z] = (int64_t)(gs[z] - gs[0]), seed[z] = (uint64_t)z + 1;
    pair_put(cd, gd, delta, (uint64_t)Z * 8);
    pair_put(ck, gk, seed, (uint64_t)Z * 8);
#define LP_FWD(base) {.rows = rows, .fi = fi, .fo = fo, .dtype = dt, .x = (base) + ox, .ldx = fi, .W = (base) + ow, \
                      .b = (float *)(void *)((base) + ob), .y = (base) + oy, .ldy = fo, .y_dtype = dt, .act = act}
#define LP_BWD(base) {.rows = rows, .fi = fi, .fo = fo, .dtype = dt, .dy = (base) + ody, .lddy = fo, .x = (base) + ox,  \
                      .ldx = fi, .act_x = act, .W = (base) + ow, .dW = (float *)(void *)((base) + odw),                 \
                      .db = (float *)(void *)((base) + odb), .beta = beta, .dx = (base) + odx, .lddx = fi, .dx_dtype = dt}
    rlt_linear_fwd fg = LP_FWD(gs[0]);
    rlt_linear_bwd bg = LP_BWD(gs[0]);
    int rb = P.gpu.ops->graph(&P.gpu, RLT_GRAPH_BEGIN, 7);
    int r0 = rb == RLT_OK ? P.gpu.ops->seed_batch(&P.gpu, &(rlt_seeds_desc){.n = Z, .delta = gd, .seed = gk,
                                                                           .delta_host = delta})
                          : rb;
    int r1 = r0 == RLT_OK ? P.gpu.ops->linear_forward(&P.gpu, &fg) : r0;
    int r2 = r1 == RLT_OK ? P.gpu.ops->linear_backward(&P.gpu, &bg) : r1;
    P.gpu.ops->seed_batch(&P.gpu, NULL);
    int re = rb == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_END, 7) : rb;
    int rl = re == RLT_OK && r2 == RLT_OK ? P.gpu.ops->graph(&P.gpu, RLT_GRAPH_LAUNCH, 7) : re;
    CHECK(r2 == RLT_OK && rl == RLT_OK, "%d seeds, 16-bit layer %dx%d->%d batched: capture %d launch %d (%s)", Z, rows,
          fi, fo, r2, rl, P.egpu.msg);
    size_t bad[4] = {0, 0, 0, 0};
    for (int32_t z = 0; z < Z && r2 == RLT_OK && rl == RLT_OK; z++) {
        rlt_linear_fwd fc = LP_FWD(cs[z]);
        rlt_linear_bwd bc = LP_BWD(cs[z]);
        pair_die_on(P.cpu.ops->linear_forward(&P.cpu, &fc), &P.ecpu, "cpu forward");
        pair_die_on(P.cpu.ops->linear_backward(&P.cpu, &bc), &P.ecpu, "cpu backward");
        fetch_as_float(hc, hg, cs[z] + oy, gs[z] + oy, dt, (size_t)rows * fo);
        for (int32_t r = 0; r < rows; r++)
            for (int32_t o = 0; o < fo; o++) {
                double S = fabs(bv[z][o]);
                for (int32_t i = 0; i < fi; i++) S += fabs((double)xv[z][(size_t)r * fi + i] * wv[z][(size_t)o * fi + i]);
                const double c = hc[(size_t)r * fo + o], g = hg[(size_t)r * fo + o];
                if (!(fabs(g - c) <= 2 * gamma_n(fi + 2) * S + 4 * u_lp(dt) * (fabs(c) + S) + act_slack(act, c) + 1e-30))
                    bad[0]++;
            }
        pair_fetch(hc, hg, cs[z] + odw, gs[z] + odw, (uint64_t)fo * fi * 4);
        for (int32_t o = 0; o < fo; o++)
            for (int32_t i = 0; i < fi; i++) {
                double S = fabs(beta * dw0[z][(size_t)o * fi + i]);
                for (int32_t r = 0; r < rows; r++)
                    S += fabs((double)dyv[z][(size_t)r * fo + o] * xv[z][(size_t)r * fi + i]);
                const size_t k = (size_t)o * fi + i;
                if (!(fabs((double)hg[k] - hc[k]) <= 2 * gamma_n(rows + 2) * S + 1e-30)) bad[1]++;
            }
        pair_fetch(hc, hg, cs[z] + odb, gs[z] + odb, (uint64_t)fo * 4);
        for (int32_t o = 0; o < fo; o++) {
            double S = fabs(beta * db0[z][o]);
            for (int32_t r = 0; r < rows; r++) S += fabs((double)dyv[z][(size_t)r * fo + o]);
            if (!(fabs((double)hg[o] - hc[o]) <= 2 * gamma_n(rows + 2) * S + 1e-30)) bad[2]++;
        }
        fetch_as_float(hc, hg, cs[z] + odx, gs[z] + odx, dt, (size_t)rows * fi);
        for (int32_t r = 0; r < rows; r++)
            for (int32_t i = 0; i < fi; i++) {
                double S = 0;
                for (int32_t o = 0; o < fo; o++)
                    S += fabs((double)dyv[z][(size_t)r * fo + o] * wv[z][(size_t)o * fi + i]);
                const double x = xv[z][(size_t)r * fi + i], d = act == RLT_ACT_TANH ? 1 - x * x : 1.0;
                const size_t k = (size_t)r * fi + i;
                const double c = hc[k];
                const double bound = d * (2 * gamma_n(fo + 2) * S + 4 * u_lp(dt) * S) + 4 * u_lp(dt) * fabs(c) +
                                     4 * U * fabs(c) + 1e-30;
                if (!(fabs((double)hg[k] - c) <= bound)) bad[3]++;
            }
    }
#undef LP_FWD
#undef LP_BWD
    printf("%d seeds batched, %s %dx%d->%d act %d beta %g: y %zu, dW %zu, db %zu, dx %zu beyond the bounds\n", Z,
           dt_name(dt), rows, fi, fo, act, beta, bad[0], bad[1], bad[2], bad[3]);
    CHECK(bad[0] + bad[1] + bad[2] + bad[3] == 0, "%d seeds batched %s %dx%d->%d: y %zu, dW %zu, db %zu, dx %zu", Z,
          dt_name(dt), rows, fi, fo, bad[0], bad[1], bad[2], bad[3]);
    pair_reset();
}

static void test_seeds(void) {
    seeds_case(RLT_LP_BF16, 4, 256, 256, 256, RLT_ACT_RELU, 0.0f); /* TD3 256-256's hidden layer; db from BGRADB */
    seeds_case(RLT_LP_F16, 3, 128, 64, 96, RLT_ACT_TANH, 1.0f);    /* db from our column sum; a tanh pass */
    seeds_case(RLT_LP_BF16, 8, 64, 24, 64, RLT_ACT_RELU, 1.0f);
}

static void test_linear(void) {
    const int32_t dts[] = {RLT_LP_BF16, RLT_LP_F16};
    for (int d = 0; d < 2; d++) {
        int32_t dt = dts[d];
        linear_case(dt, dt, 256, 23, 256, RLT_ACT_RELU);
        linear_case(dt, dt, 100, 64, 64, RLT_ACT_TANH);
        linear_case(dt, RLT_LP_F32, 256, 256, 1, RLT_ACT_NONE);
        linear_case(dt, RLT_LP_F32, 37, 256, 6, RLT_ACT_TANH);
        linear_case(dt, dt, 512, 256, 256, RLT_ACT_RELU);
        linear_backward_case(dt, dt, 256, 256, 256, RLT_ACT_RELU);
        linear_backward_case(dt, dt, 100, 64, 64, RLT_ACT_TANH);
        linear_backward_case(dt, RLT_LP_F32, 256, 23, 256, RLT_ACT_NONE);
        linear_backward_case(dt, RLT_LP_F32, 37, 256, 1, RLT_ACT_NONE);
        linear_case(dt, dt, 512, 1024, 512, RLT_ACT_RELU);
        linear_case(dt, dt, 512, 1024, 512, RLT_ACT_TANH);
        linear_backward_case(dt, dt, 512, 1024, 512, RLT_ACT_RELU);
    }
}

static double nerr(const float *g, const float *c, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)g[i] - c[i]) * ((double)g[i] - c[i]);
        den += (double)c[i] * c[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void conv_case(int32_t slot, rlt_conv_shape s, int32_t dt, const char *label) {
    s.dtype = dt;
    uint64_t wc = 0, wg = 0;
    int r1 = P.cpu.ops->conv_prepare(&P.cpu, slot, &s, &wc), r2 = P.gpu.ops->conv_prepare(&P.gpu, slot, &s, &wg);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "%s conv_prepare: %s", label, P.egpu.msg);
    if (r1 != RLT_OK || r2 != RLT_OK) return;
    int32_t oh = rlt_conv_out_dim(s.h, s.kh, s.stride, s.pad), ow = rlt_conv_out_dim(s.w, s.kw, s.stride, s.pad);
    size_t nx = (size_t)s.n * s.c * s.h * s.w, nw = (size_t)s.k * s.c * s.kh * s.kw, ny = (size_t)s.n * s.k * oh * ow;
    void *cx, *gx, *cw, *gw, *cb, *gb, *cy, *gy, *cdy, *gdy, *cdx, *gdx, *cdw, *gdw, *cdb, *gdb, *cws, *gws;
    static float v[1 << 22];
    pair_take(nx * 2, &cx, &gx);
    pair_take(nw * 2, &cw, &gw);
    pair_take((uint64_t)s.k * 4, &cb, &gb);
    pair_take(ny * 2, &cy, &gy);
    pair_take(ny * 2, &cdy, &gdy);
    pair_take(nx * 2, &cdx, &gdx);
    pair_take(nw * 4, &cdw, &gdw);
    pair_take((uint64_t)s.k * 4, &cdb, &gdb);
    /* Each backend gets a workspace of its own size at the same offset (the larger of the two). */
    pair_take(wc > wg ? wc : wg, &cws, &gws);
    put_lp(cx, gx, dt, v, nx, 0.0f, 1.0f);
    put_lp(cw, gw, dt, v, nw, -0.1f, 0.1f);
    pair_rnd_fill(v, (size_t)s.k, -0.2f, 0.2f);
    pair_put(cb, gb, v, (uint64_t)s.k * 4);
    rlt_conv_fwd kfc = {.slot = slot, .y = cy, .x = cx, .w = cw, .b = cb, .act = RLT_ACT_RELU, .ws = cws, .ws_bytes = wc};
    rlt_conv_fwd kfg = {.slot = slot, .y = gy, .x = gx, .w = gw, .b = gb, .act = RLT_ACT_RELU, .ws = gws, .ws_bytes = wg};
    r1 = P.cpu.ops->conv_forward(&P.cpu, &kfc);
    r2 = P.gpu.ops->conv_forward(&P.gpu, &kfg);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "%s conv_forward: %s", label, P.egpu.msg);
    fetch_as_float(hc, hg, cy, gy, dt, ny);
    double ey = nerr(hg, hc, ny);
    put_lp(cdy, gdy, dt, v, ny, -1.0f, 1.0f);
    pair_rnd_fill(v, nw, -0.01f, 0.01f);
    pair_put(cdw, gdw, v, nw * 4);
    pair_rnd_fill(v, (size_t)s.k, -0.01f, 0.01f);
    pair_put(cdb, gdb, v, (uint64_t)s.k * 4);
    rlt_conv_bwd kbc = {.slot = slot, .dx = cdx, .dw = cdw, .db = cdb, .dy = cdy, .y = cy, .x = cx, .w = cw,
                        .act = RLT_ACT_RELU, .ws = cws, .ws_bytes = wc};
    rlt_conv_bwd kbg = {.slot = slot, .dx = gdx, .dw = gdw, .db = gdb, .dy = gdy, .y = gy, .x = gx, .w = gw,
                        .act = RLT_ACT_RELU, .ws = gws, .ws_bytes = wg};
    r1 = P.cpu.ops->conv_backward(&P.cpu, &kbc);
    r2 = P.gpu.ops->conv_backward(&P.gpu, &kbg);
    CHECK(r1 == RLT_OK && r2 == RLT_OK, "%s conv_backward: %s", label, P.egpu.msg);
    fetch_as_float(hc, hg, cdx, gdx, dt, nx);
    double edx = nerr(hg, hc, nx);
    pair_fetch(hc, hg, cdw, gdw, nw * 4);
    double edw = nerr(hg, hc, nw);
    pair_fetch(hc, hg, cdb, gdb, (uint64_t)s.k * 4);
    double edb = nerr(hg, hc, (size_t)s.k);
    double tol = 4 * u_lp(dt);
    printf("conv %s %s: normalised error y %.2e, dx %.2e, dw %.2e, db %.2e (bound %.2e)\n", label, dt_name(dt), ey, edx,
           edw, edb, tol);
    CHECK(ey <= tol && edx <= tol && edw <= tol && edb <= 1e-5, "%s %s: y %.2e dx %.2e dw %.2e db %.2e", label,
          dt_name(dt), ey, edx, edw, edb);
    pair_reset();
}

static void test_conv_lp(void) {
    const int32_t dts[] = {RLT_LP_BF16, RLT_LP_F16};
    for (int d = 0; d < 2; d++) {
        conv_case(0, (rlt_conv_shape){32, 4, 84, 84, 32, 8, 8, 4, 0, 0}, dts[d], "nature conv1");
        conv_case(1, (rlt_conv_shape){32, 32, 20, 20, 64, 4, 4, 2, 0, 0}, dts[d], "nature conv2");
        conv_case(2, (rlt_conv_shape){32, 64, 9, 9, 64, 3, 3, 1, 0, 0}, dts[d], "nature conv3");
        conv_case(3, (rlt_conv_shape){3, 3, 7, 9, 5, 3, 2, 2, 1, 0}, dts[d], "odd padded conv");
    }
}

static void test_amp_ops(void) {
    uint64_t n = 100003;
    void *cg, *gg, *ca, *ga;
    pair_take(n * 4, &cg, &gg);
    pair_take(sizeof(rlt_amp_state), &ca, &ga);
    for (int bad = 0; bad < 2; bad++) {
        pair_rnd_fill(hx, n, -1000.0f, 1000.0f);
        if (bad) hx[n / 2] = INFINITY;
        pair_put(cg, gg, hx, n * 4);
        rlt_amp_state a0 = {65536.0f, 17, 0, 0, 5};
        pair_put(ca, ga, &a0, sizeof a0);
        rlt_amp_op uc = {.mode = RLT_AMP_UNSCALE, .amp = ca, .g = cg, .n = n}, ug = uc;
        ug.amp = ga;
        ug.g = gg;
        CHECK(P.cpu.ops->amp(&P.cpu, &uc) == RLT_OK && P.gpu.ops->amp(&P.gpu, &ug) == RLT_OK, "amp UNSCALE: %s", P.egpu.msg);
        pair_fetch(hc, hg, cg, gg, n * 4);
        CHECK(memcmp(hc, hg, n * 4) == 0, "amp UNSCALE: the unscaled gradients are bit-identical");
        rlt_amp_state sc, sg;
        pair_fetch(&sc, &sg, ca, ga, sizeof sc);
        CHECK(sc.found_inf == bad && sg.found_inf == bad, "amp UNSCALE flags %d (cpu %d gpu %d)", bad, sc.found_inf,
              sg.found_inf);
        int64_t steps[2] = {9, 9};
        void *cs, *gs;
        pair_take(8, &cs, &gs);
        pair_put(cs, gs, steps, 8);
        rlt_amp_op pc = {.mode = RLT_AMP_UPDATE, .amp = ca, .step = cs, .growth = 2.0f, .backoff = 0.5f,
                         .growth_interval = 18},
                   pg = pc;
        pg.amp = ga;
        pg.step = gs;
        CHECK(P.cpu.ops->amp(&P.cpu, &pc) == RLT_OK && P.gpu.ops->amp(&P.gpu, &pg) == RLT_OK, "amp UPDATE");
        pair_fetch(&sc, &sg, ca, ga, sizeof sc);
        pair_fetch(&steps[0], &steps[1], cs, gs, 8);
        CHECK(memcmp(&sc, &sg, sizeof sc) == 0 && steps[0] == steps[1], "amp UPDATE: same state on both");
        /* Overflow: halve, reset, count, roll the step back. Finite: the 18th good step doubles the scale. */
        CHECK(bad ? (sg.scale == 32768.0f && sg.good_steps == 0 && sg.skipped == 6 && steps[1] == 8)
                  : (sg.scale == 131072.0f && sg.good_steps == 0 && sg.skipped == 5 && steps[1] == 9),
              "amp UPDATE (%s): scale %g good %d skipped %lld step %lld", bad ? "overflow" : "finite", sg.scale,
              sg.good_steps, (long long)sg.skipped, (long long)steps[1]);
        CHECK(sg.found_inf == 0, "amp UPDATE clears the flag");
    }
    pair_reset();
}

/* ---- the agent ---- */
static rlt_agent *td3_agent(const char *precision) {
    char set[64];
    snprintf(set, sizeof set, "precision=%s", precision);
    const char *sets[] = {"device=cuda:0", set, NULL};
    rlt_agent *ag = test_td3_synthetic(sets, NULL);
    CHECK(ag != NULL, "%s agent", precision);
    if (!ag) exit(test_summary("gpu_lowp"));
    return ag;
}

/* Every state tensor of a TD3 agent, fp32 masters and 16-bit copies, in one host buffer. */
static uint64_t snapshot(rlt_agent *ag, unsigned char *out) {
    rlt_td3 *t = td3_state(ag);
    uint64_t nb = t->n_total * 4, off = 0;
    const void *f32[] = {t->params, t->target, t->adam_m, t->adam_v};
    for (int i = 0; i < 4; i++, off += nb) CHECK(agent_fetch(ag, out + off, f32[i], nb) == RLT_OK, "fetch");
    const void *lp[] = {t->params_lp, t->target_lp};
    for (int i = 0; i < 2; i++, off += nb / 2) CHECK(agent_fetch(ag, out + off, lp[i], nb / 2) == RLT_OK, "fetch");
    CHECK(agent_fetch(ag, out + off, ag->counters, RLT_CTR_COUNT * 8) == RLT_OK, "fetch");
    return off + RLT_CTR_COUNT * 8;
}

static unsigned char snap_a[16 << 20], snap_b[16 << 20];

static void test_overflow_skip(void) {
    rlt_agent *ag = td3_agent("fp16");
    int32_t done;
    for (int k = 0; k < 50; k++) CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
    rlt_amp_state a;
    CHECK(agent_read_amp(ag, &a) == RLT_OK && a.scale == 65536.0f && a.skipped == 0, "fp16 starts at 65536: %g, %lld",
          a.scale, (long long)a.skipped);
    /* Updates alternate critic-only and critic+actor (policy delay 2); after 50 the next is critic-only. */
    uint64_t n = snapshot(ag, snap_a);
    a.scale = 3.0e38f;
    *ag->amp_host = a;
    CHECK(agent_put(ag, ag->amp, ag->amp_host, sizeof a) == RLT_OK, "inject the scale");
    CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update with the overflowing scale");
    CHECK(snapshot(ag, snap_b) == n, "snapshot");
    /* The update counter moved (the update ran); everything else must not have. */
    int64_t *ctr_a = (int64_t *)(snap_a + n - RLT_CTR_COUNT * 8), *ctr_b = (int64_t *)(snap_b + n - RLT_CTR_COUNT * 8);
    CHECK(ctr_b[RLT_CTR_UPDATE] == ctr_a[RLT_CTR_UPDATE] + 1, "the update ran");
    ctr_b[RLT_CTR_UPDATE] = ctr_a[RLT_CTR_UPDATE];
    CHECK(memcmp(snap_a, snap_b, n) == 0, "skipped step: weights, copies, targets, moments and step counters bit-identical");
    CHECK(agent_read_amp(ag, &a) == RLT_OK && a.scale == 1.5e38f && a.skipped == 1 && a.found_inf == 0 && a.good_steps == 0,
          "after the overflow: scale %g (want 1.5e38), skipped %lld (want 1)", a.scale, (long long)a.skipped);
    /* A sane scale trains again. */
    a.scale = 1024.0f;
    *ag->amp_host = a;
    CHECK(agent_put(ag, ag->amp, ag->amp_host, sizeof a) == RLT_OK, "reset the scale");
    for (int k = 0; k < 10; k++) CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update");
    snapshot(ag, snap_b);
    CHECK(memcmp(snap_a, snap_b, td3_state(ag)->n_total * 4) != 0, "the weights move again");
    CHECK(agent_read_amp(ag, &a) == RLT_OK && a.skipped == 1 && a.scale == 1024.0f && a.good_steps == 15,
          "10 finite updates (15 optimiser steps): scale %g skipped %lld good %d", a.scale, (long long)a.skipped,
          a.good_steps);
    printf("fp16 overflow: step skipped on the device, state bit-identical, scale 3e38 -> 1.5e38\n");
    rlt_agent_free(ag);
}

static float pa[1 << 20], pb[1 << 20];

static void test_agreement(void) {
    rlt_agent *lp = td3_agent("bf16"), *f32 = td3_agent("fp32");
    int32_t done;
    for (int k = 0; k < 30; k++) {
        CHECK(rlt_agent_update(lp, &done) == RLT_OK, "bf16 update: %s", rlt_agent_errmsg(lp));
        CHECK(rlt_agent_update(f32, &done) == RLT_OK, "fp32 update");
    }
    uint64_t n = td3_state(lp)->n_total;
    CHECK(agent_fetch(lp, pa, td3_state(lp)->params, n * 4) == RLT_OK && agent_fetch(f32, pb, td3_state(f32)->params, n * 4) == RLT_OK,
          "fetch");
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        num += ((double)pa[i] - pb[i]) * ((double)pa[i] - pb[i]);
        den += (double)pb[i] * pb[i];
    }
    double d = sqrt(num / den);
    printf("TD3 after 30 updates: bf16 vs fp32 relative parameter distance %.3g\n", d);
    CHECK(d > 0 && d < 0.05, "bf16 follows fp32: %.3g", d);
    CHECK(lp->plan.arena_bytes[RLT_LOC_DEVICE] != f32->plan.arena_bytes[RLT_LOC_DEVICE], "the plans differ");
    rlt_agent_free(lp);
    rlt_agent_free(f32);
}

/* A DQN agent with the Nature CNN on 4x84x84 uint8 frames, after 2,000 synthetic transitions. */
static rlt_agent *nature_agent(const char *precision) {
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "algo: dqn\ndevice: cuda:0\nprecision: %s\ntrain: {batch_size: 32}\nreplay: {capacity: 3000}\n"
             "dqn: {learning_starts: 0, train_freq: 1, gradient_steps: 1, target_update_every: 1000000000}\n"
             "network: {hidden: [512], conv: nature}\nmemory: {budget_mb: 4096}\n", precision);
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, yaml, "gpu_lowp") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    rlt_space os = {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {4, 84, 84, 0}, 0, NULL, NULL};
    rlt_space as = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 6, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &os, &as, &ag);
    rlt_config_free(cfg);
    CHECK(rc == RLT_OK, "%s Nature DQN: %s", precision, rlt_agent_errmsg(ag));
    if (rc != RLT_OK) exit(test_summary("gpu_lowp"));
    static uint8_t frame[4 * 84 * 84], next[4 * 84 * 84];
    uint32_t st = 5;
    for (int i = 0; i < 2000; i++) {
        for (size_t j = 0; j < sizeof frame; j++) frame[j] = (uint8_t)((st = st * 1664525u + 1013904223u) >> 24);
        memcpy(next, frame, sizeof frame);
        int32_t a = (int32_t)(st % 6);
        float r = (float)(a == 2);
        uint8_t term = i % 100 == 99, trunc = 0;
        CHECK(rlt_agent_observe(ag, frame, &a, &r, next, &term, &trunc, 1) == RLT_OK, "observe");
    }
    return ag;
}

/* The 16-bit convolutions inside a whole DQN update (captured as a graph): 20 updates in bf16 and fp16 stay
 * close to the same 20 in fp32 (the bound of test_agreement), with a smaller activation plan. */
static void test_nature_agreement(void) {
    rlt_agent *f32 = nature_agent("fp32");
    int32_t done;
    for (int k = 0; k < 20; k++) CHECK(rlt_agent_update(f32, &done) == RLT_OK, "fp32 update");
    uint64_t n = dqn_state(f32)->n_params;
    static float p32[4 << 20], plp[4 << 20];
    CHECK(n <= (4u << 20) && agent_fetch(f32, p32, dqn_state(f32)->params, n * 4) == RLT_OK, "fetch");
    const char *precs[] = {"bf16", "fp16"};
    for (int i = 0; i < 2; i++) {
        rlt_agent *lp = nature_agent(precs[i]);
        for (int k = 0; k < 20; k++) CHECK(rlt_agent_update(lp, &done) == RLT_OK, "%s update: %s", precs[i], rlt_agent_errmsg(lp));
        CHECK(agent_fetch(lp, plp, dqn_state(lp)->params, n * 4) == RLT_OK, "fetch");
        double d = nerr(plp, p32, n);
        rlt_amp_state a;
        agent_read_amp(lp, &a);
        printf("DQN Nature CNN after 20 updates: %s vs fp32 relative parameter distance %.3g (skipped steps %lld)\n",
               precs[i], d, (long long)a.skipped);
        CHECK(d > 0 && d < 0.05, "%s Nature DQN follows fp32: %.3g", precs[i], d);
        rlt_agent_free(lp);
    }
    rlt_agent_free(f32);
}

static void learn(const char *config, const char *precision, double threshold, int64_t steps) {
    char prec[32];
    snprintf(prec, sizeof prec, "precision=%s", precision);
    const char *sets[] = {"device=cuda:0", prec, NULL};
    rlt_progress p;
    test_train_config_sets(config, sets, "gpu_lowp_learn", &p);
    CHECK(p.env_steps == steps && p.best_eval_return >= threshold, "%s in %s reached %.1f (need %.0f)", config,
          precision, p.best_eval_return, threshold);
}

int main(void) {
    pair_open(256ull << 20);
    test_cast();
    test_cast_u8();
    test_linear();
    test_seeds();
    test_amp_ops();
    test_conv_lp();
    pair_close();
    test_overflow_skip();
    test_agreement();
    test_nature_agreement();
    learn("td3_pendulum.yaml", "bf16", -250.0, 20000);
    learn("td3_pendulum.yaml", "fp16", -250.0, 20000);
    learn("dqn_cartpole.yaml", "fp16", 475.0, 50000);
    return test_summary("gpu_lowp");
}
