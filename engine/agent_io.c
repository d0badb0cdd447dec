/* agent_io.c: saving and loading an agent's whole state. The plan's entries are the named tensors: every
 * entry of a state region (params, adam_m, adam_v, target, counters) is written under its plan name, so
 * the format follows the plan with no per-algorithm code. The host side (counters, the exploration RNG,
 * replay positions) is one small tensor, "agent.host". With replay included, the filled rows of each replay
 * field follow, so a resumed run continues exactly. Device tensors stream through the host staging
 * block, so checkpoints of any size need no memory beyond the plan. */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "checkpoint.h"
#include "config_conv.h"
#include "config_schema.h"
#include "text.h"

/* "agent.network": the network's layout as text, so that a checkpoint made with another network is refused
 * by name even when the tensor sizes happen to agree (a conv layer's padding or stride can change the
 * layout and keep the byte count). A preset is written out as its layers: a config that lists the same
 * layers loads it. */
#define NETWORK_TEXT_BYTES 1024

/* Host state, saved as raw little-endian int64 words. */
typedef struct agent_host_state {
    int64_t env_steps, updates, replay_pos, replay_size, dqn_advances, dqn_prev_ended;
    uint64_t explore_seed, explore_ctr, explore_stream;
} agent_host_state;

static int is_state_region(const rlt_plan_entry *en) {
    static const char *regions[] = {"params", "adam_m", "adam_v", "target", "counters", "amp"};
    for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
        if (strcmp(en->region, regions[i]) == 0) return 1;
    return 0;
}

/* "hidden: [64, 64]": the config key's value as the config dump writes it, under a short label. */
static void key_text(rlt_text *o, const rlt_agent *ag, const char *label, const char *key) {
    char v[256];
    config_schema_format(config_schema_find(key, strlen(key)), &ag->cfg, v, sizeof v);
    rlt_text_add(o, "%s: %s", label, v);
}

static size_t network_text(const rlt_agent *ag, char *buf, size_t cap) {
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    if (ag->algo == &rlt_algo_dqn) {
        rlt_text_add(&o, "conv: ");
        config_conv_format_layers(&o, &ag->cfg.network.conv);
        rlt_text_add(&o, "; ");
        key_text(&o, ag, "hidden", "network.hidden");
    } else {
        key_text(&o, ag, "actor_hidden", "td3.actor_hidden");
        rlt_text_add(&o, "; ");
        key_text(&o, ag, "critic_hidden", "td3.critic_hidden");
    }
    return o.len;
}

/* Files from before "agent.network" have none: their tensor sizes are all that is checked. */
static int check_network(rlt_agent *ag, ckpt_reader *r, const char *path) {
    const ckpt_tensor_info *info;
    if (ckpt_reader_find(r, "agent.network", &info) != RLT_OK) {
        rlt_err_clear(&ag->err);
        return RLT_OK;
    }
    char want[NETWORK_TEXT_BYTES], have[NETWORK_TEXT_BYTES];
    size_t n = network_text(ag, want, sizeof want);
    if (info->bytes < sizeof have) {
        RLT_TRY(ckpt_reader_read(r, "agent.network", have, info->bytes));
        have[info->bytes] = '\0';
    } else {
        snprintf(have, sizeof have, "(%llu bytes of text)", (unsigned long long)info->bytes);
    }
    if (info->bytes != n || memcmp(have, want, n) != 0)
        RLT_FAIL(&ag->err, RLT_ECHECKPOINT,
                 "%s: the checkpoint's network is '%s' but this config builds '%s'; load it with the config it was "
                 "trained with (the run's out_dir/config.yaml)", path, have, want);
    return RLT_OK;
}

static void *entry_ptr(const rlt_agent *ag, const rlt_plan_entry *en) {
    return (unsigned char *)ag->plan.base[en->location] + en->offset;
}

int agent_meta(const rlt_agent *ag, char *meta, size_t cap) {
    return snprintf(meta, cap, "algo: %s\nobs_dim: %d\nact_dim: %d\nparams: %llu\nenv_steps: %lld\nupdates: %lld\n",
                    ag->cfg.algo, ag->obs_dim, ag->act_dim, (unsigned long long)ag->algo->param_count(ag),
                    (long long)ag->env_steps, (long long)ag->updates);
}

/* Streams `bytes` of device memory into the writer as one tensor. */
static int write_device(rlt_agent *ag, ckpt_writer *w, const char *name, int32_t dtype, const void *dev, uint64_t bytes,
                        int64_t rows) {
    int64_t shape[2] = {rows, (int64_t)(bytes / (uint64_t)(rows > 0 ? rows : 1) / ckpt_dtype_size(dtype))};
    if (rows == 0) shape[1] = 0;
    RLT_TRY(ckpt_writer_begin(w, name, dtype, 2, shape, bytes));
    for (uint64_t off = 0; off < bytes; off += ag->io_stage_bytes) {
        uint64_t k = bytes - off < ag->io_stage_bytes ? bytes - off : ag->io_stage_bytes;
        RLT_TRY(agent_fetch(ag, ag->io_stage, (const unsigned char *)dev + off, k));
        RLT_TRY(ckpt_writer_write(w, ag->io_stage, k));
    }
    return ckpt_writer_end(w);
}

