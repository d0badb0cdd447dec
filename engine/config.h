/* config.h: the typed configuration. It starts from documented defaults (config_schema.c lists them
 * with their schema), YAML files and --set overrides are merged over it by config.c, and every consumer
 * reads plain fields. Adding a key = adding a field here and a row to the schema table. */
#ifndef RLT_CONFIG_H
#define RLT_CONFIG_H

#include <stdint.h>
#include "rltrain.h"
#include "described/described.h"
#include "device.h"
#include "err.h"

#define RLT_CFG_MAX_LAYERS 8
#define RLT_CFG_STR 256
#define RLT_CFG_MAX_KEYS 96 /* rows of the schema table at most (config_schema.h asserts it) */
#define RLT_CFG_ORIGINS 8   /* inputs whose names are kept for messages about the keys they set */

/* Keys whose value is one name from a fixed list are enums, read once by the schema (config_schema.c) and
 * compared as enums everywhere else. Each map is the one source of its enum: the constants, in the order
 * messages list them, with the names configs use; the schema's value tables are made from the same maps.
 * The device (device.h) is an enum with an index. */
#define RLT_PRECISION_MAP(X)                    \
    X(RLT_PRECISION_FP32, "fp32")               \
    X(RLT_PRECISION_BF16, "bf16")               \
    X(RLT_PRECISION_FP16, "fp16")               \
    X(RLT_PRECISION_TF32, "tf32")
#define RLT_REPLAY_LOCATION_MAP(X)              \
    X(RLT_REPLAY_LOCATION_AUTO, "auto")         \
    X(RLT_REPLAY_LOCATION_DEVICE, "device")     \
    X(RLT_REPLAY_LOCATION_HOST, "host")
#define RLT_OBS_DTYPE_MAP(X)                    \
    X(RLT_OBS_DTYPE_AUTO, "auto")               \
    X(RLT_OBS_DTYPE_FP32, "fp32")               \
    X(RLT_OBS_DTYPE_FP16, "fp16")               \
    X(RLT_OBS_DTYPE_BF16, "bf16")               \
    X(RLT_OBS_DTYPE_UINT8, "uint8")
#define RLT_DQN_LOSS_MAP(X)                     \
    X(RLT_DQN_LOSS_HUBER, "huber")              \
    X(RLT_DQN_LOSS_MSE, "mse")
#define RLT_ON_OOM_MAP(X)                       \
    X(RLT_ON_OOM_FAIL, "fail")                  \
    X(RLT_ON_OOM_CPU, "cpu")
/* network.conv's presets; EXPLICIT (no name) is a list of layers written out. */
#define RLT_CONV_PRESET_MAP(X)                  \
    X(RLT_CONV_PRESET_EXPLICIT, "")             \
    X(RLT_CONV_PRESET_NONE, "none")             \
    X(RLT_CONV_PRESET_NATURE, "nature")         \
    X(RLT_CONV_PRESET_MINATAR, "minatar")

#define RLT_CFG_ENUM_CONST(c, name) c,
typedef enum { RLT_PRECISION_MAP(RLT_CFG_ENUM_CONST) } rlt_precision;
typedef enum { RLT_REPLAY_LOCATION_MAP(RLT_CFG_ENUM_CONST) } rlt_replay_location;
typedef enum { RLT_OBS_DTYPE_MAP(RLT_CFG_ENUM_CONST) } rlt_obs_dtype;
typedef enum { RLT_DQN_LOSS_MAP(RLT_CFG_ENUM_CONST) } rlt_dqn_loss;
typedef enum { RLT_ON_OOM_MAP(RLT_CFG_ENUM_CONST) } rlt_on_oom;
typedef enum { RLT_CONV_PRESET_MAP(RLT_CFG_ENUM_CONST) } rlt_conv_preset;
#undef RLT_CFG_ENUM_CONST

/* The name a config uses for a value ("bf16"), for messages; "?" outside the enum ("" for EXPLICIT). */
const char *config_precision_name(rlt_precision v);
const char *config_obs_dtype_name(rlt_obs_dtype v);
const char *config_conv_preset_name(rlt_conv_preset v); /* config_conv.c */

typedef struct rlt_int_list {
    int32_t n;
    int32_t v[RLT_CFG_MAX_LAYERS];
} rlt_int_list;

/* train.seeds: the seeds of a seed group's members, in order (train/seed_group.c). n 0 (the default) names
 * none: train.num_seeds decides, and 1 of it is one plain run. */
#define RLT_CFG_MAX_SEEDS 256

typedef struct rlt_seed_list {
    int32_t n;
    int32_t reserved_;
    uint64_t v[RLT_CFG_MAX_SEEDS]; /* the unused ones are zero, so equal lists have equal bytes */
} rlt_seed_list;

