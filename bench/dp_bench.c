/* dp_bench.c: see dp_bench.h. Each rank's agent is made in its own thread (its CUDA device is that thread's), one
 * at a time; only then do the ranks warm up and run the same number of updates, which meet in their gradient
 * averages, so the wall time of the slowest rank is the run's. (Warming up while the others wait for their turn to
 * be made deadlocked: rank 0's first average waited for a rank 1 that could not start.) With processes the parent
 * starts N children before it touches CUDA, then times one device alone itself. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_registry.h"
#include "comm.h"
#include "dp_bench.h"

#define DP_TIMEOUT_S 120.0 /* every wait on another rank (dist.timeout_s of the bench) */

typedef struct rank_slot {
    const dp_bench *b;
    int k, n, updates;
    rlt_comm *comm;
    double t0, t1;
    long done;
    int failed;
} rank_slot;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The ranks are CPU backends (--device cpu: the host comm averages; a check of the bench's own logic without a
 * GPU), else GPUs. */
static int on_cpu(const dp_bench *b) { return b->cfg->device.kind == RLT_DEVICE_CPU; }

/* An agent of cfg with `batch`, on device cuda:k (or the CPU), rank k of comm (NULL: alone), replay filled. */
static rlt_agent *make_agent(const dp_bench *b, int k, int batch, rlt_comm *comm) {
    char set[64];
    rlt_config *cfg = rlt_config_clone(b->cfg);
    rlt_agent *ag = NULL;
    if (on_cpu(b)) snprintf(set, sizeof set, "device=cpu");
    else snprintf(set, sizeof set, "device=cuda:%d", k);
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
    if (agent_read_losses(ag, losses) != RLT_OK) { /* waits for the device */
        fprintf(stderr, "update: %s\n", rlt_agent_errmsg(ag));
        return -1;
    }
    return total;
}

/* A rank's life once its comm exists: its agent (made under g_mu with threads: one at a time), then, when every
 * rank has one, 20 warm-up updates and the timed ones. A rank that failed cannot take part in the averages: every
 * rank learns it at the agreement and skips the rest. */
static void rank_body(rank_slot *s, int serialise) {
    int batch = s->b->cfg->train.batch_size;
    if (serialise) pthread_mutex_lock(&g_mu);
    rlt_agent *ag = make_agent(s->b, s->k, batch / s->n, s->comm);
    if (serialise) pthread_mutex_unlock(&g_mu);
    s->failed = !ag;
    int32_t any = 0;
    if (rlt_comm_agree(s->comm, s->k, s->failed, &any, "the agents' set-up") != RLT_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", s->b->name, s->k, rlt_comm_errmsg(s->comm));
        any = s->failed = 1;
    }
    if (!any && run_updates(ag, 20) < 0) s->failed = 1;
    if (!any && rlt_comm_agree(s->comm, s->k, s->failed, &any, "the warm-up") != RLT_OK) any = s->failed = 1;
    if (!any) {
        s->t0 = now_s();
        s->done = run_updates(ag, s->updates);
        s->t1 = now_s();
        if (s->done < 0) s->failed = 1;
    }
    if (s->failed) rlt_comm_abort(s->comm);
    rlt_agent_free(ag);
}

static void *rank_thread(void *arg) {
    rank_body(arg, 1);
    return NULL;
}

/* The one-device baseline: updates/s of the whole batch, or a negative number. */
static double single_rate(const dp_bench *b, int updates, long *done, double *secs) {
    rlt_agent *one = make_agent(b, 0, b->cfg->train.batch_size, NULL);
    if (!one) return -1;
    run_updates(one, 20);
    double t0 = now_s();
    *done = run_updates(one, updates);
    *secs = now_s() - t0;
    rlt_agent_free(one);
    return *done < 0 ? -1 : *done / *secs;
}

