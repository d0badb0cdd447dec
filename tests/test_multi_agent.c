/* test_multi_agent.c: several agents in one process share nothing. Two TD3 agents of different configs
 * and a DQN agent are driven interleaved, step by step; each must end bit-identical to the same agent
 * driven alone, which fails if any state (RNG, buffers, counters, BLAS scratch) were global. */
#include <string.h>

#include "../agents/td3.h"
#include "../agents/dqn.h"
#include "agent.h"
#include "harness.h"

static rlt_agent *make(int which) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    rlt_config_set(cfg, "train.batch_size=32");
    rlt_config_set(cfg, "train.start_steps=100");
    rlt_config_set(cfg, "replay.capacity=1000");
    rlt_config_set(cfg, "dqn.learning_starts=100");
    rlt_config_set(cfg, "dqn.train_freq=1");
    rlt_config_set(cfg, "dqn.target_update_every=50");
    rlt_config_set(cfg, "network.hidden=[16]");
    if (which == 0) rlt_config_set(cfg, "td3.actor_hidden=[16,16]"), rlt_config_set(cfg, "seed=1");
    if (which == 1) rlt_config_set(cfg, "td3.critic_hidden=[8]"), rlt_config_set(cfg, "seed=2");
    if (which == 2) rlt_config_set(cfg, "algo=dqn");
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = which == 2 ? (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}
                               : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "init %d: %s", which, rlt_agent_errmsg(ag));
    rlt_config_free(cfg);
    return ag;
}

/* One step of agent `which` on a toy task whose state is derived from the step number. */
static void step(rlt_agent *ag, int which, int t) {
    float o[3] = {(float)((t * 7) % 13) / 13.0f, (float)((t * 3) % 5) / 5.0f, 0.1f * which}, o2[3];
    for (int i = 0; i < 3; i++) o2[i] = o[i] * 0.5f;
    float a[1];
    int32_t da;
    void *act = which == 2 ? (void *)&da : (void *)a;
    CHECK(rlt_agent_act(ag, o, 1, 1, act) == RLT_OK, "act");
    float r = which == 2 ? (float)(da == t % 3) : -a[0] * a[0];
    uint8_t term = t % 37 == 36, trunc = 0;
    CHECK(rlt_agent_observe(ag, o, act, &r, o2, &term, &trunc, 1) == RLT_OK, "observe");
    CHECK(rlt_agent_update(ag, NULL) == RLT_OK, "update");
}

static const float *params(rlt_agent *ag, uint64_t *n) {
    *n = ag->algo->param_count(ag) * 4;
    return ag->cfg.algo[0] == 'd' ? dqn_state(ag)->params : td3_state(ag)->params;
}

int main(void) {
    rlt_agent *alone[3], *mixed[3];
    for (int w = 0; w < 3; w++) {
        alone[w] = make(w);
        for (int t = 0; t < 400; t++) step(alone[w], w, t);
    }
    for (int w = 0; w < 3; w++) mixed[w] = make(w);
    for (int t = 0; t < 400; t++)
        for (int w = 0; w < 3; w++) step(mixed[w], w, t);
    for (int w = 0; w < 3; w++) {
        uint64_t na, nm;
        const float *pa = params(alone[w], &na), *pm = params(mixed[w], &nm);
        CHECK(na == nm && memcmp(pa, pm, na) == 0, "agent %d interleaved equals agent %d alone", w, w);
        CHECK(alone[w]->updates > 200, "agent %d trained (%lld updates)", w, (long long)alone[w]->updates);
        rlt_agent_free(alone[w]);
        rlt_agent_free(mixed[w]);
    }
    return test_summary("test_multi_agent");
}
