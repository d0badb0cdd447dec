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
    snprintf(key, sizeof key, "%s.act", name);
    RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, act_floats(net, net->n_layers) * 4, (void **)&net->h));
    snprintf(key, sizeof key, "%s.dact", name);
    /* Output gradients arrive in the caller's buffer, so only hidden layers need room here. */
    return plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, act_floats(net, net->n_layers - 1) * 4,
                    (void **)&net->dh);
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
    const rlt_backend_ops *op = bk->ops;
    const float *in = x;
    int32_t ldin = ldx;
    for (int32_t l = 0; l < net->n_layers; l++) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        int last = l == net->n_layers - 1;
        float *y = last && out ? out : layer_out(net, net->h, l);
        int32_t ldy = last && out ? ldout : fo;
        /* y[rows, fo] = in[rows, fi] . W^T, then bias and activation in one pass. */
        RLT_TRY(op->gemm(bk, 0, 1, rows, fo, fi, 1.0f, in, ldin, params + mlp_weight_offset(net, l), fi, 0.0f, y, ldy));
        RLT_TRY(op->bias_act(bk, y, ldy, params + mlp_bias_offset(net, l), rows, fo, net->act[l]));
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
    float *dy = dout;
    int32_t lddy = lddout;
    for (int32_t l = net->n_layers - 1; l >= 0; l--) {
        int32_t fi = net->dims[l], fo = net->dims[l + 1];
        int last = l == net->n_layers - 1;
        const float *y = last ? net->y_last : layer_out(net, net->h, l);
        int32_t ldy = last ? net->ld_last : fo;
        const float *in = l == 0 ? x : layer_out(net, net->h, l - 1);
        int32_t ldin = l == 0 ? ldx : fi;
        RLT_TRY(op->act_grad(bk, dy, lddy, y, ldy, rows, fo, net->act[l]));
        if (grads) {
            /* dW[fo, fi] += dy^T . in;  db[fo] += column sums of dy. */
            RLT_TRY(op->gemm(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, in, ldin, 1.0f, grads + mlp_weight_offset(net, l), fi));
            RLT_TRY(op->bias_grad(bk, grads + mlp_bias_offset(net, l), dy, lddy, rows, fo, 1.0f));
        }
        float *dnext = l > 0 ? layer_out(net, net->dh, l - 1) : dx;
        int32_t lddn = l > 0 ? fi : lddx;
        if (dnext) RLT_TRY(op->gemm(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, params + mlp_weight_offset(net, l), fi, 0.0f, dnext, lddn));
        dy = dnext;
        lddy = lddn;
    }
    return RLT_OK;
}
