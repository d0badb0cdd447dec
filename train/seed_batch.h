/* seed_batch.h: one update graph and one acting graph for the agents of a seed group that share a GPU.
 *
 * The agents of a group have one config but the seed, so their plans are identical: buffer X sits at the same
 * offset of every agent's device arena. The leading agent captures each update variant once more with the
 * backend's seed_batch on: every kernel then runs for all n agents at once (grid z = the agent), each block moving
 * the lead's pointers by that agent's arena offset and keying its random streams with that agent's seed. Block z
 * does for agent z exactly what the agent's own graph does, so the results are the same bits; the GPU runs one
 * launch of n agents' tiles instead of n launches, which is what tiny layers (a CartPole MLP) are bound by.
 *
 * Acting is captured the same way, in exact mode (no batched library product, so each agent's forward is its single
 * run's bits), for the rows an agent acts on in training (env.num_envs) and in evaluation (eval_rows): the copies of the
 * observations in and the outputs out become one kernel each that reaches every agent's pinned host staging through
 * unified addressing, with the agent's host arena offset from the lead's beside its device one in the table. The
 * exploration noise and epsilon-greedy draws stay on the host in each agent's thread, from its own stream.
 *
 * Batched graphs need the agents in lock-step (rlt_lockstep). An agent arriving at an update or an acting chunk the
 * group captured waits until every agent still running has arrived at one of the two; the last to arrive launches:
 * if any agent waits to act, the acting graph of the lowest slot asked for, then one sync for the whole group, and
 * the agents that asked for it go on, their outputs in their staging (the others, still waiting, get theirs in a
 * later round: outputs never land on staged observations); otherwise the batched update, after every agent's
 * earlier work (events), ordering every agent's later work after it. Agents that arrive at different things
 * (evaluation episodes of different lengths, one agent's update while another still acts) so never deadlock, and
 * nothing launches while an agent is outside the lock-step (stepping its environment, storing its transitions), so
 * each agent's own stream and staging are its own there. An agent that finishes its run leaves; the rest go on
 * without it (the batched graphs still compute its arena, which nothing reads any more).
 *
 * Transition stores: while attached, each agent's replay holds its host-to-device copies in the agent's copy list
 * (replay.defer, pinned host memory) instead of issuing them, one per field and one for the size, from every agent's
 * thread into one context. The next round, acting or update, starts with one launch on the lead's stream that runs
 * every agent's list (rlt_backend_ops.copy_lists), syncs, and empties the lists: so the update samples the newest
 * transitions, and no agent stages or holds again before the launch has read them. What an agent holds when it does
 * something else (a checkpoint, a second observe without a round, leaving) it issues itself first (replay_settle).
 * The bytes are the ones its own copies would have written, so each agent's replay is its single run's. */
#ifndef RLT_SEED_BATCH_H
#define RLT_SEED_BATCH_H

#include <stdint.h>

struct rlt_agent;
typedef struct rlt_lockstep rlt_lockstep;

/* Graph slots of the batched variants: the agent's own variants use the slots below this; the acting graphs follow
 * the batched variants. */
#define SEED_BATCH_SLOT0 4
/* The most agents one batched graph covers: a group's most seeds (RLT_CFG_MAX_SEEDS; the capture's table is built on
 * the stack). */
#define SEED_BATCH_MAX 256
/* Acting graphs: the training's rows (env.num_envs) and evaluation's (the trainer's eval_rows). */
#define SEED_BATCH_ACTS 2

/* Bytes of the seed table for n agents (int64 device arena offsets, uint64 seeds, int64 host arena offsets). */
uint64_t seed_batch_table_bytes(int32_t n);

/* How member k of a group of n made from config `group` runs beside the others, set in *m (the member's config so
 * far; the arena span is the caller's): members sharing a GPU each run their update on one lane; with
 * train.seed_batching on GPUs, not data-parallel (dp 0) and with no population key that keeps members apart
 * (batchable), the members of one entry of devices (member k on devices[k mod d]; all of them with one device)
 * share a batched graph: batch_seeds (that entry's members) and arena_slot k / d (k with one device), the entry's
 * first member (slot 0) leading it with the lanes of a single run. Returns 1 when the member is batched.
 * seed_group.c makes its members with it, and rlt_plan_group (planner.c) plans them with it. */
struct rlt_config;
/* The batches a group of n makes (member k in batch k mod the count, on devices[k mod d]): one per entry of devices (1
 * with one device), times train.seed_batches on each (0: seed_batch_auto of the seeds a device has; at least two
 * seeds a batch, at most RLT_CFG_MAX_DEVICES batches in all); 1 when data-parallel. */
int32_t seed_batch_count(const struct rlt_config *group, int32_t n, int dp);
/* The batches train.seed_batches 0 asks for on a device with per_device seeds of group: one for every 4 seeds, at most
 * 4, or 2 where a seed's update is large (TD3 256-256 at batch 256). When their leading seeds do not fit,
 * rlt_group_init and rlt_plan_group take fewer (seed_batch_fewer). */
int32_t seed_batch_auto(const struct rlt_config *group, int32_t per_device);
/* seed_batch_count for each device (each entry of devices, or the one device). */
int32_t seed_batch_per_device(const struct rlt_config *group, int32_t n, int dp);
/* With train.seed_batches 0 (auto_asked: the group's config asked for it) and more than one batch a device: the
 * batches a device to try next when these leads did not fit (half as many), written into group->train.seed_batches;
 * 0 when there is nothing fewer to try. */
