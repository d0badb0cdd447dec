/* rltrain.h: the one public header of rltrain, a native RL trainer that plans and reserves every byte
 * it will use at startup and never allocates afterwards.
 *
 * Conventions: every function returns an int status (RLT_OK = 0, negative on failure) unless it is a
 * getter. Handles are opaque. A failing call leaves a message with an actionable hint in its handle,
 * read with rlt_config_errmsg / rlt_trainer_errmsg / rlt_agent_errmsg (the message of the latest failure;
 * a success does not clear it). The library never prints and never
 * exits: it logs through the callback set with rlt_log_set_callback. Structs in this header have one
 * layout whatever the build options (no CUDA types, no #if). Thread safety: handles are independent and
 * hold no global state, so different handles may be used from different threads at once; one handle
 * must not be used from two threads at the same time. */
#ifndef RLTRAIN_H
#define RLTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only the functions below are exported from the shared library. */
#if defined(RLT_BUILDING_LIBRARY)
#define RLT_API __attribute__((visibility("default")))
#else
#define RLT_API
#endif

#define RLT_VERSION_MAJOR 0
#define RLT_VERSION_MINOR 1
#define RLT_VERSION_PATCH 0

/* Status codes: one table; rlt_strerror and rlt_status_name are generated from it. */
#define RLT_STATUS_MAP(X)                                                                  \
    X(OK, 0, "success")                                                                    \
    X(EINVAL, -1, "invalid argument")                                                      \
    X(ECONFIG, -2, "configuration error")                                                  \
    X(ENOFIT, -3, "memory plan does not fit")                                              \
    X(EDEVICE, -4, "requested device is not usable")                                       \
    X(EIO, -5, "input/output error")                                                       \
    X(ERUNTIME, -6, "runtime failure")                                                     \
    X(ENOMEM, -7, "out of host memory for a handle")                                       \
    X(ESTATE, -8, "call not valid in the current state")                                   \
    X(ECHECKPOINT, -9, "checkpoint is invalid or does not match")                          \
    X(EINTERRUPTED, -10, "interrupted")                                                   \
    X(EBUSY, -11, "out_dir is in use by another run")

typedef enum {
#define RLT_STATUS_ENUM_(name, code, text) RLT_##name = code,
    RLT_STATUS_MAP(RLT_STATUS_ENUM_)
#undef RLT_STATUS_ENUM_
} rlt_status;

RLT_API const char *rlt_strerror(int status);    /* "memory plan does not fit" */
RLT_API const char *rlt_status_name(int status); /* "RLT_ENOFIT" */
RLT_API const char *rlt_version_string(void);

/* Logging: the library's only output. level: 0 error, 1 warning, 2 info, 3 debug. The callback is
 * process-wide (set it before creating handles); NULL silences the library. */
typedef enum { RLT_LOG_ERROR = 0, RLT_LOG_WARN = 1, RLT_LOG_INFO = 2, RLT_LOG_DEBUG = 3 } rlt_log_level;
typedef void (*rlt_log_fn)(void *user, int level, const char *message);
RLT_API void rlt_log_set_callback(rlt_log_fn fn, void *user);

/* ---------------------------------------------------------------------------------------------- */
/* Configuration                                                                                  */
/* ---------------------------------------------------------------------------------------------- */
typedef struct rlt_config rlt_config;

/* A new config holding the documented defaults. */
RLT_API int rlt_config_init(rlt_config **out);
RLT_API void rlt_config_free(rlt_config *cfg);
/* Merge a YAML file or string over the current values. Strict: unknown or duplicate keys, wrong types,
 * out-of-range values, aliases, deep nesting and oversized input are RLT_ECONFIG, with file:line:column,
 * the key, and the nearest valid key for typos in rlt_config_errmsg. */
