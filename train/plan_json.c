/* plan_json.c: writes the plan and the planner's answers as one JSON document (see plan_json.h and
 * docs/plan_json.md). The layout is fixed by the schema, so the writer is a few appends over the caller's
 * buffer: no allocation, no JSON library. */
#include "plan_json.h"

#include <stdio.h>
#include <string.h>

#include "text.h"

#define MIB (1024.0 * 1024.0)

/* A JSON string: quotes, backslashes and control characters escaped; other bytes (UTF-8) as they are. */
static void json_str(rlt_text *t, const char *s) {
    rlt_text_add(t, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') rlt_text_add(t, "\\%c", *c);
        else if (*c == '\n') rlt_text_add(t, "\\n");
        else if (*c == '\t') rlt_text_add(t, "\\t");
        else if (*c < 0x20 || *c == 0x7f) rlt_text_add(t, "\\u%04x", *c);
        else rlt_text_add(t, "%c", *c);
    }
    rlt_text_add(t, "\"");
}

static void json_u64(rlt_text *t, uint64_t v) { rlt_text_add(t, "%llu", (unsigned long long)v); }

/* A count where 0 means "none": null in the document, so no reader mistakes it for a size to use. */
static void json_count_or_null(rlt_text *t, int64_t v) {
    if (v > 0) rlt_text_add(t, "%lld", (long long)v);
    else rlt_text_add(t, "null");
}

static const char *loc_name(int32_t loc) { return loc == RLT_LOC_DEVICE ? "device" : "host"; }

/* 1 when entry i is the first of its region: regions are listed in the order they first appear (as the table). */
static int first_of_region(const rlt_plan *p, int32_t i) {
    for (int32_t j = 0; j < i; j++)
        if (strcmp(p->entries[j].region, p->entries[i].region) == 0) return 0;
    return 1;
}

/* One hint: the keys to --set, which together make the plan fit (each set was planned; empty when no
 * config change helps, as when the device lacks the memory), and a sentence. */
typedef struct hint_list {
    rlt_text *t;
    int n;
} hint_list;

static void hint_begin(hint_list *h) {
    rlt_text_add(h->t, "%s\n    {\"set\": {", h->n++ ? "," : "");
}

static void hint_end(hint_list *h, const char *text) {
    rlt_text_add(h->t, "}, \"text\": ");
    json_str(h->t, text);
    rlt_text_add(h->t, "}");
}

static void write_hints(rlt_text *t, const rlt_plan_summary *s, const rlt_fit_report *f, const rlt_config *cfg) {
    hint_list h = {t, 0};
    char text[320];
    rlt_text_add(t, "  \"hints\": [");
    if (f->fits) {
        rlt_text_add(t, "]");
        return;
    }
    if (f->max_replay_capacity > 0) {
        hint_begin(&h);
        rlt_text_add(t, "\"replay.capacity\": %lld", (long long)f->max_replay_capacity);
        snprintf(text, sizeof text, "replay.capacity %lld -> %lld fits (with train.batch_size %d)",
                 (long long)cfg->replay.capacity, (long long)f->max_replay_capacity, cfg->train.batch_size);
        hint_end(&h, text);
    }
    if (f->max_batch_size > 0) {
        hint_begin(&h);
        rlt_text_add(t, "\"train.batch_size\": %d", f->max_batch_size);
        if (cfg->train.grad_accum_steps != 1) rlt_text_add(t, ", \"train.grad_accum_steps\": 1");
        snprintf(text, sizeof text, "train.batch_size %d -> %d fits (one micro-batch, with replay.capacity %lld)",
                 cfg->train.batch_size, f->max_batch_size, (long long)cfg->replay.capacity);
        hint_end(&h, text);
    }
    if (f->min_grad_accum_steps > 0) {
        hint_begin(&h);
        rlt_text_add(t, "\"train.grad_accum_steps\": %d", f->min_grad_accum_steps);
        snprintf(text, sizeof text,
                 "train.grad_accum_steps %d (micro-batches of %d) makes this batch fit; memory.auto_fit: true picks it",
                 f->min_grad_accum_steps, f->micro_batch);
        hint_end(&h, text);
    }
    if (f->max_replay_capacity <= 0 && f->max_batch_size <= 0 && f->min_grad_accum_steps <= 0) {
        /* Neither lever alone is enough: the smallest batch and replay together, with the budget they need. */
        int both_fit = f->min_need_bytes <= f->limit_bytes;
        double mb = (double)f->min_fit_budget_bytes / MIB;
        hint_begin(&h);
        if (both_fit || f->min_fit_budget_bytes) {
            rlt_text_add(t, "\"train.batch_size\": 1, \"replay.capacity\": %lld", (long long)f->min_replay_capacity);
            if (cfg->train.grad_accum_steps != 1) rlt_text_add(t, ", \"train.grad_accum_steps\": 1");
            if (!both_fit) rlt_text_add(t, ", \"memory.budget_mb\": %.0f", mb);
        }
        int k = snprintf(text, sizeof text,
                         "nothing fits by changing train.batch_size or replay.capacity alone; with train.batch_size 1 "
                         "and replay.capacity %lld the plan needs %.2f MiB",
                         (long long)f->min_replay_capacity, (double)f->min_need_bytes / MIB);
        if (k > 0 && (size_t)k < sizeof text) {
            if (both_fit) snprintf(text + k, sizeof text - (size_t)k, " and fits");
            else if (f->min_fit_budget_bytes) snprintf(text + k, sizeof text - (size_t)k, ", which memory.budget_mb: %.0f fits", mb);
            else snprintf(text + k, sizeof text - (size_t)k, ", more than the device's %.2f MiB free", s->device_free / MIB);
        }
        hint_end(&h, text);
    }
    if (f->fit_budget_bytes) {
        double mb = (double)f->fit_budget_bytes / MIB;
        hint_begin(&h);
        rlt_text_add(t, "\"memory.budget_mb\": %.0f", mb);
        snprintf(text, sizeof text, "memory.budget_mb: %.0f fits this config as given", mb);
        hint_end(&h, text);
    } else {
        hint_begin(&h);
        snprintf(text, sizeof text, "the device has %.2f MiB free and this config needs %.2f MiB: no memory.budget_mb "
                 "helps; free device memory or use another device", s->device_free / MIB, (double)f->need_bytes / MIB);
        hint_end(&h, text);
    }
    rlt_text_add(t, "%s]", h.n ? "\n  " : "");
}

