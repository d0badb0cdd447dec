/* trainer_ckpt.c: the trainer's checkpoints: the agent's state (replay included when configured) plus
 * the loop's own (step and episode counters, the partial episode's return, both environments' random
 * streams and state, the current observation, an evaluation a stop request cut short), and resuming from
 * one, metrics.csv included. A user environment's state is whatever its save_state callback writes;
 * without one, resuming is refused.
 * With env.num_envs N > 1, environment 0 keeps the tensors of a one-environment run (its words in
 * trainer.state, trainer.env_state), trainer.obs holds all N observations, and environments 1..N-1 add
 * trainer.envs (I64 [N-1, TV_COUNT]) and trainer.env_states (U8 [N-1, RLT_ENV_STATE_BYTES]): a
 * one-environment checkpoint is byte for byte what it was. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"
#include "finite.h"
#include "text.h"
#include "trainer.h"

enum {
    TS_ENV_STEPS, TS_EPISODES, TS_EP_LEN, TS_ENV_T, TS_ENV_SEED, TS_ENV_CTR, TS_ENV_STREAM, TS_EVAL_SEED, TS_EVAL_CTR,
    TS_EVAL_STREAM, TS_EP_RET, TS_LAST_EVAL, TS_BEST_EVAL, TS_LAST_EP_RET, TS_ENV_MAX_STEPS, TS_COUNT
};

static int64_t dbits(double d) {
    int64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

static double bitsd(int64_t b) {
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static int from_agent(rlt_trainer *tr, int rc) {
    if (rc != RLT_OK) rlt_err_copy(&tr->err, &tr->agent->err);
    return rc;
}

int trainer_save(rlt_trainer *tr, const char *path, int include_replay) {
    rlt_agent *ag = tr->agent;
    const rlt_progress *p = &tr->prog;
    char meta[1024];
    int n = agent_meta(ag, meta, sizeof meta);
    n += snprintf(meta + n, sizeof meta - (size_t)n, "env: %s\nepisodes: %lld\n", tr->env_name, (long long)p->episodes);
    /* Whose state this is: the seed, and for a rank of a data-parallel run its place (ranks 0: a single run), which
     * a resume checks (resume_checked). */
    n += snprintf(meta + n, sizeof meta - (size_t)n, "seed: %llu\nrank: %d\nranks: %d\n", (unsigned long long)tr->cfg.seed,
                  (int)tr->cfg.rank, tr->cfg.comm ? (int)rlt_comm_size(tr->cfg.comm) : 0);
    ckpt_writer *w = ag->ckpt_w;
    /* metrics.csv's rows up to this step are on disk before the checkpoint that a resume would keep them for. */
    RLT_TRY(out_writer_sync(&tr->metrics, &tr->err));
    RLT_TRY(from_agent(tr, ckpt_writer_open(w, &ag->err, path, meta, (size_t)n)));
    int64_t s[TS_COUNT] = {0};
    s[TS_ENV_STEPS] = p->env_steps;
    s[TS_EPISODES] = p->episodes;
    s[TS_EP_LEN] = tr->ep_len[0];
    s[TS_ENV_T] = tr->envs[0].t;
    s[TS_ENV_SEED] = (int64_t)tr->envs[0].rng.seed;
    s[TS_ENV_CTR] = (int64_t)tr->envs[0].rng.ctr;
    s[TS_ENV_STREAM] = tr->envs[0].rng.stream;
    s[TS_EVAL_SEED] = (int64_t)tr->eval_env.rng.seed;
    s[TS_EVAL_CTR] = (int64_t)tr->eval_env.rng.ctr;
    s[TS_EVAL_STREAM] = tr->eval_env.rng.stream;
    s[TS_EP_RET] = dbits(tr->ep_ret[0]);
    s[TS_LAST_EVAL] = dbits(p->last_eval_return);
    s[TS_BEST_EVAL] = dbits(p->best_eval_return);
    s[TS_LAST_EP_RET] = dbits(p->last_episode_return);
    s[TS_ENV_MAX_STEPS] = tr->envs[0].max_steps;
    const int32_t N = tr->n_envs;
    for (int32_t k = 1; k < N; k++) {
        const rlt_env *env = &tr->envs[k];
        int64_t *v = tr->vec_words + (int64_t)(k - 1) * TV_COUNT;
        v[TV_EP_LEN] = tr->ep_len[k];
        v[TV_ENV_T] = env->t;
        v[TV_ENV_SEED] = (int64_t)env->rng.seed;
        v[TV_ENV_CTR] = (int64_t)env->rng.ctr;
        v[TV_ENV_STREAM] = env->rng.stream;
        v[TV_EP_RET] = dbits(tr->ep_ret[k]);
        v[TV_ENV_MAX_STEPS] = env->max_steps;
        /* A user environment's inline state is its callbacks: zeros in the file, as for environment 0. */
        if (tr->user_env) memset(tr->vec_states + (int64_t)(k - 1) * RLT_ENV_STATE_BYTES, 0, RLT_ENV_STATE_BYTES);
        else memcpy(tr->vec_states + (int64_t)(k - 1) * RLT_ENV_STATE_BYTES, env->state, RLT_ENV_STATE_BYTES);
    }
    int64_t shape_s[1] = {TS_COUNT}, shape_e[1] = {RLT_ENV_STATE_BYTES}, shape_n[1] = {64};
    int64_t shape_o[1] = {rlt_space_bytes(&tr->envs[0].obs_space) * N};
    int64_t shape_v[2] = {N - 1, TV_COUNT}, shape_vs[2] = {N - 1, RLT_ENV_STATE_BYTES};
    char name[64] = {0};
    snprintf(name, sizeof name, "%s", tr->env_name);
    /* A user environment's inline state holds its callbacks (pointers, meaningless in another process):
     * the file gets zeros there and the callbacks' own state beside it. */
    static const unsigned char no_state[RLT_ENV_STATE_BYTES];
    const rlt_env_callbacks *cb = rlt_env_user_callbacks(&tr->envs[0]);
    for (int32_t k = 0; k < N && tr->user_state_bytes > 0; k++) {
        int urc = cb->save_state(cb->user, k, tr->user_state + (int64_t)k * tr->user_state_bytes);
        if (urc != 0) {
            ckpt_writer_abort(w);
            RLT_FAIL(&tr->err, RLT_ERUNTIME, "user environment '%s': save_state returned %d for instance %d while writing "
                     "%s", tr->env_name, urc, (int)k, path);
        }
    }
    int rc = agent_write_state(ag, w, include_replay);
    if (rc == RLT_OK) rc = ckpt_writer_add(w, "trainer.state", RLT_DTYPE_I64, 1, shape_s, s, sizeof s);
    if (rc == RLT_OK) rc = ckpt_writer_add(w, "trainer.env_name", RLT_DTYPE_U8, 1, shape_n, name, sizeof name);
    if (rc == RLT_OK)
        rc = ckpt_writer_add(w, "trainer.env_state", RLT_DTYPE_U8, 1, shape_e, cb ? no_state : tr->envs[0].state, RLT_ENV_STATE_BYTES);
    if (rc == RLT_OK && N > 1)
        rc = ckpt_writer_add(w, "trainer.envs", RLT_DTYPE_I64, 2, shape_v, tr->vec_words,
                             sizeof *tr->vec_words * TV_COUNT * (uint64_t)(N - 1));
    if (rc == RLT_OK && N > 1)
        rc = ckpt_writer_add(w, "trainer.env_states", RLT_DTYPE_U8, 2, shape_vs, tr->vec_states,
                             (uint64_t)RLT_ENV_STATE_BYTES * (uint64_t)(N - 1));
    if (rc == RLT_OK && tr->user_state_bytes > 0) {
        int64_t shape_u[1] = {(int64_t)tr->user_state_bytes * N};
        rc = ckpt_writer_add(w, "trainer.user_env_state", RLT_DTYPE_U8, 1, shape_u, tr->user_state, (uint64_t)shape_u[0]);
    }
    if (rc == RLT_OK) rc = ckpt_writer_add(w, "trainer.obs", RLT_DTYPE_U8, 1, shape_o, tr->obs, (uint64_t)shape_o[0]);
    /* Only a run stopped during an evaluation has this tensor, so every other checkpoint keeps its bytes. */
    int64_t pending = 1, shape_p[1] = {1};
    if (rc == RLT_OK && tr->eval_pending)
        rc = ckpt_writer_add(w, "trainer.eval_pending", RLT_DTYPE_I64, 1, shape_p, &pending, sizeof pending);
    if (rc != RLT_OK) {
        ckpt_writer_abort(w);
        return from_agent(tr, rc);
    }
    return from_agent(tr, ckpt_writer_close(w));
}

