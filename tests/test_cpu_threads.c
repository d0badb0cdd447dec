/* test_cpu_threads.c: the CPU backend's second thread (cpu.threads: 2; kernels/cpu/worker.c and lanes.c).
 * - The worker's queue runs the jobs of one lane in the order posted, whichever thread runs them: a job posted
 *   behind one of its lane that blocks does not start before it while another lane's jobs run beside it; a job
 *   posted beside the one before it (a split op's halves) runs at the same time as it, and the lane's next job
 *   waits for both; a queue longer than its slots keeps each lane's order; cpu_worker_wait returns only once
 *   its job has run.
 * - Lanes: ops issued on the side lanes (1, 2 and 3) are queued, and an op that must run on the
 *   calling thread (copy_f32, CBLAS forwards of few rows) waits for the ops of its lane queued before it; join
 *   and sync leave nothing queued; the results are one thread's bits.
 * - Whole runs give the same bits on one thread and two: TD3 at the 64-64 / batch 100 sizes (ops queued whole
 *   on the side lanes) and at 256-256 / batch 256 (ops split in two), the whole td3_pendulum_fast
 *   configuration shortened (acting and evaluating included), and DQN on CartPole. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "kernels/cpu/cpu_ops.h"
#include "mem.h"
#include "rltrain.h"

static rlt_err err;

/* ---- the queue ---- */

typedef struct order_job {
    int *log;
    atomic_int *n;
    int index;
    atomic_int *released; /* NULL, or the block's release flag: log it as seen when the job ran */
    int *seen;
} order_job;

static void order_run(void *arg) {
    const order_job *j = arg;
    int k = atomic_fetch_add(j->n, 1);
    j->log[k] = j->index;
    if (j->released) j->seen[j->index] = atomic_load(j->released);
}

typedef struct block_job {
    atomic_int *started, *release;
} block_job;

static void block_run(void *arg) {
    const block_job *j = arg;
    atomic_store(j->started, 1);
    while (!atomic_load(j->release)) {
    }
}

/* A half of a split op: marks itself running, notes whether `other` was running and unfinished when it
 * started, then waits for the release and marks itself done. */
typedef struct pair_job {
    atomic_int *running, *done, *release, *other, *overlap;
} pair_job;

static void pair_run(void *arg) {
    const pair_job *j = arg;
    if (j->running) atomic_store(j->running, 1);
    if (j->overlap) atomic_store(j->overlap, atomic_load(j->other) && !atomic_load(j->release));
    while (!atomic_load(j->release)) {
    }
    atomic_store(j->done, 1);
}

typedef struct after_job {
    atomic_int *a, *b, *ok;
} after_job;

