/* mlp.c: MLP forward and backward as sequences of backend ops (see mlp.h). */
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int mlp_define(rlt_mlp *net, rlt_err *e, int32_t in, const int32_t *hidden, int32_t n_hidden, int32_t out,
               rlt_act hidden_act, rlt_act out_act) {
    if (n_hidden < 0 || n_hidden + 1 > RLT_MLP_MAX_LAYERS)
        RLT_FAIL(e, RLT_ECONFIG, "an MLP has at most %d hidden layers (got %d)", RLT_MLP_MAX_LAYERS - 1, n_hidden);
    net->n_layers = n_hidden + 1;
    net->on_bucket = NULL; /* no gradient buckets unless an owner sets them on a view */
    net->bucket_ctx = NULL;
    net->bucket_floats = 0;
    net->dims[0] = in;
    for (int32_t i = 0; i < n_hidden; i++) {
        net->dims[i + 1] = hidden[i];
        net->act[i] = hidden_act;
    }
    net->dims[net->n_layers] = out;
    net->act[net->n_layers - 1] = out_act;
    for (int32_t i = 0; i <= net->n_layers; i++)
        if (net->dims[i] <= 0) RLT_FAIL(e, RLT_ECONFIG, "MLP layer %d has width %d", i, net->dims[i]);
    net->h = net->dh = net->y_last = NULL;
    net->batch = 0;
    net->dtype = RLT_LP_F32;
    net->in_dtype = RLT_LP_F32;
    net->n_sets = 1;
    for (int32_t i = 0; i < RLT_MLP_MAX_SETS; i++) net->h_set[i] = NULL;
    return RLT_OK;
}

static uint64_t w_count(const rlt_mlp *net, int32_t layer) { return (uint64_t)net->dims[layer + 1] * net->dims[layer]; }

/* Each block starts on RLT_PARAM_ALIGN floats (engine/plan.h): W_0 | pad | b_0 | pad | W_1 ... */
uint64_t mlp_weight_offset(const rlt_mlp *net, int32_t layer) {
    uint64_t off = 0;
    for (int32_t i = 0; i < layer; i++) off += plan_param_align(w_count(net, i)) + plan_param_align((uint64_t)net->dims[i + 1]);
    return off;
}

uint64_t mlp_bias_offset(const rlt_mlp *net, int32_t layer) {
    return mlp_weight_offset(net, layer) + plan_param_align(w_count(net, layer));
}

uint64_t mlp_param_count(const rlt_mlp *net) { return mlp_weight_offset(net, net->n_layers); }

int32_t mlp_param_blocks(const rlt_mlp *net, uint64_t *sizes, int32_t n, int32_t cap) {
    for (int32_t l = 0; l < net->n_layers; l++) {
        if (n < 0 || n + 2 > cap) return -1;
        sizes[n++] = w_count(net, l);
        sizes[n++] = (uint64_t)net->dims[l + 1];
    }
    return n;
}

static uint64_t act_floats(const rlt_mlp *net, int32_t upto) {
    uint64_t n = 0;
    for (int32_t i = 0; i < upto; i++) n += (uint64_t)net->batch * net->dims[i + 1];
    return n;
}

static int mlp_lowp(const rlt_mlp *net) { return net->dtype != RLT_LP_F32; }
static uint64_t mlp_esize(const rlt_mlp *net) { return rlt_lp_size(net->dtype); }
/* Elements before the first layer output in an activation set (the input's 16-bit copy), and before the
 * first hidden gradient in the gradient set (the output gradient's 16-bit copy). */
static uint64_t in_slot(const rlt_mlp *net) {
    return mlp_lowp(net) && net->in_dtype == RLT_LP_F32 ? (uint64_t)net->batch * net->dims[0] : 0;
}
static uint64_t out_slot(const rlt_mlp *net) { return mlp_lowp(net) ? (uint64_t)net->batch * net->dims[net->n_layers] : 0; }

