/* test_param_align.c: the padded parameter layout (engine/plan.h RLT_PARAM_ALIGN). Every weight and bias block
 * of every network starts at a multiple of 16 floats (so a 16-bit compute copy is 32-byte aligned, which
 * cuBLASLt's tensor-core kernels want) and no two blocks overlap: TD3 at HalfCheetah sizes (17 observations, 6
 * actions) with 1024-1024 and 400-300 networks, DQN MLPs, conv torsos with odd channel counts, and a
 * network.inputs dict network. The gaps stay exactly 0 through 50 CPU updates in params, target, grads and
 * Adam's moments. And a checkpoint written before the padding (each parameter tensor's blocks back to back,
 * made here from a new one with the checkpoint writer) loads into the padded layout with the same values and
 * actions, while a parameter tensor of any other size is still refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../agents/dqn.h"
#include "../agents/td3.h"
#include "agent.h"
#include "checkpoint.h"
#include "harness.h"
#include "rltrain.h"

static rlt_err err;

/* ---- layouts ---- */

static void check_mlp_layout(const rlt_mlp *net, uint64_t base, const char *what) {
    uint64_t end = base;
    for (int32_t l = 0; l < net->n_layers; l++) {
        uint64_t w = base + mlp_weight_offset(net, l), b = base + mlp_bias_offset(net, l);
        uint64_t nw = (uint64_t)net->dims[l] * net->dims[l + 1];
        CHECK(w % 16 == 0 && b % 16 == 0, "%s layer %d: W at %llu, b at %llu: not multiples of 16 floats", what, l,
              (unsigned long long)w, (unsigned long long)b);
        CHECK(w >= end && b >= w + nw, "%s layer %d: blocks overlap (W %llu..%llu, b at %llu, previous end %llu)", what,
              l, (unsigned long long)w, (unsigned long long)(w + nw), (unsigned long long)b, (unsigned long long)end);
        end = b + (uint64_t)net->dims[l + 1];
    }
    uint64_t n = mlp_param_count(net);
    CHECK(n % 16 == 0 && base + n >= end, "%s: count %llu (blocks end at %llu)", what, (unsigned long long)n,
          (unsigned long long)(end - base));
}

static void test_td3_layouts(void) {
    int32_t sizes[2][2] = {{1024, 1024}, {400, 300}};
    for (int k = 0; k < 2; k++) {
        rlt_mlp actor, q;
        CHECK(mlp_define(&actor, &err, 17, sizes[k], 2, 6, RLT_ACT_RELU, RLT_ACT_TANH) == RLT_OK, "actor");
        CHECK(mlp_define(&q, &err, 23, sizes[k], 2, 1, RLT_ACT_RELU, RLT_ACT_NONE) == RLT_OK, "critic");
        /* td3_plan's placement: actor, q1, q2 back to back. */
        uint64_t na = mlp_param_count(&actor), nq = mlp_param_count(&q);
        char what[64];
        snprintf(what, sizeof what, "td3 %d-%d actor", sizes[k][0], sizes[k][1]);
        check_mlp_layout(&actor, 0, what);
        snprintf(what, sizeof what, "td3 %d-%d q1", sizes[k][0], sizes[k][1]);
        check_mlp_layout(&q, na, what);
        snprintf(what, sizeof what, "td3 %d-%d q2", sizes[k][0], sizes[k][1]);
        check_mlp_layout(&q, na + nq, what);
    }
    /* The case that was slow: q2 of 1024-1024 started at float 2,149,383 (4-byte aligned; 2 in bf16). */
    rlt_mlp actor, q;
    CHECK(mlp_define(&actor, &err, 17, sizes[0], 2, 6, RLT_ACT_RELU, RLT_ACT_TANH) == RLT_OK &&
              mlp_define(&q, &err, 23, sizes[0], 2, 1, RLT_ACT_RELU, RLT_ACT_NONE) == RLT_OK, "define");
    uint64_t q2 = mlp_param_count(&actor) + mlp_param_count(&q);
    CHECK(q2 % 16 == 0 && q2 >= 2149383 && q2 < 2149383 + 16 * 8, "q2 starts at %llu", (unsigned long long)q2);
}

