/* registry.c: the table of built-in environment classes, creation by name, the time-limited step and the
 * space size helpers declared in engine/env.h. */
#include <ctype.h>
#include <string.h>

#include "env.h"
#include "envs_internal.h"

static const rlt_env_class *const builtin_classes[] = {
    &rlt_env_class_pendulum,
    &rlt_env_class_cartpole,
    &rlt_env_class_minatar_breakout,
};
#define N_BUILTIN ((int)(sizeof builtin_classes / sizeof builtin_classes[0]))

/* A literal rather than a string built at run time, so that there is no mutable global; test_envs checks
 * that it names every class in the table. */
const char *rlt_env_names(void) { return "pendulum, cartpole, minatar_breakout"; }

/* The reference implementations' ids are accepted too, so a config can name what it reproduces. */
static const struct { const char *alias, *name; } env_aliases[] = {
    {"Pendulum-v1", "pendulum"},
    {"CartPole-v1", "cartpole"},
    {"MinAtar/Breakout-v1", "minatar_breakout"},
};

/* Case-insensitive Levenshtein distance, for the "did you mean" hint. Names longer than the buffer get a
 * large distance: a 60-character typo is not worth a suggestion. */
#define NAME_CAP 64
static int name_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na >= NAME_CAP || nb >= NAME_CAP) return 1 << 20;
    int prev[NAME_CAP + 1], cur[NAME_CAP + 1];
    for (size_t j = 0; j <= nb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + (same ? 0 : 1);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (nb + 1));
    }
    return prev[nb];
}

const char *rlt_env_canonical_name(const char *name) {
    for (size_t i = 0; i < sizeof env_aliases / sizeof env_aliases[0]; i++)
        if (strcmp(env_aliases[i].alias, name) == 0) return env_aliases[i].name;
    return name;
}

int rlt_env_make(rlt_env *env, rlt_err *e, const char *name, uint64_t seed, uint32_t stream, int32_t max_steps) {
    if (!env || !name) RLT_FAIL(e, RLT_EINVAL, "rlt_env_make: env and name must not be NULL");
    if (max_steps < 0)
        RLT_FAIL(e, RLT_ECONFIG, "env.max_episode_steps is %d; use 0 for the environment's own limit or a positive count",
                 (int)max_steps);
    const rlt_env_class *cls = NULL;
    for (size_t i = 0; i < sizeof env_aliases / sizeof env_aliases[0]; i++)
        if (strcmp(env_aliases[i].alias, name) == 0) name = env_aliases[i].name;
    for (int i = 0; i < N_BUILTIN; i++)
        if (strcmp(builtin_classes[i]->name, name) == 0) cls = builtin_classes[i];
    if (!cls) {
        const char *nearest = NULL;
        int best = 1 << 20;
        for (int i = 0; i < N_BUILTIN; i++) {
            int d = name_distance(name, builtin_classes[i]->name);
            if (d < best) { best = d; nearest = builtin_classes[i]->name; }
        }
        for (size_t i = 0; i < sizeof env_aliases / sizeof env_aliases[0]; i++) {
            int d = name_distance(name, env_aliases[i].alias);
            if (d < best) { best = d; nearest = env_aliases[i].alias; }
        }
        /* A third of the name's length catches typos and case slips ("pendulum-v1", "CartPole-v0")
         * without proposing an unrelated name for a wild guess. */
        int close = nearest && best <= (int)(strlen(nearest) / 3);
        /* A Gymnasium id that is no built-in one (Hopper-v5): the config is for the Python adapter. */
        const char *v = strstr(name, "-v");
        int gym_id = !close && v && v[2] >= '0' && v[2] <= '9';
        RLT_FAIL(e, RLT_ECONFIG, "unknown environment '%s'%s%s%s; built-in environments: %s%s%s%s", name,
                 close ? " (did you mean '" : "", close ? nearest : "", close ? "'?)" : "", rlt_env_names(),
                 gym_id ? "; Gymnasium environments train through the Python package: python -m rltrain.gym --config "
                 "CONFIG --env " : "", gym_id ? name : "", gym_id ? " (bindings/python)" : "");
    }
    memset(env, 0, sizeof *env);
    env->cls = cls;
    rlt_rng_init(&env->rng, seed, stream);
    int rc = cls->setup(env);
    if (rc != RLT_OK) RLT_FAIL(e, rc, "setting up environment '%s' failed", name);
    if (max_steps > 0) env->max_steps = max_steps;
    return RLT_OK;
}

int rlt_env_step(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated, uint8_t *truncated) {
    /* Classes only set the flags they have a reason to set, so both start cleared here. */
    *terminated = 0;
    *truncated = 0;
    int rc = env->cls->step(env, action, obs, reward, terminated, truncated);
    if (rc != RLT_OK) return rc;
    env->t++;
    /* As Gymnasium's TimeLimit: truncation is reported only when the episode did not also terminate. */
    if (!*terminated && env->max_steps > 0 && env->t >= env->max_steps) *truncated = 1;
    return RLT_OK;
}

int64_t rlt_space_elems(const rlt_space *s) {
    if (!s || s->ndim < 1 || s->ndim > 4) return RLT_EINVAL;
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->shape[i] < 0) return RLT_EINVAL;
        /* Four int32 sizes can reach 2^124: a product past 2^60 (room for the bytes below) is refused. */
        if (__builtin_mul_overflow(n, (int64_t)s->shape[i], &n) || n > ((int64_t)1 << 60)) return RLT_EINVAL;
    }
    return n;
}

int64_t rlt_space_bytes(const rlt_space *s) {
    int64_t n = rlt_space_elems(s);
    if (n < 0) return n;
    switch (s->dtype) {
    case RLT_DTYPE_U8: return n;
    case RLT_DTYPE_F16:
    case RLT_DTYPE_BF16: return 2 * n;
    case RLT_DTYPE_F32:
    case RLT_DTYPE_I32: return 4 * n;
    case RLT_DTYPE_I64: return 8 * n;
    }
    return RLT_EINVAL;
}