/* trainer.state's words against each other and this trainer, before anything is loaded (a checkpoint is
 * untrusted input): counts not negative and within the run, the episode step within the time limit (a
 * built-in environment always has one), both environments' random streams their own, and the returns finite
 * or NaN (none yet). agent_steps is agent.host's env_steps, which the loop keeps equal to its own. */
static int check_loop_state(rlt_trainer *tr, const char *path, const int64_t *s, int64_t agent_steps) {
    rlt_err *e = &tr->agent->err;
    int64_t steps = s[TS_ENV_STEPS], max = s[TS_ENV_MAX_STEPS], t = s[TS_ENV_T];
    if (steps < 0 || steps > tr->cfg.train.total_steps)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': the checkpoint is at step %lld, beyond "
                 "train.total_steps %lld", path, (long long)steps, (long long)tr->cfg.train.total_steps);
    if (steps != agent_steps)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': env_steps %lld, but agent.host's env_steps is %lld",
                 path, (long long)steps, (long long)agent_steps);
    if (s[TS_EPISODES] < 0 || s[TS_EPISODES] > steps)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': episodes %lld, expected 0..%lld (env_steps)", path,
                 (long long)s[TS_EPISODES], (long long)steps);
    if (s[TS_EP_LEN] < 0 || s[TS_EP_LEN] > steps)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': ep_len %lld, expected 0..%lld (env_steps)", path,
                 (long long)s[TS_EP_LEN], (long long)steps);
    if (max < (tr->user_env ? 0 : 1) || max > INT32_MAX)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': the environment's max_steps is %lld, expected %d..%d",
                 path, (long long)max, tr->user_env ? 0 : 1, INT32_MAX);
    if (t < 0 || t > INT32_MAX || (max > 0 && t > max))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': the environment's step env_t is %lld, expected 0..%lld",
                 path, (long long)t, (long long)(max > 0 ? max : INT32_MAX));
    if ((uint64_t)s[TS_ENV_STREAM] != tr->envs[0].rng.stream || (uint64_t)s[TS_EVAL_STREAM] != tr->eval_env.rng.stream)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': the environments' RNG streams are %llu and %llu, "
                 "this trainer's are %u and %u", path, (unsigned long long)s[TS_ENV_STREAM],
                 (unsigned long long)s[TS_EVAL_STREAM], tr->envs[0].rng.stream, tr->eval_env.rng.stream);
    double ep_ret = bitsd(s[TS_EP_RET]), last = bitsd(s[TS_LAST_EVAL]), best = bitsd(s[TS_BEST_EVAL]);
    double last_ep = bitsd(s[TS_LAST_EP_RET]);
    if (!isfinite(ep_ret))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': the episode's return so far (ep_ret) is %g", path, ep_ret);
    if (!isnan(last_ep) && !isfinite(last_ep))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': last_episode_return is %g, expected a finite value "
                 "(or NaN before the first episode ends)", path, last_ep);
    /* The best evaluation is the maximum of all of them, the last one included. */
    if (isnan(last) != isnan(best) || (!isnan(last) && (!isfinite(last) || !isfinite(best) || best < last)))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.state': last_eval_return %g and best_eval_return %g: expected "
                 "both NaN (no evaluation yet) or finite with the best >= the last", path, last, best);
    return RLT_OK;
}

