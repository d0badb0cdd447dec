/* worker.c: the CPU backend's second thread (cpu.threads >= 2): one persistent worker created at open, before
 * the arena is sealed, that runs jobs posted by the calling thread: the other half of a split op (dense.c,
 * flat.c, td3.c), or whole ops issued on an update's side lanes (lanes.c). At these sizes a job lasts
 * microseconds, so handing work over must cost far less than that: the worker spins on the queue for a while
 * after each job and only then sleeps on a condition variable (so an idle trainer, acting or evaluating,
 * leaves the core to others).
 *
 * Each job has a lane. Jobs of one lane run in the order posted, as the ops of one CUDA stream do, except that
 * a job posted `beside` the one before it (the two halves of a split op) may run at the same time as it; jobs of
 * different lanes, and split halves of lane CPU_JOB_FREE, may run side by side, one on each thread.
 * Either thread may run any job that is ready: the worker prefers the odd lanes, the calling thread, when it
 * waits, the others (lanes.c says why), and a caller never waits idle for a job that nobody has started, so a
 * worker that is late (its core busy with another process, or asleep) costs little beyond one thread's time.
 * Each job's arguments are copied into its slot, so the poster need not keep them. Nothing here allocates
 * after open. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "mem.h"
#include "cpu_ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spins of the idle worker (each a pause, ~40 ns on x86) before it sleeps: about 50 us, longer than the gap
 * between two ops of an update, much shorter than an environment step with acting. */
#define WORKER_SPINS 2000
/* Job slots: more than the ops of one update's side lanes between two joins. */
#define WORKER_SLOTS 64

/* Contention. When another process wants our cores, the worker is descheduled now and then for a whole time
 * slice (milliseconds), and a caller that waits for a job the worker holds waits that long: two threads then
 * run far slower than one. So the worker compares, over windows of at least CONTENTION_WINDOW_NS while it is
 * awake, the wall time that passed with the CPU time it got; when more than a quarter of it went to others,
 * it asks the caller to run alone for a while (lanes.c): SOLO_MIN_NS at first, doubling while contention
 * persists (up to SOLO_MAX_NS), back to the minimum after SOLO_RESET_NS on two threads without any. Short
 * preemptions (a kernel thread for tens of microseconds, a few dozen times a second on an idle machine) stay
 * far below the quarter. Results do not depend on any of it: every op gives the same bits on one thread. */
#define CONTENTION_WINDOW_NS 1000000ull
#define SOLO_MIN_NS 10000000ull
#define SOLO_MAX_NS 1000000000ull
#define SOLO_RESET_NS 200000000ull

/* A slot's state word: the job's number (from 0) times 4, plus QUEUED, RUNNING or FREE (finished, or never
 * used). One word, so that a claim (QUEUED -> RUNNING by compare-and-swap) names the job it claims even when
 * the slot has been reused since the claimer looked. */
enum { SLOT_FREE = 0, SLOT_QUEUED = 1, SLOT_RUNNING = 2 };
#define SLOT_WORD(job, st) (((job) << 2) | (uint64_t)(st))

typedef struct worker_slot {
    _Alignas(64) atomic_uint_fast64_t word;
    /* Written before word says QUEUED; read by scans that may race a reuse of the slot (then ignored). */
    atomic_int lane;
    atomic_uint_fast64_t group; /* the number of its group's first job: jobs of one group may run at once */
    void (*fn)(void *);
    unsigned char arg[CPU_JOB_BYTES];
} worker_slot;

struct cpu_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Alignas(64) atomic_uint_fast64_t posted; /* jobs posted; job k sits in slot k % WORKER_SLOTS */
    uint64_t last_group;                      /* the group of the last job posted (the poster's own) */
    _Alignas(64) atomic_uint_fast64_t tail;   /* every job before it has finished (a lower bound) */
    _Alignas(64) atomic_int sleeping;         /* 1 while the worker waits on cv */
    atomic_int stop;
    atomic_int running; /* set by the worker when it starts: cpu_worker_start returns only after that */
    _Alignas(64) atomic_uint_fast64_t solo_until; /* CLOCK_MONOTONIC ns: the caller runs alone until then */
    /* The worker's own: the current window's start (wall and thread CPU time), the current solo time and when
     * the last solo period ended. */
    uint64_t win_wall, win_cpu, solo_ns, solo_end;
    worker_slot slots[WORKER_SLOTS];
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This thread's CPU time in ns (exact: the scheduler's clock, unlike getrusage's tick samples), or 0 where it
 * cannot be read (then contention is never seen). */
static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Starts a window now (the worker is about to run, or has just woken up). */
static void window_start(cpu_worker *w) {
    w->win_wall = now_ns();
    w->win_cpu = thread_cpu_ns();
}

