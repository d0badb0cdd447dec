/* seed_bench.c: see seed_bench.h. Agents are made one at a time (a mutex), each in its own thread, so every
 * thread-bound state of an agent (the CUDA current device, OpenBLAS's buffer) belongs to the thread that
 * trains it, as in a seed group. Phases are separated by barriers: all made; (batched: agent 0's thread captures
 * the batched graphs); all run; all free. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seed_batch.h"
#include "seed_bench.h"

typedef struct slot {
    const seed_bench *b;
    int k, n, updates, batched;
    rlt_agent *ag;
    struct slot *all;
    long done;
    double t_start, t_end;
} slot;

static pthread_mutex_t g_make_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_next_make;      /* agents are made in order 0, 1, ... (as a seed group makes them), under g_make_mu */
static rlt_arena_span g_span; /* the batched agents' arena span (rlt_config.arena_span), as a group holds it */

rlt_agent *seed_bench_agent(const rlt_config *base, const rlt_space *os, const rlt_space *as, int k, int lanes,
                            int batch_seeds) {
    rlt_agent *ag = NULL;
    char seed[32];
    snprintf(seed, sizeof seed, "seed=%d", k + 1);
    rlt_config *cfg = rlt_config_clone(base);
    if (cfg) {
        cfg->lanes = lanes;
        cfg->batch_seeds = batch_seeds;
        cfg->arena_span = batch_seeds > 1 ? &g_span : NULL;
        cfg->arena_slot = k;
    }
    if (!cfg || rlt_config_set(cfg, seed) != RLT_OK || rlt_agent_init(cfg, os, as, &ag) != RLT_OK) {
        fprintf(stderr, "agent %d: init: %s\n", k, cfg ? rlt_agent_errmsg(ag) : "out of memory");
        rlt_agent_free(ag);
        ag = NULL;
    }
    rlt_config_free(cfg);
    return ag;
}
static pthread_barrier_t g_made, g_captured;
static int g_failed;
static rlt_lockstep *g_ls;
static char g_why[320];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Agent 0's thread, once all are made: the batched graphs and the lock-step that launches them. */
static void capture(slot *s) {
    rlt_agent *agents[SEED_BATCH_MAX];
    for (int k = 0; k < s->n && k < SEED_BATCH_MAX; k++) agents[k] = s->all[k].ag;
    if (seed_batch_capture(agents, s->n, 1, &g_ls, g_why, sizeof g_why) != RLT_OK) {
        fprintf(stderr, "%s: batched graphs: %s\n", s->b->name, g_why);
        __atomic_store_n(&g_failed, 1, __ATOMIC_SEQ_CST);
        return;
    }
    lockstep_attach(g_ls);
}

/* The batched rounds alone between cudaProfilerStart and cudaProfilerStop, for `ncu --profile-from-start off` (the
 * agents' set-up launches thousands of kernels first). The runtime is the CUDA module's: found loaded, never loaded
 * here. Nothing without CUDA. */
static void profiler_mark(int start) {
    static const char *const libs[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        int (*fn)(void) = (int (*)(void))dlsym(h, start ? "cudaProfilerStart" : "cudaProfilerStop");
        if (fn) fn();
        dlclose(h);
        return;
    }
}

static void *seed_thread(void *arg) {
    slot *s = arg;
    /* Agent 0 first: with an arena span it fixes the stride the others are mapped at (rlt_backend.span). */
    for (;;) {
        pthread_mutex_lock(&g_make_mu);
        if (g_next_make == s->k) break;
        pthread_mutex_unlock(&g_make_mu);
        sched_yield();
    }
    g_next_make++;
    /* Batched, the leading agent's graph is all the agents' update: it keeps its own lanes (as a group makes it). */
    s->ag = s->b->setup(s->b->ctx, s->k, s->batched && s->k == 0 ? 0 : 1, s->batched ? s->n : 0);
    if (!s->ag) g_failed = 1;
    pthread_mutex_unlock(&g_make_mu);
    pthread_barrier_wait(&g_made);
    if (s->batched) {
        if (s->k == 0 && g_span.why[0]) fprintf(stderr, "%s: arenas not at one stride: %s\n", s->b->name, g_span.why);
        if (s->k == 0 && !__atomic_load_n(&g_failed, __ATOMIC_SEQ_CST)) capture(s);
        pthread_barrier_wait(&g_captured);
    }
    if (s->batched == 2) { /* agent 0's thread launches the batched graph alone: the GPU's side of a round */
        if (s->k == 0 && !__atomic_load_n(&g_failed, __ATOMIC_SEQ_CST)) {
            rlt_backend *bks[SEED_BATCH_MAX];
            for (int k = 0; k < s->n; k++) bks[k] = &s->all[k].ag->bk;
            lockstep_detach(g_ls);
            profiler_mark(1);
            s->t_start = now_s();
            for (int i = 0; i < s->updates; i++)
                if (s->ag->bk.ops->graph_launch_seeds(bks[0], SEED_BATCH_SLOT0 + i % s->ag->algo->n_variants, bks, s->n)) {
                    fprintf(stderr, "%s: batched launch: %s\n", s->b->name, rlt_agent_errmsg(s->ag));
                    __atomic_store_n(&g_failed, 1, __ATOMIC_SEQ_CST);
                    break;
                }
            /* A fault inside the graph shows at the sync: the rate of a failed run is never printed. */
            if (!__atomic_load_n(&g_failed, __ATOMIC_SEQ_CST) && s->ag->bk.ops->sync(&s->ag->bk)) {
                fprintf(stderr, "%s: batched rounds: %s\n", s->b->name, rlt_agent_errmsg(s->ag));
                __atomic_store_n(&g_failed, 1, __ATOMIC_SEQ_CST);
            }
            s->t_end = now_s();
            profiler_mark(0);
            s->done = (long)s->updates * s->n;
        }
    } else if (!__atomic_load_n(&g_failed, __ATOMIC_SEQ_CST)) {
        s->t_start = now_s();
        s->done = s->b->run(s->b->ctx, s->ag, s->updates);
        s->t_end = now_s();
        if (s->done < 0) __atomic_store_n(&g_failed, 1, __ATOMIC_SEQ_CST);
        if (g_ls) lockstep_leave(g_ls);
    }
    pthread_barrier_wait(&g_captured); /* every agent done before any is freed (the batched graph covers all) */
    /* One at a time, as they were made: under Nsight Compute 2025.3 (ncu) graph executables destroyed from several
     * threads at once hit a double free inside its injection library (seen with ASan on the H100). */
    pthread_mutex_lock(&g_make_mu);
    rlt_agent_free(s->ag);
    pthread_mutex_unlock(&g_make_mu);
    return NULL;
}

