/* test_process_budget.c: memory.process_budget_mb and the plan's record of its dense layers, on the CPU.
 * - The key: 0 (no limit) by default, set and dumped like any key, negative values refused.
 * - What the plan tells the backend about its dense layers (plan.use, from which the CUDA backend decides whether
 *   any op calls cuBLAS and so whether a cuBLAS workspace and handle exist at all): td3_lowmem's 64-64 networks at
 *   batch 64 record rows 64, widths 64 and fp32; a batch of 2048 raises the rows (linear.cu's kernels stop at 1024).
 * - On the CPU the process budget caps the host arena (documented: the rest of the process is not counted): a
 *   budget below the arena fails init with RLT_ENOFIT before anything is reserved, naming the key, with a hint
 *   that fits; that hint fits; the table prints the process line only when a process budget is set.
 * - rltrain plan's limit is the smaller of the two budgets.
 * The GPU side (context and handles measured against NVML) is tests/gpu_process_budget.c. */
#include <string.h>

#include "agent.h"
#include "harness.h"
#include "mem.h"

#define MIB (1024.0 * 1024.0)

static const rlt_space k_obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
static const float k_low = -2, k_high = 2;

static rlt_config *lowmem(const char *const *sets) {
    rlt_config *cfg = NULL;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_lowmem.yaml") == RLT_OK, "td3_lowmem.yaml: %s",
          rlt_config_errmsg(cfg));
    for (; sets && *sets; sets++) CHECK(rlt_config_set(cfg, *sets) == RLT_OK, "%s: %s", *sets, rlt_config_errmsg(cfg));
    return cfg;
}

static int init(rlt_config *cfg, rlt_agent **ag) {
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, &k_low, &k_high};
    return rlt_agent_init(cfg, &k_obs, &act, ag);
}

static void check_key(void) {
    rlt_config *cfg = NULL;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(cfg->memory.process_budget_mb == 0, "no process budget by default");
    CHECK(rlt_config_set(cfg, "memory.process_budget_mb=600") == RLT_OK && cfg->memory.process_budget_mb == 600,
          "set: %s", rlt_config_errmsg(cfg));
    char text[1 << 14];
    rlt_config_dump(cfg, text, sizeof text);
    CHECK(strstr(text, "process_budget_mb: 600") != NULL, "dumped with the memory section: %s", text);
    CHECK(rlt_config_set(cfg, "memory.process_budget_mb=-1") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(cfg), "memory.process_budget_mb"),
          "negative refused: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_load_string(cfg, "memory:\n  process_budget_mb: 0\n", "inline") == RLT_OK &&
              cfg->memory.process_budget_mb == 0,
          "0 turns it off: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
}

