/* dqn_update.c: times the DQN update on synthetic replay data and prints updates/s, the arena and, on a
 * GPU, the process's device memory next to the context and arena. Cases, matching bench/dqn_torch.py:
 *   --case mlp     4 -> 120 -> 84 -> 2, batch 128 (CleanRL's CartPole network), float observations
 *   --case nature  4x84x84 uint8 frames, Nature CNN (32@8x8/4, 64@4x4/2, 64@3x3/1, 512), 6 actions, batch 32
 * Both: double DQN, Huber loss, Adam, gradient-norm clip 10, one update per call.
 *   bench_dqn_update [--device cpu|cuda:N] [--case mlp|nature] [--updates N] [--accum N] [--precision fp32|bf16|fp16]
 *                    [--profile REPS] (then the time per op, eagerly: bench/op_profile.h) [--seeds N]
 * --seeds N makes N agents, one thread each (as a seed group's members), and prints agent 0's rate alone, the
 * N agents' rate together and the ratio (bench/seed_bench.h); each agent runs --updates updates. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "op_profile.h"
#include "rng.h"
#include "rltrain.h"
#include "seed_bench.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n random bytes from r's Philox stream (base/rng.h: each caller's own state, where rand()'s one lock made 16 agents
 * filling their image replays at once take minutes), each masked (255: any byte; 63: the MLP's small values). */
static void fill_bytes(rlt_rng *r, unsigned char *p, int64_t n, unsigned mask) {
    for (int64_t j = 0; j < n; j += 16) {
        const rlt_u32x4 v = rlt_philox4x32(r->seed, r->stream, r->ctr++, 0);
        for (int64_t b = 0; b < 16 && j + b < n; b++) p[j + b] = (unsigned char)((v.v[b / 4] >> (8 * (b % 4))) & mask);
    }
}

/* Fills the replay with random transitions (episodes of 500 steps), the same ones for every agent; 0, or -1 after
 * printing why. */
static int fill_replay(rlt_agent *ag, int nature, int n_act) {
    int64_t ob = nature ? 4 * 84 * 84 : 4 * 4;
    unsigned char *o = malloc((size_t)ob), *o2 = malloc((size_t)ob);
    rlt_rng st;
    rlt_rng_init(&st, 1, 0);
    const unsigned mask = nature ? 255u : 63u;
    int fill = nature ? 5000 : 20000, rc = 0;
    for (int i = 0; i < fill && !rc; i++) {
        fill_bytes(&st, o, ob, mask);
        fill_bytes(&st, o2, ob, mask);
        int32_t a = (int32_t)rlt_rng_below(&st, (uint32_t)n_act);
        float r = (float)rlt_rng_below(&st, 3) - 1.0f;
        uint8_t term = i % 500 == 499, trunc = 0;
        if (rlt_agent_observe(ag, o, &a, &r, o2, &term, &trunc, 1) != RLT_OK) {
            fprintf(stderr, "observe: %s\n", rlt_agent_errmsg(ag));
            rc = -1;
        }
    }
    free(o);
    free(o2);
    return rc;
}

/* --seeds N: the settings each agent is made with. */
typedef struct dqn_seeds {
    rlt_config *cfg;
    rlt_space os, as;
    int nature, n_act;
} dqn_seeds;

static rlt_agent *seeds_setup(void *ctx, int k, int lanes, int batch_seeds) {
    dqn_seeds *d = ctx;
    rlt_agent *ag = seed_bench_agent(d->cfg, &d->os, &d->as, k, lanes, batch_seeds);
    if (!ag) return NULL;
    float losses[RLT_LOSS_COUNT];
    if (fill_replay(ag, d->nature, d->n_act) != 0) {
        rlt_agent_free(ag);
        return NULL;
    }
    for (int i = 0; i < 20; i++) agent_run_update(ag, 0);
    agent_read_losses(ag, losses);
    return ag;
}

static long seeds_run(void *ctx, rlt_agent *ag, int updates) {
    float losses[RLT_LOSS_COUNT];
    for (int i = 0; i < updates; i++)
        if (agent_run_update(ag, 0) != RLT_OK) { fprintf(stderr, "update: %s\n", rlt_agent_errmsg(ag)); return -1; }
    agent_read_losses(ag, losses); /* waits for the device */
    return updates;
}