static void check_conv_layout(const rlt_qnet *q, const char *what) {
    uint64_t end = 0;
    for (int32_t i = 0; i < q->n_conv; i++) {
        const rlt_conv_shape *s = &q->conv[i];
        uint64_t w = qnet_conv_weight_offset(q, i), b = qnet_conv_bias_offset(q, i);
        uint64_t nw = (uint64_t)s->k * s->c * s->kh * s->kw;
        CHECK(w % 16 == 0 && b % 16 == 0 && w >= end && b >= w + nw, "%s conv %d: W at %llu (%llu), b at %llu", what, i,
              (unsigned long long)w, (unsigned long long)nw, (unsigned long long)b);
        end = b + (uint64_t)s->k;
    }
    uint64_t head = qnet_conv_weight_offset(q, q->n_conv);
    CHECK(head % 16 == 0 && head >= end, "%s: the head starts at %llu, the torso ends at %llu", what,
          (unsigned long long)head, (unsigned long long)end);
    check_mlp_layout(&q->head, head, what);
    CHECK(qnet_param_count(q) == head + mlp_param_count(&q->head), "%s: count", what);
}

static void test_dqn_layouts(void) {
    rlt_int_list hidden = {.n = 2, .v = {30, 7}};
    rlt_conv_list none = {0};
    rlt_space vec = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {5, 0, 0, 0}, 0, NULL, NULL};
    rlt_qnet q;
    CHECK(qnet_define(&q, &err, &vec, &none, &hidden, 3) == RLT_OK, "mlp qnet: %s", err.msg);
    check_conv_layout(&q, "dqn mlp");
    /* Odd channel counts: W of 2*3*3*3 = 54 and b of 3, then W of 5*3*2*2 = 60 and b of 5. */
    rlt_conv_list conv = {.n = 2, .preset = RLT_CONV_PRESET_EXPLICIT};
    conv.layer[0] = (rlt_conv_layer){.out = 3, .kernel = 3, .stride = 1, .pad = 0};
    conv.layer[1] = (rlt_conv_layer){.out = 5, .kernel = 2, .stride = 2, .pad = 1};
    rlt_space img = {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {2, 9, 9, 0}, 0, NULL, NULL};
    CHECK(qnet_define(&q, &err, &img, &conv, &hidden, 3) == RLT_OK, "conv qnet: %s", err.msg);
    check_conv_layout(&q, "dqn conv");
    /* Packed, these were W0 at 0, b0 at 54, W1 at 57; padded: 0, 64, 80. */
    CHECK(qnet_conv_bias_offset(&q, 0) == 64 && qnet_conv_weight_offset(&q, 1) == 80,
          "conv 0's b at %llu, conv 1's W at %llu", (unsigned long long)qnet_conv_bias_offset(&q, 0),
          (unsigned long long)qnet_conv_weight_offset(&q, 1));
}

/* ---- agents: 50 CPU updates, then the gaps ---- */

/* The padding mask of an agent's parameter tensor: 1 where no block lies. */
static unsigned char *pad_mask(rlt_agent *ag, uint64_t *n_pad) {
    uint64_t sizes[512], n = ag->algo->param_count(ag), off = 0;
    int32_t nb = ag->algo->param_blocks(ag, sizes, 512);
    CHECK(nb > 0, "blocks");
    unsigned char *mask = malloc(n);
    memset(mask, 1, n);
    for (int32_t i = 0; i < nb; i++) {
        CHECK(off % 16 == 0, "block %d at %llu", i, (unsigned long long)off);
        memset(mask + off, 0, sizes[i]);
        off += plan_param_align(sizes[i]);
    }
    CHECK(off == n, "the blocks cover %llu floats, the tensor has %llu", (unsigned long long)off, (unsigned long long)n);
    *n_pad = 0;
    for (uint64_t i = 0; i < n; i++) *n_pad += mask[i];
    return mask;
}

/* The device tensors that share the parameter layout, by plan name. */
static const char *layout_tensors[] = {"params", "target", "grads", "adam_m", "adam_v"};

