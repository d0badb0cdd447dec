/* algo.h: the algorithm boundary. The rlt_algo table through which the run layer (train/: agent.c, agent_io.c,
 * trainer.c, planner.c) calls an algorithm, and the registry that finds one by name. What an algorithm sees of the
 * agent (the config, backend, plan, replay, device counters and losses, host staging) and the optimiser-step
 * services it calls are the core's (engine/agent_core.h), below this layer.
 *
 * An algorithm owns its state: it declares state_bytes, the agent carves that many bytes beside itself at
 * allocation (so nothing is allocated after init), and the algorithm reaches them through
 * agent_algo_state(). Adding an algorithm is a folder's worth of code in agents/ and one line in
 * agents/registry.c; nothing above this header names it. */
#ifndef RLT_ALGO_H
#define RLT_ALGO_H

#include "agent_core.h"

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
    /* The device part of one acting chunk, asynchronous: rows (1 .. the acting batch) observations copied from the
     * start of io_stage to the device, the policy's forward, its outputs copied back into io_stage (where act
     * reads them after agent_run_act). act calls it through agent_run_act; a seed group captures it once batched
     * over its seeds (train/seed_batch.c), so it issues the same ops for the same rows every time and touches no
     * host memory but io_stage. RLT_EINVAL for rows beyond the acting batch. */
    int (*act_ops)(struct rlt_agent *ag, int32_t rows);
    /* Optional: 1 when act_ops may run beside update variant `variant` because that variant writes nothing act_ops
     * reads (TD3's critic-only update leaves the actor as it was): the next action then need not wait for that update
     * (train/agent.c). An act_ops that calls the library is refused on the aside stream and the agent then waits for
     * every update; a seed group's captured acting graph cannot be refused there, so return 0 where it could hold a
     * convolution. NULL: acting always waits for the updates before it. */
    int (*act_beside)(const struct rlt_agent *ag, int32_t variant);
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
