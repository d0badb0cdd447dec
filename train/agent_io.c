/* agent_io.c: saving and loading an agent's whole state. The plan's entries are the named tensors: every
 * entry of a state region (params, adam_m, adam_v, target, counters) is written under its plan name, so
 * the format follows the plan with no per-algorithm code. The host side (counters, the exploration RNG,
 * replay positions) is one small tensor, "agent.host". With replay included, the filled rows of each replay
 * field follow, so a resumed run continues exactly. Device tensors stream through the host staging
 * block, so checkpoints of any size need no memory beyond the plan. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "finite.h"
#include "agent.h"
#include "checkpoint.h"
#include "text.h"

/* "agent.network": the network's layout as text, so that a checkpoint made with another network is refused
 * by name even when the tensor sizes happen to agree (a conv layer's padding or stride can change the
 * layout and keep the byte count). A preset is written out as its layers: a config that lists the same
 * layers loads it. */
#define NETWORK_TEXT_BYTES 4096

/* Host state, saved as raw little-endian int64 words; words 4 and 5 are the algorithm's (host_save). */
typedef struct agent_host_state {
    int64_t env_steps, updates, replay_pos, replay_size, algo[RLT_ALGO_HOST_WORDS];
    uint64_t explore_seed, explore_ctr, explore_stream;
} agent_host_state;

static int is_state_region(const rlt_plan_entry *en) {
    static const char *regions[] = {"params", "adam_m", "adam_v", "target", "counters", "amp"};
    for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
        if (strcmp(en->region, regions[i]) == 0) return 1;
    return 0;
}

/* ---- checkpoints from before the padded parameter layout ------------------------------------------- */
/* Parameter tensors (params, adam_m, adam_v, target) start each block on RLT_PARAM_ALIGN floats
 * (engine/plan.h). Files written before that hold the same blocks back to back; the algorithm lists the
 * blocks (rlt_algo.param_blocks), so such a file is recognised by its size and spread into the padded layout,
 * zeros in the gaps, as it is loaded. */
#define PACKED_MAX_BLOCKS 512

typedef struct packed_layout {
    int32_t n;
    uint64_t packed, padded; /* floats of one tensor in each layout */
    uint64_t size[PACKED_MAX_BLOCKS];
} packed_layout;

/* 1 when the algorithm lists its blocks and the padding changes the layout. */
static int packed_layout_init(const rlt_agent *ag, packed_layout *L) {
    L->n = ag->algo->param_blocks ? ag->algo->param_blocks(ag, L->size, PACKED_MAX_BLOCKS) : -1;
    L->packed = L->padded = 0;
    for (int32_t i = 0; i < L->n; i++) {
        L->packed += L->size[i];
        L->padded += plan_param_align(L->size[i]);
    }
    return L->n > 0 && L->padded == ag->algo->param_count(ag) && L->packed != L->padded;
}

static int is_param_tensor(const rlt_plan_entry *en) {
    return strcmp(en->region, "params") == 0 || strcmp(en->region, "adam_m") == 0 ||
           strcmp(en->region, "adam_v") == 0 || strcmp(en->region, "target") == 0;
}

/* Reads a packed tensor whole into io_stage and moves each block to its padded place there, the last block
 * first: a block's padded offset is never below its packed one, so nothing is overwritten before it moves. */
static int read_packed(rlt_agent *ag, ckpt_reader *r, const char *name, void *dev, const packed_layout *L) {
    float *h = ag->io_stage;
    RLT_TRY(ckpt_reader_read(r, name, h, L->packed * 4));
    uint64_t src = L->packed, end = L->padded;
    for (int32_t i = L->n - 1; i >= 0; i--) {
        uint64_t k = L->size[i], dst = end - plan_param_align(k);
        src -= k;
        memmove(h + dst, h + src, k * 4);
        memset(h + dst + k, 0, (end - dst - k) * 4);
        end = dst;
    }
    return agent_put(ag, dev, h, L->padded * 4);
}

/* The algorithm describes its networks (rlt_algo.network_text). */
static size_t network_text(const rlt_agent *ag, char *buf, size_t cap) {
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    ag->algo->network_text(ag, &o);
    return o.len;
}

