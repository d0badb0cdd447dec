/* planner.c: answers "what fits?" before a run (rltrain plan): the configured plan, the largest batch
 * size and replay capacity that fit the budget (and the device's free memory), the need with both at
 * their smallest, and the fewest micro-batches that make the configured batch fit; as a struct
 * (rlt_plan_fit) or a JSON document (rlt_plan_fit_json, written by plan_json.c). Every answer comes from
 * building real plans for the trainer's environment on the configured device; nothing is reserved. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "backend_registry.h"
#include "env.h"
#include "mem.h"
#include "plan_json.h"
#include "seed_batch.h"

/* The configured plan as the table shows it, kept while the probes rebuild the agent's plan. */
typedef struct plan_snapshot {
    rlt_plan plan;
    rlt_plan_summary summary;
} plan_snapshot;

/* The plan's need for a modified config; *fits says whether it fits the limit. */
static int probe(rlt_agent *ag, uint64_t limit, int *fits) {
    RLT_TRY(agent_plan_current(ag));
    *fits = agent_plan_need(ag) <= limit;
    return RLT_OK;
}

/* The smallest whole-MiB budget that holds need; 0 when the device's free memory (or on the CPU, the host's
 * memory limit) does not, as then no budget helps. */
static uint64_t budget_to_fit(const rlt_agent *ag, uint64_t need) {
    if (ag->summary.device_total && need > ag->summary.device_free) return 0;
    const rlt_plan *p = &ag->plan;
    if (p->device_is_host && p->host.avail != UINT64_MAX &&
        (p->host.avail < p->host_overhead || need > p->host.avail - p->host_overhead))
        return 0;
    return (need + (1u << 20) - 1) >> 20 << 20;
}

