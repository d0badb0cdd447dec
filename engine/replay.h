/* replay.h: the replay buffer: a ring of fixed-size rows per named field (obs, act, rew, ...), living in
 * the arena on the device or in pinned host memory, filled through a host staging block, sampled on the
 * backend by index gathers. Its size lives in device memory too, so captured updates see it grow. */
#ifndef RLT_REPLAY_H
#define RLT_REPLAY_H

#include "backend.h"
#include "plan.h"

#define RLT_REPLAY_MAX_FIELDS 8

typedef struct rlt_replay_field {
    char name[24];
    uint64_t row_bytes;
    unsigned char *data;  /* capacity rows, on the replay's location */
    unsigned char *stage; /* stage_rows rows, host */
} rlt_replay_field;

typedef struct rlt_replay {
    rlt_replay_field f[RLT_REPLAY_MAX_FIELDS];
    int32_t nf;
    int32_t stage_rows;
    int64_t capacity;
    int64_t size; /* host mirror */
    int64_t pos;  /* next row to write */
    int64_t *size_dev;   /* device copy of size, read by sample_indices */
    int64_t *size_stage; /* host staging for it */
} rlt_replay;

int replay_add_field(rlt_replay *rp, rlt_err *e, const char *name, uint64_t row_bytes);
/* Plans replay.<field> (at loc) and staging entries. size_dev must be planned by the caller. */
int replay_plan(rlt_replay *rp, rlt_plan *plan, rlt_err *e, int64_t capacity, rlt_location loc, int32_t stage_rows);
/* Bytes one transition takes in the ring (for hints: "capacity N would fit"). */
uint64_t replay_row_bytes(const rlt_replay *rp);
/* Writes `rows` rows of field f starting at ring slot `slot` (no wrap inside the call) through the
 * field's staging rows from `stage_row` on; queued, not waited for: the staging rows stay busy until the
 * next backend sync. */
int replay_write(rlt_replay *rp, rlt_backend *bk, int32_t f, int64_t slot, const void *src, int32_t rows, int32_t stage_row);
/* Sets the size (host mirror and device copy, queued). */
int replay_set_size(rlt_replay *rp, rlt_backend *bk, int64_t size);
/* Appends n rows; rows[f] points to n host rows of field f. Returns after the copies are queued and the
 * staging block is free again (one backend sync). */
int replay_append(rlt_replay *rp, rlt_backend *bk, const void *const *rows, int32_t n);

#endif
