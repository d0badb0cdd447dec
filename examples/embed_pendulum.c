/* embed_pendulum.c: the smallest program that embeds rltrain in a simulator. The simulator (a pendulum
 * swing-up written from its equations) owns the loop; rltrain acts, stores transitions and trains through
 * the agent API of rltrain.h. Build it against an installed rltrain with examples/CMakeLists.txt
 * (find_package) or with pkg-config:
 *
 *     cc embed_pendulum.c $(pkg-config --cflags --libs rltrain) -lm -o embed_pendulum
 *
 * Usage: embed_pendulum [env_steps]   (default 6000: 30 episodes of 200 steps). Prints the memory plan and
 * the mean return of 5 deterministic episodes at the end; a random policy scores about -1200, a trained
 * one about -150 (that takes about 15,000 steps). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rltrain.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- the simulator: not part of rltrain ---- */
typedef struct { double th, thdot; int t; uint64_t rng; } pendulum;

static double pendulum_rand(pendulum *p) { /* xorshift64*: the simulator's own generator */
    p->rng ^= p->rng >> 12; p->rng ^= p->rng << 25; p->rng ^= p->rng >> 27;
    return (double)((p->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void pendulum_observe(const pendulum *p, float obs[3]) {
    obs[0] = (float)cos(p->th); obs[1] = (float)sin(p->th); obs[2] = (float)p->thdot;
}

static void pendulum_reset(pendulum *p, float obs[3]) {
    p->th = (2 * pendulum_rand(p) - 1) * M_PI;
    p->thdot = 2 * pendulum_rand(p) - 1;
    p->t = 0;
    pendulum_observe(p, obs);
}

/* One step of 0.05 s under torque u in [-2, 2]; returns the reward (minus the cost). */
static float pendulum_step(pendulum *p, float u, float obs[3]) {
    double a = fmod(p->th + M_PI, 2 * M_PI);
    if (a < 0) a += 2 * M_PI;
    a -= M_PI;
    double cost = a * a + 0.1 * p->thdot * p->thdot + 0.001 * u * u;
    p->thdot += (15.0 * sin(p->th) + 3.0 * u) * 0.05;
    p->thdot = p->thdot < -8 ? -8 : (p->thdot > 8 ? 8 : p->thdot);
    p->th += p->thdot * 0.05;
    p->t++;
    pendulum_observe(p, obs);
    return (float)-cost;
}

/* ---- the embedding ---- */
static void on_log(void *user, int level, const char *message) {
    (void)user;
    fprintf(stderr, "rltrain[%d]: %s\n", level, message);
}

static int fail(const char *what, int rc, const char *msg) {
    fprintf(stderr, "%s failed: %s (%s)\n%s\n", what, rlt_status_name(rc), rlt_strerror(rc), msg);
    return 1;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 6000;
    if (steps < 200) steps = 200;
    rlt_log_set_callback(on_log, NULL);
    printf("rltrain %s\n", rlt_version_string());

    rlt_config *cfg;
    if (rlt_config_init(&cfg) != RLT_OK) return 1;
    /* Small networks and TD3's paper batch: quick on one CPU core. */
    int rc = rlt_config_load_string(cfg,
                                    "algo: td3\nseed: 7\ndevice: cpu\n"
                                    "train: {batch_size: 100, start_steps: 1000}\n"
                                    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\n"
                                    "replay: {capacity: 20000}\nmemory: {budget_mb: 64}\n",
                                    "embed_pendulum.yaml");
    if (rc != RLT_OK) return fail("config", rc, rlt_config_errmsg(cfg));

    float low = -2.0f, high = 2.0f;
    rlt_space obs_space = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act_space = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, &low, &high};
    rlt_agent *ag;
    rc = rlt_agent_init(cfg, &obs_space, &act_space, &ag);
    if (rc != RLT_OK) {
        fail("agent init", rc, rlt_agent_errmsg(ag));
        rlt_agent_free(ag);
        rlt_config_free(cfg);
        return 1;
    }
    char plan[8192];
    rlt_agent_plan_format(ag, plan, sizeof plan);
    fputs(plan, stdout);

    /* The simulator's loop. Episodes end by the time limit only (truncation): terminated stays 0, so the
     * agent keeps bootstrapping from the last state. */
    pendulum sim = {.rng = 12345};
    float obs[3], next[3], a;
    long updates = 0;
    for (long step = 0; step < steps;) {
        pendulum_reset(&sim, obs);
        double ret = 0;
        while (sim.t < 200 && step < steps) {
            if ((rc = rlt_agent_act(ag, obs, 1, 1, &a)) != RLT_OK) return fail("act", rc, rlt_agent_errmsg(ag));
            float r = pendulum_step(&sim, a, next);
            uint8_t terminated = 0, truncated = sim.t == 200;
            rc = rlt_agent_observe(ag, obs, &a, &r, next, &terminated, &truncated, 1);
            if (rc != RLT_OK) return fail("observe", rc, rlt_agent_errmsg(ag));
            int32_t done;
            if ((rc = rlt_agent_update(ag, &done)) != RLT_OK) return fail("update", rc, rlt_agent_errmsg(ag));
            updates += done;
            memcpy(obs, next, sizeof obs);
            ret += r;
            step++;
        }
        if (sim.t == 200 && (step / 200) % 5 == 0) printf("step %6ld  episode return %8.1f\n", step, ret);
    }

    /* Deterministic episodes on a differently seeded simulator. */
    pendulum eval = {.rng = 999};
    double total = 0;
    for (int ep = 0; ep < 5; ep++) {
        pendulum_reset(&eval, obs);
        while (eval.t < 200) {
            if ((rc = rlt_agent_act(ag, obs, 1, 0, &a)) != RLT_OK) return fail("act", rc, rlt_agent_errmsg(ag));
            total += pendulum_step(&eval, a, obs);
        }
    }
    printf("%ld env steps, %ld updates, %llu allocations after init\n", steps, updates,
           (unsigned long long)rlt_agent_allocations_after_init(ag));
    printf("final return %.1f (mean of 5 deterministic episodes)\n", total / 5);
    rlt_agent_free(ag);
    rlt_config_free(cfg);
    return 0;
}