RLT_API int rlt_config_load_file(rlt_config *cfg, const char *path);
RLT_API int rlt_config_load_string(rlt_config *cfg, const char *yaml, const char *name_for_errors);
/* One override "key.path=value", value in YAML flow syntax ("td3.actor_hidden=[64,64]"). */
RLT_API int rlt_config_set(rlt_config *cfg, const char *assignment);
/* Plans of this config on `cuda` (or `auto`) target a described GPU instead of opening one (rlt_plan_fit,
 * rlt_plan_fit_json; `rltrain plan --arch sm_75 --gpu-memory 6GiB [--others 5.4GiB]`), for CI without a GPU:
 * the arena exactly as on such a GPU, the CUDA context and library handles from a table per architecture
 * (docs/described_gpu.md: arch 75, 80, 86, 89, 90). memory_bytes is the GPU's memory, others_bytes what other
 * processes hold on it. A trainer or agent of such a config cannot reserve (RLT_EDEVICE). 0, 0, 0 removes it. */
RLT_API int rlt_config_describe_gpu(rlt_config *cfg, uint64_t memory_bytes, int32_t arch, uint64_t others_bytes);
/* Checks the whole config for consistency (called by the inits; callable early for a fast error). */
RLT_API int rlt_config_validate(rlt_config *cfg);
/* The resolved config as YAML text into buf (always NUL-terminated); returns the length it needs
 * (buf NULL and cap 0 ask for the length only; so do the *_plan_format functions). */
RLT_API size_t rlt_config_dump(const rlt_config *cfg, char *buf, size_t cap);
RLT_API const char *rlt_config_errmsg(const rlt_config *cfg);
/* One key's value as YAML text ("train.batch_size" -> "256", "td3.actor_hidden" -> "[256, 256]") into buf
 * (always NUL-terminated); returns the length it needs, or 0 with RLT_ECONFIG in the errmsg for an
 * unknown key. */
RLT_API size_t rlt_config_get(rlt_config *cfg, const char *key, char *buf, size_t cap);
/* A copy holding the same values (NULL when out of memory). */
RLT_API rlt_config *rlt_config_clone(const rlt_config *cfg);

/* ---------------------------------------------------------------------------------------------- */
/* Memory plan                                                                                    */
/* ---------------------------------------------------------------------------------------------- */
typedef enum { RLT_LOC_HOST = 0, RLT_LOC_DEVICE = 1 } rlt_location;

typedef struct rlt_plan_entry {
    char name[64];    /* "critic.params", "replay.obs", ... */
    char region[24];  /* params | grads | adam_m | adam_v | target | activations | replay | scratch | ... */
    int32_t location; /* rlt_location */
    int32_t reserved_;
    uint64_t bytes;  /* bytes this entry uses, before alignment padding */
    uint64_t offset; /* offset inside its arena */
} rlt_plan_entry;

typedef struct rlt_plan_summary {
    uint64_t host_bytes;     /* the host arena as reserved (alignment included) */
    uint64_t device_bytes;   /* the device arena as reserved; 0 on the CPU backend */
    uint64_t budget_bytes;   /* memory.budget_mb in bytes */
    uint64_t device_total;   /* total device memory, 0 when unknown */
    uint64_t device_free;    /* free device memory before the reservation, 0 when unknown */
    uint64_t context_bytes;  /* device memory the process holds besides the arena, measured (the CUDA context,
                              * loaded kernels, library handles), 0 on CPU */
    int32_t n_entries;
    int32_t fits;            /* 1 when the budgeted arena fits, and the process fits memory.process_budget_mb */
    char device[64];         /* "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)" */
    char precision[8];       /* the compute precision the plan uses */
    char note[120];          /* a decision the plan made that the user should see (or empty) */
    uint64_t handle_bytes;   /* of context_bytes: the library handles the plan needs (cuBLAS, cuDNN); 0 if none */
    uint64_t process_bytes;  /* the whole process on its device: context_bytes + the device arena (on the CPU:
                              * the host arena) */
    uint64_t process_budget_bytes; /* memory.process_budget_mb in bytes; 0: no process budget */
} rlt_plan_summary;

/* What fits: the answers `rltrain plan` prints. Sizes are found by building plans (no memory is
 * reserved) for the trainer's built-in environment on the configured device. */
