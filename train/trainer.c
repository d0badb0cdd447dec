/* trainer.c: the training loop: a built-in environment, or one the caller registered with callbacks
 * (rlt_trainer_init_env), drives an agent for train.total_steps steps, with periodic evaluation, progress
 * reports and the run's outputs (config.yaml, metrics.csv, summary.json, final.ckpt, best.ckpt). Every buffer is
 * taken at init; the loop allocates nothing. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "agent.h"
#include "env.h"
#include "mem.h"
#include "outputs.h"
#include "text.h"
#include "trainer.h"


/* A value found wrong after parsing (an unknown environment, an algorithm that cannot act in the environment's
 * spaces) is still the config's error: the message gets the key and where it was set (file:line:col, or the
 * --set); the status stays (RLT_ECONFIG, or RLT_EINVAL for spaces an algorithm cannot take: both exit 2). */
static int trainer_blame_key(rlt_trainer *tr, const char *key) {
    char where[400], inner[sizeof tr->err.msg];
    snprintf(inner, sizeof inner, "%s", tr->err.msg);
    config_key_where(&tr->cfg, key, where, sizeof where);
    return rlt_err_set(&tr->err, tr->err.status, __FILE__, __LINE__, "%s: %.1500s", where, inner);
}

static int trainer_setup(rlt_trainer *tr, const rlt_env_callbacks *user_env) {
    rlt_err *e = &tr->err;
    rlt_config *c = &tr->cfg;
    if (rlt_config_validate(c) != RLT_OK) {
        rlt_err_copy(e, &c->err);
        return e->status;
    }
    /* A trainer is one run: a config naming a seed group's members would otherwise train only `seed`. */
    if (c->train.seeds.n > 0 || c->train.num_seeds > 1)
        RLT_FAIL(e, RLT_ECONFIG, "config: train.num_seeds %d / train.seeds %d entries name a seed group of independent "
                 "runs, and a trainer is one run; use rlt_group_init (the rltrain CLI and rltrain.gym.train do), or "
                 "train.num_seeds: 1 and train.seeds: []", (int)c->train.num_seeds, (int)c->train.seeds.n);
    if (c->population.n > 0)
        RLT_FAIL(e, RLT_ECONFIG, "config: the population names %d members with their own values, and a trainer is one run; "
                 "use rlt_group_init (the rltrain CLI and rltrain.gym.train do), or remove the population section",
                 (int)c->population.n);
    if (c->devices.n > 1 && !c->comm)
        RLT_FAIL(e, RLT_ECONFIG, "config: devices lists %d devices, which makes a data-parallel run (or spreads the seeds "
                 "of a seed group), and a trainer runs on one device; use rlt_group_init (the rltrain CLI and "
                 "rltrain.gym.train do), or give one device", (int)c->devices.n);
    const int32_t N = c->env.num_envs;
    tr->n_envs = N;
    /* Rank r of a data-parallel run steps environments r N .. r N + N - 1 of the numbering (base/philox.h). */
    const uint32_t env0 = (uint32_t)c->rank * (uint32_t)N;
    tr->envs = rlt_mem_alloc(sizeof *tr->envs * (uint64_t)N, 64);
    if (!tr->envs) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for %d environments", (int)N);
    if (user_env) {
        /* Instances 0..N-1 train, instance N evaluates (0 and 1 with one training environment). */
        for (int32_t k = 0; k < N; k++)
            RLT_TRY(rlt_env_make_user(&tr->envs[k], e, user_env, k, c->seed, env0 + k == 0 ? RLT_STREAM_ENV :
                                      RLT_STREAM_ENV_VEC + env0 + (uint32_t)k, c->env.max_episode_steps));
        RLT_TRY(rlt_env_make_user(&tr->eval_env, e, user_env, N, c->seed + 100, RLT_STREAM_EVAL_ENV, c->env.max_episode_steps));
        const rlt_env_callbacks *cb = rlt_env_user_callbacks(&tr->envs[0]);
        snprintf(tr->env_name, sizeof tr->env_name, "%s", cb->name && cb->name[0] ? cb->name : "user");
        /* The name goes into summary.json and the checkpoint's metadata: keep it to plain characters. */
        for (char *ch = tr->env_name; *ch; ch++)
            if (!isalnum((unsigned char)*ch) && !strchr("_-./:", *ch)) *ch = '_';
        tr->user_env = 1;
        tr->user_state_bytes = cb->save_state ? cb->state_bytes : 0;
        tr->batched = rlt_env_user_batched(&tr->envs[0]);
        if (tr->eval_env.max_steps <= 0)
            rlt_log(RLT_LOG_WARN, "user environment '%s' has no time limit (max_episode_steps 0 and no "
                    "env.max_episode_steps): each evaluation episode is cut at %d steps; set one of them", tr->env_name,
                    RLT_EVAL_MAX_EPISODE_STEPS);
    } else {
        for (int32_t k = 0; k < N; k++)
            if (rlt_env_make(&tr->envs[k], e, c->env.name, c->seed, env0 + k == 0 ? RLT_STREAM_ENV :
                             RLT_STREAM_ENV_VEC + env0 + (uint32_t)k, c->env.max_episode_steps) != RLT_OK)
                return e->status == RLT_ECONFIG ? trainer_blame_key(tr, "env.name") : e->status;
        RLT_TRY(rlt_env_make(&tr->eval_env, e, c->env.name, c->seed + 100, RLT_STREAM_EVAL_ENV, c->env.max_episode_steps));
        /* The class's own name, whichever alias the config used: a checkpoint of "Pendulum-v1" resumes as "pendulum". */
        snprintf(tr->env_name, sizeof tr->env_name, "%s", tr->envs[0].cls->name);
    }
    /* The trainer's own host buffers come before the agent seals its arena. */
    RLT_TRY(trainer_eval_init(tr));
    uint64_t n = (uint64_t)N, ob = (uint64_t)rlt_space_bytes(&tr->envs[0].obs_space);
    uint64_t ab = (uint64_t)tr->envs[0].act_space.shape[0] * 4;
    tr->obs = rlt_mem_alloc(ob * n, 64);
    tr->next_obs = rlt_mem_alloc(ob * n, 64);
    tr->action = rlt_mem_alloc(ab * n, 64);
    tr->reward = rlt_mem_alloc(4 * n, 64);
    tr->term = rlt_mem_alloc(n, 64);
    tr->trunc = rlt_mem_alloc(n, 64);
    tr->ep_ret = rlt_mem_alloc(sizeof *tr->ep_ret * n, 64);
    tr->ep_len = rlt_mem_alloc(sizeof *tr->ep_len * n, 64);
    tr->dump = rlt_mem_alloc(DUMP_BYTES, 64);
    if (!tr->obs || !tr->next_obs || !tr->action || !tr->reward || !tr->term || !tr->trunc || !tr->ep_ret ||
        !tr->ep_len || !tr->dump)
        RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the trainer");
    if (N > 1) {
        tr->vec_words = rlt_mem_alloc(sizeof *tr->vec_words * TV_COUNT * (n - 1), 64);
        tr->vec_states = rlt_mem_alloc((uint64_t)RLT_ENV_STATE_BYTES * (n - 1), 64);
        if (!tr->vec_words || !tr->vec_states) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the trainer");
    }
    if (tr->batched) {
        tr->reset_mask = rlt_mem_alloc(n, 64);
        tr->reset_seeds = rlt_mem_alloc(sizeof *tr->reset_seeds * n, 64);
        if (!tr->reset_mask || !tr->reset_seeds) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the trainer");
    }
    if (tr->user_state_bytes > 0 && !(tr->user_state = rlt_mem_alloc((uint64_t)tr->user_state_bytes * n, 64)))
        RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the user environment's state (%d bytes x %d)", tr->user_state_bytes,
                 (int)N);
    if (rlt_config_dump(c, tr->dump, DUMP_BYTES) >= DUMP_BYTES) RLT_FAIL(e, RLT_ERUNTIME, "resolved config too long");
    int rc = rlt_agent_init(c, &tr->envs[0].obs_space, &tr->envs[0].act_space, &tr->agent);
    if (rc != RLT_OK) {
        if (tr->agent) rlt_err_copy(e, &tr->agent->err);
        else rlt_err_set(e, rc, __FILE__, __LINE__, "out of host memory for the agent");
        /* RLT_EINVAL here is the algorithm refusing the environment's spaces (td3 on a Discrete action). */
        if (rc == RLT_EINVAL && tr->agent) return trainer_blame_key(tr, "algo");
        return rc;
    }
    trainer_eval_set_rows(tr);
    /* A run that ends before its first update only takes random (or epsilon) actions: never what was meant. The
     * algorithm names the key (agents/algo.h); its value is read like any key's. */
    const char *first_key = tr->agent->algo->first_update_key;
    char first[32] = "";
    if (first_key && rlt_config_get(c, first_key, first, sizeof first) > 0 && c->train.total_steps <= strtoll(first, NULL, 10))
        rlt_log(RLT_LOG_WARN, "train.total_steps %lld is not above %s %s: the run makes no update and its policy stays "
                "the initial one; raise train.total_steps or lower %s", (long long)c->train.total_steps, first_key, first,
                first_key);
    /* A replay smaller than the run trains the end of it on recent data only, which changes learning: say so
     * (the TD3 and DQN reference codes keep 1,000,000 transitions). */
    if (c->train.total_steps > c->replay.capacity)
        rlt_log(RLT_LOG_INFO, "replay.capacity %lld keeps only the last %lld of the run's %lld transitions; older ones are "
                "overwritten", (long long)c->replay.capacity, (long long)c->replay.capacity, (long long)c->train.total_steps);
    return RLT_OK;
}

