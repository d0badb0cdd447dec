/* agent.h: the agent handle (internal), run-layer side: the agent's lifecycle, planning and checkpoint
 * state. The handle itself and what algorithms see of it are in algo.h; this header adds what only the run
 * layer (agent.c, agent_io.c, trainer*.c, planner.c) uses. */
#ifndef RLT_AGENT_H
#define RLT_AGENT_H

#include "algo.h"
#include "checkpoint.h"

/* A zeroed agent with room for the state of the algorithm cfg->algo names (none when no algorithm has that
 * name: agent_prepare then reports it) and the checkpoint I/O state; NULL when out of memory. Only the
 * name is read from cfg. Free with rlt_mem_free (or rlt_agent_free once the backend is open). */
struct rlt_agent *agent_alloc(const rlt_config *cfg);
/* Validates, picks the algorithm, checks spaces, opens the backend and builds the plan: everything but
 * the reservation (the planner stops here). */
int agent_prepare(struct rlt_agent *ag, const rlt_space *obs, const rlt_space *act);
/* Before an update of `variant` on ag's lane 0 (its own, or its seed group's batched one with ag the lead): with ok
 * (the agent or group may act beside updates), marks lane 0 (the graph op's ASIDE_MARK) at the first update that
 * leaves what acting reads as it was (rlt_algo.act_beside) and sets *marked, so that acting until the next other
 * update runs beside it; clears *marked at an update that does not (or without ok). */
int agent_aside_before(struct rlt_agent *ag, int ok, int32_t *marked, int32_t variant);
/* Rebuilds the plan for the current ag->cfg (and the summary). */
int agent_plan_current(struct rlt_agent *ag);
/* Bytes of the budgeted arena in the current plan. */
uint64_t agent_plan_need(const struct rlt_agent *ag);
/* Bytes of the plan's library workspace ("backend.workspace": a plan has one only when some op of it calls
 * cuBLAS), and where it lies once the plan is reserved (*at may be NULL). */
uint64_t agent_plan_workspace(const struct rlt_agent *ag, void **at);
/* The agent's state in a checkpoint (train/agent_io.c): write into an open writer, read from an open
 * reader (everything is checked before anything changes). */
int agent_write_state(struct rlt_agent *ag, ckpt_writer *w, int include_replay);
int agent_read_state(struct rlt_agent *ag, ckpt_reader *r, const char *path);
int agent_meta(const struct rlt_agent *ag, char *meta, size_t cap);
/* Reads the loss scaler's state back (one sync); zeros without fp16. */
int agent_read_amp(struct rlt_agent *ag, rlt_amp_state *out);
/* Reads the latest losses back (one sync); used only when printing. */
int agent_read_losses(struct rlt_agent *ag, float out[RLT_LOSS_COUNT]);

#endif
