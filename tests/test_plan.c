/* test_plan.c: memory plan arithmetic: alignment, offsets, zero-size entries, region sums, the budget
 * refusal (nothing reserved), sealing, and that an agent's printed plan equals what it reserved. */
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

static void check_agent_plan_is_reservation(void) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_set(cfg, "replay.capacity=5000") == RLT_OK, "set");
    float low = -2, high = 2;
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, &low, &high};
    rlt_agent *ag;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "agent: %s", rlt_agent_errmsg(ag));
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
    check_agent_plan_is_reservation();
    return test_summary("test_plan");
}
