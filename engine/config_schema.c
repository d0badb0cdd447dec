/* config_schema.c: the table of every configuration key and the typed conversions that read, check and
 * write values through it (see config_schema.h). Defaults live only here, in the table's `def` column. */
#include "config_schema.h"
#include "config_conv.h"
#include "config_inputs.h"
#include "text.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The offset of field f, which must have type T: _Generic has no association for any other type, so a
 * row whose type disagrees with config.h does not compile (the table and the struct cannot drift apart).
 * Strings are listed as char * because _Generic sees arrays after their conversion to pointers. */
#define CFG_OFF(f, T) (offsetof(rlt_config, f) + 0 * sizeof(char[_Generic(((rlt_config *)0)->f, T: 1)]))
#define CFG_SIZE(f) sizeof(((rlt_config *)0)->f)

#define N_OF(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))
#define ROW_I32(k, f, lo, hi, def, doc) \
    {k, CFG_INT32, CFG_OFF(f, int32_t), CFG_SIZE(f), lo, hi, 0, NULL, NULL, 0, def, doc}
#define ROW_I64(k, f, lo, hi, def, doc) \
    {k, CFG_INT64, CFG_OFF(f, int64_t), CFG_SIZE(f), lo, hi, 0, NULL, NULL, 0, def, doc}
#define ROW_U64(k, f, def, doc) \
    {k, CFG_UINT64, CFG_OFF(f, uint64_t), CFG_SIZE(f), 0, 18446744073709551615.0, 0, NULL, NULL, 0, def, doc}
#define ROW_F64(k, f, lo, hi, flags, def, doc) \
    {k, CFG_DOUBLE, CFG_OFF(f, double), CFG_SIZE(f), lo, hi, flags, NULL, NULL, 0, def, doc}
#define ROW_BOOL(k, f, def, doc) {k, CFG_BOOL, CFG_OFF(f, int32_t), CFG_SIZE(f), 0, 1, 0, NULL, NULL, 0, def, doc}
/* An enum field of type T, read and written through `names`, the value table made from its map (config.h). */
#define ROW_ENUM(k, f, T, names, def, doc) \
    {k, CFG_ENUM, CFG_OFF(f, T), CFG_SIZE(f), 0, 0, 0, NULL, names, N_OF(names), def, doc}
#define ROW_DEVICE(k, f, def, doc) \
    {k, CFG_DEVICE, CFG_OFF(f, rlt_device), CFG_SIZE(f), 0, 0, 0, NULL, device_names, N_OF(device_names), def, doc}
#define ROW_NAME(k, f, choices, def, doc) \
    {k, CFG_NAME, CFG_OFF(f, char *), CFG_SIZE(f), 0, 0, 0, choices, NULL, 0, def, doc}
#define ROW_STR(k, f, def, doc) \
    {k, CFG_STRING, CFG_OFF(f, char *), CFG_SIZE(f), 1, (double)(CFG_SIZE(f) - 1), 0, NULL, NULL, 0, def, doc}
#define ROW_LIST(k, f, lo, hi, def, doc) \
    {k, CFG_INT_LIST, CFG_OFF(f, rlt_int_list), CFG_SIZE(f), lo, hi, 0, NULL, NULL, 0, def, doc}
#define ROW_CONV(k, f, def, doc) \
    {k, CFG_CONV_LIST, CFG_OFF(f, rlt_conv_list), CFG_SIZE(f), 0, 0, 0, NULL, NULL, 0, def, doc}
#define ROW_SEEDS(k, f, def, doc) \
    {k, CFG_SEED_LIST, CFG_OFF(f, rlt_seed_list), CFG_SIZE(f), 0, 18446744073709551615.0, 0, NULL, NULL, 0, def, doc}
#define ROW_DEVICES(k, f, def, doc) \
    {k, CFG_DEVICE_LIST, CFG_OFF(f, rlt_device_list), CFG_SIZE(f), 0, 0, 0, NULL, NULL, 0, def, doc}
#define ROW_INPUTS(k, f, def, doc) \
    {k, CFG_INPUT_LIST, CFG_OFF(f, rlt_input_list), CFG_SIZE(f), 0, 0, 0, NULL, NULL, 0, def, doc}

/* The value tables of the enum keys, from the maps in config.h: names[value] is the value's name. */
#define CFG_ENUM_NAME(c, name) [c] = name,
static const char *const precision_names[] = {RLT_PRECISION_MAP(CFG_ENUM_NAME)};
static const char *const replay_location_names[] = {RLT_REPLAY_LOCATION_MAP(CFG_ENUM_NAME)};
static const char *const obs_dtype_names[] = {RLT_OBS_DTYPE_MAP(CFG_ENUM_NAME)};
static const char *const dqn_loss_names[] = {RLT_DQN_LOSS_MAP(CFG_ENUM_NAME)};
static const char *const on_oom_names[] = {RLT_ON_OOM_MAP(CFG_ENUM_NAME)};
static const char *const device_names[] = {RLT_DEVICE_MAP(CFG_ENUM_NAME)}; /* the kinds; cuda:N is parsed by device.c */
#undef CFG_ENUM_NAME
/* The parser and the writer store enums through int32_t (config_schema_set_scalar). */
_Static_assert(sizeof(rlt_precision) == sizeof(int32_t) && sizeof(rlt_replay_location) == sizeof(int32_t) &&
                   sizeof(rlt_obs_dtype) == sizeof(int32_t) && sizeof(rlt_dqn_loss) == sizeof(int32_t) &&
                   sizeof(rlt_on_oom) == sizeof(int32_t) && sizeof(rlt_device_kind) == sizeof(int32_t),
               "enum fields are int32_t-sized");

static const char *enum_name(const char *const *names, int32_t n, int32_t v) {
    return v >= 0 && v < n ? names[v] : "?";
}
const char *config_precision_name(rlt_precision v) {
    return enum_name(precision_names, N_OF(precision_names), (int32_t)v);
}
const char *config_obs_dtype_name(rlt_obs_dtype v) {
    return enum_name(obs_dtype_names, N_OF(obs_dtype_names), (int32_t)v);
}

#define BIG_STEPS 1e15 /* far past any run, and exact as a double */

