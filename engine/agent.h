/* agent.h: the agent handle (internal): config, backend, memory plan, replay, the algorithm's state, and
 * the device-side counters and losses that captured updates read and write. */
#ifndef RLT_AGENT_H
#define RLT_AGENT_H

#include "../agents/dqn.h"
#include "../agents/td3.h"
#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "plan.h"
#include "replay.h"
#include "rng.h"

/* Device-side int64 counters (the values a captured graph must read at replay time). */
enum {
    RLT_CTR_UPDATE = 0,
    RLT_CTR_CRITIC_STEP = 1,
    RLT_CTR_ACTOR_STEP = 2,
    RLT_CTR_REPLAY_SIZE = 3,
    RLT_CTR_ENV_STEPS = 4, /* host-owned; stored here only in checkpoints */
    RLT_CTR_COUNT = 8
};
/* Device-side float losses of the latest update. */
enum { RLT_LOSS_Q1 = 0, RLT_LOSS_Q2 = 1, RLT_LOSS_ACTOR = 2, RLT_LOSS_COUNT = 4 };

struct rlt_agent;

/* An algorithm: the agent API's calls, specialised. agents/td3.c and agents/dqn.c each define one. */
typedef struct rlt_algo {
    const char *name;
    int32_t n_variants; /* update variants, each captured as its own graph (TD3: with and without actor step) */
    int (*check_spaces)(struct rlt_agent *ag, const rlt_space *obs, const rlt_space *act);
    int (*plan)(struct rlt_agent *ag); /* networks, batch buffers and replay fields; sets io_stage_bytes */
    int (*init_state)(struct rlt_agent *ag);
    int (*update_ops)(struct rlt_agent *ag, int32_t variant);
    int (*act)(struct rlt_agent *ag, const void *obs, int32_t n, int32_t explore, void *actions);
    int (*observe)(struct rlt_agent *ag, const void *obs, const void *actions, const float *rewards,
                   const void *next_obs, const uint8_t *terminated, const uint8_t *truncated, int32_t n);
    int (*update)(struct rlt_agent *ag, int32_t *done);
    uint64_t (*param_count)(const struct rlt_agent *ag);
} rlt_algo;

extern const rlt_algo rlt_algo_td3;
extern const rlt_algo rlt_algo_dqn;

struct rlt_agent {
    rlt_err err;
    rlt_config cfg;
    rlt_backend bk;
    int32_t backend_open;
    rlt_plan plan;
    rlt_plan_summary summary;
    rlt_space obs_space, act_space;
    float act_low[16], act_high[16];
    int32_t obs_dim, act_dim; /* elements per observation / per action */
    int32_t replay_obs_dtype; /* rlt_dtype replay stores observations as (replay.obs_dtype resolved) */
    rlt_replay replay;
    int64_t *counters;       /* device, RLT_CTR_COUNT */
    int64_t *counters_host;  /* host staging */
    float *losses;           /* device, RLT_LOSS_COUNT */
    float *losses_host;      /* host staging */
    float *io_stage;         /* host staging for acting, weight init and checkpoints */
    uint64_t io_stage_bytes;
    rlt_rng explore_rng;
    int64_t env_steps; /* transitions observed */
    int64_t updates;   /* updates run (host mirror of counters[RLT_CTR_UPDATE]) */
    int32_t graphs;    /* 1 when the updates were captured as graphs */
    int32_t precision_fallback; /* a reduced precision was asked for on a backend that computes fp32 */
    /* The compute type of the networks' dense layers: RLT_LP_F32, or RLT_LP_BF16 / RLT_LP_F16 on the GPU
     * (16-bit compute copies beside the fp32 masters; see agents/mlp.h). */
    int32_t lp;
    /* fp16's dynamic loss scaling state (device; NULL unless lp is RLT_LP_F16) and its host staging. */
    rlt_amp_state *amp;
    rlt_amp_state *amp_host;
    uint64_t allocs_at_seal;
    const rlt_algo *algo;
    rlt_td3 td3;
    rlt_dqn dqn;
    /* Checkpoint I/O state lives here (about 130 KiB), not on the caller's stack. */
    ckpt_writer ckpt_w;
    ckpt_reader ckpt_r;
};

/* Stage `bytes` of device memory into io_stage (synchronously) and back. */
int agent_fetch(struct rlt_agent *ag, void *host, const void *dev, uint64_t bytes);
int agent_put(struct rlt_agent *ag, void *dev, const void *host, uint64_t bytes);
/* Validates, picks the algorithm, checks spaces, opens the backend and builds the plan: everything but
 * the reservation (the planner stops here). */
int agent_prepare(struct rlt_agent *ag, const rlt_space *obs, const rlt_space *act);
/* Rebuilds the plan for the current ag->cfg (and the summary). */
int agent_plan_current(struct rlt_agent *ag);
/* Bytes of the budgeted arena in the current plan. */
uint64_t agent_plan_need(const struct rlt_agent *ag);
/* The agent's state in a checkpoint (engine/agent_io.c): write into an open writer, read from an open
 * reader (everything is checked before anything changes). */
int agent_write_state(struct rlt_agent *ag, ckpt_writer *w, int include_replay);
int agent_read_state(struct rlt_agent *ag, ckpt_reader *r, const char *path);
int agent_meta(const struct rlt_agent *ag, char *meta, size_t cap);
/* Runs one update of the given variant: replays its graph, or runs the ops eagerly. */
int agent_run_update(struct rlt_agent *ag, int32_t variant);
/* Observe-time staging rows (the replay's staging block). */
#define RLT_OBSERVE_STAGE_ROWS 256
/* fp16 loss scaling defaults (PyTorch's GradScaler): initial scale 2^16, doubled after 2000 finite steps,
 * halved on overflow. */
#define RLT_AMP_INIT_SCALE 65536.0f
#define RLT_AMP_GROWTH_INTERVAL 2000
/* The loss scale for mlp_backward's dout_scale: amp's scale with fp16, NULL otherwise. */
static inline const float *agent_loss_scale(const struct rlt_agent *ag) { return ag->amp ? &ag->amp->scale : NULL; }
/* fp16: unscale the gradient block and check it (amp_unscale); a no-op otherwise. */
int agent_amp_unscale(struct rlt_agent *ag, float *g, uint64_t n);
/* fp16: after an optimiser step given agent_amp_skip as its skip flag (amp_update); a no-op otherwise. */
int agent_amp_update(struct rlt_agent *ag, int64_t *step);
static inline const int32_t *agent_amp_skip(const struct rlt_agent *ag) { return ag->amp ? &ag->amp->found_inf : NULL; }
/* Rewrites the 16-bit compute copies from the fp32 masters n floats at p and t (after init and loads). */
int agent_refresh_lp(struct rlt_agent *ag, const float *p, void *p_lp, const float *t, void *t_lp, uint64_t n);
/* Reads the loss scaler's state back (one sync); zeros without fp16. */
int agent_read_amp(struct rlt_agent *ag, rlt_amp_state *out);
/* Reads the latest losses back (one sync); used only when printing. */
int agent_read_losses(struct rlt_agent *ag, float out[RLT_LOSS_COUNT]);

#endif