/* Run by the worker between jobs: see Contention above. */
static void watch_contention(cpu_worker *w) {
    uint64_t t = now_ns();
    if (t - w->win_wall < CONTENTION_WINDOW_NS) return;
    uint64_t cpu = thread_cpu_ns(), wall = t - w->win_wall, got = cpu - w->win_cpu;
    w->win_wall = t;
    w->win_cpu = cpu;
    if (!cpu || 4 * (wall > got ? wall - got : 0) <= wall) return;
    w->solo_ns = t - w->solo_end > SOLO_RESET_NS ? SOLO_MIN_NS
                 : w->solo_ns * 2 < SOLO_MAX_NS  ? w->solo_ns * 2
                                                 : SOLO_MAX_NS;
    w->solo_end = t + w->solo_ns;
    atomic_store(&w->solo_until, w->solo_end);
}

int cpu_worker_contended(cpu_worker *w) { return now_ns() < atomic_load(&w->solo_until); }

/* By thread id, not a thread-local flag: in a library loaded with dlopen (the Python package), a thread's first
 * touch of a thread-local variable may allocate its block, after the arena is sealed. */
int cpu_worker_self(cpu_worker *w) { return w && pthread_equal(pthread_self(), w->thread); }

/* 1 when job k (posted) has finished: its slot holds it no more, or holds it finished. */
static int job_done(cpu_worker *w, uint64_t k) {
    uint64_t word = atomic_load(&w->slots[k % WORKER_SLOTS].word);
    return (word >> 2) != k || (word & 3) == SLOT_FREE;
}

/* Moves tail past the finished jobs at its front. */
static uint64_t advance_tail(cpu_worker *w) {
    uint64_t t = atomic_load(&w->tail), p = atomic_load(&w->posted);
    while (t < p && job_done(w, t)) {
        uint64_t expect = t;
        atomic_compare_exchange_strong(&w->tail, &expect, t + 1);
        t = atomic_load(&w->tail);
    }
    return t;
}

/* Finds a ready job (queued, and every earlier unfinished job of its lane in its own group), preferring the
 * odd lanes and split halves (odd 1: the worker) or the even lanes (odd 0: the caller), claims it and runs it.
 * Returns 1 when it ran one (or lost it to the other thread), 0 when none was ready, and sets *pending when some
 * job has not finished. */
#define WORKER_LANES 8
static int run_ready(cpu_worker *w, int odd, int *pending) {
    uint64_t t = advance_tail(w), p = atomic_load(&w->posted);
    /* Per lane, the group of the first unfinished job seen so far in this scan (UINT64_MAX: none), and whether
     * unfinished jobs of another group followed it. */
    uint64_t first[WORKER_LANES];
    int mixed[WORKER_LANES] = {0};
    for (int l = 0; l < WORKER_LANES; l++) first[l] = UINT64_MAX;
    int64_t pick = -1, other = -1;
    *pending = t < p;
    for (uint64_t k = t; k < p && k < t + WORKER_SLOTS; k++) {
        worker_slot *s = &w->slots[k % WORKER_SLOTS];
        uint64_t word = atomic_load(&s->word);
        if ((word >> 2) != k || (word & 3) == SLOT_FREE) continue;
        int32_t lane = atomic_load_explicit(&s->lane, memory_order_relaxed);
        uint64_t group = atomic_load_explicit(&s->group, memory_order_relaxed);
        int ready = (word & 3) == SLOT_QUEUED;
        if (lane >= 0 && lane < WORKER_LANES) {
            uint64_t *f = &first[lane];
            if (*f != UINT64_MAX && (mixed[lane] || *f != group)) ready = 0;
            if (*f == UINT64_MAX) *f = group;
            else if (*f != group) mixed[lane] = 1;
        }
        if (ready) {
            /* The worker takes a split half before anything else: the caller is waiting for it. */
            int mine = lane >= 0 ? (lane & 1) == odd : odd;
            if (mine && pick < 0) pick = (int64_t)k;
            if (!mine && other < 0) other = (int64_t)k;
        }
        if (pick >= 0) break;
    }
    if (pick < 0) pick = other;
    if (pick < 0) return 0;
    worker_slot *s = &w->slots[pick % WORKER_SLOTS];
    uint64_t expect = SLOT_WORD((uint64_t)pick, SLOT_QUEUED);
    if (!atomic_compare_exchange_strong(&s->word, &expect, SLOT_WORD((uint64_t)pick, SLOT_RUNNING))) return 1;
    s->fn(s->arg);
    atomic_store(&s->word, SLOT_WORD((uint64_t)pick, SLOT_FREE));
    return 1;
}