static int trainer_init(const rlt_config *cfg, const rlt_env_callbacks *user_env, rlt_trainer **out) {
    if (!out) return RLT_EINVAL;
    *out = NULL;
    if (!cfg) return RLT_EINVAL;
    rlt_trainer *tr = rlt_mem_alloc(sizeof *tr, 64);
    if (!tr) return RLT_ENOMEM;
    *out = tr;
    tr->cfg = *cfg;
    tr->metrics.fd = -1;
    tr->lock_fd = -1;
    tr->prog.last_eval_return = NAN;
    tr->prog.best_eval_return = NAN;
    tr->prog.last_episode_return = NAN;
    tr->prog.device_free_mib = NAN; /* GPU runs fill them (trainer_watch_device) */
    tr->prog.cotenants_mib = NAN;
    return trainer_setup(tr, user_env);
}

int rlt_trainer_init(const rlt_config *cfg, rlt_trainer **out) { return trainer_init(cfg, NULL, out); }

int rlt_trainer_init_env(const rlt_config *cfg, const rlt_env_callbacks *env, rlt_trainer **out) {
    if (!env) {
        if (out) *out = NULL;
        return RLT_EINVAL;
    }
    return trainer_init(cfg, env, out);
}

void rlt_trainer_free(rlt_trainer *tr) {
    if (!tr) return;
    rlt_agent_free(tr->agent);
    if (tr->metrics.fd >= 0) {
        rlt_err scratch;
        out_writer_close(&tr->metrics, &scratch);
    }
    rlt_mem_free(tr->obs);
    rlt_mem_free(tr->next_obs);
    rlt_mem_free(tr->action);
    rlt_mem_free(tr->reward);
    rlt_mem_free(tr->term);
    rlt_mem_free(tr->trunc);
    rlt_mem_free(tr->ep_ret);
    rlt_mem_free(tr->ep_len);
    rlt_mem_free(tr->vec_words);
    rlt_mem_free(tr->vec_states);
    rlt_mem_free(tr->envs);
    rlt_mem_free(tr->dump);
    rlt_mem_free(tr->user_state);
    rlt_mem_free(tr->reset_mask);
    rlt_mem_free(tr->reset_seeds);
    trainer_eval_free(tr);
    out_unlock_dir(&tr->lock_fd);
    rlt_mem_free(tr);
}