static float *fetch_named(rlt_agent *ag, const char *name) {
    rlt_plan_summary sum;
    const rlt_plan_entry *en;
    rlt_agent_memory_plan(ag, &sum, &en);
    for (int32_t i = 0; i < sum.n_entries; i++)
        if (!strcmp(en[i].name, name)) {
            float *h = malloc(en[i].bytes);
            CHECK(agent_fetch(ag, h, (const unsigned char *)ag->plan.base[en[i].location] + en[i].offset, en[i].bytes) ==
                      RLT_OK, "fetch %s", name);
            return h;
        }
    CHECK(0, "no plan entry %s", name);
    return NULL;
}

static void check_gaps(rlt_agent *ag, const float *p0, const char *what) {
    uint64_t n = ag->algo->param_count(ag), n_pad;
    unsigned char *mask = pad_mask(ag, &n_pad);
    CHECK(n_pad > 0, "%s: the layout has padding to check", what);
    for (size_t t = 0; t < sizeof layout_tensors / sizeof *layout_tensors; t++) {
        float *h = fetch_named(ag, layout_tensors[t]);
        uint64_t bad = 0, moved = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t bits;
            memcpy(&bits, &h[i], 4);
            if (mask[i]) bad += bits != 0;
            else if (!strcmp(layout_tensors[t], "params")) moved += h[i] != p0[i];
        }
        CHECK(bad == 0, "%s: %llu of %llu padding floats of '%s' are not 0", what, (unsigned long long)bad,
              (unsigned long long)n_pad, layout_tensors[t]);
        if (!strcmp(layout_tensors[t], "params"))
            CHECK(moved > (n - n_pad) / 20, "%s: the updates moved %llu of %llu parameters", what, (unsigned long long)moved,
                  (unsigned long long)(n - n_pad));
        free(h);
    }
    free(mask);
}

typedef struct kind {
    const char *name;
    const char *yaml; /* NULL: TD3 at HalfCheetah sizes from the harness */
    rlt_space obs, act;
    int32_t dict;
} kind;

static const char *td3_sets[] = {"td3.actor_hidden=[400, 300]", "td3.critic_hidden=[400, 300]", "train.batch_size=32",
                                 "seed=5", NULL};

static const char *dqn_common = "algo: dqn\nseed: 5\ntrain: {batch_size: 16}\nreplay: {capacity: 500}\n"
                                "dqn: {learning_starts: 20, train_freq: 1, gradient_steps: 1, target_update_every: 7, "
                                "tau: 0.5, max_grad_norm: 10}\n";

static rlt_agent *make_agent(const kind *k, int observe) {
    if (!k->yaml) {
        rlt_agent *ag = test_td3_synthetic(td3_sets, NULL);
        CHECK(ag != NULL, "td3 agent");
        return ag;
    }
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, dqn_common, "common.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_load_string(cfg, k->yaml, k->name) == RLT_OK, "%s: %s", k->name, rlt_config_errmsg(cfg));
    rlt_space obs = k->obs;
    if (k->dict) CHECK(rlt_config_dict_space(cfg, &obs) == RLT_OK, "dict space");
    int64_t foff = -1;
    if (k->dict) CHECK(rlt_config_input_part(cfg, "vec", &foff, NULL, NULL) == RLT_OK, "vec part");
    rlt_agent *ag = NULL;
    int rc = rlt_agent_init(cfg, &obs, &k->act, &ag);
    CHECK(rc == RLT_OK, "%s agent: %s", k->name, ag ? rlt_agent_errmsg(ag) : "");
    rlt_config_free(cfg);
    if (rc != RLT_OK || !observe) return rc == RLT_OK ? ag : NULL;
    /* One episode-free chain of 300 steps: observation bytes (uint8 pixels, or floats), actions 0..2. */
    int64_t row = k->dict ? obs.shape[0] : (int64_t)obs.shape[0] * (obs.ndim == 3 ? obs.shape[1] * obs.shape[2] : 1) *
                                                          (obs.dtype == RLT_DTYPE_U8 ? 1 : 4);
    unsigned char *o = calloc(2, (size_t)row), *o2 = o + row;
    uint32_t s = 7;
    int32_t done = 0, total = 0;
    for (int i = 0; i < 300 && total < 50; i++) {
        for (int64_t j = 0; j < row; j++) {
            s = s * 1664525u + 1013904223u;
            o2[j] = obs.dtype == RLT_DTYPE_U8 ? (unsigned char)(s >> 24) : 0;
        }
        if (obs.dtype != RLT_DTYPE_U8 || k->dict) {
            float *f = (float *)(void *)(o2 + (k->dict ? foff : 0));
            int64_t nf = k->dict ? 3 : obs.shape[0];
            for (int64_t j = 0; j < nf; j++) {
                s = s * 1664525u + 1013904223u;
                f[j] = (float)(s >> 8) / 16777216.0f - 0.5f;
            }
        }
        int32_t a = (int32_t)(s % 3u);
        float r = o2[0] > 127 ? 1.0f : -0.5f;
        uint8_t term = 0, trunc = 0;
        CHECK(rlt_agent_observe(ag, o, &a, &r, o2, &term, &trunc, 1) == RLT_OK, "observe: %s", rlt_agent_errmsg(ag));
        CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
        total += done;
        memcpy(o, o2, (size_t)row);
    }
    CHECK(total == 50, "%s: %d updates", k->name, total);
    free(o);
    return ag;
}

