/* seed_bench.h: the --seeds N mode of bench_td3_update and bench_dqn_update: N agents of one benchmark, each
 * made, trained and freed in a thread of its own, as a seed group runs its members (train/seed_group.c). It
 * times one agent alone as a single run makes it (the single-agent figure, in the same process, freed before the
 * others are made), then the N at once as a group makes them (one lane each, CUDA_DEVICE_MAX_CONNECTIONS 32 unless
 * set), each running the same number of updates, and on a GPU the N again with one batched update graph for all
 * (train.seed_batching: train/seed_batch.h), in lock-step, and that graph launched from one thread with no
 * lock-step (the GPU's side alone); it prints every rate and its ratio to the single agent. With the environment
 * variable RLT_SEED_BENCH_BATCHED_ONLY set it runs only that last phase, for a profiler (the agents' set-up still
 * launches their own kernels first: filter on the batched variants, docs/benchmarks.md). */
#ifndef RLT_BENCH_SEED_BENCH_H
#define RLT_BENCH_SEED_BENCH_H

#include "agent.h"

typedef struct seed_bench {
    const char *name; /* "td3_update" */
    void *ctx;        /* the benchmark's settings, passed back to its functions */
    /* Makes agent k (seed k + 1) with at most `lanes` lanes (0: the backend's choice), room for a batched graph of
     * batch_seeds agents (0: none; rlt_config.batch_seeds) and fills its replay (in the thread that runs it); NULL
     * after printing why. */
    rlt_agent *(*setup)(void *ctx, int k, int lanes, int batch_seeds);
    /* Runs `updates` updates and waits for the device; returns the count run, or -1 after printing why. */
    long (*run)(void *ctx, rlt_agent *ag, int updates);
} seed_bench;

/* Agent k of a setup (seed k + 1) from the benchmark's config, given what a seed group gives members that share the
 * GPU: at most `lanes` lanes, room for a batched graph of batch_seeds agents, and with batch_seeds > 1 the batched
 * agents' arena span with k as its slot. NULL after printing why. */
rlt_agent *seed_bench_agent(const rlt_config *base, const rlt_space *os, const rlt_space *as, int k, int lanes,
                            int batch_seeds);

/* Runs the benchmark with n agents; returns the process exit code (0, or 1 when an agent failed). */
int seed_bench_main(const seed_bench *b, int n, int updates);

#endif