int mlp_plan(rlt_mlp *net, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch) {
    char key[64];
    net->batch = batch;
    if (net->n_sets < 1 || net->n_sets > RLT_MLP_MAX_SETS)
        RLT_FAIL(e, RLT_EINVAL, "mlp_plan: %d activation sets (1..%d)", net->n_sets, RLT_MLP_MAX_SETS);
    /* The layers' shapes decide which backend library they call (and its workspace): tell the plan. */
    for (int32_t l = 0; l < net->n_layers; l++) plan_use_dense(plan, batch, net->dims[l], net->dims[l + 1], net->dtype);
    uint64_t es = mlp_esize(net), set_bytes = (in_slot(net) + act_floats(net, net->n_layers)) * es;
    snprintf(key, sizeof key, "%s.act", name);
    RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, set_bytes, &net->h));
    for (int32_t k = 1; k < net->n_sets; k++) {
        snprintf(key, sizeof key, "%s.act%d", name, (int)k);
        RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, set_bytes, &net->h_set[k]));
    }
    snprintf(key, sizeof key, "%s.dact", name);
    /* Output gradients arrive in the caller's buffer, so only hidden layers need room here (and, in reduced
     * precision, the output gradient's 16-bit copy). */
    return plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, (out_slot(net) + act_floats(net, net->n_layers - 1)) * es,
                    &net->dh);
}

rlt_mlp mlp_view(const rlt_mlp *net, int32_t set) {
    rlt_mlp v = *net;
    if (set > 0) {
        /* An unplanned set (set >= n_sets) gets NULL buffers, which the ops refuse at their first use. */
        v.h = set < net->n_sets ? net->h_set[set] : NULL;
        v.dh = NULL;
    }
    v.y_last = NULL;
    return v;
}

void mlp_init_params(const rlt_mlp *net, float *params, rlt_rng *rng) {
    /* The gaps between blocks start (and stay) 0; the values are drawn in the packed order, so a seed gives
     * the same weights whatever the padding. */
    memset(params, 0, mlp_param_count(net) * sizeof(float));
    for (int32_t l = 0; l < net->n_layers; l++) {
        float bound = 1.0f / sqrtf((float)net->dims[l]);
        float *w = params + mlp_weight_offset(net, l);
        uint64_t nw = w_count(net, l);
        for (uint64_t i = 0; i < nw; i++) w[i] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
        float *b = params + mlp_bias_offset(net, l);
        for (int32_t i = 0; i < net->dims[l + 1]; i++) b[i] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
    }
}

/* Layer `layer`'s output in an activation set (base h) or its gradient in the gradient set (base dh). */
static void *layer_out(const rlt_mlp *net, void *base, int32_t layer) {
    return (char *)base + (in_slot(net) + act_floats(net, layer)) * mlp_esize(net);
}
static void *layer_grad(const rlt_mlp *net, void *base, int32_t layer) {
    return (char *)base + (out_slot(net) + act_floats(net, layer)) * mlp_esize(net);
}

float *mlp_layer_out(const rlt_mlp *net, int32_t layer) {
    return net->h ? (float *)layer_out(net, net->h, layer) : NULL;
}
float *mlp_layer_grad(const rlt_mlp *net, int32_t layer) {
    return net->dh ? (float *)layer_grad(net, net->dh, layer) : NULL;
}

static int mlp_check_forward(rlt_backend *bk, const rlt_mlp *net, int32_t rows, const void *params_lp, const float *out) {
    if (rows > net->batch)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "mlp_forward: %d rows > planned batch %d", rows,
                           net->batch);
    if (!net->h)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "mlp_forward: activation set not planned");
    if (mlp_lowp(net) && (!params_lp || !out))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "mlp_forward: reduced precision needs the 16-bit weights and an fp32 output buffer");
    return RLT_OK;
}

int mlp_forward(rlt_backend *bk, rlt_mlp *net, const float *params, const void *params_lp, const void *x, int32_t ldx,
                int32_t rows, float *out, int32_t ldout) {
    RLT_TRY(mlp_check_forward(bk, net, rows, params_lp, out));
    const rlt_backend_ops *op = bk->ops;
    if (mlp_lowp(net)) {
        /* The input's 16-bit copy (unless it arrives in 16 bits), then one op per layer on the 16-bit weights;
         * the last layer writes fp32. */
        rlt_lp dt = net->dtype;
        const void *in = x;
        int32_t ldin = ldx;
        if (net->in_dtype == RLT_LP_F32) {
            rlt_cast c = {.rows = rows, .cols = net->dims[0], .dst = net->h, .dst_dtype = dt, .ldd = net->dims[0],
                          .src = x, .src_dtype = RLT_LP_F32, .lds = ldx};
            RLT_TRY(op->cast(bk, &c));
            in = net->h;
            ldin = net->dims[0];
        }
        for (int32_t l = 0; l < net->n_layers; l++) {
            int32_t fi = net->dims[l], fo = net->dims[l + 1];
            int last = l == net->n_layers - 1;
            void *y = last ? (void *)out : layer_out(net, net->h, l);
            int32_t ldy = last ? ldout : fo;
            rlt_linear_fwd f = {.rows = rows, .fi = fi, .fo = fo, .dtype = dt, .x = in, .ldx = ldin,
                                .W = (const char *)params_lp + mlp_weight_offset(net, l) * 2,
                                .b = params + mlp_bias_offset(net, l), .y = y, .ldy = ldy,
                                .y_dtype = last ? RLT_LP_F32 : dt, .act = net->act[l]};
            RLT_TRY(op->linear_forward(bk, &f));
            in = y;
            ldin = ldy;
        }
        net->y_last = out;
        net->ld_last = ldout;
        return RLT_OK;
    }
    return mlp_forward_layers(bk, net, params, x, ldx, rows, 0, net->n_layers, out, ldout);
}

