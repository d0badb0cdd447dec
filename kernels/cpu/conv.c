/* conv.c: 2-D convolution (NCHW fp32) forward and backward as im2col + GEMM, one image at a time: the
 * readable reference for the cuDNN path in kernels/cuda/. Per image, the patches are unfolded into the
 * workspace as a column matrix col [c*kh*kw, out_h*out_w], so that
 *   forward:  y_img [k, P]  = W [k, K] . col               (K = c*kh*kw, P = out_h*out_w)
 *   dW:       dW   [k, K] += dy_img [k, P] . col^T
 *   dx:       dcol [K, P]  = W^T . dy_img, folded back (col2im) into dx_img.
 * The workspace is one image's column matrix (K * P floats), reused for col and dcol; images are processed
 * in order, so dW, db and everything else are summed in a fixed order.
 *
 * A reduced-precision slot (shape dtype bf16/fp16) is the twin of cuDNN's 16-bit convolution: the 16-bit
 * inputs are widened into fp32 copies in the workspace, the fp32 path above runs on them, and the results
 * are rounded as the GPU rounds them (the product to the type, then bias and activation, then the type
 * again; dw rounded to the type before it is added to the fp32 gradient). */
#include <math.h>
#include <string.h>

#include "lowp.h"
#include "cpu_ops.h"

static cpu_impl *cpu_get(rlt_backend *bk) { return (cpu_impl *)bk->impl; }

/* The slot's shape, or an error naming the op. */
static int conv_slot(rlt_backend *bk, int32_t slot, const char *op, const rlt_conv_shape **s) {
    cpu_impl *impl = cpu_get(bk);
    if (!impl)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "%s: the CPU backend is not open", op);
    if (slot < 0 || slot >= RLT_BACKEND_MAX_CONVS)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: convolution slot %d is outside 0..%d", op,
                           (int)slot, RLT_BACKEND_MAX_CONVS - 1);
    if (!impl->conv_ready[slot])
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "%s: convolution slot %d was not prepared", op,
                           (int)slot);
    *s = &impl->conv[slot];
    return RLT_OK;
}

static uint64_t col_floats(const rlt_conv_shape *s) {
    int32_t oh = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad), ow = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    return (uint64_t)s->c * s->kh * s->kw * (uint64_t)oh * (uint64_t)ow;
}

/* Element counts of x, w and y over the whole batch. */
static uint64_t nx_of(const rlt_conv_shape *s) { return (uint64_t)s->n * s->c * s->h * s->w; }
static uint64_t nw_of(const rlt_conv_shape *s) { return (uint64_t)s->k * s->c * s->kh * s->kw; }
static uint64_t ny_of(const rlt_conv_shape *s) {
    return (uint64_t)s->n * s->k * rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad) *
           rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
}

/* Workspace floats: the column matrix, and for a 16-bit slot fp32 copies of x, w, y (or dy), dx and dw. */
static uint64_t ws_floats(const rlt_conv_shape *s) {
    uint64_t n = col_floats(s);
    if (s->dtype != RLT_LP_F32) n += 2 * nx_of(s) + 2 * nw_of(s) + ny_of(s);
    return n;
}

int cpu_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    cpu_impl *impl = cpu_get(bk);
    CPU_REQUIRE(bk, impl != NULL && shape != NULL && ws_bytes != NULL, "conv_prepare");
    CPU_REQUIRE(bk, slot >= 0 && slot < RLT_BACKEND_MAX_CONVS, "conv_prepare");
    const rlt_conv_shape *s = shape;
    CPU_REQUIRE(bk, s->n >= 1 && s->c >= 1 && s->h >= 1 && s->w >= 1, "conv_prepare");
    CPU_REQUIRE(bk, s->k >= 1 && s->kh >= 1 && s->kw >= 1 && s->stride >= 1 && s->pad >= 0, "conv_prepare");
    CPU_REQUIRE(bk, rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad) >= 1, "conv_prepare");
    CPU_REQUIRE(bk, rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad) >= 1, "conv_prepare");
    /* Every index below is formed in 64 bits, but the GEMM dimensions are int32: one image's matrices must
     * fit (they do by orders of magnitude for any RL network). */
    CPU_REQUIRE(bk, col_floats(s) <= INT32_MAX && (uint64_t)s->k * s->h * s->w <= INT32_MAX, "conv_prepare");
    CPU_REQUIRE(bk, s->dtype == RLT_LP_F32 || s->dtype == RLT_LP_BF16 || s->dtype == RLT_LP_F16, "conv_prepare");
    impl->conv[slot] = *s;
    impl->conv_ready[slot] = 1;
    *ws_bytes = ws_floats(s) * sizeof(float);
    return RLT_OK;
}

