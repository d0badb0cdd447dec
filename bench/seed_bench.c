/* seed_bench.c: see seed_bench.h. Agents are made one at a time (a mutex), each in its own thread, so every
 * thread-bound state of an agent (the CUDA current device, OpenBLAS's buffer) belongs to the thread that
 * trains it, as in a seed group. Phases are separated by barriers: all made; agent 0 alone; all together. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "seed_bench.h"

typedef struct slot {
    const seed_bench *b;
    int k, n, updates;
    rlt_agent *ag;
    long done;
    double t_start, t_end;
} slot;

static pthread_mutex_t g_make_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t g_made;
static int g_failed;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *seed_thread(void *arg) {
    slot *s = arg;
    pthread_mutex_lock(&g_make_mu);
    s->ag = s->b->setup(s->b->ctx, s->k, 1);
    if (!s->ag) g_failed = 1;
    pthread_mutex_unlock(&g_make_mu);
    pthread_barrier_wait(&g_made);
    if (!__atomic_load_n(&g_failed, __ATOMIC_SEQ_CST)) {
        s->t_start = now_s();
        s->done = s->b->run(s->b->ctx, s->ag, s->updates);
        s->t_end = now_s();
        if (s->done < 0) __atomic_store_n(&g_failed, 1, __ATOMIC_SEQ_CST);
    }
    rlt_agent_free(s->ag);
    return NULL;
}

int seed_bench_main(const seed_bench *b, int n, int updates) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); /* what a seed group sets, before CUDA starts */
    /* One agent as a single run makes it, alone in the process. */
    rlt_agent *one = b->setup(b->ctx, 0, 0);
    if (!one) return 1;
    double t0 = now_s();
    long single_done = b->run(b->ctx, one, updates);
    double single_s = now_s() - t0;
    rlt_agent_free(one);
    if (single_done < 0) return 1;
    slot *s = calloc((size_t)n, sizeof *s);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (!s || !th || pthread_barrier_init(&g_made, NULL, (unsigned)n)) {
        fprintf(stderr, "%s: could not set up %d threads\n", b->name, n);
        return 1;
    }
    for (int k = 0; k < n; k++) {
        s[k] = (slot){.b = b, .k = k, .n = n, .updates = updates};
        if (pthread_create(&th[k], NULL, seed_thread, &s[k]) != 0) {
            fprintf(stderr, "%s: could not start thread %d\n", b->name, k);
            exit(1); /* the others wait at a barrier for it */
        }
    }
    for (int k = 0; k < n; k++) pthread_join(th[k], NULL);
    int rc = g_failed ? 1 : 0;
    if (!rc) {
        double start = s[0].t_start, end = s[0].t_end;
        long total = 0;
        for (int k = 0; k < n; k++) {
            start = s[k].t_start < start ? s[k].t_start : start;
            end = s[k].t_end > end ? s[k].t_end : end;
            total += s[k].done;
        }
        double single = single_done / single_s, together = total / (end - start);
        printf("  single agent     %.0f updates/s  (%ld updates in %.3f s, alone in this process, as a single run)\n",
               single, single_done, single_s);
        printf("  %d agents        %.0f updates/s together  (%d x %d updates in %.3f s, one thread each)\n", n, together,
               n, updates, end - start);
        printf("  ratio            %.2f x the single agent\n", together / single);
    }
    pthread_barrier_destroy(&g_made);
    free(s);
    free(th);
    return rc;
}
