/* algo.h: the algorithm boundary. What an algorithm (agents/) sees of the agent (the config, backend, plan,
 * replay, device counters and losses, host staging), the rlt_algo table through which the run layer
 * (agent.c, agent_io.c, trainer.c, planner.c) calls it, and the registry that finds one by name.
 *
 * An algorithm owns its state: it declares state_bytes, the agent carves that many bytes beside itself at
 * allocation (so nothing is allocated after init), and the algorithm reaches them through
 * agent_algo_state(). Adding an algorithm is a folder's worth of code in agents/ and one line in
 * agents/registry.c; nothing above this header names it. */
#ifndef RLT_ALGO_H
#define RLT_ALGO_H

#include "backend.h"
#include "config.h"
#include "plan.h"
#include "replay.h"
#include "rng.h"
#include "text.h"

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
/* Host words an algorithm may keep in a checkpoint's "agent.host" tensor (words 4 and 5 of it). */
#define RLT_ALGO_HOST_WORDS 2
/* Loss columns an algorithm may write to metrics.csv. */
#define RLT_ALGO_MAX_LOSS_COLUMNS 4
/* Algorithms the registry holds, built in and registered at run time together. */
#define RLT_ALGO_MAX 8

struct rlt_agent;
struct ckpt_writer;
struct ckpt_reader;

/* An algorithm: the agent API's calls, specialised, and what the run layer needs to know about it.
 * agents/td3.c and agents/dqn.c each define one; agents/registry.c lists them. Hooks marked optional may be
 * NULL. */
typedef struct rlt_algo {
    const char *name;     /* the config's `algo` value */
    uint64_t state_bytes; /* the algorithm's own state, reached through agent_algo_state() */
    int32_t n_variants;   /* update variants, each captured as its own graph (TD3: with and without actor step) */
    /* Replay needs: the smallest replay.capacity this algorithm works with (the planner's floor). */
    int64_t min_replay_capacity;
    /* The config key of the env step before which no update runs (TD3: train.start_steps), for the run layer's
     * warning about a run that ends before it. */
    const char *first_update_key;
    /* Metrics: the loss columns of metrics.csv, and their values from the latest device losses. */
    int32_t n_loss_columns;
    const char *loss_columns[RLT_ALGO_MAX_LOSS_COLUMNS];
    void (*loss_values)(const float losses[RLT_LOSS_COUNT], double *out);
    int (*check_spaces)(struct rlt_agent *ag, const rlt_space *obs, const rlt_space *act);
    int (*plan)(struct rlt_agent *ag); /* networks, batch buffers and replay fields; sets io_stage_bytes */
    int (*init_state)(struct rlt_agent *ag);
    int (*update_ops)(struct rlt_agent *ag, int32_t variant);
    int (*act)(struct rlt_agent *ag, const void *obs, int32_t n, int32_t explore, void *actions);
    int (*observe)(struct rlt_agent *ag, const void *obs, const void *actions, const float *rewards,
                   const void *next_obs, const uint8_t *terminated, const uint8_t *truncated, int32_t n);
    int (*update)(struct rlt_agent *ag, int32_t *done);
    uint64_t (*param_count)(const struct rlt_agent *ag); /* floats of one parameter tensor, padding included */
    /* Optional: the parameter tensor's blocks (each layer's weights, each layer's biases, network after
     * network) as float counts in layout order, each starting at a multiple of RLT_PARAM_ALIGN floats
     * (engine/plan.h). Checkpoints written before that padding hold the blocks back to back; with this hook
     * they are loaded into the padded layout. Returns the count, or -1 when there are more than cap. */
    int32_t (*param_blocks)(const struct rlt_agent *ag, uint64_t *sizes, int32_t cap);
    /* Checkpoints. network_text describes the networks as text ("agent.network"), so a checkpoint made with
     * another network is refused by name even when the tensor sizes agree; after_load rebuilds what is not
     * saved (the 16-bit compute copies) from the tensors just loaded. */
    void (*network_text)(const struct rlt_agent *ag, rlt_text *o);
    int (*after_load)(struct rlt_agent *ag);
    /* Optional: the algorithm's host words in "agent.host" (zeros without these hooks). host_check sees the
     * words and the replay position and size before anything is loaded, and replaces the run layer's check
     * of a ring filled in order; host_load takes them once everything checked out. */
    void (*host_save)(const struct rlt_agent *ag, int64_t words[RLT_ALGO_HOST_WORDS]);
    int (*host_check)(struct rlt_agent *ag, const char *path, const int64_t words[RLT_ALGO_HOST_WORDS],
                      int64_t replay_pos, int64_t replay_size, int with_replay);
    void (*host_load)(struct rlt_agent *ag, const int64_t words[RLT_ALGO_HOST_WORDS], int with_replay);
} rlt_algo;

