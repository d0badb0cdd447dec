/* plan.c: the memory plan: named entries sized in one pass, laid out with pure arithmetic, then one host
 * and one device reservation that every entry points into (see plan.h). */
#include "plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "text.h"

void plan_init(rlt_plan *p, int device_is_host) {
    memset(p, 0, sizeof *p);
    p->device_is_host = device_is_host;
}

int plan_add(rlt_plan *p, rlt_err *e, const char *name, const char *region, rlt_location loc, uint64_t bytes,
             void **slot) {
    if (p->sealed) RLT_FAIL(e, RLT_ESTATE, "memory plan is sealed: '%s' added after init (a bug)", name);
    if (p->n >= RLT_PLAN_MAX_ENTRIES) RLT_FAIL(e, RLT_ERUNTIME, "memory plan table is full at '%s'", name);
    rlt_plan_entry *en = &p->entries[p->n];
    memset(en, 0, sizeof *en);
    snprintf(en->name, sizeof en->name, "%s", name);
    snprintf(en->region, sizeof en->region, "%s", region);
    en->location = (p->device_is_host || loc == RLT_LOC_HOST) ? RLT_LOC_HOST : RLT_LOC_DEVICE;
    en->bytes = bytes;
    p->slots[p->n] = slot;
    if (slot) *slot = NULL;
    p->n++;
    return RLT_OK;
}

/* Where an entry goes in its arena: everything else first, then the replay, then the workspaces. The part before
 * the replay (parameters, gradients, optimizer state, activations: what every update reads) is then one block at
 * the arena's start whose end is arena_hot, and a seed group's backend can map that block a second time, packed
 * closer than whole arenas (rlt_backend.arena_hot). The workspaces come last because a group's leading seed plans a
 * larger one than the others: the plans must agree on everything before it (train/seed_batch.c). */
static int plan_rank(const rlt_plan_entry *en) {
    if (!strcmp(en->region, "workspace")) return 2;
    return !strcmp(en->region, "replay");
}

void plan_layout(rlt_plan *p) {
    uint64_t off[2] = {0, 0};
    for (int rank = 0; rank < 3; rank++) {
        if (rank == 1) p->arena_hot[0] = off[0], p->arena_hot[1] = off[1];
        for (int32_t i = 0; i < p->n; i++) {
            rlt_plan_entry *en = &p->entries[i];
            if (plan_rank(en) != rank) continue;
            en->offset = off[en->location];
            uint64_t padded = plan_add_sat(en->bytes, RLT_PLAN_ALIGN - 1);
            off[en->location] = plan_add_sat(off[en->location],
                                             padded == UINT64_MAX ? padded : padded / RLT_PLAN_ALIGN * RLT_PLAN_ALIGN);
        }
    }
    p->arena_bytes[0] = off[0];
    p->arena_bytes[1] = off[1];
}

