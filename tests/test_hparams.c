/* test_hparams.c: the agent's hparams block (engine/agent_core.h), from which the update's ops read their scalar
 * hyper-parameters so that one batched update graph reads each population member's own (train/seed_batch.c).
 * - Each op with a *_dev pointer (adam's lr, tau and clipping threshold, td3_target_action's noise and clip,
 *   td3_critic_loss's and dqn_loss's gamma) computes, from the device value, the bits it computes from the same
 *   plain value; the plain value is then not read (it is set wrong on purpose).
 * - An agent's block holds its config's values, converted as the plain descriptor fields are.
 * - A TD3 and a DQN agent whose block is overwritten with another config's values train, bit for bit, as the agent
 *   of that config: the update reads the block, not its own config; an agent left alone trains differently.
 * All on the CPU backend. */
#include <stdlib.h>
#include <string.h>

#include "../agents/dqn.h"
#include "../agents/td3.h"
#include "agent.h"
#include "backend_registry.h"
#include "harness.h"

static rlt_backend bk;
static rlt_err err;

static void fill(float *x, int n, uint32_t s) {
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
}

/* adam with clipping and a Polyak target: plain values against the same values read from "device" floats. */
static void adam_reads_the_block(void) {
    enum { N = 300 };
    static float p[2][N], g[2][N], m[2][N], v[2][N], t[2][N], norm[2];
    for (int k = 0; k < 2; k++) {
        fill(p[k], N, 1), fill(g[k], N, 2), fill(t[k], N, 3);
        memset(m[k], 0, sizeof m[k]), memset(v[k], 0, sizeof v[k]);
    }
    float block[3] = {3e-3f, 0.02f, 0.75f}; /* lr, tau, max_grad_norm (below the gradient's norm: it clips) */
    int64_t step = 1;
    for (int it = 0; it < 3; it++, step++) {
        rlt_adam_step plain = {.p = p[0], .g = g[0], .m = m[0], .v = v[0], .n = N,
                               .hp = {block[0], 0.9f, 0.999f, 1e-8f}, .step = &step, .max_grad_norm = block[2],
                               .norm = &norm[0], .target = t[0], .tau = block[1]};
        rlt_adam_step dev = {.p = p[1], .g = g[1], .m = m[1], .v = v[1], .n = N, .hp = {0.5f, 0.9f, 0.999f, 1e-8f},
                             .step = &step, .max_grad_norm = 100.0f, .norm = &norm[1], .target = t[1], .tau = 0.9f,
                             .lr_dev = &block[0], .tau_dev = &block[1], .max_grad_norm_dev = &block[2]};
        CHECK(bk.ops->adam(&bk, &plain) == RLT_OK && bk.ops->adam(&bk, &dev) == RLT_OK, "adam: %s", err.msg);
        fill(g[0], N, 10 + it), fill(g[1], N, 10 + it);
    }
    CHECK(memcmp(p[0], p[1], sizeof p[0]) == 0 && memcmp(m[0], m[1], sizeof m[0]) == 0 &&
              memcmp(v[0], v[1], sizeof v[0]) == 0 && memcmp(t[0], t[1], sizeof t[0]) == 0 &&
              memcmp(&norm[0], &norm[1], sizeof norm[0]) == 0,
          "adam from the block: the plain values' bits");
}

