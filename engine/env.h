/* env.h: the environment interface. An environment is a class (name, reset, step) plus an instance struct
 * whose state lives inline, so creating one allocates nothing. Built-in classes live in envs/ and are
 * found by name through rlt_env_make; more (and user-provided C environments) plug in the same way. */
#ifndef RLT_ENV_H
#define RLT_ENV_H

#include <stddef.h>
#include <stdint.h>
#include "rltrain.h"
#include "err.h"
#include "rng.h"

#define RLT_ENV_MAX_ACT 16
/* The most elements one observation may have (a 4 x 2048 x 2048 image): sizes and offsets derived from it stay
 * far inside 64 bits, and a space beyond it is refused where it enters. */
#define RLT_ENV_MAX_OBS_ELEMS (1 << 24)
#define RLT_ENV_STATE_BYTES 2048

typedef struct rlt_env rlt_env;

typedef struct rlt_env_class {
    const char *name;
    const char *description;
    /* Sets spaces, bounds and max_steps (default episode limit) in env; called once by rlt_env_make. */
    int (*setup)(rlt_env *env);
    /* Starts an episode: writes the first observation (obs space dtype) and sets env->t = 0. */
    int (*reset)(rlt_env *env, void *obs);
    /* One step. action: float[act dim] within bounds (Box) or int32 (Discrete). The caller handles the
     * time limit: step sets *truncated only for reasons of its own (most never do). */
    int (*step)(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated, uint8_t *truncated);
    /* Checks an episode state read from a checkpoint (RLT_ENV_STATE_BYTES laid out as this class keeps
     * env->state) before it is loaded: 0 when every field is one the class can reach within t steps of a
     * reset, else -1 with the field and its value in why. A checkpoint is untrusted input, and a state out of
     * range can index memory (a game's grid) or make every later step NaN. NULL: nothing to check. */
    int (*check_state)(const rlt_env *env, const unsigned char *state, int32_t t, char *why, size_t cap);
} rlt_env_class;

struct rlt_env {
    const rlt_env_class *cls;
    rlt_space obs_space; /* obs_space.low/high are NULL */
    rlt_space act_space; /* act_space.low/high point into act_low/act_high below */
    float act_low[RLT_ENV_MAX_ACT];
    float act_high[RLT_ENV_MAX_ACT];
    rlt_rng rng;       /* resets and any dynamics noise */
    int32_t t;         /* steps into the current episode */
    int32_t max_steps; /* time limit (truncation), as the Gymnasium registration sets it */
    _Alignas(16) unsigned char state[RLT_ENV_STATE_BYTES]; /* class-private */
};

/* Creates the built-in environment `name` with its own random stream. max_steps > 0 overrides the
 * class's time limit. Fails with RLT_ECONFIG, listing the known names, for an unknown name. */
int rlt_env_make(rlt_env *env, rlt_err *e, const char *name, uint64_t seed, uint32_t stream, int32_t max_steps);
/* Creates instance `instance` (0 training, 1 evaluation) of a user environment from its callbacks (copied
 * into env, so cb may go away; the functions and cb->user must not). Checks the struct size and the
 * spaces; RLT_EINVAL with a message otherwise. max_steps > 0 overrides cb->max_episode_steps. */
int rlt_env_make_user(rlt_env *env, rlt_err *e, const rlt_env_callbacks *cb, int32_t instance, uint64_t seed,
                      uint32_t stream, int32_t max_steps);
/* The callbacks of a user environment, or NULL for a built-in one. */
const rlt_env_callbacks *rlt_env_user_callbacks(const rlt_env *env);
/* After a reset or step of a user environment failed: what failed, for the trainer's message. */
const char *rlt_env_user_failure(const rlt_env *env, int *user_rc);
/* 1 when env is an instance of a user environment with reset_batch and step_batch (a vector environment). */
int rlt_env_user_batched(const rlt_env *env);
/* The training instances envs[0..n-1] of a vector environment, all at once: reset_batch for the instances
 * whose mask byte is 1, each with the seed its own stream gives it (into seeds, n values of scratch), and
 * step_batch for all of them with the time limit applied to each as rlt_env_step does. A failure is recorded
 * on envs[0] (rlt_env_user_failure), naming the callback and the instance. */
int rlt_env_user_reset_batch(rlt_env *envs, int32_t n, const uint8_t *mask, uint64_t *seeds, void *obs);
int rlt_env_user_step_batch(rlt_env *envs, int32_t n, const void *actions, void *obs, float *rewards,
                            uint8_t *terminated, uint8_t *truncated);
/* step with the time limit applied: sets *truncated when env->t reaches max_steps (and not terminated). */
int rlt_env_step(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated, uint8_t *truncated);
static inline int rlt_env_reset(rlt_env *env, void *obs) { env->t = 0; return env->cls->reset(env, obs); }
/* Observation size in elements and in bytes; RLT_EINVAL (negative) for a malformed space, or one whose
 * size does not fit 63 bits (the product is checked, never overflowed). */
int64_t rlt_space_elems(const rlt_space *s);
int64_t rlt_space_bytes(const rlt_space *s);
/* The built-in name an alias stands for ("Pendulum-v1" -> "pendulum"); any other name as it is. */
const char *rlt_env_canonical_name(const char *name);
/* Comma-separated list of built-in names (for error messages and --help). */
const char *rlt_env_names(void);

#endif