typedef struct rlt_fit_report {
    uint64_t need_bytes;          /* the configured plan's arena on the budgeted device */
    uint64_t limit_bytes;         /* memory.budget_mb, or the device's free memory if smaller */
    int64_t max_replay_capacity;  /* largest replay.capacity that fits with the configured batch (0: none) */
    int32_t fits;                 /* the configured plan fits */
    int32_t max_batch_size;       /* largest train.batch_size that fits with one micro-batch (0: none) */
    int32_t min_grad_accum_steps; /* fewest micro-batches (a divisor of batch_size) that fit (0: none) */
    int32_t micro_batch;          /* batch_size / min_grad_accum_steps */
    uint64_t min_need_bytes;      /* the plan with train.batch_size 1 (one micro-batch) and replay.capacity
                                   * min_replay_capacity: the least that changing those two can reach */
    int64_t min_replay_capacity;  /* the smallest replay.capacity the algorithm accepts */
    uint64_t fit_budget_bytes;    /* the smallest memory.budget_mb (whole MiB, here in bytes) that fits the
                                   * configured plan; 0 when no budget does (the device lacks the memory) */
    uint64_t min_fit_budget_bytes; /* the same for the plan at min_need_bytes */
} rlt_fit_report;

/* Fills *out for cfg. Status as rlt_trainer_init's (RLT_ECONFIG, RLT_EDEVICE); the message goes to
 * err (cap bytes, may be NULL). Also returns the configured plan's table in table (may be NULL). */
RLT_API int rlt_plan_fit(const rlt_config *cfg, rlt_fit_report *out, char *table, size_t table_cap, char *err, size_t err_cap);

/* The same answers as one JSON document for scripts and regression tests (`rltrain plan --json`): the
 * configured plan's entries, region totals, totals, device, budget, fits, the largest sizes that fit and
 * hints. The schema is docs/plan_json.md; its "schema_version" is RLT_PLAN_JSON_SCHEMA_VERSION, and
 * within one version fields are only ever added. Writes the document into buf (NUL-terminated) and its
 * length, without the NUL, into *len (len may be NULL); buf NULL and cap 0 ask for the length only. A
 * buffer too small for the whole document is RLT_EINVAL with buf empty (a partial document is never a
 * success); other statuses as rlt_plan_fit's. *fits (may be NULL) gets 1 when the configured plan fits. */
#define RLT_PLAN_JSON_SCHEMA_VERSION 1
RLT_API int rlt_plan_fit_json(const rlt_config *cfg, char *buf, size_t cap, size_t *len, int32_t *fits, char *err,
                              size_t err_cap);

/* What a seed group of cfg (train.num_seeds, train.seeds, a population) reserves in its budgeted arenas: the first
 * member's (*first) and each other's (*each), so N members take first + (N - 1) x each. With train.seed_batching on
 * one GPU the first is the leading seed, whose batched graph runs every seed's update and whose arena alone holds
 * the library workspace for all of them (docs/seeds.md); otherwise the two are equal. For one run both are its
 * plan's. Status and err as rlt_plan_fit's. */
RLT_API int rlt_plan_group(const rlt_config *cfg, uint64_t *first, uint64_t *each, char *err, size_t err_cap);
/* How many leading seeds such a group has, each planned as *first: one per batch whose seeds share a batched graph
 * (train.seed_batches batches for each entry of `devices`, or for the one device), at least 1; N members then take
 * leads x first + (N - leads) x each. With train.seed_batches 0 both answer for the batches rlt_group_init takes: a
 * batch for every 4 seeds a GPU has (at most 4; 2 for a large update, as TD3 256-256 at batch 256), halved while the
 * group exceeds memory.budget_mb. */
RLT_API int32_t rlt_plan_group_leads(const rlt_config *cfg);

/* ---------------------------------------------------------------------------------------------- */
/* Spaces and the agent API (for simulators that drive their own loop)                            */
/* ---------------------------------------------------------------------------------------------- */
typedef enum { RLT_SPACE_BOX = 0, RLT_SPACE_DISCRETE = 1, RLT_SPACE_DICT = 2 } rlt_space_kind;
typedef enum { RLT_DTYPE_F32 = 0, RLT_DTYPE_U8 = 1, RLT_DTYPE_I32 = 2, RLT_DTYPE_F16 = 3, RLT_DTYPE_BF16 = 4, RLT_DTYPE_I64 = 5 } rlt_dtype;

