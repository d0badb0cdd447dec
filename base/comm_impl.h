/* comm_impl.h: the communicator's state, shared by its two transports: ranks as threads of one process
 * (base/comm.c, a barrier in memory) and ranks as processes (base/comm_net.c, TCP to rank 0). Internal to base/. */
#ifndef RLT_COMM_IMPL_H
#define RLT_COMM_IMPL_H

#include <pthread.h>

#include "comm.h"

#define COMM_MAX_BYTES 4096u     /* rlt_comm_bcast and rlt_comm_allgather, per rank */
#define COMM_CHUNK_FLOATS 16384u /* the TCP all-reduce's unit: rank 0 sums one chunk of every rank at a time */

struct rlt_comm {
    int32_t n;
    double timeout_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* on CLOCK_MONOTONIC: the barrier waits with a deadline */
    int32_t arrived;     /* ranks at the barrier of generation gen (under mu) */
    uint64_t gen;
    uint64_t seen[RLT_COMM_MAX_RANKS]; /* gen + 1 when rank r arrived at generation gen (under mu) */
    int32_t aborted;     /* written under mu, read with __atomic loads where mu is not held */
    int32_t failed;      /* aborted because of a timeout or a lost peer: msg says which */
    int32_t devs_aborted;
    int32_t flags[RLT_COMM_MAX_RANKS];  /* rlt_comm_agree's inputs, read between its two barriers */
    float *bufs[RLT_COMM_MAX_RANKS];    /* rlt_comm_allreduce_mean's buffers, likewise */
    const void *src[RLT_COMM_MAX_RANKS]; /* rlt_comm_bcast's and rlt_comm_allgather's, likewise */
    void *devs[RLT_COMM_MAX_RANKS];
    rlt_comm_abort_fn abort_fn;
    char names[RLT_COMM_MAX_RANKS][24];
    char msg[1200]; /* under mu */
    /* Ranks as processes (comm_net.c). */
    int32_t net, rank;
    int fds[RLT_COMM_MAX_RANKS]; /* rank 0: fds[r] for each other rank r; another rank: fds[0] (-1: none) */
    char file[512];              /* the rendezvous file rank 0 wrote ("": none), removed at free */
    float *chunk;                /* rank 0: two chunks of COMM_CHUNK_FLOATS, the sum and one rank's part */
};

double comm_now(void);
/* A hint for timeout messages: NCCL's settings when device communicators are attached, else "". */
const char *comm_device_hint(const rlt_comm *c);
/* Records the first failure (printf-style) and aborts the comm for every rank. */
void comm_fail(rlt_comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The status of a call that found the comm aborted. */
int comm_aborted_status(rlt_comm *c);

/* The TCP transport (comm_net.c): the same collectives for this process's rank. */
int comm_net_agree(rlt_comm *c, int32_t flag, int32_t *any, const char *what);
int comm_net_allreduce_mean(rlt_comm *c, float *x, uint64_t n);
int comm_net_bcast(rlt_comm *c, void *buf, uint32_t bytes, const char *what);
int comm_net_allgather(rlt_comm *c, const void *mine, uint32_t bytes, void *all, const char *what);
/* Shuts every connection down (the abort: peers waiting on them see the end at once). */
void comm_net_shutdown(rlt_comm *c);
void comm_net_close(rlt_comm *c);

#endif
