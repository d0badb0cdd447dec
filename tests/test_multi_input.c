/* test_multi_input.c: dict observations and network.inputs (several torsos concatenated into one head), with an
 * environment of this file's own: each step shows an 8x8 uint8 image ("screen", one lit pixel) and a float
 * vector ("stats", 2 values), and the reward depends on both: which half of the image the pixel is in, and the
 * sign (DQN) or value (TD3) of stats[0]. Steps are independent (a contextual bandit of 10-step episodes), so
 * the only way to score is to read both parts:
 * - DQN (2 actions, reward 1 when the action is (pixel left) XOR (stats[0] > 0)): any policy blind to one
 *   part scores 5 of 10 in expectation; the median of 3 seeds' final evaluations must reach 8.5.
 * - TD3 (1 action in [-1, 1], reward -(a - t)^2 with t = +-stats[0], the sign from the pixel's half): the best
 *   policy blind to one part (a = 0) scores -3.3, random actions -6.7, perfect 0; the median must reach -1.0.
 * Plus: the gradient of the concatenation's split against finite differences, the plan's entries per input
 * with their exact sizes, a checkpoint round trip and the refusal of a checkpoint made with other inputs, the
 * config's refusals (file:line:key), the dict space check, and the uint8 source of the cast op. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

#include "../agents/mnet.h"
#include "../engine/config_inputs.h"
#include "backend_registry.h"
#include "../kernels/cpu/cpu_ops.h"

/* ---- the environment ---- */
#define MI_STEPS 10

typedef struct mi_state {
    uint64_t rng;
    int32_t px, py;
    float v;
} mi_state;

typedef struct mi_world {
    mi_state inst[2];
    int discrete;
    int64_t off_screen, off_stats, row_bytes; /* the part offsets, from rlt_config_input_part */
} mi_world;

static double mi_rand(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void mi_draw(mi_world *w, mi_state *s, void *obs) {
    s->px = (int32_t)(mi_rand(&s->rng) * 8.0);
    s->py = (int32_t)(mi_rand(&s->rng) * 8.0);
    s->v = (float)(2.0 * mi_rand(&s->rng) - 1.0);
    unsigned char *row = obs;
    memset(row, 0, (size_t)w->row_bytes);
    float stats[2] = {s->v, 0.5f};
    row[w->off_screen + s->py * 8 + s->px] = 255;
    memcpy(row + w->off_stats, stats, sizeof stats);
}

/* The target the state asks for: the sign of stats[0], flipped when the pixel is in the right half. */
static float mi_target(const mi_state *s) { return s->px < 4 ? s->v : -s->v; }

static int mi_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    mi_world *w = user;
    w->inst[instance].rng = seed | 1;
    mi_draw(w, &w->inst[instance], obs);
    return 0;
}

static int mi_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    (void)terminated;
    (void)truncated;
    mi_world *w = user;
    mi_state *s = &w->inst[instance];
    float t = mi_target(s);
    if (w->discrete) *reward = ((const int32_t *)action)[0] == (t > 0 ? 1 : 0) ? 1.0f : 0.0f;
    else {
        float a = ((const float *)action)[0], d = a - t;
        *reward = -d * d;
    }
    mi_draw(w, s, obs);
    return 0;
}


/* ---- the concatenation's split, against finite differences ---- */
static rlt_backend bk;
static rlt_err err;

static double mi_loss(rlt_mnet *m, const float *params, const float *x, const float *extra, int rows, const float *w,
                      float *out) {
    for (int r = 0; r < rows; r++) memcpy(mnet_extra(m) + (int64_t)r * mnet_ld(m), extra + r * m->extra, sizeof(float) * m->extra);
    CHECK(mnet_forward(&bk, m, params, NULL, x, rows, out, 2) == RLT_OK, "forward: %s", err.msg);
    double L = 0;
    for (int i = 0; i < rows * 2; i++) L += (double)w[i] * out[i];
    return L;
}

