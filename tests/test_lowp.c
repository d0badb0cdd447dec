/* test_lowp.c: the reduced-precision pieces on the CPU.
 * - Conversions (base/lowp.h): every 16-bit pattern of bf16 and fp16 widens to fp32 and rounds back to
 *   itself (NaNs stay NaN); fp32 values round to nearest with ties to even, checked against the neighbours
 *   at and around each halfway point; fp16 overflows to inf at 65520 and keeps 65504 below; subnormals.
 * - The CPU twins: a 16-bit linear_forward with fp32 output on inputs that are exact in the 16-bit type equals
 *   the fp32 linear_forward up to fp32 summation order (2 gamma(k+2) S); the 16-bit linear_backward likewise
 *   against the fp32 one; cast with a scale; amp's UNSCALE / UPDATE semantics; adam with its skip flag set
 *   leaves every buffer bit-identical, and writes p's 16-bit copy when it steps.
 * - A reduced-precision config on the CPU trains in fp32 and says so in the plan.
 * - precision: tf32 parses, reads back and dumps as "tf32"; on the CPU the plan says fp32 with the fallback note,
 *   and 20 TD3 updates give bit for bit the actions of the same 20 in fp32 (the CPU has no TF32). */
#include <math.h>
#include <string.h>

#include "backend_registry.h"
#include "harness.h"
#include "lowp.h"
#include "rltrain.h"

#define U (1.0 / 16777216.0)

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_conversions(void) {
    int bad_bf = 0, bad_h = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float b = rlt_bf16_to_f32((uint16_t)h), f = rlt_f16_to_f32((uint16_t)h);
        if (isnan(b) ? !isnan(rlt_bf16_to_f32(rlt_f32_to_bf16(b))) : rlt_f32_to_bf16(b) != h) bad_bf++;
        if (isnan(f) ? !isnan(rlt_f16_to_f32(rlt_f32_to_f16(f))) : rlt_f32_to_f16(f) != h) bad_h++;
    }
    CHECK(bad_bf == 0 && bad_h == 0, "16-bit round trips: bf16 %d, fp16 %d failures", bad_bf, bad_h);
    /* Ties to even and the neighbours of each halfway point, for a sample of positive bf16 / fp16 values. */
    int bad_tie = 0;
    for (uint32_t h = 1; h < 0x7f00; h += 97) {
        float lo = rlt_bf16_to_f32((uint16_t)h), hi = rlt_bf16_to_f32((uint16_t)(h + 1));
        uint32_t ul, uh;
        memcpy(&ul, &lo, 4);
        memcpy(&uh, &hi, 4);
        uint32_t mid = (ul + uh) / 2; /* the exact halfway float between them */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (rlt_f32_to_bf16(f_of(mid)) != even || rlt_f32_to_bf16(f_of(mid - 1)) != h || rlt_f32_to_bf16(f_of(mid + 1)) != h + 1)
            bad_tie++;
    }
    for (uint32_t h = 1; h < 0x7bff; h += 31) {
        double lo = rlt_f16_to_f32((uint16_t)h), hi = rlt_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact in fp32: fp16 has 11 significant bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (rlt_f32_to_f16(mid) != even || rlt_f32_to_f16(nextafterf(mid, 0)) != h ||
            rlt_f32_to_f16(nextafterf(mid, INFINITY)) != h + 1)
            bad_tie++;
    }
    CHECK(bad_tie == 0, "round to nearest, ties to even: %d failures", bad_tie);
    CHECK(rlt_f32_to_f16(65504.0f) == 0x7bff && rlt_f32_to_f16(65519.99f) == 0x7bff && rlt_f32_to_f16(65520.0f) == 0x7c00,
          "fp16 overflow threshold");
    CHECK(rlt_f32_to_f16(-1e30f) == 0xfc00 && rlt_f32_to_bf16(INFINITY) == 0x7f80, "infinities");
    CHECK(rlt_f32_to_f16(0x1p-24f) == 0x0001 && rlt_f32_to_f16(0x1p-25f) == 0x0000 && rlt_f32_to_f16(0x1.8p-25f) == 0x0001,
          "fp16 subnormals: 2^-24 kept, 2^-25 ties to even zero, 1.5 * 2^-25 up");
    CHECK(rlt_f32_to_bf16(-0.0f) == 0x8000 && rlt_f32_to_f16(-0.0f) == 0x8000, "negative zero");
}