typedef struct rlt_space {
    int32_t kind;     /* rlt_space_kind */
    int32_t dtype;    /* observations: F32 or U8; Box actions: F32; Discrete actions: I32 */
    int32_t ndim;     /* 1 for vectors, 3 for images (C, H, W) */
    int32_t shape[4];
    int32_t n;        /* number of actions of a Discrete space (its ndim, shape and dtype are ignored) */
    const float *low; /* Box bounds, shape[0] values each (actions); NULL means [-1, 1] */
    const float *high; /* also uint8 observations: the largest value of each channel (shape[0] values; the agent
                        * scales frames by 1 / the largest); NULL means 255 */
} rlt_space;
/* A dict observation (RLT_SPACE_DICT, observations only): its parts are the config's network.inputs (names,
 * shapes, dtypes, order), and one observation is one row of bytes holding them one after another, each in its
 * own dtype at an offset that is a multiple of 4 (docs/several_inputs.md). The space is dtype U8, ndim 1,
 * shape[0] the row's bytes and n the number of parts; the agent refuses one whose bytes or parts differ from
 * network.inputs'. rlt_config_dict_space fills it from a config, rlt_config_input_part says where a part lies. */
RLT_API int rlt_config_dict_space(const rlt_config *cfg, rlt_space *space);
/* Part `name` of the dict row: its byte offset, dtype (RLT_DTYPE_U8 or RLT_DTYPE_F32) and elements (each
 * may be NULL). RLT_ECONFIG when network.inputs has no part of that name. */
RLT_API int rlt_config_input_part(const rlt_config *cfg, const char *name, int64_t *offset, int32_t *dtype,
                                  int64_t *elems);
/* The largest value part `name` declares (network.inputs[p].high: a u8 part enters the network as value / high;
 * 255 when not given, 0 for an f32 part). RLT_ECONFIG when there is no such part. Adapters compare it with the
 * environment's space, so 0/1 planes are not silently scaled by 1/255. */
RLT_API int rlt_config_input_high(const rlt_config *cfg, const char *name, int32_t *high);

typedef struct rlt_agent rlt_agent;

/* Plans and reserves all memory of an agent for the given spaces, or fails (RLT_ENOFIT, RLT_EDEVICE,
 * RLT_ECONFIG). On failure *out is still set when possible, so rlt_agent_errmsg and the plan can be read;
 * free it with rlt_agent_free. */
RLT_API int rlt_agent_init(const rlt_config *cfg, const rlt_space *obs, const rlt_space *act, rlt_agent **out);
RLT_API void rlt_agent_free(rlt_agent *agent);
/* Actions for n observations (row-major, the obs space's dtype). Box actions are float in the action
 * space's bounds; Discrete actions are int32. explore=1 adds the algorithm's exploration (and uniform
 * random actions before train.start_steps); explore=0 is the greedy/deterministic policy. */
RLT_API int rlt_agent_act(rlt_agent *agent, const void *obs, int32_t n, int32_t explore, void *actions);
/* Stores n transitions. terminated and truncated are kept apart: only terminated stops bootstrapping.
 * DQN stores each observation once, so its n transitions must be consecutive steps of one environment
 * (the next observation of one is the observation of the next unless an episode ended). */
RLT_API int rlt_agent_observe(rlt_agent *agent, const void *obs, const void *actions, const float *rewards,
                      const void *next_obs, const uint8_t *terminated, const uint8_t *truncated, int32_t n);
/* Runs train.updates_per_step updates for each call if learning has started; *done gets the count run. */
RLT_API int rlt_agent_update(rlt_agent *agent, int32_t *done);
RLT_API int rlt_agent_memory_plan(const rlt_agent *agent, rlt_plan_summary *summary, const rlt_plan_entry **entries);
/* Formats the plan as the table printed at startup. Returns the length it needs. */
RLT_API size_t rlt_agent_plan_format(const rlt_agent *agent, char *buf, size_t cap);
RLT_API int rlt_agent_save(rlt_agent *agent, const char *path);
RLT_API int rlt_agent_load(rlt_agent *agent, const char *path);
/* Transitions observed and updates run so far. */
RLT_API int rlt_agent_counters(const rlt_agent *agent, int64_t *env_steps, int64_t *updates);
/* Number of allocations made through the engine's allocator since the agent's arena was sealed. */
RLT_API uint64_t rlt_agent_allocations_after_init(const rlt_agent *agent);
RLT_API const char *rlt_agent_errmsg(const rlt_agent *agent);