/* col[(ci*kh + i)*kw + j, oy*ow + ox] = x[ci, oy*stride - pad + i, ox*stride - pad + j], 0 outside. */
static void im2col(const rlt_conv_shape *s, int32_t oh, int32_t ow, const float *x, float *col) {
    int64_t P = (int64_t)oh * ow;
    for (int32_t ci = 0; ci < s->c; ci++)
        for (int32_t i = 0; i < s->kh; i++)
            for (int32_t j = 0; j < s->kw; j++) {
                float *dst = col + (((int64_t)ci * s->kh + i) * s->kw + j) * P;
                const float *plane = x + (int64_t)ci * s->h * s->w;
                for (int32_t oy = 0; oy < oh; oy++) {
                    int32_t iy = oy * s->stride - s->pad + i;
                    for (int32_t ox = 0; ox < ow; ox++) {
                        int32_t ix = ox * s->stride - s->pad + j;
                        int inside = iy >= 0 && iy < s->h && ix >= 0 && ix < s->w;
                        dst[(int64_t)oy * ow + ox] = inside ? plane[(int64_t)iy * s->w + ix] : 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: every column entry is added back to the input pixel it was copied from
 * (overlapping patches accumulate). dx must be zeroed first. */
static void col2im(const rlt_conv_shape *s, int32_t oh, int32_t ow, const float *col, float *dx) {
    int64_t P = (int64_t)oh * ow;
    for (int32_t ci = 0; ci < s->c; ci++)
        for (int32_t i = 0; i < s->kh; i++)
            for (int32_t j = 0; j < s->kw; j++) {
                const float *src = col + (((int64_t)ci * s->kh + i) * s->kw + j) * P;
                float *plane = dx + (int64_t)ci * s->h * s->w;
                for (int32_t oy = 0; oy < oh; oy++) {
                    int32_t iy = oy * s->stride - s->pad + i;
                    if (iy < 0 || iy >= s->h) continue;
                    for (int32_t ox = 0; ox < ow; ox++) {
                        int32_t ix = ox * s->stride - s->pad + j;
                        if (ix >= 0 && ix < s->w) plane[(int64_t)iy * s->w + ix] += src[(int64_t)oy * ow + ox];
                    }
                }
            }
}

static int check_act_ws(rlt_backend *bk, const rlt_conv_shape *s, rlt_act act, void *ws, uint64_t ws_bytes,
                        const char *op) {
    if (act < RLT_ACT_NONE || act > RLT_ACT_TANH)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: unknown activation %d", op, (int)act);
    if (!ws || ws_bytes < ws_floats(s) * sizeof(float))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "%s: workspace of %llu bytes at %p, but conv_prepare asked for %llu", op,
                           (unsigned long long)ws_bytes, ws, (unsigned long long)(ws_floats(s) * sizeof(float)));
    return RLT_OK;
}

static int conv_forward_f32(rlt_backend *bk, const rlt_conv_shape *s, float *y, const float *x, const float *w,
                            const float *b, rlt_act act, float *ws) {
    int32_t oh = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad), ow = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    int32_t K = s->c * s->kh * s->kw, P = oh * ow;
    float *col = ws;
    for (int32_t img = 0; img < s->n; img++) {
        const float *xi = x + (int64_t)img * s->c * s->h * s->w;
        float *yi = y + (int64_t)img * s->k * P;
        im2col(s, oh, ow, xi, col);
        RLT_TRY(cpu_gemm(bk, 0, 0, s->k, P, K, 1.0f, w, K, col, P, 0.0f, yi, P));
        /* Channel ko's plane is row ko of the image's [k, P] block, so the bias is per row here (bias_act's
         * is per column): it is added in this loop, and bias_act (without bias) applies the activation. */
        if (b)
            for (int32_t ko = 0; ko < s->k; ko++) {
                float *row = yi + (int64_t)ko * P, bias = b[ko];
                for (int32_t p = 0; p < P; p++) row[p] += bias;
            }
        if (act != RLT_ACT_NONE) RLT_TRY(cpu_bias_act(bk, yi, P, NULL, s->k, P, act));
    }
    return RLT_OK;
}

static void widen(float *dst, const void *src, rlt_lp dt, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) dst[i] = rlt_lp_load(src, dt, (int64_t)i);
}

static float act_of(float z, rlt_act act) {
    if (act == RLT_ACT_RELU) return z > 0.0f ? z : 0.0f;
    if (act == RLT_ACT_TANH) return tanhf(z);
    return z;
}

int cpu_conv_forward(rlt_backend *bk, const rlt_conv_fwd *desc) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    void *y = desc->y, *ws = desc->ws;
    const void *x = desc->x, *w = desc->w;
    const float *b = desc->b;
    rlt_act act = desc->act;
    uint64_t ws_bytes = desc->ws_bytes;
    int32_t slot = desc->slot;
    const rlt_conv_shape *s;
    RLT_TRY(conv_slot(bk, slot, "conv_forward", &s));
    RLT_TRY(check_act_ws(bk, s, act, ws, ws_bytes, "conv_forward"));
    if (s->dtype == RLT_LP_F32) return conv_forward_f32(bk, s, y, x, w, b, act, ws);
    /* 16-bit: widen, convolve in fp32 without bias, round; then bias and activation in fp32, round again. */
    rlt_lp dt = s->dtype;
    float *xf = (float *)ws + col_floats(s), *wf = xf + nx_of(s), *yf = wf + nw_of(s);
    widen(xf, x, dt, nx_of(s));
    widen(wf, w, dt, nw_of(s));
    RLT_TRY(conv_forward_f32(bk, s, yf, xf, wf, NULL, RLT_ACT_NONE, ws));
    uint64_t P = ny_of(s) / ((uint64_t)s->n * s->k);
    for (uint64_t e = 0; e < ny_of(s); e++) {
        rlt_lp_store(y, dt, (int64_t)e, yf[e]);
        float z = rlt_lp_load(y, dt, (int64_t)e) + (b ? b[(e / P) % (uint64_t)s->k] : 0.0f);
        rlt_lp_store(y, dt, (int64_t)e, act_of(z, act));
    }
    return RLT_OK;
}