static void test_split_gradient(void) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    /* Two images (one f32 with a padded conv, one u8 with a strided one) around a vector, and 2 extra columns. */
    CHECK(rlt_config_load_string(cfg, "network:\n  hidden: [6]\n  inputs:\n"
                                 "    - {name: img, shape: [2, 5, 5], torso: [{out: 3, kernel: 3, pad: 1}, {out: 2, kernel: 3}]}\n"
                                 "    - {name: vec, shape: [3]}\n"
                                 "    - {name: pix, shape: [1, 4, 4], dtype: u8, torso: [{out: 2, kernel: 2, stride: 2}]}\n",
                                 "grad.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    const rlt_input_list *in = &((const struct rlt_config *)cfg)->network.inputs;
    rlt_mnet m;
    CHECK(mnet_define(&m, &err, in, 2, &((const struct rlt_config *)cfg)->network.hidden, 2, RLT_ACT_TANH) == RLT_OK,
          "define: %s", err.msg);
    CHECK(m.features == 2 * 3 * 3 + 3 + 2 * 2 * 2 && m.in_elems == 50 + 3 + 16 && m.n_conv == 3,
          "features %d, input elements %d, conv layers %d", m.features, m.in_elems, m.n_conv);
    int rows = 3;
    rlt_plan plan;
    plan_init(&plan, 1);
    CHECK(mnet_plan(&m, &bk, &plan, &err, "g", rows, 0, 1) == RLT_OK, "plan: %s", err.msg);
    void *ws = NULL;
    CHECK(plan_add(&plan, &err, "backend.workspace", "workspace", RLT_LOC_DEVICE, rlt_backend_workspace_need(&bk), &ws) ==
              RLT_OK, "ws");
    plan_layout(&plan);
    CHECK(plan_commit(&plan, &err, &bk, (uint64_t)1 << 30) == RLT_OK, "commit: %s", err.msg);
    CHECK(bk.ops->workspace(&bk, ws, rlt_backend_workspace_need(&bk), NULL) == RLT_OK, "set ws");
    /* Rows of bytes as the API takes them, converted as the update does. */
    uint64_t np = mnet_param_count(&m);
    static float params[4096], grads[4096], x[512], extra[16], w[16], out[16], dout[16], scale[RLT_CFG_MAX_INPUTS];
    static unsigned char raw[3 * 256];
    CHECK(np < 4096 && m.row_bytes * rows <= (int64_t)sizeof raw, "sizes");
    rlt_rng rng;
    rlt_rng_init(&rng, 5, 1);
    mnet_init_params(&m, params, &rng);
    for (int r = 0; r < rows; r++) {
        unsigned char *row = raw + r * m.row_bytes;
        for (int p = 0; p < m.n_parts; p++)
            for (int i = 0; i < m.part[p].elems; i++) {
                if (m.part[p].u8) row[m.part[p].row_off + i] = (unsigned char)rlt_rng_below(&rng, 256);
                else ((float *)(void *)(row + m.part[p].row_off))[i] = 2.0f * rlt_rng_uniform(&rng) - 1.0f;
            }
    }
    for (int p = 0; p < RLT_CFG_MAX_INPUTS; p++) scale[p] = 1.0f / 255.0f; /* one per part (mnet_fill_u8_scales) */
    CHECK(mnet_convert(&bk, &m, raw, rows, x, scale) == RLT_OK, "convert: %s", err.msg);
    /* The planar layout: part p's row r at x + batch * in_off + r * elems; u8 scaled by 1/255. */
    const rlt_mnet_part *pix = &m.part[2];
    CHECK(x[rows * pix->in_off + 1 * pix->elems + 5] == raw[1 * m.row_bytes + pix->row_off + 5] * scale[2],
          "a u8 element converted into its planar place");
    CHECK(x[rows * m.part[1].in_off + 2 * 3 + 1] == ((float *)(void *)(raw + 2 * m.row_bytes + m.part[1].row_off))[1],
          "an f32 element converted into its planar place");
    for (int i = 0; i < rows * 2; i++) extra[i] = 2.0f * rlt_rng_uniform(&rng) - 1.0f;
    for (int i = 0; i < rows * 2; i++) w[i] = 2.0f * rlt_rng_uniform(&rng) - 1.0f;
    mi_loss(&m, params, x, extra, rows, w, out);
    memcpy(dout, w, sizeof(float) * rows * 2);
    memset(grads, 0, sizeof grads);
    CHECK(mnet_backward(&bk, &m, params, NULL, grads, x, rows, dout, 2, NULL) == RLT_OK, "backward: %s", err.msg);
    /* As test_grad.c: central differences, h = 1e-3 on float parameters, 2e-3 absolute + 2e-2 relative. */
    const double h = 1e-3;
    int bad = 0;
    for (uint64_t i = 0; i < np; i++) {
        float keep = params[i];
        params[i] = keep + (float)h;
        double lp = mi_loss(&m, params, x, extra, rows, w, out);
        params[i] = keep - (float)h;
        double lm = mi_loss(&m, params, x, extra, rows, w, out);
        params[i] = keep;
        double fd = (lp - lm) / (2 * h);
        if (!(fabs(grads[i] - fd) <= 2e-3 + 2e-2 * fabs(fd))) {
            if (bad++ < 5) printf("param %llu: backward %.6g, finite differences %.6g\n", (unsigned long long)i, grads[i], fd);
        }
    }
    CHECK(bad == 0, "%d of %llu parameter gradients (every torso's and the head's) disagree with finite differences",
          bad, (unsigned long long)np);
    /* The extra columns' gradient (TD3's d/da) comes back in dcat, at the columns after the torsos'. */
    float dextra[16];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < 2; j++) dextra[r * 2 + j] = m.dcat[(int64_t)r * mnet_ld(&m) + m.features + j];
    for (int i = 0; i < rows * 2; i++) {
        float keep = extra[i];
        extra[i] = keep + (float)h;
        double lp = mi_loss(&m, params, x, extra, rows, w, out);
        extra[i] = keep - (float)h;
        double lm = mi_loss(&m, params, x, extra, rows, w, out);
        extra[i] = keep;
        CHECK_NEAR(dextra[i], (lp - lm) / (2 * h), 2e-3, 2e-2, "d loss / d extra");
    }
    /* Without grads only dcat is written (TD3's actor step through the critic). */
    float before = grads[0];
    mi_loss(&m, params, x, extra, rows, w, out);
    memcpy(dout, w, sizeof(float) * rows * 2);
    CHECK(mnet_backward(&bk, &m, params, NULL, NULL, x, rows, dout, 2, NULL) == RLT_OK, "backward without grads");
    CHECK(grads[0] == before, "no parameter gradient without grads");
    plan_release(&plan, &bk);
    rlt_config_free(cfg);
}