/* network.conv: the convolutional torso as a list of layers (engine/config_conv.c reads, checks and
 * writes it). A preset ("nature") is stored as its layers plus which preset it was, so every consumer reads
 * the one list, and the dump writes the name back as it was given. */
#define RLT_CFG_MAX_CONV 8

typedef struct rlt_conv_layer {
    int32_t out;    /* output channels */
    int32_t kernel; /* square kernel, kernel x kernel */
    int32_t stride; /* default 1 */
    int32_t pad;    /* zero padding on every side; default 0 */
} rlt_conv_layer;

typedef struct rlt_conv_list {
    rlt_conv_preset preset; /* the preset it was given by, or EXPLICIT for a list of layers */
    int32_t n;       /* layers in use (0: no torso); the unused ones are zero, so equal lists have equal bytes */
    rlt_conv_layer layer[RLT_CFG_MAX_CONV];
} rlt_conv_list;

/* network.inputs: the named parts of a dict observation (engine/config_inputs.c reads, checks and writes
 * them). Each part is a vector [D] or an image [C, H, W] of float32 or uint8, with its own torso: a conv list
 * (as network.conv's) for an image, none for a part passed straight to the head. n 0: one plain observation. */
#define RLT_CFG_MAX_INPUTS 8
#define RLT_CFG_INPUT_NAME 32

typedef struct rlt_input_spec {
    char name[RLT_CFG_INPUT_NAME]; /* NUL-padded, so equal specs have equal bytes */
    int32_t dtype;                 /* RLT_DTYPE_F32 or RLT_DTYPE_U8 */
    int32_t ndim;                  /* 1: [D]; 3: [C, H, W] */
    int32_t shape[3];              /* unused entries 0 */
    rlt_conv_list torso;           /* n 0: none */
    int32_t high;                  /* u8 parts: the largest value (scaled by 1/high); 0: not given, 255 */
} rlt_input_spec;

typedef struct rlt_input_list {
    int32_t n; /* parts in use (0: none); the unused ones are zero */
    rlt_input_spec in[RLT_CFG_MAX_INPUTS];
} rlt_input_list;

/* devices: the devices of a run on several of them, in order (train/seed_group.c): with one seed, data-parallel
 * ranks (rank k on d[k]); with several, the seeds spread over them. n 0 (the default): `device` alone. */
#define RLT_CFG_MAX_DEVICES 16

typedef struct rlt_device_list {
    int32_t n;
    int32_t reserved_;
    rlt_device d[RLT_CFG_MAX_DEVICES]; /* the unused ones are zero */
} rlt_device_list;

/* population: per-member values of hyperparameters, one seed group member per value (train/seed_group.c): scalars
 * that leave the plan's shapes alone (learning rates, tau, gamma, noise, schedules), and a few shape keys (batch
 * size, replay capacity, hidden sizes) whose members are planned each on their own (engine/config_population.c
 * says which). Each key holds one value for every member or one per member; scalar values are kept as the bytes
 * their field holds (config_schema_parse_bits), so every type reads back exactly, and a list key's value is an
 * index into the population's table of lists. n 0: no population. */
#define RLT_CFG_POP_KEYS 16
#define RLT_CFG_POP_NAME 48
#define RLT_CFG_POP_LISTS 32

typedef struct rlt_pop_key {
    int32_t row;        /* the key's schema row */
    int32_t n;          /* values given: 1 (the same for every member) or the population's size */
    int32_t line, col;  /* where the key was written, for messages about its values */
    uint32_t src;       /* as origin[].src: 1 + the serial of the input that wrote it */
    int32_t reserved_;
    uint64_t v[RLT_CFG_MAX_SEEDS]; /* scalars: the field's bytes; list keys: an index into lists[]; unused: zero */
} rlt_pop_key;

typedef struct rlt_population {
    int32_t n;      /* members (0: no population) */
    int32_t n_keys; /* keys in key[] (population.name is not one of them) */
    int32_t named;  /* population.name gave each member's directory name */
    int32_t reserved_;
    rlt_pop_key key[RLT_CFG_POP_KEYS];
    char name[RLT_CFG_MAX_SEEDS][RLT_CFG_POP_NAME]; /* NUL-padded; all zero unless named */
    int32_t n_lists;                       /* the distinct list values of the list keys */
    int32_t reserved2_;
    rlt_int_list lists[RLT_CFG_POP_LISTS]; /* unused: zero */
} rlt_population;

struct rlt_comm;

