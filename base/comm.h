/* comm.h: the host side of a data-parallel group (several devices training one agent): R ranks that meet at
 * collective calls. The ranks are either threads of one process (rlt_comm_create: a barrier in memory) or one
 * process each, launched by torchrun, srun or mpirun (rlt_comm_connect: TCP to rank 0, a star). It gives the
 * ranks:
 * - an agreement (rlt_comm_any, rlt_comm_agree): every rank passes a flag, every rank gets their OR, so that a
 *   stop request or a failure ends all ranks at the same step and none waits forever in a gradient reduction;
 * - the gradient average of the CPU backend (rlt_comm_allreduce_mean): each rank's buffer replaced by the mean
 *   over the ranks, summed in rank order, the same bits on every rank and in both transports;
 * - rank 0's bytes to every rank (rlt_comm_bcast: NCCL's unique id) and every rank's row to every rank
 *   (rlt_comm_allgather: summary.csv);
 * - the device communicators a GPU backend made for the ranks (NCCL's), kept here with the function that aborts
 *   them, so that a rank that fails can release the others from a collective.
 * No call waits longer than the timeout (rlt_comm_set_timeout, dist.timeout_s): a rank that never arrives, or a
 * process that ended, fails the waiting call with RLT_ERUNTIME and a message (rlt_comm_errmsg) naming the rank,
 * what it waited for and whom, and the comm is aborted for every rank. Everything is allocated when the comm is
 * made; the collectives allocate nothing. A call made after rlt_comm_abort, or waiting when it comes, returns
 * RLT_EINTERRUPTED (RLT_ERUNTIME once the comm failed on a timeout or a lost peer). */
#ifndef RLT_COMM_H
#define RLT_COMM_H

#include <stdint.h>

#include "err.h"

#define RLT_COMM_MAX_RANKS 16
#define RLT_COMM_DEFAULT_TIMEOUT_S 300.0

typedef struct rlt_comm rlt_comm;
/* Aborts one device communicator (called by rlt_comm_abort with each non-NULL one). */
typedef void (*rlt_comm_abort_fn)(void *device_comm);

/* Where the ranks of a run launched as one process per device meet (rlt_comm_connect). */
typedef struct rlt_comm_net {
    int32_t rank, world;
    char host[256];  /* rank 0's address (a name or a literal); "" with file: this host's name */
    int32_t port;    /* the port rank 0 listens on; 0 with file: any free one, written to the file */
    char file[512];  /* "" or a path every rank sees: rank 0 writes "host port" there, the others read it */
    double timeout_s;
} rlt_comm_net;

/* A communicator of n ranks in this process (1 .. RLT_COMM_MAX_RANKS), or NULL when out of memory or n is out of
 * range. The timeout starts at RLT_COMM_DEFAULT_TIMEOUT_S. */
rlt_comm *rlt_comm_create(int32_t n);
/* This process as rank d->rank of d->world ranks, one per process: rank 0 listens and the others connect, each
 * waiting at most d->timeout_s for the rest. *out is NULL on failure, with the reason in e. */
int rlt_comm_connect(const rlt_comm_net *d, rlt_comm **out, rlt_err *e);
void rlt_comm_free(rlt_comm *c);
int32_t rlt_comm_size(const rlt_comm *c);
/* 1 when the ranks are processes (rlt_comm_connect): only rlt_comm_net.rank is in this one. */
int32_t rlt_comm_is_net(const rlt_comm *c);
void rlt_comm_set_timeout(rlt_comm *c, double seconds);
/* The name of rank r's device, for messages ("cuda:1"); set for the ranks of this process. */
void rlt_comm_set_name(rlt_comm *c, int32_t rank, const char *name);
/* The device communicator of each rank and the function that aborts one (set once, before the ranks start);
 * entries of ranks in other processes are NULL. */
void rlt_comm_set_device(rlt_comm *c, void *const *device_comms, rlt_comm_abort_fn abort_fn);
void *rlt_comm_device(const rlt_comm *c, int32_t rank);
/* Collective: *any = 1 when some rank passed a nonzero flag, else 0. `what` names the agreement in a timeout
 * message ("the agreement after start-up"); rlt_comm_any is the stop agreement at the start of a step. */
int rlt_comm_agree(rlt_comm *c, int32_t rank, int32_t flag, int32_t *any, const char *what);
int rlt_comm_any(rlt_comm *c, int32_t rank, int32_t flag, int32_t *any);
/* Collective: x[0..n) = the mean of every rank's x (n the same on every rank), summed in rank order then
 * divided by the number of ranks. */
int rlt_comm_allreduce_mean(rlt_comm *c, int32_t rank, float *x, uint64_t n);
/* Collective: rank 0's buf[0..bytes) to every rank (bytes the same on every rank, at most 4096). */
int rlt_comm_bcast(rlt_comm *c, int32_t rank, void *buf, uint32_t bytes, const char *what);
/* Collective: all[r * bytes ..) = rank r's mine[0..bytes) on every rank (bytes at most 4096). */
int rlt_comm_allgather(rlt_comm *c, int32_t rank, const void *mine, uint32_t bytes, void *all, const char *what);
/* Wakes every rank waiting in a collective and fails every later one; aborts the device communicators once;
 * on processes, closes the connections so that the other processes fail at once. Safe from any thread, any
 * number of times. */
void rlt_comm_abort(rlt_comm *c);
int32_t rlt_comm_aborted(rlt_comm *c);
/* Why the comm failed: a timeout or a lost peer, "" when it did not fail (or was only aborted). */
const char *rlt_comm_errmsg(rlt_comm *c);

#endif