static const char *inputs_yaml =
    "network:\n"
    "  hidden: [64]\n"
    "  inputs:\n"
    "    - {name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 8, kernel: 3}]}\n"
    "    - {name: stats, shape: [2]}\n";

static rlt_config *make_config(const char *algo_yaml, const char *out_dir, uint64_t seed) {
    rlt_config *cfg;
    char set[800];
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config init");
    CHECK(rlt_config_load_string(cfg, inputs_yaml, "inputs.yaml") == RLT_OK, "inputs: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_load_string(cfg, algo_yaml, "algo.yaml") == RLT_OK, "algo: %s", rlt_config_errmsg(cfg));
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "out_dir");
    snprintf(set, sizeof set, "seed=%llu", (unsigned long long)seed);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "seed");
    return cfg;
}

static rlt_env_callbacks mi_callbacks(mi_world *w, const rlt_config *cfg) {
    static const float low[1] = {-1.0f}, high[1] = {1.0f};
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = "multi_input";
    CHECK(rlt_config_dict_space(cfg, &cb.obs) == RLT_OK, "dict space");
    w->row_bytes = cb.obs.shape[0];
    int32_t dt = -1;
    int64_t elems = 0;
    CHECK(rlt_config_input_part(cfg, "screen", &w->off_screen, &dt, &elems) == RLT_OK && dt == RLT_DTYPE_U8 &&
              elems == 64, "screen part");
    CHECK(rlt_config_input_part(cfg, "stats", &w->off_stats, &dt, &elems) == RLT_OK && dt == RLT_DTYPE_F32 &&
              elems == 2, "stats part");
    if (w->discrete) cb.act = (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 2, NULL, NULL};
    else cb.act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, low, high};
    cb.max_episode_steps = MI_STEPS;
    cb.user = w;
    cb.reset = mi_reset;
    cb.step = mi_step;
    return cb;
}

