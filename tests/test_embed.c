/* test_embed.c: a simulator that drives its own loop and calls the agent API (act / observe / update),
 * as a game engine or CARLA-style simulator would. The simulator here is this file's own pendulum (the
 * classic swing-up, written from its equations), not the built-in one. The agent must learn it, and a
 * saved agent loaded into a fresh one must act identically. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

typedef struct { double th, thdot; int t; } sim_pendulum;

static double sim_rand(uint64_t *s) { /* xorshift64*: the simulator's own generator */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void sim_reset(sim_pendulum *p, uint64_t *rng, float obs[3]) {
    p->th = (2 * sim_rand(rng) - 1) * M_PI;
    p->thdot = 2 * sim_rand(rng) - 1;
    p->t = 0;
    obs[0] = (float)cos(p->th); obs[1] = (float)sin(p->th); obs[2] = (float)p->thdot;
}

static float sim_step(sim_pendulum *p, float u, float obs[3]) {
    u = u < -2 ? -2 : (u > 2 ? 2 : u);
    double a = fmod(p->th + M_PI, 2 * M_PI); if (a < 0) a += 2 * M_PI; a -= M_PI;
    double cost = a * a + 0.1 * p->thdot * p->thdot + 0.001 * u * u;
    p->thdot += (15.0 * sin(p->th) + 3.0 * u) * 0.05;
    p->thdot = p->thdot < -8 ? -8 : (p->thdot > 8 ? 8 : p->thdot);
    p->th += p->thdot * 0.05;
    p->t++;
    obs[0] = (float)cos(p->th); obs[1] = (float)sin(p->th); obs[2] = (float)p->thdot;
    return (float)-cost;
}

static double evaluate(rlt_agent *ag, int episodes, uint64_t seed) {
    sim_pendulum p;
    float obs[3], a;
    double total = 0;
    for (int ep = 0; ep < episodes; ep++) {
        sim_reset(&p, &seed, obs);
        while (p.t < 200) {
            CHECK(rlt_agent_act(ag, obs, 1, 0, &a) == RLT_OK, "act");
            total += sim_step(&p, a, obs);
        }
    }
    return total / episodes;
}