static int plan_fit(rlt_agent *ag, const rlt_config *cfg, const rlt_env *env, rlt_fit_report *out, char *table,
                    size_t table_cap, plan_snapshot *snap) {
    memset(out, 0, sizeof *out);
    ag->cfg = *cfg;
    RLT_TRY(agent_prepare(ag, &env->obs_space, &env->act_space));
    uint64_t limit = ag->summary.budget_bytes;
    if (ag->summary.device_total && ag->summary.device_free < limit) limit = ag->summary.device_free;
    /* memory.process_budget_mb: the arena gets what the measured context and handles leave of it. */
    uint64_t pb = ag->summary.process_budget_bytes, ctx = ag->summary.context_bytes;
    if (pb && (pb > ctx ? pb - ctx : 0) < limit) limit = pb > ctx ? pb - ctx : 0;
    /* On the CPU the arena is host memory: the host's limit (ulimit -v/-d, the memory cgroup) caps it too. */
    const rlt_plan *p = &ag->plan;
    if (p->device_is_host && p->host.avail != UINT64_MAX) {
        uint64_t room = p->host.avail > p->host_overhead ? p->host.avail - p->host_overhead : 0;
        if (room < limit) limit = room;
    }
    out->limit_bytes = limit;
    out->need_bytes = agent_plan_need(ag);
    out->fits = out->need_bytes <= limit;
    if (table && table_cap) plan_format(&ag->plan, &ag->summary, table, table_cap);
    /* The probes below rebuild the agent's plan: keep the configured one for the JSON document. */
    if (snap) {
        snap->plan = ag->plan;
        snap->summary = ag->summary;
    }
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
    int64_t min_cap = ag->algo->min_replay_capacity > 1 ? ag->algo->min_replay_capacity : 1;
    while (clo < chi) {
        int64_t mid = clo + (chi - clo + 1) / 2;
        ag->cfg.replay.capacity = mid < min_cap ? min_cap : mid;
        RLT_TRY(probe(ag, limit, &fits));
        if (fits) clo = mid;
        else chi = mid - 1;
    }
    out->max_replay_capacity = clo < min_cap ? 0 : clo;

    /* The floor of those two levers: the smallest batch and replay together. When even this does not fit,
     * only a larger budget or smaller networks help. */
    ag->cfg = *cfg;
    ag->cfg.train.grad_accum_steps = 1;
    ag->cfg.train.batch_size = 1;
    ag->cfg.replay.capacity = min_cap;
    RLT_TRY(probe(ag, limit, &fits));
    out->min_need_bytes = agent_plan_need(ag);
    out->min_replay_capacity = min_cap;
    out->fit_budget_bytes = budget_to_fit(ag, out->need_bytes);
    out->min_fit_budget_bytes = budget_to_fit(ag, out->min_need_bytes);

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

static int plan_fit_run(const rlt_config *cfg, rlt_fit_report *out, char *table, size_t table_cap, plan_snapshot *snap,
                        char *err, size_t err_cap) {
    if (!cfg || !out) return RLT_EINVAL;
    if (table && table_cap) table[0] = '\0';
    /* A data-parallel run plans per device: rank 0's share (every rank's plan is the same on equal devices). */
    rlt_config *rank_cfg = NULL;
    if (config_is_data_parallel(cfg)) {
        rank_cfg = rlt_mem_alloc(sizeof *rank_cfg, 64);
        if (!rank_cfg) return RLT_ENOMEM;
        config_for_rank(cfg, 0, rank_cfg);
        cfg = rank_cfg;
    }
    rlt_agent *ag = agent_alloc(cfg);
    rlt_env *env = rlt_mem_alloc(sizeof *env, 64);
    int rc = RLT_ENOMEM;
    if (ag && env) {
        rc = rlt_env_make(env, &ag->err, cfg->env.name, cfg->seed, RLT_STREAM_ENV, cfg->env.max_episode_steps);
        if (rc == RLT_OK) rc = plan_fit(ag, cfg, env, out, table, table_cap, snap);
        if (rc != RLT_OK && err && err_cap) snprintf(err, err_cap, "%s", ag->err.msg);
        if (ag->backend_open) rlt_backend_close(&ag->bk);
    } else if (err && err_cap) {
        snprintf(err, err_cap, "out of host memory");
    }
    rlt_mem_free(env);
    rlt_mem_free(ag);
    rlt_mem_free(rank_cfg);
    return rc;
}

int rlt_plan_fit(const rlt_config *cfg, rlt_fit_report *out, char *table, size_t table_cap, char *err, size_t err_cap) {
    return plan_fit_run(cfg, out, table, table_cap, NULL, err, err_cap);
}

int rlt_plan_fit_json(const rlt_config *cfg, char *buf, size_t cap, size_t *len, int32_t *fits, char *err,
                      size_t err_cap) {
    if (len) *len = 0;
    if (fits) *fits = 0;
    if (buf && cap) buf[0] = '\0';
    if (!cfg || (!buf && cap)) return RLT_EINVAL;
    plan_snapshot *snap = rlt_mem_alloc(sizeof *snap, 64);
    if (!snap) {
        if (err && err_cap) snprintf(err, err_cap, "out of host memory");
        return RLT_ENOMEM;
    }
    rlt_fit_report f;
    int rc = plan_fit_run(cfg, &f, NULL, 0, snap, err, err_cap);
    if (rc == RLT_OK) {
        size_t need = plan_json_format(&snap->plan, &snap->summary, &f, cfg, buf, cap);
        if (len) *len = need;
        if (fits) *fits = f.fits;
        if (need >= cap && (buf || cap)) { /* buf NULL and cap 0 only ask for the length */
            if (buf && cap) buf[0] = '\0';
            if (err && err_cap) snprintf(err, err_cap, "rlt_plan_fit_json: the document needs %zu bytes, the buffer has %zu", need + 1, cap);
            rc = RLT_EINVAL;
        }
    }
    rlt_mem_free(snap);
    return rc;
}

/* The budgeted arena of one agent of cfg as it would plan (nothing reserved). */
static int plan_need(const rlt_config *cfg, uint64_t *need, char *err, size_t err_cap) {
    rlt_agent *ag = agent_alloc(cfg);
    rlt_env *env = rlt_mem_alloc(sizeof *env, 64);
    int rc = RLT_ENOMEM;
    if (ag && env) {
        rc = rlt_env_make(env, &ag->err, cfg->env.name, cfg->seed, RLT_STREAM_ENV, cfg->env.max_episode_steps);
        if (rc == RLT_OK) {
            ag->cfg = *cfg;
            rc = agent_prepare(ag, &env->obs_space, &env->act_space);
        }
        if (rc == RLT_OK) *need = agent_plan_need(ag);
        else if (err && err_cap) snprintf(err, err_cap, "%s", ag->err.msg);
        if (ag->backend_open) rlt_backend_close(&ag->bk);
    } else if (err && err_cap) {
        snprintf(err, err_cap, "out of host memory");
    }
    rlt_mem_free(env);
    rlt_mem_free(ag);
    return rc;
}

/* Member k of cfg's group of n as seed_group.c makes it (seed_batch_member) into *c: 1 when it is batched. */
static int plan_member(const rlt_config *cfg, int32_t n, int32_t k, rlt_config *c) {
    const char *why = "";
    *c = *cfg;
    return n > 1 && seed_batch_member(cfg, n, k, config_is_data_parallel(cfg), !config_population_unbatched(cfg, &why), c);
}

/* Members 0 and 1 of c's group as seed_group.c makes them (c is scratch for each): the first leads a batched graph
 * where the group has one, the second stands for every other (with seeds spread over d devices member d, the first
 * that leads none); *leads as rlt_plan_group_leads. */
static int plan_group_at(const rlt_config *cfg, rlt_config *c, uint64_t *first, uint64_t *each, int32_t *leads,
                         char *err, size_t err_cap) {
    const int32_t n = rlt_group_count(cfg), nb = seed_batch_count(cfg, n, config_is_data_parallel(cfg));
    const int32_t other = nb > 1 && n > nb ? nb : 1;
    plan_member(cfg, n, other, c);
    int rc = plan_need(c, each, err, err_cap);
    *first = *each;
    if (rc == RLT_OK && plan_member(cfg, n, 0, c)) rc = plan_need(c, first, err, err_cap);
    *leads = 0;
    for (int32_t k = 0; k < nb && k < n; k++) *leads += plan_member(cfg, n, k, c) && c->arena_slot == 0;
    if (*leads < 1) *leads = 1;
    return rc;
}

/* cfg's group as rlt_group_init makes it: with train.seed_batches 0, half as many batches a GPU (seed_batch_fewer)
 * while the batches' leads and the other seeds exceed memory.budget_mb (the first of group_fit's checks, which
 * retries the same way). */
static int plan_group_resolve(const rlt_config *cfg, uint64_t *first, uint64_t *each, int32_t *leads, int32_t *per,
                              char *err, size_t err_cap) {
    rlt_config *g = rlt_mem_alloc(sizeof *g, 64), *c = rlt_mem_alloc(sizeof *c, 64);
    int rc = g && c ? RLT_OK : RLT_ENOMEM;
    *leads = 1;
    if (rc == RLT_OK) *g = *cfg;
    const int32_t n = rlt_group_count(cfg);
    const uint64_t budget = (uint64_t)(cfg->memory.budget_mb * 1048576.0);
    while (rc == RLT_OK) {
        rc = plan_group_at(g, c, first, each, leads, err, err_cap);
        if (rc != RLT_OK || *first <= *each || *leads <= 1) break;
        const uint64_t all = (uint64_t)(*leads - 1) * (*first - *each) + *first + (uint64_t)(n - 1) * *each;
        if (all <= budget || !seed_batch_fewer(g, n, config_is_data_parallel(g), cfg->train.seed_batches == 0)) break;
    }
    if (rc == RLT_ENOMEM && err && err_cap) snprintf(err, err_cap, "out of host memory");
    /* A lead that plans no more than another seed counts once; a config that does not plan (rc) keeps
     * seed_batch_count's leads. */
    if (rc == RLT_OK && *first <= *each) *leads = 1;
    if (per && g) *per = seed_batch_per_device(g, n, config_is_data_parallel(g));
    rlt_mem_free(c);
    rlt_mem_free(g);
    return rc;
}

int rlt_plan_group(const rlt_config *cfg, uint64_t *first, uint64_t *each, char *err, size_t err_cap) {
    if (!cfg || !first || !each) return RLT_EINVAL;
    *first = *each = 0;
    int32_t leads = 1;
    return plan_group_resolve(cfg, first, each, &leads, NULL, err, err_cap);
}

int32_t plan_group_batches(const rlt_config *cfg) {
    uint64_t first = 0, each = 0;
    int32_t leads = 1, per = 1;
    return plan_group_resolve(cfg, &first, &each, &leads, &per, NULL, 0) == RLT_ENOMEM ? 1 : per;
}

int32_t rlt_plan_group_leads(const rlt_config *cfg) {
    if (!cfg) return 1;
    uint64_t first = 0, each = 0;
    int32_t leads = 1;
    return plan_group_resolve(cfg, &first, &each, &leads, NULL, NULL, 0) == RLT_ENOMEM ? 1 : leads;
}