static void check_dense_use(void) {
    rlt_config *cfg = lowmem(NULL);
    rlt_agent *ag = NULL;
    CHECK(init(cfg, &ag) == RLT_OK, "td3_lowmem on the CPU: %s", rlt_agent_errmsg(ag));
    const rlt_op_use *u = &ag->plan.use;
    /* Actor 3 -> 64 -> 64 -> 1, critics 4 -> 64 -> 64 -> 1, batch 64, acting batch 64. */
    CHECK(u->dense_rows == 64 && u->dense_in == 64 && u->dense_out == 64 && u->dense_lp == 0,
          "use: rows %d in %d out %d lp %d", u->dense_rows, u->dense_in, u->dense_out, u->dense_lp);
    rlt_plan_summary s;
    rlt_agent_memory_plan(ag, &s, NULL);
    CHECK(s.process_budget_bytes == 0 && s.process_bytes == s.host_bytes && s.context_bytes == 0 && s.handle_bytes == 0,
          "CPU: the process figure is the host arena (%llu vs %llu)", (unsigned long long)s.process_bytes,
          (unsigned long long)s.host_bytes);
    char text[1 << 15];
    rlt_agent_plan_format(ag, text, sizeof text);
    CHECK(strstr(text, "process budget") == NULL && strstr(text, "whole process") == NULL,
          "no process line on the CPU without a process budget:\n%s", text);
    rlt_agent_free(ag);
    rlt_config_free(cfg);

    const char *big[] = {"train.batch_size=2048", "td3.critic_hidden=[64,1536]", NULL};
    cfg = lowmem(big);
    CHECK(rlt_config_set(cfg, "memory.budget_mb=512") == RLT_OK, "budget");
    CHECK(init(cfg, &ag) == RLT_OK, "batch 2048: %s", rlt_agent_errmsg(ag));
    u = &ag->plan.use;
    CHECK(u->dense_rows == 2048 && u->dense_in == 1536 && u->dense_out == 1536, "use: rows %d in %d out %d",
          u->dense_rows, u->dense_in, u->dense_out);
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

static void check_cpu_budget(void) {
    /* td3_lowmem's host arena on the CPU is a few MiB: 1 MiB cannot hold it. */
    const char *tight[] = {"memory.process_budget_mb=1", NULL};
    rlt_config *cfg = lowmem(tight);
    rlt_agent *ag = NULL;
    uint64_t allocs = rlt_mem_alloc_count();
    int rc = init(cfg, &ag);
    const char *msg = rlt_agent_errmsg(ag);
    CHECK(rc == RLT_ENOFIT, "process budget below the host arena: %d (%s)", rc, msg);
    CHECK(strstr(msg, "memory.process_budget_mb") && strstr(msg, "host arena"), "message names the key: %s", msg);
    const char *hint = strstr(msg, "hint: memory.process_budget_mb: ");
    double fit_mb = hint ? atof(hint + strlen("hint: memory.process_budget_mb: ")) : 0;
    CHECK(fit_mb >= 2, "a hint with the budget that fits: %s", msg);
    rlt_plan_summary s;
    rlt_agent_memory_plan(ag, &s, NULL);
    CHECK(!s.fits && s.process_budget_bytes == (uint64_t)MIB && s.process_bytes > s.process_budget_bytes,
          "summary: fits %d, process %llu of %llu", s.fits, (unsigned long long)s.process_bytes,
          (unsigned long long)s.process_budget_bytes);
    char text[1 << 15];
    rlt_agent_plan_format(ag, text, sizeof text);
    CHECK(strstr(text, "process budget 1.00 MiB (on the CPU it caps the host arena)") &&
              strstr(text, "-> DOES NOT FIT"),
          "the table shows the process budget:\n%s", text);
    CHECK(strstr(text, "for the host arena: needs") && !strstr(text, "host arena: needs 0 B"), "arena line kept");
    /* Refused before the reservation: the only engine allocations are the agent and the backend's state. */
    rlt_agent_free(ag);
    CHECK(rlt_mem_alloc_count() - allocs <= 4, "nothing reserved on refusal (%llu allocations)",
          (unsigned long long)(rlt_mem_alloc_count() - allocs));
    rlt_config_free(cfg);

    char set[64];
    snprintf(set, sizeof set, "memory.process_budget_mb=%.0f", fit_mb);
    const char *fits[] = {set, NULL};
    cfg = lowmem(fits);
    CHECK(init(cfg, &ag) == RLT_OK, "the hinted %s fits: %s", set, rlt_agent_errmsg(ag));
    rlt_agent_plan_format(ag, text, sizeof text);
    CHECK(strstr(text, "(on the CPU it caps the host arena)") && strstr(text, "-> fits"), "table:\n%s", text);
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

static void check_planner_limit(void) {
    const char *sets[] = {"memory.budget_mb=512", "memory.process_budget_mb=3", NULL};
    rlt_config *cfg = lowmem(sets);
    rlt_fit_report f;
    char err[2048] = "";
    CHECK(rlt_plan_fit(cfg, &f, NULL, 0, err, sizeof err) == RLT_OK, "plan: %s", err);
    CHECK(f.limit_bytes == 3ull << 20, "the planner's limit is the process budget: %llu", (unsigned long long)f.limit_bytes);
    rlt_config_free(cfg);
}

int main(void) {
    check_key();
    check_dense_use();
    check_cpu_budget();
    check_planner_limit();
    return test_summary("test_process_budget");
}
