/* td3_update.c: times the TD3 update on synthetic replay data (default: HalfCheetah sizes, 17-dim
 * observation, 6-dim action, 256-256 networks, batch 256, fp32) and prints updates/s, the arena bytes
 * and, on a GPU, the process's device memory next to the context and arena.
 *
 *   bench_td3_update [--device cpu|cuda:N] [--obs 17] [--act 6] [--hidden 256] [--batch 256]
 *                    [--updates 2000] [--ups 1] [--threads 1] [--replay-host] [--precision fp32|bf16|fp16]
 *                    [--accum N] [--profile REPS] (then the time per op, eagerly: bench/op_profile.h)
 *                    [--seeds N] [--devices N] [--procs N] [--set KEY=VALUE]...
 *
 * --ups K sets train.updates_per_step: each rlt_agent_update call runs K updates back to back.
 * --seeds N makes N agents, one thread each (as a seed group's members), and prints agent 0's rate alone, the
 * N agents' rate together and the ratio (bench/seed_bench.h); each agent runs --updates updates.
 * --devices N times the update on cuda:0 alone, then data-parallel over cuda:0 .. cuda:N-1 with batch / N each
 * (bench/dp_bench.h), in updates of the whole batch per second; --procs N the same with one process per GPU (as
 * torchrun launches a run). --set KEY=VALUE (repeatable) sets a config key after the bench's own, e.g.
 * --set dist.bucket_mb=0 for one gradient average after the backward instead of buckets (docs/data_parallel.md). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "dp_bench.h"
#include "op_profile.h"
#include "rltrain.h"
#include "seed_bench.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 10,000 synthetic transitions: uniform observations and actions, small rewards. */
static void fill_replay(rlt_agent *ag, int obs_dim, int act_dim) {
    enum { N = 10000 };
    float *o = malloc(sizeof(float) * N * obs_dim), *o2 = malloc(sizeof(float) * N * obs_dim);
    float *a = malloc(sizeof(float) * N * act_dim), *r = malloc(sizeof(float) * N);
    uint8_t *term = calloc(N, 1), *trunc = calloc(N, 1);
    srand(1);
    for (long i = 0; i < (long)N * obs_dim; i++) { o[i] = rand() / (float)RAND_MAX - 0.5f; o2[i] = rand() / (float)RAND_MAX - 0.5f; }
    for (long i = 0; i < (long)N * act_dim; i++) a[i] = 2 * (rand() / (float)RAND_MAX) - 1;
    for (long i = 0; i < N; i++) { r[i] = rand() / (float)RAND_MAX; term[i] = i % 500 == 499; }
    rlt_agent_observe(ag, o, a, r, o2, term, trunc, N);
    free(o); free(o2); free(a); free(r); free(term); free(trunc);
}

/* --seeds N: the settings each agent is made with. */
typedef struct td3_seeds {
    rlt_config *cfg;
    rlt_space os, as;
    int ups;
} td3_seeds;

static rlt_agent *seeds_setup(void *ctx, int k, int lanes, int batch_seeds) {
    td3_seeds *t = ctx;
    rlt_agent *ag = seed_bench_agent(t->cfg, &t->os, &t->as, k, lanes, batch_seeds);
    if (!ag) return NULL;
    fill_replay(ag, t->os.shape[0], t->as.shape[0]);
    float losses[RLT_LOSS_COUNT];
    int32_t done;
    for (int i = 0; i < 50; i++) rlt_agent_update(ag, &done); /* warm-up */
    agent_read_losses(ag, losses);
    return ag;
}

static long seeds_run(void *ctx, rlt_agent *ag, int updates) {
    td3_seeds *t = ctx;
    float losses[RLT_LOSS_COUNT];
    int32_t done;
    long total = 0;
    for (int i = 0; i < (updates + t->ups - 1) / t->ups; i++) {
        if (rlt_agent_update(ag, &done) != RLT_OK) { fprintf(stderr, "update: %s\n", rlt_agent_errmsg(ag)); return -1; }
        total += done;
    }
    agent_read_losses(ag, losses); /* waits for the device */
    return total;
}