/* ---------------------------------------------------------------------------------------------- */
/* Trainer: an agent, an environment (built-in, or the caller's: rlt_trainer_init_env), the loop, outputs */
/* ---------------------------------------------------------------------------------------------- */
typedef struct rlt_trainer rlt_trainer;

typedef struct rlt_progress {
    int64_t env_steps;
    int64_t total_steps;
    int64_t episodes;
    int64_t updates;
    double last_episode_return;
    double last_eval_return; /* NaN before the first evaluation */
    double best_eval_return;
    double updates_per_s;
    double env_steps_per_s;
    double elapsed_s;
    double eta_s;
    int32_t is_eval; /* 1 when this report follows an evaluation */
    int32_t reserved_;
    /* GPU runs, for a GPU shared with a simulator: the device's free memory and what other processes hold on it
     * (the device's memory less the free and this process's), measured at most once a second; NaN on the CPU. */
    double device_free_mib;
    double cotenants_mib;
} rlt_progress;

/* Called at least every train.progress_every_s seconds and after each evaluation; return nonzero to
 * stop the run early (it then ends with RLT_EINTERRUPTED after writing its outputs). */
typedef int (*rlt_progress_fn)(void *user, const rlt_progress *p);

/* Plans and reserves everything or fails; nothing is written to disk by init. On failure *out is still
 * set when possible (read rlt_trainer_errmsg and the plan, then rlt_trainer_free). */
RLT_API int rlt_trainer_init(const rlt_config *cfg, rlt_trainer **out);
RLT_API void rlt_trainer_free(rlt_trainer *tr);
RLT_API int rlt_trainer_memory_plan(const rlt_trainer *tr, rlt_plan_summary *summary, const rlt_plan_entry **entries);
RLT_API size_t rlt_trainer_plan_format(const rlt_trainer *tr, char *buf, size_t cap);
/* Trains for train.total_steps env steps, writing out_dir/{config.yaml,metrics.csv,summary.json,final.ckpt}.
 * metrics.csv gets each row as it is completed. An out_dir that holds an earlier run's outputs is refused
 * (RLT_ECONFIG, nothing written) unless the trainer was resumed from a checkpoint in that out_dir (its
 * metrics.csv then continues) or train.overwrite is set. The outputs are written however the loop ends;
 * RLT_OK and RLT_EINTERRUPTED mean that all of them were, and a failed save is an error (summary.json, if it
 * can be written, says "failed" and why). */
RLT_API int rlt_trainer_run(rlt_trainer *tr, rlt_progress_fn fn, void *user);
/* Loads a checkpoint written by a trainer of the same config (final.ckpt or a periodic ckpt_<step>.ckpt)
 * before rlt_trainer_run, which then continues from its step. On the CPU the continued run is
 * bit-identical to one that was never interrupted. Everything is checked before anything changes. */
RLT_API int rlt_trainer_resume(rlt_trainer *tr, const char *path);
/* Asks a running rlt_trainer_run to stop after the current step (with the evaluation that follows it, if
 * one is due); a request made during an evaluation ends it after its current step. The run writes its
 * outputs and final.ckpt and returns RLT_EINTERRUPTED; a run resumed from that final.ckpt does a cut
 * evaluation first. Async-signal-safe: call it from a SIGINT handler. */
RLT_API void rlt_trainer_request_stop(rlt_trainer *tr);
/* The final progress figures (valid after rlt_trainer_run). */
RLT_API int rlt_trainer_progress(const rlt_trainer *tr, rlt_progress *out);
RLT_API rlt_agent *rlt_trainer_agent(rlt_trainer *tr);