/* trainer.envs' words of environment k (1..N-1) as check_loop_state checks environment 0's: the episode within
 * the run and the time limit, the environment's own random stream, a finite return. */
static int check_vec_words(rlt_trainer *tr, const char *path, int32_t k, const int64_t *v, int64_t steps) {
    rlt_err *e = &tr->agent->err;
    int64_t max = v[TV_ENV_MAX_STEPS], t = v[TV_ENV_T];
    double ep_ret = bitsd(v[TV_EP_RET]);
    if (v[TV_EP_LEN] < 0 || v[TV_EP_LEN] > steps)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.envs' (environment %d): ep_len %lld, expected 0..%lld "
                 "(env_steps)", path, (int)k, (long long)v[TV_EP_LEN], (long long)steps);
    if (max < (tr->user_env ? 0 : 1) || max > INT32_MAX)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.envs' (environment %d): max_steps is %lld, expected %d..%d", path,
                 (int)k, (long long)max, tr->user_env ? 0 : 1, INT32_MAX);
    if (t < 0 || t > INT32_MAX || (max > 0 && t > max))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.envs' (environment %d): the episode step env_t is %lld, "
                 "expected 0..%lld", path, (int)k, (long long)t, (long long)(max > 0 ? max : INT32_MAX));
    if ((uint64_t)v[TV_ENV_STREAM] != tr->envs[k].rng.stream)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.envs' (environment %d): RNG stream %llu, this trainer's is %u",
                 path, (int)k, (unsigned long long)v[TV_ENV_STREAM], tr->envs[k].rng.stream);
    if (!isfinite(ep_ret))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.envs' (environment %d): the episode's return so far is %g",
                 path, (int)k, ep_ret);
    char why[256];
    const unsigned char *state = tr->vec_states + (int64_t)(k - 1) * RLT_ENV_STATE_BYTES;
    if (!tr->user_env && tr->envs[k].cls->check_state && tr->envs[k].cls->check_state(&tr->envs[k], state, (int32_t)t, why, sizeof why) != 0)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.env_states' (environment %d of '%s') at episode step %lld: %s",
                 path, (int)k, tr->env_name, (long long)t, why);
    return RLT_OK;
}