int main(int argc, char **argv) {
    const char *device = "cpu";
    int obs_dim = 17, act_dim = 6, hidden = 256, batch = 256, updates = 2000, ups = 1, threads = 1, replay_host = 0;
    int accum = 1, profile = 0, seeds = 1, devices = 0, procs = 0;
    const char *precision = "fp32";
    const char *sets[16];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--replay-host")) { replay_host = 1; continue; }
        if (!v) { fprintf(stderr, "%s needs a value\n", a); return 2; }
        if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--obs")) obs_dim = atoi(v);
        else if (!strcmp(a, "--act")) act_dim = atoi(v);
        else if (!strcmp(a, "--hidden")) hidden = atoi(v);
        else if (!strcmp(a, "--batch")) batch = atoi(v);
        else if (!strcmp(a, "--updates")) updates = atoi(v);
        else if (!strcmp(a, "--ups")) ups = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--precision")) precision = v;
        else if (!strcmp(a, "--accum")) accum = atoi(v);
        else if (!strcmp(a, "--profile")) profile = atoi(v);
        else if (!strcmp(a, "--seeds")) seeds = atoi(v);
        else if (!strcmp(a, "--devices")) devices = atoi(v);
        else if (!strcmp(a, "--procs")) devices = atoi(v), procs = 1;
        else if (!strcmp(a, "--set") && n_sets < 16) sets[n_sets++] = v;
        else { fprintf(stderr, "unknown option %s\n", a); return 2; }
        i++;
    }
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "device: \"%s\"\nprecision: %s\ntrain: {batch_size: %d, start_steps: 0, updates_per_step: %d, grad_accum_steps: %d}\n"
             "td3: {actor_hidden: [%d, %d], critic_hidden: [%d, %d]}\nreplay: {capacity: 100000, location: %s}\n"
             "memory: {budget_mb: 4096}\ncpu: {threads: %d}\n",
             device, precision, batch, ups, accum, hidden, hidden, hidden, hidden, replay_host ? "host" : "device", threads);
    if (rlt_config_load_string(cfg, yaml, "bench") != RLT_OK) {
        fprintf(stderr, "config: %s\n", rlt_config_errmsg(cfg));
        return 2;
    }
    for (int k = 0; k < n_sets; k++)
        if (rlt_config_set(cfg, sets[k]) != RLT_OK) {
            fprintf(stderr, "--set %s: %s\n", sets[k], rlt_config_errmsg(cfg));
            return 2;
        }
    rlt_space os = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {obs_dim, 0, 0, 0}, 0, NULL, NULL};
    rlt_space as = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {act_dim, 0, 0, 0}, 0, NULL, NULL};
    if (devices > 0) {
        printf("td3_update %s=%d obs=%d act=%d hidden=%d-%d batch=%d precision=%s replay=%s dist.bucket_mb=%g\n",
               procs ? "procs" : "devices", devices, obs_dim, act_dim, hidden, hidden, batch, precision,
               replay_host ? "host" : "device", cfg->dist.bucket_mb);
        dp_bench b = {"td3_update", cfg, os, as, fill_replay};
        int rc = dp_bench_main(&b, devices, updates, procs);
        rlt_config_free(cfg);
        return rc;
    }
    if (seeds > 1) {
        printf("td3_update seeds=%d device=%s obs=%d act=%d hidden=%d-%d batch=%d updates_per_step=%d precision=%s "
               "accum=%d replay=%s\n", seeds, device, obs_dim, act_dim, hidden, hidden, batch, ups, precision, accum,
               replay_host ? "host" : "device");
        td3_seeds t = {cfg, os, as, ups};
        seed_bench b = {"td3_update", &t, seeds_setup, seeds_run};
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
    fill_replay(ag, obs_dim, act_dim);
    float losses[RLT_LOSS_COUNT];
    int32_t done;
    for (int i = 0; i < 50; i++) rlt_agent_update(ag, &done); /* warm-up */
    agent_read_losses(ag, losses);
    int calls = (updates + ups - 1) / ups;
    double t0 = now_s();
    long total = 0;
    for (int i = 0; i < calls; i++) {
        if (rlt_agent_update(ag, &done) != RLT_OK) { fprintf(stderr, "update: %s\n", rlt_agent_errmsg(ag)); return 1; }
        total += done;
    }
    agent_read_losses(ag, losses); /* waits for the device */
    double dt = now_s() - t0;
    rlt_plan_summary s;
    rlt_agent_memory_plan(ag, &s, NULL);
    printf("td3_update device=%s obs=%d act=%d hidden=%d-%d batch=%d updates_per_step=%d precision=%s accum=%d graphs=%s "
           "replay=%s\n", s.device, obs_dim, act_dim, hidden, hidden, batch, ups, s.precision, accum, ag->graphs ? "yes" : "no",
           replay_host ? "host" : "device");
    printf("  updates/s        %.0f  (%ld updates in %.3f s)\n", total / dt, total, dt);
    printf("  arena            host %.2f MiB, device %.2f MiB\n", s.host_bytes / 1048576.0, s.device_bytes / 1048576.0);
    if (s.device_total) {
        printf("  CUDA context     ~%.1f MiB (measured at init)\n", s.context_bytes / 1048576.0);
        printf("  init             %.3f s\n", t_init);
    }
    if (s.device_total) {
        /* The process's device memory as the driver reports it, next to what the plan accounts for. */
        char cmd[128], line[256];
        snprintf(cmd, sizeof cmd, "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null");
        FILE *p = popen(cmd, "r");
        long pid, mib = -1;
        while (p && fgets(line, sizeof line, p))
            if (sscanf(line, "%ld, %ld", &pid, &mib) == 2 && pid == (long)getpid()) break;
            else mib = -1;
        if (p) pclose(p);
        if (mib >= 0)
            printf("  process GPU mem  %ld MiB (nvidia-smi) vs context %.1f + arena %.1f = %.1f MiB\n", mib,
                   s.context_bytes / 1048576.0, s.device_bytes / 1048576.0,
                   (s.context_bytes + s.device_bytes) / 1048576.0);
        else
            printf("  process GPU mem  n/a (nvidia-smi did not list this process)\n");
    }
    printf("  last losses      critic %.4g actor %.4g\n", 0.5 * (losses[0] + losses[1]), losses[2]);
    rlt_amp_state amp;
    agent_read_amp(ag, &amp);
    if (ag->amp) printf("  fp16 loss scale  %g, skipped steps %lld\n", amp.scale, (long long)amp.skipped);
    printf("  allocations after init: %llu\n", (unsigned long long)rlt_agent_allocations_after_init(ag));
    for (int variant = 0; variant < 2 && profile > 0; variant++)
        if (op_profile_run(ag, variant, profile) != RLT_OK) fprintf(stderr, "profile: %s\n", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    rlt_config_free(cfg);
    return 0;
}