/* ---------------------------------------------------------------------------------------------- */
/* User environments: the trainer drives a C environment the caller provides                      */
/* ---------------------------------------------------------------------------------------------- */
/* The trainer uses env.num_envs + 1 instances of the environment: instances 0..num_envs-1 train, instance
 * num_envs evaluates (with the default num_envs 1: instance 0 trains, instance 1 evaluates; evaluation
 * episodes run between training steps, on the same thread). The callbacks keep their state wherever the
 * caller likes (reach it through `user`); the trainer calls them from rlt_trainer_run only, never from
 * another thread, and allocates nothing itself around them. A callback returns 0 on success; anything
 * else stops the run with RLT_ERUNTIME and a message naming the callback, the instance and the step.
 *
 * reset: starts an episode and writes its first observation to obs (the obs space's dtype and shape).
 *   seed is a fresh 64-bit value for every episode, drawn from the trainer's own stream for this instance
 *   (derived from the config's seed), so a run is repeatable when the environment seeds itself from it;
 *   an environment with its own generator may ignore it.
 * step: applies one action (Box: float32[act.shape[0]] within the bounds; Discrete: one int32 in
 *   0..act.n-1), writes the next observation (the real one, also when the episode ends), the reward, and
 *   the two end flags, which the trainer clears before each call: *terminated for a terminal state (no
 *   bootstrapping from it), *truncated for an end of the environment's own that is not terminal. The
 *   trainer adds the time limit (max_episode_steps) as truncation itself.
 * save_state / load_state (optional, both or neither): copy the instance's episode state to and from
 *   state_bytes bytes, so that checkpoints hold it and rlt_trainer_resume can continue a run; without
 *   them checkpoints are still written, but resuming from one is refused.
 *
 * A vector environment (optional, since version 2 of the struct): reset_batch and step_batch, both or neither,
 * drive the training instances 0..num_envs-1 as one environment stepped all at once, for simulators whose
 * sub-environments can only be stepped together (worker processes, a GPU, a batched simulator). With them the
 * trainer calls step_batch once per vector step, where it would call step num_envs times, and reset and step
 * only for the evaluation instance num_envs, which stays a single environment; the transitions, and so the
 * run, are exactly those of the per-instance callbacks on the same environments. Rows are instances: row k
 * of obs and actions is instance k's, laid out as reset and step take one.
 * reset_batch: starts an episode in each instance k whose mask[k] is 1, with seeds[k] as reset's seed for
 *   instance k (drawn from the same stream), and writes its first observation to row k of obs; it leaves the
 *   other rows alone. The trainer calls it with every mask byte 1 before the first step, and after each
 *   vector step in which episodes ended, with the ended instances (the trainer's time limit included), once
 *   it has counted them: an ended instance is not stepped again before reset_batch restarted it.
 * step_batch: applies action row k to instance k, for all n, and writes row k of obs (the real final
 *   observation when the episode ends), rewards[k] and the two end flags of each as step does (the trainer
 *   clears the flags first). An environment that restarts an ended instance on its own inside the step
 *   (Gymnasium's autoreset) still writes the final observation here, keeps the first one of the new episode,
 *   and hands it over when reset_batch asks for that row, with no work left to do. A failing call (nonzero)
 *   stops the run as a failing step does, naming step_batch or reset_batch.
 * save_state / load_state stay per instance (0..num_envs-1) with them: without them a vector environment's
 *   checkpoints are written but resuming from one is refused, as for any user environment.
 *
 * ABI: struct_size must be set to sizeof(rlt_env_callbacks) as the caller compiled it. Later versions only
 * append fields; the library reads struct_size bytes and treats fields beyond them as zero. */
typedef struct rlt_env_callbacks {
    uint32_t struct_size;      /* sizeof(rlt_env_callbacks) */
    uint32_t reserved_;        /* 0 */
    const char *name;          /* for logs, summary.json and checkpoints (up to 63 bytes); NULL: "user" */
    rlt_space obs;             /* Box: F32 vectors (TD3, DQN) or U8 images (C, H, W) (DQN); bounds unused */
    rlt_space act;             /* Box with low/high (NULL: [-1, 1]; copied at init) for TD3, Discrete for DQN */
    int32_t max_episode_steps; /* time limit the trainer applies as truncation; 0: none (env.max_episode_steps
                                * of the config overrides it when > 0); with none, evaluation episodes are cut
                                * at 100,000 steps */
    int32_t state_bytes;       /* size of the state save_state writes (0 without save_state/load_state) */
    void *user;                /* passed to every callback */
    int (*reset)(void *user, int32_t instance, uint64_t seed, void *obs);
    int (*step)(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                uint8_t *truncated);
    int (*save_state)(void *user, int32_t instance, void *state);
    int (*load_state)(void *user, int32_t instance, const void *state);
    /* Version 2: the training instances as one vector environment (above); NULL: per instance. */
    int (*reset_batch)(void *user, int32_t n, const uint8_t *mask, const uint64_t *seeds, void *obs);
    int (*step_batch)(void *user, int32_t n, const void *actions, void *obs, float *rewards, uint8_t *terminated,
                      uint8_t *truncated);
} rlt_env_callbacks;