/* A rank's checkpoint holds 1/R of the batch's replay and its own environments' streams: resumed as a single
 * run (or as another rank, or a single run's as a rank) it would train on silently, as something else.
 * Checkpoints of earlier versions have no rank line and are not checked. */
static int check_rank(rlt_trainer *tr, const ckpt_reader *r, const char *path) {
    const char *meta = ckpt_reader_meta(r, NULL), *rk = strstr(meta, "\nranks: "), *ri = strstr(meta, "\nrank: ");
    if (!rk || !ri) return RLT_OK;
    long ranks = strtol(rk + 8, NULL, 10), rank = strtol(ri + 7, NULL, 10);
    long my_ranks = tr->cfg.comm ? (long)rlt_comm_size(tr->cfg.comm) : 0, my_rank = tr->cfg.rank;
    rlt_err *e = &tr->agent->err;
    if (ranks > 0 && my_ranks == 0)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s is the checkpoint of rank %ld of a data-parallel run on %ld devices, and this "
                 "is a single run; resume that run as it was (the same devices list and out_dir: each rank resumes from "
                 "its out_dir/rank_<k>/ file)", path, rank, ranks);
    if (ranks == 0 && my_ranks > 0)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s is the checkpoint of a single run, and this is rank %ld of a data-parallel run "
                 "on %ld devices; resume it as a single run (one device)", path, my_rank, my_ranks);
    if (ranks != my_ranks || rank != my_rank)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s is the checkpoint of rank %ld of a data-parallel run on %ld devices, and this "
                 "is rank %ld of %ld; resume with the devices list it was saved with", path, rank, ranks, my_rank,
                 my_ranks);
    return RLT_OK;
}

