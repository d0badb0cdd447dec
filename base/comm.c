/* comm.c: the host side of a data-parallel group (comm.h): a barrier with a generation count and an abort
 * flag, and the two collectives built on it. */
#include "comm.h"

#include <pthread.h>
#include <string.h>

#include "err.h"
#include "mem.h"

struct rlt_comm {
    int32_t n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t arrived;     /* ranks at the barrier of generation gen (under mu) */
    uint64_t gen;
    int32_t aborted;     /* under mu */
    int32_t devs_aborted;
    int32_t flags[RLT_COMM_MAX_RANKS];  /* rlt_comm_any's inputs, read between its two barriers */
    float *bufs[RLT_COMM_MAX_RANKS];    /* rlt_comm_allreduce_mean's buffers, likewise */
    void *devs[RLT_COMM_MAX_RANKS];
    rlt_comm_abort_fn abort_fn;
};

rlt_comm *rlt_comm_create(int32_t n) {
    if (n < 1 || n > RLT_COMM_MAX_RANKS) return NULL;
    rlt_comm *c = rlt_mem_alloc(sizeof *c, 64);
    if (!c) return NULL;
    c->n = n;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        rlt_mem_free(c);
        return NULL;
    }
    if (pthread_cond_init(&c->cv, NULL) != 0) {
        pthread_mutex_destroy(&c->mu);
        rlt_mem_free(c);
        return NULL;
    }
    return c;
}

void rlt_comm_free(rlt_comm *c) {
    if (!c) return;
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    rlt_mem_free(c);
}

int32_t rlt_comm_size(const rlt_comm *c) { return c ? c->n : 1; }

void rlt_comm_set_device(rlt_comm *c, void *const *device_comms, rlt_comm_abort_fn abort_fn) {
    for (int32_t r = 0; r < c->n; r++) c->devs[r] = device_comms ? device_comms[r] : NULL;
    c->abort_fn = abort_fn;
}

void *rlt_comm_device(const rlt_comm *c, int32_t rank) { return c && rank >= 0 && rank < c->n ? c->devs[rank] : NULL; }

/* Every rank waits here until all n arrived (RLT_OK), or until an abort (RLT_EINTERRUPTED). */
static int comm_barrier(rlt_comm *c) {
    pthread_mutex_lock(&c->mu);
    if (c->aborted) {
        pthread_mutex_unlock(&c->mu);
        return RLT_EINTERRUPTED;
    }
    uint64_t gen = c->gen;
    if (++c->arrived == c->n) {
        c->arrived = 0;
        c->gen++;
        pthread_cond_broadcast(&c->cv);
    } else {
        while (gen == c->gen && !c->aborted) pthread_cond_wait(&c->cv, &c->mu);
    }
    int rc = gen == c->gen ? RLT_EINTERRUPTED : RLT_OK; /* woken by the abort, not by the last arrival */
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int rlt_comm_any(rlt_comm *c, int32_t rank, int32_t flag, int32_t *any) {
    *any = flag != 0;
    if (c->n == 1) return c->aborted ? RLT_EINTERRUPTED : RLT_OK;
    c->flags[rank] = flag != 0;
    /* Between the barriers every rank reads every flag; nobody writes one until all have passed the second. */
    int rc = comm_barrier(c);
    if (rc == RLT_OK)
        for (int32_t r = 0; r < c->n; r++) *any |= c->flags[r];
    if (rc == RLT_OK) rc = comm_barrier(c);
    return rc;
}

int rlt_comm_allreduce_mean(rlt_comm *c, int32_t rank, float *x, uint64_t n) {
    if (c->n == 1) return c->aborted ? RLT_EINTERRUPTED : RLT_OK;
    c->bufs[rank] = x;
    int rc = comm_barrier(c);
    if (rc != RLT_OK) return rc;
    /* Rank k owns elements [lo, hi): it alone reads and writes them in every rank's buffer, so no element is
     * written while another rank reads it. */
    uint64_t lo = n * (uint64_t)rank / (uint64_t)c->n, hi = n * (uint64_t)(rank + 1) / (uint64_t)c->n;
    const float inv = 1.0f / (float)c->n;
    for (uint64_t i = lo; i < hi; i++) {
        float s = 0.0f;
        for (int32_t r = 0; r < c->n; r++) s += c->bufs[r][i];
        s *= inv;
        for (int32_t r = 0; r < c->n; r++) c->bufs[r][i] = s;
    }
    return comm_barrier(c);
}

void rlt_comm_abort(rlt_comm *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->aborted = 1;
    int first = !c->devs_aborted;
    c->devs_aborted = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (first && c->abort_fn)
        for (int32_t r = 0; r < c->n; r++)
            if (c->devs[r]) c->abort_fn(c->devs[r]);
}

int32_t rlt_comm_aborted(rlt_comm *c) {
    pthread_mutex_lock(&c->mu);
    int32_t a = c->aborted;
    pthread_mutex_unlock(&c->mu);
    return a;
}
