/* test_plan.c: memory plan arithmetic: alignment, offsets, zero-size entries, region sums, the budget
 * refusal (nothing reserved), sealing, and that an agent's printed plan equals what it reserved. The layout's
 * order: the replay after everything else but the workspaces, arena_hot where the replay starts, in a plan and in a
 * TD3 agent's (a seed group maps that first part a second time: kernels/cuda/cuda_backend.c). */
#include <string.h>

#include "agent.h"
#include "backend_registry.h"
#include "harness.h"
#include "mem.h"

static void check_arithmetic(void) {
    rlt_backend bk;
    rlt_err e;
    CHECK(rlt_backend_open(&bk, &e, "cpu", 1, NULL, 0) == RLT_OK, "open");
    rlt_plan p;
    void *a, *b, *z, *c;
    plan_init(&p, 1);
    CHECK(plan_add(&p, &e, "a", "params", RLT_LOC_DEVICE, 10, &a) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "zero", "params", RLT_LOC_DEVICE, 0, &z) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "b", "replay", RLT_LOC_HOST, 300, &b) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "c", "replay", RLT_LOC_HOST, 256, &c) == RLT_OK, "add");
    plan_layout(&p);
    CHECK(p.entries[0].offset == 0 && p.entries[2].offset == 256 && p.entries[3].offset == 768,
          "offsets aligned to 256: %llu %llu", (unsigned long long)p.entries[2].offset, (unsigned long long)p.entries[3].offset);
    CHECK(p.arena_bytes[RLT_LOC_HOST] == 1024, "arena %llu", (unsigned long long)p.arena_bytes[RLT_LOC_HOST]);
    CHECK(plan_region_bytes(&p, "replay", -1) == 556, "region sum");
    CHECK(plan_region_bytes(&p, NULL, -1) == 566, "total sum");
    /* Over budget: refused before anything is reserved. */
    uint64_t before = rlt_mem_alloc_count();
    CHECK(plan_commit(&p, &e, &bk, 1000) == RLT_ENOFIT, "budget refusal");
    CHECK(rlt_mem_alloc_count() == before, "nothing allocated on refusal");
    CHECK(strstr(e.msg, "budget") != NULL, "message names the budget: %s", e.msg);
    CHECK(plan_commit(&p, &e, &bk, 1024) == RLT_OK, "fits exactly: %s", e.msg);
    CHECK(z == NULL, "zero-size entry gets NULL");
    CHECK((char *)b - (char *)a == 256 && (char *)c - (char *)a == 768, "pointers follow offsets");
    CHECK(((uintptr_t)a & 255) == 0, "base aligned");
    CHECK(plan_add(&p, &e, "late", "params", RLT_LOC_HOST, 8, NULL) == RLT_ESTATE, "sealed plan refuses entries");
    plan_release(&p, &bk);
    rlt_backend_close(&bk);
}

/* Entries added in any order: the replay's go after all others, the workspaces' last; arena_hot ends the first part. */
static void check_layout_order(void) {
    rlt_err e;
    rlt_plan p;
    plan_init(&p, 0);
    CHECK(plan_add(&p, &e, "params", "params", RLT_LOC_DEVICE, 1000, NULL) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "replay.obs", "replay", RLT_LOC_DEVICE, 5000, NULL) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "ws.conv", "workspace", RLT_LOC_DEVICE, 300, NULL) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "grads", "grads", RLT_LOC_DEVICE, 1000, NULL) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "replay.act", "replay", RLT_LOC_DEVICE, 100, NULL) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "stage", "staging", RLT_LOC_HOST, 10, NULL) == RLT_OK, "add");
    CHECK(plan_add(&p, &e, "backend.workspace", "workspace", RLT_LOC_DEVICE, 700, NULL) == RLT_OK, "add");
    plan_layout(&p);
    /* params 0, grads 1024, replay.obs 2048, replay.act 7168, ws.conv 7424, backend.workspace 7936 */
    const uint64_t want[7] = {0, 2048, 7424, 1024, 7168, 0, 7936};
    for (int i = 0; i < 7; i++)
        CHECK(p.entries[i].offset == want[i], "entry %s at %llu, want %llu", p.entries[i].name,
              (unsigned long long)p.entries[i].offset, (unsigned long long)want[i]);
    CHECK(p.arena_hot[RLT_LOC_DEVICE] == 2048, "device arena_hot %llu", (unsigned long long)p.arena_hot[RLT_LOC_DEVICE]);
    CHECK(p.arena_hot[RLT_LOC_HOST] == 256, "host arena_hot %llu", (unsigned long long)p.arena_hot[RLT_LOC_HOST]);
    CHECK(p.arena_bytes[RLT_LOC_DEVICE] == 8704, "device arena %llu", (unsigned long long)p.arena_bytes[RLT_LOC_DEVICE]);
}

/* A TD3 agent for a 3-dim observation and a 1-dim action with a 5,000-transition replay, on the CPU; *cfg is its
 * config, for the caller to free. */
