/* qnet.c: the DQN network on the backend interface (see qnet.h). */
#include "qnet.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* "[4, 10, 10]" */
static const char *shape_text(const rlt_space *obs, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "[");
    for (int32_t i = 0; i < obs->ndim && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%d", i ? ", " : "", (int)obs->shape[i]);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "]");
    return buf;
}

int qnet_define(rlt_qnet *q, rlt_err *e, const rlt_space *obs, const rlt_conv_list *conv, const rlt_int_list *hidden,
                int32_t n_actions) {
    memset(q, 0, sizeof *q);
    char shape[64];
    /* A preset is its list of layers (engine/config_conv.c): there is one path, and its name only labels
     * the messages. */
    const char *label = conv->preset != RLT_CONV_PRESET_EXPLICIT ? config_conv_preset_name(conv->preset) : NULL;
    int32_t n = conv->n;
    if (n < 0 || n > RLT_QNET_MAX_CONV)
        RLT_FAIL(e, RLT_ECONFIG, "network.conv: %d layers; this build holds 0 to %d", (int)n, RLT_QNET_MAX_CONV);
    int64_t features;
    if (n > 0) {
        if (obs->ndim != 3)
            RLT_FAIL(e, RLT_ECONFIG, "network.conv: %s needs image observations [c, h, w]; this environment's are %d-D "
                     "%s; use network.conv: none for vector observations", label ? label : "a convolutional torso", obs->ndim,
                     shape_text(obs, shape, sizeof shape));
        int32_t c = obs->shape[0], h = obs->shape[1], w = obs->shape[2];
        for (int32_t i = 0; i < n; i++) {
            const rlt_conv_layer *l = &conv->layer[i];
            rlt_conv_shape *s = &q->conv[i];
            s->c = c;
            s->h = h;
            s->w = w;
            s->k = l->out;
            s->kh = s->kw = l->kernel;
            s->stride = l->stride;
            s->pad = l->pad;
            q->conv_oh[i] = rlt_conv_out_dim(h, s->kh, s->stride, s->pad);
            q->conv_ow[i] = rlt_conv_out_dim(w, s->kw, s->stride, s->pad);
            if (q->conv_oh[i] < 1 || q->conv_ow[i] < 1)
                RLT_FAIL(e, RLT_ECONFIG,
                         "network.conv[%d]%s%s%s: kernel %dx%d (stride %d, pad %d) does not fit its input of %d x %d x %d "
                         "(channels x height x width; the observation is %s): the output would be %d x %d; use a smaller "
                         "kernel, more padding, or fewer layers", (int)i, label ? " (preset " : "", label ? label : "",
                         label ? ")" : "", (int)s->kh, (int)s->kw, (int)s->stride, (int)s->pad, (int)c, (int)h, (int)w,
                         shape_text(obs, shape, sizeof shape), (int)q->conv_oh[i], (int)q->conv_ow[i]);
            /* Each layer's output, one sample of it, must stay an int32 count (the backends index with it). */
            int64_t elems = (int64_t)s->k * q->conv_oh[i] * q->conv_ow[i];
            if (elems > INT32_MAX)
                RLT_FAIL(e, RLT_ECONFIG, "network.conv[%d]: the output %d x %d x %d has %lld elements per sample, "
                         "more than 2^31 - 1; use fewer channels, a larger stride or less padding", (int)i,
                         (int)s->k, (int)q->conv_oh[i], (int)q->conv_ow[i], (long long)elems);
            c = s->k;
            h = q->conv_oh[i];
            w = q->conv_ow[i];
        }
        features = (int64_t)c * h * w;
    } else {
        features = 1;
        for (int32_t i = 0; i < obs->ndim; i++) features *= obs->shape[i];
    }
    q->n_conv = n;
    q->n_sets = 1;
    q->in_elems = 1;
    for (int32_t i = 0; i < obs->ndim; i++) q->in_elems *= obs->shape[i];
    return mlp_define(&q->head, e, (int32_t)features, hidden->v, hidden->n, n_actions, RLT_ACT_RELU, RLT_ACT_NONE);
}

static uint64_t conv_w_count(const rlt_conv_shape *s) { return (uint64_t)s->k * s->c * s->kh * s->kw; }

/* Conv layer `layer`'s weights; its biases follow at conv_bias_offset. Each block starts on RLT_PARAM_ALIGN
 * floats (engine/plan.h), and so does the head after them. */
static uint64_t conv_offset(const rlt_qnet *q, int32_t layer) {
    uint64_t n = 0;
    for (int32_t i = 0; i < layer; i++) n += plan_param_align(conv_w_count(&q->conv[i])) + plan_param_align((uint64_t)q->conv[i].k);
    return n;
}

static uint64_t conv_bias_offset(const rlt_qnet *q, int32_t layer) {
    return conv_offset(q, layer) + plan_param_align(conv_w_count(&q->conv[layer]));
}