int rlt_trainer_memory_plan(const rlt_trainer *tr, rlt_plan_summary *summary, const rlt_plan_entry **entries) {
    if (!tr || !tr->agent) return RLT_ESTATE;
    return rlt_agent_memory_plan(tr->agent, summary, entries);
}

size_t rlt_trainer_plan_format(const rlt_trainer *tr, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    return tr && tr->agent ? rlt_agent_plan_format(tr->agent, buf, cap) : 0;
}

rlt_agent *rlt_trainer_agent(rlt_trainer *tr) { return tr ? tr->agent : NULL; }
const char *rlt_trainer_out_dir(const rlt_trainer *tr) { return tr ? tr->cfg.out_dir : NULL; }
const char *rlt_trainer_errmsg(const rlt_trainer *tr) { return tr ? tr->err.msg : "no trainer (allocation failed)"; }

int rlt_trainer_progress(const rlt_trainer *tr, rlt_progress *out) {
    if (!tr || !out) return RLT_EINVAL;
    *out = tr->prog;
    return RLT_OK;
}

int trainer_agent_call(rlt_trainer *tr, int rc) {
    if (rc != RLT_OK) rlt_err_copy(&tr->err, &tr->agent->err);
    return rc;
}

/* An environment call's status; a user environment's failure gets a message naming the callback. */
int trainer_env_call(rlt_trainer *tr, rlt_env *env, int rc) {
    if (rc == RLT_OK) return RLT_OK;
    int user_rc = 0;
    const char *what = rlt_env_user_failure(env, &user_rc);
    if (what)
        RLT_FAIL(&tr->err, rc, "user environment '%s' (instance %d, %s): %s returned %d at episode step %d", tr->env_name,
                 env == &tr->eval_env ? tr->n_envs : (int)(env - tr->envs), env == &tr->eval_env ? "evaluation" : "training", what, user_rc, (int)env->t);
    RLT_FAIL(&tr->err, rc, "environment '%s': %s", tr->env_name, rlt_strerror(rc));
}

/* A vector environment's call: its failure is recorded on instance 0 and names the callback and the instance. */
static int env_batch_call(rlt_trainer *tr, int rc) {
    if (rc == RLT_OK) return RLT_OK;
    int user_rc = 0;
    const char *what = rlt_env_user_failure(&tr->envs[0], &user_rc);
    RLT_FAIL(&tr->err, rc, "user environment '%s' (training instances 0..%d, one vector environment): %s returned %d "
             "at env step %lld", tr->env_name, tr->n_envs - 1, what ? what : "a callback", user_rc,
             (long long)tr->prog.env_steps);
}

/* Restarts the training environments whose tr->reset_mask byte is 1 (a vector environment: one reset_batch
 * call), writing their first observations to their rows of obs. */
static int trainer_reset_batch(rlt_trainer *tr, unsigned char *obs) {
    return env_batch_call(tr, rlt_env_user_reset_batch(tr->envs, tr->n_envs, tr->reset_mask, tr->reset_seeds, obs));
}

/* 1 on a GPU run: the device columns of metrics.csv and the progress line's GPU figures. */
int trainer_on_gpu(const rlt_trainer *tr) { return tr->agent && !tr->agent->plan.device_is_host; }

/* GPU runs, for a GPU shared with a simulator: the device's free memory and what other processes hold on it
 * (its memory less the free and this process's context and arena), measured with the backend's measure_memory at
 * most once a second (NVML and cudaMemGetInfo: no allocation, no sync), and one warning when the free memory falls
 * under memory.warn_free_mb: the arena is reserved and cannot be taken away, but the process beside it may fail. */
static void trainer_watch_device(rlt_trainer *tr, double now) {
    rlt_backend *bk = &tr->agent->bk;
    if (!trainer_on_gpu(tr) || !bk->ops->measure_memory || (tr->mem_t > 0 && now - tr->mem_t < 1.0)) return;
    tr->mem_t = now;
    if (bk->ops->measure_memory(bk) != RLT_OK) return; /* the last figures stay */
    const double mib = 1024.0 * 1024.0, mine = (double)bk->context_bytes + (double)agent_plan_need(tr->agent);
    const double others = (double)bk->device_total - (double)bk->device_free - mine;
    tr->prog.device_free_mib = (double)bk->device_free / mib;
    tr->prog.cotenants_mib = others > 0 ? others / mib : 0.0;
    if (!tr->mem_warned && tr->cfg.memory.warn_free_mb > 0 && tr->prog.device_free_mib < tr->cfg.memory.warn_free_mb) {
        tr->mem_warned = 1;
        rlt_log(RLT_LOG_WARN, "the GPU has %.0f MiB free at step %lld (other processes hold %.0f MiB, this one %.0f MiB): "
                "under memory.warn_free_mb %.0f. This run's arena is reserved and cannot be taken away, but a process "
                "beside it (a simulator) may fail to allocate; said once", tr->prog.device_free_mib,
                (long long)tr->prog.env_steps, tr->prog.cotenants_mib, mine / mib, tr->cfg.memory.warn_free_mb);
    }
}

