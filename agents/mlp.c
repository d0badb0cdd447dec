/* mlp.c: MLP forward and backward as sequences of backend ops (see mlp.h). */
#include "mlp.h"

#include <math.h>
#include <stdio.h>

int mlp_define(rlt_mlp *net, rlt_err *e, int32_t in, const int32_t *hidden, int32_t n_hidden, int32_t out,
               int32_t hidden_act, int32_t out_act) {
    if (n_hidden < 0 || n_hidden + 1 > RLT_MLP_MAX_LAYERS)
        RLT_FAIL(e, RLT_ECONFIG, "an MLP has at most %d hidden layers (got %d)", RLT_MLP_MAX_LAYERS - 1, n_hidden);
    net->n_layers = n_hidden + 1;
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
    net->n_sets = 1;
    for (int32_t i = 0; i < RLT_MLP_MAX_SETS; i++) net->h_set[i] = NULL;
    return RLT_OK;
}

uint64_t mlp_weight_offset(const rlt_mlp *net, int32_t layer) {
    uint64_t off = 0;
    for (int32_t i = 0; i < layer; i++) off += (uint64_t)net->dims[i + 1] * (net->dims[i] + 1);
    return off;
}

uint64_t mlp_bias_offset(const rlt_mlp *net, int32_t layer) {
    return mlp_weight_offset(net, layer) + (uint64_t)net->dims[layer + 1] * net->dims[layer];
}

uint64_t mlp_param_count(const rlt_mlp *net) { return mlp_weight_offset(net, net->n_layers); }

static uint64_t act_floats(const rlt_mlp *net, int32_t upto) {
    uint64_t n = 0;
    for (int32_t i = 0; i < upto; i++) n += (uint64_t)net->batch * net->dims[i + 1];
    return n;
}

int mlp_plan(rlt_mlp *net, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch) {
    char key[64];
    net->batch = batch;
    if (net->n_sets < 1 || net->n_sets > RLT_MLP_MAX_SETS)
        RLT_FAIL(e, RLT_EINVAL, "mlp_plan: %d activation sets (1..%d)", net->n_sets, RLT_MLP_MAX_SETS);
    snprintf(key, sizeof key, "%s.act", name);
    RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, act_floats(net, net->n_layers) * 4, (void **)&net->h));
    for (int32_t k = 1; k < net->n_sets; k++) {
        snprintf(key, sizeof key, "%s.act%d", name, (int)k);
        RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, act_floats(net, net->n_layers) * 4,
                         (void **)&net->h_set[k]));
    }
    snprintf(key, sizeof key, "%s.dact", name);
    /* Output gradients arrive in the caller's buffer, so only hidden layers need room here. */
    return plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, act_floats(net, net->n_layers - 1) * 4,
                    (void **)&net->dh);
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
    for (int32_t l = 0; l < net->n_layers; l++) {
        float bound = 1.0f / sqrtf((float)net->dims[l]);
        float *w = params + mlp_weight_offset(net, l);
        uint64_t nw = (uint64_t)net->dims[l + 1] * net->dims[l];
        for (uint64_t i = 0; i < nw; i++) w[i] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
        float *b = params + mlp_bias_offset(net, l);
        for (int32_t i = 0; i < net->dims[l + 1]; i++) b[i] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
    }
}

static float *layer_out(const rlt_mlp *net, float *base, int32_t layer) { return base + act_floats(net, layer); }

int mlp_forward(rlt_backend *bk, rlt_mlp *net, const float *params, const float *x, int32_t ldx, int32_t rows,
                float *out, int32_t ldout) {
    if (rows > net->batch)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "mlp_forward: %d rows > planned batch %d", rows,
                           net->batch);
    if (!net->h)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "mlp_forward: activation set not planned");
    const rlt_backend_ops *op = bk->ops;
    const float *in = x;
    int32_t ldin = ldx;
    for (int32_t l = 0; l < net->n_layers; l++) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        int last = l == net->n_layers - 1;
        float *y = last && out ? out : layer_out(net, net->h, l);
        int32_t ldy = last && out ? ldout : fo;
        /* y[rows, fo] = act(in[rows, fi] . W^T + b): one op (gemm then bias_act on the CPU). */
        RLT_TRY(op->linear_forward(bk, rows, fi, fo, in, ldin, params + mlp_weight_offset(net, l),
                                   params + mlp_bias_offset(net, l), y, ldy, net->act[l]));
        in = y;
        ldin = ldy;
    }
    net->y_last = (float *)in;
    net->ld_last = ldin;
    return RLT_OK;
}

int mlp_backward(rlt_backend *bk, rlt_mlp *net, const float *params, float *grads, const float *x, int32_t ldx,
                 int32_t rows, float *dout, int32_t lddout, float *dx, int32_t lddx) {
    const rlt_backend_ops *op = bk->ops;
    int32_t L = net->n_layers;
    if (!net->y_last || (L > 1 && !net->dh))
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "mlp_backward: no forward to go back through, or a forward-only activation set");
    float *dy = dout;
    int32_t lddy = lddout;
    /* The output layer's own activation; every other layer's derivative is applied by the op of the layer
     * above it, through that layer's input (see linear_backward). */
    RLT_TRY(op->act_grad(bk, dy, lddy, net->y_last, net->ld_last, rows, net->dims[L], net->act[L - 1]));
    for (int32_t l = L - 1; l >= 0; l--) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        const float *in = l == 0 ? x : layer_out(net, net->h, l - 1);
        int32_t ldin = l == 0 ? ldx : fi;
        float *dnext = l > 0 ? layer_out(net, net->dh, l - 1) : dx;
        int32_t lddn = l > 0 ? fi : lddx;
        /* dW[fo, fi] += dy^T . in;  db[fo] += column sums of dy;  dnext = (dy . W) * act'(in). */
        if (grads || dnext)
            RLT_TRY(op->linear_backward(bk, rows, fi, fo, dy, lddy, in, ldin, l > 0 ? net->act[l - 1] : RLT_ACT_NONE,
                                        params + mlp_weight_offset(net, l), grads ? grads + mlp_weight_offset(net, l) : NULL,
                                        grads ? grads + mlp_bias_offset(net, l) : NULL, 1.0f, dnext, lddn));
        dy = dnext;
        lddy = lddn;
    }
    return RLT_OK;
}
