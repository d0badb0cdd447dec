/* agent_core.h: the agent as the core and the algorithms see it: the handle's shared fields (config, backend,
 * plan, replay, device counters and losses, host staging) and the optimiser-step services an algorithm calls
 * (staging copies, the gradient average and fp16 loss scaling before a step, the 16-bit compute copies, config
 * values for network descriptions). Below agents/ and train/: neither the algorithm table nor the run layer is
 * named here; the run layer plugs its update dispatch in through run_update. */
#ifndef RLT_AGENT_CORE_H
#define RLT_AGENT_CORE_H

#include "backend.h"
#include "config.h"
#include "plan.h"
#include "replay.h"
#include "rng.h"
#include "text.h"

struct rlt_algo;
struct rlt_lockstep;
struct ckpt_writer;
struct ckpt_reader;

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
/* The update's scalar hyper-parameters in the device arena (the plan's "hparams" entry, ag->hparams), written once
 * at init from the config (agent_write_hparams): the update's ops read them from there (the descriptors' *_dev
 * pointers) rather than as values baked into a captured graph, so one graph batched over a population's members
 * (train/seed_batch.c) reads each member's own. Each float is the config value converted as the plain descriptor
 * field would be, so a single run computes the same bits either way. */
enum {
    RLT_HP_TD3_ACTOR_LR = 0,
    RLT_HP_TD3_CRITIC_LR = 1,
    RLT_HP_TD3_TAU = 2,
    RLT_HP_TD3_GAMMA = 3,
    RLT_HP_TD3_POLICY_NOISE = 4,
    RLT_HP_TD3_NOISE_CLIP = 5,
    RLT_HP_DQN_LR = 6,
    RLT_HP_DQN_GAMMA = 7,
    RLT_HP_DQN_MAX_GRAD_NORM = 8, /* 0 when dqn.max_grad_norm is (no clipping) */
    RLT_HP_COUNT = 16
};
/* The agent handle: the part every layer from here up shares (the run layer adds its own in train/agent.h). */
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
    int32_t act_rows;         /* the most rows one acting launch takes (the algorithm's acting batch; 1 with a conv torso) */
    int32_t replay_obs_dtype; /* rlt_dtype replay stores observations as (replay.obs_dtype resolved) */
    rlt_replay replay;
    int64_t *counters;       /* device, RLT_CTR_COUNT */
    int64_t *counters_host;  /* host staging */
    float *losses;           /* device, RLT_LOSS_COUNT */
    float *losses_host;      /* host staging */
    float *hparams;          /* device, RLT_HP_COUNT (see above) */
    float *io_stage;         /* host staging for acting, weight init and checkpoints */
    uint64_t io_stage_bytes;
    rlt_rng explore_rng;
    int64_t env_steps; /* transitions observed */
    int64_t updates;   /* updates run (host mirror of counters[RLT_CTR_UPDATE]) */
    int32_t graphs;    /* 1 when the updates were captured as graphs */
    /* Acting beside the updates (train/agent.c, the graph op's ASIDE modes): aside_ok 1 when this agent may (the
     * backend has an aside stream and the algorithm an act_beside; RLT_ACT_ASIDE=0 turns it off); aside_marked 1
     * while every update since the backend's aside mark left what acting reads as it was; acts and aside_acts count
     * the acting launches and those that ran beside an update (for the tests). */
    int32_t aside_ok, aside_marked;
    uint64_t acts, aside_acts;
    /* Seed batching (train/seed_batch.h): the group's seed table in the device arena (cfg.batch_seeds > 1; NULL
     * otherwise), and the lock-step that replaces this agent's own graph launches while its group runs batched
     * (NULL: its own). */
    void *seed_table;
    struct rlt_lockstep *lockstep;
    /* With cfg.batch_seeds > 1: this agent's transition store held for its group's next batched round (pinned host
     * memory at the same plan offset in every member; replay.defer points here while the round runs them). */
    rlt_copy_list *copy_list;
    int32_t precision_fallback; /* a reduced precision was asked for on a backend that computes fp32 */
    /* The compute type of the networks' dense layers: RLT_LP_F32, or RLT_LP_BF16 / RLT_LP_F16 on the GPU
     * (16-bit compute copies beside the fp32 masters; see agents/mlp.h). */
    int32_t lp;
    /* fp16's dynamic loss scaling state (device; NULL unless lp is RLT_LP_F16) and its host staging. */
    rlt_amp_state *amp;
    rlt_amp_state *amp_host;
    uint64_t allocs_at_seal;
    const struct rlt_algo *algo;
    /* Runs one update of the given variant (agent_run_update): set by the run layer at allocation (replays the
     * agent's graph, or runs the algorithm's ops eagerly, or joins its seed group's batched launch). */
    int (*run_update)(struct rlt_agent *ag, int32_t variant);
    /* Runs the device part of acting on `rows` observations staged in io_stage (agent_run_act): set by the run layer
     * at allocation (the algorithm's act_ops then a sync, or its seed group's batched acting). */
    int (*run_act)(struct rlt_agent *ag, int32_t rows);
    /* The algorithm's state (algo->state_bytes of the algo_state_cap carved beside the agent at allocation). */
    void *algo_state;
    uint64_t algo_state_cap;
    /* Checkpoint I/O state (about 130 KiB), carved beside the agent too rather than put on a caller's stack. */
    struct ckpt_writer *ckpt_w;
    struct ckpt_reader *ckpt_r;
    /* Floats of the optimiser block now being stepped that buckets already averaged (agent_grads_bucket); 0
     * between steps. */
    uint64_t bucket_done;
};

