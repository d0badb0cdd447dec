/* dp_bench.c: see dp_bench.h. Each rank's agent is made in its own thread (its CUDA device is that thread's), one
 * at a time; the ranks then run the same number of updates, which meet in their gradient averages, so the wall
 * time of the slowest rank is the run's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend_registry.h"
#include "comm.h"
#include "dp_bench.h"

typedef struct rank_slot {
    const dp_bench *b;
    int k, n, updates;
    rlt_comm *comm;
    double t0, t1;
    long done;
    int failed;
} rank_slot;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t g_ready;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An agent of cfg with `batch`, on device cuda:k, rank k of comm (NULL: alone), replay filled and warmed up. */
static rlt_agent *make_agent(const dp_bench *b, int k, int batch, rlt_comm *comm) {
    char set[64];
    rlt_config *cfg = rlt_config_clone(b->cfg);
    rlt_agent *ag = NULL;
    snprintf(set, sizeof set, "device=cuda:%d", k);
    int rc = cfg ? rlt_config_set(cfg, set) : RLT_ENOMEM;
    snprintf(set, sizeof set, "train.batch_size=%d", batch);
    if (rc == RLT_OK) rc = rlt_config_set(cfg, set);
    if (rc == RLT_OK && comm) {
        cfg->comm = comm;
        cfg->rank = k;
        cfg->n_ranks = rlt_comm_size(comm);
    }
    if (rc == RLT_OK) rc = rlt_agent_init(cfg, &b->os, &b->as, &ag);
    if (rc != RLT_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", b->name, k, ag ? rlt_agent_errmsg(ag) : cfg ? rlt_config_errmsg(cfg) : "no memory");
        rlt_agent_free(ag);
        rlt_config_free(cfg);
        return NULL;
    }
    rlt_config_free(cfg);
    b->fill(ag, b->os.shape[0], b->as.shape[0]);
    int32_t done;
    float losses[RLT_LOSS_COUNT];
    for (int i = 0; i < 20; i++) rlt_agent_update(ag, &done);
    agent_read_losses(ag, losses);
    return ag;
}

static long run_updates(rlt_agent *ag, int updates) {
    int32_t done;
    long total = 0;
    float losses[RLT_LOSS_COUNT];
    for (int i = 0; i < updates; i++) {
        if (rlt_agent_update(ag, &done) != RLT_OK) {
            fprintf(stderr, "update: %s\n", rlt_agent_errmsg(ag));
            return -1;
        }
        total += done;
    }
    agent_read_losses(ag, losses); /* waits for the device */
    return total;
}

static void *rank_thread(void *arg) {
    rank_slot *s = arg;
    int batch = s->b->cfg->train.batch_size;
    pthread_mutex_lock(&g_mu);
    rlt_agent *ag = make_agent(s->b, s->k, batch / s->n, s->comm);
    pthread_mutex_unlock(&g_mu);
    s->failed = !ag;
    pthread_barrier_wait(&g_ready);
    /* A rank that failed cannot take part in the averages: every rank skips the timed phase then. */
    int any = 0;
    rlt_comm_any(s->comm, s->k, s->failed, &any);
    if (!any) {
        s->t0 = now_s();
        s->done = run_updates(ag, s->updates);
        s->t1 = now_s();
        if (s->done < 0) s->failed = 1;
    }
    rlt_agent_free(ag);
    return NULL;
}

int dp_bench_main(const dp_bench *b, int n, int updates) {
    int batch = b->cfg->train.batch_size;
    if (n < 1 || n > RLT_COMM_MAX_RANKS || batch % n) {
        fprintf(stderr, "%s: --devices %d: 1 to %d devices that divide the batch (%d)\n", b->name, n, RLT_COMM_MAX_RANKS, batch);
        return 2;
    }
    /* One device alone, the whole batch. */
    rlt_agent *one = make_agent(b, 0, batch, NULL);
    if (!one) return 1;
    double t0 = now_s();
    long single = run_updates(one, updates);
    double single_s = now_s() - t0;
    rlt_agent_free(one);
    if (single < 0) return 1;
    /* N ranks. */
    char why[512];
    const rlt_backend_ops *ops = rlt_backend_cuda_ops(why, sizeof why);
    if (!ops || !ops->comm_init) {
        fprintf(stderr, "%s: the CUDA module: %s\n", b->name, why);
        return 1;
    }
    int32_t idx[RLT_COMM_MAX_RANKS];
    void *devs[RLT_COMM_MAX_RANKS] = {0};
    for (int k = 0; k < n; k++) idx[k] = k;
    rlt_err e = {0};
    if (ops->comm_init(n, idx, devs, &e) != RLT_OK) {
        fprintf(stderr, "%s: %s\n", b->name, e.msg);
        return 1;
    }
    rlt_comm *comm = rlt_comm_create(n);
    rlt_comm_set_device(comm, devs, ops->comm_abort);
    rank_slot s[RLT_COMM_MAX_RANKS];
    pthread_t th[RLT_COMM_MAX_RANKS];
    pthread_barrier_init(&g_ready, NULL, (unsigned)n);
    for (int k = 0; k < n; k++) {
        s[k] = (rank_slot){.b = b, .k = k, .n = n, .updates = updates, .comm = comm};
        pthread_create(&th[k], NULL, rank_thread, &s[k]);
    }
    int failed = 0;
    double start = 0, end = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(th[k], NULL);
        failed |= s[k].failed;
        start = k == 0 || s[k].t0 < start ? s[k].t0 : start;
        end = k == 0 || s[k].t1 > end ? s[k].t1 : end;
    }
    pthread_barrier_destroy(&g_ready);
    for (int k = 0; k < n; k++) ops->comm_destroy(devs[k]);
    rlt_comm_free(comm);
    if (failed) return 1;
    double r1 = single / single_s, rn = s[0].done / (end - start);
    printf("  one device       %.0f updates/s  (batch %d, %ld updates in %.3f s)\n", r1, batch, single, single_s);
    printf("  %d device%s      %.0f updates/s  (batch %d = %d x %d, NCCL average in each rank's graph, %ld updates in "
           "%.3f s)\n", n, n == 1 ? " " : "s", rn, batch, n, batch / n, s[0].done, end - start);
    printf("  ratio            %.2f x one device\n", rn / r1);
    return 0;
}