size_t plan_json_format(const rlt_plan *p, const rlt_plan_summary *s, const rlt_fit_report *f, const rlt_config *cfg,
                        char *buf, size_t cap) {
    rlt_text t = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    int budget_loc = p->device_is_host ? RLT_LOC_HOST : RLT_LOC_DEVICE;

    rlt_text_add(&t, "{\n  \"schema_version\": %d,\n  \"generator\": ", RLT_PLAN_JSON_SCHEMA_VERSION);
    char gen[64];
    snprintf(gen, sizeof gen, "rltrain %d.%d.%d", RLT_VERSION_MAJOR, RLT_VERSION_MINOR, RLT_VERSION_PATCH);
    json_str(&t, gen);
    rlt_text_add(&t, ",\n  \"algo\": ");
    json_str(&t, cfg->algo);
    rlt_text_add(&t, ",\n  \"env\": ");
    json_str(&t, cfg->env.name);
    rlt_text_add(&t, ",\n  \"precision\": ");
    json_str(&t, s->precision[0] ? s->precision : "fp32");
    rlt_text_add(&t, ",\n  \"fits\": %s,\n", f->fits ? "true" : "false");

    rlt_text_add(&t, "  \"device\": {\"name\": ");
    json_str(&t, s->device);
    rlt_text_add(&t, ", \"is_host\": %s, \"total_bytes\": ", p->device_is_host ? "true" : "false");
    json_u64(&t, s->device_total);
    rlt_text_add(&t, ", \"free_bytes\": ");
    json_u64(&t, s->device_free);
    rlt_text_add(&t, ", \"context_bytes\": ");
    json_u64(&t, s->context_bytes);
    rlt_text_add(&t, "},\n");

    rlt_text_add(&t, "  \"budget\": {\"key\": \"memory.budget_mb\", \"arena\": \"%s\", \"budget_bytes\": ", loc_name(budget_loc));
    json_u64(&t, s->budget_bytes);
    rlt_text_add(&t, ", \"limit_bytes\": ");
    json_u64(&t, f->limit_bytes);
    rlt_text_add(&t, ", \"fit_budget_bytes\": ");
    json_count_or_null(&t, (int64_t)f->fit_budget_bytes);
    rlt_text_add(&t, "},\n");

    rlt_text_add(&t, "  \"totals\": {\"need_bytes\": ");
    json_u64(&t, f->need_bytes);
    rlt_text_add(&t, ", \"host_arena_bytes\": ");
    json_u64(&t, s->host_bytes);
    rlt_text_add(&t, ", \"device_arena_bytes\": ");
    json_u64(&t, s->device_bytes);
    rlt_text_add(&t, "},\n");

    /* The largest region of the budgeted arena: what to shrink first. */
    int32_t largest = -1;
    uint64_t largest_bytes = 0;
    for (int32_t i = 0; i < p->n; i++) {
        if (!first_of_region(p, i)) continue;
        uint64_t b = plan_region_bytes(p, p->entries[i].region, budget_loc);
        if (largest < 0 || b > largest_bytes) largest = i, largest_bytes = b;
    }
    rlt_text_add(&t, "  \"largest_region\": {\"name\": ");
    json_str(&t, largest >= 0 ? p->entries[largest].region : "");
    rlt_text_add(&t, ", \"bytes\": ");
    json_u64(&t, largest_bytes);
    rlt_text_add(&t, "},\n");

    rlt_text_add(&t, "  \"regions\": [");
    int n = 0;
    for (int32_t i = 0; i < p->n; i++) {
        if (!first_of_region(p, i)) continue;
        const char *r = p->entries[i].region;
        rlt_text_add(&t, "%s\n    {\"name\": ", n++ ? "," : "");
        json_str(&t, r);
        rlt_text_add(&t, ", \"bytes\": ");
        json_u64(&t, plan_region_bytes(p, r, -1));
        rlt_text_add(&t, ", \"host_bytes\": ");
        json_u64(&t, plan_region_bytes(p, r, RLT_LOC_HOST));
        rlt_text_add(&t, ", \"device_bytes\": ");
        json_u64(&t, plan_region_bytes(p, r, RLT_LOC_DEVICE));
        rlt_text_add(&t, "}");
    }
    rlt_text_add(&t, "%s],\n", n ? "\n  " : "");

    rlt_text_add(&t, "  \"entries\": [");
    n = 0;
    for (int32_t i = 0; i < p->n; i++) {
        const rlt_plan_entry *en = &p->entries[i];
        if (!en->bytes) continue; /* zero-size entries reserve nothing (and are not in the table) */
        rlt_text_add(&t, "%s\n    {\"name\": ", n++ ? "," : "");
        json_str(&t, en->name);
        rlt_text_add(&t, ", \"region\": ");
        json_str(&t, en->region);
        rlt_text_add(&t, ", \"location\": \"%s\", \"bytes\": ", loc_name(en->location));
        json_u64(&t, en->bytes);
        rlt_text_add(&t, ", \"offset\": ");
        json_u64(&t, en->offset);
        rlt_text_add(&t, "}");
    }
    rlt_text_add(&t, "%s],\n", n ? "\n  " : "");

    rlt_text_add(&t, "  \"notes\": [");
    n = 0;
    if (s->note[0]) {
        n++;
        json_str(&t, s->note);
    }
    for (const char *line = p->notes; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char one[sizeof p->notes];
        snprintf(one, sizeof one, "%.*s", (int)len, line);
        rlt_text_add(&t, "%s", n++ ? ", " : "");
        json_str(&t, one);
        line += len + (end ? 1 : 0);
    }
    rlt_text_add(&t, "],\n");

    rlt_text_add(&t, "  \"largest_fitting\": {\"train.batch_size\": ");
    json_count_or_null(&t, f->max_batch_size);
    rlt_text_add(&t, ", \"replay.capacity\": ");
    json_count_or_null(&t, f->max_replay_capacity);
    rlt_text_add(&t, ", \"train.grad_accum_steps\": ");
    json_count_or_null(&t, f->min_grad_accum_steps);
    rlt_text_add(&t, ", \"micro_batch\": ");
    json_count_or_null(&t, f->micro_batch);
    rlt_text_add(&t, "},\n");

    rlt_text_add(&t, "  \"smallest_sizes\": {\"train.batch_size\": 1, \"replay.capacity\": %lld, \"need_bytes\": ",
                 (long long)f->min_replay_capacity);
    json_u64(&t, f->min_need_bytes);
    rlt_text_add(&t, ", \"fits\": %s, \"fit_budget_bytes\": ", f->min_need_bytes <= f->limit_bytes ? "true" : "false");
    json_count_or_null(&t, (int64_t)f->min_fit_budget_bytes);
    rlt_text_add(&t, "},\n");

    write_hints(&t, s, f, cfg);
    rlt_text_add(&t, "\n}\n");
    return t.len;
}