/* The algorithm's own state: the one way agents/ reach it. */
static inline void *agent_algo_state(const struct rlt_agent *ag) { return ag->algo_state; }

/* ---- services an algorithm's update and checkpoint hooks call (engine/agent_core.c) ---- */
/* Stage `bytes` of device memory into io_stage (synchronously) and back. */
int agent_fetch(struct rlt_agent *ag, void *host, const void *dev, uint64_t bytes);
int agent_put(struct rlt_agent *ag, void *dev, const void *host, uint64_t bytes);
/* out[RLT_HP_*] from config c, every slot (each algorithm reads its own); the slots past the last are 0. */
void agent_hparams_values(const rlt_config *c, float out[RLT_HP_COUNT]);
/* Writes agent_hparams_values of ag->cfg into ag->hparams (synchronously; at init). */
int agent_write_hparams(struct rlt_agent *ag);
/* Runs one update of the given variant: replays its graph, or runs the ops eagerly (ag->run_update). */
static inline int agent_run_update(struct rlt_agent *ag, int32_t variant) { return ag->run_update(ag, variant); }
/* Acting on rows observations staged at the start of io_stage (rows of the algorithm's acting batch at most): on
 * return their outputs are in io_stage at the algorithm's acting offset (its act_ops says where), and the device is
 * done with both (ag->run_act: the algorithm's act_ops and a sync, or a seed group's batched acting round). */
static inline int agent_run_act(struct rlt_agent *ag, int32_t rows) { return ag->run_act(ag, rows); }
/* Observe-time staging rows (the replay's staging block). */
#define RLT_OBSERVE_STAGE_ROWS 256
/* fp16 loss scaling defaults (PyTorch's GradScaler): initial scale 2^16, doubled after 2000 finite steps,
 * halved on overflow. */
#define RLT_AMP_INIT_SCALE 65536.0f
#define RLT_AMP_GROWTH_INTERVAL 2000
/* The loss scale for mlp_backward's dout_scale: amp's scale with fp16, NULL otherwise. */
static inline const float *agent_loss_scale(const struct rlt_agent *ag) { return ag->amp ? &ag->amp->scale : NULL; }
/* Before every optimiser step, on the gradient block it steps with: averages it over the ranks of a data-parallel
 * run (allreduce_mean; nothing without a group; or, when buckets averaged it during the backward, joins them), then with fp16 unscales and checks it (amp's UNSCALE). Every agent's
 * parameters are replicated on the ranks, so every rank takes the same step from the same gradient; and since the
 * check reads the average, every rank finds the same overflow and skips the same steps (its loss scale stays the
 * others'). */
int agent_grads_ready(struct rlt_agent *ag, float *g, uint64_t n);
/* Gradient buckets (dist.bucket_mb): the average overlapping the backward. agent_bucket_floats: the bucket's
 * minimum in floats when an optimiser block of n floats is averaged in buckets: a data-parallel run of two ranks
 * or more, dist.bucket_mb > 0 and n at least twice the minimum; 0 otherwise (one average in agent_grads_ready,
 * as with dist.bucket_mb 0). agent_grads_bucket (the callback agents/mlp.h's backward takes, ctx the agent):
 * averages n floats at g whose gradient is final, on the backend's comm lane while the backward goes on
 * (allreduce_mean async); agent_grads_ready then joins the buckets instead of averaging, and fails if they did
 * not cover its block exactly. Only the last micro-batch's backward may issue buckets. */
uint64_t agent_bucket_floats(const struct rlt_agent *ag, uint64_t n);
int agent_grads_bucket(void *ag, float *g, uint64_t n);
/* fp16: after an optimiser step given agent_amp_skip as its skip flag (amp's UPDATE); a no-op otherwise. */
int agent_amp_update(struct rlt_agent *ag, int64_t *step);
static inline const int32_t *agent_amp_skip(const struct rlt_agent *ag) { return ag->amp ? &ag->amp->found_inf : NULL; }
/* Rewrites the 16-bit compute copies from the fp32 masters n floats at p and t (after init and loads). */
int agent_refresh_lp(struct rlt_agent *ag, const float *p, void *p_lp, const float *t, void *t_lp, uint64_t n);
/* "hidden: [64, 64]": config key `key`'s value as the config dump writes it, under a short label (for
 * network_text). */
void agent_key_text(rlt_text *o, const struct rlt_agent *ag, const char *label, const char *key);

#endif
