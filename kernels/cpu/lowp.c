/* lowp.c: the reduced-precision ops (bf16/fp16 compute copies, fp32 masters) and fp16 loss scaling on the
 * CPU. The CPU backend trains in fp32 (a reduced-precision config falls back, train/agent.c); these are the
 * readable twins the GPU parity test checks the CUDA ops against: inputs widened to fp32 exactly, products
 * summed in fp32 in index order, results rounded to nearest even (base/lowp.h). */
#include <math.h>

#include "lowp.h"
#include "cpu_ops.h"

static int lp_dtype_ok(rlt_lp dt) { return dt == RLT_LP_F32 || dt == RLT_LP_BF16 || dt == RLT_LP_F16; }
static int lp_half_ok(rlt_lp dt) { return dt == RLT_LP_BF16 || dt == RLT_LP_F16; }

static float act_apply(float z, rlt_act act) {
    if (act == RLT_ACT_RELU) return z > 0.0f ? z : 0.0f;
    if (act == RLT_ACT_TANH) return tanhf(z);
    return z;
}

/* act'(.) through the activation's output y, as act_grad. */
static float act_deriv(float y, rlt_act act) {
    if (act == RLT_ACT_RELU) return y > 0.0f ? 1.0f : 0.0f;
    if (act == RLT_ACT_TANH) return 1.0f - y * y;
    return 1.0f;
}

int cpu_cast(rlt_backend *bk, const rlt_cast *d) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    int32_t rows = d->rows;
    int64_t cols = d->cols, ldd = d->ldd, lds = d->lds;
    void *dst = d->dst;
    const void *src = d->src;
    rlt_lp dst_dtype = d->dst_dtype, src_dtype = d->src_dtype;
    const float *scale = d->scale;
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && ldd >= cols && lds >= cols, "cast");
    CPU_REQUIRE(bk, lp_dtype_ok(dst_dtype) && (lp_dtype_ok(src_dtype) || src_dtype == RLT_LP_U8), "cast");
    float s = scale ? *scale : 1.0f;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float v = src_dtype == RLT_LP_U8 ? (float)((const uint8_t *)src)[r * lds + c]
                                             : rlt_lp_load(src, src_dtype, r * lds + c);
            rlt_lp_store(dst, dst_dtype, r * ldd + c, scale ? v * s : v);
        }
    return RLT_OK;
}

int cpu_linear_forward_lp(rlt_backend *bk, const rlt_linear_fwd *d) {
    rlt_lp dtype = d->dtype, y_dtype = d->y_dtype;
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, ldx = d->ldx, ldy = d->ldy;
    const void *x = d->x, *W = d->W;
    const float *b = d->b;
    void *y = d->y;
    rlt_act act = d->act;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CPU_REQUIRE(bk, lp_half_ok(dtype) && (y_dtype == dtype || y_dtype == RLT_LP_F32), "linear_forward");
    CPU_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "linear_forward");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < fo; o++) {
            float s = 0.0f;
            for (int64_t i = 0; i < fi; i++) s += rlt_lp_load(x, dtype, r * ldx + i) * rlt_lp_load(W, dtype, o * fi + i);
            /* The product is rounded to y's type before the bias, as the GEMM's output is on the GPU. */
            rlt_lp_store(y, y_dtype, r * ldy + o, s);
            float z = rlt_lp_load(y, y_dtype, r * ldy + o) + (b ? b[o] : 0.0f);
            rlt_lp_store(y, y_dtype, r * ldy + o, act_apply(z, act));
        }
    return RLT_OK;
}

int cpu_linear_backward_lp(rlt_backend *bk, const rlt_linear_bwd *d) {
    rlt_lp dtype = d->dtype, dx_dtype = d->dx_dtype;
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, lddy = d->lddy, ldx = d->ldx, lddx = d->lddx;
    const void *dy = d->dy, *x = d->x, *W = d->W;
    rlt_act act_x = d->act_x;
    float *dW = d->dW, *db = d->db, beta = d->beta;
    void *dx = d->dx;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi && (!dx || lddx >= fi),
                "linear_backward");
    CPU_REQUIRE(bk, lp_half_ok(dtype) && (dx_dtype == dtype || dx_dtype == RLT_LP_F32), "linear_backward");
    CPU_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    if (dW)
        for (int64_t o = 0; o < fo; o++)
            for (int64_t i = 0; i < fi; i++) {
                float s = 0.0f;
                for (int64_t r = 0; r < rows; r++) s += rlt_lp_load(dy, dtype, r * lddy + o) * rlt_lp_load(x, dtype, r * ldx + i);
                dW[o * fi + i] = beta == 0.0f ? s : beta * dW[o * fi + i] + s;
            }
    if (db)
        for (int64_t o = 0; o < fo; o++) {
            float s = 0.0f;
            for (int64_t r = 0; r < rows; r++) s += rlt_lp_load(dy, dtype, r * lddy + o);
            db[o] = beta == 0.0f ? s : beta * db[o] + s;
        }
    if (dx)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < fi; i++) {
                float s = 0.0f;
                for (int64_t o = 0; o < fo; o++) s += rlt_lp_load(dy, dtype, r * lddy + o) * rlt_lp_load(W, dtype, o * fi + i);
                rlt_lp_store(dx, dx_dtype, r * lddx + i, s);
                if (act_x != RLT_ACT_NONE) {
                    float g = rlt_lp_load(dx, dx_dtype, r * lddx + i) * act_deriv(rlt_lp_load(x, dtype, r * ldx + i), act_x);
                    rlt_lp_store(dx, dx_dtype, r * lddx + i, g);
                }
            }
    return RLT_OK;
}

int cpu_amp_unscale(rlt_backend *bk, float *g, uint64_t n, rlt_amp_state *amp) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    CPU_REQUIRE(bk, amp != NULL, "amp UNSCALE");
    float inv = 1.0f / amp->scale;
    int bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        float v = g[i] * inv;
        if (!isfinite(g[i]) || !isfinite(v)) bad = 1;
        g[i] = v;
    }
    if (bad) amp->found_inf = 1;
    return RLT_OK;
}

int cpu_amp_update(rlt_backend *bk, rlt_amp_state *amp, int64_t *step, float growth, float backoff,
                   int32_t growth_interval) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    CPU_REQUIRE(bk, amp != NULL && growth_interval >= 1, "amp UPDATE");
    if (amp->found_inf) {
        amp->scale *= backoff;
        amp->good_steps = 0;
        amp->skipped += 1;
        if (step) *step -= 1;
    } else if (++amp->good_steps >= growth_interval) {
        amp->scale *= growth;
        amp->good_steps = 0;
    }
    amp->found_inf = 0;
    return RLT_OK;
}

/* The table's amp op: one half of loss scaling by mode (kernels/backend.h). */
int cpu_amp(rlt_backend *bk, const rlt_amp_op *d) {
    switch (d->mode) {
    case RLT_AMP_UNSCALE: return cpu_amp_unscale(bk, d->g, d->n, d->amp);
    case RLT_AMP_UPDATE: return cpu_amp_update(bk, d->amp, d->step, d->growth, d->backoff, d->growth_interval);
    }
    return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "amp: unknown mode %d", (int)d->mode);
}