static const char *dqn_yaml =
    "algo: dqn\n"
    "train: {total_steps: 4000, batch_size: 32, eval_every: 1000, eval_episodes: 20, progress_every_s: 1000}\n"
    "replay: {capacity: 5000}\n"
    "dqn: {lr: 1.0e-3, gamma: 0.5, learning_starts: 500, train_freq: 1, target_update_every: 100, eps_fraction: 0.3}\n";

static const char *td3_yaml =
    "algo: td3\n"
    "train: {total_steps: 4000, start_steps: 500, batch_size: 64, eval_every: 1000, eval_episodes: 20,"
    " progress_every_s: 1000}\n"
    "replay: {capacity: 5000}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64], gamma: 0.5}\n";

/* Trains one seed; returns the final evaluation's return. */
static double train_one(const char *yaml, int discrete, uint64_t seed, const char *tag) {
    mi_world w;
    memset(&w, 0, sizeof w);
    w.discrete = discrete;
    rlt_config *cfg = make_config(yaml, test_tmpdir(tag), seed);
    rlt_env_callbacks cb = mi_callbacks(&w, cfg);
    rlt_trainer *tr;
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_OK, "%s init: %s", tag, rlt_trainer_errmsg(tr));
    double ret = NAN;
    if (rc == RLT_OK) {
        rc = rlt_trainer_run(tr, NULL, NULL);
        CHECK(rc == RLT_OK, "%s run: %s", tag, rlt_trainer_errmsg(tr));
        rlt_progress p;
        rlt_trainer_progress(tr, &p);
        ret = p.last_eval_return;
        printf("%s seed %llu: final evaluation %.2f (best %.2f), %lld updates, %.1f s\n", tag, (unsigned long long)seed,
               p.last_eval_return, p.best_eval_return, (long long)p.updates, p.elapsed_s);
        CHECK(rlt_agent_allocations_after_init(rlt_trainer_agent(tr)) == 0, "%s: allocations after init", tag);
    }
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return ret;
}


/* ---- the plan, checkpoints, refusals ---- */

static rlt_agent *make_agent(const char *algo_yaml, const char *extra_set, int *rc) {
    rlt_config *cfg = make_config(algo_yaml, test_tmpdir("mi_agent"), 9);
    if (extra_set) CHECK(rlt_config_set(cfg, extra_set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    rlt_space obs, act;
    CHECK(rlt_config_dict_space(cfg, &obs) == RLT_OK, "dict space");
    static const float low[1] = {-1.0f}, high[1] = {1.0f};
    if (strstr(algo_yaml, "dqn")) act = (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 2, NULL, NULL};
    else act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, low, high};
    rlt_agent *ag = NULL;
    *rc = rlt_agent_init(cfg, &obs, &act, &ag);
    rlt_config_free(cfg);
    return ag;
}

static uint64_t entry_bytes(rlt_agent *ag, const char *name) {
    rlt_plan_summary sum;
    const rlt_plan_entry *en;
    rlt_agent_memory_plan(ag, &sum, &en);
    for (int32_t i = 0; i < sum.n_entries; i++)
        if (!strcmp(en[i].name, name)) return en[i].bytes;
    return UINT64_MAX;
}

static void test_plan_entries(void) {
    int rc;
    rlt_agent *ag = make_agent(dqn_yaml, NULL, &rc);
    CHECK(rc == RLT_OK, "dqn agent: %s", rlt_agent_errmsg(ag));
    /* The screen's torso: 8 channels of 6 x 6 (3x3 kernel on 8x8), 32 rows (training) or 1 (acting), fp32. */
    CHECK(entry_bytes(ag, "q.in.screen.conv0.act") == 32u * 8 * 6 * 6 * 4, "q.in.screen.conv0.act");
    CHECK(entry_bytes(ag, "q.in.screen.conv0.dact") == 32u * 8 * 6 * 6 * 4, "q.in.screen.conv0.dact");
    CHECK(entry_bytes(ag, "q.acting.in.screen.conv0.act") == 1u * 8 * 6 * 6 * 4, "acting torso");
    CHECK(entry_bytes(ag, "q.acting.in.screen.conv0.dact") == 0, "acting plans no gradient");
    CHECK(entry_bytes(ag, "q.in.stats.conv0.act") == UINT64_MAX, "a vector has no torso entries");
    /* The head's input: 288 torso features and the 2 stats, per row. */
    CHECK(entry_bytes(ag, "q.cat") == 32u * 290 * 4 && entry_bytes(ag, "q.dcat") == 32u * 290 * 4, "q.cat");
    /* Rows of bytes (64 u8 + 2 f32 = 72 bytes) and their planar floats (66 a row). */
    CHECK(entry_bytes(ag, "batch.obs_rows") == 32u * 72 && entry_bytes(ag, "batch.obs") == 32u * 66 * 4, "batch rows");
    CHECK(entry_bytes(ag, "replay.frame") == 5000u * 72, "replay frames are the rows' bytes: %llu",
          (unsigned long long)entry_bytes(ag, "replay.frame"));
    rlt_agent_free(ag);
    ag = make_agent(td3_yaml, NULL, &rc);
    CHECK(rc == RLT_OK, "td3 agent: %s", rlt_agent_errmsg(ag));
    const char *nets[3] = {"actor", "q1", "q2"};
    char name[64];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.in.screen.conv0.act", nets[i]);
        CHECK(entry_bytes(ag, name) == 64u * 8 * 6 * 6 * 4, "%s", name);
        snprintf(name, sizeof name, "%s.cat", nets[i]);
        /* The critics' heads read the action after the torsos. */
        CHECK(entry_bytes(ag, name) == 64u * (290 + (i ? 1 : 0)) * 4, "%s: %llu", name,
              (unsigned long long)entry_bytes(ag, name));
    }
    rlt_agent_free(ag);
}