static int resume_checked(rlt_trainer *tr, ckpt_reader *r, const char *path) {
    rlt_agent *ag = tr->agent;
    rlt_err *e = &ag->err;
    int64_t s[TS_COUNT];
    char name[64];
    const ckpt_tensor_info *info;
    /* Every trainer tensor has the dtype and shape trainer_save gives it, not only its size. */
    const int64_t shape_n[1] = {64}, shape_s[1] = {TS_COUNT}, shape_e[1] = {RLT_ENV_STATE_BYTES};
    const int64_t shape_o[1] = {rlt_space_bytes(&tr->envs[0].obs_space) * tr->n_envs};
    RLT_TRY(ckpt_reader_expect(r, "trainer.env_name", RLT_DTYPE_U8, 1, shape_n));
    RLT_TRY(ckpt_reader_expect(r, "trainer.state", RLT_DTYPE_I64, 1, shape_s));
    RLT_TRY(ckpt_reader_expect(r, "trainer.env_state", RLT_DTYPE_U8, 1, shape_e));
    /* The trainer's part first: it must be this environment and this observation size. */
    RLT_TRY(ckpt_reader_read(r, "trainer.env_name", name, sizeof name));
    name[63] = '\0';
    /* Earlier versions stored the config's spelling: an alias names its built-in class. */
    if (strcmp(tr->user_env ? name : rlt_env_canonical_name(name), tr->env_name) != 0)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: the checkpoint is of environment '%s', this trainer trains '%s'", path, name,
                 tr->env_name);
    if (tr->user_env) {
        if (tr->user_state_bytes == 0)
            RLT_FAIL(e, RLT_ESTATE, "%s: user environment '%s' has no save_state/load_state callbacks, so its episode "
                     "state cannot be restored; give both (and state_bytes) in rlt_env_callbacks to resume", path, name);
        const ckpt_tensor_info *us;
        if (ckpt_reader_find(r, "trainer.user_env_state", &us) != RLT_OK ||
            us->bytes != (uint64_t)tr->user_state_bytes * (uint64_t)tr->n_envs)
            RLT_FAIL(e, RLT_ECHECKPOINT, "%s: no user environment state of %d bytes (state_bytes) x %d (env.num_envs) in "
                     "the checkpoint", path, tr->user_state_bytes, (int)tr->n_envs);
    }
    RLT_TRY(check_rank(tr, r, path));
    RLT_TRY(ckpt_reader_read(r, "trainer.state", s, sizeof s));
    /* An evaluation the saved run was stopped in: one this config schedules after the checkpoint's step. */
    int64_t pending = 0;
    for (int32_t i = 0; i < r->n_tensors; i++)
        if (!strcmp(r->tensors[i].name, "trainer.eval_pending")) {
            const int64_t shape_p[1] = {1};
            RLT_TRY(ckpt_reader_expect(r, "trainer.eval_pending", RLT_DTYPE_I64, 1, shape_p));
            RLT_TRY(ckpt_reader_read(r, "trainer.eval_pending", &pending, sizeof pending));
            int64_t at = s[TS_ENV_STEPS], every = tr->cfg.train.eval_every;
            int due = at >= 1 && at <= tr->cfg.train.total_steps &&
                      ((every > 0 && at % every == 0) || at == tr->cfg.train.total_steps);
            if (pending != 1 || !due)
                RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.eval_pending' is %lld at step %lld: expected 1, at a "
                         "step where train.eval_every (%lld) or train.total_steps (%lld) puts an evaluation", path,
                         (long long)pending, (long long)at, (long long)every, (long long)tr->cfg.train.total_steps);
        }
    const int32_t N = tr->n_envs;
    const uint64_t ob = (uint64_t)rlt_space_bytes(&tr->envs[0].obs_space);
    RLT_TRY(ckpt_reader_find(r, "trainer.obs", &info));
    if (info->bytes % ob == 0 && info->bytes / ob != (uint64_t)N)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: the checkpoint holds %llu training environments, this config's env.num_envs is "
                 "%d; resume with the env.num_envs it was saved with", path, (unsigned long long)(info->bytes / ob), (int)N);
    if (info->bytes != ob * (uint64_t)N)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.obs': observations of %llu bytes, this environment's have %lld",
                 path, (unsigned long long)info->bytes, (long long)ob);
    RLT_TRY(ckpt_reader_expect(r, "trainer.obs", RLT_DTYPE_U8, 1, shape_o));
    if (tr->user_env) {
        const int64_t shape_u[1] = {(int64_t)tr->user_state_bytes * N};
        RLT_TRY(ckpt_reader_expect(r, "trainer.user_env_state", RLT_DTYPE_U8, 1, shape_u));
    }
    int64_t agent_steps;
    RLT_TRY(ckpt_reader_read_range(r, "agent.host", 0, &agent_steps, sizeof agent_steps));
    RLT_TRY(check_loop_state(tr, path, s, agent_steps));
    if (N > 1) {
        const int64_t shape_v[2] = {N - 1, TV_COUNT}, shape_vs[2] = {N - 1, RLT_ENV_STATE_BYTES};
        RLT_TRY(ckpt_reader_expect(r, "trainer.envs", RLT_DTYPE_I64, 2, shape_v));
        RLT_TRY(ckpt_reader_expect(r, "trainer.env_states", RLT_DTYPE_U8, 2, shape_vs));
        RLT_TRY(ckpt_reader_read(r, "trainer.envs", tr->vec_words, sizeof *tr->vec_words * TV_COUNT * (uint64_t)(N - 1)));
        RLT_TRY(ckpt_reader_read(r, "trainer.env_states", tr->vec_states, (uint64_t)RLT_ENV_STATE_BYTES * (uint64_t)(N - 1)));
        for (int32_t k = 1; k < N; k++)
            RLT_TRY(check_vec_words(tr, path, k, tr->vec_words + (int64_t)(k - 1) * TV_COUNT, s[TS_ENV_STEPS]));
    }
    /* The environment's state and the current observation are read and checked here, and copied in only
     * once the agent has loaded: next_obs is scratch between steps (the loop writes it before reading it). */
    _Alignas(16) unsigned char env_state[RLT_ENV_STATE_BYTES];
    if (!tr->user_env) {
        RLT_TRY(ckpt_reader_read(r, "trainer.env_state", env_state, sizeof env_state));
        char why[256];
        if (tr->envs[0].cls->check_state &&
            tr->envs[0].cls->check_state(&tr->envs[0], env_state, (int32_t)s[TS_ENV_T], why, sizeof why) != 0)
            RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.env_state' of environment '%s' at episode step %lld: %s",
                     path, tr->env_name, (long long)s[TS_ENV_T], why);
    }
    RLT_TRY(ckpt_reader_read(r, "trainer.obs", tr->next_obs, info->bytes));
    if (tr->envs[0].obs_space.dtype == RLT_DTYPE_F32)
        for (uint64_t i = 0; i < info->bytes / 4; i++)
            if (!(fabsf(tr->next_obs[i]) <= RLT_VALUE_ABS_MAX))
                RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'trainer.obs' element %llu is %g: observations are finite and at "
                         "most 1e18 in magnitude (base/finite.h)", path, (unsigned long long)i, tr->next_obs[i]);
    /* The agent checks all of its tensors before it changes anything. */
    RLT_TRY(agent_read_state(ag, r, path));
    if (tr->user_env) {
        const rlt_env_callbacks *cb = rlt_env_user_callbacks(&tr->envs[0]);
        RLT_TRY(ckpt_reader_read(r, "trainer.user_env_state", tr->user_state, (uint64_t)tr->user_state_bytes * (uint64_t)N));
        for (int32_t k = 0; k < N; k++) {
            int urc = cb->load_state(cb->user, k, tr->user_state + (int64_t)k * tr->user_state_bytes);
            if (urc != 0)
                RLT_FAIL(e, RLT_ERUNTIME, "%s: user environment '%s': load_state returned %d for instance %d (the agent's "
                         "state is loaded)", path, name, urc, (int)k);
        }
    } else {
        memcpy(tr->envs[0].state, env_state, RLT_ENV_STATE_BYTES);
    }
    for (int32_t k = 1; k < N; k++) {
        rlt_env *env = &tr->envs[k];
        const int64_t *v = tr->vec_words + (int64_t)(k - 1) * TV_COUNT;
        if (!tr->user_env) memcpy(env->state, tr->vec_states + (int64_t)(k - 1) * RLT_ENV_STATE_BYTES, RLT_ENV_STATE_BYTES);
        tr->ep_len[k] = v[TV_EP_LEN];
        tr->ep_ret[k] = bitsd(v[TV_EP_RET]);
        env->t = (int32_t)v[TV_ENV_T];
        env->rng.seed = (uint64_t)v[TV_ENV_SEED];
        env->rng.ctr = (uint64_t)v[TV_ENV_CTR];
        env->max_steps = (int32_t)v[TV_ENV_MAX_STEPS];
    }
    memcpy(tr->obs, tr->next_obs, info->bytes);
    rlt_progress *p = &tr->prog;
    p->env_steps = s[TS_ENV_STEPS];
    p->episodes = s[TS_EPISODES];
    p->updates = ag->updates;
    tr->ep_len[0] = s[TS_EP_LEN];
    tr->envs[0].t = (int32_t)s[TS_ENV_T];
    tr->envs[0].rng.seed = (uint64_t)s[TS_ENV_SEED];
    tr->envs[0].rng.ctr = (uint64_t)s[TS_ENV_CTR];
    tr->envs[0].rng.stream = (uint32_t)s[TS_ENV_STREAM];
    tr->eval_env.rng.seed = (uint64_t)s[TS_EVAL_SEED];
    tr->eval_env.rng.ctr = (uint64_t)s[TS_EVAL_CTR];
    tr->eval_env.rng.stream = (uint32_t)s[TS_EVAL_STREAM];
    tr->ep_ret[0] = bitsd(s[TS_EP_RET]);
    p->last_eval_return = bitsd(s[TS_LAST_EVAL]);
    p->best_eval_return = bitsd(s[TS_BEST_EVAL]);
    p->last_episode_return = bitsd(s[TS_LAST_EP_RET]);
    tr->envs[0].max_steps = (int32_t)s[TS_ENV_MAX_STEPS];
    tr->eval_pending = (int32_t)pending;
    tr->resumed = 1;
    tr->resumed_step = p->env_steps;
    return RLT_OK;
}

