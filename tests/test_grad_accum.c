/* test_grad_accum.c: gradient accumulation. With fp32, an update of batch 256 split into N = 4
 * micro-batches of 64 must equal the N = 1 update: the same sampled transitions, the same target noise
 * (drawn by position in the whole batch), losses scaled by 1/N so the accumulated gradient is the full
 * batch's mean. Compared on the accumulated gradients, for TD3 (critic and actor) and DQN. The learning
 * rates are tiny so that the critic's step barely moves the parameters the actor's gradient then sees.
 * Tolerance: the sums are grouped differently (4 partial sums of 64 instead of one of 256), which changes
 * fp32 rounding by a few ulp per element: a relative norm error of 1e-5 allows for that, while a missing
 * 1/N scale (error 3), a wrong micro-batch offset or reused noise (errors of order 1) fail by far.
 * Memory: activations shrink with N, which the plan shows. */
#include <math.h>
#include <string.h>

#include "../agents/td3.h"
#include "../agents/dqn.h"
#include "agent.h"
#include "harness.h"
#include "mem.h"

static rlt_agent *make(const char *algo, int accum) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char set[96];
    snprintf(set, sizeof set, "algo=%s", algo);
    rlt_config_set(cfg, set);
    snprintf(set, sizeof set, "train.grad_accum_steps=%d", accum);
    rlt_config_set(cfg, set);
    rlt_config_set(cfg, "train.batch_size=256");
    rlt_config_set(cfg, "replay.capacity=4000");
    rlt_config_set(cfg, "td3.actor_hidden=[32,32]");
    rlt_config_set(cfg, "td3.critic_hidden=[32,32]");
    rlt_config_set(cfg, "td3.actor_lr=1e-12");
    rlt_config_set(cfg, "td3.critic_lr=1e-12");
    rlt_config_set(cfg, "dqn.lr=1e-12");
    rlt_config_set(cfg, "network.hidden=[32,32]");
    int dqn = !strcmp(algo, "dqn");
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {5, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = dqn ? (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}
                        : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "init %s N=%d: %s", algo, accum, rlt_agent_errmsg(ag));
    rlt_config_free(cfg);
    /* The same 3,000 transitions for every agent. */
    uint32_t s = 7;
    for (int i = 0; i < 3000; i++) {
        float o[5], o2[5], r, a[2];
        int32_t da;
        for (int j = 0; j < 5; j++) {
            s = s * 1664525u + 1013904223u;
            o[j] = (float)(s >> 8) / 16777216.0f - 0.5f;
            o2[j] = o[j] * 0.9f + 0.05f;
        }
        s = s * 1664525u + 1013904223u;
        r = (float)(s >> 8) / 16777216.0f;
        a[0] = r - 0.5f;
        a[1] = 0.5f - r * r;
        da = (int32_t)(s >> 30) % 3;
        uint8_t term = i % 97 == 96, trunc = i % 50 == 49;
        CHECK(rlt_agent_observe(ag, o, dqn ? (void *)&da : (void *)a, &r, o2, &term, &trunc, 1) == RLT_OK, "observe");
    }
    return ag;
}

static double rel_err(const float *a, const float *b, uint64_t n) {
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void check(const char *algo) {
    rlt_agent *one = make(algo, 1), *four = make(algo, 4);
    int dqn = !strcmp(algo, "dqn");
    int variant = dqn ? 0 : 1; /* TD3: the update with the actor step */
    for (int k = 0; k < 3; k++) {
        CHECK(one->algo->update_ops(one, variant) == RLT_OK, "update N=1: %s", rlt_agent_errmsg(one));
        CHECK(four->algo->update_ops(four, variant) == RLT_OK, "update N=4: %s", rlt_agent_errmsg(four));
        uint64_t n = dqn ? dqn_state(one)->n_params : td3_state(one)->n_total;
        const float *g1 = dqn ? dqn_state(one)->grads : td3_state(one)->grads, *g4 = dqn ? dqn_state(four)->grads : td3_state(four)->grads;
        double e = rel_err(g4, g1, n);
        printf("%s update %d: gradient relative error N=4 vs N=1: %.3g\n", algo, k, e);
        CHECK(e < 1e-5, "%s update %d: accumulated gradients differ: %.3g", algo, k, e);
        double norm = 0;
        for (uint64_t i = 0; i < n; i++) norm += (double)g1[i] * g1[i];
        CHECK(norm > 1e-6, "%s: the gradients are not trivially zero", algo);
        if (!dqn) {
            /* The actor's part alone (it is formed after the critic's step). */
            double ea = rel_err(td3_state(four)->grads, td3_state(one)->grads, td3_state(one)->n_actor);
            CHECK(ea < 1e-5, "td3 actor gradients differ: %.3g", ea);
        }
    }
    /* Activations are planned for the micro-batch: the N=4 plan is smaller. */
    uint64_t a1 = plan_region_bytes(&one->plan, "activations", -1), a4 = plan_region_bytes(&four->plan, "activations", -1);
    printf("%s activations: N=1 %llu bytes, N=4 %llu bytes\n", algo, (unsigned long long)a1, (unsigned long long)a4);
    CHECK(a4 * 2 < a1, "%s: activations shrink with N (%llu vs %llu)", algo, (unsigned long long)a4, (unsigned long long)a1);
    rlt_agent_free(one);
    rlt_agent_free(four);
}

int main(void) {
    check("td3");
    check("dqn");
    return test_summary("test_grad_accum");
}