static int read_device(rlt_agent *ag, ckpt_reader *r, const char *name, void *dev, uint64_t bytes) {
    for (uint64_t off = 0; off < bytes; off += ag->io_stage_bytes) {
        uint64_t k = bytes - off < ag->io_stage_bytes ? bytes - off : ag->io_stage_bytes;
        RLT_TRY(ckpt_reader_read_range(r, name, off, ag->io_stage, k));
        RLT_TRY(agent_put(ag, (unsigned char *)dev + off, ag->io_stage, k));
    }
    return RLT_OK;
}

int agent_write_state(rlt_agent *ag, ckpt_writer *w, int include_replay) {
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        /* The loss scaler's state is a small struct of mixed types: raw bytes. */
        int dt = strcmp(en->name, "counters") == 0 ? RLT_DTYPE_I64 : strcmp(en->name, "amp") == 0 ? RLT_DTYPE_U8 : RLT_DTYPE_F32;
        RLT_TRY(write_device(ag, w, en->name, dt, entry_ptr(ag, en), en->bytes, 1));
    }
    agent_host_state h = {ag->env_steps, ag->updates, ag->replay.pos, ag->replay.size, ag->dqn.advances,
                          ag->dqn.prev_ended, ag->explore_rng.seed, ag->explore_rng.ctr, ag->explore_rng.stream};
    int64_t hs[1] = {(int64_t)(sizeof h / 8)};
    RLT_TRY(ckpt_writer_add(w, "agent.host", RLT_DTYPE_I64, 1, hs, &h, sizeof h));
    char net[NETWORK_TEXT_BYTES];
    size_t nl = network_text(ag, net, sizeof net);
    if (nl >= sizeof net) RLT_FAIL(&ag->err, RLT_EINVAL, "the network's description is longer than %d bytes", NETWORK_TEXT_BYTES);
    int64_t ns[1] = {(int64_t)nl};
    RLT_TRY(ckpt_writer_add(w, "agent.network", RLT_DTYPE_U8, 1, ns, net, nl));
    if (!include_replay) return RLT_OK;
    for (int32_t f = 0; f < ag->replay.nf; f++) {
        char name[64];
        snprintf(name, sizeof name, "replay.%s", ag->replay.f[f].name);
        /* Each field under its stored element type: [rows, elements], fp16 observations as f16. */
        RLT_TRY(write_device(ag, w, name, ag->replay.f[f].dtype, ag->replay.f[f].data,
                             (uint64_t)ag->replay.size * ag->replay.f[f].row_bytes, ag->replay.size));
    }
    return RLT_OK;
}