int mlp_forward_layers(rlt_backend *bk, rlt_mlp *net, const float *params, const void *x, int32_t ldx, int32_t rows,
                       int32_t l0, int32_t l1, float *out, int32_t ldout) {
    RLT_TRY(mlp_check_forward(bk, net, rows, NULL, out));
    if (mlp_lowp(net) || l0 < 0 || l1 > net->n_layers || l0 >= l1)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "mlp_forward_layers: layers %d..%d of %d (fp32 networks only)", (int)l0, (int)l1 - 1,
                           (int)net->n_layers);
    /* y_l[rows, fo] = act(y_{l-1}[rows, fi] . W_l^T + b_l), y_{-1} = x: the layers as one op. */
    rlt_linear_fwd f[RLT_MLP_MAX_LAYERS];
    const float *in = l0 == 0 ? (const float *)x : (const float *)layer_out(net, net->h, l0 - 1);
    int32_t ldin = l0 == 0 ? ldx : net->dims[l0];
    for (int32_t l = l0; l < l1; l++) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        int last = l == net->n_layers - 1;
        float *y = last && out ? out : (float *)layer_out(net, net->h, l);
        int32_t ldy = last && out ? ldout : fo;
        f[l - l0] = (rlt_linear_fwd){.rows = rows, .fi = fi, .fo = fo, .x = in, .ldx = ldin,
                                     .W = params + mlp_weight_offset(net, l), .b = params + mlp_bias_offset(net, l),
                                     .y = y, .ldy = ldy, .act = net->act[l]};
        in = y;
        ldin = ldy;
    }
    RLT_TRY(bk->ops->linear_chain_forward(bk, f, l1 - l0));
    if (l1 == net->n_layers) {
        net->y_last = (float *)in;
        net->ld_last = ldin;
    }
    return RLT_OK;
}

/* After layer l's backward was issued: hands the gradient of layers l .. *top - 1 to the net's bucket callback when
 * they close a bucket (see rlt_mlp.on_bucket), and moves *top down to l. */
static int mlp_bucket_after(rlt_mlp *net, float *grads, int32_t l, int32_t *top) {
    if (!grads || !net->on_bucket) return RLT_OK;
    uint64_t lo = mlp_weight_offset(net, l), hi = mlp_weight_offset(net, *top);
    if (l > 0 && (hi - lo < net->bucket_floats || lo < net->bucket_floats)) return RLT_OK;
    *top = l;
    return net->on_bucket(net->bucket_ctx, grads + lo, hi - lo);
}

/* The reduced-precision backward (see mlp.h): dout (fp32, after the output activation's derivative) is cast
 * to the 16-bit type with the loss scale, then one op per layer. */