/* As rlt_trainer_init, with the environment given by env instead of the config's env.name (which is then
 * ignored). The callbacks and the user pointer must stay valid until rlt_trainer_free; the struct itself
 * is copied. Everything the trainer needs for the environment (observation, action and state buffers) is
 * reserved here; rlt_trainer_run allocates nothing. */
RLT_API int rlt_trainer_init_env(const rlt_config *cfg, const rlt_env_callbacks *env, rlt_trainer **out);
RLT_API const char *rlt_trainer_out_dir(const rlt_trainer *tr);
RLT_API const char *rlt_trainer_errmsg(const rlt_trainer *tr);

/* ---------------------------------------------------------------------------------------------- */
/* Seed groups: several independent runs of one config in one process                             */
/* ---------------------------------------------------------------------------------------------- */
/* A config whose train.num_seeds is N > 1 (seeds seed .. seed + N - 1) or whose train.seeds lists seeds names
 * the members of a seed group. Member k is exactly the trainer rlt_trainer_init makes of the config with seed
 * set to its seed and out_dir to out_dir/seed_<seed> (its own agent, backend, replay, environments, random
 * streams and outputs); on the CPU it is bit-identical to that single run. Each member lives in a thread of
 * its own, which initialises, resumes and runs it, so on a GPU the members share one CUDA context and their
 * updates run concurrently. Every member's memory is reserved by rlt_group_init, before any of them trains;
 * memory.budget_mb and memory.process_budget_mb hold for all members together. One member failing stops the
 * others (after their current step; they write their outputs), and the group reports the failure naming
 * its seed. rlt_trainer_init refuses such a config. */
typedef struct rlt_group rlt_group;

/* The group's figures: sums over the members, and their latest evaluation returns. */
typedef struct rlt_group_report {
    int64_t env_steps;   /* over all members */
    int64_t total_steps; /* over all members: members x train.total_steps */
    int64_t updates;     /* over all members */
    int32_t n_members;
    int32_t n_evaluated; /* members with at least one evaluation; the eval figures are over them */
    double eval_mean;    /* of the members' latest evaluation returns; NaN before any */
    double eval_min;
    double eval_max;
    double updates_per_s;   /* all members together */
    double env_steps_per_s; /* all members together */
    double elapsed_s;
    double eta_s;
    int32_t is_eval; /* 1 when this report follows an evaluation that every member has made */
    int32_t reserved_;
    /* GPU groups: the least free memory of the members' GPUs and the most that other processes hold on one of them
     * (rlt_progress's figures over the members); NaN on the CPU. */
    double device_free_mib;
    double cotenants_mib;
} rlt_group_report;

/* Called from the thread of rlt_group_run: every train.progress_every_s seconds and once each time every
 * member has made one more evaluation; return nonzero to stop every member (the run then ends with
 * RLT_EINTERRUPTED after the members wrote their outputs). */
typedef int (*rlt_group_progress_fn)(void *user, const rlt_group_report *r);

/* The members cfg names: the length of train.seeds, else train.num_seeds when above 1; 0 when it names no
 * group (one plain run, rlt_trainer_init) or is not valid. */
RLT_API int32_t rlt_group_count(const rlt_config *cfg);
/* The number of data-parallel ranks the config asks for (`devices` listing R > 1 devices with one seed: one
 * replica per device, each with its own arena and replay shard and batch_size / R of every batch, averaging its
 * gradients with the others' every update, NCCL on GPUs), or 0. Such a config is also a group
 * (rlt_group_count returns R): its members are the ranks, in out_dir/rank_<k>/. */