int agent_read_state(rlt_agent *ag, ckpt_reader *r, const char *path) {
    rlt_err *e = &ag->err;
    const ckpt_tensor_info *info;
    agent_host_state h;
    /* Check every tensor first, so a mismatched file changes nothing; the network by its description first,
     * which names what differs. */
    RLT_TRY(check_network(ag, r, path));
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        /* A checkpoint from an fp32 or bf16 run has no loss scaler: an fp16 run resumed from it starts its own. */
        if (strcmp(en->name, "amp") == 0 && ckpt_reader_find(r, en->name, &info) != RLT_OK) {
            rlt_err_clear(e);
            continue;
        }
        RLT_TRY(ckpt_reader_find(r, en->name, &info));
        if (info->bytes != en->bytes)
            RLT_FAIL(e, RLT_ECHECKPOINT,
                     "%s: tensor '%s' has %llu bytes but this config needs %llu: the checkpoint was made with other sizes",
                     path, en->name, (unsigned long long)info->bytes, (unsigned long long)en->bytes);
    }
    RLT_TRY(ckpt_reader_read(r, "agent.host", &h, sizeof h));
    if (h.replay_size < 0 || h.replay_size > ag->replay.capacity || h.replay_pos < 0 || h.replay_pos >= ag->replay.capacity)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: replay position %lld / size %lld do not fit this config's capacity %lld", path,
                 (long long)h.replay_pos, (long long)h.replay_size, (long long)ag->replay.capacity);
    char name[64];
    snprintf(name, sizeof name, "replay.%s", ag->replay.f[0].name);
    int with_replay = ckpt_reader_find(r, name, &info) == RLT_OK;
    rlt_err_clear(e);
    for (int32_t f = 0; with_replay && f < ag->replay.nf; f++) {
        const rlt_replay_field *fd = &ag->replay.f[f];
        snprintf(name, sizeof name, "replay.%s", fd->name);
        RLT_TRY(ckpt_reader_find(r, name, &info));
        /* Files from before typed replay tensors hold every field as raw u8 bytes: those can only be rows of
         * the field's full type (fp16 / bf16 storage did not exist), so they load when the sizes agree. */
        int legacy = info->dtype == RLT_DTYPE_U8 && fd->dtype != RLT_DTYPE_F16 && fd->dtype != RLT_DTYPE_BF16;
        if (info->dtype != fd->dtype && !legacy) {
            if (fd->is_obs)
                RLT_FAIL(e, RLT_ECHECKPOINT,
                         "%s: replay field '%s' holds %s observations but this config stores them as %s "
                         "(replay.obs_dtype: %s); set replay.obs_dtype: %s to resume from this checkpoint", path,
                         fd->name, replay_dtype_name(info->dtype), replay_dtype_name(fd->dtype), ag->cfg.replay.obs_dtype,
                         replay_dtype_name(info->dtype));
            RLT_FAIL(e, RLT_ECHECKPOINT, "%s: replay field '%s' has dtype %s but this config stores %s", path, fd->name,
                     ckpt_dtype_name(info->dtype), ckpt_dtype_name(fd->dtype));
        }
        if (info->bytes != (uint64_t)h.replay_size * ag->replay.f[f].row_bytes)
            RLT_FAIL(e, RLT_ECHECKPOINT, "%s: replay field '%s' has %llu bytes, expected %lld rows of %llu", path,
                     ag->replay.f[f].name, (unsigned long long)info->bytes, (long long)h.replay_size,
                     (unsigned long long)ag->replay.f[f].row_bytes);
    }
    /* Everything matches: load. */
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        if (strcmp(en->name, "amp") == 0 && ckpt_reader_find(r, en->name, &info) != RLT_OK) {
            rlt_err_clear(e);
            continue;
        }
        RLT_TRY(read_device(ag, r, en->name, entry_ptr(ag, en), en->bytes));
    }
    /* The 16-bit compute copies are not saved: they follow from the masters just loaded. */
    if (ag->algo == &rlt_algo_td3)
        RLT_TRY(agent_refresh_lp(ag, ag->td3.params, ag->td3.params_lp, ag->td3.target, ag->td3.target_lp, ag->td3.n_total));
    else
        RLT_TRY(agent_refresh_lp(ag, ag->dqn.params, ag->dqn.params_lp, ag->dqn.target, ag->dqn.target_lp, ag->dqn.n_params));
    ag->env_steps = h.env_steps;
    ag->updates = h.updates;
    ag->explore_rng.seed = h.explore_seed;
    ag->explore_rng.ctr = h.explore_ctr;
    ag->explore_rng.stream = (uint32_t)h.explore_stream;
    if (with_replay) {
        for (int32_t f = 0; f < ag->replay.nf; f++) {
            snprintf(name, sizeof name, "replay.%s", ag->replay.f[f].name);
            RLT_TRY(read_device(ag, r, name, ag->replay.f[f].data, (uint64_t)h.replay_size * ag->replay.f[f].row_bytes));
        }
        ag->replay.pos = h.replay_pos;
        ag->dqn.advances = h.dqn_advances;
        ag->dqn.prev_ended = (int32_t)h.dqn_prev_ended;
        RLT_TRY(replay_set_size(&ag->replay, &ag->bk, h.replay_size));
    } else {
        /* Without replay contents the device's replay size must stay the host's. */
        RLT_TRY(replay_set_size(&ag->replay, &ag->bk, ag->replay.size));
    }
    return ag->bk.ops->sync(&ag->bk);
}

int rlt_agent_save(rlt_agent *ag, const char *path) {
    if (!ag || !path) return RLT_EINVAL;
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_save on an agent whose init failed");
    char meta[512];
    int mlen = agent_meta(ag, meta, sizeof meta);
    ckpt_writer *w = &ag->ckpt_w;
    RLT_TRY(ckpt_writer_open(w, &ag->err, path, meta, (size_t)mlen));
    int rc = agent_write_state(ag, w, ag->cfg.checkpoint.include_replay);
    if (rc != RLT_OK) {
        ckpt_writer_abort(w);
        return rc;
    }
    return ckpt_writer_close(w);
}

int rlt_agent_load(rlt_agent *ag, const char *path) {
    if (!ag || !path) return RLT_EINVAL;
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_load on an agent whose init failed");
    ckpt_reader *r = &ag->ckpt_r;
    RLT_TRY(ckpt_reader_open(r, &ag->err, path));
    int rc = agent_read_state(ag, r, path);
    ckpt_reader_close(r);
    return rc;
}
