/* worker.c: the CPU backend's second thread (cpu.threads >= 2): one persistent worker created at open, before
 * the arena is sealed, that takes half of each large dense-layer op (dense.c) while the calling thread does
 * the other half. At these sizes an op lasts microseconds, so handing work over must cost far less than
 * that: the worker spins on a sequence number for a while after each job and only then sleeps on a condition
 * variable (so an idle trainer, acting or evaluating, leaves the core to others). A job the worker is late
 * for is taken back by the caller (cpu_worker_wait), so a busy second core costs little. Nothing here allocates
 * after open. Splits never change which code computes an output element, so results are the same bits with
 * one thread or two. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "mem.h"
#include "cpu_ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spins of the idle worker (each a pause, ~40 ns on x86) before it sleeps: about 50 us, longer than the gap
 * between two layers of an update, much shorter than an environment step with acting. */
#define WORKER_SPINS 2000

struct cpu_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint posted;   /* jobs posted by the caller */
    atomic_uint claimed;  /* jobs claimed, by the worker or (when it is late) by the caller */
    atomic_uint finished; /* jobs the worker has finished */
    atomic_int sleeping;  /* 1 while the worker waits on cv */
    atomic_int stop;
    atomic_int running;   /* set by the worker when it starts: cpu_worker_start returns only after that */
    void (*fn)(void *);
    void *arg;
};

static void *worker_main(void *p) {
    cpu_worker *w = p;
    atomic_store(&w->running, 1);
    unsigned seen = 0;
    for (;;) {
        unsigned now = atomic_load(&w->posted);
        for (int i = 0; now == seen && i < WORKER_SPINS && !atomic_load(&w->stop); i++) {
            cpu_relax();
            now = atomic_load(&w->posted);
        }
        if (now == seen) {
            pthread_mutex_lock(&w->mu);
            atomic_store(&w->sleeping, 1);
            while ((now = atomic_load(&w->posted)) == seen && !atomic_load(&w->stop)) pthread_cond_wait(&w->cv, &w->mu);
            atomic_store(&w->sleeping, 0);
            pthread_mutex_unlock(&w->mu);
        }
        if (atomic_load(&w->stop)) return NULL;
        unsigned expect = now - 1;
        if (atomic_compare_exchange_strong(&w->claimed, &expect, now)) {
            w->fn(w->arg);
            atomic_store(&w->finished, now);
        }
        seen = now;
    }
}

int cpu_worker_start(cpu_worker **out) {
    *out = NULL;
    cpu_worker *w = rlt_mem_alloc(sizeof *w, 64);
    if (!w) return RLT_ENOMEM;
    atomic_init(&w->posted, 0);
    atomic_init(&w->claimed, 0);
    atomic_init(&w->finished, 0);
    atomic_init(&w->sleeping, 0);
    atomic_init(&w->stop, 0);
    atomic_init(&w->running, 0);
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        rlt_mem_free(w);
        return RLT_ENOMEM;
    }
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        rlt_mem_free(w);
        return RLT_ENOMEM;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        rlt_mem_free(w);
        return RLT_ENOMEM;
    }
    /* Wait until the thread runs: whatever starting a thread costs (its stack and TLS set up, a sanitizer's
     * bookkeeping, which allocates) then happens inside init, before the arena is sealed, never later. */
    while (!atomic_load(&w->running)) sched_yield();
    *out = w;
    return RLT_OK;
}

void cpu_worker_stop(cpu_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    rlt_mem_free(w);
}

void cpu_worker_post(cpu_worker *w, void (*fn)(void *), void *arg) {
    w->fn = fn;
    w->arg = arg;
    atomic_fetch_add(&w->posted, 1); /* seq_cst: ordered before the load of sleeping below */
    if (atomic_load(&w->sleeping)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* When the worker has not picked the job up by the time the caller is done with its own half (its core is
 * busy with another process, or it is asleep), the caller claims the job and runs it itself: a loaded machine
 * costs the split nothing beyond one thread's time. Once the worker has claimed it, the caller waits, and
 * yields its core after a while in case the worker is waiting for that very core. */
void cpu_worker_wait(cpu_worker *w) {
    unsigned want = atomic_load(&w->posted), expect = want - 1;
    if (atomic_compare_exchange_strong(&w->claimed, &expect, want)) {
        w->fn(w->arg);
        return;
    }
    for (unsigned spins = 0; atomic_load(&w->finished) != want; spins++) {
        if (spins < WORKER_SPINS) cpu_relax();
        else sched_yield();
    }
}
