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

int replay_append(rlt_replay *rp, rlt_backend *bk, const void *const *rows, int32_t n) {
    const rlt_backend_ops *op = bk->ops;
    int32_t done = 0;
    while (done < n) {
        /* A chunk never crosses the ring's end, so each field needs one copy. */
        int64_t room = rp->capacity - rp->pos;
        int32_t k = n - done;
        if (k > rp->stage_rows) k = rp->stage_rows;
        if (k > room) k = (int32_t)room;
        for (int32_t i = 0; i < rp->nf; i++) {
            rlt_replay_field *f = &rp->f[i];
            const unsigned char *src = (const unsigned char *)rows[i] + (uint64_t)done * f->row_bytes;
            memcpy(f->stage, src, (uint64_t)k * f->row_bytes);
            RLT_TRY(op->copy(bk, f->data + (uint64_t)rp->pos * f->row_bytes, f->stage, (uint64_t)k * f->row_bytes,
                             RLT_COPY_H2D));
        }
        rp->pos = (rp->pos + k) % rp->capacity;
        rp->size = rp->size + k > rp->capacity ? rp->capacity : rp->size + k;
        *rp->size_stage = rp->size;
        RLT_TRY(op->copy(bk, rp->size_dev, rp->size_stage, sizeof(int64_t), RLT_COPY_H2D));
        /* The staging rows are reused by the next chunk: wait until the copies have read them. */
        RLT_TRY(op->sync(bk));
        done += k;
    }
    return RLT_OK;
}
