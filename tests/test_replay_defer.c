/* test_replay_defer.c: the transition stores a batched seed group holds for its next round (engine/replay.h:
 * replay.defer, train/seed_batch.h), on the CPU backend, whose device memory is host memory: the test runs an agent's
 * list as the group's round does on the GPU (rlt_backend_ops.copy_lists: each entry's bytes, in order).
 * - TD3 (one transition an observe) and DQN agents given a copy list hold every copy of their last observe (TD3: the
 *   five fields and the size; DQN: eight writes and the size) and issue none: the replay's device side does not
 *   change until the list runs, the host mirror (pos, size) does. Once it has run, the replay equals byte for byte
 *   that of an agent of the same config that issued its copies, observing the same transitions.
 * - An observe while copies are still held (no round ran them) issues them first; so does writing a checkpoint
 *   (agent_write_state), whose replay then holds the last transition.
 * - An observe of more rows than the staging holds issues every chunk but the last one's, which it holds; DQN
 *   observing several transitions at once issues all but the last one's.
 * - Without a list nothing is held (the list is the only switch). */
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "harness.h"

#define TO 3
#define TA 1

static rlt_agent *make_agent(int dqn, int capacity) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char set[64];
    snprintf(set, sizeof set, "replay.capacity=%d", capacity);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", set);
    rlt_config_set(cfg, "train.batch_size=8");
    if (dqn) {
        rlt_config_set(cfg, "algo=dqn");
        rlt_config_set(cfg, "network.hidden=[8]");
    } else {
        rlt_config_set(cfg, "td3.actor_hidden=[8]");
        rlt_config_set(cfg, "td3.critic_hidden=[8]");
    }
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {TO, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = dqn ? (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}
                        : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {TA, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    rlt_config_free(cfg);
    CHECK(rc == RLT_OK, "agent: %s", ag ? rlt_agent_errmsg(ag) : "none");
    return rc == RLT_OK ? ag : NULL;
}

/* Transitions k0 .. k0 + n - 1: distinct values, an episode end every 5th. */
static void observe(rlt_agent *ag, int dqn, int k0, int n) {
    float o[300][TO], o2[300][TO], a[300][TA], r[300];
    int32_t ai[300];
    uint8_t term[300], trunc[300] = {0};
    for (int i = 0; i < n; i++) {
        int k = k0 + i;
        for (int j = 0; j < TO; j++) o[i][j] = 0.01f * (float)(k * 7 + j), o2[i][j] = 0.01f * (float)(k * 7 + j + 3);
        a[i][0] = 0.1f * (float)(k % 9) - 0.4f;
        ai[i] = k % 3;
        r[i] = (float)k;
        term[i] = k % 5 == 4;
    }
    CHECK(rlt_agent_observe(ag, o, dqn ? (const void *)ai : (const void *)a, r, o2, term, trunc, n) == RLT_OK,
          "observe: %s", rlt_agent_errmsg(ag));
}

/* What the group's round does for one agent: each held copy's bytes, in order; then the list is empty. */
static void run_list(rlt_copy_list *l) {
    for (int64_t i = 0; i < l->n; i++)
        memcpy((void *)(uintptr_t)l->e[i].dst, (const void *)(uintptr_t)l->e[i].src, l->e[i].bytes);
    l->n = 0;
}

/* 1 when the two agents' replays (every field's ring and the device size) are the same bytes. */
static int same_replay(const rlt_agent *a, const rlt_agent *b) {
    const rlt_replay *x = &a->replay, *y = &b->replay;
    if (x->pos != y->pos || x->size != y->size || *x->size_dev != *y->size_dev) return 0;
    for (int32_t f = 0; f < x->nf; f++)
        if (memcmp(x->f[f].data, y->f[f].data, (size_t)(x->capacity * x->f[f].row_bytes)) != 0) return 0;
    return 1;
}

static void check_algo(int dqn) {
    const char *name = dqn ? "dqn" : "td3";
    const int64_t per = dqn ? 9 : 6; /* copies of one transition */
    rlt_agent *a = make_agent(dqn, 1000), *b = make_agent(dqn, 1000);
    if (!a || !b) {
        rlt_agent_free(a);
        rlt_agent_free(b);
        return;
    }
    rlt_copy_list *l = calloc(1, sizeof *l);
    b->replay.defer = l;
    int k = 0;
    /* One transition at a time, the list run after each, as rounds do. */
    for (int step = 0; step < 12; step++, k++) {
        observe(a, dqn, k, 1);
        observe(b, dqn, k, 1);
        CHECK(l->n == per, "%s step %d: %lld copies held, want %lld", name, step, (long long)l->n, (long long)per);
        CHECK(b->replay.pos == a->replay.pos && b->replay.size == a->replay.size, "%s step %d: the host mirror moves",
              name, step);
        CHECK(!same_replay(a, b), "%s step %d: nothing reaches the replay before the list runs", name, step);
        run_list(l);
        CHECK(same_replay(a, b), "%s step %d: after the list ran, the replay is the issuing agent's", name, step);
    }
    /* A second observe before any round: the first one's copies are issued, the second's held. */
    observe(a, dqn, k, 1);
    observe(b, dqn, k, 1);
    k++;
    observe(a, dqn, k, 1);
    observe(b, dqn, k, 1);
    k++;
    CHECK(l->n == per, "%s: after two observes only the last one's copies are held (%lld)", name, (long long)l->n);
    run_list(l);
    CHECK(same_replay(a, b), "%s: the held copies of an observe were issued by the next one", name);
    /* Several rows in one observe: all but the last chunk (TD3) or transition (DQN) issued, the last held. */
    int many = dqn ? 3 : 300;
    observe(a, dqn, k, many);
    observe(b, dqn, k, many);
    k += many;
    CHECK(l->n == per, "%s: %d rows in one observe hold the last %s's copies only (%lld)", name, many,
          dqn ? "transition" : "chunk", (long long)l->n);
    run_list(l);
    CHECK(same_replay(a, b), "%s: %d rows in one observe", name, many);
    /* A checkpoint while copies are held: written after issuing them. */
    observe(a, dqn, k, 1);
    observe(b, dqn, k, 1);
    k++;
    char path[600];
    snprintf(path, sizeof path, "%s/%s.ckpt", test_tmpdir("tmp_replay_defer"), name);
    CHECK(rlt_agent_save(b, path) == RLT_OK, "%s: save: %s", name, rlt_agent_errmsg(b));
    CHECK(l->n == 0, "%s: the checkpoint issued the held copies first", name);
    CHECK(same_replay(a, b), "%s: the checkpoint's agent holds the last transition", name);
    /* Without a list nothing is held. */
    b->replay.defer = NULL;
    observe(a, dqn, k, 1);
    observe(b, dqn, k, 1);
    CHECK(same_replay(a, b), "%s: without a list every copy is issued", name);
    free(l);
    rlt_agent_free(a);
    rlt_agent_free(b);
}

int main(void) {
    check_algo(0);
    check_algo(1);
    return test_summary("test_replay_defer");
}