static void test_checkpoint(void) {
    int rc;
    rlt_agent *a = make_agent(td3_yaml, "train.start_steps=0", &rc);
    CHECK(rc == RLT_OK, "agent: %s", rlt_agent_errmsg(a));
    if (rc != RLT_OK) return;
    mi_world w;
    memset(&w, 0, sizeof w);
    w.off_stats = 64;
    w.row_bytes = 72;
    static unsigned char obs[64 * 72], next[64 * 72];
    float act[64], rew[64];
    uint8_t term[64] = {0};
    mi_state st = {.rng = 3};
    for (int i = 0; i < 64; i++) {
        mi_draw(&w, &st, obs + i * 72);
        mi_draw(&w, &st, next + i * 72);
        act[i] = (float)(2.0 * mi_rand(&st.rng) - 1.0);
        rew[i] = -act[i] * act[i];
    }
    CHECK(rlt_agent_observe(a, obs, act, rew, next, term, NULL, 64) == RLT_OK, "observe: %s", rlt_agent_errmsg(a));
    int32_t done = 0;
    for (int k = 0; k < 4; k++) CHECK(rlt_agent_update(a, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(a));
    char path[800];
    snprintf(path, sizeof path, "%s/mi.ckpt", test_tmpdir("mi_ckpt"));
    CHECK(rlt_agent_save(a, path) == RLT_OK, "save: %s", rlt_agent_errmsg(a));
    float pa[8], pb[8];
    CHECK(rlt_agent_act(a, obs, 8, 0, pa) == RLT_OK, "act: %s", rlt_agent_errmsg(a));
    rlt_agent *b = make_agent(td3_yaml, "train.start_steps=0", &rc);
    CHECK(rlt_agent_load(b, path) == RLT_OK, "load: %s", rlt_agent_errmsg(b));
    CHECK(rlt_agent_act(b, obs, 8, 0, pb) == RLT_OK && memcmp(pa, pb, sizeof pa) == 0,
          "the loaded agent acts as the saved one (%g vs %g)", pa[0], pb[0]);
    rlt_agent_free(b);
    /* Another input name with the same sizes: every tensor fits, the network description refuses it. */
    b = make_agent(td3_yaml, "network.inputs=[{name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 8, kernel: 3}]},"
                   " {name: vitals, shape: [2]}]", &rc);
    CHECK(rc == RLT_OK, "agent with renamed input: %s", rlt_agent_errmsg(b));
    rc = rlt_agent_load(b, path);
    CHECK(rc == RLT_ECHECKPOINT && strstr(rlt_agent_errmsg(b), "name: stats") && strstr(rlt_agent_errmsg(b), "name: vitals"),
          "a checkpoint of other inputs is refused by name: rc %d, %s", rc, rlt_agent_errmsg(b));
    rlt_agent_free(b);
    /* Another torso (the same parameter count is not needed: the description is checked first). */
    b = make_agent(td3_yaml, "network.inputs=[{name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 8, kernel: 3, "
                   "pad: 1}]}, {name: stats, shape: [2]}]", &rc);
    rc = rlt_agent_load(b, path);
    CHECK(rc == RLT_ECHECKPOINT && strstr(rlt_agent_errmsg(b), "pad: 1"), "another torso is refused: %s",
          rlt_agent_errmsg(b));
    rlt_agent_free(b);
    /* A NaN in a float part is refused where it enters, naming the input. */
    float nan = NAN;
    memcpy(obs + 72 + 64 + 4, &nan, 4);
    CHECK(rlt_agent_act(a, obs, 2, 0, pa) == RLT_EINVAL && strstr(rlt_agent_errmsg(a), "input 'stats' element 1"),
          "a NaN part: %s", rlt_agent_errmsg(a));
    rlt_agent_free(a);
}

/* A config that must be refused with `needle` in the message (file:line:key). */
static void expect_config_error(const char *yaml, const char *needle) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    int rc = rlt_config_load_string(cfg, yaml, "bad.yaml");
    if (rc == RLT_OK) rc = rlt_config_validate(cfg);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_config_errmsg(cfg), needle), "want '%s': rc %d, %s", needle, rc,
          rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
}

