/* replay.c: the replay ring (see replay.h). */
#include "replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp.h"
#include "checkpoint.h"

static int replay_add(rlt_replay *rp, rlt_err *e, const char *name, int32_t dtype, int32_t in_dtype, uint64_t elems,
                      int32_t is_obs) {
    if (rp->nf >= RLT_REPLAY_MAX_FIELDS) RLT_FAIL(e, RLT_ERUNTIME, "too many replay fields");
    if (!ckpt_dtype_size(dtype) || !ckpt_dtype_size(in_dtype))
        RLT_FAIL(e, RLT_ERUNTIME, "replay field '%s': unknown element type %d (a bug)", name, (int)dtype);
    rlt_replay_field *f = &rp->f[rp->nf++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->dtype = dtype;
    f->in_dtype = in_dtype;
    f->is_obs = is_obs;
    f->elems = elems;
    f->row_bytes = elems * ckpt_dtype_size(dtype);
    f->in_row_bytes = elems * ckpt_dtype_size(in_dtype);
    return RLT_OK;
}

int replay_add_field(rlt_replay *rp, rlt_err *e, const char *name, int32_t dtype, uint64_t elems) {
    return replay_add(rp, e, name, dtype, dtype, elems, 0);
}

int replay_add_obs_field(rlt_replay *rp, rlt_err *e, const char *name, int32_t dtype, uint64_t elems) {
    int compact = dtype == RLT_DTYPE_F16 || dtype == RLT_DTYPE_BF16;
    if (!compact && dtype != RLT_DTYPE_F32 && dtype != RLT_DTYPE_U8)
        RLT_FAIL(e, RLT_ERUNTIME, "replay field '%s': observations cannot be stored as dtype %d (a bug)", name, (int)dtype);
    return replay_add(rp, e, name, dtype, compact ? RLT_DTYPE_F32 : dtype, elems, 1);
}

int32_t replay_gather_dtype(const rlt_replay_field *f) {
    if (f->dtype == RLT_DTYPE_F16) return RLT_LP_F16;
    if (f->dtype == RLT_DTYPE_BF16) return RLT_LP_BF16;
    return RLT_LP_F32;
}

const char *replay_dtype_name(int32_t dtype) {
    switch (dtype) {
    case RLT_DTYPE_F32: return "fp32";
    case RLT_DTYPE_F16: return "fp16";
    case RLT_DTYPE_BF16: return "bf16";
    case RLT_DTYPE_U8: return "uint8";
    case RLT_DTYPE_I32: return "int32";
    case RLT_DTYPE_I64: return "int64";
    }
    return "unknown";
}

uint64_t replay_row_bytes(const rlt_replay *rp) {
    uint64_t b = 0;
    for (int32_t i = 0; i < rp->nf; i++) b += rp->f[i].row_bytes;
    return b;
}

/* One plan note for the observation fields stored narrower than fp32: their dtype, bytes and the saving. */
static void replay_note_obs(const rlt_replay *rp, rlt_plan *plan, int64_t capacity) {
    char names[96] = "", have[32], fp32[32], saved[32];
    uint64_t bytes = 0, wide = 0;
    int32_t dtype = -1;
    size_t len = 0;
    for (int32_t i = 0; i < rp->nf; i++) {
        const rlt_replay_field *f = &rp->f[i];
        if (!f->is_obs || f->dtype == RLT_DTYPE_F32) continue;
        dtype = f->dtype; /* the agents store every observation field with one dtype */
        bytes = plan_add_sat(bytes, plan_mul_sat(f->row_bytes, (uint64_t)capacity));
        wide = plan_add_sat(wide, plan_mul_sat(f->elems * 4u, (uint64_t)capacity));
        if (len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", f->name);
    }
    if (dtype < 0) return;
    plan_bytes_text(have, sizeof have, bytes);
    plan_bytes_text(fp32, sizeof fp32, wide);
    plan_bytes_text(saved, sizeof saved, wide - bytes);
    plan_note(plan, "replay stores observations (%s) as %s: %s, against %s as fp32 (saves %s)", names,
              replay_dtype_name(dtype), have, fp32, saved);
}

int replay_plan(rlt_replay *rp, rlt_plan *plan, rlt_err *e, int64_t capacity, rlt_location loc, int32_t stage_rows) {
    char key[64];
    rp->capacity = capacity;
    rp->stage_rows = stage_rows;
    rp->size = rp->pos = 0;
    for (int32_t i = 0; i < rp->nf; i++) {
        snprintf(key, sizeof key, "replay.%s", rp->f[i].name);
        RLT_TRY(plan_add(plan, e, key, "replay", loc, plan_mul_sat(rp->f[i].row_bytes, (uint64_t)capacity),
                         (void **)&rp->f[i].data));
    }
    /* Staging rows hold the stored type: a compact field is converted as it is copied into them. */
    for (int32_t i = 0; i < rp->nf; i++) {
        snprintf(key, sizeof key, "staging.replay.%s", rp->f[i].name);
        RLT_TRY(plan_add(plan, e, key, "staging", RLT_LOC_HOST, rp->f[i].row_bytes * (uint64_t)stage_rows,
                         (void **)&rp->f[i].stage));
    }
    replay_note_obs(rp, plan, capacity);
    rp->stage_next = 0;
    rp->stage_syncs = 0;
    const char *each = getenv("RLT_STORE_SYNC");
    rp->sync_each = each && !strcmp(each, "1");
    return plan_add(plan, e, "staging.replay.size", "staging", RLT_LOC_HOST, sizeof(int64_t) * (uint64_t)stage_rows,
                    (void **)&rp->size_stage);
}

/* A host-to-device copy from the staging, issued now or held in rp->defer (a full list is issued first, and its
 * staging rows are then free again: later writes of this group may reuse them). */
static int replay_copy(rlt_replay *rp, rlt_backend *bk, void *dst, const void *src, uint64_t bytes) {
    rlt_copy_list *l = rp->defer;
    if (!l) return bk->ops->copy(bk, dst, src, bytes, RLT_COPY_H2D);
    if (l->n >= RLT_COPY_LIST_MAX) RLT_TRY(replay_settle(rp, bk));
    l->e[l->n] = (rlt_copy_entry){(uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, bytes};
    l->n++;
    return RLT_OK;
}

int replay_write(rlt_replay *rp, rlt_backend *bk, int32_t f, int64_t slot, const void *src, int32_t rows, int32_t stage_row) {
    rlt_replay_field *fd = &rp->f[f];
    uint64_t bytes = (uint64_t)rows * fd->row_bytes;
    unsigned char *stage = fd->stage + (uint64_t)stage_row * fd->row_bytes;
    if (fd->dtype == fd->in_dtype) {
        memcpy(stage, src, bytes);
    } else {
        /* fp32 in, fp16 or bf16 stored: round to nearest even (fp16 overflows to inf; NaN stays NaN). */
        const float *x = src;
        uint16_t *h = (uint16_t *)stage;
        uint64_t n = (uint64_t)rows * fd->elems;
        if (fd->dtype == RLT_DTYPE_F16)
            for (uint64_t i = 0; i < n; i++) h[i] = rlt_f32_to_f16(x[i]);
        else
            for (uint64_t i = 0; i < n; i++) h[i] = rlt_f32_to_bf16(x[i]);
    }
    return replay_copy(rp, bk, fd->data + (uint64_t)slot * fd->row_bytes, stage, bytes);
}

int replay_set_size(rlt_replay *rp, rlt_backend *bk, int64_t size, int32_t stage_row) {
    rp->size = size;
    rp->size_stage[stage_row] = size;
    return replay_copy(rp, bk, rp->size_dev, &rp->size_stage[stage_row], sizeof(int64_t));
}

int replay_stage_take(rlt_replay *rp, rlt_backend *bk, int32_t k, int32_t *row) {
    if (k < 1 || k > rp->stage_rows)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "replay: %d staging rows of %d", (int)k,
                           (int)rp->stage_rows);
    /* A single run's copies are queued without a wait (a transition's store cost it 21 us, and with TD3's acting
     * beside a critic-only update it waited for that update too): the ring moves on, and one sync a lap frees it. */
    if ((rp->defer && rp->stage_next > 0) || rp->stage_next + k > rp->stage_rows || (rp->sync_each && !rp->defer)) {
        RLT_TRY(bk->ops->sync(bk));
        rp->stage_next = 0;
        rp->stage_syncs++;
    }
    *row = rp->stage_next;
    if (!rp->defer) rp->stage_next += k;
    return RLT_OK;
}

int replay_settle(rlt_replay *rp, rlt_backend *bk) {
    rlt_copy_list *l = rp->defer;
    if (!l || l->n <= 0) return RLT_OK;
    for (int64_t i = 0; i < l->n; i++)
        RLT_TRY(bk->ops->copy(bk, (void *)(uintptr_t)l->e[i].dst, (const void *)(uintptr_t)l->e[i].src, l->e[i].bytes,
                              RLT_COPY_H2D));
    l->n = 0;
    return bk->ops->sync(bk);
}

int replay_done(rlt_replay *rp, rlt_backend *bk, int last) {
    if (!rp->defer) return RLT_OK;
    return last ? RLT_OK : replay_settle(rp, bk);
}

int replay_append(rlt_replay *rp, rlt_backend *bk, const void *const *rows, int32_t n) {
    /* Copies an earlier append held that no group round has run (the staging rows are about to be reused). */
    RLT_TRY(replay_settle(rp, bk));
    int32_t done = 0;
    while (done < n) {
        /* A chunk never crosses the ring's end, so each field needs one copy. */
        int64_t room = rp->capacity - rp->pos;
        int32_t k = n - done;
        if (k > rp->stage_rows) k = rp->stage_rows;
        if (k > room) k = (int32_t)room;
        int32_t row;
        RLT_TRY(replay_stage_take(rp, bk, k, &row));
        for (int32_t i = 0; i < rp->nf; i++)
            RLT_TRY(replay_write(rp, bk, i, rp->pos, (const unsigned char *)rows[i] + (uint64_t)done * rp->f[i].in_row_bytes,
                                 k, row));
        rp->pos = (rp->pos + k) % rp->capacity;
        RLT_TRY(replay_set_size(rp, bk, rp->size + k > rp->capacity ? rp->capacity : rp->size + k, row));
        done += k;
        /* With the group's held copies, the next chunk reuses their rows: they run first (the last chunk's are
         * left for the group's round). */
        RLT_TRY(replay_done(rp, bk, done >= n));
    }
    return RLT_OK;
}