/* Files from before "agent.network" have none: their tensor sizes are all that is checked. */
static int check_network(rlt_agent *ag, ckpt_reader *r, const char *path) {
    const ckpt_tensor_info *info;
    if (ckpt_reader_find(r, "agent.network", &info) != RLT_OK) {
        rlt_err_clear(&ag->err);
        return RLT_OK;
    }
    const int64_t nshape[1] = {(int64_t)info->bytes};
    RLT_TRY(ckpt_reader_expect(r, "agent.network", RLT_DTYPE_U8, 1, nshape));
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

/* A state tensor's dtype in a checkpoint. The loss scaler's state is a small struct of mixed types: raw bytes. */
static int32_t state_dtype(const rlt_plan_entry *en) {
    return strcmp(en->name, "counters") == 0 ? RLT_DTYPE_I64 : strcmp(en->name, "amp") == 0 ? RLT_DTYPE_U8 : RLT_DTYPE_F32;
}

/* ---- value checks: a checkpoint is untrusted input ---------------------------------------------- */
/* The CRCs only say that the file is what some writer wrote. Every value is also checked against what the
 * engine could have written, before anything is loaded: a replay `next` slot or action index out of range
 * would index memory outside the arena, a NaN parameter or a negative Adam second moment would poison
 * every update after it, and a negative step counter would turn Adam's bias correction into NaN. The
 * checks stream each tensor through the first half of io_stage (the second half carries the replay's
 * `valid` bytes beside the rows they gate), so they need no memory beyond the plan. */

/* A parameter-shaped fp32 tensor (params, adam_m, adam_v, target): every value finite, and Adam's second
 * moment (an average of squares) not negative either. */
static int check_f32_tensor(rlt_agent *ag, ckpt_reader *r, const char *path, const char *name, uint64_t bytes,
                            int nonneg) {
    uint64_t per = ag->io_stage_bytes / 2 / 4;
    const float *x = ag->io_stage;
    for (uint64_t first = 0; first < bytes / 4; first += per) {
        uint64_t n = bytes / 4 - first < per ? bytes / 4 - first : per;
        RLT_TRY(ckpt_reader_read_range(r, name, first * 4, ag->io_stage, n * 4));
        int64_t bad = rlt_first_nonfinite(x, n);
        if (bad >= 0)
            RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor '%s' element %llu is %g: a checkpoint holds finite values "
                     "only (was it written by a run that diverged, or altered?)", path, name,
                     (unsigned long long)(first + (uint64_t)bad), x[bad]);
        for (uint64_t i = 0; nonneg && i < n; i++)
            if (x[i] < 0.0f)
                RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor '%s' element %llu is %g: Adam's second moment is an "
                         "average of squares and never negative", path, name, (unsigned long long)(first + i), x[i]);
    }
    return RLT_OK;
}

/* The device counters: no step count is negative (Adam's bias correction raises beta to it), and the
 * update counter is the host's. */
static int check_counters(rlt_agent *ag, ckpt_reader *r, const char *path, const agent_host_state *h) {
    int64_t c[RLT_CTR_COUNT];
    RLT_TRY(ckpt_reader_read(r, "counters", c, sizeof c));
    static const char *names[RLT_CTR_COUNT] = {"updates", "critic steps", "actor steps", "replay size", "env steps",
                                               "unused", "unused", "unused"};
    for (int i = 0; i < RLT_CTR_COUNT; i++)
        if (c[i] < 0)
            RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor 'counters' element %d (%s) is %lld: counters are never "
                     "negative", path, i, names[i], (long long)c[i]);
    if (c[RLT_CTR_UPDATE] != h->updates)
        RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor 'counters' element %d (updates) is %lld but agent.host counts "
                 "%lld updates", path, RLT_CTR_UPDATE, (long long)c[RLT_CTR_UPDATE], (long long)h->updates);
    return RLT_OK;
}

/* fp16's loss scaler: a positive finite scale, flags 0 or 1, counts not negative. */
static int check_amp(rlt_agent *ag, ckpt_reader *r, const char *path) {
    rlt_amp_state a;
    RLT_TRY(ckpt_reader_read(r, "amp", &a, sizeof a));
    if (!isfinite(a.scale) || !(a.scale > 0.0f))
        RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor 'amp': the loss scale is %g, expected a positive finite value",
                 path, a.scale);
    if (a.good_steps < 0 || (a.found_inf != 0 && a.found_inf != 1) || a.skipped < 0)
        RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor 'amp': good_steps %d, found_inf %d, skipped %lld: expected "
                 "counts >= 0 and a flag of 0 or 1", path, (int)a.good_steps, (int)a.found_inf, (long long)a.skipped);
    return RLT_OK;
}