static int conv_backward_f32(rlt_backend *bk, const rlt_conv_shape *s, float *dx, float *dw, float *db, float *dy,
                             const float *y, const float *x, const float *w, rlt_act act, float *ws) {
    int32_t oh = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad), ow = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    int32_t K = s->c * s->kh * s->kw, P = oh * ow;
    float *col = ws;
    /* dy becomes the gradient of the pre-activation output, in place (as the contract says). */
    RLT_TRY(cpu_act_grad_plain(bk, dy, s->k * P, y, s->k * P, s->n, s->k * P, act));
    if (db) {
        for (int32_t ko = 0; ko < s->k; ko++) {
            float acc = db[ko];
            for (int32_t img = 0; img < s->n; img++) {
                const float *row = dy + ((int64_t)img * s->k + ko) * P;
                for (int32_t p = 0; p < P; p++) acc += row[p];
            }
            db[ko] = acc;
        }
    }
    for (int32_t img = 0; img < s->n; img++) {
        const float *xi = x + (int64_t)img * s->c * s->h * s->w;
        const float *dyi = dy + (int64_t)img * s->k * P;
        im2col(s, oh, ow, xi, col);
        RLT_TRY(cpu_gemm(bk, 0, 1, s->k, K, P, 1.0f, dyi, P, col, P, 1.0f, dw, K));
        if (dx) {
            float *dxi = dx + (int64_t)img * s->c * s->h * s->w;
            RLT_TRY(cpu_gemm(bk, 1, 0, K, P, s->k, 1.0f, w, K, dyi, P, 0.0f, col, P));
            memset(dxi, 0, sizeof(float) * (size_t)s->c * s->h * s->w);
            col2im(s, oh, ow, col, dxi);
        }
    }
    return RLT_OK;
}

int cpu_conv_backward(rlt_backend *bk, const rlt_conv_bwd *desc) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    void *dx = desc->dx, *dy = desc->dy, *ws = desc->ws;
    float *dw = desc->dw, *db = desc->db;
    const void *y = desc->y, *x = desc->x, *w = desc->w;
    rlt_act act = desc->act;
    uint64_t ws_bytes = desc->ws_bytes;
    int32_t slot = desc->slot;
    const rlt_conv_shape *s;
    RLT_TRY(conv_slot(bk, slot, "conv_backward", &s));
    RLT_TRY(check_act_ws(bk, s, act, ws, ws_bytes, "conv_backward"));
    if (s->dtype == RLT_LP_F32) return conv_backward_f32(bk, s, dx, dw, db, dy, y, x, w, act, ws);
    /* 16-bit: dy *= act'(y) in place (rounded), widen, the fp32 backward with dw into a zeroed fp32 copy, then
     * dw += (that rounded to the type) and dx rounded to the type. */
    rlt_lp dt = s->dtype;
    uint64_t nx = nx_of(s), nw = nw_of(s), ny = ny_of(s);
    float *xf = (float *)ws + col_floats(s), *wf = xf + nx, *dyf = wf + nw, *dxf = dyf + ny, *dwf = dxf + nx;
    for (uint64_t e = 0; e < ny; e++) {
        float yv = rlt_lp_load(y, dt, (int64_t)e), d = rlt_lp_load(dy, dt, (int64_t)e);
        if (act == RLT_ACT_RELU) d = yv > 0.0f ? d : 0.0f;
        else if (act == RLT_ACT_TANH) d = d * (1.0f - yv * yv);
        rlt_lp_store(dy, dt, (int64_t)e, d);
        dyf[e] = rlt_lp_load(dy, dt, (int64_t)e);
    }
    widen(xf, x, dt, nx);
    widen(wf, w, dt, nw);
    memset(dwf, 0, nw * sizeof(float));
    RLT_TRY(conv_backward_f32(bk, s, dx ? dxf : NULL, dwf, db, dyf, NULL, xf, wf, RLT_ACT_NONE, ws));
    for (uint64_t i = 0; i < nw; i++) dw[i] += rlt_lp_round(dwf[i], dt);
    if (dx)
        for (uint64_t i = 0; i < nx; i++) rlt_lp_store(dx, dt, (int64_t)i, dxf[i]);
    return RLT_OK;
}
