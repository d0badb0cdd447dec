/* launch.h: where the processes of a data-parallel run launched as one process per device meet
 * (dist.rendezvous), for the seed group's communicator (train/seed_group.c). */
#ifndef RLT_LAUNCH_H
#define RLT_LAUNCH_H

#include "comm.h"
#include "config.h"

/* cfg's launch rank and world, dist.timeout_s and rank 0's address from dist.rendezvous into *out:
 * env: MASTER_ADDR and MASTER_PORT (MASTER_PORT + 1 under torchrun, whose agent holds MASTER_PORT itself), under
 *      Slurm without them SLURM_LAUNCH_NODE_IPADDR and a port made from SLURM_JOB_ID;
 * tcp://HOST:PORT; file:PATH (rank 0 writes its address there; MASTER_ADDR, if set, is the address it gives).
 * RLT_ECONFIG naming dist.rendezvous when none of them gives an address. */
int launch_rendezvous(const rlt_config *cfg, rlt_comm_net *out, rlt_err *e);

#endif