/* The agent handle: the part every layer from here up shares. */
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
    /* Seed batching (train/seed_batch.h): the group's seed table in the device arena (cfg.batch_seeds > 1; NULL
     * otherwise), and the lock-step that replaces this agent's own graph launches while its group runs batched
     * (NULL: its own). */
    void *seed_table;
    struct rlt_lockstep *lockstep;
    int32_t precision_fallback; /* a reduced precision was asked for on a backend that computes fp32 */
    /* The compute type of the networks' dense layers: RLT_LP_F32, or RLT_LP_BF16 / RLT_LP_F16 on the GPU
     * (16-bit compute copies beside the fp32 masters; see agents/mlp.h). */
    int32_t lp;
    /* fp16's dynamic loss scaling state (device; NULL unless lp is RLT_LP_F16) and its host staging. */
    rlt_amp_state *amp;
    rlt_amp_state *amp_host;
    uint64_t allocs_at_seal;
    const rlt_algo *algo;
    /* The algorithm's state (algo->state_bytes of the algo_state_cap carved beside the agent at allocation). */
    void *algo_state;
    uint64_t algo_state_cap;
    /* Checkpoint I/O state (about 130 KiB), carved beside the agent too rather than put on a caller's stack. */
    struct ckpt_writer *ckpt_w;
    struct ckpt_reader *ckpt_r;
};

/* The algorithm's own state: the one way agents/ reach it. */
static inline void *agent_algo_state(const struct rlt_agent *ag) { return ag->algo_state; }

/* ---- helpers the run layer gives algorithms (train/agent.c) ---- */
/* Stage `bytes` of device memory into io_stage (synchronously) and back. */
int agent_fetch(struct rlt_agent *ag, void *host, const void *dev, uint64_t bytes);
int agent_put(struct rlt_agent *ag, void *dev, const void *host, uint64_t bytes);
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
/* Before every optimiser step, on the gradient block it steps with: averages it over the ranks of a data-parallel
 * run (allreduce_mean; nothing without a group), then with fp16 unscales and checks it (amp_unscale). Every agent's
 * parameters are replicated on the ranks, so every rank takes the same step from the same gradient; and since the
 * check reads the average, every rank finds the same overflow and skips the same steps (its loss scale stays the
 * others'). */
int agent_grads_ready(struct rlt_agent *ag, float *g, uint64_t n);
/* fp16: after an optimiser step given agent_amp_skip as its skip flag (amp_update); a no-op otherwise. */
int agent_amp_update(struct rlt_agent *ag, int64_t *step);
static inline const int32_t *agent_amp_skip(const struct rlt_agent *ag) { return ag->amp ? &ag->amp->found_inf : NULL; }
/* Rewrites the 16-bit compute copies from the fp32 masters n floats at p and t (after init and loads). */
int agent_refresh_lp(struct rlt_agent *ag, const float *p, void *p_lp, const float *t, void *t_lp, uint64_t n);
/* "hidden: [64, 64]": config key `key`'s value as the config dump writes it, under a short label (for
 * network_text). */
void agent_key_text(rlt_text *o, const struct rlt_agent *ag, const char *label, const char *key);

/* ---- the registry (agents/registry.c) ---- */
/* The algorithm called `name`, or NULL. */
const rlt_algo *algo_registry_find(const char *name);
/* The same, or RLT_ECONFIG in e naming the registered algorithms. */
int algo_registry_lookup(const char *name, const rlt_algo **out, rlt_err *e);
/* "td3, dqn": the registered names; returns the length it needed. */
size_t algo_registry_names(char *buf, size_t cap);
int32_t algo_registry_count(void);
const rlt_algo *algo_registry_at(int32_t i);
/* Adds an algorithm at run time (a test's, an embedder's) before any agent uses it. RLT_EINVAL for a
 * name already taken, an incomplete table or a full registry. Not thread-safe: register at startup. */
int algo_registry_add(const rlt_algo *a);

#endif