static void test_refusals(void) {
    const char *head = "algo: dqn\nnetwork:\n  inputs:\n";
    char y[600];
#define BAD(body, needle) (snprintf(y, sizeof y, "%s%s", head, body), expect_config_error(y, needle))
    BAD("    - {name: screen}\n", "bad.yaml:4:7: key 'network.inputs[0]': is missing 'shape'");
    BAD("    - {name: a, shape: [2], colour: red}\n", "bad.yaml:4:29: key 'network.inputs[0].colour': unknown key");
    BAD("    - {name: a, shape: [2], dtype: f64}\n", "key 'network.inputs[0].dtype': 'f64' is not one of u8|f32");
    BAD("    - {name: a, shape: [2, 3]}\n", "key 'network.inputs[0].shape': has 2 entries");
    BAD("    - {name: a, shape: [0]}\n", "must be an integer in [1, 65536]");
    BAD("    - {name: 'a b', shape: [2]}\n", "'a b' is not a valid input name");
    BAD("    - {name: a, shape: [3], torso: minatar}\n", "bad.yaml:4:5: key 'network.inputs': input 'a' is a vector");
    BAD("    - {name: a, shape: [3]}\n    - {name: a, shape: [1, 4, 4]}\n", "input [1] is named 'a' like input [0]");
    BAD("    - {name: a, shape: [1, 4, 4], torso: [{out: 4}]}\n", "key 'network.inputs[0].torso[0]': is missing 'kernel'");
    BAD("    - {name: a, shape: [1, 4, 4], torso: [{out: 1, kernel: 1}, {out: 1, kernel: 1}, {out: 1, kernel: 1}, {out: 1, kernel: 1}, {out: 1, kernel: 1}]}\n    - {name: b, shape: [1, 4, 4], torso: [{out: 1, kernel: 1}, {out: 1, kernel: 1}, {out: 1, kernel: 1}, {out: 1, kernel: 1}]}\n", "has 9 convolution layers over all its torsos");
    BAD("    []\n", "key 'network.inputs': is an empty list");
    expect_config_error("network:\n  conv: minatar\n  inputs: [{name: a, shape: [1, 4, 4]}]\n",
                        "bad.yaml:2:3: key 'network.conv': a convolutional torso is set beside network.inputs");
#undef BAD
    /* A kernel larger than its image is refused at init, naming the input. */
    int rc;
    rlt_agent *ag = make_agent(dqn_yaml, "network.inputs=[{name: tiny, shape: [1, 2, 2], torso: [{out: 4, kernel: 3}]}]", &rc);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_agent_errmsg(ag), "network.inputs 'tiny' torso[0]: kernel 3x3"),
          "kernel too large: %s", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    /* Dict rows are stored as bytes: a float storage type is refused. */
    ag = make_agent(dqn_yaml, "replay.obs_dtype=fp16", &rc);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_agent_errmsg(ag), "replay.obs_dtype") && strstr(rlt_agent_errmsg(ag), "dict"),
          "fp16 replay of dict rows: %s", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    /* The space must be the one network.inputs makes. */
    rlt_config *cfg = make_config(dqn_yaml, test_tmpdir("mi_space"), 1);
    rlt_space box = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {66, 0, 0, 0}, 0, NULL, NULL}, dict;
    rlt_space act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 2, NULL, NULL};
    rc = rlt_agent_init(cfg, &box, &act, &ag);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_agent_errmsg(ag), "declares a dict observation (screen: u8 [1, 8, 8] at byte 0, "
                                      "stats: f32 [2] at byte 64 (72 bytes a row))"),
          "a Box space with network.inputs: %s", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    rlt_config_dict_space(cfg, &dict);
    dict.shape[0] = 68;
    rc = rlt_agent_init(cfg, &dict, &act, &ag);
    CHECK(rc == RLT_EINVAL && strstr(rlt_agent_errmsg(ag), "68 bytes a row"), "a dict of other bytes: %s",
          rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    CHECK(rlt_config_set(cfg, "network.inputs=none") == RLT_OK, "network.inputs=none");
    CHECK(rlt_config_dict_space(cfg, &dict) == RLT_ECONFIG, "no dict space without inputs");
    rlt_config_free(cfg);
}