/* 1 when the checkpoint at path lies in out_dir (the same directory, however either is spelled). */
static int in_out_dir(const char *path, const char *out_dir) {
    char d[CKPT_PATH_BYTES];
    struct stat a, b;
    snprintf(d, sizeof d, "%s", path);
    return stat(dirname(d), &a) == 0 && stat(out_dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int rlt_trainer_resume(rlt_trainer *tr, const char *path) {
    if (!tr || !path) return RLT_EINVAL;
    if (!tr->agent || !tr->agent->plan.sealed) RLT_FAIL(&tr->err, RLT_ESTATE, "rlt_trainer_resume after a failed init");
    /* A run into an out_dir that another run owns is refused before anything is read (at once, whatever the
     * checkpoint's size). A missing out_dir has no owner: rlt_trainer_run creates and locks it. */
    struct stat od;
    if (stat(tr->cfg.out_dir, &od) == 0 && S_ISDIR(od.st_mode)) RLT_TRY(trainer_lock_out_dir(tr));
    /* A FIFO or a device would block the open or the reads (a FIFO with no writer forever): only a regular
     * file is a checkpoint. O_NONBLOCK keeps this open from waiting for a FIFO's writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) RLT_FAIL(&tr->err, RLT_EIO, "%s: cannot open the checkpoint: %s", path, strerror(errno));
    struct stat st;
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    if (!regular)
        RLT_FAIL(&tr->err, RLT_ECHECKPOINT, "%s: not a regular file (a FIFO, a device or a directory); a checkpoint "
                 "is a file that rltrain wrote (final.ckpt or ckpt_<step>.ckpt)", path);
    ckpt_reader *r = tr->agent->ckpt_r;
    RLT_TRY(from_agent(tr, ckpt_reader_open(r, &tr->agent->err, path)));
    int rc = resume_checked(tr, r, path);
    ckpt_reader_close(r);
    if (rc == RLT_OK) {
        tr->resumed_in_out_dir = in_out_dir(path, tr->cfg.out_dir);
        rlt_log(RLT_LOG_INFO, "resumed from %s at step %lld (%lld updates)%s", path, (long long)tr->prog.env_steps,
                (long long)tr->prog.updates, tr->eval_pending ? "; the evaluation it was stopped in runs first" : "");
    }
    return from_agent(tr, rc);
}

static int metrics_header(rlt_trainer *tr, out_writer *w) {
    const rlt_algo *algo = tr->agent->algo;
    RLT_TRY(out_writer_printf(w, &tr->err, "kind,env_step,episode,return,length,updates,wall_s,"));
    for (int32_t k = 0; k < algo->n_loss_columns; k++) RLT_TRY(out_writer_printf(w, &tr->err, "%s,", algo->loss_columns[k]));
    /* GPU runs: the device's free memory and the other processes' on it (trainer.c, trainer_watch_device). */
    return out_writer_printf(w, &tr->err, "loss_scale,amp_skipped%s\n", trainer_on_gpu(tr) ? ",device_free_mib,cotenants_mib" : "");
}

/* A row the run kept: "kind,<env_step>,..." with env_step up to the checkpoint's step. A torn last line
 * (the process killed while writing it) has no newline and never gets here. */
static int row_kept(const char *line, int64_t upto) {
    const char *comma = strchr(line, ',');
    if (!comma || comma == line || comma[1] < '0' || comma[1] > '9') return 0;
    char *end;
    long long step = strtoll(comma + 1, &end, 10);
    return *end == ',' && step <= upto;
}

/* Copies the header and the kept rows of out_dir/metrics.csv into w. */
static int copy_rows(rlt_trainer *tr, const char *path, out_writer *w) {
    char buf[8192], line[1024];
    RLT_TRY(metrics_header(tr, w));
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return RLT_OK; /* no earlier rows */
    /* A FIFO planted as metrics.csv would block the reads forever. */
    if (out_check_regular(&tr->err, fd, path) != RLT_OK) {
        close(fd);
        return RLT_EIO;
    }
    size_t len = 0;
    int first = 1, too_long = 0, rc = RLT_OK;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) rc = rlt_err_set(&tr->err, RLT_EIO, __FILE__, __LINE__, "cannot read %s: %s", path, strerror(errno));
        if (n <= 0) break;
        for (ssize_t i = 0; i < n && rc == RLT_OK; i++) {
            if (buf[i] != '\n') {
                if (len < sizeof line - 1) line[len++] = buf[i];
                else too_long = 1;
                continue;
            }
            line[len] = '\0';
            /* The header is written already; a line longer than any row is not one. */
            if (!first && !too_long && row_kept(line, tr->resumed_step))
                rc = out_writer_printf(w, &tr->err, "%s\n", line);
            first = too_long = 0;
            len = 0;
        }
        if (rc != RLT_OK) break;
    }
    close(fd);
    return rc;
}

