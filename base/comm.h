/* comm.h: the host side of a data-parallel group (several devices training one agent): R ranks, one thread
 * each, that meet at collective calls. It gives the ranks three things:
 * - an agreement (rlt_comm_any): every rank passes a flag, every rank gets their OR, so that a stop request
 *   or a failure ends all ranks at the same step and none waits forever in a gradient reduction;
 * - the gradient average of the CPU backend (rlt_comm_allreduce_mean): each rank's buffer replaced by the
 *   mean over the ranks, summed in rank order, the same bits on every rank;
 * - the device communicators a GPU backend made for the ranks (NCCL's, one per rank), kept here with the
 *   function that aborts them, so that a rank that fails can release the others from a collective.
 * Everything is allocated by rlt_comm_create, before any rank trains; the collectives allocate nothing.
 * A call made after rlt_comm_abort, or waiting when it comes, returns RLT_EINTERRUPTED. */
#ifndef RLT_COMM_H
#define RLT_COMM_H

#include <stdint.h>

#define RLT_COMM_MAX_RANKS 16

typedef struct rlt_comm rlt_comm;
/* Aborts one device communicator (called by rlt_comm_abort with each non-NULL one). */
typedef void (*rlt_comm_abort_fn)(void *device_comm);

/* A communicator of n ranks (1 .. RLT_COMM_MAX_RANKS), or NULL when out of memory or n is out of range. */
rlt_comm *rlt_comm_create(int32_t n);
void rlt_comm_free(rlt_comm *c);
int32_t rlt_comm_size(const rlt_comm *c);
/* The device communicator of each rank and the function that aborts one (set once, before the ranks start). */
void rlt_comm_set_device(rlt_comm *c, void *const *device_comms, rlt_comm_abort_fn abort_fn);
void *rlt_comm_device(const rlt_comm *c, int32_t rank);
/* Collective: *any = 1 when some rank passed a nonzero flag, else 0. */
int rlt_comm_any(rlt_comm *c, int32_t rank, int32_t flag, int32_t *any);
/* Collective: x[0..n) = the mean of every rank's x (n the same on every rank), summed in rank order then
 * divided by the number of ranks. */
int rlt_comm_allreduce_mean(rlt_comm *c, int32_t rank, float *x, uint64_t n);
/* Wakes every rank waiting in a collective and fails every later one; aborts the device communicators once.
 * Safe from any thread, any number of times. */
void rlt_comm_abort(rlt_comm *c);
int32_t rlt_comm_aborted(rlt_comm *c);

#endif
