/* mnet.c: the dict-observation network on the backend interface (see mnet.h). The concatenation and its
 * split are strided copies (the backend's cast op, fp32 to fp32), so no op is specific to it. */
#include "mnet.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../engine/config_inputs.h"

static const char *shape_text(const rlt_input_spec *s, char *buf, size_t cap) {
    if (s->ndim == 3) snprintf(buf, cap, "[%d, %d, %d]", (int)s->shape[0], (int)s->shape[1], (int)s->shape[2]);
    else snprintf(buf, cap, "[%d]", (int)s->shape[0]);
    return buf;
}

int mnet_define(rlt_mnet *m, rlt_err *e, const rlt_input_list *in, int32_t extra, const rlt_int_list *hidden,
                int32_t out, rlt_act out_act) {
    memset(m, 0, sizeof *m);
    cfg_why why;
    if (in->n < 1 || config_inputs_check(in, &why) != 0)
        RLT_FAIL(e, RLT_ECONFIG, "network.inputs: %s; %s", in->n < 1 ? "no inputs" : why.what, in->n < 1 ? "" : why.hint);
    rlt_input_layout lay;
    config_inputs_layout(in, &lay);
    int64_t features = 0, in_elems = 0;
    char shape[64];
    for (int32_t p = 0; p < in->n; p++) {
        const rlt_input_spec *s = &in->in[p];
        rlt_mnet_part *mp = &m->part[p];
        memcpy(mp->name, s->name, sizeof mp->name);
        mp->u8 = s->dtype == RLT_DTYPE_U8;
        mp->row_off = lay.offset[p];
        mp->elems = (int32_t)lay.elems[p];
        mp->in_off = (int32_t)in_elems;
        mp->n_conv = s->torso.n;
        mp->conv0 = m->n_conv;
        int64_t f = lay.elems[p];
        if (s->torso.n > 0) {
            int32_t c = s->shape[0], h = s->shape[1], w = s->shape[2];
            for (int32_t i = 0; i < s->torso.n; i++) {
                const rlt_conv_layer *l = &s->torso.layer[i];
                int32_t j = m->n_conv + i;
                rlt_conv_shape *cs = &m->conv[j];
                *cs = (rlt_conv_shape){.c = c, .h = h, .w = w, .k = l->out, .kh = l->kernel, .kw = l->kernel,
                                       .stride = l->stride, .pad = l->pad};
                m->conv_oh[j] = rlt_conv_out_dim(h, cs->kh, cs->stride, cs->pad);
                m->conv_ow[j] = rlt_conv_out_dim(w, cs->kw, cs->stride, cs->pad);
                if (m->conv_oh[j] < 1 || m->conv_ow[j] < 1)
                    RLT_FAIL(e, RLT_ECONFIG, "network.inputs '%s' torso[%d]: kernel %dx%d (stride %d, pad %d) does not fit "
                             "its input of %d x %d x %d (the input's shape is %s); use a smaller kernel, more padding, "
                             "or fewer layers", s->name, (int)i, (int)cs->kh, (int)cs->kw, (int)cs->stride, (int)cs->pad,
                             (int)c, (int)h, (int)w, shape_text(s, shape, sizeof shape));
                int64_t elems = (int64_t)cs->k * m->conv_oh[j] * m->conv_ow[j];
                if (elems > (1 << 24))
                    RLT_FAIL(e, RLT_ECONFIG, "network.inputs '%s' torso[%d]: the output %d x %d x %d has %lld elements a "
                             "row, more than 2^24; use fewer channels or a larger stride", s->name, (int)i, (int)cs->k,
                             (int)m->conv_oh[j], (int)m->conv_ow[j], (long long)elems);
                c = cs->k;
                h = m->conv_oh[j];
                w = m->conv_ow[j];
            }
            m->n_conv += s->torso.n;
            f = (int64_t)c * h * w;
        }
        mp->features = (int32_t)f;
        mp->col = (int32_t)features;
        features += f;
        in_elems += lay.elems[p];
    }
    if (features + extra > (1 << 24) || in_elems > (1 << 24))
        RLT_FAIL(e, RLT_ECONFIG, "network.inputs: the head's input would have %lld columns (at most 2^24)",
                 (long long)(features + extra));
    m->n_parts = in->n;
    m->in_elems = (int32_t)in_elems;
    m->row_bytes = lay.row_bytes;
    m->features = (int32_t)features;
    m->extra = extra;
    return mlp_define(&m->head, e, (int32_t)(features + extra), hidden->v, hidden->n, out, RLT_ACT_RELU, out_act);
}