static int ranks_as_threads(const dp_bench *b, int n, int updates, rank_slot *s) {
    char why[512] = "";
    const rlt_backend_ops *ops = on_cpu(b) ? NULL : rlt_backend_cuda_ops(why, sizeof why);
    if (!on_cpu(b) && (!ops || !ops->comm_init)) {
        fprintf(stderr, "%s: the CUDA module: %s\n", b->name, why);
        return 1;
    }
    int32_t idx[RLT_COMM_MAX_RANKS];
    void *devs[RLT_COMM_MAX_RANKS] = {0};
    for (int k = 0; k < n; k++) idx[k] = k;
    rlt_err e = {0};
    rlt_comm_init_desc d = {.mode = RLT_COMM_INIT_RANKS, .world = n, .first_rank = 0, .n = n, .devices = idx,
                            .timeout_s = DP_TIMEOUT_S};
    if (ops && ops->comm_init(&d, devs, &e) != RLT_OK) {
        fprintf(stderr, "%s: %s\n", b->name, e.msg);
        return 1;
    }
    if (d.note[0]) printf("  (%s)\n", d.note);
    rlt_comm *comm = rlt_comm_create(n);
    rlt_comm_set_timeout(comm, DP_TIMEOUT_S);
    if (ops) rlt_comm_set_device(comm, devs, ops->comm_abort);
    pthread_t th[RLT_COMM_MAX_RANKS];
    for (int k = 0; k < n; k++) {
        s[k] = (rank_slot){.b = b, .k = k, .n = n, .updates = updates, .comm = comm};
        pthread_create(&th[k], NULL, rank_thread, &s[k]);
    }
    int failed = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(th[k], NULL);
        failed |= s[k].failed;
    }
    for (int k = 0; ops && k < n; k++) ops->comm_destroy(devs[k]);
    rlt_comm_free(comm);
    return failed;
}

/* Child k of --procs: rank k of n over loopback port `port`, on cuda:k. */
static int rank_process(const dp_bench *b, int k, int n, int updates, int port, rank_slot *out) {
    rlt_comm_net net = {.rank = k, .world = n, .host = "127.0.0.1", .port = port, .timeout_s = DP_TIMEOUT_S};
    rlt_err e = {0};
    rlt_comm *comm = NULL;
    if (rlt_comm_connect(&net, &comm, &e) != RLT_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", b->name, k, e.msg);
        return 1;
    }
    if (on_cpu(b)) { /* CPU ranks: the host comm is all they need */
        *out = (rank_slot){.b = b, .k = k, .n = n, .updates = updates, .comm = comm};
        rank_body(out, 0);
        rlt_comm_free(comm);
        return out->failed;
    }
    char why[512];
    const rlt_backend_ops *ops = rlt_backend_cuda_ops(why, sizeof why);
    int32_t idx[1] = {k};
    void *mine = NULL, *devs[RLT_COMM_MAX_RANKS] = {0};
    rlt_comm_init_desc d = {.mode = RLT_COMM_INIT_ID, .world = n, .first_rank = k, .n = 1, .devices = idx,
                            .timeout_s = DP_TIMEOUT_S};
    int rc = ops && ops->comm_init ? RLT_OK : rlt_err_set(&e, RLT_EDEVICE, __FILE__, __LINE__, "the CUDA module: %s", why);
    if (rc == RLT_OK && k == 0) rc = ops->comm_init(&d, NULL, &e);
    if (rc == RLT_OK && rlt_comm_bcast(comm, k, d.id, sizeof d.id, "NCCL's unique id") != RLT_OK)
        rc = rlt_err_set(&e, RLT_ERUNTIME, __FILE__, __LINE__, "%s", rlt_comm_errmsg(comm));
    d.mode = RLT_COMM_INIT_RANKS;
    if (rc == RLT_OK) rc = ops->comm_init(&d, &mine, &e);
    if (rc != RLT_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", b->name, k, e.msg);
        rlt_comm_free(comm);
        return 1;
    }
    if (d.note[0] && k == 0) printf("  (%s)\n", d.note);
    devs[k] = mine;
    rlt_comm_set_device(comm, devs, ops->comm_abort);
    *out = (rank_slot){.b = b, .k = k, .n = n, .updates = updates, .comm = comm};
    rank_body(out, 0);
    ops->comm_destroy(mine);
    rlt_comm_free(comm);
    return out->failed;
}

