/* config.h: the typed configuration. It starts from documented defaults (config_schema.c lists them
 * with their schema), YAML files and --set overrides are merged over it by config.c, and every consumer
 * reads plain fields. Adding a key = adding a field here and a row to the schema table. */
#ifndef RLT_CONFIG_H
#define RLT_CONFIG_H

#include <stdint.h>
#include "rltrain.h"
#include "err.h"

#define RLT_CFG_MAX_LAYERS 8
#define RLT_CFG_STR 256

typedef struct rlt_int_list {
    int32_t n;
    int32_t v[RLT_CFG_MAX_LAYERS];
} rlt_int_list;

/* network.conv: the convolutional torso as a list of layers (engine/config_conv.c reads, checks and
 * writes it). A preset name ("nature") is stored as its layers plus the name, so every consumer reads the
 * one list, and the dump writes the name back as it was given. */
#define RLT_CFG_MAX_CONV 8

typedef struct rlt_conv_layer {
    int32_t out;    /* output channels */
    int32_t kernel; /* square kernel, kernel x kernel */
    int32_t stride; /* default 1 */
    int32_t pad;    /* zero padding on every side; default 0 */
} rlt_conv_layer;

typedef struct rlt_conv_list {
    char preset[16]; /* "none" | "nature" | "minatar" when given by name; "" for an explicit list */
    int32_t n;       /* layers in use (0: no torso); the unused ones are zero, so equal lists have equal bytes */
    rlt_conv_layer layer[RLT_CFG_MAX_CONV];
} rlt_conv_list;

struct rlt_config {
    char algo[16];      /* td3 | dqn */
    struct {
        char name[64];  /* built-in environment */
        int32_t max_episode_steps; /* 0: the environment's own limit */
    } env;
    uint64_t seed;
    char device[32];    /* auto | cpu | cuda | cuda:N */
    char precision[8];  /* fp32 | bf16 | fp16 */
    struct {
        int64_t total_steps;
        int64_t start_steps;
        int32_t batch_size;
        int32_t grad_accum_steps;
        int32_t updates_per_step;
        int64_t eval_every;
        int32_t eval_episodes;
        double progress_every_s;
    } train;
    struct {
        int64_t capacity;
        char location[16]; /* auto | device | host */
        char obs_dtype[8]; /* auto | fp32 | fp16 | bf16 | uint8: how observations are stored (auto: as they come) */
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
        char loss[8];               /* huber | mse */
        int64_t target_update_every; /* env steps between target updates */
        int64_t learning_starts;     /* env steps before the first update */
        int32_t train_freq;          /* env steps between training rounds */
        int32_t gradient_steps;      /* updates per training round */
    } dqn;
    struct {
        rlt_int_list hidden; /* fully connected widths after the torso */
        rlt_conv_list conv;  /* the convolutional torso for image observations: a preset or explicit layers */
    } network;
    struct {
        double budget_mb;
        int32_t auto_fit; /* pick the largest micro-batch that fits, keeping batch_size through accumulation */
        double wait_s;    /* retry a failed device reservation once a second for this long */
        char on_oom[8];   /* fail | cpu: what to do when the device arena cannot be reserved */
    } memory;
    struct {
        int64_t every;          /* env steps between periodic checkpoints; 0: only the final one */
        int32_t keep;           /* periodic checkpoints kept (the oldest are deleted) */
        int32_t include_replay; /* save the replay buffer too: needed for a resume that continues exactly */
    } checkpoint;
    struct {
        int32_t threads; /* CPU backend threads; 0 = 1; >= 2: one worker thread splits large dense ops */
    } cpu;
    char out_dir[RLT_CFG_STR];

    /* Not config values: provenance and the last error. */
    char source[RLT_CFG_STR]; /* the last file or string name loaded */
    rlt_err err;
};

void config_set_defaults(rlt_config *cfg);

#endif