static uint64_t conv_w_count(const rlt_conv_shape *s) { return (uint64_t)s->k * s->c * s->kh * s->kw; }

/* Conv layer `layer`'s weights (all parts' torsos in order), its biases at conv_bias_offset, then the head:
 * each block on RLT_PARAM_ALIGN floats (engine/plan.h). */
static uint64_t conv_offset(const rlt_mnet *m, int32_t layer) {
    uint64_t n = 0;
    for (int32_t i = 0; i < layer; i++) n += plan_param_align(conv_w_count(&m->conv[i])) + plan_param_align((uint64_t)m->conv[i].k);
    return n;
}

static uint64_t conv_bias_offset(const rlt_mnet *m, int32_t layer) {
    return conv_offset(m, layer) + plan_param_align(conv_w_count(&m->conv[layer]));
}

uint64_t mnet_conv_weight_offset(const rlt_mnet *m, int32_t layer) { return conv_offset(m, layer); }
uint64_t mnet_conv_bias_offset(const rlt_mnet *m, int32_t layer) { return conv_bias_offset(m, layer); }

uint64_t mnet_param_count(const rlt_mnet *m) { return conv_offset(m, m->n_conv) + mlp_param_count(&m->head); }

int32_t mnet_param_blocks(const rlt_mnet *m, uint64_t *sizes, int32_t n, int32_t cap) {
    for (int32_t i = 0; i < m->n_conv; i++) {
        if (n < 0 || n + 2 > cap) return -1;
        sizes[n++] = conv_w_count(&m->conv[i]);
        sizes[n++] = (uint64_t)m->conv[i].k;
    }
    return mlp_param_blocks(&m->head, sizes, n, cap);
}

static uint64_t conv_out_elems(const rlt_mnet *m, int32_t i) {
    return (uint64_t)m->batch * m->conv[i].k * m->conv_oh[i] * m->conv_ow[i];
}

int mnet_plan(rlt_mnet *m, rlt_backend *bk, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch,
              int32_t conv_slot0, int grads) {
    char key[96];
    if (conv_slot0 < 0 || conv_slot0 + m->n_conv > RLT_BACKEND_MAX_CONVS)
        RLT_FAIL(e, RLT_EINVAL, "mnet_plan: conv slots %d..%d outside the backend's %d", (int)conv_slot0,
                 (int)(conv_slot0 + m->n_conv - 1), RLT_BACKEND_MAX_CONVS);
    m->batch = batch;
    m->conv_slot0 = conv_slot0;
    m->conv_ws_bytes = 0;
    for (int32_t p = 0; p < m->n_parts; p++) {
        const rlt_mnet_part *mp = &m->part[p];
        for (int32_t i = 0; i < mp->n_conv; i++) {
            int32_t j = mp->conv0 + i;
            rlt_conv_shape *s = &m->conv[j];
            s->n = batch;
            s->dtype = RLT_LP_F32;
            uint64_t ws = 0;
            RLT_TRY(bk->ops->conv_prepare(bk, conv_slot0 + j, s, &ws));
            if (ws > m->conv_ws_bytes) m->conv_ws_bytes = ws;
            snprintf(key, sizeof key, "%s.in.%s.conv%d.act", name, mp->name, (int)i);
            RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, conv_out_elems(m, j) * 4, &m->conv_y[j]));
            snprintf(key, sizeof key, "%s.in.%s.conv%d.dact", name, mp->name, (int)i);
            RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, grads ? conv_out_elems(m, j) * 4 : 0,
                             &m->conv_dy[j]));
        }
    }
    if (m->n_conv) {
        snprintf(key, sizeof key, "%s.conv.workspace", name);
        RLT_TRY(plan_add(plan, e, key, "workspace", RLT_LOC_DEVICE, m->conv_ws_bytes, &m->conv_ws));
    }
    uint64_t cat = (uint64_t)batch * (uint64_t)mnet_ld(m) * 4;
    snprintf(key, sizeof key, "%s.cat", name);
    RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, cat, (void **)&m->cat));
    snprintf(key, sizeof key, "%s.dcat", name);
    RLT_TRY(plan_add(plan, e, key, "activations", RLT_LOC_DEVICE, grads ? cat : 0, (void **)&m->dcat));
    m->head.n_sets = 1;
    snprintf(key, sizeof key, "%s.head", name);
    return mlp_plan(&m->head, plan, e, key, batch);
}