/* Rows of one section must be contiguous: the dump opens each section once (config_schema_selftest). */
static const cfg_key schema[] = {
    ROW_NAME("algo", algo, "td3|dqn", "td3", "the algorithm: td3 (continuous actions) or dqn (discrete actions)"),
    ROW_STR("env.name", env.name, "pendulum",
            "the built-in environment: pendulum, cartpole or minatar_breakout (reference ids like Pendulum-v1 work too)"),
    ROW_I32("env.max_episode_steps", env.max_episode_steps, 0, 1 << 30, "0",
            "episode time limit in steps; 0 keeps the environment's own (200 for pendulum)"),
    ROW_I32("env.num_envs", env.num_envs, 1, 256, "1",
            "training environments stepped together: one act and one observe call for all of them per iteration; "
            "train.total_steps, train.eval_every and checkpoint.every count every environment's steps"),
    ROW_U64("seed", seed, "1", "seeds every random stream: initialisation, exploration, replay sampling, environments"),
    ROW_DEVICE("device", device, "cpu",
             "where the networks run: cpu, cuda (GPU 0), cuda:N, or auto (a usable GPU, else the CPU); a list like "
             "[cuda:0, cuda:1] sets devices"),
    ROW_DEVICES("devices", devices, "[]",
                "several devices, like [cuda:0, cuda:1]: with one seed, data-parallel training (each device a replica "
                "with its own arena, replay shard and 1/N of every batch; gradients averaged with NCCL); with several "
                "seeds, the seeds spread over them; [] uses device"),
    ROW_ENUM("precision", precision, rlt_precision, precision_names, "fp32",
             "compute precision of the dense layers: fp32 (exact), tf32 on the GPU (fp32 storage; the large products that go to cuBLASLt and the convolutions sum on TF32 tensor cores, the rest stays fp32), or bf16 / fp16 on the GPU (16-bit copies, fp32 masters; fp16 adds dynamic loss scaling); the CPU computes fp32"),

    ROW_I64("train.total_steps", train.total_steps, 1, BIG_STEPS, "20000", "environment steps to train for"),
    ROW_I64("train.start_steps", train.start_steps, 0, BIG_STEPS, "1000",
            "uniform-random actions before learning starts; the TD3 authors use 25000 on MuJoCo, but 1000 suits "
            "a 20000-step Pendulum run"),
    ROW_I32("train.batch_size", train.batch_size, 1, 1 << 20, "256", "transitions sampled from replay for each update"),
    ROW_I32("train.grad_accum_steps", train.grad_accum_steps, 1, 1024, "1",
            "micro-batches per update (gradient accumulation), must divide train.batch_size: activations are planned for one micro-batch"),
    ROW_I32("train.updates_per_step", train.updates_per_step, 1, 1024, "1",
            "gradient updates per environment step once learning has started"),
    ROW_I64("train.eval_every", train.eval_every, 0, BIG_STEPS, "2000",
            "environment steps between evaluations; 0 evaluates only at the end"),
    ROW_I32("train.eval_episodes", train.eval_episodes, 1, 100000, "10",
            "episodes per evaluation, run with the deterministic policy; a built-in environment runs them side by "
            "side (up to 64 copies, one acting launch a step; one at a time with a convolutional network or a user "
            "environment), episode j starting from its own part of the evaluation stream, so the result does not "
            "depend on how many run together"),
    ROW_F64("train.progress_every_s", train.progress_every_s, 0, 86400, 0, "2.0", "seconds between progress reports"),
    ROW_BOOL("train.overwrite", train.overwrite, "false",
             "replace the outputs of an earlier run in out_dir; without it a run into an out_dir that holds them is "
             "refused, unless it resumes from a checkpoint in that out_dir"),
    ROW_I32("train.num_seeds", train.num_seeds, 1, RLT_CFG_MAX_SEEDS, "1",
            "independent runs in one process (a seed group), seeds seed .. seed + N - 1, each in out_dir/seed_<seed>/; "
            "1 is one plain run"),
    ROW_SEEDS("train.seeds", train.seeds, "[]",
              "the seeds of a seed group written out, like [1, 2, 3] (distinct; at most 256): one run each, in "
              "out_dir/seed_<seed>/; [] leaves it to train.num_seeds"),
    ROW_BOOL("train.seed_batching", train.seed_batching, "true",
             "a seed group's seeds on one GPU run one batched update graph and act as one (every kernel once for all "
             "seeds) instead of a graph each; each seed's results are the same bits either way; no effect on the CPU"),
    ROW_I32("train.seed_batches", train.seed_batches, 0, RLT_CFG_MAX_DEVICES, "0",
            "with train.seed_batching, the batches a seed group's seeds on one GPU form (seed k in batch k mod the "
            "batches; at least two seeds a batch): each batch its own batched graph and lock-step, so one batch's "
            "updates run while another's seeds act and step; 4 made 16 or 64 DQN CartPole seeds 27% faster on an H200, "
            "TD3 Pendulum groups 0-7%; each batch's first seed holds the batched library workspace (the memory plan "
            "counts it); 0 picks a batch for every 4 seeds a GPU has, at most 4 (2 where a seed's update is large, as "
            "TD3 256-256 at batch 256), and fewer (down to 1) when their leading seeds do not fit memory; each seed's "
            "results are the same bits either way"),

    ROW_I64("replay.capacity", replay.capacity, 1, 1099511627776.0, "100000",
            "transitions the replay buffer holds; the oldest is overwritten first"),
    ROW_ENUM("replay.location", replay.location, rlt_replay_location, replay_location_names, "auto",
             "where replay lives: auto (the device when it fits the budget, else host memory), device, or host"),
    ROW_ENUM("replay.obs_dtype", replay.obs_dtype, rlt_obs_dtype, obs_dtype_names, "auto",
             "how replay stores observations: auto (as the environment gives them), fp16 or bf16 (float observations "
             "in half the bytes, read back as fp32), fp32, or uint8 (image observations only)"),

    ROW_LIST("td3.actor_hidden", td3.actor_hidden, 1, 65536, "[256, 256]", "hidden layer widths of the actor"),
    ROW_LIST("td3.critic_hidden", td3.critic_hidden, 1, 65536, "[256, 256]", "hidden layer widths of each critic"),
    ROW_F64("td3.actor_lr", td3.actor_lr, 0, 1, CFG_LO_OPEN, "3e-4", "Adam learning rate of the actor"),
    ROW_F64("td3.critic_lr", td3.critic_lr, 0, 1, CFG_LO_OPEN, "3e-4", "Adam learning rate of the critics"),
    ROW_F64("td3.gamma", td3.gamma, 0, 1, 0, "0.99", "discount factor"),
    ROW_F64("td3.tau", td3.tau, 0, 1, CFG_LO_OPEN, "0.005", "Polyak averaging rate of the target networks"),
    ROW_F64("td3.policy_noise", td3.policy_noise, 0, 10, 0, "0.2",
            "std of the noise on target actions (target policy smoothing), in units of the action range's half-width"),
    ROW_F64("td3.noise_clip", td3.noise_clip, 0, 10, 0, "0.5", "clip of the target policy noise, same units"),
    ROW_I32("td3.policy_delay", td3.policy_delay, 1, 1000, "2", "critic updates per actor and target update"),
    ROW_F64("td3.exploration_noise", td3.exploration_noise, 0, 10, 0, "0.1",
            "std of the Gaussian exploration noise, same units"),

    ROW_F64("dqn.lr", dqn.lr, 0, 1, CFG_LO_OPEN, "2.5e-4", "Adam learning rate of the Q-network"),
    ROW_F64("dqn.gamma", dqn.gamma, 0, 1, 0, "0.99", "discount factor"),
    ROW_BOOL("dqn.double", dqn.double_q, "true", "double DQN: the online network picks the next action, the target rates it"),
    ROW_ENUM("dqn.loss", dqn.loss, rlt_dqn_loss, dqn_loss_names, "huber",
             "TD loss: huber (smooth L1, delta 1, as Mnih et al. 2015) or mse"),
    ROW_I64("dqn.target_update_every", dqn.target_update_every, 1, BIG_STEPS, "500",
            "env steps between target network updates"),
    ROW_F64("dqn.tau", dqn.tau, 0, 1, CFG_LO_OPEN, "1.0",
            "target update rate: 1 copies the network (hard update), below 1 is Polyak averaging"),
    ROW_F64("dqn.eps_start", dqn.eps_start, 0, 1, 0, "1.0", "exploration epsilon at the start"),
    ROW_F64("dqn.eps_end", dqn.eps_end, 0, 1, 0, "0.05", "exploration epsilon after the decay"),
    ROW_F64("dqn.eps_fraction", dqn.eps_fraction, 0, 1, CFG_LO_OPEN, "0.5",
            "fraction of train.total_steps over which epsilon decays linearly"),
    ROW_I64("dqn.learning_starts", dqn.learning_starts, 0, BIG_STEPS, "10000", "env steps before the first update"),
    ROW_I32("dqn.train_freq", dqn.train_freq, 1, 1 << 20, "10", "env steps between training rounds"),
    ROW_I32("dqn.gradient_steps", dqn.gradient_steps, 1, 1 << 20, "1", "updates per training round"),
    ROW_F64("dqn.max_grad_norm", dqn.max_grad_norm, 0, 1e9, 0, "10",
            "global gradient-norm clip over the whole network; 0 turns it off"),
    ROW_F64("dqn.eval_epsilon", dqn.eval_epsilon, 0, 1, 0, "0.05", "epsilon of the evaluation policy"),
    ROW_LIST("network.hidden", network.hidden, 1, 65536, "[120, 84]",
             "fully connected hidden widths of the Q-network, after the convolutional torso if any"),
    ROW_INPUTS("network.inputs", network.inputs, "none",
               "dict observations: none, or a list of named parts, each {name, shape: [D] or [C, H, W], dtype: u8 or "
               "f32, torso: a conv list like network.conv's, or none}; each torso's output is flattened and "
               "concatenated, in order, into the head's input"),
    ROW_CONV("network.conv", network.conv, "none",
             "convolutional torso for image observations: a preset, nature (Mnih et al. 2015: 32@8x8/4, 64@4x4/2, "
             "64@3x3/1), minatar (Young and Tian 2019: 16@3x3/1) or none, or a list of layers like "
             "[{out: 16, kernel: 3, stride: 1, pad: 0}] (stride and pad optional)"),

    ROW_F64("memory.budget_mb", memory.budget_mb, 0, 16777216, CFG_LO_OPEN | CFG_MIB, "512",
            "MiB the run may reserve on its device; init fails fast with a plan table when it does not fit"),
    ROW_F64("memory.process_budget_mb", memory.process_budget_mb, 0, 16777216, CFG_MIB, "0",
            "MiB the whole process may hold on its GPU: the CUDA context, loaded kernels and library handles "
            "(measured at init) plus the device arena; init fails fast when it does not fit; 0: no limit. On the "
            "CPU it caps the host arena, like budget_mb (the rest of the process is not counted)"),
    ROW_BOOL("memory.auto_fit", memory.auto_fit, "false",
             "when the plan does not fit, split the batch into the fewest micro-batches that fit (gradient accumulation)"),
    ROW_F64("memory.wait_s", memory.wait_s, 0, 86400, 0, "0",
            "when another process holds the device memory, retry the reservation once a second for this many seconds"),
    ROW_ENUM("memory.on_oom", memory.on_oom, rlt_on_oom, on_oom_names, "fail",
             "when the device arena cannot be reserved: fail (exit 3) or run on the CPU instead"),
    ROW_F64("memory.warn_free_mb", memory.warn_free_mb, 0, 16777216, CFG_MIB, "256",
            "GPU runs: warn once when the device's free memory falls under this many MiB while training (a "
            "simulator beside the run may then fail to allocate; the run's own arena is reserved); 0: never"),
    ROW_I64("checkpoint.every", checkpoint.every, 0, BIG_STEPS, "0",
            "env steps between periodic checkpoints (out_dir/ckpt_<step>.ckpt); 0 writes only final.ckpt"),
    ROW_I32("checkpoint.keep", checkpoint.keep, 1, 1000, "3", "periodic checkpoints to keep; older ones are deleted"),
    ROW_BOOL("checkpoint.include_replay", checkpoint.include_replay, "true",
             "save the replay buffer in checkpoints, so a resumed run continues exactly where it stopped"),
    ROW_BOOL("checkpoint.best", checkpoint.best, "true",
             "after each evaluation that beats the best so far, write out_dir/best.ckpt: that step's checkpoint "
             "without the replay (the best policy, for rlt_agent_load)"),
    ROW_I32("cpu.threads", cpu.threads, 0, 1024, "0",
            "CPU backend threads; 0 means 1; 2 or more adds a worker for independent and large ops (same results)"),
    ROW_F64("dist.timeout_s", dist.timeout_s, 0, 604800, CFG_LO_OPEN, "300",
            "the longest a data-parallel rank waits for the others (start-up, NCCL's set-up, a gradient average, the "
            "agreement at each step); past it the run is aborted with exit 1 and a message naming the rank"),
    ROW_F64("dist.bucket_mb", dist.bucket_mb, 0, 4096, 0, "0",
            "data-parallel gradient buckets, MiB: an optimiser block of at least twice this many bytes of gradient "
            "is averaged in buckets of layers (output layer first, each at least this big) while the backward of "
            "the earlier layers goes on (TD3's MLP networks); smaller blocks, and 0, keep one all-reduce after the "
            "backward; the same results either way (docs/data_parallel.md)"),
    ROW_STR("dist.rendezvous", dist.rendezvous, "env",
            "where the ranks of a run launched as one process per device (torchrun, srun, mpirun) meet: env "
            "(MASTER_ADDR and MASTER_PORT), tcp://HOST:PORT, or file:PATH (a file on a directory every rank sees)"),
    ROW_STR("out_dir", out_dir, "runs/td3_pendulum",
            "directory for config.yaml, metrics.csv, summary.json, final.ckpt, best.ckpt"),
};
#define N_KEYS (sizeof schema / sizeof schema[0])
_Static_assert(N_KEYS <= CFG_MAX_KEYS, "raise CFG_MAX_KEYS: the parser keeps one slot per key");

