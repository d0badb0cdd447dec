/* replay.h: the replay buffer: a ring of fixed-size rows per named field (obs, act, rew, ...), living in
 * the arena on the device or in pinned host memory, filled through a host staging block, sampled on the
 * backend by index gathers. Its size lives in device memory too, so captured updates see it grow.
 *
 * Each field has an element type. Observation fields may be stored more compactly than they arrive
 * (replay.obs_dtype): fp32 observations stored as fp16 or bf16 are rounded to nearest even on the host as
 * they are written, straight into the field's staging rows (so no other buffer is needed), and widened
 * back to fp32 by the batch gather (rlt_gather_field.src_dtype). */
#ifndef RLT_REPLAY_H
#define RLT_REPLAY_H

#include "backend.h"
#include "plan.h"

#define RLT_REPLAY_MAX_FIELDS 8

typedef struct rlt_replay_field {
    char name[24];
    int32_t dtype;         /* rlt_dtype of the stored elements */
    int32_t in_dtype;      /* rlt_dtype of the rows replay_write receives: dtype, or F32 for an fp16/bf16 field */
    int32_t is_obs;        /* holds observations: the plan notes its dtype and what it saves against fp32 */
    uint64_t elems;        /* elements per row */
    uint64_t row_bytes;    /* stored bytes per row: elems * size(dtype) */
    uint64_t in_row_bytes; /* bytes per row as handed to replay_write: elems * size(in_dtype) */
    unsigned char *data;   /* capacity rows, on the replay's location */
    unsigned char *stage;  /* stage_rows stored rows, host */
} rlt_replay_field;

typedef struct rlt_replay {
    rlt_replay_field f[RLT_REPLAY_MAX_FIELDS];
    int32_t nf;
    int32_t stage_rows;
    int64_t capacity;
    int64_t size; /* host mirror */
    int64_t pos;  /* next row to write */
    int64_t *size_dev;   /* device copy of size, read by gather_fields' sample */
    int64_t *size_stage; /* host staging for it, one slot per staging row (replay_set_size) */
    /* The staging rows are a ring: rows from stage_next on are free, rows before it may still be read by queued
     * copies until the next backend sync (replay_stage_take). */
    int32_t stage_next;
    int32_t sync_each;    /* RLT_STORE_SYNC=1: every group of writes syncs first, as before the ring (A/B, tests) */
    uint64_t stage_syncs; /* the syncs replay_stage_take made (a lap of the ring each, or every group with sync_each) */
    /* While a batched seed group holds the seeds' transition stores for its next round (train/seed_batch.c): the
     * agent's copy list (pinned host memory), where the writes below append their host-to-device copies instead of
     * issuing them; NULL: every copy is issued as it comes. */
    rlt_copy_list *defer;
} rlt_replay;

/* A field of `elems` elements of `dtype` per row, stored as it arrives. */
int replay_add_field(rlt_replay *rp, rlt_err *e, const char *name, int32_t dtype, uint64_t elems);
/* An observation field stored as `dtype` (replay.obs_dtype resolved): F32 or U8 as they arrive, or F16 /
 * BF16 for float observations, which then arrive as F32 and are rounded on the host. */
int replay_add_obs_field(rlt_replay *rp, rlt_err *e, const char *name, int32_t dtype, uint64_t elems);
/* The src_dtype a gather of field f passes (rlt_gather_field): RLT_LP_F16 / RLT_LP_BF16 for a compact field,
 * else RLT_LP_F32 (bytes copied as they are). */
int32_t replay_gather_dtype(const rlt_replay_field *f);
/* "fp32", "fp16", "bf16", "uint8", "int32": the config's names for the element types. */
const char *replay_dtype_name(int32_t dtype);
/* Plans replay.<field> (at loc) and staging entries, and notes compact observation fields in the plan.
 * size_dev must be planned by the caller. */
int replay_plan(rlt_replay *rp, rlt_plan *plan, rlt_err *e, int64_t capacity, rlt_location loc, int32_t stage_rows);
/* Bytes one transition takes in the ring (for hints: "capacity N would fit"). */
uint64_t replay_row_bytes(const rlt_replay *rp);
/* The first of k free staging rows (k <= stage_rows) in *row, for a group of writes: the ring's next rows, or, when
 * k rows do not fit before its end, row 0 once the backend has synced (the copies queued from the rows have read
 * them). With rp->defer, row 0: the held copies are run and waited for by the group's round or replay_settle. */
int replay_stage_take(rlt_replay *rp, rlt_backend *bk, int32_t k, int32_t *row);
/* Writes `rows` rows of field f (in_row_bytes each at src) starting at ring slot `slot` (no wrap inside the
 * call) through the field's staging rows from `stage_row` on (taken with replay_stage_take), converting to the
 * stored type; queued, not waited for: the staging rows stay busy until a later backend sync (held in rp->defer
 * when set: busy until the group's round has run them, or replay_settle). */
int replay_write(rlt_replay *rp, rlt_backend *bk, int32_t f, int64_t slot, const void *src, int32_t rows, int32_t stage_row);
/* Sets the size (host mirror and device copy, queued through size_stage[stage_row], a row of the writes' group). */
int replay_set_size(rlt_replay *rp, rlt_backend *bk, int64_t size, int32_t stage_row);
/* Appends n rows; rows[f] points to n host rows of field f (in_row_bytes each). Returns after the copies
 * are queued (no sync: the next append takes further staging rows), or, with rp->defer, with the last chunk's
 * copies held (replay_done). */
int replay_append(rlt_replay *rp, rlt_backend *bk, const void *const *rows, int32_t n);
/* The end of a group of writes that used the staging rows: `last` 0 when more writes follow in this call. Without
 * rp->defer nothing to do (the copies are queued; replay_stage_take frees rows by syncing when the ring wraps); with
 * rp->defer and `last`, leaves the held copies for the group's round (their staging rows stay busy until it has
 * run); with rp->defer and more to come, issues the held copies and waits for them (replay_settle). */
int replay_done(rlt_replay *rp, rlt_backend *bk, int last);
/* Issues the copies held in rp->defer on the backend's stream in the order they were held, empties the list and
 * syncs: the staging rows are free and the replay holds every write. Nothing held: nothing to do. */
int replay_settle(rlt_replay *rp, rlt_backend *bk);

#endif