static int run_updates(rlt_agent *ag, const kind *k) {
    if (k->yaml) return 50; /* make_agent ran them */
    int32_t done = 0, total = 0;
    for (int i = 0; i < 50; i++) {
        CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
        total += done;
    }
    return total;
}

/* ---- a checkpoint from before the padding ---- */

static int is_param_name(const char *n) {
    return !strcmp(n, "params") || !strcmp(n, "adam_m") || !strcmp(n, "adam_v") || !strcmp(n, "target");
}

/* Rewrites `from` as the older rltrain wrote it: each parameter tensor's blocks back to back (shorten > 0 drops
 * that many more floats, for a file of neither size). The other tensors are copied as they are. */
static void write_packed(rlt_agent *ag, const char *from, const char *to, uint64_t shorten) {
    static ckpt_reader r;
    static ckpt_writer w;
    uint64_t sizes[512];
    int32_t nb = ag->algo->param_blocks(ag, sizes, 512);
    CHECK(ckpt_reader_open(&r, &err, from) == RLT_OK, "open %s: %s", from, err.msg);
    size_t ml;
    const char *meta = ckpt_reader_meta(&r, &ml);
    CHECK(ckpt_writer_open(&w, &err, to, meta, ml) == RLT_OK, "writer: %s", err.msg);
    for (int32_t i = 0; i < r.n_tensors; i++) {
        const ckpt_tensor_info *t = &r.tensors[i];
        unsigned char *buf = malloc(t->bytes ? t->bytes : 1);
        CHECK(ckpt_reader_read(&r, t->name, buf, t->bytes) == RLT_OK, "read %s", t->name);
        if (is_param_name(t->name)) {
            float *f = (float *)(void *)buf;
            uint64_t src = 0, dst = 0;
            for (int32_t b = 0; b < nb; b++) {
                memmove(f + dst, f + src, sizes[b] * 4);
                dst += sizes[b];
                src += plan_param_align(sizes[b]);
            }
            dst -= shorten;
            int64_t shape[2] = {1, (int64_t)dst};
            CHECK(ckpt_writer_add(&w, t->name, t->dtype, 2, shape, f, dst * 4) == RLT_OK, "add %s", t->name);
        } else {
            CHECK(ckpt_writer_add(&w, t->name, t->dtype, t->ndim, t->shape, buf, t->bytes) == RLT_OK, "add %s", t->name);
        }
        free(buf);
    }
    ckpt_reader_close(&r);
    CHECK(ckpt_writer_close(&w) == RLT_OK, "close: %s", err.msg);
}

