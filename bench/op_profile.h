/* op_profile.h: where an update's time goes, op by op. op_profile_run swaps the agent's backend table for a
 * copy whose heavy ops synchronise before and after themselves and add their wall time to a per-op total,
 * runs the update's ops eagerly (no graph) `reps` times, restores the table and prints the totals per update.
 * Each figure is the op's device time plus one launch (a few microseconds): it finds the op that dominates,
 * it does not replace the graph-replay rate the benchmark reports. */
#ifndef RLT_BENCH_OP_PROFILE_H
#define RLT_BENCH_OP_PROFILE_H

#include "agent.h"

int op_profile_run(rlt_agent *ag, int32_t variant, int reps);

#endif
