/* seed_batch.h: one update graph for the agents of a seed group that share a GPU.
 *
 * The agents of a group have one config but the seed, so their plans are identical: buffer X sits at the same
 * offset of every agent's device arena. The leading agent captures each update variant once more with the
 * backend's seed_batch on: every kernel then runs for all n agents at once (grid z = the agent), each block moving
 * the lead's pointers by that agent's arena offset and keying its random streams with that agent's seed. Block z
 * does for agent z exactly what the agent's own graph does, so the results are the same bits; the GPU runs one
 * launch of n agents' tiles instead of n launches, which is what tiny layers (a CartPole MLP) are bound by.
 *
 * Batched graphs need the agents in lock-step: each agent's update k must be ready before the launch that runs
 * them all. The lock-step (rlt_lockstep) is a barrier in agent_run_update: an agent arriving at an update waits
 * for the others; the last to arrive launches the batched graph after every agent's earlier work (events) and
 * orders every agent's later work after it. An agent that finishes its run leaves; the rest go on without it (the
 * batched graph still updates its arena, which nothing reads any more). */
#ifndef RLT_SEED_BATCH_H
#define RLT_SEED_BATCH_H

#include <stdint.h>

struct rlt_agent;
typedef struct rlt_lockstep rlt_lockstep;

/* Graph slots of the batched variants: the agent's own variants use the slots below this. */
#define SEED_BATCH_SLOT0 4
/* The most agents one batched graph covers (the capture's table is built on the stack). */
#define SEED_BATCH_MAX 64

/* Bytes of the seed table for n agents (int64 arena offsets, then uint64 seeds). */
uint64_t seed_batch_table_bytes(int32_t n);

/* Captures lead's update variants batched over agents[0..n) (agents[0] == lead, all initialised with graphs, on
 * one GPU, with identical plans, cfg.batch_seeds >= n, n <= SEED_BATCH_MAX) and makes the lock-step that launches
 * them (*ls, detached). RLT_OK; otherwise an error status with the reason in why and *ls NULL (the agents then keep
 * their own graphs; nothing else changed). */
int seed_batch_capture(struct rlt_agent *const *agents, int32_t n, rlt_lockstep **ls, char *why, size_t cap);

/* A lock-step over agents[0..n) (agents[0] led the capture; seed_batch_capture makes it); NULL when out of memory.
 * Attach sets every agent's lockstep; detach clears them (agents must not be updating). Free releases the lock-step
 * alone and never reads its agents, which may be freed by then: detach first, while they live. */
rlt_lockstep *lockstep_new(struct rlt_agent *const *agents, int32_t n);
void lockstep_attach(rlt_lockstep *ls);
void lockstep_detach(rlt_lockstep *ls);
void lockstep_free(rlt_lockstep *ls);
/* In agent_run_update: waits for the other active agents to reach their update, all of the same variant; the last
 * to arrive launches the batched graph. An error (variants out of step, a failed launch) is reported to every
 * agent waiting in that round and to all later calls. */
int lockstep_update(rlt_lockstep *ls, struct rlt_agent *ag, int32_t variant);
/* One agent's run is over: the others stop waiting for it. */
void lockstep_leave(rlt_lockstep *ls);

#endif