/* n agents at once, each its own graphs or (batched) one graph for all; their updates/s together, or -1. */
static double run_group(const seed_bench *b, int n, int updates, int batched) {
    slot *s = calloc((size_t)n, sizeof *s);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    g_failed = 0;
    g_ls = NULL;
    g_next_make = 0;
    memset(&g_span, 0, sizeof g_span);
    g_span.n = n;
    if (!s || !th || n > SEED_BATCH_MAX || pthread_barrier_init(&g_made, NULL, (unsigned)n) ||
        pthread_barrier_init(&g_captured, NULL, (unsigned)n)) {
        fprintf(stderr, "%s: could not set up %d threads\n", b->name, n);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        s[k] = (slot){.b = b, .k = k, .n = n, .updates = updates, .batched = batched, .all = s};
        if (pthread_create(&th[k], NULL, seed_thread, &s[k]) != 0) {
            fprintf(stderr, "%s: could not start thread %d\n", b->name, k);
            exit(1); /* the others wait at a barrier for it */
        }
    }
    for (int k = 0; k < n; k++) pthread_join(th[k], NULL);
    double rate = -1;
    if (!g_failed) {
        double start = s[0].t_start, end = s[0].t_end;
        long total = 0;
        for (int k = 0; k < n; k++) {
            if (batched == 2 && k > 0) break;
            start = s[k].t_start < start ? s[k].t_start : start;
            end = s[k].t_end > end ? s[k].t_end : end;
            total += s[k].done;
        }
        rate = total / (end - start);
    }
    lockstep_free(g_ls);
    g_ls = NULL;
    pthread_barrier_destroy(&g_made);
    pthread_barrier_destroy(&g_captured);
    free(s);
    free(th);
    return rate;
}

int seed_bench_main(const seed_bench *b, int n, int updates) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); /* what a seed group sets, before CUDA starts */
    if (getenv("RLT_SEED_BENCH_BATCHED_ONLY")) { /* for a profiler: the batched graph's rounds alone */
        double batched = run_group(b, n, updates, 2);
        printf("  %d agents        %.0f updates/s together, one batched graph launched from one thread\n", n, batched);
        return batched < 0;
    }
    /* One agent as a single run makes it, alone in the process. */
    rlt_agent *one = b->setup(b->ctx, 0, 0, 0);
    if (!one) return 1;
    double t0 = now_s();
    long single_done = b->run(b->ctx, one, updates);
    double single_s = now_s() - t0;
    int gpu = one->graphs;
    rlt_agent_free(one);
    if (single_done < 0) return 1;
    double single = single_done / single_s;
    double own = run_group(b, n, updates, 0);
    if (own < 0) return 1;
    printf("  single agent     %.0f updates/s  (%ld updates in %.3f s, alone in this process, as a single run)\n", single,
           single_done, single_s);
    printf("  %d agents        %.0f updates/s together, each its own graphs  (%.2f x the single agent)\n", n, own,
           own / single);
    if (gpu && n > 1) {
        double batched = run_group(b, n, updates, 1);
        if (batched < 0) return 1;
        printf("  %d agents        %.0f updates/s together, one batched graph  (%.2f x the single agent)\n", n, batched,
               batched / single);
        double alone = run_group(b, n, updates, 2);
        if (alone < 0) return 1;
        printf("  (the batched graph launched from one thread, no lock-step: %.0f updates/s, %.2f x)\n", alone,
               alone / single);
        printf("  ratio            %.2f x the single agent\n", batched / single);
    } else {
        printf("  ratio            %.2f x the single agent\n", own / single);
    }
    return 0;
}
