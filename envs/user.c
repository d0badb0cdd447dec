/* user.c: the environment class behind rlt_trainer_init_env: it forwards reset and step to the callbacks a
 * library user registered (rlt_env_callbacks in rltrain.h), so the trainer drives a user's simulator
 * exactly as it drives the built-in environments. The callbacks are copied into the instance's inline
 * state, so creating one allocates nothing. A vector environment (reset_batch, step_batch) is driven through
 * rlt_env_user_reset_batch and rlt_env_user_step_batch, which keep each instance's seeds, episode step and time
 * limit as the per-instance class does. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "env.h"

/* The first version of rlt_env_callbacks ends with load_state; a caller compiled against it passes at
 * least this many bytes. Later versions append fields and read them only when struct_size covers them. */
#define USER_CALLBACKS_V1_SIZE (offsetof(rlt_env_callbacks, load_state) + sizeof(((rlt_env_callbacks *)0)->load_state))

typedef struct user_env_state {
    rlt_env_callbacks cb;
    int32_t instance;
    int32_t last_rc; /* what the failing callback returned */
    int32_t failed;  /* 1 after a failure, described in what */
    char what[160];  /* "reset", "step", or what was wrong with the values a callback returned */
} user_env_state;

_Static_assert(sizeof(user_env_state) <= RLT_ENV_STATE_BYTES, "user env state must fit in rlt_env.state");

static user_env_state *user_of(rlt_env *env) { return (user_env_state *)(void *)env->state; }

static int user_fail(rlt_env *env, const char *what, int rc) {
    user_env_state *u = user_of(env);
    u->failed = 1;
    snprintf(u->what, sizeof u->what, "%s", what);
    u->last_rc = rc;
    return RLT_ERUNTIME;
}

/* A NaN or inf observation would poison the agent's replay and networks, so it stops where it appears,
 * named by callback and element. uint8 observations cannot be non-finite. */
static int user_check_obs(rlt_env *env, const char *callback, const void *obs) {
    if (env->obs_space.dtype != RLT_DTYPE_F32) return RLT_OK;
    const float *x = obs;
    int64_t n = rlt_space_elems(&env->obs_space);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            char what[160];
            snprintf(what, sizeof what, "%s (observation element %lld is %g, not finite)", callback, (long long)i, x[i]);
            return user_fail(env, what, 0);
        }
    return RLT_OK;
}

static int user_setup(rlt_env *env) {
    (void)env;
    return RLT_OK; /* rlt_env_make_user sets everything up */
}

/* One fresh 64-bit seed per episode from the instance's own stream, which checkpoints carry. */
static uint64_t user_episode_seed(rlt_env *env) {
    rlt_u32x4 x = rlt_philox4x32(env->rng.seed, env->rng.stream, env->rng.ctr++, 0);
    return ((uint64_t)x.v[0] << 32) | x.v[1];
}

static int user_reset(rlt_env *env, void *obs) {
    user_env_state *u = user_of(env);
    int rc = u->cb.reset(u->cb.user, u->instance, user_episode_seed(env), obs);
    return rc == 0 ? user_check_obs(env, "reset", obs) : user_fail(env, "reset", rc);
}

static int user_step(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated,
                     uint8_t *truncated) {
    user_env_state *u = user_of(env);
    int rc = u->cb.step(u->cb.user, u->instance, action, obs, reward, terminated, truncated);
    if (rc != 0) return user_fail(env, "step", rc);
    /* A NaN reward would poison every critic it reaches; stop where it appears instead. */
    if (!isfinite(*reward)) return user_fail(env, "step (non-finite reward)", 0);
    RLT_TRY(user_check_obs(env, "step", obs));
    *terminated = *terminated ? 1 : 0;
    *truncated = *truncated ? 1 : 0;
    return RLT_OK;
}

static const rlt_env_class user_env_class = {
    .name = "user",
    .description = "an environment registered through rlt_trainer_init_env",
    .setup = user_setup,
    .reset = user_reset,
    .step = user_step,
};

