/* comm.c: the host side of a data-parallel group (comm.h): for ranks that are threads of this process, a barrier
 * with a generation count, a deadline and an abort flag, and the collectives built on it; for ranks that are
 * processes, the same calls handed to comm_net.c. */
#include "comm_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mem.h"
#include "text.h"

double comm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

rlt_comm *rlt_comm_create(int32_t n) {
    if (n < 1 || n > RLT_COMM_MAX_RANKS) return NULL;
    rlt_comm *c = rlt_mem_alloc(sizeof *c, 64);
    if (!c) return NULL;
    c->n = n;
    c->timeout_s = RLT_COMM_DEFAULT_TIMEOUT_S;
    for (int32_t r = 0; r < RLT_COMM_MAX_RANKS; r++) c->fds[r] = -1;
    pthread_condattr_t ca;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        rlt_mem_free(c);
        return NULL;
    }
    int rc = pthread_condattr_init(&ca);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        if (rc == 0) rc = pthread_cond_init(&c->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (rc != 0) {
        pthread_mutex_destroy(&c->mu);
        rlt_mem_free(c);
        return NULL;
    }
    return c;
}

void rlt_comm_free(rlt_comm *c) {
    if (!c) return;
    if (c->net) comm_net_close(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    rlt_mem_free(c->chunk);
    rlt_mem_free(c);
}

int32_t rlt_comm_size(const rlt_comm *c) { return c ? c->n : 1; }

int32_t rlt_comm_is_net(const rlt_comm *c) { return c ? c->net : 0; }

void rlt_comm_set_timeout(rlt_comm *c, double seconds) {
    if (c && seconds > 0) c->timeout_s = seconds;
}

void rlt_comm_set_name(rlt_comm *c, int32_t rank, const char *name) {
    if (c && rank >= 0 && rank < c->n && name) snprintf(c->names[rank], sizeof c->names[rank], "%s", name);
}

void rlt_comm_set_device(rlt_comm *c, void *const *device_comms, rlt_comm_abort_fn abort_fn) {
    for (int32_t r = 0; r < c->n; r++) c->devs[r] = device_comms ? device_comms[r] : NULL;
    c->abort_fn = abort_fn;
}

void *rlt_comm_device(const rlt_comm *c, int32_t rank) { return c && rank >= 0 && rank < c->n ? c->devs[rank] : NULL; }

const char *comm_device_hint(const rlt_comm *c) {
    for (int32_t r = 0; r < c->n; r++)
        if (c->devs[r])
            return "; on GPUs, NCCL_DEBUG=INFO shows where NCCL waits, and NCCL_CUMEM_ENABLE=0 or NCCL_P2P_DISABLE=1 "
                   "in the environment avoid the set-ups that hang on some machines (docs/data_parallel.md)";
    return "";
}

int comm_aborted_status(rlt_comm *c) {
    return __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) ? RLT_ERUNTIME : RLT_EINTERRUPTED;
}

/* Aborts the device communicators once (outside mu: NCCL's abort may take a while). */
static void comm_abort_devices(rlt_comm *c) {
    pthread_mutex_lock(&c->mu);
    int first = !c->devs_aborted;
    c->devs_aborted = 1;
    pthread_mutex_unlock(&c->mu);
    if (first && c->abort_fn)
        for (int32_t r = 0; r < c->n; r++)
            if (c->devs[r]) c->abort_fn(c->devs[r]);
}

void comm_fail(rlt_comm *c, const char *fmt, ...) {
    pthread_mutex_lock(&c->mu);
    if (!c->failed && !c->aborted) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->mu);
    rlt_comm_abort(c);
}

/* "rank 1 (cuda:1)" for messages. */
static const char *comm_who(const rlt_comm *c, int32_t rank, char *buf, size_t cap) {
    if (c->names[rank][0]) snprintf(buf, cap, "rank %d (%s)", (int)rank, c->names[rank]);
    else snprintf(buf, cap, "rank %d", (int)rank);
    return buf;
}

/* Every rank waits here until all n arrived (RLT_OK), until an abort (RLT_EINTERRUPTED), or until the timeout,
 * which fails the comm for all (RLT_ERUNTIME, naming the ranks that never came). */