const cfg_key *config_schema_keys(size_t *n) {
    if (n) *n = N_KEYS;
    return schema;
}

size_t config_schema_index(const cfg_key *k) { return (size_t)(k - schema); }

const cfg_key *config_schema_find(const char *path, size_t len) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (strlen(schema[i].key) == len && memcmp(schema[i].key, path, len) == 0) return &schema[i];
    return NULL;
}

int config_schema_section(const char *path, size_t len) {
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *k = schema[i].key;
        if (len == 0 || (strlen(k) > len && memcmp(k, path, len) == 0 && k[len] == '.')) return (int)i;
    }
    return -1;
}

/* ---- small text helpers ---------------------------------------------------------------------------- */

/* A scalar as messages show it: at most 60 bytes, control characters as '?'. */
static const char *shown(const char *t, size_t n, char *buf, size_t cap) {
    size_t o = 0, lim = n < 60 ? n : 60;
    for (size_t i = 0; i < lim && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)t[i];
        buf[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (n > lim && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* strnlen is POSIX, not C11. */
static size_t bounded_len(const char *s, size_t cap) {
    const char *nul = memchr(s, '\0', cap);
    return nul ? (size_t)(nul - s) : cap;
}

static int is_null_text(const char *t, size_t n) {
    static const char *const nulls[] = {"~", "null", "Null", "NULL"};
    if (n == 0) return 1;
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strlen(nulls[i]) == n && memcmp(nulls[i], t, n) == 0) return 1;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decimal real syntax: -?(d+(.d*)?|.d+)([eE][-+]?d+)?. Stricter than strtod, which also takes hex,
 * "inf", "nan" and leading spaces, none of which belong in a config. */
static int is_real_syntax(const char *t, size_t n) {
    size_t i = 0, digits = 0;
    if (i < n && t[i] == '-') i++;
    while (i < n && is_digit(t[i])) i++, digits++;
    if (i < n && t[i] == '.') {
        i++;
        while (i < n && is_digit(t[i])) i++, digits++;
    }
    if (digits == 0) return 0;
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        size_t ed = 0;
        while (i < n && is_digit(t[i])) i++, ed++;
        if (ed == 0) return 0;
    }
    return i == n;
}

void config_schema_range_text(const cfg_key *k, char *buf, size_t cap) {
    if (k->type == CFG_DOUBLE)
        snprintf(buf, cap, "%c%.15g, %.15g%c", (k->flags & CFG_LO_OPEN) ? '(' : '[', k->lo, k->hi,
                 (k->flags & CFG_HI_OPEN) ? ')' : ']');
    else if (k->type == CFG_UINT64)
        snprintf(buf, cap, "[0, 18446744073709551615]");
    else
        snprintf(buf, cap, "[%.0f, %.0f]", k->lo, k->hi);
}

static int in_range(const cfg_key *k, double v) {
    if ((k->flags & CFG_LO_OPEN) ? !(v > k->lo) : !(v >= k->lo)) return 0;
    if ((k->flags & CFG_HI_OPEN) ? !(v < k->hi) : !(v <= k->hi)) return 0;
    return 1;
}

#define MIB_ONE_BYTE (1.0 / 1048576.0) /* 2^-20, exact */

/* CFG_MIB: above 0 but less than one byte. */
static int below_one_byte(const cfg_key *k, double v, const char *value_text, cfg_why *why) {
    if (!(k->flags & CFG_MIB) || v == 0.0 || v >= MIB_ONE_BYTE) return 0;
    snprintf(why->what, sizeof why->what, "%s MiB is less than one byte", value_text);
    snprintf(why->hint, sizeof why->hint, "a size in MiB is at least 2^-20 (one byte, 9.5367431640625e-07)%s (%s)",
             k->flags & CFG_LO_OPEN ? "" : ", or 0", k->doc);
    return 1;
}

static int range_error(const cfg_key *k, const char *value_text, cfg_why *why) {
    char r[96];
    config_schema_range_text(k, r, sizeof r);
    snprintf(why->what, sizeof why->what, "%s is out of range", value_text);
    snprintf(why->hint, sizeof why->hint, "allowed range is %s (%s)", r, k->doc);
    return -1;
}

/* Whole numbers: -?digits, no '+', no leading zero (YAML 1.1 reads 010 as octal, 1.2 as ten), no 1e5.
 * allow_negative is 0 for uint64. The value is returned as a magnitude and a sign so that the full
 * uint64 and int64 ranges are representable. */
static int parse_whole(const cfg_key *k, const char *t, size_t n, int plain, int allow_negative, int *negative,
                       uint64_t *mag, cfg_why *why) {
    char s[80], r[96];
    config_schema_range_text(k, r, sizeof r);
    if (!plain) {
        snprintf(why->what, sizeof why->what, "expected an integer, got the quoted string \"%s\"", shown(t, n, s, sizeof s));
        snprintf(why->hint, sizeof why->hint, "write numbers without quotes; allowed range is %s (%s)", r, k->doc);
        return -1;
    }
    size_t i = 0;
    *negative = 0;
    if (i < n && t[i] == '-') *negative = 1, i++;
    size_t d0 = i;
    while (i < n && is_digit(t[i])) i++;
    if (i != n || i == d0) {
        snprintf(why->what, sizeof why->what, "expected an integer, got '%s'", shown(t, n, s, sizeof s));
        snprintf(why->hint, sizeof why->hint, "%s takes a whole number in %s%s (%s)", k->key, r,
                 is_real_syntax(t, n) ? ", written without a decimal point or exponent" : "", k->doc);
        return -1;
    }
    if (n - d0 > 1 && t[d0] == '0') {
        snprintf(why->what, sizeof why->what, "'%s' has a leading zero", shown(t, n, s, sizeof s));
        snprintf(why->hint, sizeof why->hint, "remove the leading zeros: YAML 1.1 reads them as octal, YAML 1.2 as decimal");
        return -1;
    }
    uint64_t v = 0;
    for (size_t j = d0; j < n; j++) {
        uint64_t d = (uint64_t)(t[j] - '0');
        if (v > (UINT64_MAX - d) / 10) return range_error(k, shown(t, n, s, sizeof s), why);
        v = v * 10 + d;
    }
    if (*negative && !allow_negative && v != 0) return range_error(k, shown(t, n, s, sizeof s), why);
    *mag = v;
    return 0;
}

static int parse_signed(const cfg_key *k, const char *t, size_t n, int plain, int64_t *out, cfg_why *why) {
    int neg;
    uint64_t mag;
    char s[80];
    if (parse_whole(k, t, n, plain, 1, &neg, &mag, why) != 0) return -1;
    /* Every signed range in the table is inside +-2^53, so anything past 2^62 is out of range anyway. */
    if (mag > ((uint64_t)1 << 62)) return range_error(k, shown(t, n, s, sizeof s), why);
    int64_t v = neg ? -(int64_t)mag : (int64_t)mag;
    if (!in_range(k, (double)v)) return range_error(k, shown(t, n, s, sizeof s), why);
    *out = v;
    return 0;
}

/* strtod and printf follow LC_NUMERIC, and a host program that embeds the library may have set a locale
 * with a decimal comma. Config text always uses '.', so it is swapped for the locale's point before
 * strtod and back after printf; otherwise "0.5" would silently read as 0 in such a process. */
static char locale_point(void) {
    const char *dp = localeconv()->decimal_point;
    return dp && dp[0] && !dp[1] ? dp[0] : '.';
}

/* t (n < 128 bytes, decimal syntax already checked) to a double; -1 when strtod stops early. */
static int decimal_to_double(const char *t, size_t n, char num[128], double *out) {
    char point = locale_point();
    for (size_t i = 0; i < n; i++) num[i] = t[i] == '.' ? point : t[i];
    num[n] = '\0';
    char *end = NULL;
    *out = strtod(num, &end);
    return end == num + n ? 0 : -1;
}

static int parse_double(const cfg_key *k, const char *t, size_t n, int plain, double *out, cfg_why *why) {
    char s[80], r[96], num[128];
    config_schema_range_text(k, r, sizeof r);
    if (!plain || !is_real_syntax(t, n) || n >= sizeof num) {
        if (!plain)
            snprintf(why->what, sizeof why->what, "expected a number, got the quoted string \"%s\"", shown(t, n, s, sizeof s));
        else
            snprintf(why->what, sizeof why->what, "expected a number, got '%s'", shown(t, n, s, sizeof s));
        snprintf(why->hint, sizeof why->hint, "write a decimal number like 0.5 or 3e-4 (no quotes) in %s (%s)", r, k->doc);
        return -1;
    }
    double v;
    if (decimal_to_double(t, n, num, &v) != 0) {
        snprintf(why->what, sizeof why->what, "'%s' could not be converted", shown(t, n, s, sizeof s));
        snprintf(why->hint, sizeof why->hint, "the host program's LC_NUMERIC locale uses a multi-byte decimal point; "
                 "set LC_NUMERIC to C");
        return -1;
    }
    if (!isfinite(v) || !in_range(k, v)) return range_error(k, shown(t, n, s, sizeof s), why);
    if (below_one_byte(k, v, shown(t, n, s, sizeof s), why)) return -1;
    *out = v;
    return 0;
}

/* CFG_NAME: t is one of the '|'-separated choices. */
static int name_matches(const char *choices, const char *t, size_t n) {
    for (const char *c = choices;;) {
        size_t cl = strcspn(c, "|");
        if (cl == n && memcmp(c, t, n) == 0) return 1;
        if (!c[cl]) return 0;
        c += cl + 1;
    }
}

const char *config_schema_choices(const cfg_key *k, char *buf, size_t cap) {
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    if (k->type == CFG_NAME) rlt_text_add(&o, "%s", k->choices);
    for (int32_t i = 0; i < k->n_names; i++) rlt_text_add(&o, "%s%s", i ? "|" : "", k->names[i]);
    if (k->type == CFG_DEVICE) rlt_text_add(&o, "|cuda:N");
    return buf;
}

/* A value that is none of the row's choices; enums, the device and names say it in the same words. */
static int choice_error(const cfg_key *k, const char *t, size_t n, cfg_why *why) {
    char s[80], c[160];
    config_schema_choices(k, c, sizeof c);
    snprintf(why->what, sizeof why->what, "'%s' is not one of %s", shown(t, n, s, sizeof s), c);
    snprintf(why->hint, sizeof why->hint, "use one of %s%s (%s)", c,
             k->type == CFG_DEVICE ? ", where N is a device index like 0" : "", k->doc);
    return -1;
}

/* A stored enum or device that no name reads to: code wrote the field directly. */
static int stored_choice_error(const cfg_key *k, const char *held, cfg_why *why) {
    char c[160];
    snprintf(why->what, sizeof why->what, "holds %s, which is not one of %s", held, config_schema_choices(k, c, sizeof c));
    snprintf(why->hint, sizeof why->hint, "code wrote the field directly; set it through rlt_config_set");
    return -1;
}

/* CFG_ENUM: the value whose name is t, or -1. */
static int32_t enum_parse(const cfg_key *k, const char *t, size_t n) {
    for (int32_t v = 0; v < k->n_names; v++)
        if (strlen(k->names[v]) == n && memcmp(k->names[v], t, n) == 0) return v;
    return -1;
}

static void store_text(char *dst, size_t cap, const char *t, size_t n) {
    memset(dst, 0, cap);
    memcpy(dst, t, n < cap ? n : cap - 1);
}

/* The checks a name or string value must pass, shared by the parser and rlt_config_validate. */
static int check_text(const cfg_key *k, const char *t, size_t n, cfg_why *why) {
    if (k->type == CFG_NAME) {
        if (memchr(t, '\0', n) || n >= k->size || !name_matches(k->choices, t, n)) return choice_error(k, t, n, why);
        return 0;
    }
    if (memchr(t, '\0', n)) {
        snprintf(why->what, sizeof why->what, "contains a NUL character");
        snprintf(why->hint, sizeof why->hint, "remove the \\0 escape (%s)", k->doc);
        return -1;
    }
    /* A newline or another control character (a tab is a character of some paths) would make a path (out_dir)
     * another path, or an echo of the value drive the terminal: refused in every text value. */
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)t[i] < 0x20 && t[i] != '\t') || (unsigned char)t[i] == 0x7f) {
            snprintf(why->what, sizeof why->what, "contains the control character 0x%02x at byte %zu", (unsigned char)t[i], i);
            snprintf(why->hint, sizeof why->hint, "use printable characters only (%s)", k->doc);
            return -1;
        }
    if ((double)n < k->lo || (double)n > k->hi) {
        if (n == 0) snprintf(why->what, sizeof why->what, "must not be empty");
        else snprintf(why->what, sizeof why->what, "is too long (%zu bytes)", n);
        snprintf(why->hint, sizeof why->hint, "use %.0f to %.0f bytes (%s)", k->lo, k->hi, k->doc);
        return -1;
    }
    return 0;
}