int main(void) {
    const char *dir = test_tmpdir("embed");
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg,
                                 "algo: td3\nseed: 3\ntrain: {batch_size: 100, start_steps: 1000}\n"
                                 "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 20000}\n",
                                 "embed.yaml") == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    float low = -2.0f, high = 2.0f;
    rlt_space obs_space = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act_space = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, &low, &high};
    rlt_agent *ag;
    CHECK(rlt_agent_init(cfg, &obs_space, &act_space, &ag) == RLT_OK, "init: %s", rlt_agent_errmsg(ag));

    /* The simulator's loop: 60 episodes of 200 steps = 12,000 steps. Truncation at 200 is not a
     * termination, so terminated is always 0 here. */
    sim_pendulum p;
    uint64_t rng = 12345;
    float obs[3], next[3], a;
    int updates = 0;
    for (int ep = 0; ep < 60; ep++) {
        sim_reset(&p, &rng, obs);
        while (p.t < 200) {
            CHECK(rlt_agent_act(ag, obs, 1, 1, &a) == RLT_OK, "act: %s", rlt_agent_errmsg(ag));
            CHECK(a >= -2.0f && a <= 2.0f, "action within bounds: %g", a);
            float r = sim_step(&p, a, next);
            uint8_t term = 0, trunc = p.t == 200;
            CHECK(rlt_agent_observe(ag, obs, &a, &r, next, &term, &trunc, 1) == RLT_OK, "observe");
            int32_t done;
            CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
            updates += done;
            memcpy(obs, next, sizeof obs);
        }
    }
    CHECK(updates == 12000 - 1000, "updates start after start_steps: %d", updates);
    double ret = evaluate(ag, 10, 999);
    printf("embedded pendulum: mean return %.1f over 10 episodes after 12,000 steps\n", ret);
    /* A random policy scores about -1200; -400 means it learned to swing up and balance most episodes. */
    CHECK(ret >= -400.0, "the embedded agent learned: mean return %.1f", ret);
    CHECK(rlt_agent_allocations_after_init(ag) == 0, "no allocation after init");

    /* Batched act: n observations at once equal n single calls (deterministic policy). BLAS may pick
     * another kernel for another row count, so the sums can differ in the last bits: 1e-5 relative. */
    float batch_obs[5 * 3], batch_act[5], single;
    for (int i = 0; i < 15; i++) batch_obs[i] = (float)sin(i * 0.7);
    CHECK(rlt_agent_act(ag, batch_obs, 5, 0, batch_act) == RLT_OK, "batched act");
    for (int i = 0; i < 5; i++) {
        CHECK(rlt_agent_act(ag, batch_obs + 3 * i, 1, 0, &single) == RLT_OK, "act");
        CHECK(fabsf(single - batch_act[i]) <= 1e-5f * (1.0f + fabsf(single)), "batched act row %d: %.9g vs %.9g", i,
              batch_act[i], single);
    }

    /* Save, load into a fresh agent, identical deterministic actions. */
    char path[600];
    snprintf(path, sizeof path, "%s/agent.ckpt", dir);
    CHECK(rlt_agent_save(ag, path) == RLT_OK, "save: %s", rlt_agent_errmsg(ag));
    rlt_agent *ag2;
    CHECK(rlt_agent_init(cfg, &obs_space, &act_space, &ag2) == RLT_OK, "init 2");
    float other[5];
    CHECK(rlt_agent_act(ag2, batch_obs, 5, 0, other) == RLT_OK, "act 2");
    CHECK(memcmp(other, batch_act, sizeof other) != 0, "a fresh agent acts differently");
    CHECK(rlt_agent_load(ag2, path) == RLT_OK, "load: %s", rlt_agent_errmsg(ag2));
    CHECK(rlt_agent_act(ag2, batch_obs, 5, 0, other) == RLT_OK, "act 2");
    CHECK(memcmp(other, batch_act, sizeof other) == 0, "loaded agent acts identically");
    rlt_agent_free(ag2);

    /* A checkpoint of other sizes is refused and changes nothing. */
    rlt_config *cfg3;
    rlt_config_init(&cfg3);
    rlt_config_set(cfg3, "td3.actor_hidden=[32,32]");
    rlt_agent *ag3;
    CHECK(rlt_agent_init(cfg3, &obs_space, &act_space, &ag3) == RLT_OK, "init 3");
    CHECK(rlt_agent_load(ag3, path) == RLT_ECHECKPOINT, "mismatched sizes refused");
    CHECK(strstr(rlt_agent_errmsg(ag3), "the checkpoint's network is 'actor_hidden: [64, 64]; critic_hidden: [64, 64]' "
                                        "but this config builds 'actor_hidden: [32, 32];") != NULL,
          "clear message naming both networks: %s", rlt_agent_errmsg(ag3));
    rlt_agent_free(ag3);
    /* The same networks on another observation size: the description agrees, the tensor sizes do not. */
    rlt_space obs4 = obs_space;
    obs4.shape[0] = 4;
    CHECK(rlt_agent_init(cfg, &obs4, &act_space, &ag3) == RLT_OK, "init 4");
    CHECK(rlt_agent_load(ag3, path) == RLT_ECHECKPOINT, "mismatched sizes refused");
    CHECK(strstr(rlt_agent_errmsg(ag3), "other sizes") != NULL, "clear message: %s", rlt_agent_errmsg(ag3));
    rlt_agent_free(ag3);
    rlt_config_free(cfg3);

    /* Bad spaces are refused with a message, not a crash. */
    rlt_space img = {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {4, 10, 10, 0}, 0, NULL, NULL};
    rlt_agent *bad;
    CHECK(rlt_agent_init(cfg, &img, &act_space, &bad) == RLT_EINVAL, "td3 refuses image observations");
    rlt_agent_free(bad);
    rlt_agent_free(ag);
    rlt_config_free(cfg);
    return test_summary("test_embed");
}