uint64_t plan_region_bytes(const rlt_plan *p, const char *region, int loc) {
    uint64_t sum = 0;
    for (int32_t i = 0; i < p->n; i++) {
        const rlt_plan_entry *en = &p->entries[i];
        if (region && strcmp(en->region, region) != 0) continue;
        if (loc >= 0 && en->location != loc) continue;
        sum = plan_add_sat(sum, en->bytes);
    }
    return sum;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int plan_host_fits(const rlt_plan *p) {
    if (p->host.avail == UINT64_MAX) return 1;
    return p->host.avail >= p->host_overhead && p->arena_bytes[RLT_LOC_HOST] <= p->host.avail - p->host_overhead;
}

int plan_commit(rlt_plan *p, rlt_err *e, rlt_backend *bk, uint64_t budget_bytes) {
    if (p->sealed) RLT_FAIL(e, RLT_ESTATE, "memory plan committed twice (a bug)");
    plan_layout(p);
    /* The budget caps the arena of the chosen device: the device arena on a GPU, the host arena on CPU. */
    int budget_loc = p->device_is_host ? RLT_LOC_HOST : RLT_LOC_DEVICE;
    uint64_t need = p->arena_bytes[budget_loc];
    if (budget_bytes > 0 && need > budget_bytes)
        RLT_FAIL(e, RLT_ENOFIT, "memory plan needs %.2f MiB on %s but memory.budget_mb allows %.2f MiB (%.2f MiB over)",
                 mib(need), bk->device_name, mib(budget_bytes), mib(need - budget_bytes));
    bk->arena_hot = p->arena_hot[RLT_LOC_DEVICE]; /* before the reservation, which may map that part twice */
    if (p->arena_bytes[RLT_LOC_DEVICE] > 0) {
        int rc = bk->ops->reserve(bk, RLT_LOC_DEVICE, p->arena_bytes[RLT_LOC_DEVICE], &p->base[RLT_LOC_DEVICE]);
        if (rc != RLT_OK) return rc;
    }
    if (p->arena_bytes[RLT_LOC_HOST] > 0) {
        int rc = bk->ops->reserve(bk, RLT_LOC_HOST, p->arena_bytes[RLT_LOC_HOST], &p->base[RLT_LOC_HOST]);
        if (rc != RLT_OK) {
            if (p->base[RLT_LOC_DEVICE]) bk->ops->release(bk, RLT_LOC_DEVICE, p->base[RLT_LOC_DEVICE]);
            p->base[RLT_LOC_DEVICE] = NULL;
            return rc;
        }
    }
    for (int32_t i = 0; i < p->n; i++) {
        rlt_plan_entry *en = &p->entries[i];
        if (!p->slots[i]) continue;
        *p->slots[i] = en->bytes ? (unsigned char *)p->base[en->location] + en->offset : NULL;
    }
    p->sealed = 1;
    return RLT_OK;
}

void plan_release(rlt_plan *p, rlt_backend *bk) {
    if (p->base[RLT_LOC_DEVICE]) bk->ops->release(bk, RLT_LOC_DEVICE, p->base[RLT_LOC_DEVICE]);
    if (p->base[RLT_LOC_HOST]) bk->ops->release(bk, RLT_LOC_HOST, p->base[RLT_LOC_HOST]);
    p->base[0] = p->base[1] = NULL;
}

void plan_use_dense(rlt_plan *p, int32_t rows, int32_t in, int32_t out, int32_t dtype) {
    rlt_op_use *u = &p->use;
    if (rows > u->dense_rows) u->dense_rows = rows;
    if (in > u->dense_in) u->dense_in = in;
    if (out > u->dense_out) u->dense_out = out;
    if (dtype != RLT_LP_F32) u->dense_lp = 1;
}

void plan_note(rlt_plan *p, const char *fmt, ...) {
    size_t len = strlen(p->notes);
    if (len + 1 >= sizeof p->notes) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes + len, sizeof p->notes - len, fmt, ap);
    va_end(ap);
    len = strlen(p->notes);
    if (len + 1 < sizeof p->notes) p->notes[len] = '\n', p->notes[len + 1] = '\0';
    else p->notes[len - 1] = '\n'; /* cut short: still one line */
}

void plan_bytes_text(char *out, size_t cap, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(out, cap, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, cap, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024) snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else snprintf(out, cap, "%llu B", (unsigned long long)b);
}