RLT_API int32_t rlt_config_ranks(const rlt_config *cfg);
/* This process as rank `rank` of the `world` processes of one data-parallel run, one process per device, as
 * torchrun, srun and mpirun launch them (the CLI reads their variables). With device: cuda the process takes GPU
 * `local_rank` (with one GPU visible, 0); the ranks meet as dist.rendezvous says and average over TCP (the CPU) or
 * NCCL (GPUs). rlt_group_init then makes this process's one rank, in out_dir/rank_<rank>/; rank 0 writes
 * summary.csv. world 0 or 1: a run of its own (the default). RLT_EINVAL for ranks out of range. */
RLT_API int rlt_config_set_launch(rlt_config *cfg, int32_t rank, int32_t world, int32_t local_rank);
/* Starts one thread per member and initialises the members in turn, each in its own thread; checks after the
 * first that all of them fit the budgets (else RLT_ENOFIT naming the largest number of seeds that fits, before
 * the others reserve anything). Nothing is written to disk. On failure *out is still set when possible (read
 * rlt_group_errmsg and rlt_group_plan_format, then rlt_group_free). */
RLT_API int rlt_group_init(const rlt_config *cfg, rlt_group **out);
/* As rlt_group_init with the caller's environment: member k uses *envs[k] (n_envs must be the number of
 * members) as rlt_trainer_init_env would; its callbacks are called from member k's thread only. */
RLT_API int rlt_group_init_env(const rlt_config *cfg, const rlt_env_callbacks *const *envs, int32_t n_envs,
                               rlt_group **out);
RLT_API void rlt_group_free(rlt_group *g);
/* One member's plan table (the first's, or the member whose init failed) and the group's per-seed and total
 * bytes. Returns the length it needs. */
RLT_API size_t rlt_group_plan_format(const rlt_group *g, char *buf, size_t cap);
/* Resumes every member from out_dir/seed_<seed>/NAME, NAME being the file name of `name` ("final.ckpt",
 * "ckpt_<step>.ckpt"; a directory part is ignored), as rlt_trainer_resume does. */
RLT_API int rlt_group_resume(rlt_group *g, const char *name);
/* Runs every member to train.total_steps at once and waits for them; then writes out_dir/summary.csv (one row
 * per member: seed, status, env_steps, updates, last and best evaluation return, wall_s). An out_dir holding
 * an earlier group's summary.csv is refused as rlt_trainer_run refuses an earlier run's outputs. Returns
 * RLT_OK when every member finished, RLT_EINTERRUPTED when they were stopped, else the first failure. */
RLT_API int rlt_group_run(rlt_group *g, rlt_group_progress_fn fn, void *user);
/* Asks every member to stop after its current step. Async-signal-safe: call it from a SIGINT handler. */
RLT_API void rlt_group_request_stop(rlt_group *g);
/* The group's figures now (valid during and after rlt_group_run). */
RLT_API int rlt_group_progress(const rlt_group *g, rlt_group_report *out);
RLT_API int32_t rlt_group_size(const rlt_group *g);
/* A data-parallel run's number of ranks (one per device of `devices`, or the processes of a launched run), or 0
 * for a seed group. */
RLT_API int32_t rlt_group_ranks(const rlt_group *g);
/* The data-parallel rank of member k (k in a launched run: this process's rank), or -1 for a seed group. */
RLT_API int32_t rlt_group_rank(const rlt_group *g, int32_t k);
/* Member k's trainer (progress, agent, out_dir); not to be run, resumed or freed by the caller. */
RLT_API rlt_trainer *rlt_group_member(rlt_group *g, int32_t k);
RLT_API uint64_t rlt_group_seed(const rlt_group *g, int32_t k);
/* Member k's directory under rlt_group_out_dir: seed_<seed>, rank_<k>, or for a population (the config's
 * `population:` section, docs/populations.md) member_<k> or its population.name; NULL for no such member. */
RLT_API const char *rlt_group_member_dir(const rlt_group *g, int32_t k);
/* The keys a population varies (0: not a population). */
RLT_API int32_t rlt_group_population_keys(const rlt_group *g);
RLT_API const char *rlt_group_out_dir(const rlt_group *g);
RLT_API const char *rlt_group_errmsg(const rlt_group *g);

#ifdef __cplusplus
}
#endif
#endif /* RLTRAIN_H */