/* The replay's `valid` field (a ring of frames has one, e.g. agents/dqn.h), or -1. */
static int32_t replay_valid_field(const rlt_agent *ag) {
    for (int32_t f = 0; f < ag->replay.nf; f++)
        if (strcmp(ag->replay.f[f].name, "valid") == 0) return f;
    return -1;
}

/* The host words: counters not negative, the exploration stream the agent's own, and the replay positions
 * consistent with each other (capacity was checked already). */
static int check_host(rlt_agent *ag, const char *path, const agent_host_state *h, int with_replay) {
    rlt_err *e = &ag->err;
    if (h->env_steps < 0 || h->updates < 0)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': env_steps %lld, updates %lld: counters are never negative",
                 path, (long long)h->env_steps, (long long)h->updates);
    const uint32_t explore = rlt_rank_stream(RLT_STREAM_EXPLORE, ag->cfg.rank);
    if (h->explore_stream != explore)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': the exploration RNG's stream is %llu, the agent's is %u%s",
                 path, (unsigned long long)h->explore_stream, (unsigned)explore,
                 ag->cfg.n_ranks > 1 ? " (each rank of a data-parallel run resumes from its own out_dir/rank_K/)" : "");
    /* The algorithm's own words, and its replay's positions, are its to check (rlt_algo.host_check). */
    if (ag->algo->host_check) return ag->algo->host_check(ag, path, h->algo, h->replay_pos, h->replay_size, with_replay);
    if (!with_replay) return RLT_OK;
    if (h->replay_pos > h->replay_size) {
        /* A ring filled in order: the position is the size until the ring is full, then anywhere in it. */
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': replay position %lld is beyond the %lld filled rows",
                 path, (long long)h->replay_pos, (long long)h->replay_size);
    }
    return RLT_OK;
}

/* What each replay field may hold. Observations and rewards: finite and at most RLT_VALUE_ABS_MAX in magnitude
 * (what rlt_agent_observe accepts) when stored as fp32; fp16 / bf16 only not NaN,
 * since a finite fp32 observation beyond fp16's range rounds to inf by design; uint8 anything. */
enum { RULE_NONE, RULE_FINITE, RULE_NOT_NAN, RULE_UNIT, RULE_FLAG, RULE_BYTE01, RULE_INDEX, RULE_NEXT };

static int replay_rule(const rlt_replay_field *fd) {
    if (fd->is_obs) return fd->dtype == RLT_DTYPE_F32 ? RULE_FINITE : fd->dtype == RLT_DTYPE_U8 ? RULE_NONE : RULE_NOT_NAN;
    if (strcmp(fd->name, "valid") == 0) return RULE_BYTE01;
    if (strcmp(fd->name, "next") == 0) return RULE_NEXT;
    if (strcmp(fd->name, "terminated") == 0) return RULE_FLAG;
    /* Discrete actions are indices; continuous ones are stored normalised to [-1, 1] (agents/td3.c). */
    if (strcmp(fd->name, "action") == 0) return fd->dtype == RLT_DTYPE_I32 ? RULE_INDEX : RULE_UNIT;
    return fd->dtype == RLT_DTYPE_F32 ? RULE_FINITE : RULE_NONE;
}

static int half_is_nan(uint16_t h, int32_t dtype) {
    return dtype == RLT_DTYPE_F16 ? (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) : (h & 0x7f80u) == 0x7f80u && (h & 0x007fu);
}

/* One replay field's `rows` rows. With a `valid` field (DQN), the per-transition fields are checked only
 * on rows that start a transition: the others are next-frame slots whose action, reward and `next` were
 * never written (on a GPU they hold whatever the arena held). Frames are checked on every row, since any
 * filled row can be a transition's next observation. */