static int comm_barrier(rlt_comm *c, int32_t rank, const char *what) {
    pthread_mutex_lock(&c->mu);
    if (c->aborted) {
        pthread_mutex_unlock(&c->mu);
        return comm_aborted_status(c);
    }
    uint64_t gen = c->gen;
    c->seen[rank] = gen + 1;
    int timed_out = 0;
    if (++c->arrived == c->n) {
        c->arrived = 0;
        c->gen++;
        pthread_cond_broadcast(&c->cv);
    } else {
        double t = comm_now() + c->timeout_s;
        struct timespec dl = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
        while (gen == c->gen && !c->aborted)
            if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT && gen == c->gen && !c->aborted) {
                timed_out = 1;
                break;
            }
    }
    if (timed_out) {
        char missing[160] = "", me[48];
        rlt_text m = {missing, sizeof missing, 0};
        int32_t k = 0;
        for (int32_t r = 0; r < c->n; r++)
            if (c->seen[r] != gen + 1) {
                char who[48];
                rlt_text_add(&m, "%s%s", k++ ? ", " : "", comm_who(c, r, who, sizeof who));
            }
        snprintf(c->msg, sizeof c->msg, "%s waited %.0f s (dist.timeout_s) for %s, but %s never arrived: a rank that "
                 "hangs (on its device, in an evaluation) or takes longer than dist.timeout_s; the run is aborted%s",
                 comm_who(c, rank, me, sizeof me), c->timeout_s, what, missing, comm_device_hint(c));
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELEASE);
    }
    int rc = gen == c->gen ? comm_aborted_status(c) : RLT_OK; /* woken by an abort, not by the last arrival */
    pthread_mutex_unlock(&c->mu);
    if (timed_out) rlt_comm_abort(c);
    return rc;
}

int rlt_comm_agree(rlt_comm *c, int32_t rank, int32_t flag, int32_t *any, const char *what) {
    *any = flag != 0;
    if (c->n == 1) return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) ? comm_aborted_status(c) : RLT_OK;
    if (c->net) return comm_net_agree(c, flag, any, what);
    c->flags[rank] = flag != 0;
    /* Between the barriers every rank reads every flag; nobody writes one until all have passed the second. */
    int rc = comm_barrier(c, rank, what);
    if (rc == RLT_OK)
        for (int32_t r = 0; r < c->n; r++) *any |= c->flags[r];
    if (rc == RLT_OK) rc = comm_barrier(c, rank, what);
    return rc;
}

int rlt_comm_any(rlt_comm *c, int32_t rank, int32_t flag, int32_t *any) {
    return rlt_comm_agree(c, rank, flag, any, "the ranks' agreement at the start of a step");
}

int rlt_comm_allreduce_mean(rlt_comm *c, int32_t rank, float *x, uint64_t n) {
    static const char what[] = "the gradient average (all-reduce)";
    if (c->n == 1) return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) ? comm_aborted_status(c) : RLT_OK;
    if (c->net) return comm_net_allreduce_mean(c, x, n);
    c->bufs[rank] = x;
    int rc = comm_barrier(c, rank, what);
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
    return comm_barrier(c, rank, what);
}

int rlt_comm_bcast(rlt_comm *c, int32_t rank, void *buf, uint32_t bytes, const char *what) {
    if (bytes > COMM_MAX_BYTES) return RLT_EINVAL;
    if (c->n == 1) return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) ? comm_aborted_status(c) : RLT_OK;
    if (c->net) return comm_net_bcast(c, buf, bytes, what);
    c->src[rank] = buf;
    int rc = comm_barrier(c, rank, what);
    if (rc != RLT_OK) return rc;
    if (rank != 0) memcpy(buf, c->src[0], bytes);
    return comm_barrier(c, rank, what);
}

int rlt_comm_allgather(rlt_comm *c, int32_t rank, const void *mine, uint32_t bytes, void *all, const char *what) {
    if (bytes > COMM_MAX_BYTES) return RLT_EINVAL;
    if (c->net) return comm_net_allgather(c, mine, bytes, all, what);
    if (c->n == 1) {
        memmove(all, mine, bytes);
        return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) ? comm_aborted_status(c) : RLT_OK;
    }
    c->src[rank] = mine;
    int rc = comm_barrier(c, rank, what);
    if (rc != RLT_OK) return rc;
    for (int32_t r = 0; r < c->n; r++) memcpy((char *)all + (size_t)r * bytes, c->src[r], bytes);
    return comm_barrier(c, rank, what);
}

void rlt_comm_abort(rlt_comm *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->net) comm_net_shutdown(c);
    comm_abort_devices(c);
}

int32_t rlt_comm_aborted(rlt_comm *c) { return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE); }

const char *rlt_comm_errmsg(rlt_comm *c) {
    return c && __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) ? c->msg : "";
}