/* A free loopback port (the kernel's choice, released for rank 0 to take at once). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0
                   ? ntohs(a.sin_port) : -1;
    if (fd >= 0) close(fd);
    return port;
}

static int ranks_as_processes(const dp_bench *b, int n, int updates, rank_slot *s) {
    rank_slot *shared = mmap(NULL, sizeof(rank_slot) * (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int port = free_port();
    if (shared == MAP_FAILED || port < 0) {
        fprintf(stderr, "%s: no shared memory or loopback port for the ranks\n", b->name);
        return 1;
    }
    pid_t pid[RLT_COMM_MAX_RANKS];
    fflush(NULL);
    for (int k = 0; k < n; k++) {
        pid[k] = fork();
        if (pid[k] == 0) _exit(rank_process(b, k, n, updates, port, &shared[k]));
    }
    /* Every child ends by itself within its timeouts; past them and a margin it is killed, never waited on. */
    int failed = 0;
    double dl = now_s() + DP_TIMEOUT_S * 3 + 60;
    for (int k = 0; k < n; k++) {
        int st = 0;
        pid_t w;
        while ((w = waitpid(pid[k], &st, WNOHANG)) == 0 && now_s() < dl) usleep(20000);
        if (w == 0) {
            fprintf(stderr, "%s: rank %d did not end in time: killed\n", b->name, k);
            kill(pid[k], SIGKILL);
            waitpid(pid[k], &st, 0);
        }
        failed |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    for (int k = 0; k < n; k++) s[k] = shared[k];
    munmap(shared, sizeof(rank_slot) * (size_t)n);
    return failed;
}

int dp_bench_main(const dp_bench *b, int n, int updates, int procs) {
    int batch = b->cfg->train.batch_size;
    if (n < 1 || n > RLT_COMM_MAX_RANKS || batch % n || (procs && n < 2)) {
        fprintf(stderr, "%s: %s %d: %d to %d devices that divide the batch (%d)\n", b->name, procs ? "--procs" : "--devices",
                n, procs ? 2 : 1, RLT_COMM_MAX_RANKS, batch);
        return 2;
    }
    rank_slot s[RLT_COMM_MAX_RANKS];
    long single = 0;
    double single_s = 0, r1 = 0;
    /* Processes are started before this one touches CUDA (a forked CUDA context is unusable). */
    int failed = procs ? ranks_as_processes(b, n, updates, s) : 0;
    if (!failed && (r1 = single_rate(b, updates, &single, &single_s)) < 0) return 1;
    if (!procs) failed = ranks_as_threads(b, n, updates, s);
    if (failed) return 1;
    double start = s[0].t0, end = s[0].t1;
    for (int k = 1; k < n; k++) {
        start = s[k].t0 < start ? s[k].t0 : start;
        end = s[k].t1 > end ? s[k].t1 : end;
    }
    double rn = s[0].done / (end - start);
    printf("  one device       %.0f updates/s  (batch %d, %ld updates in %.3f s)\n", r1, batch, single, single_s);
    printf("  %d device%s      %.0f updates/s  (batch %d = %d x %d, %s, %s, %ld updates in %.3f s)\n", n,
           n == 1 ? " " : "s", rn, batch, n, batch / n, procs ? "one process per device" : "one process",
           on_cpu(b) ? "host-comm average (CPU)" : "NCCL average in each rank's graph", s[0].done, end - start);
    printf("  ratio            %.2f x one device\n", rn / r1);
    return 0;
}
