/* trainer.h: the trainer handle (internal), shared by the loop (trainer.c) and its checkpoints
 * (trainer_ckpt.c). */
#ifndef RLT_TRAINER_H
#define RLT_TRAINER_H

#include <signal.h>

#include "agent.h"
#include "env.h"
#include "outputs.h"

#define DUMP_BYTES 16384
#define RLT_TRAINER_MAX_KEEP 64

struct rlt_trainer {
    rlt_err err;
    rlt_config cfg;
    rlt_env env, eval_env;
    char env_name[64];              /* the built-in's config name, or the user environment's name */
    int32_t user_env;               /* env and eval_env forward to rlt_env_callbacks */
    int32_t user_state_bytes;       /* the user environment's checkpoint state (0: not resumable) */
    unsigned char *user_state;      /* user_state_bytes, host, taken at init */
    rlt_agent *agent;
    float *obs, *next_obs, *action; /* one transition, host */
    char *dump;                     /* resolved config text */
    rlt_progress prog;
    double t0;
    out_writer metrics;
    /* Loop state that a checkpoint carries. */
    double ep_ret;
    int64_t ep_len;
    int32_t resumed;       /* state came from a checkpoint: the loop continues, no first reset */
    int64_t resumed_step;
    int32_t resumed_in_out_dir; /* that checkpoint is in out_dir: the run continues its metrics.csv */
    int32_t eval_pending;  /* the run stopped during the evaluation due at env_steps: a resume runs it first */
    volatile sig_atomic_t stop; /* set by rlt_trainer_request_stop (signal-safe) */
    /* Periodic checkpoints kept, oldest first. */
    int32_t n_kept;
    char kept[RLT_TRAINER_MAX_KEEP][704];
};

/* The full trainer checkpoint: agent state (with replay when configured) plus the loop's state. */
int trainer_save(struct rlt_trainer *tr, const char *path);
/* Opens out_dir/metrics.csv for the run: a new file with its header, or, for a run resumed from a checkpoint
 * in out_dir, the same file with the rows up to the checkpoint's step (later ones, from the run that went on
 * past it, are dropped), replaced atomically; rows are then appended. */
int trainer_open_metrics(struct rlt_trainer *tr);

#endif
