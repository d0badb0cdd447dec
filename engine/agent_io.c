/* agent_io.c: saving and loading an agent's state. The plan's entries are the named tensors: every entry
 * of a state region (params, adam_m, adam_v, target, counters) is written under its plan name, so the
 * format follows the plan with no per-algorithm code. Replay contents are not saved yet. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "checkpoint.h"

static int is_state_region(const rlt_plan_entry *en) {
    static const char *regions[] = {"params", "adam_m", "adam_v", "target", "counters"};
    for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
        if (strcmp(en->region, regions[i]) == 0) return 1;
    return 0;
}

static int entry_dtype(const rlt_plan_entry *en) { return strcmp(en->name, "counters") == 0 ? RLT_DTYPE_I64 : RLT_DTYPE_F32; }

static void *entry_ptr(const rlt_agent *ag, const rlt_plan_entry *en) {
    return (unsigned char *)ag->plan.base[en->location] + en->offset;
}

static int agent_meta(const rlt_agent *ag, char *meta, size_t cap) {
    return snprintf(meta, cap, "algo: %s\nobs_dim: %d\nact_dim: %d\nparams: %llu\nenv_steps: %lld\nupdates: %lld\n",
                    ag->cfg.algo, ag->obs_dim, ag->act_dim, (unsigned long long)ag->algo->param_count(ag),
                    (long long)ag->env_steps, (long long)ag->updates);
}

int rlt_agent_save(rlt_agent *ag, const char *path) {
    if (!ag || !path) return RLT_EINVAL;
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_save on an agent whose init failed");
    char meta[512];
    int mlen = agent_meta(ag, meta, sizeof meta);
    ckpt_writer *w = &ag->ckpt_w;
    RLT_TRY(ckpt_writer_open(w, &ag->err, path, meta, (size_t)mlen));
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        int rc = agent_fetch(ag, ag->io_stage, entry_ptr(ag, en), en->bytes);
        if (rc == RLT_OK && strcmp(en->name, "counters") == 0) ((int64_t *)ag->io_stage)[RLT_CTR_ENV_STEPS] = ag->env_steps;
        int dt = entry_dtype(en);
        int64_t shape[1] = {(int64_t)(en->bytes / (dt == RLT_DTYPE_I64 ? 8 : 4))};
        if (rc == RLT_OK) rc = ckpt_writer_add(w, en->name, dt, 1, shape, ag->io_stage, en->bytes);
        if (rc != RLT_OK) {
            ckpt_writer_abort(w);
            return rc;
        }
    }
    return ckpt_writer_close(w);
}

int rlt_agent_load(rlt_agent *ag, const char *path) {
    if (!ag || !path) return RLT_EINVAL;
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_load on an agent whose init failed");
    ckpt_reader *r = &ag->ckpt_r;
    RLT_TRY(ckpt_reader_open(r, &ag->err, path));
    int rc = RLT_OK;
    /* Check every tensor first, so a mismatched file changes nothing. */
    for (int32_t i = 0; rc == RLT_OK && i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        const ckpt_tensor_info *info;
        if (!is_state_region(en) || !en->bytes) continue;
        rc = ckpt_reader_find(r, en->name, &info);
        if (rc == RLT_OK && info->bytes != en->bytes)
            rc = rlt_err_set(&ag->err, RLT_ECHECKPOINT, __FILE__, __LINE__,
                             "%s: tensor '%s' has %llu bytes but this config needs %llu: the checkpoint was made with other sizes",
                             path, en->name, (unsigned long long)info->bytes, (unsigned long long)en->bytes);
    }
    for (int32_t i = 0; rc == RLT_OK && i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        rc = ckpt_reader_read(r, en->name, ag->io_stage, en->bytes);
        if (rc == RLT_OK && strcmp(en->name, "counters") == 0) {
            const int64_t *c = (const int64_t *)ag->io_stage;
            ag->env_steps = c[RLT_CTR_ENV_STEPS];
            ag->updates = c[RLT_CTR_UPDATE];
            /* The replay is not in the checkpoint: its size on the device must match the host's. */
            ((int64_t *)ag->io_stage)[RLT_CTR_REPLAY_SIZE] = ag->replay.size;
        }
        if (rc == RLT_OK) rc = agent_put(ag, entry_ptr(ag, en), ag->io_stage, en->bytes);
    }
    ckpt_reader_close(r);
    return rc;
}