/* The value's text stored into field, k's field wherever it is (a config's, or a population member's bits). */
static int set_field(const cfg_key *k, char *field, const char *t, size_t n, int plain, int entry_index, cfg_why *why) {
    char s[80];
    why->what[0] = why->hint[0] = '\0';
    if (plain && is_null_text(t, n)) {
        snprintf(why->what, sizeof why->what, "has no value");
        snprintf(why->hint, sizeof why->hint, "write a value (%s), or delete the line to keep the current one", k->doc);
        return -1;
    }
    switch (k->type) {
    case CFG_INT32: {
        int64_t v;
        if (parse_signed(k, t, n, plain, &v, why) != 0) return -1;
        *(int32_t *)(void *)field = (int32_t)v;
        return 0;
    }
    case CFG_INT64: {
        int64_t v;
        if (parse_signed(k, t, n, plain, &v, why) != 0) return -1;
        *(int64_t *)(void *)field = v;
        return 0;
    }
    case CFG_UINT64: {
        int neg;
        uint64_t v;
        if (parse_whole(k, t, n, plain, 0, &neg, &v, why) != 0) return -1;
        *(uint64_t *)(void *)field = v;
        return 0;
    }
    case CFG_DOUBLE: {
        double v = 0.0;
        if (parse_double(k, t, n, plain, &v, why) != 0) return -1;
        *(double *)(void *)field = v;
        return 0;
    }
    case CFG_BOOL:
        if (plain && n == 4 && memcmp(t, "true", 4) == 0) *(int32_t *)(void *)field = 1;
        else if (plain && n == 5 && memcmp(t, "false", 5) == 0) *(int32_t *)(void *)field = 0;
        else {
            snprintf(why->what, sizeof why->what, "expected true or false, got %s'%s'", plain ? "" : "the quoted string ",
                     shown(t, n, s, sizeof s));
            snprintf(why->hint, sizeof why->hint, "write true or false without quotes (%s)", k->doc);
            return -1;
        }
        return 0;
    case CFG_ENUM: {
        int32_t v = enum_parse(k, t, n);
        if (v < 0) return choice_error(k, t, n, why);
        *(int32_t *)(void *)field = v;
        return 0;
    }
    case CFG_DEVICE: {
        rlt_device d;
        if (device_parse(t, n, &d) != 0) return choice_error(k, t, n, why);
        memcpy(field, &d, sizeof d);
        return 0;
    }
    case CFG_NAME:
    case CFG_STRING:
        if (check_text(k, t, n, why) != 0) return -1;
        store_text(field, k->size, t, n);
        return 0;
    case CFG_CONV_LIST:
        return config_conv_set_preset((rlt_conv_list *)(void *)field, t, n, why);
    case CFG_INPUT_LIST:
        return config_inputs_set_scalar((rlt_input_list *)(void *)field, t, n, why);
    case CFG_INT_LIST: {
        rlt_int_list *l = (rlt_int_list *)(void *)field;
        char r[96];
        config_schema_range_text(k, r, sizeof r);
        if (entry_index >= RLT_CFG_MAX_LAYERS) {
            snprintf(why->what, sizeof why->what, "has more than %d entries", RLT_CFG_MAX_LAYERS);
            snprintf(why->hint, sizeof why->hint, "give 1 to %d entries, like [256, 256] (RLT_CFG_MAX_LAYERS; %s)",
                     RLT_CFG_MAX_LAYERS, k->doc);
            return -1;
        }
        int64_t v;
        if (parse_signed(k, t, n, plain, &v, why) != 0) {
            /* Prefix the entry number, keeping the buffer's size (the tail may be cut). */
            char what[sizeof why->what + 32];
            int len = snprintf(what, sizeof what, "entry %d: %s", entry_index + 1, why->what);
            size_t keep = len < 0 ? 0 : ((size_t)len < sizeof why->what ? (size_t)len : sizeof why->what - 1);
            memcpy(why->what, what, keep);
            why->what[keep] = '\0';
            return -1;
        }
        if (entry_index == 0) memset(l, 0, sizeof *l);
        l->v[entry_index] = (int32_t)v;
        l->n = entry_index + 1;
        return 0;
    }
    case CFG_DEVICE_LIST: {
        rlt_device_list *l = (rlt_device_list *)(void *)field;
        if (entry_index >= RLT_CFG_MAX_DEVICES) {
            snprintf(why->what, sizeof why->what, "has more than %d entries", RLT_CFG_MAX_DEVICES);
            snprintf(why->hint, sizeof why->hint, "give at most %d devices (RLT_CFG_MAX_DEVICES; %s)",
                     RLT_CFG_MAX_DEVICES, k->doc);
            return -1;
        }
        rlt_device d;
        if (device_parse(t, n, &d) != 0 || d.kind == RLT_DEVICE_AUTO) {
            snprintf(why->what, sizeof why->what, "entry %d: '%s' is not a device", entry_index + 1,
                     shown(t, n, s, sizeof s));
            snprintf(why->hint, sizeof why->hint, "write cpu or cuda:N for each entry, like [cuda:0, cuda:1] (%s)", k->doc);
            return -1;
        }
        if (entry_index == 0) memset(l, 0, sizeof *l);
        if (d.kind == RLT_DEVICE_CUDA && d.index < 0) d.index = 0;
        l->d[entry_index] = d;
        l->n = entry_index + 1;
        return 0;
    }
    case CFG_SEED_LIST: {
        rlt_seed_list *l = (rlt_seed_list *)(void *)field;
        if (entry_index >= RLT_CFG_MAX_SEEDS) {
            snprintf(why->what, sizeof why->what, "has more than %d entries", RLT_CFG_MAX_SEEDS);
            snprintf(why->hint, sizeof why->hint, "give at most %d seeds (RLT_CFG_MAX_SEEDS; %s)", RLT_CFG_MAX_SEEDS,
                     k->doc);
            return -1;
        }
        int neg;
        uint64_t v;
        if (parse_whole(k, t, n, plain, 0, &neg, &v, why) != 0) return -1;
        if (entry_index == 0) memset(l, 0, sizeof *l);
        l->v[entry_index] = v;
        l->n = entry_index + 1;
        return 0;
    }
    }
    snprintf(why->what, sizeof why->what, "has a type the schema does not know");
    snprintf(why->hint, sizeof why->hint, "this is a bug in config_schema.c");
    return -1;
}

