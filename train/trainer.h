/* trainer.h: the trainer handle (internal), shared by the loop (trainer.c) and its checkpoints
 * (trainer_ckpt.c). */
#ifndef RLT_TRAINER_H
#define RLT_TRAINER_H

#include <signal.h>

#include "agent.h"
#include "env.h"
#include "outputs.h"

#define DUMP_BYTES 16384
/* The most steps of one evaluation episode when the environment has no time limit (a user environment with
 * max_episode_steps 0 and no env.max_episode_steps): it is cut there, with a warning at init. */
#define RLT_EVAL_MAX_EPISODE_STEPS 100000
#define RLT_TRAINER_MAX_KEEP 64
/* The loop words a checkpoint keeps for each training environment after the first (whose words stay in
 * trainer.state, as a one-environment checkpoint has them). */
enum { TV_EP_LEN, TV_ENV_T, TV_ENV_SEED, TV_ENV_CTR, TV_ENV_STREAM, TV_EP_RET, TV_ENV_MAX_STEPS, TV_COUNT };

struct rlt_trainer {
    rlt_err err;
    rlt_config cfg;
    rlt_env *envs;                  /* env.num_envs training environments, host, taken at init */
    int32_t n_envs;
    rlt_env eval_env;               /* the evaluation environment: its stream, and the first of eval_rows copies */
    /* Evaluation (trainer_eval.c): eval_rows episodes side by side in eval_env and eval_more[0 .. eval_rows - 2]
     * (eval_cap - 1 of them, taken at init), their observation and action rows, returns and live flags. */
    int32_t eval_rows, eval_cap;
    rlt_env *eval_more;
    unsigned char *eval_obs, *eval_act;
    double *eval_ret;
    uint8_t *eval_live;
    char env_name[64];              /* the built-in's config name, or the user environment's name */
    int32_t user_env;               /* env and eval_env forward to rlt_env_callbacks */
    int32_t user_state_bytes;       /* the user environment's checkpoint state (0: not resumable) */
    int32_t batched;                /* a vector user environment: reset_batch and step_batch train */
    uint8_t *reset_mask;            /* batched: the instances to restart, and their seeds (n_envs each, host) */
    uint64_t *reset_seeds;
    unsigned char *user_state;      /* user_state_bytes, host, taken at init */
    rlt_agent *agent;
    /* One transition of each training environment, host: row k is environment k's. */
    float *obs, *next_obs, *action, *reward;
    uint8_t *term, *trunc;
    /* Environments 1..n_envs-1 as a checkpoint holds them (trainer_ckpt.c): their loop words and states. */
    int64_t *vec_words;
    unsigned char *vec_states;
    char *dump;                     /* resolved config text */
    rlt_progress prog;
    double t0;
    /* This process's share of the run, for rates and the ETA: the step and update counts it started at (a
     * resumed run's), and the time and step of its first update (random-action steps cost far less). */
    int64_t steps0, updates0, learn_step;
    double learn_t;
    /* GPU runs: when the device's memory was last measured (trainer_watch_device), and whether the low-memory
     * warning was given. */
    double mem_t;
    int32_t mem_warned;
    out_writer metrics;
    int lock_fd;           /* out_dir/.rltrain.lock, held from the first resume or run to rlt_trainer_free */
    /* Loop state that a checkpoint carries. */
    double *ep_ret;  /* per training environment: the current episode's return and length */
    int64_t *ep_len;
    int32_t resumed;       /* state came from a checkpoint: the loop continues, no first reset */
    int64_t resumed_step;
    int32_t resumed_in_out_dir; /* that checkpoint is in out_dir: the run continues its metrics.csv */
    int32_t eval_pending;  /* the run stopped during the evaluation due at env_steps: a resume runs it first */
    volatile sig_atomic_t stop; /* set by rlt_trainer_request_stop (signal-safe) */
    int32_t agreed_stop;        /* a data-parallel rank: the ranks agreed to stop (no abort of the group needed) */
    /* Periodic checkpoints kept, oldest first. */
    int32_t n_kept;
    char kept[RLT_TRAINER_MAX_KEEP][704];
};

/* Calls into the agent and an environment from the loop: the status, with the agent's message or one naming the
 * environment (and a user environment's callback and instance) in tr->err. */
int trainer_agent_call(struct rlt_trainer *tr, int rc);
int trainer_env_call(struct rlt_trainer *tr, rlt_env *env, int rc);
/* Evaluation (trainer_eval.c): the copies and rows, taken at init after eval_env is made and before the agent (a
 * user environment's evaluation keeps its one instance); the rows once the agent is made (its acting launch's rows,
 * trainer_eval_rows_for); the mean return of train.eval_episodes episodes; the release. */
int trainer_eval_init(struct rlt_trainer *tr);
void trainer_eval_set_rows(struct rlt_trainer *tr);
int32_t trainer_eval_rows_for(int32_t episodes, int32_t cap, int32_t act_rows);
int trainer_evaluate(struct rlt_trainer *tr, double *mean);
void trainer_eval_free(struct rlt_trainer *tr);
/* The full trainer checkpoint: agent state (with replay when configured) plus the loop's state. */
int trainer_save(struct rlt_trainer *tr, const char *path, int include_replay);
/* Opens out_dir/metrics.csv for the run: a new file with its header, or, for a run resumed from a checkpoint
 * in out_dir, the same file with the rows up to the checkpoint's step (later ones, from the run that went on
 * past it, are dropped), replaced atomically; rows are then appended. */
int trainer_open_metrics(struct rlt_trainer *tr);
/* 1 on a GPU run; the device columns of a metrics.csv row (device_free_mib, cotenants_mib; none on the CPU). */
int trainer_on_gpu(const struct rlt_trainer *tr);
int trainer_device_cells(struct rlt_trainer *tr);
/* RLT_ECONFIG (the message rlt_trainer_run would give) when out_dir holds an earlier run's outputs that this
 * run may not replace; nothing is changed. A seed group asks every member before any of them starts. */
int trainer_check_out_dir(struct rlt_trainer *tr);
/* Creates out_dir and takes its lock (out_lock_dir): RLT_EBUSY naming the owner when another run holds it. */
int trainer_lock_out_dir(struct rlt_trainer *tr);

#endif