static int check_obs_space(rlt_err *e, const rlt_space *s) {
    /* A dict row is bytes (its parts are checked against network.inputs by the agent). */
    if (s->kind == RLT_SPACE_DICT && s->dtype == RLT_DTYPE_U8 && s->ndim == 1 && s->shape[0] >= 1 &&
        s->shape[0] <= RLT_ENV_MAX_OBS_ELEMS && s->n >= 1)
        return RLT_OK;
    if (s->kind == RLT_SPACE_DICT)
        RLT_FAIL(e, RLT_EINVAL, "user environment: a dict observation space is dtype U8, ndim 1, shape[0] the row's "
                 "bytes (1..%d) and n its parts (>= 1); rlt_config_dict_space fills one from network.inputs",
                 RLT_ENV_MAX_OBS_ELEMS);
    if (s->kind != RLT_SPACE_BOX || (s->dtype != RLT_DTYPE_F32 && s->dtype != RLT_DTYPE_U8))
        RLT_FAIL(e, RLT_EINVAL, "user environment: the observation space must be a Box of F32 (vectors) or U8 (images), "
                 "or a dict (RLT_SPACE_DICT)");
    if (s->ndim < 1 || s->ndim > 4) RLT_FAIL(e, RLT_EINVAL, "user environment: observations have %d dimensions (1..4)", s->ndim);
    for (int32_t i = 0; i < s->ndim; i++)
        if (s->shape[i] < 1) RLT_FAIL(e, RLT_EINVAL, "user environment: observation dimension %d has size %d", i, s->shape[i]);
    int64_t n = rlt_space_elems(s);
    if (n < 0 || n > RLT_ENV_MAX_OBS_ELEMS)
        RLT_FAIL(e, RLT_EINVAL, "user environment: observations of %d x %d x %d x %d elements are too large (at most %d)",
                 s->shape[0], s->ndim > 1 ? s->shape[1] : 1, s->ndim > 2 ? s->shape[2] : 1, s->ndim > 3 ? s->shape[3] : 1,
                 RLT_ENV_MAX_OBS_ELEMS);
    return RLT_OK;
}

int rlt_env_make_user(rlt_env *env, rlt_err *e, const rlt_env_callbacks *cb, int32_t instance, uint64_t seed,
                      uint32_t stream, int32_t max_steps) {
    if (!env || !cb) RLT_FAIL(e, RLT_EINVAL, "rlt_trainer_init_env: the environment callbacks must not be NULL");
    if (cb->struct_size < USER_CALLBACKS_V1_SIZE)
        RLT_FAIL(e, RLT_EINVAL,
                 "rlt_env_callbacks.struct_size is %u, less than the first version's %zu bytes: set it to "
                 "sizeof(rlt_env_callbacks)", cb->struct_size, (size_t)USER_CALLBACKS_V1_SIZE);
    /* Fields past struct_size (from a newer header than the caller's) read as zero. */
    rlt_env_callbacks c;
    memset(&c, 0, sizeof c);
    memcpy(&c, cb, cb->struct_size < sizeof c ? cb->struct_size : sizeof c);
    const char *name = c.name ? c.name : "user";
    if (!c.reset || !c.step) RLT_FAIL(e, RLT_EINVAL, "user environment '%s': reset and step are required", name);
    if (!c.save_state != !c.load_state)
        RLT_FAIL(e, RLT_EINVAL, "user environment '%s': give both save_state and load_state, or neither", name);
    if (c.save_state && c.state_bytes < 1)
        RLT_FAIL(e, RLT_EINVAL, "user environment '%s': save_state needs state_bytes > 0 (it is %d)", name, c.state_bytes);
    if (c.state_bytes < 0 || c.state_bytes > (1 << 30))
        RLT_FAIL(e, RLT_EINVAL, "user environment '%s': state_bytes %d is out of range (0..2^30)", name, c.state_bytes);
    if (!c.reset_batch != !c.step_batch)
        RLT_FAIL(e, RLT_EINVAL, "user environment '%s': give both reset_batch and step_batch (a vector environment), or "
                 "neither", name);
    if (c.max_episode_steps < 0)
        RLT_FAIL(e, RLT_EINVAL, "user environment '%s': max_episode_steps is %d (0 for no limit)", name, c.max_episode_steps);
    RLT_TRY(check_obs_space(e, &c.obs));

    memset(env, 0, sizeof *env);
    env->cls = &user_env_class;
    env->obs_space = c.obs;
    env->obs_space.low = env->obs_space.high = NULL;
    if (c.act.kind == RLT_SPACE_DISCRETE) {
        if (c.act.n < 1) RLT_FAIL(e, RLT_EINVAL, "user environment '%s': a Discrete action space needs n >= 1 (it is %d)", name, c.act.n);
        /* One int32 per action, whatever the caller put in the shape fields. */
        env->act_space = (rlt_space){.kind = RLT_SPACE_DISCRETE, .dtype = RLT_DTYPE_I32, .ndim = 1, .shape = {1}, .n = c.act.n};
    } else if (c.act.kind == RLT_SPACE_BOX) {
        int32_t a = c.act.shape[0];
        if (c.act.ndim != 1 || a < 1 || a > RLT_ENV_MAX_ACT)
            RLT_FAIL(e, RLT_EINVAL, "user environment '%s': a Box action space must be 1-D with 1..%d elements", name,
                     RLT_ENV_MAX_ACT);
        for (int32_t i = 0; i < a; i++) {
            env->act_low[i] = c.act.low ? c.act.low[i] : -1.0f;
            env->act_high[i] = c.act.high ? c.act.high[i] : 1.0f;
            if (!isfinite(env->act_low[i]) || !isfinite(env->act_high[i]) || !(env->act_low[i] < env->act_high[i]))
                RLT_FAIL(e, RLT_EINVAL, "user environment '%s': action dimension %d has bounds [%g, %g]: need finite low < high",
                         name, i, env->act_low[i], env->act_high[i]);
        }
        env->act_space = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {a},
                                     .low = env->act_low, .high = env->act_high};
    } else {
        RLT_FAIL(e, RLT_EINVAL, "user environment '%s': action space kind %d is neither Box nor Discrete", name, c.act.kind);
    }
    /* The copy's pointers to the caller's bounds are not kept: the trainer reads them from env. */
    c.act.low = c.act.high = NULL;
    user_env_state *u = user_of(env);
    u->cb = c;
    u->instance = instance;
    rlt_rng_init(&env->rng, seed, stream);
    env->max_steps = max_steps > 0 ? max_steps : c.max_episode_steps;
    return RLT_OK;
}

