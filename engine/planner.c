/* planner.c: answers "what fits?" before a run (rltrain plan): the configured plan, the largest batch
 * size and replay capacity that fit the budget (and the device's free memory), and the fewest
 * micro-batches that make the configured batch fit. Every answer comes from building real plans for the
 * trainer's environment on the configured device; nothing is reserved. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "backend_registry.h"
#include "env.h"
#include "mem.h"

/* The plan's need for a modified config; *fits says whether it fits the limit. */
static int probe(rlt_agent *ag, uint64_t limit, int *fits) {
    RLT_TRY(agent_plan_current(ag));
    *fits = agent_plan_need(ag) <= limit;
    return RLT_OK;
}

static int plan_fit(rlt_agent *ag, const rlt_config *cfg, const rlt_env *env, rlt_fit_report *out, char *table,
                    size_t table_cap) {
    memset(out, 0, sizeof *out);
    ag->cfg = *cfg;
    RLT_TRY(agent_prepare(ag, &env->obs_space, &env->act_space));
    uint64_t limit = ag->summary.budget_bytes;
    if (ag->summary.device_total && ag->summary.device_free < limit) limit = ag->summary.device_free;
    out->limit_bytes = limit;
    out->need_bytes = agent_plan_need(ag);
    out->fits = out->need_bytes <= limit;
    if (table && table_cap) plan_format(&ag->plan, &ag->summary, table, table_cap);
    int fits;

    /* Largest batch with one micro-batch: the plan grows with the batch, so bisect. */
    ag->cfg.train.grad_accum_steps = 1;
    int32_t lo = 0, hi = 1 << 20;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        ag->cfg.train.batch_size = mid;
        RLT_TRY(probe(ag, limit, &fits));
        if (fits) lo = mid;
        else hi = mid - 1;
    }
    out->max_batch_size = lo;

    /* Largest replay capacity with the configured batch and accumulation. */
    ag->cfg = *cfg;
    int64_t clo = 0, chi = (int64_t)1 << 40;
    int64_t min_cap = strcmp(cfg->algo, "dqn") == 0 ? 3 : 1;
    while (clo < chi) {
        int64_t mid = clo + (chi - clo + 1) / 2;
        ag->cfg.replay.capacity = mid < min_cap ? min_cap : mid;
        RLT_TRY(probe(ag, limit, &fits));
        if (fits) clo = mid;
        else chi = mid - 1;
    }
    out->max_replay_capacity = clo < min_cap ? 0 : clo;

    /* Fewest micro-batches for the configured batch. */
    ag->cfg = *cfg;
    for (int32_t n = 1; n <= cfg->train.batch_size; n++) {
        if (cfg->train.batch_size % n) continue;
        ag->cfg.train.grad_accum_steps = n;
        RLT_TRY(probe(ag, limit, &fits));
        if (fits) {
            out->min_grad_accum_steps = n;
            out->micro_batch = cfg->train.batch_size / n;
            break;
        }
    }
    return RLT_OK;
}

int rlt_plan_fit(const rlt_config *cfg, rlt_fit_report *out, char *table, size_t table_cap, char *err, size_t err_cap) {
    if (!cfg || !out) return RLT_EINVAL;
    if (table && table_cap) table[0] = '\0';
    rlt_agent *ag = rlt_mem_alloc(sizeof *ag, 64);
    rlt_env *env = rlt_mem_alloc(sizeof *env, 64);
    int rc = RLT_ENOMEM;
    if (ag && env) {
        ag->bk.err = &ag->err;
        rc = rlt_env_make(env, &ag->err, cfg->env.name, cfg->seed, RLT_STREAM_ENV, cfg->env.max_episode_steps);
        if (rc == RLT_OK) rc = plan_fit(ag, cfg, env, out, table, table_cap);
        if (rc != RLT_OK && err && err_cap) snprintf(err, err_cap, "%s", ag->err.msg);
        if (ag->backend_open) rlt_backend_close(&ag->bk);
    } else if (err && err_cap) {
        snprintf(err, err_cap, "out of host memory");
    }
    rlt_mem_free(env);
    rlt_mem_free(ag);
    return rc;
}
