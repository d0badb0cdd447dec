/* test_dqn_replay.c: DQN's store-once replay at episode boundaries. Observations encode (episode, step),
 * so every stored slot can be checked against the transitions actually observed:
 * - a transition's next observation is the frame in the following slot, and after a truncation or a
 *   termination it is the real final observation, never the next episode's first one;
 * - the slot holding a final observation starts no transition (valid 0) and is never sampled;
 * - wrap-around of a small ring keeps every valid slot consistent;
 * - terminated and truncated are kept apart (only terminated is stored as terminal);
 * with float32 and uint8 observations. */
#include <string.h>

#include "../agents/dqn.h"
#include "agent.h"
#include "backend_registry.h"
#include "harness.h"

typedef struct { float obs[4], next[4]; int32_t action; float reward; uint8_t term, trunc; } truth_t;

static void make_obs(float *o, int ep, int t) { o[0] = (float)ep; o[1] = (float)t; o[2] = 0.5f; o[3] = -0.5f; }

static rlt_agent *make_agent(int u8, int capacity) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char set[64];
    rlt_config_set(cfg, "algo=dqn");
    rlt_config_set(cfg, "train.batch_size=16");
    snprintf(set, sizeof set, "replay.capacity=%d", capacity);
    rlt_config_set(cfg, set);
    rlt_config_set(cfg, "network.hidden=[8]");
    rlt_space obs = u8 ? (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {1, 2, 2, 0}, 0, NULL, NULL}
                       : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {4, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "init: %s", rlt_agent_errmsg(ag));
    rlt_config_free(cfg);
    return ag;
}

/* Reads slot s of the replay (CPU backend: the arena is host memory). */
static void read_frame(rlt_agent *ag, int64_t s, int u8, float out[4]) {
    rlt_replay_field *f = &ag->replay.f[DQN_F_FRAME];
    for (int i = 0; i < 4; i++)
        out[i] = u8 ? (float)f->data[s * 4 + i] : ((const float *)f->data)[s * 4 + i];
}

static void to_u8(const float *o, uint8_t *b) { for (int i = 0; i < 4; i++) b[i] = (uint8_t)(o[i] + 1.0f); }