struct rlt_config {
    char algo[16];      /* td3 | dqn */
    struct {
        char name[64];  /* built-in environment */
        int32_t max_episode_steps; /* 0: the environment's own limit */
        int32_t num_envs;          /* training environments stepped together (1..256) */
    } env;
    uint64_t seed;
    rlt_device device;  /* auto | cpu | cuda | cuda:N */
    rlt_device_list devices; /* several devices (n >= 1 overrides device; see config_device) */
    rlt_precision precision;
    struct {
        int64_t total_steps;
        int64_t start_steps;
        int32_t batch_size;
        int32_t grad_accum_steps;
        int32_t updates_per_step;
        int64_t eval_every;
        int32_t eval_episodes;
        double progress_every_s;
        int32_t overwrite; /* a run may replace the outputs of an earlier one in out_dir */
        int32_t num_seeds;     /* members of a seed group, seeds seed .. seed + num_seeds - 1 (1: one plain run) */
        rlt_seed_list seeds;   /* or the members' seeds written out (n 0: none) */
        int32_t seed_batching; /* the seeds sharing a GPU run one batched update graph (train/seed_batch.h) */
        int32_t seed_batches;  /* ... in this many batches a GPU, each a graph and lock-step (seed_batch_count; 0 picks) */
    } train;
    struct {
        int64_t capacity;
        rlt_replay_location location;
        rlt_obs_dtype obs_dtype; /* how observations are stored (auto: as they come) */
    } replay;
    struct {
        rlt_int_list actor_hidden;
        rlt_int_list critic_hidden;
        double actor_lr, critic_lr, gamma, tau, policy_noise, noise_clip, exploration_noise;
        int32_t policy_delay;
    } td3;
    struct {
        double lr, gamma, tau, eps_start, eps_end, eps_fraction, max_grad_norm, eval_epsilon;
        int32_t double_q;           /* double DQN (van Hasselt et al. 2016) */
        rlt_dqn_loss loss;
        int64_t target_update_every; /* env steps between target updates */
        int64_t learning_starts;     /* env steps before the first update */
        int32_t train_freq;          /* env steps between training rounds */
        int32_t gradient_steps;      /* updates per training round */
    } dqn;
    struct {
        rlt_int_list hidden; /* fully connected widths after the torso */
        rlt_conv_list conv;  /* the convolutional torso for image observations: a preset or explicit layers */
        rlt_input_list inputs; /* dict observations: the parts and their torsos (n 0: a plain observation) */
    } network;
    struct {
        double budget_mb;
        double process_budget_mb; /* the whole process on its device (context, handles, arena); 0: none */
        int32_t auto_fit; /* pick the largest micro-batch that fits, keeping batch_size through accumulation */
        double wait_s;    /* retry a failed device reservation once a second for this long */
        rlt_on_oom on_oom; /* what to do when the device arena cannot be reserved */
        double warn_free_mb; /* GPU runs: warn once when the device's free memory falls under it; 0: never */
    } memory;
    struct {
        int64_t every;          /* env steps between periodic checkpoints; 0: only the final one */
        int32_t keep;           /* periodic checkpoints kept (the oldest are deleted) */
        int32_t include_replay; /* save the replay buffer too: needed for a resume that continues exactly */
        int32_t best;           /* best.ckpt after each evaluation that beats the best so far (no replay) */
    } checkpoint;
    struct {
        int32_t threads; /* CPU backend threads; 0 = 1; >= 2: one worker thread splits large dense ops */
    } cpu;
    struct {
        double timeout_s;             /* the longest a rank waits for the others: set-up, a collective, an agreement */
        double bucket_mb;             /* gradient buckets averaged during the backward (MiB); 0: one average per step */
        char rendezvous[RLT_CFG_STR]; /* env | tcp://HOST:PORT | file:PATH: where ranks launched as processes meet */
    } dist;
    char out_dir[RLT_CFG_STR];

    /* Not config values: provenance and the last error. */
    char source[RLT_CFG_STR]; /* the last file or string name loaded */
    /* Where each key (by schema row) was last set, for errors found after parsing (config_key_where):
     * src is 1 + the serial number of the input that set it (0: the default), whose name is kept in
     * source_names[serial % RLT_CFG_ORIGINS] while it is one of the last RLT_CFG_ORIGINS inputs. */
    struct {
        int32_t line, col;
        uint32_t src;
    } origin[RLT_CFG_MAX_KEYS];
    uint32_t n_sources;
    char source_names[RLT_CFG_ORIGINS][RLT_CFG_STR];
    /* A value, but no schema row (its keys are other rows' names): read by config.c, checked, applied and written
     * by engine/config_population.c. */
    rlt_population population;
    rlt_err err;
    /* Not keys: what a data-parallel group (train/seed_group.c) sets in each rank's copy of the config. comm NULL
     * (and rank 0, n_ranks 1): a run of its own. */
    struct rlt_comm *comm;
    int32_t rank, n_ranks;
    /* Not keys: this process's place in a run launched as one process per device (torchrun, srun, mpirun; set by
     * rlt_config_set_launch): rank `rank` of `world`, local_rank on its host. world 0: not launched so. */
    struct {
        int32_t rank, world, local_rank;
    } launch;
    /* The most lanes the backend may use (rlt_backend.lanes; 0: its own choice): 1 for the members of a seed group
     * that share a GPU. */
    int32_t lanes;
    /* The seed group's agents on this agent's GPU when they may run batched (rlt_backend.seeds; 0: a run of its
     * own): the plan then holds the group's seed table. */
    int32_t batch_seeds;
    /* With batch_seeds > 1: the group's arena span (rlt_backend.span, owned by the seed group) and this agent's slot
     * in it, so the batched agents' device arenas lie at one stride; NULL: none. Not a key. */
    struct rlt_arena_span *arena_span;
    int32_t arena_slot;
    /* A GPU described instead of opened (rlt_config_describe_gpu, `rltrain plan --arch`): plans on `cuda` use the
     * described backend (kernels/described/). Not a key: never in the dump, config.yaml or checkpoints. */
    rlt_gpu_desc gpu_desc;
};