int trainer_open_metrics(rlt_trainer *tr) {
    char path[600], tmp[660];
    snprintf(path, sizeof path, "%s/metrics.csv", tr->cfg.out_dir);
    if (!tr->resumed_in_out_dir) {
        RLT_TRY(out_writer_open(&tr->metrics, &tr->err, path, 0));
        RLT_TRY(metrics_header(tr, &tr->metrics));
        return out_writer_flush(&tr->metrics, &tr->err);
    }
    /* The same run continues: its rows up to the checkpoint, written aside and renamed over the file, so that a
     * crash now leaves either the old file or the new one; rows are appended to it from here on. */
    rlt_text_tmp_path(tmp, sizeof tmp, path);
    RLT_TRY(out_writer_open(&tr->metrics, &tr->err, tmp, 0));
    int rc = copy_rows(tr, path, &tr->metrics);
    int crc = out_writer_close(&tr->metrics, &tr->err);
    if (rc == RLT_OK) rc = crc;
    if (rc == RLT_OK && rename(tmp, path) != 0)
        rc = rlt_err_set(&tr->err, RLT_EIO, __FILE__, __LINE__, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != RLT_OK) {
        unlink(tmp);
        return rc;
    }
    RLT_TRY(out_fsync_dir(&tr->err, path));
    return out_writer_open(&tr->metrics, &tr->err, path, 1);
}