static void losses_read_the_block(void) {
    enum { R = 64, A = 3 };
    /* Target smoothing. */
    static float a[2][R * A];
    fill(a[0], R * A, 4);
    memcpy(a[1], a[0], sizeof a[0]);
    int64_t ctr = 5;
    float noise[2] = {0.3f, 0.4f};
    rlt_target_noise tp = {.a = a[0], .lda = A, .rows = R, .cols = A, .std = noise[0], .clip = noise[1], .seed = 9,
                           .stream = 2, .counter = &ctr};
    rlt_target_noise td = tp;
    td.a = a[1], td.std = 2.0f, td.clip = 0.01f, td.std_dev = &noise[0], td.clip_dev = &noise[1];
    CHECK(bk.ops->td3_target_action(&bk, &tp) == RLT_OK && bk.ops->td3_target_action(&bk, &td) == RLT_OK, "noise");
    CHECK(memcmp(a[0], a[1], sizeof a[0]) == 0, "target noise from the block: the plain values' bits");
    /* Both losses' gamma. */
    static float q1[R], q2[R], qt1[R], qt2[R], r[R], term[R], y[2][R], d1[2][R], d2[2][R], l1[2], l2[2];
    fill(q1, R, 5), fill(q2, R, 6), fill(qt1, R, 7), fill(qt2, R, 8), fill(r, R, 9);
    for (int i = 0; i < R; i++) term[i] = i % 7 == 0;
    float gamma = 0.93f;
    for (int k = 0; k < 2; k++) {
        rlt_td3_loss l = {.y = y[k], .dq1 = d1[k], .dq2 = d2[k], .loss1 = &l1[k], .loss2 = &l2[k], .q1 = q1, .q2 = q2,
                          .qt1 = qt1, .qt2 = qt2, .r = r, .term = term, .n = R, .gamma = k ? 0.1f : gamma,
                          .grad_scale = 1.0f, .gamma_dev = k ? &gamma : NULL};
        CHECK(bk.ops->td3_critic_loss(&bk, &l) == RLT_OK, "td3_critic_loss");
    }
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0 && memcmp(d1[0], d1[1], sizeof d1[0]) == 0 &&
              memcmp(d2[0], d2[1], sizeof d2[0]) == 0 && l1[0] == l1[1] && l2[0] == l2[1],
          "td3_critic_loss from the block: the plain gamma's bits");
    static float q[R * A], qn[R * A], qo[R * A], dq[2][R * A], ql[2];
    static int32_t act[R];
    fill(q, R * A, 11), fill(qn, R * A, 12), fill(qo, R * A, 13);
    for (int i = 0; i < R; i++) act[i] = i % A;
    for (int k = 0; k < 2; k++) {
        rlt_q_loss l = {.y = y[k], .dq = dq[k], .lddq = A, .loss = &ql[k], .q = q, .ldq = A, .act = act, .r = r,
                        .term = term, .q_next_target = qn, .q_next_online = qo, .ldqn = A, .n = R, .n_act = A,
                        .gamma = k ? 0.1f : gamma, .huber_delta = 1.0f, .grad_scale = 1.0f,
                        .gamma_dev = k ? &gamma : NULL};
        CHECK(bk.ops->dqn_loss(&bk, &l) == RLT_OK, "dqn_loss");
    }
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0 && memcmp(dq[0], dq[1], sizeof dq[0]) == 0 && ql[0] == ql[1],
          "dqn_loss from the block: the plain gamma's bits");
}

static void block_holds(rlt_agent *ag, const float *want, const char *what) {
    float got[RLT_HP_COUNT];
    CHECK(agent_fetch(ag, got, ag->hparams, sizeof got) == RLT_OK, "fetch");
    CHECK(memcmp(got, want, sizeof got) == 0, "%s: the hparams block holds the config's values", what);
}

static const char *const k_td3_other[] = {"td3.actor_lr=7e-4", "td3.critic_lr=2e-3", "td3.tau=0.0125",
                                          "td3.gamma=0.97", "td3.policy_noise=0.25", "td3.noise_clip=0.4",
                                          "td3.policy_delay=1", NULL};
static const char *const k_td3_base[] = {"td3.policy_delay=1", NULL};

static void td3_params(rlt_agent *ag, float *out) {
    rlt_td3 *t = td3_state(ag);
    CHECK(agent_fetch(ag, out, t->params, t->n_total * 4) == RLT_OK, "fetch params");
    CHECK(agent_fetch(ag, out + t->n_total, t->target, t->n_total * 4) == RLT_OK, "fetch target");
}

static void td3_trains_from_the_block(void) {
    int rc;
    rlt_agent *a = test_td3_synthetic(k_td3_other, &rc), *b = test_td3_synthetic(k_td3_base, &rc),
              *c = test_td3_synthetic(k_td3_base, &rc);
    CHECK(a && b && c, "td3 agents");
    if (!a || !b || !c) return;
    float want[RLT_HP_COUNT];
    memset(want, 0, sizeof want);
    want[RLT_HP_TD3_ACTOR_LR] = (float)7e-4, want[RLT_HP_TD3_CRITIC_LR] = (float)2e-3;
    want[RLT_HP_TD3_TAU] = (float)0.0125, want[RLT_HP_TD3_GAMMA] = (float)0.97;
    want[RLT_HP_TD3_POLICY_NOISE] = (float)0.25, want[RLT_HP_TD3_NOISE_CLIP] = (float)0.4;
    want[RLT_HP_DQN_LR] = (float)a->cfg.dqn.lr, want[RLT_HP_DQN_GAMMA] = (float)a->cfg.dqn.gamma;
    want[RLT_HP_DQN_MAX_GRAD_NORM] = (float)a->cfg.dqn.max_grad_norm;
    block_holds(a, want, "td3");
    /* b runs a's values from its block; c keeps its own. */
    CHECK(agent_put(b, b->hparams, want, sizeof want) == RLT_OK, "write b's block");
    for (int i = 0; i < 40; i++) {
        int32_t done = 0;
        CHECK(rlt_agent_update(a, &done) == RLT_OK && rlt_agent_update(b, &done) == RLT_OK &&
                  rlt_agent_update(c, &done) == RLT_OK, "update");
    }
    uint64_t n = td3_state(a)->n_total;
    float *pa = malloc(2 * n * sizeof(float)), *pb = malloc(2 * n * sizeof(float)), *pc = malloc(2 * n * sizeof(float));
    td3_params(a, pa), td3_params(b, pb), td3_params(c, pc);
    CHECK(a->updates == 40 && b->updates == 40, "40 updates each (%lld)", (long long)a->updates);
    CHECK(memcmp(pa, pb, 2 * n * 4) == 0, "td3: an agent with another config's values in its block trains as that "
          "config's agent, bit for bit");
    CHECK(memcmp(pa, pc, 2 * n * 4) != 0, "td3: the values matter (the agent left alone trains differently)");
    free(pa), free(pb), free(pc);
    rlt_agent_free(a), rlt_agent_free(b), rlt_agent_free(c);
}