int config_schema_set_scalar(const cfg_key *k, rlt_config *base, const char *t, size_t n, int plain,
                             int entry_index, cfg_why *why) {
    return set_field(k, (char *)base + k->offset, t, n, plain, entry_index, why);
}

static int check_field(const cfg_key *k, const char *field, cfg_why *why) {
    char s[64];
    why->what[0] = why->hint[0] = '\0';
    switch (k->type) {
    case CFG_INT32: {
        int32_t v = *(const int32_t *)(const void *)field;
        snprintf(s, sizeof s, "%d", (int)v);
        return in_range(k, (double)v) ? 0 : range_error(k, s, why);
    }
    case CFG_INT64: {
        int64_t v = *(const int64_t *)(const void *)field;
        snprintf(s, sizeof s, "%lld", (long long)v);
        return in_range(k, (double)v) ? 0 : range_error(k, s, why);
    }
    case CFG_UINT64:
        return 0;
    case CFG_DOUBLE: {
        double v = *(const double *)(const void *)field;
        snprintf(s, sizeof s, "%.17g", v);
        if (!isfinite(v) || !in_range(k, v)) return range_error(k, s, why);
        return below_one_byte(k, v, s, why) ? -1 : 0;
    }
    case CFG_BOOL: {
        int32_t v = *(const int32_t *)(const void *)field;
        if (v == 0 || v == 1) return 0;
        snprintf(why->what, sizeof why->what, "holds %d, not a boolean", (int)v);
        snprintf(why->hint, sizeof why->hint, "set it to true or false (%s)", k->doc);
        return -1;
    }
    case CFG_ENUM: {
        int32_t v = *(const int32_t *)(const void *)field;
        snprintf(s, sizeof s, "%d", (int)v);
        return v >= 0 && v < k->n_names ? 0 : stored_choice_error(k, s, why);
    }
    case CFG_DEVICE: {
        rlt_device d;
        memcpy(&d, field, sizeof d);
        snprintf(s, sizeof s, "kind %d, index %d", (int)d.kind, (int)d.index);
        return device_check(d) == 0 ? 0 : stored_choice_error(k, s, why);
    }
    case CFG_NAME:
    case CFG_STRING: {
        const char *nul = memchr(field, '\0', k->size);
        if (!nul) {
            snprintf(why->what, sizeof why->what, "is not NUL-terminated within its %zu bytes", k->size);
            snprintf(why->hint, sizeof why->hint, "code wrote the field directly; set it through rlt_config_set");
            return -1;
        }
        return check_text(k, field, (size_t)(nul - field), why);
    }
    case CFG_CONV_LIST:
        return config_conv_check((const rlt_conv_list *)(const void *)field, why);
    case CFG_INPUT_LIST:
        return config_inputs_check((const rlt_input_list *)(const void *)field, why);
    case CFG_INT_LIST: {
        const rlt_int_list *l = (const rlt_int_list *)(const void *)field;
        if (l->n < 1 || l->n > RLT_CFG_MAX_LAYERS) {
            snprintf(why->what, sizeof why->what, "has %d entries", (int)l->n);
            snprintf(why->hint, sizeof why->hint, "give 1 to %d entries, like [256, 256] (%s)", RLT_CFG_MAX_LAYERS, k->doc);
            return -1;
        }
        for (int32_t i = 0; i < l->n; i++)
            if (!in_range(k, (double)l->v[i])) {
                snprintf(s, sizeof s, "entry %d (%d)", (int)i + 1, (int)l->v[i]);
                return range_error(k, s, why);
            }
        return 0;
    }
    case CFG_DEVICE_LIST: {
        /* One kind throughout (a CPU rank cannot average with a GPU rank's NCCL), and each GPU once (NCCL refuses
         * two ranks on one GPU; two seeds on one GPU are what one device already gives). */
        const rlt_device_list *l = (const rlt_device_list *)(const void *)field;
        if (l->n < 0 || l->n > RLT_CFG_MAX_DEVICES) {
            snprintf(why->what, sizeof why->what, "has %d entries", (int)l->n);
            snprintf(why->hint, sizeof why->hint, "give 0 to %d devices (%s)", RLT_CFG_MAX_DEVICES, k->doc);
            return -1;
        }
        for (int32_t i = 0; i < l->n; i++) {
            char a[32], b[32];
            device_format(l->d[i], a, sizeof a);
            if (device_check(l->d[i]) != 0 || l->d[i].kind == RLT_DEVICE_AUTO) {
                snprintf(why->what, sizeof why->what, "entry %d is not cpu or cuda:N", (int)i + 1);
                snprintf(why->hint, sizeof why->hint, "write each device out, like [cuda:0, cuda:1] (%s)", k->doc);
                return -1;
            }
            if (l->d[i].kind != l->d[0].kind) {
                device_format(l->d[0], b, sizeof b);
                snprintf(why->what, sizeof why->what, "mixes %s (entry 1) and %s (entry %d)", b, a, (int)i + 1);
                snprintf(why->hint, sizeof why->hint, "list GPUs only or cpu only: the ranks average their gradients "
                         "through one kind of communicator");
                return -1;
            }
            for (int32_t j = 0; j < i && l->d[i].kind == RLT_DEVICE_CUDA; j++)
                if (device_cuda_index(l->d[i]) == device_cuda_index(l->d[j])) {
                    snprintf(why->what, sizeof why->what, "entry %d (%s) repeats entry %d", (int)i + 1, a, (int)j + 1);
                    snprintf(why->hint, sizeof why->hint, "list each GPU once (NCCL cannot put two ranks on one GPU)");
                    return -1;
                }
        }
        return 0;
    }
    case CFG_SEED_LIST: {
        /* Two members with one seed would be the same run twice, writing into the same out_dir/seed_<seed>/. */
        const rlt_seed_list *l = (const rlt_seed_list *)(const void *)field;
        if (l->n < 0 || l->n > RLT_CFG_MAX_SEEDS) {
            snprintf(why->what, sizeof why->what, "has %d entries", (int)l->n);
            snprintf(why->hint, sizeof why->hint, "give 0 to %d seeds (%s)", RLT_CFG_MAX_SEEDS, k->doc);
            return -1;
        }
        for (int32_t i = 1; i < l->n; i++)
            for (int32_t j = 0; j < i; j++)
                if (l->v[i] == l->v[j]) {
                    snprintf(why->what, sizeof why->what, "entry %d (%llu) repeats entry %d", (int)i + 1,
                             (unsigned long long)l->v[i], (int)j + 1);
                    snprintf(why->hint, sizeof why->hint, "give each seed once: the same seed twice is the same run "
                             "twice, into the same out_dir/seed_%llu/", (unsigned long long)l->v[i]);
                    return -1;
                }
        return 0;
    }
    }
    return 0;
}