static rlt_agent *plan_test_agent(rlt_config **cfg) {
    CHECK(rlt_config_init(cfg) == RLT_OK, "config");
    CHECK(rlt_config_set(*cfg, "replay.capacity=5000") == RLT_OK, "set");
    float low = -2, high = 2;
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, &low, &high};
    rlt_agent *ag = NULL;
    CHECK(rlt_agent_init(*cfg, &obs, &act, &ag) == RLT_OK, "agent: %s", rlt_agent_errmsg(ag));
    return ag;
}

/* A TD3 agent's device plan (the CPU backend plans it as a GPU's would, in the host arena): no entry of the replay
 * or a workspace starts before arena_hot, and every other one ends by it. */
static void check_agent_hot_part(void) {
    rlt_config *cfg;
    rlt_agent *ag = plan_test_agent(&cfg);
    const rlt_plan *p = &ag->plan;
    const uint64_t hot = p->arena_hot[RLT_LOC_HOST];
    int replay = 0, others = 0;
    for (int32_t i = 0; i < p->n; i++) {
        const rlt_plan_entry *en = &p->entries[i];
        if (!en->bytes || en->location != RLT_LOC_HOST) continue;
        int cold = !strcmp(en->region, "replay") || !strcmp(en->region, "workspace");
        replay += !strcmp(en->region, "replay");
        others += !cold;
        if (cold) CHECK(en->offset >= hot, "%s (%s) at %llu, before arena_hot %llu", en->name, en->region,
                        (unsigned long long)en->offset, (unsigned long long)hot);
        else CHECK(en->offset + en->bytes <= hot, "%s (%s) ends at %llu, past arena_hot %llu", en->name, en->region,
                   (unsigned long long)(en->offset + en->bytes), (unsigned long long)hot);
    }
    CHECK(replay > 0 && others > 0 && hot > 0 && hot < p->arena_bytes[RLT_LOC_HOST],
          "the plan has both parts: %d replay entries, %d others, arena_hot %llu of %llu", replay, others,
          (unsigned long long)hot, (unsigned long long)p->arena_bytes[RLT_LOC_HOST]);
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

static void check_agent_plan_is_reservation(void) {
    rlt_config *cfg;
    rlt_agent *ag = plan_test_agent(&cfg);
    rlt_plan_summary s;
    const rlt_plan_entry *en;
    rlt_agent_memory_plan(ag, &s, &en);
    uint64_t sum = 0, end = 0;
    for (int i = 0; i < s.n_entries; i++) {
        sum += en[i].bytes;
        uint64_t e_end = en[i].offset + en[i].bytes;
        end = e_end > end ? e_end : end;
        for (int j = 0; j < i; j++) /* no two entries overlap */
            if (en[i].bytes && en[j].bytes && en[i].location == en[j].location)
                CHECK(en[i].offset >= en[j].offset + en[j].bytes || en[j].offset >= en[i].offset + en[i].bytes,
                      "%s overlaps %s", en[i].name, en[j].name);
    }
    CHECK(s.host_bytes == ag->plan.arena_bytes[RLT_LOC_HOST], "summary equals the reserved arena");
    CHECK(end <= s.host_bytes && s.host_bytes - sum < (uint64_t)s.n_entries * RLT_PLAN_ALIGN,
          "arena = entries + alignment padding only");
    /* The replay entries are exactly capacity x row size. */
    uint64_t replay = plan_region_bytes(&ag->plan, "replay", -1);
    CHECK(replay == 5000ull * (3 + 1 + 1 + 1 + 3) * 4, "replay bytes %llu", (unsigned long long)replay);
    /* Adam moments are reserved at init, the size of the parameters. */
    CHECK(plan_region_bytes(&ag->plan, "adam_m", -1) == plan_region_bytes(&ag->plan, "params", -1) &&
              plan_region_bytes(&ag->plan, "adam_v", -1) == plan_region_bytes(&ag->plan, "params", -1),
          "adam moments planned");
    char text[16384];
    size_t n = rlt_agent_plan_format(ag, text, sizeof text);
    CHECK(n > 0 && n < sizeof text && strstr(text, "replay.obs") && strstr(text, "adam_m") && strstr(text, "fits"),
          "plan table lists entries");
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

/* precision bf16 on the CPU: the same config works, computes fp32, and the plan says so. */
static void check_precision_fallback(void) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    rlt_config_set(cfg, "precision=bf16");
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "bf16 on cpu: %s", rlt_agent_errmsg(ag));
    rlt_plan_summary s;
    rlt_agent_memory_plan(ag, &s, NULL);
    CHECK(!strcmp(s.precision, "fp32") && strstr(s.note, "fp32"), "plan states the fallback: %s / %s", s.precision, s.note);
    char text[16384];
    rlt_agent_plan_format(ag, text, sizeof text);
    CHECK(strstr(text, "note: reduced precision requested") != NULL, "table shows it");
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

int main(void) {
    check_precision_fallback();
    check_arithmetic();
    check_layout_order();
    check_agent_hot_part();
    check_agent_plan_is_reservation();
    return test_summary("test_plan");
}