const rlt_env_callbacks *rlt_env_user_callbacks(const rlt_env *env) {
    if (!env || env->cls != &user_env_class) return NULL;
    return &((const user_env_state *)(const void *)env->state)->cb;
}

const char *rlt_env_user_failure(const rlt_env *env, int *user_rc) {
    if (!env || env->cls != &user_env_class) return NULL;
    const user_env_state *u = (const user_env_state *)(const void *)env->state;
    if (user_rc) *user_rc = u->last_rc;
    return u->failed ? u->what : NULL;
}

int rlt_env_user_batched(const rlt_env *env) {
    const rlt_env_callbacks *cb = rlt_env_user_callbacks(env);
    return cb && cb->step_batch ? 1 : 0;
}

/* The checks user_step makes, for row k of a batch: a finite reward and observation, flags as 0 or 1. A failure
 * is recorded on envs[0], which speaks for the batch, with the row in the message. */
static int user_check_row(rlt_env *envs, int32_t k, const void *obs, float reward, uint8_t *terminated,
                          uint8_t *truncated) {
    char what[64];
    if (!isfinite(reward)) {
        snprintf(what, sizeof what, "step_batch (instance %d: non-finite reward)", (int)k);
        return user_fail(&envs[0], what, 0);
    }
    snprintf(what, sizeof what, "step_batch (instance %d)", (int)k);
    RLT_TRY(user_check_obs(&envs[0], what, obs));
    *terminated = *terminated ? 1 : 0;
    *truncated = *truncated ? 1 : 0;
    return RLT_OK;
}

int rlt_env_user_reset_batch(rlt_env *envs, int32_t n, const uint8_t *mask, uint64_t *seeds, void *obs) {
    user_env_state *u = user_of(&envs[0]);
    const int64_t ob = rlt_space_bytes(&envs[0].obs_space);
    /* Each reset draws its seed from its own instance's stream, as rlt_env_reset would: a run's draws, and so its
     * checkpoints, are those of the per-instance callbacks. */
    for (int32_t k = 0; k < n; k++) {
        seeds[k] = 0;
        if (!mask[k]) continue;
        envs[k].t = 0;
        seeds[k] = user_episode_seed(&envs[k]);
    }
    int rc = u->cb.reset_batch(u->cb.user, n, mask, seeds, obs);
    if (rc != 0) return user_fail(&envs[0], "reset_batch", rc);
    for (int32_t k = 0; k < n; k++) {
        if (!mask[k]) continue;
        char what[48];
        snprintf(what, sizeof what, "reset_batch (instance %d)", (int)k);
        RLT_TRY(user_check_obs(&envs[0], what, (const unsigned char *)obs + k * ob));
    }
    return RLT_OK;
}

int rlt_env_user_step_batch(rlt_env *envs, int32_t n, const void *actions, void *obs, float *rewards,
                            uint8_t *terminated, uint8_t *truncated) {
    user_env_state *u = user_of(&envs[0]);
    const int64_t ob = rlt_space_bytes(&envs[0].obs_space);
    memset(terminated, 0, (size_t)n);
    memset(truncated, 0, (size_t)n);
    int rc = u->cb.step_batch(u->cb.user, n, actions, obs, rewards, terminated, truncated);
    if (rc != 0) return user_fail(&envs[0], "step_batch", rc);
    for (int32_t k = 0; k < n; k++) {
        RLT_TRY(user_check_row(envs, k, (const unsigned char *)obs + k * ob, rewards[k], &terminated[k], &truncated[k]));
        /* The time limit as rlt_env_step applies it to one instance. */
        rlt_env *env = &envs[k];
        env->t++;
        if (!terminated[k] && env->max_steps > 0 && env->t >= env->max_steps) truncated[k] = 1;
    }
    return RLT_OK;
}