/* ---- writing values back as YAML --------------------------------------------------------------------- */


/* The shortest of %.15g .. %.17g that reads back to the same double: %.17g always does, but prints 0.99
 * as 0.98999999999999999, and a fixed %.10g would lose values typed with more digits. */
static void format_double(rlt_text *o, double v) {
    char tmp[40], point = locale_point();
    for (int p = 15; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*g", p, v);
        if (strtod(tmp, NULL) == v) break;
    }
    for (char *c = tmp; *c; c++)
        if (*c == point) *c = '.';
    rlt_text_add(o, "%s", tmp);
}

/* Free-form strings are always double-quoted, so that values like "true", "123", "a: b" or "#x" read back
 * as the same string; control characters and the quote itself are escaped. */
static void format_quoted(rlt_text *o, const char *s) {
    rlt_text_add(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') rlt_text_add(o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) rlt_text_add(o, "\\x%02x", *p);
        else rlt_text_add(o, "%c", *p);
    }
    rlt_text_add(o, "\"");
}

int config_schema_check_value(const cfg_key *k, const rlt_config *base, cfg_why *why) {
    return check_field(k, (const char *)base + k->offset, why);
}

static size_t format_field(const cfg_key *k, const char *field, char *buf, size_t cap) {
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    switch (k->type) {
    case CFG_INT32: rlt_text_add(&o, "%d", (int)*(const int32_t *)(const void *)field); break;
    case CFG_INT64: rlt_text_add(&o, "%lld", (long long)*(const int64_t *)(const void *)field); break;
    case CFG_UINT64: rlt_text_add(&o, "%llu", (unsigned long long)*(const uint64_t *)(const void *)field); break;
    case CFG_DOUBLE: format_double(&o, *(const double *)(const void *)field); break;
    case CFG_BOOL: rlt_text_add(&o, "%s", *(const int32_t *)(const void *)field ? "true" : "false"); break;
    case CFG_ENUM: {
        /* A value outside the table (written by code; validate refuses it) is shown as its number. */
        int32_t v = *(const int32_t *)(const void *)field;
        if (v >= 0 && v < k->n_names) rlt_text_add(&o, "%s", k->names[v]);
        else rlt_text_add(&o, "%d", (int)v);
        break;
    }
    case CFG_DEVICE: {
        rlt_device d;
        char name[64];
        memcpy(&d, field, sizeof d);
        device_format(d, name, sizeof name);
        rlt_text_add(&o, "%s", name);
        break;
    }
    case CFG_NAME: rlt_text_add(&o, "%.*s", (int)bounded_len(field, k->size), field); break;
    case CFG_STRING: {
        char tmp[RLT_CFG_STR + 1];
        size_t n = bounded_len(field, k->size);
        n = n < RLT_CFG_STR ? n : RLT_CFG_STR;
        memcpy(tmp, field, n);
        tmp[n] = '\0';
        format_quoted(&o, tmp);
        break;
    }
    case CFG_INT_LIST: {
        const rlt_int_list *l = (const rlt_int_list *)(const void *)field;
        int32_t n = l->n < 0 ? 0 : (l->n > RLT_CFG_MAX_LAYERS ? RLT_CFG_MAX_LAYERS : l->n);
        rlt_text_add(&o, "[");
        for (int32_t i = 0; i < n; i++) rlt_text_add(&o, "%s%d", i ? ", " : "", (int)l->v[i]);
        rlt_text_add(&o, "]");
        break;
    }
    case CFG_CONV_LIST: config_conv_format(&o, (const rlt_conv_list *)(const void *)field); break;
    case CFG_SEED_LIST: {
        const rlt_seed_list *l = (const rlt_seed_list *)(const void *)field;
        int32_t n = l->n < 0 ? 0 : (l->n > RLT_CFG_MAX_SEEDS ? RLT_CFG_MAX_SEEDS : l->n);
        rlt_text_add(&o, "[");
        for (int32_t i = 0; i < n; i++) rlt_text_add(&o, "%s%llu", i ? ", " : "", (unsigned long long)l->v[i]);
        rlt_text_add(&o, "]");
        break;
    }
    case CFG_INPUT_LIST: config_inputs_format(&o, (const rlt_input_list *)(const void *)field, 0); break;
    case CFG_DEVICE_LIST: {
        const rlt_device_list *l = (const rlt_device_list *)(const void *)field;
        int32_t n = l->n < 0 ? 0 : (l->n > RLT_CFG_MAX_DEVICES ? RLT_CFG_MAX_DEVICES : l->n);
        char name[32];
        rlt_text_add(&o, "[");
        for (int32_t i = 0; i < n; i++) {
            device_format(l->d[i], name, sizeof name);
            rlt_text_add(&o, "%s%s", i ? ", " : "", name);
        }
        rlt_text_add(&o, "]");
        break;
    }
    }
    return o.len;
}