static void *worker_main(void *p) {
    cpu_worker *w = p;
    window_start(w);
    atomic_store(&w->running, 1);
    unsigned jobs = 0;
    for (;;) {
        int pending = 0, spins = 0;
        uint64_t seen = atomic_load(&w->posted);
        if (++jobs % 16 == 0) watch_contention(w);
        while (!run_ready(w, 1, &pending)) {
            if (atomic_load(&w->stop) && !pending) return NULL;
            uint64_t now = atomic_load(&w->posted);
            if (now != seen) {
                seen = now;
                spins = 0;
            }
            /* Nothing ready for a while (nothing queued, or only jobs behind one the caller runs): sleep until
             * the next post. Jobs that become ready meanwhile are run by the caller when it waits. */
            if (++spins < WORKER_SPINS) {
                if (spins % 512 == 0) watch_contention(w);
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&w->mu);
            atomic_store(&w->sleeping, 1);
            while (atomic_load(&w->posted) == seen && !atomic_load(&w->stop)) pthread_cond_wait(&w->cv, &w->mu);
            atomic_store(&w->sleeping, 0);
            pthread_mutex_unlock(&w->mu);
            window_start(w); /* asleep is not descheduled */
            seen = atomic_load(&w->posted);
            spins = 0;
        }
    }
}

int cpu_worker_start(cpu_worker **out) {
    *out = NULL;
    cpu_worker *w = rlt_mem_alloc(sizeof *w, 64);
    if (!w) return RLT_ENOMEM;
    atomic_init(&w->posted, 0);
    atomic_init(&w->tail, 0);
    w->last_group = 0;
    atomic_init(&w->sleeping, 0);
    atomic_init(&w->stop, 0);
    atomic_init(&w->running, 0);
    atomic_init(&w->solo_until, 0);
    w->solo_ns = 0;
    w->solo_end = 0;
    for (int i = 0; i < WORKER_SLOTS; i++) {
        atomic_init(&w->slots[i].word, SLOT_WORD((uint64_t)i, SLOT_FREE));
        atomic_init(&w->slots[i].lane, 0);
        atomic_init(&w->slots[i].group, 0);
    }
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
    cpu_worker_drain(w);
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    rlt_mem_free(w);
}

uint64_t cpu_worker_post(cpu_worker *w, int32_t lane, int beside, void (*fn)(void *), const void *arg,
                         size_t bytes) {
    uint64_t k = atomic_load(&w->posted);
    worker_slot *s = &w->slots[k % WORKER_SLOTS];
    /* A full queue: help until the job that last used this slot has finished. */
    for (int pending; (atomic_load(&s->word) & 3) != SLOT_FREE;)
        if (!run_ready(w, 0, &pending)) cpu_relax();
    atomic_store_explicit(&s->lane, lane, memory_order_relaxed);
    w->last_group = beside ? w->last_group : k;
    atomic_store_explicit(&s->group, w->last_group, memory_order_relaxed);
    s->fn = fn;
    memcpy(s->arg, arg, bytes);
    atomic_store(&s->word, SLOT_WORD(k, SLOT_QUEUED));
    atomic_store(&w->posted, k + 1); /* seq_cst: after the slot, and before the load of sleeping below */
    if (atomic_load(&w->sleeping)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    return k + 1;
}

/* The caller runs the job itself when the worker has not started it by the time it gets here (its core may
 * be busy with another process, or it is asleep); once the worker holds it, the caller waits, yielding its
 * core after a while in case the worker is waiting for that very core. */
void cpu_worker_wait(cpu_worker *w, uint64_t ticket) {
    uint64_t k = ticket - 1;
    worker_slot *s = &w->slots[k % WORKER_SLOTS];
    uint64_t expect = SLOT_WORD(k, SLOT_QUEUED);
    if (atomic_load_explicit(&s->lane, memory_order_relaxed) == CPU_JOB_FREE &&
        atomic_compare_exchange_strong(&s->word, &expect, SLOT_WORD(k, SLOT_RUNNING))) {
        s->fn(s->arg);
        atomic_store(&s->word, SLOT_WORD(k, SLOT_FREE));
        return;
    }
    for (unsigned spins = 0; !job_done(w, k); spins++) {
        if (spins < WORKER_SPINS) cpu_relax();
        else sched_yield();
    }
}

void cpu_worker_drain(cpu_worker *w) {
    unsigned spins = 0;
    for (int pending = 1; pending;) {
        if (run_ready(w, 0, &pending)) {
            spins = 0;
            continue;
        }
        if (!pending) break;
        if (spins++ < WORKER_SPINS) cpu_relax();
        else sched_yield();
    }
}

int cpu_worker_idle(cpu_worker *w) { return advance_tail(w) == atomic_load(&w->posted); }