/* The device columns of a metrics.csv row on a GPU run (nothing on the CPU, whose columns stay as they were). */
int trainer_device_cells(rlt_trainer *tr) {
    if (!trainer_on_gpu(tr)) return RLT_OK;
    return out_writer_printf(&tr->metrics, &tr->err, ",%.1f,%.1f", tr->prog.device_free_mib, tr->prog.cotenants_mib);
}

static void trainer_tick(rlt_trainer *tr) {
    rlt_progress *p = &tr->prog;
    const double now = rlt_now_s();
    trainer_watch_device(tr, now);
    p->elapsed_s = now - tr->t0;
    p->updates = tr->agent->updates;
    /* Rates count what this process did: a resumed run's earlier updates took another process's time. */
    p->updates_per_s = p->elapsed_s > 0 ? (double)(p->updates - tr->updates0) / p->elapsed_s : 0;
    p->env_steps_per_s = p->elapsed_s > 0 ? (double)(p->env_steps - tr->steps0) / p->elapsed_s : 0;
    /* The ETA from the steps since the first update: the random-action steps before it are many times faster, and
     * an ETA from them was a fraction of the time taken. Unknown (NaN) until updates run. */
    if (p->updates > tr->updates0 && tr->learn_t <= 0) tr->learn_t = now, tr->learn_step = p->env_steps;
    const int64_t learned = p->env_steps - tr->learn_step;
    p->eta_s = tr->learn_t > 0 && learned > 0 ? (now - tr->learn_t) * (double)(p->total_steps - p->env_steps) / (double)learned
             : p->env_steps >= p->total_steps ? 0.0 : NAN;
}

static int trainer_report(rlt_trainer *tr, rlt_progress_fn fn, void *user, int is_eval, double *next_report) {
    trainer_tick(tr);
    tr->prog.is_eval = is_eval;
    *next_report = rlt_now_s() + tr->cfg.train.progress_every_s;
    if (fn && fn(user, &tr->prog)) RLT_FAIL(&tr->err, RLT_EINTERRUPTED, "stopped by the progress callback at step %lld",
                                           (long long)tr->prog.env_steps);
    return RLT_OK;
}

/* src as the inside of a JSON string (quotes, backslashes and control characters escaped), cut to fit. */
static void json_escape(char *dst, size_t cap, const char *src) {
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)src; *c && o + 7 < cap; c++) {
        if (*c == '"' || *c == '\\') dst[o++] = '\\', dst[o++] = (char)*c;
        else if (*c < 0x20 || *c == 0x7f) o += (size_t)snprintf(dst + o, cap - o, "\\u%04x", *c);
        else dst[o++] = (char)*c;
    }
    dst[o] = '\0';
}

/* status: finished, stopped (a stop request or the progress callback) or failed, with `error` saying why. */
static int trainer_write_summary(rlt_trainer *tr, const char *status, const char *error) {
    char path[600], text[5120], escaped[2560];
    const rlt_progress *p = &tr->prog;
    rlt_plan_summary s;
    rlt_agent_memory_plan(tr->agent, &s, NULL);
    /* Several short formats: glibc's printf takes a heap buffer for formats with many conversions, and
     * this runs after init, where the engine must not allocate. */
    int n = snprintf(text, sizeof text, "{\n  \"status\": \"%s\",\n", status);
    if (error) {
        json_escape(escaped, sizeof escaped, error);
        n += snprintf(text + n, sizeof text - n, "  \"error\": \"%s\",\n", escaped);
    }
    n += snprintf(text + n, sizeof text - n, "  \"algo\": \"%s\",\n  \"env\": \"%s\",\n", tr->cfg.algo, tr->env_name);
    n += snprintf(text + n, sizeof text - n, "  \"device\": \"%s\",\n  \"seed\": %llu,\n", s.device,
                  (unsigned long long)tr->cfg.seed);
    n += snprintf(text + n, sizeof text - n, "  \"final_eval_return\": %.6g,\n  \"best_eval_return\": %.6g,\n",
                  isnan(p->last_eval_return) ? 0.0 : p->last_eval_return,
                  isnan(p->best_eval_return) ? 0.0 : p->best_eval_return);
    n += snprintf(text + n, sizeof text - n, "  \"env_steps\": %lld,\n  \"episodes\": %lld,\n  \"updates\": %lld,\n",
                  (long long)p->env_steps, (long long)p->episodes, (long long)p->updates);
    n += snprintf(text + n, sizeof text - n, "  \"wall_s\": %.4f,\n  \"updates_per_s\": %.3f,\n  \"env_steps_per_s\": %.3f,\n",
                  p->elapsed_s, p->updates_per_s, p->env_steps_per_s);
    n += snprintf(text + n, sizeof text - n, "  \"arena_bytes\": %llu,\n  \"host_arena_bytes\": %llu,\n",
                  (unsigned long long)(s.host_bytes + s.device_bytes), (unsigned long long)s.host_bytes);
    n += snprintf(text + n, sizeof text - n, "  \"device_arena_bytes\": %llu,\n  \"allocations_after_init\": %llu\n}\n",
                  (unsigned long long)s.device_bytes, (unsigned long long)rlt_agent_allocations_after_init(tr->agent));
    /* JSON has no NaN: a run with no evaluation reports 0 above; status says whether it finished. */
    snprintf(path, sizeof path, "%s/summary.json", tr->cfg.out_dir);
    return out_write_atomic(&tr->err, path, text, (size_t)n);
}