size_t config_schema_format(const cfg_key *k, const rlt_config *base, char *buf, size_t cap) {
    return format_field(k, (const char *)base + k->offset, buf, cap);
}

/* ---- one scalar held as bits (population values: engine/config_population.c) ------------------------- */

int config_schema_is_scalar(const cfg_key *k) {
    return (k->type == CFG_INT32 || k->type == CFG_INT64 || k->type == CFG_UINT64 || k->type == CFG_DOUBLE ||
            k->type == CFG_BOOL || k->type == CFG_ENUM) && k->size <= sizeof(uint64_t);
}

int config_schema_parse_bits(const cfg_key *k, const char *t, size_t n, int plain, uint64_t *bits, cfg_why *why) {
    uint64_t b = 0;
    int rc = set_field(k, (char *)&b, t, n, plain, 0, why);
    if (rc == 0) *bits = b;
    return rc;
}

int config_schema_check_bits(const cfg_key *k, uint64_t bits, cfg_why *why) {
    return check_field(k, (const char *)&bits, why);
}

size_t config_schema_format_bits(const cfg_key *k, uint64_t bits, char *buf, size_t cap) {
    return format_field(k, (const char *)&bits, buf, cap);
}

int config_schema_set_list_entry(const cfg_key *k, rlt_int_list *l, const char *t, size_t n, int plain, int entry_index,
                                 cfg_why *why) {
    return k->type == CFG_INT_LIST ? set_field(k, (char *)l, t, n, plain, entry_index, why) : -1;
}

int config_schema_check_list(const cfg_key *k, const rlt_int_list *l, cfg_why *why) {
    return check_field(k, (const char *)l, why);
}

size_t config_schema_format_list(const cfg_key *k, const rlt_int_list *l, char *buf, size_t cap) {
    return format_field(k, (const char *)l, buf, cap);
}

/* ---- "did you mean" ---------------------------------------------------------------------------------- */

#define NEAR_CAP 128

/* Optimal string alignment distance: Levenshtein plus adjacent transpositions, the commonest typo
 * ("bacth_size"). Long inputs get a large distance; a 128-byte typo is not worth a suggestion. */