int main(int argc, char **argv) {
    const char *device = "cpu", *which = "mlp", *precision = "fp32";
    int updates = 2000, accum = 1, profile = 0, seeds = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--case")) which = argv[i + 1];
        else if (!strcmp(argv[i], "--updates")) updates = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--accum")) accum = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--precision")) precision = argv[i + 1];
        else if (!strcmp(argv[i], "--profile")) profile = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seeds")) seeds = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    int nature = !strcmp(which, "nature");
    int capacity = nature ? 20000 : 100000, batch = nature ? 32 : 128, n_act = nature ? 6 : 2;
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "algo: dqn\ndevice: \"%s\"\nprecision: %s\ntrain: {batch_size: %d, grad_accum_steps: %d}\nreplay: {capacity: %d}\n"
             "dqn: {learning_starts: 0, train_freq: 1, gradient_steps: 1, target_update_every: 1000000000}\n"
             "network: {hidden: %s, conv: %s}\nmemory: {budget_mb: 8192}\n",
             device, precision, batch, accum, capacity, nature ? "[512]" : "[120, 84]", nature ? "nature" : "none");
    rlt_config *cfg;
    rlt_config_init(&cfg);
    if (rlt_config_load_string(cfg, yaml, "bench") != RLT_OK) {
        fprintf(stderr, "config: %s\n", rlt_config_errmsg(cfg));
        return 2;
    }
    rlt_space os = nature ? (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {4, 84, 84, 0}, 0, NULL, NULL}
                          : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {4, 0, 0, 0}, 0, NULL, NULL};
    rlt_space as = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, n_act, NULL, NULL};
    if (seeds > 1) {
        printf("dqn_update case=%s seeds=%d device=%s batch=%d precision=%s accum=%d\n", which, seeds, device, batch,
               precision, accum);
        dqn_seeds d = {cfg, os, as, nature, n_act};
        seed_bench b = {"dqn_update", &d, seeds_setup, seeds_run};
        int rc = seed_bench_main(&b, seeds, updates);
        rlt_config_free(cfg);
        return rc;
    }
    double t_init = now_s();
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &os, &as, &ag);
    t_init = now_s() - t_init;
    if (rc != RLT_OK) {
        fprintf(stderr, "init: %s\n", rlt_agent_errmsg(ag));
        return rc == RLT_EDEVICE ? 4 : 1;
    }
    if (fill_replay(ag, nature, n_act) != 0) return 1;
    float losses[RLT_LOSS_COUNT];
    for (int i = 0; i < 20; i++) agent_run_update(ag, 0);
    agent_read_losses(ag, losses);
    double t0 = now_s();
    for (int i = 0; i < updates; i++)
        if (agent_run_update(ag, 0) != RLT_OK) { fprintf(stderr, "update: %s\n", rlt_agent_errmsg(ag)); return 1; }
    agent_read_losses(ag, losses); /* waits for the device */
    double dt = now_s() - t0;
    rlt_plan_summary s;
    rlt_agent_memory_plan(ag, &s, NULL);
    printf("dqn_update case=%s device=%s batch=%d precision=%s accum=%d graphs=%s\n", which, s.device, batch, s.precision,
           accum, ag->graphs ? "yes" : "no");
    printf("  updates/s        %.0f  (%d updates in %.3f s)\n", updates / dt, updates, dt);
    printf("  arena            host %.2f MiB, device %.2f MiB (replay %.2f MiB)\n", s.host_bytes / 1048576.0,
           s.device_bytes / 1048576.0, plan_region_bytes(&ag->plan, "replay", -1) / 1048576.0);
    if (s.device_total) {
        char line[256];
        long pid, mib = -1;
        FILE *p = popen("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null", "r");
        while (p && fgets(line, sizeof line, p))
            if (sscanf(line, "%ld, %ld", &pid, &mib) == 2 && pid == (long)getpid()) break;
            else mib = -1;
        if (p) pclose(p);
        printf("  process GPU mem  %ld MiB (nvidia-smi) vs context %.1f + arena %.1f MiB; init %.3f s\n", mib,
               s.context_bytes / 1048576.0, s.device_bytes / 1048576.0, t_init);
    }
    printf("  last loss        %.4g; allocations after init: %llu\n", losses[RLT_LOSS_Q1],
           (unsigned long long)rlt_agent_allocations_after_init(ag));
    if (profile > 0 && op_profile_run(ag, 0, profile) != RLT_OK) fprintf(stderr, "profile: %s\n", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    rlt_config_free(cfg);
    return 0;
}