/* The cast op's uint8 source (the one backend change) against its definition, with strides and a scale. */
static void test_cast_u8(void) {
    static uint8_t src[5 * 13];
    static float dst[5 * 9], scale = 0.5f;
    for (int i = 0; i < 5 * 13; i++) src[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 5 * 9; i++) dst[i] = -7.0f;
    rlt_cast c = {.rows = 5, .cols = 6, .dst = dst, .dst_dtype = RLT_LP_F32, .ldd = 9, .src = src + 2,
                  .src_dtype = RLT_LP_U8, .lds = 13, .scale = &scale};
    CHECK(bk.ops->cast(&bk, &c) == RLT_OK, "cast u8: %s", err.msg);
    int bad = 0;
    for (int r = 0; r < 5; r++)
        for (int j = 0; j < 9; j++) {
            float want = j < 6 ? 0.5f * (float)src[r * 13 + 2 + j] : -7.0f;
            bad += dst[r * 9 + j] != want;
        }
    CHECK(bad == 0, "u8 cast: %d elements wrong (padding columns untouched)", bad);
    c.dst_dtype = RLT_LP_U8;
    CHECK(bk.ops->cast(&bk, &c) == RLT_EINVAL, "u8 is a source type only");
}

static double median3(double a, double b, double c) {
    if (a > b) { double t = a; a = b; b = t; }
    if (b > c) { double t = b; b = c; c = t; }
    if (a > b) { double t = a; a = b; b = t; }
    return b;
}

static void test_dqn_learns(void) {
    double r[3];
    for (int s = 0; s < 3; s++) r[s] = train_one(dqn_yaml, 1, 1 + (uint64_t)s, "mi_dqn");
    double m = median3(r[0], r[1], r[2]);
    printf("dqn: median final evaluation %.2f of 10 (blind to a part: 5)\n", m);
    CHECK(m >= 8.5, "DQN learns from both inputs: median %.2f (threshold 8.5)", m);
}

static void test_td3_learns(void) {
    double r[3];
    for (int s = 0; s < 3; s++) r[s] = train_one(td3_yaml, 0, 1 + (uint64_t)s, "mi_td3");
    double m = median3(r[0], r[1], r[2]);
    printf("td3: median final evaluation %.2f (blind to a part: -3.3, random -6.7, perfect 0)\n", m);
    CHECK(m >= -1.0, "TD3 learns from both inputs: median %.2f (threshold -1.0)", m);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend: %s", err.msg);
    if (!only || !strcmp(only, "grad")) test_split_gradient();
    if (!only || !strcmp(only, "unit")) {
        test_cast_u8();
        test_plan_entries();
        test_checkpoint();
        test_refusals();
    }
    if (!only || !strcmp(only, "dqn")) test_dqn_learns();
    if (!only || !strcmp(only, "td3")) test_td3_learns();
    return test_summary("test_multi_input");
}