size_t plan_format(const rlt_plan *p, const rlt_plan_summary *s, char *buf, size_t cap) {
    rlt_text t = {buf, cap, 0};
    char a[32], b[32], c[32];
    if (cap) buf[0] = '\0';
    rlt_text_add(&t, "memory plan on %s, %s\n", s->device, s->precision[0] ? s->precision : "fp32");
    if (s->note[0]) rlt_text_add(&t, "  note: %s\n", s->note);
    for (const char *line = p->notes; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        rlt_text_add(&t, "  note: %.*s\n", len, line);
        line += len + (end ? 1 : 0);
    }
    rlt_text_add(&t, "  %-28s %-12s %-7s %12s\n", "entry", "region", "where", "bytes");
    for (int32_t i = 0; i < p->n; i++) {
        const rlt_plan_entry *en = &p->entries[i];
        if (!en->bytes) continue;
        plan_bytes_text(a, sizeof a, en->bytes);
        rlt_text_add(&t, "  %-28s %-12s %-7s %12s\n", en->name, en->region,
            en->location == RLT_LOC_DEVICE ? "device" : "host", a);
    }
    /* Region subtotals, in the order regions first appear. */
    rlt_text_add(&t, "  by region:");
    for (int32_t i = 0; i < p->n; i++) {
        int seen = 0;
        for (int32_t j = 0; j < i; j++) seen |= strcmp(p->entries[j].region, p->entries[i].region) == 0;
        if (seen) continue;
        plan_bytes_text(a, sizeof a, plan_region_bytes(p, p->entries[i].region, -1));
        rlt_text_add(&t, " %s %s;", p->entries[i].region, a);
    }
    rlt_text_add(&t, "\n");
    plan_bytes_text(a, sizeof a, s->host_bytes);
    plan_bytes_text(b, sizeof b, s->device_bytes);
    rlt_text_add(&t, "  host arena %s, device arena %s\n", a, b);
    uint64_t need = p->device_is_host ? s->host_bytes : s->device_bytes;
    /* s->fits covers the process budget too; this line is about the arena alone. */
    int process_over = s->process_budget_bytes && s->process_bytes > s->process_budget_bytes;
    int arena_fits = process_over || !plan_host_fits(p)
                         ? need <= s->budget_bytes && (!s->device_total || need <= s->device_free) : s->fits;
    plan_bytes_text(a, sizeof a, s->budget_bytes);
    plan_bytes_text(b, sizeof b, need);
    rlt_text_add(&t, "  budget %s for the %s arena: needs %s -> %s\n", a, p->device_is_host ? "host" : "device", b,
        arena_fits ? "fits" : "DOES NOT FIT");
    /* The whole process: on a GPU the measured context and handles plus the device arena; on the CPU the
     * process budget caps the host arena alone. */
    if (!p->device_is_host) {
        plan_bytes_text(a, sizeof a, s->context_bytes - s->handle_bytes);
        plan_bytes_text(b, sizeof b, s->handle_bytes);
        plan_bytes_text(c, sizeof c, need);
        rlt_text_add(&t, "  whole process on the device: context and kernels %s + library handles %s + device arena %s", a,
            b, c);
        plan_bytes_text(a, sizeof a, s->process_bytes);
        plan_bytes_text(b, sizeof b, s->process_budget_bytes);
        if (s->process_budget_bytes)
            rlt_text_add(&t, " = %s; process budget %s -> %s\n", a, b, process_over ? "DOES NOT FIT" : "fits");
        else
            rlt_text_add(&t, " = %s (no memory.process_budget_mb)\n", a);
    } else if (s->process_budget_bytes) {
        plan_bytes_text(a, sizeof a, s->process_budget_bytes);
        plan_bytes_text(b, sizeof b, s->process_bytes);
        rlt_text_add(&t, "  process budget %s (on the CPU it caps the host arena): needs %s -> %s\n", a, b,
            process_over ? "DOES NOT FIT" : "fits");
    }
    if (p->host.avail != UINT64_MAX) {
        plan_bytes_text(a, sizeof a, p->host.avail);
        plan_bytes_text(b, sizeof b, p->arena_bytes[RLT_LOC_HOST]);
        plan_bytes_text(c, sizeof c, p->host_overhead);
        rlt_text_add(&t, "  host memory: %s leaves %s; needs host arena %s + %s for the rest of the process -> %s\n",
            p->host.source, a, b, c, plan_host_fits(p) ? "fits" : "DOES NOT FIT");
    }
    if (s->device_total) {
        plan_bytes_text(a, sizeof a, s->device_total);
        plan_bytes_text(b, sizeof b, s->device_free);
        rlt_text_add(&t, "  device memory: total %s, free %s before the reservation\n", a, b);
    }
    return t.len;
}