static void after_run(void *arg) {
    const after_job *j = arg;
    atomic_store(j->ok, atomic_load(j->a) && atomic_load(j->b));
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void *release_later(void *arg) {
    sleep_ms(20);
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

static void check_queue(void) {
    cpu_worker *w;
    CHECK(cpu_worker_start(&w) == RLT_OK, "worker start");
    enum { N = 1000 };
    static int log1[N], log2[N], seen[N];
    atomic_int n1 = 0, n2 = 0, started = 0, release = 0;
    /* A job on lane 1 that blocks, 10 jobs behind it on lane 1 and 10 on lane 2. While it blocks, the lane-1
     * jobs may not start (the calling thread is free: it is not waiting) and the lane-2 ones may, run by the
     * calling thread as it drains; each lane keeps its order. */
    block_job b = {&started, &release};
    cpu_worker_post(w, 1, 0, block_run, &b, sizeof b);
    while (!atomic_load(&started)) {
    }
    for (int i = 0; i < 10; i++) {
        order_job j1 = {log1, &n1, i, &release, seen}, j2 = {log2, &n2, 100 + i, &release, seen};
        cpu_worker_post(w, 1, 0, order_run, &j1, sizeof j1);
        cpu_worker_post(w, 2, 0, order_run, &j2, sizeof j2);
    }
    sleep_ms(5);
    CHECK(atomic_load(&n1) == 0 && !cpu_worker_idle(w), "lane-1 jobs behind a running one wait for it: %d ran",
          atomic_load(&n1));
    pthread_t rel;
    CHECK(pthread_create(&rel, NULL, release_later, &release) == 0, "thread");
    cpu_worker_drain(w);
    pthread_join(rel, NULL);
    CHECK(atomic_load(&n1) == 10 && atomic_load(&n2) == 10 && cpu_worker_idle(w), "drain runs them all: %d %d",
          atomic_load(&n1), atomic_load(&n2));
    int bad = 0;
    for (int i = 0; i < 10; i++) bad += log1[i] != i || log2[i] != 100 + i || !seen[i] || seen[100 + i];
    CHECK(bad == 0, "lane order, lane 1 after the block, lane 2 beside it: %d wrong", bad);
    /* A job posted beside the one before it (the halves of a split op) runs while that one runs: the calling
     * thread, draining, runs it while the worker holds the first. The next job of the lane waits for both. */
    atomic_int a_run = 0, a_done = 0, b_done = 0, overlap = 0, after_ok = 0, go = 0;
    pair_job a = {&a_run, &a_done, &go, NULL, NULL}, bj = {NULL, &b_done, &go, &a_run, &overlap};
    cpu_worker_post(w, 1, 0, pair_run, &a, sizeof a);
    while (!atomic_load(&a_run)) {
    }
    cpu_worker_post(w, 1, 1, pair_run, &bj, sizeof bj);
    after_job c = {&a_done, &b_done, &after_ok};
    cpu_worker_post(w, 1, 0, after_run, &c, sizeof c);
    pthread_t rel2;
    CHECK(pthread_create(&rel2, NULL, release_later, &go) == 0, "thread");
    cpu_worker_drain(w);
    pthread_join(rel2, NULL);
    CHECK(atomic_load(&overlap) == 1, "a job posted beside a running one started while it ran");
    CHECK(atomic_load(&after_ok) == 1, "the lane's next job waited for both halves");

    /* More jobs than the queue has slots, on two lanes and split halves, with waits on the halves along the
     * way: every job runs once, each lane in order, and a wait returns only when its job has run. */
    atomic_store(&n1, 0);
    atomic_store(&n2, 0);
    int bad_wait = 0;
    for (int i = 0; i < N; i++) {
        order_job j1 = {log1, &n1, i, NULL, NULL}, j2 = {log2, &n2, i, NULL, NULL};
        cpu_worker_post(w, 3, 0, order_run, &j1, sizeof j1);
        cpu_worker_post(w, 2, 0, order_run, &j2, sizeof j2);
        if (i % 97 == 0) {
            atomic_int done = 0;
            int one[1];
            order_job h = {one, &done, 0, NULL, NULL};
            uint64_t t = cpu_worker_post(w, CPU_JOB_FREE, 0, order_run, &h, sizeof h);
            cpu_worker_wait(w, t);
            bad_wait += atomic_load(&done) != 1;
        }
        if (i % 301 == 0) sleep_ms(1); /* let the worker fall asleep now and then: the wake-up path */
    }
    cpu_worker_drain(w);
    int order_bad = 0;
    for (int i = 0; i < N; i++) order_bad += log1[i] != i || log2[i] != i;
    CHECK(atomic_load(&n1) == N && atomic_load(&n2) == N && order_bad == 0, "%d + %d jobs ran, %d out of order",
          atomic_load(&n1), atomic_load(&n2), order_bad);
    CHECK(bad_wait == 0, "cpu_worker_wait returned before its job ran (%d times)", bad_wait);
    cpu_worker_stop(w);
}

/* ---- lanes on the backend ---- */

static int open_backend(rlt_backend *bk, int threads, float **ws) {
    memset(bk, 0, sizeof *bk);
    bk->ops = rlt_cpu_backend_ops();
    bk->err = &err;
    if (bk->ops->open(bk, -1, threads) != RLT_OK) return -1;
    uint64_t bytes = rlt_backend_workspace_need(bk);
    *ws = bytes ? rlt_mem_alloc(bytes, 64) : NULL;
    bk->ops->workspace(bk, *ws, bytes, NULL);
    return 0;
}

static void check_lanes(void) {
    rlt_backend one, two;
    float *ws1, *ws2;
    CHECK(open_backend(&one, 1, &ws1) == 0 && open_backend(&two, 2, &ws2) == 0, "open: %s", err.msg);
    cpu_impl *im = two.impl;
    if (!im->worker) {
        printf("test_cpu_threads: no fast dense kernels here, so no worker: lanes not tested\n");
        one.ops->close(&one);
        two.ops->close(&two);
        rlt_mem_free(ws1);
        rlt_mem_free(ws2);
        return;
    }
    enum { R = 100, FI = 64, FO = 64, NX = 1 << 16 };
    float *x = rlt_mem_alloc(NX * 4, 64), *z = rlt_mem_alloc(NX * 4, 64), *W = rlt_mem_alloc(FI * FO * 4, 64);
    float *b = rlt_mem_alloc(FO * 4, 64), *in = rlt_mem_alloc(R * FI * 4, 64);
    float *y1[3], *y2[3];
    for (int k = 0; k < 3; k++) {
        y1[k] = rlt_mem_alloc(R * FO * 4, 64);
        y2[k] = rlt_mem_alloc(R * FO * 4, 64);
    }
    uint32_t s = 7;
    for (int i = 0; i < FI * FO; i++) W[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < FO; i++) b[i] = 0.01f * (float)i;
    for (int i = 0; i < R * FI; i++) in[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;

    /* The same schedule on both backends: a fill and a forward on lane 3, a forward on lane 2, a forward of 2
     * rows (CBLAS: runs on the calling thread) and a copy on lane 1 that read what lane 1 and 3 queued before. */
    rlt_backend *bks[2] = {&one, &two};
    float **ys[2] = {y1, y2};
    int64_t ctr[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        rlt_backend *bk = bks[k];
        const rlt_backend_ops *op = bk->ops;
        memset(z, 0, NX * 4);
        CHECK(op->lane(bk, 3) == RLT_OK, "branch");
        CHECK(op->flat(bk, RLT_FLAT_FILL, x, NULL, NX, 3.0f) == RLT_OK, "fill");
        for (int i = 0; i < 50; i++) CHECK(op->counter_add(bk, &ctr[k], 2) == RLT_OK, "counter");
        rlt_linear_fwd f = {.rows = R, .fi = FI, .fo = FO, .x = in, .ldx = FI, .W = W, .b = b, .y = ys[k][0],
                            .ldy = FO, .act = RLT_ACT_RELU};
        CHECK(op->linear_forward(bk, &f) == RLT_OK, "forward lane 3");
        CHECK(op->lane(bk, 2) == RLT_OK, "branch");
        f.y = ys[k][1];
        f.act = RLT_ACT_TANH;
        CHECK(op->linear_forward(bk, &f) == RLT_OK, "forward lane 2");
        CHECK(op->lane(bk, 1) == RLT_OK, "branch");
        /* x was filled on lane 3, so this lane-1 copy may see it only after a join: join first. */
        CHECK(op->lane(bk, RLT_LANE_JOIN) == RLT_OK, "join");
        CHECK(op->lane(bk, 1) == RLT_OK, "branch");
        CHECK(op->flat(bk, RLT_FLAT_FILL, x, NULL, NX, 5.0f) == RLT_OK, "fill lane 1");
        CHECK(op->flat(bk, RLT_FLAT_COPY, z, x, NX, 0.0f) == RLT_OK, "copy lane 1"); /* must see the 5s queued before it */
        rlt_linear_fwd g = {.rows = 2, .fi = FI, .fo = FO, .x = z, .ldx = FI, .W = W, .b = b, .y = ys[k][2],
                            .ldy = FO, .act = RLT_ACT_NONE};
        CHECK(op->linear_forward(bk, &g) == RLT_OK, "2-row forward lane 1");
        CHECK(op->lane(bk, 0) == RLT_OK, "branch");
        CHECK(op->sync(bk) == RLT_OK, "sync");
        if (k == 1) CHECK(cpu_worker_idle(im->worker) && im->lane == 0, "sync leaves nothing queued, on lane 0");
        int bad = 0;
        for (int i = 0; i < NX; i++) bad += z[i] != 5.0f;
        CHECK(bad == 0, "%d threads: a copy on lane 1 saw %d elements before the fill queued ahead of it", k + 1, bad);
    }
    CHECK(ctr[0] == 100 && ctr[1] == 100, "counters: %lld %lld", (long long)ctr[0], (long long)ctr[1]);
    for (int i = 0; i < 3; i++)
        CHECK(memcmp(y1[i], y2[i], R * FO * 4) == 0, "forward %d: two threads' bits differ from one's", i);
    for (int k = 0; k < 3; k++) {
        rlt_mem_free(y1[k]);
        rlt_mem_free(y2[k]);
    }
    rlt_mem_free(x); rlt_mem_free(z); rlt_mem_free(W); rlt_mem_free(b); rlt_mem_free(in);
    one.ops->close(&one);
    two.ops->close(&two);
    rlt_mem_free(ws1);
    rlt_mem_free(ws2);
}

/* Ops large enough to be split in two, issued on side lanes (their halves queued beside each other) and on lane
 * 0 (one half on each thread), chained through the same lane: one thread's bits. */
static float *rand_block(size_t n, uint32_t *s, float scale) {
    float *p = rlt_mem_alloc(n * 4, 64);
    for (size_t i = 0; i < n; i++) p[i] = scale * ((float)((*s = *s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f);
    return p;
}

static void check_big_lanes(void) {
    rlt_backend bks[2];
    float *ws[2];
    enum { R = 256, F = 256, O = 96 };
    float *out[2][6];
    uint32_t s = 3;
    float *x = rand_block((size_t)R * F, &s, 1.0f), *W1 = rand_block((size_t)F * F, &s, 0.1f);
    float *W2 = rand_block((size_t)O * F, &s, 0.1f), *b = rand_block(F, &s, 0.1f), *dy0 = rand_block((size_t)R * F, &s, 1.0f);
    for (int k = 0; k < 2; k++) {
        CHECK(open_backend(&bks[k], k + 1, &ws[k]) == 0, "open: %s", err.msg);
        rlt_backend *bk = &bks[k];
        const rlt_backend_ops *op = bk->ops;
        float *h = rlt_mem_alloc((size_t)R * F * 4, 64), *y = rlt_mem_alloc((size_t)R * O * 4, 64);
        float *y2 = rlt_mem_alloc((size_t)R * F * 4, 64), *dW = rlt_mem_alloc((size_t)F * F * 4, 64);
        float *db = rlt_mem_alloc(F * 4, 64), *dx = rlt_mem_alloc((size_t)R * F * 4, 64);
        memset(dW, 0, (size_t)F * F * 4);
        memset(db, 0, F * 4);
        /* Lane 3: two chained forwards, the first split by outputs, the second (96 wide) by rows. */
        CHECK(op->lane(bk, 3) == RLT_OK, "branch");
        rlt_linear_fwd f1 = {.rows = R, .fi = F, .fo = F, .x = x, .ldx = F, .W = W1, .b = b, .y = h, .ldy = F,
                             .act = RLT_ACT_RELU};
        rlt_linear_fwd f2 = {.rows = R, .fi = F, .fo = O, .x = h, .ldx = F, .W = W2, .b = b, .y = y, .ldy = O,
                             .act = RLT_ACT_TANH};
        CHECK(op->linear_forward(bk, &f1) == RLT_OK && op->linear_forward(bk, &f2) == RLT_OK, "forwards lane 3");
        /* Lane 1: a backward (dW, db and dx through ReLU), split. */
        CHECK(op->lane(bk, 1) == RLT_OK, "branch");
        rlt_linear_bwd g = {.rows = R, .fi = F, .fo = F, .dy = dy0, .lddy = F, .x = x, .ldx = F, .act_x = RLT_ACT_RELU,
                            .W = W1, .dW = dW, .db = db, .beta = 1.0f, .dx = dx, .lddx = F};
        CHECK(op->linear_backward(bk, &g) == RLT_OK, "backward lane 1");
        /* Lane 0: a forward split between the two threads while the side lanes' halves are queued. */
        CHECK(op->lane(bk, 0) == RLT_OK, "branch");
        rlt_linear_fwd f3 = {.rows = R, .fi = F, .fo = F, .x = x, .ldx = F, .W = W1, .b = NULL, .y = y2, .ldy = F,
                             .act = RLT_ACT_NONE};
        CHECK(op->linear_forward(bk, &f3) == RLT_OK, "forward lane 0");
        CHECK(op->lane(bk, RLT_LANE_JOIN) == RLT_OK, "join");
        out[k][0] = h, out[k][1] = y, out[k][2] = y2, out[k][3] = dW, out[k][4] = db, out[k][5] = dx;
    }
    const size_t n[6] = {(size_t)R * F, (size_t)R * O, (size_t)R * F, (size_t)F * F, F, (size_t)R * F};
    for (int i = 0; i < 6; i++) {
        CHECK(memcmp(out[0][i], out[1][i], n[i] * 4) == 0, "split op %d on lanes: two threads' bits differ from one's",
              i);
        rlt_mem_free(out[0][i]);
        rlt_mem_free(out[1][i]);
    }
    for (int k = 0; k < 2; k++) {
        bks[k].ops->close(&bks[k]);
        rlt_mem_free(ws[k]);
    }
    rlt_mem_free(x); rlt_mem_free(W1); rlt_mem_free(W2); rlt_mem_free(b); rlt_mem_free(dy0);
}

/* ---- whole runs ---- */

/* TD3 on the synthetic HalfCheetah-sized data (test_td3_synthetic) with hidden-hidden networks and the given
 * batch, `updates` updates on 1 and on 2 threads: the checkpoints must be the same bytes. */
static void check_td3_synthetic(int hidden, int batch, int updates) {
    char path[2][700], actor[64], critic[64], bs[64];
    snprintf(actor, sizeof actor, "td3.actor_hidden=[%d,%d]", hidden, hidden);
    snprintf(critic, sizeof critic, "td3.critic_hidden=[%d,%d]", hidden, hidden);
    snprintf(bs, sizeof bs, "train.batch_size=%d", batch);
    for (int k = 0; k < 2; k++) {
        const char *sets[] = {k ? "cpu.threads=2" : "cpu.threads=1", actor, critic, bs, NULL};
        int rc;
        rlt_agent *ag = test_td3_synthetic(sets, &rc);
        CHECK(ag != NULL, "agent (%d-%d, batch %d, %d threads)", hidden, hidden, batch, k + 1);
        if (!ag) return;
        int32_t done = 0, total = 0;
        for (int i = 0; i < updates; i++, total += done)
            CHECK(rlt_agent_update(ag, &done) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
        CHECK(total == updates, "%d updates ran", total);
        snprintf(path[k], sizeof path[k], "%s/agent.ckpt", test_tmpdir(k ? "threads2" : "threads1"));
        CHECK(rlt_agent_save(ag, path[k]) == RLT_OK, "save: %s", rlt_agent_errmsg(ag));
        rlt_agent_free(ag);
    }
    long d = test_files_differ(path[0], path[1]);
    CHECK(d == 0, "TD3 %d-%d, batch %d, after %d updates: checkpoints of 1 and 2 threads differ in %ld bytes", hidden,
          hidden, batch, updates, d);
}

/* A whole configuration trained with cpu.threads 1 and 2 (and `sets`): final.ckpt must be the same bytes. */
static void check_config(const char *config, const char *const *sets, const char *tag) {
    char path[2][700];
    rlt_progress p[2];
    for (int k = 0; k < 2; k++) {
        const char *all[16];
        int n = 0;
        all[n++] = k ? "cpu.threads=2" : "cpu.threads=1";
        for (int i = 0; sets[i] && n < 15; i++) all[n++] = sets[i];
        all[n] = NULL;
        char t[64];
        snprintf(t, sizeof t, "%s%d", tag, k + 1);
        CHECK(test_train_config_sets(config, all, t, &p[k]) == RLT_OK, "%s on %d threads", config, k + 1);
        snprintf(path[k], sizeof path[k], "tmp_%s/run/final.ckpt", t);
    }
    long d = test_files_differ(path[0], path[1]);
    CHECK(d == 0, "%s: final.ckpt of 1 and 2 threads differ in %ld bytes", config, d);
    CHECK(p[0].updates == p[1].updates && p[0].updates > 0, "%s: %lld and %lld updates", config,
          (long long)p[0].updates, (long long)p[1].updates);
}

int main(void) {
    check_queue();
    check_lanes();
    check_big_lanes();
    check_td3_synthetic(64, 100, 60);
    check_td3_synthetic(256, 256, 8);
    const char *td3[] = {"train.total_steps=3000", "train.eval_every=1000", "train.eval_episodes=2", NULL};
    check_config("td3_pendulum_fast.yaml", td3, "pendulum_fast");
    const char *dqn[] = {"train.total_steps=3000", "train.eval_every=1000", "train.eval_episodes=2", NULL};
    check_config("dqn_cartpole.yaml", dqn, "cartpole");
    return test_summary("test_cpu_threads");
}
