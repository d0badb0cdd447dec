/* dp_bench.h: the --devices N and --procs N modes of bench_td3_update: the update of one agent with a batch of B,
 * first on one device alone, then data-parallel over N devices (N ranks, batch B / N each, gradients averaged
 * through NCCL inside each rank's captured update, as a data-parallel run does: train/seed_group.c). --devices:
 * the ranks are threads of this process (device: [cuda:0, ...]); --procs: one process per GPU (as torchrun
 * launches them), connected through the host comm over loopback, each making its own NCCL communicator from the id
 * rank 0 sends. Prints both rates in updates of the whole batch per second, and their ratio. N = 1 runs the second
 * phase through a NCCL communicator of one rank: the cost of the collective alone. With --device cpu the ranks
 * are CPU backends averaging through the host comm: the bench's own logic, checked in CI (bench_dp_*_cpu). */
#ifndef RLT_BENCH_DP_BENCH_H
#define RLT_BENCH_DP_BENCH_H

#include "agent.h"

typedef struct dp_bench {
    const char *name;
    rlt_config *cfg;                   /* the single agent's config (device cuda:0, batch B) */
    rlt_space os, as;
    void (*fill)(rlt_agent *ag, int obs_dim, int act_dim); /* the synthetic replay */
} dp_bench;

/* procs 0: the ranks are threads; 1: processes. */
int dp_bench_main(const dp_bench *b, int n, int updates, int procs);

#endif