static int check_replay_field(rlt_agent *ag, ckpt_reader *r, const char *path, int32_t f, int32_t valid_f, int64_t rows) {
    const rlt_replay_field *fd = &ag->replay.f[f];
    int rule = replay_rule(fd);
    if (rule == RULE_NONE || rows == 0 || fd->elems == 0) return RLT_OK;
    int gated = valid_f >= 0 && f != valid_f && !fd->is_obs;
    char name[64], vname[64];
    snprintf(name, sizeof name, "replay.%s", fd->name);
    if (gated) snprintf(vname, sizeof vname, "replay.%s", ag->replay.f[valid_f].name);
    uint64_t half = ag->io_stage_bytes / 2, esize = ckpt_dtype_size(fd->dtype), total = (uint64_t)rows * fd->elems;
    uint64_t per = half / esize;
    const unsigned char *buf = (const unsigned char *)ag->io_stage, *vbuf = buf + half;
    int32_t n_actions = ag->act_space.kind == RLT_SPACE_DISCRETE ? ag->act_space.n : 0;
    for (uint64_t first = 0; first < total; first += per) {
        uint64_t n = total - first < per ? total - first : per;
        RLT_TRY(ckpt_reader_read_range(r, name, first * esize, ag->io_stage, n * esize));
        uint64_t r0 = first / fd->elems;
        /* The valid bytes of the rows this chunk covers (at most n <= half of them). */
        if (gated) RLT_TRY(ckpt_reader_read_range(r, vname, r0, (unsigned char *)vbuf, (first + n - 1) / fd->elems + 1 - r0));
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = first + i, row = k / fd->elems, el = k % fd->elems;
            if (gated && vbuf[row - r0] == 0) continue;
            const char *why = NULL;
            double v = 0;
            if (esize == 4 && fd->dtype == RLT_DTYPE_F32) {
                float x;
                memcpy(&x, buf + i * 4, 4);
                v = x;
                if (!isfinite(x)) why = "not finite";
                else if (rule == RULE_FINITE && !(fabsf(x) <= RLT_VALUE_ABS_MAX))
                    why = "beyond 1e18 in magnitude, which no observation or reward can be (base/finite.h)";
                else if (rule == RULE_UNIT && (x < -1.0f || x > 1.0f)) why = "outside [-1, 1], where actions are stored";
                else if (rule == RULE_FLAG && x != 0.0f && x != 1.0f) why = "not a 0/1 flag";
            } else if (rule == RULE_NOT_NAN) {
                uint16_t h;
                memcpy(&h, buf + i * 2, 2);
                v = NAN;
                if (half_is_nan(h, fd->dtype)) why = "NaN";
            } else if (rule == RULE_BYTE01) {
                v = buf[i];
                if (buf[i] > 1) why = "not 0 or 1";
            } else if (rule == RULE_INDEX || rule == RULE_NEXT) {
                int32_t x;
                memcpy(&x, buf + i * 4, 4);
                v = x;
                if (rule == RULE_INDEX && (x < 0 || x >= n_actions)) why = "not an action of this Discrete space";
                /* A transition's next frame is in the following slot, or in slot 0 for the last slot of a full
                 * ring; either way a filled one. */
                if (rule == RULE_NEXT && !((int64_t)x == (int64_t)row + 1 && (int64_t)x < rows) &&
                    !(x == 0 && (int64_t)row == rows - 1))
                    why = "not the following filled slot";
            }
            if (why) {
                if (rule == RULE_INDEX)
                    RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor '%s' row %llu is %g: %s (0..%d)", path, name,
                             (unsigned long long)row, v, why, n_actions - 1);
                if (fd->elems == 1)
                    RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor '%s' row %llu is %g: %s", path, name,
                             (unsigned long long)row, v, why);
                RLT_FAIL(&ag->err, RLT_ECHECKPOINT, "%s: tensor '%s' row %llu element %llu is %g: %s", path, name,
                         (unsigned long long)row, (unsigned long long)el, v, why);
            }
        }
    }
    return RLT_OK;
}