uint64_t qnet_conv_weight_offset(const rlt_qnet *q, int32_t layer) { return conv_offset(q, layer); }
uint64_t qnet_conv_bias_offset(const rlt_qnet *q, int32_t layer) { return conv_bias_offset(q, layer); }

uint64_t qnet_param_count(const rlt_qnet *q) { return conv_offset(q, q->n_conv) + mlp_param_count(&q->head); }

int32_t qnet_param_blocks(const rlt_qnet *q, uint64_t *sizes, int32_t n, int32_t cap) {
    for (int32_t i = 0; i < q->n_conv; i++) {
        if (n < 0 || n + 2 > cap) return -1;
        sizes[n++] = conv_w_count(&q->conv[i]);
        sizes[n++] = (uint64_t)q->conv[i].k;
    }
    return mlp_param_blocks(&q->head, sizes, n, cap);
}

static uint64_t conv_out_elems(const rlt_qnet *q, int32_t i) {
    return (uint64_t)q->conv[i].n * q->conv[i].k * q->conv_oh[i] * q->conv_ow[i];
}

int qnet_plan(rlt_qnet *q, rlt_backend *bk, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch, int32_t conv_slot0) {
    char key[64];
    if (q->n_sets < 1 || q->n_sets > RLT_QNET_MAX_SETS)
        RLT_FAIL(e, RLT_EINVAL, "qnet_plan: %d activation sets (1..%d)", q->n_sets, RLT_QNET_MAX_SETS);
    q->batch = batch;
    q->conv_slot0 = conv_slot0;
    q->conv_ws_bytes = 0;
    /* The torso computes in the head's type; a 16-bit torso hands the head 16-bit activations. */
    rlt_lp dt = q->head.dtype;
    uint64_t es = rlt_lp_size(dt);
    if (q->n_conv && dt != RLT_LP_F32) q->head.in_dtype = dt;
    uint64_t in_bytes = q->n_conv && dt != RLT_LP_F32 ? (uint64_t)batch * q->in_elems * es : 0;
    snprintf(key, sizeof key, "%s.conv.input", name);
    RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, in_bytes, &q->conv_in));
    for (int32_t i = 0; i < q->n_conv; i++) {
        rlt_conv_shape *s = &q->conv[i];
        s->n = batch;
        s->dtype = dt;
        uint64_t ws = 0;
        RLT_TRY(bk->ops->conv_prepare(bk, conv_slot0 + i, s, &ws));
        if (ws > q->conv_ws_bytes) q->conv_ws_bytes = ws;
        snprintf(key, sizeof key, "%s.conv%d.act", name, i);
        RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, conv_out_elems(q, i) * es, &q->conv_y[i]));
        snprintf(key, sizeof key, "%s.conv%d.dact", name, i);
        RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, conv_out_elems(q, i) * es, &q->conv_dy[i]));
    }
    if (q->n_conv) {
        snprintf(key, sizeof key, "%s.conv.workspace", name);
        RLT_TRY(plan_add(plan, e, key, "workspace", RLT_LOC_DEVICE, q->conv_ws_bytes, &q->conv_ws));
    }
    /* The forward-only sets. A backend that runs one op at a time (the CPU) lets them share set 0's workspace;
     * on a GPU the sets' forwards run side by side, so each has its own. */
    q->ws_shared = bk->device_is_host;
    for (int32_t k = 1; k < q->n_sets && q->n_conv; k++) {
        snprintf(key, sizeof key, "%s.set%d.conv.input", name, k);
        RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, in_bytes, &q->set_in[k]));
        for (int32_t i = 0; i < q->n_conv; i++) {
            snprintf(key, sizeof key, "%s.set%d.conv%d.act", name, k, i);
            RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, conv_out_elems(q, i) * es, &q->set_y[k][i]));
        }
        snprintf(key, sizeof key, "%s.set%d.conv.workspace", name, k);
        RLT_TRY(plan_add(plan, e, key, "workspace", RLT_LOC_DEVICE, bk->device_is_host ? 0 : q->conv_ws_bytes,
                         &q->set_ws[k]));
    }
    q->head.n_sets = q->n_sets;
    snprintf(key, sizeof key, "%s.head", name);
    return mlp_plan(&q->head, plan, e, key, batch);
}

rlt_qnet qnet_view(const rlt_qnet *q, int32_t set) {
    rlt_qnet v = *q;
    if (set == 0) return v;
    /* An unplanned set gets NULL buffers, which the ops refuse at their first use. */
    int ok = set > 0 && set < q->n_sets;
    for (int32_t i = 0; i < q->n_conv; i++) {
        v.conv_y[i] = ok ? q->set_y[set][i] : NULL;
        v.conv_dy[i] = NULL;
    }
    v.conv_in = ok ? q->set_in[set] : NULL;
    /* The arena binds the planned pointers after qnet_plan, so a shared workspace is looked up here. */
    v.conv_ws = !ok ? NULL : q->ws_shared ? q->conv_ws : q->set_ws[set];
    v.head = mlp_view(&q->head, set);
    return v;
}