/* A DQN agent on 4-float observations and 2 actions, trained on a fixed stream of transitions, one update call
 * per step (its schedule visits each step). */
static rlt_agent *dqn_agent(const char *sets) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, "algo: dqn\nenv: {name: cartpole}\nnetwork: {hidden: [16], conv: none}\n"
                                 "replay: {capacity: 512}\ntrain: {batch_size: 16}\n"
                                 "dqn: {learning_starts: 32, train_freq: 1, target_update_every: 20}\n",
                                 "hp.yaml") == RLT_OK,
          "load: %s", rlt_config_errmsg(cfg));
    if (sets) CHECK(rlt_config_load_string(cfg, sets, "sets.yaml") == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {4, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 2, NULL, NULL};
    rlt_agent *ag = NULL;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "dqn init: %s", ag ? rlt_agent_errmsg(ag) : "");
    rlt_config_free(cfg);
    if (rc != RLT_OK) {
        rlt_agent_free(ag);
        return NULL;
    }
    return ag;
}

static void dqn_step(rlt_agent *ag, int i) {
    float o[4], o2[4], r;
    fill(o, 4, 100 + (uint32_t)i);
    for (int j = 0; j < 4; j++) o2[j] = 0.9f * o[j];
    int32_t a = i % 2;
    r = o[0] > 0 ? 1.0f : -1.0f;
    uint8_t term = i % 50 == 49, trunc = 0;
    int32_t done = 0;
    CHECK(rlt_agent_observe(ag, o, &a, &r, o2, &term, &trunc, 1) == RLT_OK, "observe: %s", rlt_agent_errmsg(ag));
    CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
}

static void dqn_trains_from_the_block(void) {
    rlt_agent *a = dqn_agent("dqn: {lr: 2e-3, gamma: 0.9, max_grad_norm: 0.3}\n"), *b = dqn_agent(NULL),
              *c = dqn_agent(NULL);
    CHECK(a && b && c, "dqn agents");
    if (!a || !b || !c) return;
    float want[RLT_HP_COUNT];
    agent_hparams_values(&a->cfg, want);
    CHECK(want[RLT_HP_DQN_LR] == (float)2e-3 && want[RLT_HP_DQN_GAMMA] == (float)0.9 &&
              want[RLT_HP_DQN_MAX_GRAD_NORM] == (float)0.3, "dqn's values");
    block_holds(a, want, "dqn");
    CHECK(b->cfg.dqn.max_grad_norm > 0, "b clips too (whether to clip is the plain value's)");
    CHECK(agent_put(b, b->hparams, want, sizeof want) == RLT_OK, "write b's block");
    for (int i = 0; i < 300; i++) dqn_step(a, i), dqn_step(b, i), dqn_step(c, i);
    uint64_t n = dqn_state(a)->n_params;
    float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float)), *pc = malloc(n * sizeof(float));
    CHECK(agent_fetch(a, pa, dqn_state(a)->params, n * 4) == RLT_OK &&
              agent_fetch(b, pb, dqn_state(b)->params, n * 4) == RLT_OK &&
              agent_fetch(c, pc, dqn_state(c)->params, n * 4) == RLT_OK, "fetch");
    CHECK(a->updates > 200 && a->updates == b->updates, "updates %lld and %lld", (long long)a->updates,
          (long long)b->updates);
    CHECK(memcmp(pa, pb, n * 4) == 0, "dqn: an agent with another config's values in its block trains as that "
          "config's agent, bit for bit");
    CHECK(memcmp(pa, pc, n * 4) != 0, "dqn: the values matter (the agent left alone trains differently)");
    free(pa), free(pb), free(pc);
    rlt_agent_free(a), rlt_agent_free(b), rlt_agent_free(c);
}

int main(void) {
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend: %s", err.msg);
    adam_reads_the_block();
    losses_read_the_block();
    rlt_backend_close(&bk);
    td3_trains_from_the_block();
    dqn_trains_from_the_block();
    return test_summary("test_hparams");
}
