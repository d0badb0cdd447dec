/* replay.c: the replay ring (see replay.h). */
#include "replay.h"

#include <stdio.h>
#include <string.h>

int replay_add_field(rlt_replay *rp, rlt_err *e, const char *name, uint64_t row_bytes) {
    if (rp->nf >= RLT_REPLAY_MAX_FIELDS) RLT_FAIL(e, RLT_ERUNTIME, "too many replay fields");
    rlt_replay_field *f = &rp->f[rp->nf++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->row_bytes = row_bytes;
    return RLT_OK;
}

uint64_t replay_row_bytes(const rlt_replay *rp) {
    uint64_t b = 0;
    for (int32_t i = 0; i < rp->nf; i++) b += rp->f[i].row_bytes;
    return b;
}

int replay_plan(rlt_replay *rp, rlt_plan *plan, rlt_err *e, int64_t capacity, rlt_location loc, int32_t stage_rows) {
    char key[64];
    rp->capacity = capacity;
    rp->stage_rows = stage_rows;
    rp->size = rp->pos = 0;
    for (int32_t i = 0; i < rp->nf; i++) {
        snprintf(key, sizeof key, "replay.%s", rp->f[i].name);
        RLT_TRY(plan_add(plan, e, key, "replay", loc, rp->f[i].row_bytes * (uint64_t)capacity, (void **)&rp->f[i].data));
    }
    for (int32_t i = 0; i < rp->nf; i++) {
        snprintf(key, sizeof key, "staging.replay.%s", rp->f[i].name);
        RLT_TRY(plan_add(plan, e, key, "staging", RLT_LOC_HOST, rp->f[i].row_bytes * (uint64_t)stage_rows,
                         (void **)&rp->f[i].stage));
    }
    return plan_add(plan, e, "staging.replay.size", "staging", RLT_LOC_HOST, sizeof(int64_t), (void **)&rp->size_stage);
}

int replay_write(rlt_replay *rp, rlt_backend *bk, int32_t f, int64_t slot, const void *src, int32_t rows, int32_t stage_row) {
    rlt_replay_field *fd = &rp->f[f];
    uint64_t bytes = (uint64_t)rows * fd->row_bytes;
    unsigned char *stage = fd->stage + (uint64_t)stage_row * fd->row_bytes;
    memcpy(stage, src, bytes);
    return bk->ops->copy(bk, fd->data + (uint64_t)slot * fd->row_bytes, stage, bytes, RLT_COPY_H2D);
}

int replay_set_size(rlt_replay *rp, rlt_backend *bk, int64_t size) {
    rp->size = size;
    *rp->size_stage = size;
    return bk->ops->copy(bk, rp->size_dev, rp->size_stage, sizeof(int64_t), RLT_COPY_H2D);
}

int replay_append(rlt_replay *rp, rlt_backend *bk, const void *const *rows, int32_t n) {
    const rlt_backend_ops *op = bk->ops;
    int32_t done = 0;
    while (done < n) {
        /* A chunk never crosses the ring's end, so each field needs one copy. */
        int64_t room = rp->capacity - rp->pos;
        int32_t k = n - done;
        if (k > rp->stage_rows) k = rp->stage_rows;
        if (k > room) k = (int32_t)room;
        for (int32_t i = 0; i < rp->nf; i++)
            RLT_TRY(replay_write(rp, bk, i, rp->pos, (const unsigned char *)rows[i] + (uint64_t)done * rp->f[i].row_bytes, k, 0));
        rp->pos = (rp->pos + k) % rp->capacity;
        RLT_TRY(replay_set_size(rp, bk, rp->size + k > rp->capacity ? rp->capacity : rp->size + k));
        /* The staging rows are reused by the next chunk: wait until the copies have read them. */
        RLT_TRY(op->sync(bk));
        done += k;
    }
    return RLT_OK;
}
