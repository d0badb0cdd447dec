/* plan.h: the memory plan. A plan pass adds named entries (name, region, location, bytes, where to store
 * the pointer) with no memory touched; plan_commit then reserves one host block and one device block and
 * points every entry into them. Zero-size entries get NULL. After commit the plan is sealed: nothing is
 * added, nothing is allocated. */
#ifndef RLT_PLAN_H
#define RLT_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "rltrain.h"
#include "backend.h"
#include "err.h"
#include "host_limits.h"

#define RLT_PLAN_MAX_ENTRIES 128
#define RLT_PLAN_ALIGN 256 /* cuBLAS and vector loads want 256-byte aligned operands */
/* Inside a parameter tensor every block (a layer's weights, a layer's biases) starts at a multiple of this
 * many floats: 64 bytes, 32 in a 16-bit compute copy. cuBLASLt picks its kernels by operand alignment, and a
 * block packed right after an odd-sized one (a bias of 1, a 17-wide input) left the next network's 16-bit
 * weights 2-byte aligned, off its tensor-core kernels. The gaps hold zeros: no op writes a gradient there,
 * so Adam, Polyak and the target copy keep them 0. */
#define RLT_PARAM_ALIGN 16
static inline uint64_t plan_param_align(uint64_t floats) {
    return (floats + RLT_PARAM_ALIGN - 1) / RLT_PARAM_ALIGN * RLT_PARAM_ALIGN;
}

struct rlt_backend;

typedef struct rlt_plan {
    rlt_plan_entry entries[RLT_PLAN_MAX_ENTRIES];
    void **slots[RLT_PLAN_MAX_ENTRIES]; /* where each entry's pointer goes at commit */
    int32_t n;
    int32_t sealed;
    int32_t device_is_host; /* CPU backend: DEVICE entries live in the host arena */
    uint64_t arena_bytes[2]; /* per rlt_location, after alignment */
    /* Per rlt_location, the end of what precedes the replay and the workspaces in the arena (plan_layout lays those
     * out last): the part every update reads, which a seed group maps a second time (rlt_backend.arena_hot). */
    uint64_t arena_hot[2];
    void *base[2];
    char notes[384]; /* lines the table prints under the entries ("replay: obs stored as fp16 ..."); plan_note */
    rlt_op_use use;  /* the planned dense layers' largest shapes (plan_use_dense), for the backend's workspaces */
    /* The host's tightest memory limit (ulimit -v/-d, the memory cgroup) as read when the backend opened, and
     * what the process will take besides the host arena: the arena must fit in host.avail less that. */
    rlt_host_limit host;
    uint64_t host_overhead;
} rlt_plan;

/* a * b, or UINT64_MAX when the product does not fit: sizes saturate, so a plan too large for 64 bits never
 * fits instead of wrapping around to a small one. plan_layout saturates its sums the same way. */
static inline uint64_t plan_mul_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t plan_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

void plan_init(rlt_plan *p, int device_is_host);
/* Adds an entry; fails only when the table is full or the plan is sealed (programming errors). */
int plan_add(rlt_plan *p, rlt_err *e, const char *name, const char *region, rlt_location loc, uint64_t bytes,
             void **slot);
/* Records that dense layers of `in` inputs and `out` outputs will run forward and backward at up to `rows`
 * rows in `dtype` (RLT_LP_*): the backend sizes its library workspaces from these (rlt_op_use). */
void plan_use_dense(rlt_plan *p, int32_t rows, int32_t in, int32_t out, int32_t dtype);
/* Appends a line to the plan's notes (a decision the table should show next to the bytes it explains);
 * a note that does not fit is cut short, never an error. */
void plan_note(rlt_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "1.50 MiB", "12.0 KiB", "300 B": bytes as the table prints them. */
void plan_bytes_text(char *out, size_t cap, uint64_t bytes);
/* Offsets and arena sizes from the entries; pure arithmetic, callable any number of times. Entries are laid out in
 * the order added, except that the replay's and then the workspaces' come after all others (arena_hot). */
void plan_layout(rlt_plan *p);
/* Sum of entry bytes whose region matches (NULL: all) at a location (-1: both). */
uint64_t plan_region_bytes(const rlt_plan *p, const char *region, int loc);
/* Reserves the arenas (host: touched so it is resident; device: one backend reservation) and points the
 * entries into them. Nothing is reserved if budget_bytes > 0 and the budgeted arena exceeds it. */
int plan_commit(rlt_plan *p, rlt_err *e, struct rlt_backend *bk, uint64_t budget_bytes);
void plan_release(rlt_plan *p, struct rlt_backend *bk);
/* 1 when the host arena and the overhead fit what the host's memory limit leaves (or there is no limit). */
int plan_host_fits(const rlt_plan *p);
/* The startup table: one row per entry grouped by region, totals, budget. */
size_t plan_format(const rlt_plan *p, const rlt_plan_summary *s, char *buf, size_t cap);

#endif