void qnet_init_params(const rlt_qnet *q, float *params, rlt_rng *rng) {
    /* PyTorch's Conv2d and Linear defaults: uniform in +-1/sqrt(fan_in). The values are drawn in the packed
     * order (W then b, layer by layer), so a seed gives the same weights whatever the padding, which is 0. */
    memset(params, 0, conv_offset(q, q->n_conv) * sizeof(float));
    for (int32_t i = 0; i < q->n_conv; i++) {
        const rlt_conv_shape *s = &q->conv[i];
        float bound = 1.0f / sqrtf((float)(s->c * s->kh * s->kw));
        float *w = params + conv_offset(q, i), *b = params + conv_bias_offset(q, i);
        uint64_t nw = conv_w_count(s);
        for (uint64_t j = 0; j < nw; j++) w[j] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
        for (int32_t j = 0; j < s->k; j++) b[j] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
    }
    mlp_init_params(&q->head, params + conv_offset(q, q->n_conv), rng);
}

/* The 16-bit copy of the head's weights (NULL in fp32). */
static const void *head_lp(const rlt_qnet *q, const void *params_lp) {
    return params_lp ? (const char *)params_lp + conv_offset(q, q->n_conv) * 2 : NULL;
}

int qnet_forward(rlt_backend *bk, rlt_qnet *q, const float *params, const void *params_lp, const float *x, int32_t rows,
                 float *out) {
    if (rows != q->batch && q->n_conv)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "qnet_forward: a conv torso runs at its planned batch %d, not %d",
                           q->batch, rows);
    /* A 16-bit torso starts from the input's 16-bit copy and reads the 16-bit weights; biases stay fp32. */
    int lp = q->n_conv && q->head.dtype != RLT_LP_F32;
    const void *in = x;
    if (lp) {
        rlt_cast c = {.rows = rows, .cols = q->in_elems, .dst = q->conv_in, .dst_dtype = q->head.dtype,
                      .ldd = q->in_elems, .src = x, .src_dtype = RLT_LP_F32, .lds = q->in_elems};
        RLT_TRY(bk->ops->cast(bk, &c));
        in = q->conv_in;
    }
    for (int32_t i = 0; i < q->n_conv; i++) {
        const float *w = params + conv_offset(q, i);
        const void *wt = lp ? (const void *)((const char *)params_lp + conv_offset(q, i) * 2) : (const void *)w;
        rlt_conv_fwd f = {.slot = q->conv_slot0 + i, .y = q->conv_y[i], .x = in, .w = wt,
                          .b = params + conv_bias_offset(q, i), .act = RLT_ACT_RELU, .ws = q->conv_ws,
                          .ws_bytes = q->conv_ws_bytes};
        RLT_TRY(bk->ops->conv_forward(bk, &f));
        in = q->conv_y[i];
    }
    int32_t nf = q->head.dims[0], na = q->head.dims[q->head.n_layers];
    return mlp_forward(bk, &q->head, params + conv_offset(q, q->n_conv), head_lp(q, params_lp), in, nf, rows, out, na);
}

int qnet_backward(rlt_backend *bk, rlt_qnet *q, const float *params, const void *params_lp, float *grads, const float *x,
                  int32_t rows, float *dout, const float *dout_scale) {
    int32_t L = q->n_conv, nf = q->head.dims[0], na = q->head.dims[q->head.n_layers];
    int lp = L && q->head.dtype != RLT_LP_F32;
    const void *x_in = lp ? q->conv_in : (const void *)x;
    const void *head_in = L ? q->conv_y[L - 1] : x_in;
    uint64_t off = conv_offset(q, L);
    /* The head's input gradient is the last conv layer's output gradient. */
    RLT_TRY(mlp_backward(bk, &q->head, params + off, head_lp(q, params_lp), grads + off, head_in, nf, rows, dout, na,
                         dout_scale, L ? q->conv_dy[L - 1] : NULL, nf));
    for (int32_t i = L - 1; i >= 0; i--) {
        const void *in = i ? q->conv_y[i - 1] : x_in;
        uint64_t wo = conv_offset(q, i);
        const void *wt = lp ? (const void *)((const char *)params_lp + wo * 2) : (const void *)(params + wo);
        /* conv_backward applies the ReLU's derivative itself, through the layer's output. */
        rlt_conv_bwd b = {.slot = q->conv_slot0 + i, .dx = i ? q->conv_dy[i - 1] : NULL, .dw = grads + wo,
                          .db = grads + conv_bias_offset(q, i), .dy = q->conv_dy[i], .y = q->conv_y[i], .x = in, .w = wt,
                          .act = RLT_ACT_RELU, .ws = q->conv_ws, .ws_bytes = q->conv_ws_bytes};
        RLT_TRY(bk->ops->conv_backward(bk, &b));
    }
    return RLT_OK;
}