static rlt_backend bk;
static rlt_err err;
static float x[64 * 96], w[48 * 96], b[48], y32[64 * 48], ylp[64 * 48], dy[64 * 48];
static uint16_t x16[64 * 96], w16[48 * 96], dy16[64 * 48], dx16[64 * 96];
static float dw32[48 * 96], dwlp[48 * 96], db32[48], dblp[48], dx32[64 * 96], dxlp[64 * 96];

static void round_to(int32_t dt, float *v, uint16_t *bits, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rlt_lp_store(bits, dt, (int64_t)i, v[i]);
        v[i] = rlt_lp_load(bits, dt, (int64_t)i);
    }
}

static void test_twins(int32_t dt) {
    const int32_t R = 64, FI = 96, FO = 48;
    uint32_t s = 7;
    for (int i = 0; i < R * FI; i++) x[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < FO * FI; i++) w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 83886080.0f - 0.1f;
    for (int i = 0; i < FO; i++) b[i] = (float)i / FO - 0.5f;
    for (int i = 0; i < R * FO; i++) dy[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    round_to(dt, x, x16, (size_t)R * FI);
    round_to(dt, w, w16, (size_t)FO * FI);
    round_to(dt, dy, dy16, (size_t)R * FO);
    rlt_linear_fwd f32 = {.rows = R, .fi = FI, .fo = FO, .x = x, .ldx = FI, .W = w, .b = b, .y = y32, .ldy = FO,
                          .act = RLT_ACT_TANH};
    rlt_linear_fwd flp = {.rows = R, .fi = FI, .fo = FO, .dtype = dt, .x = x16, .ldx = FI, .W = w16, .b = b, .y = ylp,
                          .ldy = FO, .y_dtype = RLT_LP_F32, .act = RLT_ACT_TANH};
    CHECK(bk.ops->linear_forward(&bk, &f32) == RLT_OK, "fp32 forward");
    CHECK(bk.ops->linear_forward(&bk, &flp) == RLT_OK, "lp forward: %s", err.msg);
    int bad = 0;
    for (int r = 0; r < R; r++)
        for (int o = 0; o < FO; o++) {
            double S = fabs(b[o]);
            for (int i = 0; i < FI; i++) S += fabs((double)x[r * FI + i] * w[o * FI + i]);
            if (fabs((double)ylp[r * FO + o] - y32[r * FO + o]) > 2 * (FI + 2) * U * S + 8 * U) bad++;
        }
    CHECK(bad == 0, "16-bit linear_forward (fp32 out) equals fp32 on 16-bit-exact inputs: %d off", bad);
    memset(dw32, 0, sizeof dw32);
    memset(dwlp, 0, sizeof dwlp);
    memset(db32, 0, sizeof db32);
    memset(dblp, 0, sizeof dblp);
    /* x as a ReLU output for act_x: clamp at 0 (still exact in the 16-bit type). */
    for (int i = 0; i < R * FI; i++) x[i] = x[i] > 0 ? x[i] : 0.0f;
    round_to(dt, x, x16, (size_t)R * FI);
    rlt_linear_bwd b32 = {.rows = R, .fi = FI, .fo = FO, .dy = dy, .lddy = FO, .x = x, .ldx = FI, .act_x = RLT_ACT_RELU,
                          .W = w, .dW = dw32, .db = db32, .beta = 1.0f, .dx = dx32, .lddx = FI};
    rlt_linear_bwd blp = {.rows = R, .fi = FI, .fo = FO, .dtype = dt, .dy = dy16, .lddy = FO, .x = x16, .ldx = FI,
                          .act_x = RLT_ACT_RELU, .W = w16, .dW = dwlp, .db = dblp, .beta = 1.0f, .dx = dxlp, .lddx = FI,
                          .dx_dtype = RLT_LP_F32};
    CHECK(bk.ops->linear_backward(&bk, &b32) == RLT_OK, "fp32 backward");
    CHECK(bk.ops->linear_backward(&bk, &blp) == RLT_OK, "lp backward: %s", err.msg);
    bad = 0;
    for (int i = 0; i < FO * FI; i++) bad += fabs((double)dwlp[i] - dw32[i]) > 2 * (R + 2) * U * R * 0.5 * 0.5;
    for (int i = 0; i < FO; i++) bad += fabs((double)dblp[i] - db32[i]) > 2 * (R + 2) * U * R * 0.5;
    for (int i = 0; i < R * FI; i++) bad += fabs((double)dxlp[i] - dx32[i]) > 2 * (FO + 2) * U * FO * 0.5 * 0.1 + 1e-7;
    CHECK(bad == 0, "16-bit linear_backward equals fp32 on 16-bit-exact inputs: %d off", bad);
    /* 16-bit dx: the fp32 value rounded (the act' factor is 0 or 1 for ReLU, exact). */
    blp.dW = blp.db = NULL;
    blp.beta = 0.0f;
    blp.dx = dx16;
    blp.dx_dtype = dt;
    CHECK(bk.ops->linear_backward(&bk, &blp) == RLT_OK, "lp backward, 16-bit dx");
    bad = 0;
    for (int i = 0; i < R * FI; i++) bad += dx16[i] != (dt == RLT_LP_BF16 ? rlt_f32_to_bf16(dxlp[i]) : rlt_f32_to_f16(dxlp[i]));
    CHECK(bad == 0, "16-bit dx is the fp32 dx rounded: %d off", bad);
    /* cast with a scale: the product rounded. */
    float three = 3.0f;
    rlt_cast c = {.rows = R, .cols = FI, .dst = dx16, .dst_dtype = dt, .ldd = FI, .src = x, .src_dtype = RLT_LP_F32,
                  .lds = FI, .scale = &three};
    CHECK(bk.ops->cast(&bk, &c) == RLT_OK, "cast");
    bad = 0;
    for (int i = 0; i < R * FI; i++) bad += rlt_lp_load(dx16, dt, i) != rlt_lp_load((uint16_t[]){dt == RLT_LP_BF16 ? rlt_f32_to_bf16(3.0f * x[i]) : rlt_f32_to_f16(3.0f * x[i])}, dt, 0);
    CHECK(bad == 0, "cast with scale: %d off", bad);
}

/* The 16-bit convolution twin against the fp32 one on 16-bit-exact inputs: y within two 16-bit roundings of
 * the fp32 result (2 ulp = 4 u (|y| + |product|), plus fp32 summation differences), dw the fp32 dw rounded,
 * db equal (both sum the same widened values in the same order). */
static void test_conv_twin(int32_t dt) {
    rlt_conv_shape s32 = {2, 3, 9, 8, 4, 3, 3, 2, 1, RLT_LP_F32}, s16 = s32;
    s16.dtype = dt;
    uint64_t w32 = 0, w16 = 0;
    CHECK(bk.ops->conv_prepare(&bk, 0, &s32, &w32) == RLT_OK && bk.ops->conv_prepare(&bk, 1, &s16, &w16) == RLT_OK,
          "conv_prepare: %s", err.msg);
    CHECK(w16 > w32, "a 16-bit slot asks for room to widen its tensors");
    enum { NX = 2 * 3 * 9 * 8, NW = 4 * 3 * 3 * 3, NY = 2 * 4 * 5 * 4 };
    static float xs[NX], ws[NW], bs[4], y32[NY], dy32[NY], dx32[NX], dw32[NW], db32[4], dwl[NW], dbl[4], wsp[1 << 16];
    static uint16_t xl[NX], wl[NW], yl[NY], dyl[NY], dxl[NX];
    uint32_t st = 3;
    for (int i = 0; i < NX; i++) xs[i] = (float)((st = st * 1664525u + 1013904223u) >> 8) / 16777216.0f;
    for (int i = 0; i < NW; i++) ws[i] = (float)((st = st * 1664525u + 1013904223u) >> 8) / 83886080.0f - 0.1f;
    for (int i = 0; i < 4; i++) bs[i] = 0.05f * (float)i - 0.05f;
    round_to(dt, xs, xl, NX);
    round_to(dt, ws, wl, NW);
    CHECK(w16 <= sizeof wsp, "workspace fits the test's buffer");
    rlt_conv_fwd c32 = {.slot = 0, .y = y32, .x = xs, .w = ws, .b = bs, .act = RLT_ACT_RELU, .ws = wsp, .ws_bytes = w32};
    rlt_conv_fwd c16 = {.slot = 1, .y = yl, .x = xl, .w = wl, .b = bs, .act = RLT_ACT_RELU, .ws = wsp, .ws_bytes = w16};
    CHECK(bk.ops->conv_forward(&bk, &c32) == RLT_OK, "fp32 conv");
    CHECK(bk.ops->conv_forward(&bk, &c16) == RLT_OK, "16-bit conv: %s", err.msg);
    double u = dt == RLT_LP_BF16 ? 1.0 / 256 : 1.0 / 2048;
    int bad = 0;
    /* The product is rounded before the bias: its rounding is relative to the product (|s| < 1 here), not y. */
    for (int i = 0; i < NY; i++) bad += fabs((double)rlt_lp_load(yl, dt, i) - y32[i]) > 4 * u * (fabs(y32[i]) + 1.0);
    CHECK(bad == 0, "16-bit conv forward within two roundings of fp32: %d off", bad);
    /* Backward from the same (16-bit-exact) dy through the same y: the fp32 y's ReLU mask is the 16-bit one. */
    for (int i = 0; i < NY; i++) {
        dy32[i] = (float)((st = st * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        y32[i] = rlt_lp_load(yl, dt, i);
    }
    round_to(dt, dy32, dyl, NY);
    memset(dw32, 0, sizeof dw32);
    memset(dwl, 0, sizeof dwl);
    memset(db32, 0, sizeof db32);
    memset(dbl, 0, sizeof dbl);
    rlt_conv_bwd g32 = {.slot = 0, .dx = dx32, .dw = dw32, .db = db32, .dy = dy32, .y = y32, .x = xs, .w = ws,
                        .act = RLT_ACT_RELU, .ws = wsp, .ws_bytes = w32};
    rlt_conv_bwd g16 = {.slot = 1, .dx = dxl, .dw = dwl, .db = dbl, .dy = dyl, .y = yl, .x = xl, .w = wl,
                        .act = RLT_ACT_RELU, .ws = wsp, .ws_bytes = w16};
    CHECK(bk.ops->conv_backward(&bk, &g32) == RLT_OK, "fp32 bwd");
    CHECK(bk.ops->conv_backward(&bk, &g16) == RLT_OK, "16-bit bwd");
    bad = 0;
    for (int i = 0; i < NW; i++) bad += dwl[i] != rlt_lp_round(dw32[i], dt);
    for (int i = 0; i < 4; i++) bad += dbl[i] != db32[i];
    for (int i = 0; i < NX; i++) bad += rlt_lp_load(dxl, dt, i) != rlt_lp_round(dx32[i], dt);
    CHECK(bad == 0, "16-bit conv backward: dw, db, dx the fp32 ones rounded: %d off", bad);
}

static void test_amp_and_skip(void) {
    float g[5] = {1024.0f, -2048.0f, 0.5f, 3.0f, 0.0f}, p[5] = {1, 2, 3, 4, 5}, m[5] = {0}, v[5] = {0}, t[5] = {5, 4, 3, 2, 1};
    uint16_t plp[5] = {0};
    rlt_amp_state a = {1024.0f, 3, 0, 0, 0};
    int64_t step = 1;
    CHECK(bk.ops->amp(&bk, &(rlt_amp_op){.mode = RLT_AMP_UNSCALE, .amp = &a, .g = g, .n = 5}) == RLT_OK && g[0] == 1.0f && g[1] == -2.0f && a.found_inf == 0, "unscale");
    g[2] = NAN;
    CHECK(bk.ops->amp(&bk, &(rlt_amp_op){.mode = RLT_AMP_UNSCALE, .amp = &a, .g = g, .n = 5}) == RLT_OK && a.found_inf == 1, "a NaN sets the flag");
    float p0[5], m0[5], v0[5], t0[5];
    memcpy(p0, p, sizeof p);
    memcpy(m0, m, sizeof m);
    memcpy(v0, v, sizeof v);
    memcpy(t0, t, sizeof t);
    rlt_adam_step st = {.p = p, .g = g, .m = m, .v = v, .n = 5, .hp = {1e-3f, 0.9f, 0.999f, 1e-8f}, .step = &step,
                        .target = t, .tau = 0.5f, .p_lp = plp, .lp_dtype = RLT_LP_BF16, .skip = &a.found_inf};
    CHECK(bk.ops->adam(&bk, &st) == RLT_OK, "adam skip");
    CHECK(!memcmp(p, p0, sizeof p) && !memcmp(m, m0, sizeof m) && !memcmp(v, v0, sizeof v) && !memcmp(t, t0, sizeof t) &&
              plp[0] == 0, "a skipped step changes nothing");
    rlt_amp_op up = {.mode = RLT_AMP_UPDATE, .amp = &a, .step = &step, .growth = 2.0f, .backoff = 0.5f,
                     .growth_interval = 2000};
    CHECK(bk.ops->amp(&bk, &up) == RLT_OK && a.scale == 512.0f && a.skipped == 1 && step == 0 && a.found_inf == 0,
          "amp UPDATE after an overflow");
    up.mode = (rlt_amp_mode)2;
    CHECK(bk.ops->amp(&bk, &up) == RLT_EINVAL && a.scale == 512.0f, "amp with an unknown mode is refused");
    up.mode = RLT_AMP_UPDATE;
    up.growth_interval = 0;
    CHECK(bk.ops->amp(&bk, &up) == RLT_EINVAL && a.scale == 512.0f, "amp UPDATE with growth_interval 0 is refused");
    g[2] = 0.25f;
    step = 1;
    CHECK(bk.ops->adam(&bk, &st) == RLT_OK && p[0] != p0[0] && plp[0] == rlt_f32_to_bf16(p[0]) &&
              plp[4] == rlt_f32_to_bf16(p[4]), "a step writes the 16-bit copy");
}

static void test_cpu_fallback(void) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    rlt_config_set(cfg, "device=cpu");
    rlt_config_set(cfg, "precision=fp16");
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "fp16 on the CPU initialises: %s", rlt_agent_errmsg(ag));
    if (rc == RLT_OK) {
        rlt_plan_summary s;
        const rlt_plan_entry *en;
        CHECK(rlt_agent_memory_plan(ag, &s, &en) == RLT_OK, "plan");
        CHECK(strcmp(s.precision, "fp32") == 0 && strstr(s.note, "fp32") != NULL, "the plan says fp32 (%s; %s)",
              s.precision, s.note);
    }
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

/* A small TD3 agent on the CPU in `precision`, trained 20 updates on fixed data; its greedy actions for 8 fixed
 * observations go to out. */
static void tf32_run(const char *precision, float out[8], rlt_plan_summary *s) {
    rlt_config *cfg;
    char set[64];
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    snprintf(set, sizeof set, "precision=%s", precision);
    const char *sets[] = {"device=cpu", set, "train.batch_size=32", "train.start_steps=0", "td3.actor_hidden=[32,32]",
                          "td3.critic_hidden=[32,32]", "replay.capacity=1000"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s", sets[i]);
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "%s on the CPU initialises: %s", precision, rlt_agent_errmsg(ag));
    memset(out, 0, 8 * sizeof(float));
    if (rc == RLT_OK) {
        enum { N = 200 };
        static float o[N * 3], o2[N * 3], a[N], r[N];
        static uint8_t term[N], trunc[N];
        uint32_t st = 7;
        for (int i = 0; i < N * 3; i++) {
            o[i] = (float)((st = st * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
            o2[i] = (float)((st = st * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        }
        for (int i = 0; i < N; i++) {
            a[i] = (float)((st = st * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
            r[i] = o[3 * i] - a[i] * a[i];
            term[i] = i % 50 == 49;
            trunc[i] = 0;
        }
        CHECK(rlt_agent_observe(ag, o, a, r, o2, term, trunc, N) == RLT_OK, "observe: %s", rlt_agent_errmsg(ag));
        int32_t done = 0, total = 0;
        for (int k = 0; k < 20; k++) {
            CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
            total += done;
        }
        CHECK(total == 20, "%s: 20 updates ran (%d)", precision, (int)total);
        CHECK(rlt_agent_act(ag, o, 8, 0, out) == RLT_OK, "act: %s", rlt_agent_errmsg(ag));
        CHECK(rlt_agent_memory_plan(ag, s, NULL) == RLT_OK, "plan");
    }
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

static void test_tf32_on_cpu(void) {
    rlt_config *cfg;
    char buf[1 << 14];
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_set(cfg, "precision=tf32") == RLT_OK, "precision=tf32: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_get(cfg, "precision", buf, sizeof buf) > 0 && strcmp(buf, "tf32") == 0, "get precision: %s", buf);
    CHECK(rlt_config_dump(cfg, buf, sizeof buf) > 0 && strstr(buf, "\nprecision: tf32\n") != NULL, "dump:\n%s", buf);
    CHECK(rlt_config_load_string(cfg, "precision: tf32\n", "t.yaml") == RLT_OK, "from YAML: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);

    float a32[8], atf[8];
    rlt_plan_summary s32, stf;
    tf32_run("fp32", a32, &s32);
    tf32_run("tf32", atf, &stf);
    CHECK(strcmp(stf.precision, "fp32") == 0 && strstr(stf.note, "fp32") != NULL, "the tf32 plan on the CPU says fp32 (%s; %s)",
          stf.precision, stf.note);
    CHECK(memcmp(a32, atf, sizeof a32) == 0, "tf32 on the CPU computes fp32: actions %.9g vs %.9g", a32[0], atf[0]);
    CHECK(a32[0] != 0.0f || a32[1] != 0.0f, "the agent produced actions");
}

int main(void) {
    test_conversions();
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend");
    bk.err = &err;
    test_twins(RLT_LP_BF16);
    test_twins(RLT_LP_F16);
    test_amp_and_skip();
    test_conv_twin(RLT_LP_BF16);
    test_conv_twin(RLT_LP_F16);
    rlt_backend_close(&bk);
    test_cpu_fallback();
    test_tf32_on_cpu();
    return test_summary("test_lowp");
}
