/* seed_steps.c: the host side of one environment step for N agents at once, each in its own thread, against one
 * agent alone: what a seed group's members do between batched rounds. Three loops per agent, timed separately:
 *   store   rlt_agent_observe of one transition (TD3 Pendulum sizes: 3-dim observation, 1-dim action, replay on the
 *           device): the staging memcpy and one host-to-device copy per replay field plus one for the size;
 *   act     rlt_agent_act on one row (explore off): a launch of the acting graph and a sync of the agent's stream;
 *   step    both, as a seed acting on its own does each step (no update).
 * Each loop runs --steps times; the figure is the wall time of the slowest agent per step, in microseconds, so N
 * agents at N x one agent's cost means their calls serialise (the driver's lock, one context shared by all).
 *
 *   bench_seed_steps [--device cuda:0] [--agents 1,4,16,64] [--steps 4000]
 *
 * Why: 16 td3_pendulum seeds end to end spend about 185 us per acting round against 50 us for one seed's step
 * (bench/RESULTS.md, seed groups end to end); this tells how much of it is the transition store's CUDA calls. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rltrain.h"

enum { MODE_STORE, MODE_ACT, MODE_STEP, N_MODES, MAX_AGENTS = 256 };

typedef struct worker {
    rlt_agent *ag;
    int mode, steps, rc;
    double seconds;
} worker;

static pthread_barrier_t g_start;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    float obs[3] = {0.1f, -0.2f, 0.3f}, next[3] = {0.2f, -0.1f, 0.25f}, act[1] = {0.5f}, r = -1.0f;
    uint8_t term = 0, trunc = 0;
    pthread_barrier_wait(&g_start);
    double t0 = now_s();
    for (int i = 0; i < w->steps && w->rc == RLT_OK; i++) {
        if (w->mode != MODE_STORE) w->rc = rlt_agent_act(w->ag, obs, 1, 0, act);
        if (w->rc == RLT_OK && w->mode != MODE_ACT)
            w->rc = rlt_agent_observe(w->ag, obs, act, &r, next, &term, &trunc, 1);
    }
    w->seconds = now_s() - t0;
    return NULL;
}

/* The slowest agent's microseconds per step with n agents running the mode at once; -1 on failure. */
static double run(rlt_agent **ags, int n, int mode, int steps) {
    worker w[MAX_AGENTS];
    pthread_t th[MAX_AGENTS];
    pthread_barrier_init(&g_start, NULL, (unsigned)n);
    for (int k = 0; k < n; k++) {
        w[k] = (worker){ags[k], mode, steps, RLT_OK, 0.0};
        pthread_create(&th[k], NULL, worker_main, &w[k]);
    }
    double worst = 0.0;
    int bad = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(th[k], NULL);
        if (w[k].rc != RLT_OK) {
            fprintf(stderr, "agent %d: %s\n", k, rlt_agent_errmsg(ags[k]));
            bad = 1;
        }
        if (w[k].seconds > worst) worst = w[k].seconds;
    }
    pthread_barrier_destroy(&g_start);
    return bad ? -1.0 : 1e6 * worst / steps;
}

int main(int argc, char **argv) {
    const char *device = "cuda:0", *list = "1,4,16,64";
    int steps = 4000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--agents") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_seed_steps [--device cuda:0] [--agents 1,4,16,64] [--steps 4000]\n");
            return 2;
        }
    }
    int counts[16], n_counts = 0, most = 0;
    for (const char *c = list; *c && n_counts < 16;) {
        int v = atoi(c);
        if (v < 1 || v > MAX_AGENTS) {
            fprintf(stderr, "bench_seed_steps: --agents takes counts from 1 to %d\n", MAX_AGENTS);
            return 2;
        }
        counts[n_counts++] = v;
        if (v > most) most = v;
        c = strchr(c, ',');
        if (!c) break;
        c++;
    }
    float low = -2.0f, high = 2.0f;
    rlt_space os = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {3}};
    rlt_space as = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {1}, .low = &low, .high = &high};
    rlt_agent **ags = calloc((size_t)most, sizeof *ags);
    char set[96];
    for (int k = 0; k < most; k++) {
        rlt_config *cfg;
        if (rlt_config_init(&cfg) != RLT_OK) return 1;
        snprintf(set, sizeof set, "device=%s", device);
        const char *sets[] = {"algo=td3", set, "replay.location=device", "replay.capacity=100000",
                              "train.start_steps=0", "memory.budget_mb=4096"};
        for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
            if (rlt_config_set(cfg, sets[i]) != RLT_OK) {
                fprintf(stderr, "%s: %s\n", sets[i], rlt_config_errmsg(cfg));
                return 1;
            }
        snprintf(set, sizeof set, "seed=%d", k + 1);
        rlt_config_set(cfg, set);
        int rc = rlt_agent_init(cfg, &os, &as, &ags[k]);
        rlt_config_free(cfg);
        if (rc != RLT_OK) {
            fprintf(stderr, "agent %d: %s\n", k, ags[k] ? rlt_agent_errmsg(ags[k]) : "no agent");
            return rc == RLT_EDEVICE ? 77 : 1;
        }
    }
    printf("seed_steps device=%s steps=%d (TD3 Pendulum sizes, replay on the device): microseconds per step of the "
           "slowest of N agents, each in its own thread\n", device, steps);
    printf("  %-6s %10s %10s %10s   %s\n", "agents", "store", "act", "step", "(N agents' step / one agent's step)");
    double one[N_MODES] = {0};
    for (int i = 0; i < n_counts; i++) {
        double us[N_MODES];
        for (int m = 0; m < N_MODES; m++) {
            run(ags, counts[i], m, steps / 4 > 0 ? steps / 4 : 1); /* warm-up */
            us[m] = run(ags, counts[i], m, steps);
            if (us[m] < 0) return 1;
            if (counts[i] == 1) one[m] = us[m];
        }
        printf("  %-6d %10.1f %10.1f %10.1f", counts[i], us[MODE_STORE], us[MODE_ACT], us[MODE_STEP]);
        if (one[MODE_STEP] > 0) printf("   %.2fx", us[MODE_STEP] / one[MODE_STEP]);
        printf("\n");
    }
    for (int k = 0; k < most; k++) rlt_agent_free(ags[k]);
    free(ags);
    return 0;
}