static void check_run(int u8, int capacity, int steps) {
    rlt_agent *ag = make_agent(u8, capacity);
    static truth_t hist[4096];
    int n = 0, ep = 0, t = 0;
    uint32_t lcg = 12345;
    for (int k = 0; k < steps; k++) {
        truth_t *h = &hist[n++];
        make_obs(h->obs, ep, t);
        make_obs(h->next, ep, t + 1);
        lcg = lcg * 1664525u + 1013904223u;
        h->action = (int32_t)(lcg >> 30) % 3;
        h->reward = (float)k;
        /* Episodes end by termination or truncation at varying lengths. */
        h->term = (lcg >> 8) % 7 == 0;
        h->trunc = !h->term && t == 5;
        uint8_t ob[4], nb[4];
        const void *po = h->obs, *pn = h->next;
        if (u8) {
            /* +1 keeps episode 0 step 0 distinct from an unwritten (zero) frame; values stay below 256. */
            to_u8(h->obs, ob);
            to_u8(h->next, nb);
            po = ob;
            pn = nb;
        }
        CHECK(rlt_agent_observe(ag, po, &h->action, &h->reward, pn, &h->term, &h->trunc, 1) == RLT_OK, "observe");
        if (h->term || h->trunc) ep = (ep + 1) % 200, t = 0;
        else t++;
    }
    rlt_replay *rp = &ag->replay;
    int valid = 0, fillers = 0;
    for (int64_t s = 0; s < rp->size; s++) {
        if (!rp->f[DQN_F_VALID].data[s]) { fillers++; continue; }
        valid++;
        float o[4], nx[4];
        read_frame(ag, s, u8, o);
        int32_t next = ((const int32_t *)rp->f[DQN_F_NEXT].data)[s];
        CHECK(next == (s + 1) % rp->capacity, "next slot of %lld is %d", (long long)s, next);
        read_frame(ag, next, u8, nx);
        float off = u8 ? 1.0f : 0.0f;
        /* Find the observed transition this slot holds (the latest with that observation). */
        const truth_t *m = NULL;
        for (int i = n - 1; i >= 0 && !m; i--)
            if (hist[i].obs[0] + off == o[0] && hist[i].obs[1] + off == o[1]) m = &hist[i];
        CHECK(m != NULL, "slot %lld holds an observed observation (%g, %g)", (long long)s, o[0], o[1]);
        if (!m) continue;
        CHECK(nx[0] == m->next[0] + off && nx[1] == m->next[1] + off,
              "slot %lld: next observation (%g, %g) is the real one (%g, %g)", (long long)s, nx[0], nx[1],
              m->next[0] + off, m->next[1] + off);
        CHECK(((const int32_t *)rp->f[DQN_F_ACTION].data)[s] == m->action, "action");
        CHECK(((const float *)rp->f[DQN_F_REWARD].data)[s] == m->reward, "reward");
        CHECK(((const float *)rp->f[DQN_F_TERM].data)[s] == (m->term ? 1.0f : 0.0f),
              "only terminated is terminal (slot %lld, term %d trunc %d)", (long long)s, m->term, m->trunc);
    }
    CHECK(valid > 0 && fillers > 0, "valid %d fillers %d", valid, fillers);
    CHECK(rp->size == (steps < capacity ? rp->size : capacity), "size");
    /* Sampling never returns a slot that starts no transition. */
    int32_t idx[512];
    for (int64_t c = 0; c < 50; c++) {
        rlt_sample_spec s = {.size = &rp->size, .valid = rp->f[DQN_F_VALID].data, .seed = 9, .stream = 2, .batch = 512,
                             .counter = &c};
        CHECK(ag->bk.ops->gather_fields(&ag->bk, idx, 512, &s, 0, NULL) == RLT_OK, "sample");
        for (int i = 0; i < 512; i++) CHECK(rp->f[DQN_F_VALID].data[idx[i]], "sampled slot %d is valid", idx[i]);
    }
    /* And updates run on it. */
    ag->env_steps = 1 << 20;
    int32_t done;
    CHECK(ag->algo->update_ops(ag, 0) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
    (void)done;
    rlt_agent_free(ag);
}

static void check_sampling_uniform(void) {
    /* Over a mask with every third slot invalid, samples cover exactly the valid slots, evenly. */
    rlt_backend bk;
    rlt_err e;
    CHECK(rlt_backend_open(&bk, &e, "cpu", 1, NULL, 0) == RLT_OK, "cpu");
    uint8_t valid[30];
    for (int i = 0; i < 30; i++) valid[i] = i % 3 != 0;
    int64_t size = 30, ctr = 0;
    static int32_t idx[20000];
    int count[30] = {0};
    rlt_sample_spec s = {.size = &size, .valid = valid, .seed = 5, .stream = 2, .batch = 20000, .counter = &ctr};
    CHECK(bk.ops->gather_fields(&bk, idx, 20000, &s, 0, NULL) == RLT_OK, "sample");
    for (int i = 0; i < 20000; i++) count[idx[i]]++;
    for (int s = 0; s < 30; s++) {
        if (!valid[s]) CHECK(count[s] == 0, "invalid slot %d sampled %d times", s, count[s]);
        /* 20 valid slots, 1000 expected each; 5 sigma of a binomial is about 155. */
        else CHECK(count[s] > 845 && count[s] < 1155, "slot %d sampled %d times (expect ~1000)", s, count[s]);
    }
    rlt_backend_close(&bk);
}

int main(void) {
    check_run(0, 4096, 300);  /* no wrap */
    check_run(0, 23, 300);    /* many wraps of a small ring */
    check_run(1, 4096, 300);  /* uint8 frames */
    check_run(1, 17, 300);
    check_sampling_uniform();
    return test_summary("test_dqn_replay");
}