void config_set_defaults(rlt_config *cfg);
/* The device this config's run opens: devices' first entry when the list has one, else `device`. */
rlt_device config_device(const rlt_config *cfg);
/* 1 when the config is a data-parallel run over several devices (devices lists more than one, one seed). */
int config_is_data_parallel(const rlt_config *cfg);
/* The ranks of a data-parallel run: the processes of a launched one, else the devices. */
int32_t config_world(const rlt_config *cfg);
/* Rank `rank`'s config of a data-parallel run (its device, 1/R of the batch, the replay shard's capacity rounded up,
 * rank and n_ranks; comm is the caller's to set). */
void config_for_rank(const rlt_config *cfg, int32_t rank, rlt_config *out);
/* "FILE:LINE:COL: key 'KEY'" where the key was last set by a file, a string or --set (the column of the
 * key), or "config: key 'KEY'" for a default or a field written by code: the start of a message about a
 * value found wrong after parsing. Returns buf. */
const char *config_key_where(const rlt_config *cfg, const char *key, char *buf, size_t cap);

/* ---- populations (engine/config_population.c) ---- */
/* Whether key may differ between the members of a population: RLT_POP_MEMBER (a scalar no plan reads), RLT_POP_SHAPE
 * (it changes the plan's shapes: the members of each value are planned on their own), or 0 with why in buf (it
 * changes the device or the environment, or it is a setting of the whole group). */
enum { RLT_POP_MEMBER = 1, RLT_POP_SHAPE = 2 };
int config_population_allows(const char *key, char *buf, size_t cap);
/* 1 when the population varies a shape key (its members' plans differ). */
int config_population_has_shapes(const rlt_config *cfg);
/* Counts the population's members (population.n) from its lists and checks that their lengths agree; message in
 * cfg->err naming FILE:LINE:COL. The reader calls it after each input, validate again. */
int config_population_settle(rlt_config *cfg);
/* The first key other than the seed that may differ between members (config_population_allows) and does between
 * a and b, or NULL. */
const char *config_members_differ(const rlt_config *a, const rlt_config *b);
/* The first member key (config_population_allows) whose values in a and b keep the two from sharing one batched
 * update graph (train/seed_batch.c), or NULL when they can share it; *why (when why is non-NULL) then says what
 * the key changes. The batched graph reads the scalars of the update from each agent's hparams block (learning
 * rates, tau, gamma, target noise, the clipping threshold), and schedules and exploration are host code, so those
 * keys may differ; what still may not: td3.policy_delay, dqn.double, dqn.loss, dqn.max_grad_norm switching clipping
 * on for some members only, and the shape keys. */
const char *config_members_unbatched(const rlt_config *a, const rlt_config *b, const char **why);
/* The first key of cfg's population whose members' values keep them from sharing one batched update graph
 * (config_members_unbatched between member 0 and each other member), or NULL; *why as there. */
const char *config_population_unbatched(const rlt_config *cfg, const char **why);
/* Member k's value of the population's key i written as YAML ("0.0003", "true"). */
size_t config_population_format(const rlt_config *cfg, int32_t i, int32_t k, char *buf, size_t cap);
/* Stores member k's values into cfg (which holds the population) and clears its population: the member's own
 * config, whose keys point at the population's lines for messages. */
void config_population_apply(rlt_config *cfg, int32_t k);
/* Checks the population as validate does: its keys still allowed, every value in range, list lengths agreeing,
 * each member's config valid (validate's cross-key rules); message in cfg->err naming FILE:LINE:COL. */
int config_population_check(rlt_config *cfg);
/* Appends the population as YAML ("population:", then "  KEY: [v0, v1]" lines; nothing without one) to o. */
struct rlt_text;
void config_population_dump(const rlt_config *cfg, struct rlt_text *o);

#endif