/* What follows training step `step`: the evaluation when one is due (with its metrics row and a report), a
 * progress report when one is due, and a periodic checkpoint. */
static int trainer_after_step(rlt_trainer *tr, int64_t step, rlt_progress_fn fn, void *user, double *next_report) {
    rlt_config *c = &tr->cfg;
    rlt_progress *p = &tr->prog;
    rlt_err *e = &tr->err;
    float losses[RLT_LOSS_COUNT];
    char path[700];
    int last = step + 1 == c->train.total_steps;
    if ((c->train.eval_every > 0 && (step + 1) % c->train.eval_every == 0) || last) {
        double mean = 0.0;
        RLT_TRY(trainer_evaluate(tr, &mean));
        p->last_eval_return = mean;
        const int better = isnan(p->best_eval_return) || mean > p->best_eval_return;
        if (better) p->best_eval_return = mean;
        RLT_TRY(trainer_agent_call(tr, agent_read_losses(tr->agent, losses)));
        trainer_tick(tr);
        RLT_TRY(out_writer_printf(&tr->metrics, e, "eval,%lld,%lld,%.6f,,%lld,%.4f,", (long long)p->env_steps,
                                  (long long)p->episodes, mean, (long long)p->updates, p->elapsed_s));
        /* The algorithm's loss columns (agents/algo.h), as it computes them from the device losses. */
        const rlt_algo *algo = tr->agent->algo;
        double cols[RLT_ALGO_MAX_LOSS_COLUMNS];
        algo->loss_values(losses, cols);
        for (int32_t k = 0; k < algo->n_loss_columns; k++)
            RLT_TRY(out_writer_printf(&tr->metrics, e, "%.6g,", cols[k]));
        /* fp16's loss scaler: its scale and the optimiser steps it skipped (empty in other precisions). */
        rlt_amp_state amp;
        RLT_TRY(trainer_agent_call(tr, agent_read_amp(tr->agent, &amp)));
        if (tr->agent->amp) RLT_TRY(out_writer_printf(&tr->metrics, e, "%.6g,%lld", amp.scale, (long long)amp.skipped));
        else RLT_TRY(out_writer_printf(&tr->metrics, e, ","));
        RLT_TRY(trainer_device_cells(tr));
        RLT_TRY(out_writer_printf(&tr->metrics, e, "\n"));
        RLT_TRY(out_writer_flush(&tr->metrics, e));
        /* The best policy so far: this step's checkpoint without the replay (a few MiB at most, where the replay
         * can be GiB), written over the last one. */
        if (better && c->checkpoint.best) {
            snprintf(path, sizeof path, "%s/best.ckpt", c->out_dir);
            RLT_TRY(trainer_save(tr, path, 0));
        }
        RLT_TRY(trainer_report(tr, fn, user, 1, next_report));
    } else if (rlt_now_s() >= *next_report) {
        RLT_TRY(trainer_report(tr, fn, user, 0, next_report));
    }
    if (c->checkpoint.every > 0 && (step + 1) % c->checkpoint.every == 0 && !last) {
        snprintf(path, sizeof path, "%s/ckpt_%lld.ckpt", c->out_dir, (long long)(step + 1));
        RLT_TRY(trainer_save(tr, path, c->checkpoint.include_replay));
        /* Keep the last checkpoint.keep: forget (and delete) the oldest. */
        if (tr->n_kept == c->checkpoint.keep || tr->n_kept == RLT_TRAINER_MAX_KEEP) {
            unlink(tr->kept[0]);
            memmove(tr->kept[0], tr->kept[1], sizeof tr->kept[0] * (size_t)(tr->n_kept - 1));
            tr->n_kept--;
        }
        snprintf(tr->kept[tr->n_kept++], sizeof tr->kept[0], "%s", path);
    }
    return RLT_OK;
}

/* 1 when the run stops before step `step`: this trainer's stop request, or, on a rank of a data-parallel run,
 * any rank's, so that every rank stops at the same step and none is left waiting in a gradient average. A rank
 * that failed aborts the group's communicator (rlt_trainer_run): the others then stop here with that reason. */
static int trainer_stop_agreed(rlt_trainer *tr, int64_t step, int32_t *stop) {
    if (!tr->cfg.comm) {
        *stop = tr->stop != 0;
        return RLT_OK;
    }
    if (rlt_comm_any(tr->cfg.comm, tr->cfg.rank, tr->stop != 0, stop) != RLT_OK) {
        /* A timeout or a lost process has its own message (base/comm.c); an abort by a rank that failed does not. */
        if (rlt_comm_errmsg(tr->cfg.comm)[0])
            RLT_FAIL(&tr->err, RLT_ERUNTIME, "at step %lld: %s", (long long)step, rlt_comm_errmsg(tr->cfg.comm));
        RLT_FAIL(&tr->err, RLT_ERUNTIME, "rank %d stops at step %lld: another rank of the data-parallel run failed "
                 "(its message comes first)", (int)tr->cfg.rank, (long long)step);
    }
    tr->agreed_stop = *stop;
    return RLT_OK;
}