static void test_legacy(rlt_agent *a, const kind *k) {
    const char *dir = test_tmpdir("param_align");
    char now[800], old[800], bad[800];
    snprintf(now, sizeof now, "%s/%s.ckpt", dir, k->name);
    snprintf(old, sizeof old, "%s/%s_packed.ckpt", dir, k->name);
    snprintf(bad, sizeof bad, "%s/%s_short.ckpt", dir, k->name);
    CHECK(rlt_agent_save(a, now) == RLT_OK, "save: %s", rlt_agent_errmsg(a));
    write_packed(a, now, old, 0);
    write_packed(a, now, bad, 1);
    rlt_agent *b = make_agent(k, 0);
    if (!b) return;
    CHECK(rlt_agent_load(b, old) == RLT_OK, "%s: a packed checkpoint loads: %s", k->name, rlt_agent_errmsg(b));
    for (size_t t = 0; t < sizeof layout_tensors / sizeof *layout_tensors; t++) {
        if (!strcmp(layout_tensors[t], "grads")) continue; /* not saved */
        float *ha = fetch_named(a, layout_tensors[t]), *hb = fetch_named(b, layout_tensors[t]);
        CHECK(!memcmp(ha, hb, a->algo->param_count(a) * 4), "%s: '%s' loaded from the packed file equals the saved one",
              k->name, layout_tensors[t]);
        free(ha);
        free(hb);
    }
    /* The same actions (greedy) on the same observations. */
    static unsigned char obs[8 * 4096];
    for (size_t i = 0; i < sizeof obs; i++) obs[i] = (unsigned char)(i * 37u % 251u == 0);
    float fa[8 * 16], fb[8 * 16];
    memset(fa, 0, sizeof fa);
    memset(fb, 0, sizeof fb);
    if (!k->yaml) {
        float *fo = (float *)(void *)obs;
        for (int i = 0; i < 8 * 17; i++) fo[i] = (float)(i % 11) / 11.0f - 0.4f;
    }
    CHECK(rlt_agent_act(a, obs, 8, 0, fa) == RLT_OK && rlt_agent_act(b, obs, 8, 0, fb) == RLT_OK, "act");
    CHECK(!memcmp(fa, fb, sizeof fa), "%s: the same actions", k->name);
    /* A parameter tensor of neither size is refused as before. */
    rlt_agent *c = make_agent(k, 0);
    CHECK(rlt_agent_load(c, bad) == RLT_ECHECKPOINT && strstr(rlt_agent_errmsg(c), "other sizes"),
          "%s: a short tensor is refused: %s", k->name, rlt_agent_errmsg(c));
    rlt_agent_free(c);
    rlt_agent_free(b);
}

static void test_agents(void) {
    kind kinds[] = {
        {"td3_400_300", NULL, {0}, {0}, 0},
        {"dqn_mlp", "network: {hidden: [30, 7], conv: none}\n",
         {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {5, 0, 0, 0}, 0, NULL, NULL},
         {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}, 0},
        {"dqn_conv", "network: {hidden: [9], conv: [{out: 3, kernel: 3}, {out: 5, kernel: 2, stride: 2, pad: 1}]}\n",
         {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {2, 9, 9, 0}, 0, NULL, NULL},
         {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}, 0},
        {"dqn_dict", "network:\n  hidden: [11]\n  inputs:\n"
                     "    - {name: screen, shape: [1, 6, 6], dtype: u8, torso: [{out: 3, kernel: 3}]}\n"
                     "    - {name: vec, shape: [3]}\n",
         {0}, {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}, 1},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        const kind *k = &kinds[i];
        rlt_agent *ag = make_agent(k, 1);
        if (!ag) continue;
        float *p0 = k->yaml ? NULL : fetch_named(ag, "params");
        int done = run_updates(ag, k);
        CHECK(done == 50, "%s: 50 updates (%d)", k->name, done);
        if (k->yaml) {
            /* The DQN agents updated while observing; compare against a fresh agent's initial parameters. */
            rlt_agent *fresh = make_agent(k, 0);
            p0 = fresh ? fetch_named(fresh, "params") : NULL;
            rlt_agent_free(fresh);
        }
        if (p0) check_gaps(ag, p0, k->name);
        free(p0);
        test_legacy(ag, k);
        rlt_agent_free(ag);
    }
}

int main(void) {
    test_td3_layouts();
    test_dqn_layouts();
    test_agents();
    return test_summary("test_param_align");
}