void mnet_init_params(const rlt_mnet *m, float *params, rlt_rng *rng) {
    /* PyTorch's Conv2d and Linear defaults, as rlt_qnet: uniform in +-1/sqrt(fan_in), drawn in the packed order
     * (W then b, layer by layer) into the padded layout, whose gaps are 0. */
    memset(params, 0, conv_offset(m, m->n_conv) * sizeof(float));
    for (int32_t i = 0; i < m->n_conv; i++) {
        const rlt_conv_shape *s = &m->conv[i];
        float bound = 1.0f / sqrtf((float)(s->c * s->kh * s->kw));
        float *w = params + conv_offset(m, i), *b = params + conv_bias_offset(m, i);
        uint64_t nw = conv_w_count(s);
        for (uint64_t j = 0; j < nw; j++) w[j] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
        for (int32_t j = 0; j < s->k; j++) b[j] = (2.0f * rlt_rng_uniform(rng) - 1.0f) * bound;
    }
    mlp_init_params(&m->head, params + conv_offset(m, m->n_conv), rng);
}

int mnet_fill_u8_scales(rlt_backend *bk, const rlt_mnet *m, const rlt_input_list *inputs, float *u8_scale) {
    for (int32_t p = 0; p < m->n_parts && p < inputs->n; p++)
        RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, u8_scale + p, NULL, 1, config_inputs_u8_scale(&inputs->in[p])));
    return RLT_OK;
}

int mnet_convert(rlt_backend *bk, const rlt_mnet *m, const void *raw, int32_t rows, float *x, const float *u8_scale) {
    for (int32_t p = 0; p < m->n_parts; p++) {
        const rlt_mnet_part *mp = &m->part[p];
        /* A float part is 4-aligned in a row whose size is a multiple of 4, so the rows are a float matrix
         * with a stride of row_bytes / 4 elements. */
        rlt_cast c = {.rows = rows, .cols = mp->elems, .dst = x + (int64_t)m->batch * mp->in_off, .dst_dtype = RLT_LP_F32,
                      .ldd = mp->elems, .src = (const unsigned char *)raw + mp->row_off,
                      .src_dtype = mp->u8 ? RLT_LP_U8 : RLT_LP_F32, .lds = mp->u8 ? m->row_bytes : m->row_bytes / 4,
                      .scale = mp->u8 ? u8_scale + p : NULL};
        RLT_TRY(bk->ops->cast(bk, &c));
    }
    return RLT_OK;
}

static const void *head_lp(const rlt_mnet *m, const void *params_lp) {
    return params_lp ? (const char *)params_lp + conv_offset(m, m->n_conv) * 2 : NULL;
}

/* Strided fp32 copy of a rows x cols block. */
static int copy_block(rlt_backend *bk, float *dst, int64_t ldd, const float *src, int64_t lds, int32_t rows, int64_t cols) {
    rlt_cast c = {.rows = rows, .cols = cols, .dst = dst, .dst_dtype = RLT_LP_F32, .ldd = ldd, .src = src,
                  .src_dtype = RLT_LP_F32, .lds = lds};
    return bk->ops->cast(bk, &c);
}