/* Each iteration steps every training environment once: one act call for all of their observations, one
 * observe call for all of their transitions, then num_envs * train.updates_per_step updates (updates_per_step
 * is per environment step). An environment whose episode ended writes its row and starts the next one on its
 * own; with one environment this is the loop it always was, draw for draw. A vector environment (reset_batch,
 * step_batch) takes one call where the others take one per environment, at the same points of the loop: its
 * ended environments restart together once their rows are written, with the seeds each would have drawn. */
static int trainer_loop(rlt_trainer *tr, rlt_progress_fn fn, void *user) {
    rlt_config *c = &tr->cfg;
    rlt_progress *p = &tr->prog;
    rlt_err *e = &tr->err;
    const int32_t N = tr->n_envs;
    const uint64_t ob = (uint64_t)rlt_space_bytes(&tr->envs[0].obs_space), ab = (uint64_t)tr->envs[0].act_space.shape[0] * 4;
    unsigned char *obs = (unsigned char *)tr->obs, *next_obs = (unsigned char *)tr->next_obs;
    unsigned char *action = (unsigned char *)tr->action;
    double next_report = rlt_now_s() + c->train.progress_every_s;
    if (!tr->resumed) {
        for (int32_t k = 0; k < N; k++) {
            if (!tr->batched) RLT_TRY(trainer_env_call(tr, &tr->envs[k], rlt_env_reset(&tr->envs[k], obs + k * ob)));
            tr->ep_ret[k] = 0.0;
            tr->ep_len[k] = 0;
        }
        if (tr->batched) {
            memset(tr->reset_mask, 1, (size_t)N);
            RLT_TRY(trainer_reset_batch(tr, obs));
        }
    }
    /* Resumed from a run stopped during an evaluation: that evaluation, its report and checkpoint first. */
    if (tr->eval_pending) RLT_TRY(trainer_after_step(tr, p->env_steps - 1, fn, user, &next_report));
    for (int64_t step = p->env_steps; step < c->train.total_steps; step += N) {
        int32_t stop;
        RLT_TRY(trainer_stop_agreed(tr, step, &stop));
        if (stop) RLT_FAIL(e, RLT_EINTERRUPTED, "stopped on request at step %lld", (long long)step);
        RLT_TRY(trainer_agent_call(tr, rlt_agent_act(tr->agent, obs, N, 1, action)));
        if (tr->batched)
            RLT_TRY(env_batch_call(tr, rlt_env_user_step_batch(tr->envs, N, action, next_obs, tr->reward, tr->term,
                                                               tr->trunc)));
        for (int32_t k = 0; k < N && !tr->batched; k++) {
            tr->term[k] = tr->trunc[k] = 0;
            RLT_TRY(trainer_env_call(tr, &tr->envs[k], rlt_env_step(&tr->envs[k], action + k * ab, next_obs + k * ob,
                                                            &tr->reward[k], &tr->term[k], &tr->trunc[k])));
        }
        RLT_TRY(trainer_agent_call(tr, rlt_agent_observe(tr->agent, obs, action, tr->reward, next_obs, tr->term, tr->trunc, N)));
        for (int32_t k = 0; k < N; k++) RLT_TRY(trainer_agent_call(tr, rlt_agent_update(tr->agent, NULL)));
        memcpy(obs, next_obs, ob * (uint64_t)N);
        p->env_steps = step + N;
        int32_t ended = 0;
        for (int32_t k = 0; k < N; k++) {
            tr->ep_ret[k] += tr->reward[k];
            tr->ep_len[k]++;
            if (tr->batched) tr->reset_mask[k] = tr->term[k] || tr->trunc[k];
            if (!tr->term[k] && !tr->trunc[k]) continue;
            ended++;
            p->episodes++;
            p->last_episode_return = tr->ep_ret[k];
            trainer_tick(tr);
            /* The loss, loss_scale and amp_skipped columns stay empty on an episode row. */
            RLT_TRY(out_writer_printf(&tr->metrics, e, "episode,%lld,%lld,%.6f,%lld,%lld,%.4f", (long long)p->env_steps,
                                      (long long)p->episodes, tr->ep_ret[k], (long long)tr->ep_len[k],
                                      (long long)p->updates, p->elapsed_s));
            for (int32_t j = 0; j < tr->agent->algo->n_loss_columns + 2; j++)
                RLT_TRY(out_writer_printf(&tr->metrics, e, ","));
            RLT_TRY(trainer_device_cells(tr));
            RLT_TRY(out_writer_printf(&tr->metrics, e, "\n"));
            /* Each row reaches the file when it is complete: a killed run keeps every finished row. */
            RLT_TRY(out_writer_flush(&tr->metrics, e));
            tr->ep_ret[k] = 0.0;
            tr->ep_len[k] = 0;
            if (!tr->batched) RLT_TRY(trainer_env_call(tr, &tr->envs[k], rlt_env_reset(&tr->envs[k], obs + k * ob)));
        }
        if (tr->batched && ended > 0) RLT_TRY(trainer_reset_batch(tr, obs));
        RLT_TRY(trainer_after_step(tr, step + N - 1, fn, user, &next_report));
    }
    return RLT_OK;
}

/* ---- out_dir: an earlier run's outputs, and temporary files a killed run left ----------------------- */