/* Every value of the state tensors, the host words and (when loaded) the replay's rows. */
static int check_values(rlt_agent *ag, ckpt_reader *r, const char *path, const agent_host_state *h, int with_replay) {
    RLT_TRY(check_host(ag, path, h, with_replay));
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        const ckpt_tensor_info *info;
        if (ckpt_reader_find(r, en->name, &info) != RLT_OK) {
            rlt_err_clear(&ag->err); /* only an fp16 run's amp may be missing; that was decided above */
            continue;
        }
        if (strcmp(en->name, "counters") == 0) {
            RLT_TRY(check_counters(ag, r, path, h));
        } else if (strcmp(en->name, "amp") == 0) {
            RLT_TRY(check_amp(ag, r, path));
        } else if (strcmp(en->region, "counters") != 0) {
            /* The stored size: a parameter tensor from before the padding is shorter than the entry. */
            RLT_TRY(check_f32_tensor(ag, r, path, en->name, info->bytes, strcmp(en->region, "adam_v") == 0));
        }
        /* The latest losses and gradient norm (region "counters") are only reported, and the next update
         * overwrites them; with fp16 a skipped step leaves them inf by design. */
    }
    if (!with_replay) return RLT_OK;
    int32_t valid_f = replay_valid_field(ag);
    /* `valid` first: the other fields' checks rely on its bytes being 0 or 1. */
    if (valid_f >= 0) RLT_TRY(check_replay_field(ag, r, path, valid_f, valid_f, h->replay_size));
    for (int32_t f = 0; f < ag->replay.nf; f++)
        if (f != valid_f) RLT_TRY(check_replay_field(ag, r, path, f, valid_f, h->replay_size));
    return RLT_OK;
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
    /* Transition stores held for the seed group's next round belong to this state: issue them first. */
    RLT_TRY(replay_settle(&ag->replay, &ag->bk));
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        int dt = state_dtype(en);
        RLT_TRY(write_device(ag, w, en->name, dt, entry_ptr(ag, en), en->bytes, 1));
    }
    agent_host_state h = {ag->env_steps, ag->updates, ag->replay.pos, ag->replay.size, {0, 0},
                          ag->explore_rng.seed, ag->explore_rng.ctr, ag->explore_rng.stream};
    if (ag->algo->host_save) ag->algo->host_save(ag, h.algo);
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
    /* Held transition stores would land over what is read below: issue them before. */
    RLT_TRY(replay_settle(&ag->replay, &ag->bk));
    const ckpt_tensor_info *info;
    agent_host_state h;
    /* Check every tensor first, so a mismatched file changes nothing; the network by its description first,
     * which names what differs. */
    RLT_TRY(check_network(ag, r, path));
    /* A file from before the padded parameter layout holds shorter parameter tensors (see packed_layout). */
    packed_layout L;
    int packed = packed_layout_init(ag, &L);
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        /* A checkpoint from an fp32 or bf16 run has no loss scaler: an fp16 run resumed from it starts its own. */
        if (strcmp(en->name, "amp") == 0 && ckpt_reader_find(r, en->name, &info) != RLT_OK) {
            rlt_err_clear(e);
            continue;
        }
        RLT_TRY(ckpt_reader_find(r, en->name, &info));
        if (info->bytes != en->bytes && is_param_tensor(en) && packed && info->bytes == L.packed * 4 &&
            en->bytes == L.padded * 4) {
            if (ag->io_stage_bytes < en->bytes)
                RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor '%s' was written by an older rltrain whose parameters were "
                         "packed without alignment, and this agent's staging block is too small to spread it into the "
                         "aligned layout; retrain, or load it with the rltrain that wrote it", path, en->name);
            continue;
        }
        if (info->bytes != en->bytes)
            RLT_FAIL(e, RLT_ECHECKPOINT,
                     "%s: tensor '%s' has %llu bytes but this config needs %llu: the checkpoint was made with other sizes",
                     path, en->name, (unsigned long long)info->bytes, (unsigned long long)en->bytes);
        /* The dtype and shape agent_write_state gives it, not only its size: a header that says otherwise was
         * not written by rltrain. */
        const int32_t dt = state_dtype(en);
        const int64_t shape[2] = {1, (int64_t)(en->bytes / ckpt_dtype_size(dt))};
        RLT_TRY(ckpt_reader_expect(r, en->name, dt, 2, shape));
    }
    const int64_t host_shape[1] = {(int64_t)(sizeof h / 8)};
    RLT_TRY(ckpt_reader_expect(r, "agent.host", RLT_DTYPE_I64, 1, host_shape));
    RLT_TRY(ckpt_reader_read(r, "agent.host", &h, sizeof h));
    if (h.replay_size < 0 || h.replay_size > ag->replay.capacity || h.replay_pos < 0 || h.replay_pos >= ag->replay.capacity)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': replay position %lld / size %lld do not fit this config's "
                 "capacity %lld", path, (long long)h.replay_pos, (long long)h.replay_size, (long long)ag->replay.capacity);
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
                         fd->name, replay_dtype_name(info->dtype), replay_dtype_name(fd->dtype),
                         config_obs_dtype_name(ag->cfg.replay.obs_dtype), replay_dtype_name(info->dtype));
            RLT_FAIL(e, RLT_ECHECKPOINT, "%s: replay field '%s' has dtype %s but this config stores %s", path, fd->name,
                     ckpt_dtype_name(info->dtype), ckpt_dtype_name(fd->dtype));
        }
        if (info->bytes != (uint64_t)h.replay_size * ag->replay.f[f].row_bytes)
            RLT_FAIL(e, RLT_ECHECKPOINT, "%s: replay field '%s' has %llu bytes, expected %lld rows of %llu", path,
                     ag->replay.f[f].name, (unsigned long long)info->bytes, (long long)h.replay_size,
                     (unsigned long long)ag->replay.f[f].row_bytes);
        /* [rows, elements of its dtype] as written (an empty replay has [0, 0]). */
        const int64_t esize = (int64_t)ckpt_dtype_size(info->dtype);
        const int64_t rshape[2] = {h.replay_size, h.replay_size ? (int64_t)fd->row_bytes / esize : 0};
        RLT_TRY(ckpt_reader_expect(r, name, info->dtype, 2, rshape));
    }
    RLT_TRY(check_values(ag, r, path, &h, with_replay));
    /* Everything matches: load. */
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (!is_state_region(en) || !en->bytes) continue;
        if (strcmp(en->name, "amp") == 0 && ckpt_reader_find(r, en->name, &info) != RLT_OK) {
            rlt_err_clear(e);
            continue;
        }
        RLT_TRY(ckpt_reader_find(r, en->name, &info));
        if (info->bytes != en->bytes) RLT_TRY(read_packed(ag, r, en->name, entry_ptr(ag, en), &L));
        else RLT_TRY(read_device(ag, r, en->name, entry_ptr(ag, en), en->bytes));
    }
    /* What is not saved (the 16-bit compute copies) follows from the tensors just loaded. */
    RLT_TRY(ag->algo->after_load(ag));
    /* The next action waits for everything the load issued (acting beside updates starts again at the next mark). */
    ag->aside_marked = 0;
    ag->env_steps = h.env_steps;
    ag->updates = h.updates;
    ag->explore_rng.seed = h.explore_seed;
    ag->explore_rng.ctr = h.explore_ctr;
    ag->explore_rng.stream = (uint32_t)h.explore_stream;
    if (ag->algo->host_load) ag->algo->host_load(ag, h.algo, with_replay);
    int32_t row;
    RLT_TRY(replay_stage_take(&ag->replay, &ag->bk, 1, &row));
    if (with_replay) {
        for (int32_t f = 0; f < ag->replay.nf; f++) {
            snprintf(name, sizeof name, "replay.%s", ag->replay.f[f].name);
            RLT_TRY(read_device(ag, r, name, ag->replay.f[f].data, (uint64_t)h.replay_size * ag->replay.f[f].row_bytes));
        }
        ag->replay.pos = h.replay_pos;
        RLT_TRY(replay_set_size(&ag->replay, &ag->bk, h.replay_size, row));
    } else {
        /* Without replay contents the device's replay size must stay the host's. */
        RLT_TRY(replay_set_size(&ag->replay, &ag->bk, ag->replay.size, row));
    }
    return ag->bk.ops->sync(&ag->bk);
}

int rlt_agent_save(rlt_agent *ag, const char *path) {
    if (!ag || !path) return RLT_EINVAL;
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_save on an agent whose init failed");
    char meta[512];
    int mlen = agent_meta(ag, meta, sizeof meta);
    ckpt_writer *w = ag->ckpt_w;
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
    ckpt_reader *r = ag->ckpt_r;
    RLT_TRY(ckpt_reader_open(r, &ag->err, path));
    int rc = agent_read_state(ag, r, path);
    ckpt_reader_close(r);
    return rc;
}