int mnet_forward(rlt_backend *bk, rlt_mnet *m, const float *params, const void *params_lp, const float *x, int32_t rows,
                 float *out, int32_t ldout) {
    if (rows > m->batch || (m->n_conv && rows != m->batch))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "mnet_forward: %d rows; planned batch %d%s", rows,
                           m->batch, m->n_conv ? " (a conv torso runs at it)" : "");
    int32_t ld = mnet_ld(m);
    for (int32_t p = 0; p < m->n_parts; p++) {
        const rlt_mnet_part *mp = &m->part[p];
        const float *in = x + (int64_t)m->batch * mp->in_off;
        for (int32_t i = 0; i < mp->n_conv; i++) {
            int32_t j = mp->conv0 + i;
            const float *w = params + conv_offset(m, j);
            rlt_conv_fwd f = {.slot = m->conv_slot0 + j, .y = m->conv_y[j], .x = in, .w = w,
                              .b = params + conv_bias_offset(m, j), .act = RLT_ACT_RELU, .ws = m->conv_ws,
                              .ws_bytes = m->conv_ws_bytes};
            RLT_TRY(bk->ops->conv_forward(bk, &f));
            in = m->conv_y[j];
        }
        RLT_TRY(copy_block(bk, m->cat + mp->col, ld, in, mp->features, rows, mp->features));
    }
    return mlp_forward(bk, &m->head, params + conv_offset(m, m->n_conv), head_lp(m, params_lp), m->cat, ld, rows, out,
                       ldout);
}

int mnet_backward(rlt_backend *bk, rlt_mnet *m, const float *params, const void *params_lp, float *grads, const float *x,
                  int32_t rows, float *dout, int32_t lddout, const float *dout_scale) {
    int32_t ld = mnet_ld(m);
    uint64_t off = conv_offset(m, m->n_conv);
    /* dcat is needed by a torso, or by a caller that wants the extra columns' gradient (no grads: TD3's actor
     * step); a network of vectors alone trained on its own loss skips it. */
    float *dcat = grads && !m->n_conv ? NULL : m->dcat;
    RLT_TRY(mlp_backward(bk, &m->head, params + off, head_lp(m, params_lp), grads ? grads + off : NULL, m->cat, ld, rows,
                         dout, lddout, dout_scale, dcat, ld));
    if (!grads) return RLT_OK;
    /* The concatenation's gradient, split back: each torso's columns become its last layer's output gradient. */
    for (int32_t p = 0; p < m->n_parts; p++) {
        const rlt_mnet_part *mp = &m->part[p];
        if (!mp->n_conv) continue;
        int32_t last = mp->conv0 + mp->n_conv - 1;
        RLT_TRY(copy_block(bk, m->conv_dy[last], mp->features, m->dcat + mp->col, ld, rows, mp->features));
        for (int32_t j = last; j >= mp->conv0; j--) {
            const float *in = j > mp->conv0 ? (const float *)m->conv_y[j - 1] : x + (int64_t)m->batch * mp->in_off;
            uint64_t wo = conv_offset(m, j);
            /* conv_backward applies the ReLU's derivative itself, through the layer's output. */
            rlt_conv_bwd b = {.slot = m->conv_slot0 + j, .dx = j > mp->conv0 ? m->conv_dy[j - 1] : NULL,
                              .dw = grads + wo, .db = grads + conv_bias_offset(m, j), .dy = m->conv_dy[j],
                              .y = m->conv_y[j], .x = in, .w = params + wo, .act = RLT_ACT_RELU, .ws = m->conv_ws,
                              .ws_bytes = m->conv_ws_bytes};
            RLT_TRY(bk->ops->conv_backward(bk, &b));
        }
    }
    return RLT_OK;
}