/* 1 when name is ckpt_<digits>.ckpt followed by suffix. */
static int is_periodic_ckpt(const char *name, const char *suffix) {
    if (strncmp(name, "ckpt_", 5) != 0 || !isdigit((unsigned char)name[5])) return 0;
    const char *c = name + 5;
    while (isdigit((unsigned char)*c)) c++;
    return strncmp(c, ".ckpt", 5) == 0 && strcmp(c + 5, suffix) == 0;
}

static int is_output(const char *name) {
    return !strcmp(name, "config.yaml") || !strcmp(name, "metrics.csv") || !strcmp(name, "summary.json") ||
           !strcmp(name, "final.ckpt") || !strcmp(name, "best.ckpt") || !strcmp(name, "failed.ckpt") ||
           is_periodic_ckpt(name, "");
}

/* The temporary name of an output (rlt_text_tmp_path's "<name>.<pid>.<n>.tmp", or an earlier version's
 * "<name>.tmp"): written by a save that its process did not live to finish. Only the out_dir's owner (its lock
 * held) removes them, so a live run's temporary file is never one of them. */
static int is_output_tmp(const char *name) {
    static const char *const outs[] = {"config.yaml", "metrics.csv", "summary.json", "final.ckpt", "best.ckpt",
                                       "failed.ckpt"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (rlt_text_is_tmp_of(name, outs[i])) return 1;
    if (strncmp(name, "ckpt_", 5) != 0 || !isdigit((unsigned char)name[5])) return 0;
    const char *c = name + 5;
    while (isdigit((unsigned char)*c)) c++;
    char base[64];
    size_t n = (size_t)(c - name) + 5;
    if (strncmp(c, ".ckpt", 5) != 0 || n >= sizeof base) return 0;
    memcpy(base, name, n);
    base[n] = '\0';
    return rlt_text_is_tmp_of(name, base);
}

typedef struct out_dir_scan {
    const char *dir;
    int (*match)(const char *name);
    int32_t remove; /* unlink the matches */
    int32_t found;
    char names[160]; /* the first matches, for the message */
} out_dir_scan;

static int scan_one(void *user, const char *name) {
    out_dir_scan *s = user;
    if (!s->match(name)) return 0;
    size_t used = strlen(s->names);
    if (s->found < 4 && used + strlen(name) + 3 < sizeof s->names)
        snprintf(s->names + used, sizeof s->names - used, "%s%s", s->found ? ", " : "", name);
    s->found++;
    if (s->remove) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", s->dir, name);
        unlink(path);
    }
    return 0;
}

/* The refusal of a run into an out_dir that holds an earlier run's outputs (found). */
static int trainer_refuse_out_dir(rlt_trainer *tr, const out_dir_scan *found) {
    char where[400];
    RLT_FAIL(&tr->err, RLT_ECONFIG, "%s: '%s' holds the outputs of an earlier run (%s%s), which this run would replace; "
             "continue that run by resuming from its final.ckpt or latest ckpt_<step>.ckpt (rltrain --resume), "
             "choose another out_dir, or set train.overwrite: true (--set train.overwrite=true) to replace them",
             config_key_where(&tr->cfg, "out_dir", where, sizeof where), tr->cfg.out_dir, found->names,
             found->found > 4 ? ", ..." : "");
}

int trainer_lock_out_dir(rlt_trainer *tr) {
    if (tr->lock_fd >= 0) return RLT_OK;
    RLT_TRY(out_mkdirs(&tr->err, tr->cfg.out_dir));
    return out_lock_dir(&tr->err, tr->cfg.out_dir, &tr->lock_fd);
}

int trainer_check_out_dir(rlt_trainer *tr) {
    if (tr->resumed_in_out_dir || tr->cfg.train.overwrite) return RLT_OK;
    out_dir_scan found = {tr->cfg.out_dir, is_output, 0, 0, ""};
    RLT_TRY(out_dir_each(&tr->err, tr->cfg.out_dir, scan_one, &found));
    return found.found ? trainer_refuse_out_dir(tr, &found) : RLT_OK;
}

/* Before anything is written: a new run into an out_dir that holds an earlier run's outputs would replace them
 * (one at a time, the checkpoints last), so it is refused unless it continues that run (resumed from a
 * checkpoint in out_dir) or train.overwrite says to replace them, which removes them all first: a periodic
 * checkpoint of the earlier run left beside the new metrics would resume into the wrong history. Temporary
 * files of saves a killed run did not finish are removed in every case. */
static int trainer_prepare_out_dir(rlt_trainer *tr) {
    rlt_err *e = &tr->err;
    const char *dir = tr->cfg.out_dir;
    out_dir_scan tmp = {dir, is_output_tmp, 1, 0, ""};
    RLT_TRY(out_dir_each(e, dir, scan_one, &tmp));
    if (tr->resumed_in_out_dir) return RLT_OK;
    out_dir_scan found = {dir, is_output, 0, 0, ""};
    RLT_TRY(out_dir_each(e, dir, scan_one, &found));
    if (!found.found) return RLT_OK;
    if (!tr->cfg.train.overwrite) return trainer_refuse_out_dir(tr, &found);
    /* Unlinking while listing can skip entries: list again until nothing is left. */
    for (int pass = 0; pass < 8; pass++) {
        out_dir_scan old = {dir, is_output, 1, 0, ""};
        RLT_TRY(out_dir_each(e, dir, scan_one, &old));
        if (!old.found) break;
    }
    char dot[600];
    snprintf(dot, sizeof dot, "%s/.", dir); /* out_fsync_dir syncs the directory holding its path */
    RLT_TRY(out_fsync_dir(e, dot));
    rlt_log(RLT_LOG_INFO, "train.overwrite: removed the earlier run's outputs in %s (%s%s)", dir, found.names,
            found.found > 4 ? ", ..." : "");
    return RLT_OK;
}