int32_t seed_batch_fewer(struct rlt_config *group, int32_t n, int dp, int auto_asked);
/* The batches a GPU that group's seeds form as rlt_plan_group plans them (planner.c): train.seed_batches, or for 0
 * seed_batch_auto's count halved while the leads and the other seeds exceed memory.budget_mb (each candidate planned
 * once: a lead and another seed). rlt_group_init starts from it. */
int32_t plan_group_batches(const struct rlt_config *group);
int seed_batch_member(const struct rlt_config *group, int32_t n, int32_t k, int dp, int batchable, struct rlt_config *m);

/* Captures lead's update variants batched over agents[0..n) (agents[0] == lead, all initialised with graphs, on
 * one GPU, with identical plans, cfg.batch_seeds >= n, n <= SEED_BATCH_MAX), then its acting, and makes the
 * lock-step that launches them (*ls, detached). RLT_OK; otherwise an error status with the reason in why and *ls
 * NULL (the agents then keep their own graphs; nothing else changed). eval_rows: the rows an evaluation step acts
 * on (train/trainer_eval.c), captured beside the training's. Acting that cannot be captured batched leaves
 * the update batched and each agent acting on its own (lockstep_act_why says why). */
int seed_batch_capture(struct rlt_agent *const *agents, int32_t n, int32_t eval_rows, rlt_lockstep **ls, char *why,
                       size_t cap);

/* A lock-step over agents[0..n) (agents[0] led the capture; seed_batch_capture makes it), with no acting graph;
 * NULL when out of memory. Attach sets every agent's lockstep; detach clears them (agents must not be updating).
 * Free releases the lock-step alone and never reads its agents, which may be freed by then: detach first, while
 * they live. */
rlt_lockstep *lockstep_new(struct rlt_agent *const *agents, int32_t n);
/* How its waiters wait, from the seed threads in the process (all batches of a group; lockstep_new assumes n): they
 * spin and yield while the cores outnumber those threads by an eighth (at least 2), yield alone from twice as many
 * threads as cores or when there are at most LOCKSTEP_YIELD_MAX threads, else sleep on a futex until the round that
 * serves them (RLT_SEEDS_WAIT=spin|yield|sleep|spin_sleep forces one way). */
#define LOCKSTEP_YIELD_MAX 16
void lockstep_set_threads(rlt_lockstep *ls, int32_t threads);
/* 1 when its waiters sleep (lockstep_set_threads). */
int lockstep_sleeps(const rlt_lockstep *ls);
/* 1 when its waiters yield from the start, without spinning or sleeping (lockstep_set_threads). */
int lockstep_yields(const rlt_lockstep *ls);
/* Whether acting rounds may run beside the batched updates that leave the policies as they were (the lead's graph op,
 * ASIDE modes; the lead's algorithm's act_beside says which): seed_batch_capture sets it when the lead may act aside
 * and acting is captured. */
void lockstep_set_aside(rlt_lockstep *ls, int aside);
/* Adds an acting graph for `rows` rows in graph slot `slot` of the lead (captured batched by the caller). */
int lockstep_add_act(rlt_lockstep *ls, int32_t rows, int32_t slot);
/* Rounds run the agents' held transition stores (rlt_backend_ops.copy_lists, every agent's copy_list set; the seed
 * table's host deltas on the device): attach then points each agent's replay.defer at its list. */
void lockstep_set_store(rlt_lockstep *ls, const int64_t *host_delta);
void lockstep_attach(rlt_lockstep *ls);
void lockstep_detach(rlt_lockstep *ls);
void lockstep_free(rlt_lockstep *ls);
/* In agent_run_update: waits for a round that runs this agent's update (see the top); all agents waiting to update
 * when the update launches must ask for the same variant. An error (variants out of step, a failed launch) is
 * reported to every agent waiting in that round and to all later calls. */
int lockstep_update(rlt_lockstep *ls, struct rlt_agent *ag, int32_t variant);
/* In agent_run_act: *served 1 when a batched acting round ran this agent's chunk of `rows` rows staged in its
 * io_stage (the outputs are in its staging, the device is done); *served 0 without waiting when the group captured
 * no acting for that many rows (the agent then acts on its own). Errors as lockstep_update's. */
int lockstep_act(rlt_lockstep *ls, struct rlt_agent *ag, int32_t rows, int *served);
/* One agent's run is over: the others stop waiting for it. */
void lockstep_leave(rlt_lockstep *ls);
/* The row counts the group acts on batched (into rows[SEED_BATCH_ACTS]), how many; "" when every capture of acting
 * succeeded, else why one did not (those rows each agent acts on its own); and the rounds run so far: acting,
 * update, and (store_rounds, may be NULL) those that ran the agents' held transition stores, UINT64_MAX when each
 * agent issues its own. */
int32_t lockstep_acts(const rlt_lockstep *ls, int32_t *rows);
const char *lockstep_act_why(const rlt_lockstep *ls);
void lockstep_rounds(rlt_lockstep *ls, uint64_t *act_rounds, uint64_t *update_rounds, uint64_t *store_rounds);
/* The acting rounds that ran beside a batched update (the lead's graph op, ASIDE modes: every update since the last one that
 * changed the policies left them as they were, TD3's critic-only updates). */
uint64_t lockstep_aside_rounds(rlt_lockstep *ls);
/* Where the rounds' time went, in seconds summed over the rounds, for acting [0] and update [1] rounds: first_s from
 * the end of the round before to the first agent's arrival (what every agent pays before it is back: its wake-up, the
 * launching agent's return), gap_s to the last agent's arrival (the slowest agent's own work between rounds: its
 * environment's step, its staging), run_s from that arrival to the launch's return (with its sync where the round
 * syncs). */
void lockstep_times(rlt_lockstep *ls, double first_s[2], double gap_s[2], double run_s[2]);

#endif