static int osa_distance(const char *a, size_t na, const char *b, size_t nb) {
    if (na >= NEAR_CAP || nb >= NEAR_CAP) return 1 << 20;
    int r0[NEAR_CAP + 1], r1[NEAR_CAP + 1], r2[NEAR_CAP + 1];
    int *pp = r0, *prev = r1, *cur = r2;
    for (size_t j = 0; j <= nb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;
            cur[j] = best;
        }
        int *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

static const char *leaf_of(const char *s, size_t n, size_t *leaf_len) {
    size_t i = n;
    while (i > 0 && s[i - 1] != '.') i--;
    *leaf_len = n - i;
    return s + i;
}

/* A candidate scores its distance to the whole path, or to the last component plus one, so that a key
 * put in the wrong section ("train.gamma") still finds its home ("td3.gamma"). */
static int candidate_score(const char *path, size_t np, const char *cand, size_t nc) {
    size_t lp, lc;
    const char *pl = leaf_of(path, np, &lp), *cl = leaf_of(cand, nc, &lc);
    int whole = osa_distance(path, np, cand, nc), leaf = osa_distance(pl, lp, cl, lc) + 1;
    return whole < leaf ? whole : leaf;
}

const char *config_schema_nearest(const char *path, char *buf, size_t cap) {
    size_t np = strlen(path), lp;
    leaf_of(path, np, &lp);
    /* A third of the name's length catches typos without proposing an unrelated key for a wild guess. */
    int limit = lp / 3 > 1 ? (int)(lp / 3) : 1, best = limit + 1;
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *k = schema[i].key;
        size_t nk = strlen(k);
        /* The key itself, then each section above it ("td3" for "td3.gamma"). */
        for (size_t end = nk; end > 0; end--) {
            if (end != nk && k[end] != '.') continue;
            int d = candidate_score(path, np, k, end);
            if (d < best) {
                best = d;
                snprintf(buf, cap, "%.*s", (int)end, k);
            }
        }
    }
    return best <= limit ? buf : NULL;
}

void config_schema_children(const char *prefix, char *buf, size_t cap) {
    size_t np = strlen(prefix), last_len = 0;
    const char *last = NULL;
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *k = schema[i].key;
        if (np && !(strncmp(k, prefix, np) == 0 && k[np] == '.')) continue;
        const char *child = np ? k + np + 1 : k;
        size_t n = strcspn(child, ".");
        if (last && n == last_len && memcmp(child, last, n) == 0) continue;
        rlt_text_add(&o, "%s%.*s", last ? ", " : "", (int)n, child);
        last = child;
        last_len = n;
    }
}

/* ---- defaults and the table's own checks ------------------------------------------------------------- */

/* Defaults are written as YAML values; lists as "[256, 256]", read here without libyaml because the
 * table's own syntax is all it has to understand. */
static int apply_default(const cfg_key *k, rlt_config *cfg, cfg_why *why) {
    const char *d = k->def;
    if (k->type != CFG_INT_LIST && k->type != CFG_SEED_LIST && k->type != CFG_DEVICE_LIST)
        return config_schema_set_scalar(k, cfg, d, strlen(d), k->type != CFG_STRING && k->type != CFG_NAME, 0, why);
    const char *p = d + (*d == '[');
    while (*p == ' ') p++;
    if (*p == ']') { /* "[]": no entries (an int list's check then refuses it) */
        memset((char *)cfg + k->offset, 0, k->size);
        return 0;
    }
    for (int idx = 0;; idx++) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, ",]");
        size_t t = n;
        while (t > 0 && p[t - 1] == ' ') t--;
        if (config_schema_set_scalar(k, cfg, p, t, 1, idx, why) != 0) return -1;
        p += n;
        if (*p != ',') break;
        p++;
    }
    return 0;
}

void config_set_defaults(rlt_config *cfg) {
    cfg_why why;
    memset(cfg, 0, sizeof *cfg);
    /* A default that does not parse is a table bug that config_schema_selftest (test_config) reports;
     * the field then stays zero, which validate refuses for every ranged key. */
    for (size_t i = 0; i < N_KEYS; i++) (void)apply_default(&schema[i], cfg, &why);
    snprintf(cfg->source, sizeof cfg->source, "defaults");
}

static int has_section(const char *key, const char *sec, size_t n) {
    return strlen(key) > n && strncmp(key, sec, n) == 0 && key[n] == '.';
}

int config_schema_selftest(char *why_buf, size_t cap) {
    rlt_config scratch;
    cfg_why why;
    for (size_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &schema[i];
        const char *key = k->key;
        size_t nk = strlen(key);
        if (nk == 0 || key[0] == '.' || key[nk - 1] == '.' || strstr(key, "..") ||
            strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_.") != nk) {
            snprintf(why_buf, cap, "row %zu: key '%s' is not a dotted lower-case name", i, key);
            return -1;
        }
        for (size_t j = 0; j < N_KEYS; j++) {
            if (j != i && strcmp(schema[j].key, key) == 0) {
                snprintf(why_buf, cap, "key '%s' appears twice", key);
                return -1;
            }
            if (has_section(schema[j].key, key, nk)) {
                snprintf(why_buf, cap, "'%s' is both a key and a section", key);
                return -1;
            }
        }
        /* Contiguity: for each section above this key, every row between its first row and this one
         * must be in that section too. */
        for (size_t end = 1; end < nk; end++) {
            if (key[end] != '.') continue;
            size_t first = (size_t)config_schema_section(key, end);
            for (size_t j = first; j < i; j++)
                if (!has_section(schema[j].key, key, end)) {
                    snprintf(why_buf, cap, "section '%.*s' is split: '%s' lies between its rows", (int)end, key,
                             schema[j].key);
                    return -1;
                }
        }
        int is32 = k->type == CFG_INT32 || k->type == CFG_INT_LIST || k->type == CFG_BOOL;
        if (!(k->lo <= k->hi) || (is32 && (k->lo < -2147483648.0 || k->hi > 2147483647.0)) ||
            (k->type == CFG_INT_LIST && k->size != sizeof(rlt_int_list)) ||
            (k->type == CFG_CONV_LIST && k->size != sizeof(rlt_conv_list)) ||
            (k->type == CFG_SEED_LIST && k->size != sizeof(rlt_seed_list)) ||
            (k->type == CFG_DEVICE_LIST && k->size != sizeof(rlt_device_list)) ||
            (k->type == CFG_INPUT_LIST && k->size != sizeof(rlt_input_list)) ||
            ((k->type == CFG_INT32 || k->type == CFG_BOOL || k->type == CFG_ENUM) && k->size != sizeof(int32_t)) ||
            (k->type == CFG_DEVICE && k->size != sizeof(rlt_device)) ||
            ((k->type == CFG_INT64) && (k->lo < -9007199254740992.0 || k->hi > 9007199254740992.0))) {
            snprintf(why_buf, cap, "key '%s': range [%g, %g] does not fit its field", key, k->lo, k->hi);
            return -1;
        }
        if ((k->type == CFG_NAME) != (k->choices != NULL) ||
            (k->type == CFG_ENUM || k->type == CFG_DEVICE) != (k->names != NULL && k->n_names > 0) || !k->def ||
            !k->doc || !k->doc[0]) {
            snprintf(why_buf, cap, "key '%s': choices, default or doc missing", key);
            return -1;
        }
        /* Every value needs a name a config can write: an empty one would dump as no value at all. */
        for (int32_t v = 0; v < k->n_names; v++)
            if (!k->names[v] || !k->names[v][0]) {
                snprintf(why_buf, cap, "key '%s': value %d has no name", key, (int)v);
                return -1;
            }
        memset(&scratch, 0, sizeof scratch);
        if (apply_default(k, &scratch, &why) != 0 || config_schema_check_value(k, &scratch, &why) != 0) {
            snprintf(why_buf, cap, "key '%s': default '%s' %s; %s", key, k->def, why.what, why.hint);
            return -1;
        }
    }
    if (cap) why_buf[0] = '\0';
    return 0;
}