/* The outputs are written whatever ended the loop, so an interrupted or failed run keeps what it learned:
 * metrics.csv is closed (fsynced), final.ckpt saved, and summary.json, written last, says how the run ended,
 * a failed save included. RLT_OK or RLT_EINTERRUPTED come back only when every output was written. */
static int trainer_finish(rlt_trainer *tr, int rc) {
    rlt_err *e = &tr->err;
    /* A rank of a data-parallel run that ends on its own (a failure, not the ranks' agreed stop) releases the
     * others first: they may wait for it in a gradient average, and its own save below waits for its device. */
    if (rc != RLT_OK && tr->cfg.comm && !tr->agreed_stop) rlt_comm_abort(tr->cfg.comm);
    rlt_err loop_err = tr->err, out_err;
    char path[600];
    int orc = out_writer_close(&tr->metrics, e);
    if (orc != RLT_OK) out_err = tr->err;
    /* A failed run's state may be what failed (a NaN that reached the environment, a diverged network): it goes
     * to failed.ckpt, for inspection or a deliberate resume, and never replaces final.ckpt, which keeps the last
     * good state (an earlier run's, when this one was resumed). */
    int loop_ok = rc == RLT_OK || rc == RLT_EINTERRUPTED;
    snprintf(path, sizeof path, "%s/%s", tr->cfg.out_dir, loop_ok ? "final.ckpt" : "failed.ckpt");
    int crc = trainer_save(tr, path, tr->cfg.checkpoint.include_replay);
    if (orc == RLT_OK && crc != RLT_OK) orc = crc, out_err = tr->err;
    const char *status = orc != RLT_OK || !loop_ok ? "failed" : rc == RLT_OK ? "finished" : "stopped";
    int src = trainer_write_summary(tr, status, orc != RLT_OK ? out_err.msg : !loop_ok ? loop_err.msg : NULL);
    if (orc == RLT_OK && src != RLT_OK) orc = src, out_err = tr->err;
    long long step = (long long)tr->prog.env_steps;
    if (orc == RLT_OK) {
        tr->err = loop_err;
        if (!loop_ok) {
            char good[700], last[760] = "";
            snprintf(good, sizeof good, "%s/final.ckpt", tr->cfg.out_dir);
            if (tr->n_kept > 0) snprintf(last, sizeof last, "; the latest periodic checkpoint is %s", tr->kept[tr->n_kept - 1]);
            /* A user environment without save_state leaves its state out of the checkpoints, which then do not resume. */
            const char *how = tr->user_env && !tr->user_state_bytes
                                  ? " (they hold the agent, but not the environment's state, so they do not resume)"
                              : tr->user_env ? " (resume with the same environment: rltrain.gym.train(..., resume=\"OUT_DIR/"
                                               "final.ckpt\") or python -m rltrain.gym ... --resume OUT_DIR/final.ckpt for a "
                                               "Gymnasium one)"
                                             : "";
            rlt_log(RLT_LOG_INFO, "outputs up to step %lld written to %s/ (summary.json status \"failed\"); the state at "
                    "the failure is in failed.ckpt, and final.ckpt %s%s%s", step, tr->cfg.out_dir,
                    access(good, F_OK) == 0 ? "is the last good one, unchanged" : "was not written", last, how);
        }
        return rc;
    }
    if (loop_ok) {
        rlt_err_set(e, orc, __FILE__, __LINE__, "the run %s at step %lld, but its outputs were not all written: %s",
                    rc == RLT_OK ? "finished" : "stopped", step, out_err.msg);
        return orc;
    }
    /* Both failed: the loop's error, and the outputs' after it. */
    tr->err = loop_err;
    size_t used = strlen(tr->err.msg);
    snprintf(tr->err.msg + used, sizeof tr->err.msg - used, "; writing the outputs failed too: %s", out_err.msg);
    return rc;
}

int rlt_trainer_run(rlt_trainer *tr, rlt_progress_fn fn, void *user) {
    if (!tr) return RLT_EINVAL;
    if (!tr->agent || !tr->agent->plan.sealed) RLT_FAIL(&tr->err, RLT_ESTATE, "rlt_trainer_run after a failed init");
    rlt_config *c = &tr->cfg;
    rlt_err *e = &tr->err;
    char path[600];
    tr->t0 = rlt_now_s();
    tr->prog.total_steps = c->train.total_steps;
    tr->steps0 = tr->prog.env_steps;
    tr->updates0 = tr->agent->updates;
    tr->learn_t = 0.0;
    /* The lock first: a run refused because another owns out_dir changes nothing there. */
    RLT_TRY(trainer_lock_out_dir(tr));
    RLT_TRY(trainer_prepare_out_dir(tr));
    snprintf(path, sizeof path, "%s/config.yaml", c->out_dir);
    RLT_TRY(out_write_atomic(e, path, tr->dump, strlen(tr->dump)));
    RLT_TRY(trainer_open_metrics(tr));
    int rc = trainer_loop(tr, fn, user);
    trainer_tick(tr);
    return trainer_finish(tr, rc);
}

void rlt_trainer_request_stop(rlt_trainer *tr) {
    if (tr) tr->stop = 1;
}