static int mlp_backward_lp(rlt_backend *bk, rlt_mlp *net, const float *params, const void *params_lp, float *grads,
                           const void *x, int32_t ldx, int32_t rows, const float *dout, int32_t lddout,
                           const float *dout_scale, void *dx, int32_t lddx) {
    const rlt_backend_ops *op = bk->ops;
    int32_t L = net->n_layers;
    rlt_lp dt = net->dtype;
    void *dy = net->dh;
    int32_t lddy = net->dims[L];
    rlt_cast c = {.rows = rows, .cols = net->dims[L], .dst = dy, .dst_dtype = dt, .ldd = lddy, .src = dout,
                  .src_dtype = RLT_LP_F32, .lds = lddout, .scale = dout_scale};
    RLT_TRY(op->cast(bk, &c));
    int32_t top = L;
    for (int32_t l = L - 1; l >= 0; l--) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        /* Layer 0's input: the 16-bit copy made by the forward, or the caller's 16-bit x. */
        int x16 = net->in_dtype != RLT_LP_F32;
        const void *in = l > 0 ? layer_out(net, net->h, l - 1) : x16 ? x : net->h;
        int32_t ldin = l > 0 || !x16 ? fi : ldx;
        void *dnext = l > 0 ? layer_grad(net, net->dh, l - 1) : dx;
        int32_t lddn = l > 0 ? fi : lddx;
        rlt_linear_bwd b = {.rows = rows, .fi = fi, .fo = fo, .dtype = dt, .dy = dy, .lddy = lddy, .x = in,
                            .ldx = ldin, .act_x = l > 0 ? net->act[l - 1] : RLT_ACT_NONE,
                            .W = (const char *)params_lp + mlp_weight_offset(net, l) * 2,
                            .dW = grads ? grads + mlp_weight_offset(net, l) : NULL,
                            .db = grads ? grads + mlp_bias_offset(net, l) : NULL, .beta = 1.0f, .dx = dnext,
                            .lddx = lddn, .dx_dtype = l > 0 ? dt : net->in_dtype};
        if (grads || dnext) RLT_TRY(op->linear_backward(bk, &b));
        RLT_TRY(mlp_bucket_after(net, grads, l, &top));
        dy = dnext;
        lddy = lddn;
    }
    return RLT_OK;
}

int mlp_backward(rlt_backend *bk, rlt_mlp *net, const float *params, const void *params_lp, float *grads,
                 const void *x, int32_t ldx, int32_t rows, float *dout, int32_t lddout, const float *dout_scale,
                 void *dx, int32_t lddx) {
    const rlt_backend_ops *op = bk->ops;
    int32_t L = net->n_layers;
    if (!net->y_last || ((L > 1 || mlp_lowp(net)) && !net->dh))
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "mlp_backward: no forward to go back through, or a forward-only activation set");
    /* The output layer's own activation; every other layer's derivative is applied by the op of the layer
     * above it, through that layer's input (see linear_backward). */
    RLT_TRY(op->act_grad(bk, dout, lddout, net->y_last, net->ld_last, rows, net->dims[L], net->act[L - 1]));
    if (mlp_lowp(net)) {
        if (!params_lp)
            return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "mlp_backward: reduced precision needs the 16-bit weights");
        return mlp_backward_lp(bk, net, params, params_lp, grads, x, ldx, rows, dout, lddout, dout_scale, dx, lddx);
    }
    return mlp_backward_layers(bk, net, params, grads, x, ldx, rows, 0, L, dout, lddout, dx, lddx);
}

int mlp_backward_layers(rlt_backend *bk, rlt_mlp *net, const float *params, float *grads, const void *x, int32_t ldx,
                        int32_t rows, int32_t l0, int32_t l1, const float *dy, int32_t lddy, void *dx, int32_t lddx) {
    const int32_t L = net->n_layers;
    if (mlp_lowp(net) || l0 < 0 || l1 > L || l0 >= l1 || (l1 > l0 + 1 && !net->dh) ||
        (net->on_bucket && (l0 != 0 || l1 != L)))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "mlp_backward_layers: layers %d..%d of %d (fp32 networks with gradient buffers; gradient "
                           "buckets only over every layer)", (int)l0, (int)l1 - 1, (int)L);
    int32_t top = l1;
    for (int32_t l = l1 - 1; l >= l0; l--) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        const float *in = l == 0 ? (const float *)x : (const float *)layer_out(net, net->h, l - 1);
        int32_t ldin = l == 0 ? ldx : fi;
        float *dnext = l > l0 ? (float *)layer_grad(net, net->dh, l - 1) : (float *)dx;
        int32_t lddn = l > l0 ? fi : lddx;
        /* dW[fo, fi] += dy^T . in;  db[fo] += column sums of dy;  dnext = (dy . W) * act'(in). */
        rlt_linear_bwd b = {.rows = rows, .fi = fi, .fo = fo, .dy = dy, .lddy = lddy, .x = in, .ldx = ldin,
                            .act_x = l > 0 ? net->act[l - 1] : RLT_ACT_NONE, .W = params + mlp_weight_offset(net, l),
                            .dW = grads ? grads + mlp_weight_offset(net, l) : NULL,
                            .db = grads ? grads + mlp_bias_offset(net, l) : NULL, .beta = 1.0f, .dx = dnext,
                            .lddx = lddn};
        if (grads || dnext) RLT_TRY(bk->ops->linear_backward(bk, &b));
        RLT_TRY(mlp_bucket_after(net, grads, l, &top));
        dy = dnext;
        lddy = lddn;
    }
    return RLT_OK;
}
