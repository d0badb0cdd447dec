/* test_planner.c: the levers for tight memory, on the CPU where a host budget plays the device:
 * - rlt_plan_fit's answers are exact: the largest batch and replay capacity fit and one more does not;
 *   the micro-batch count it proposes fits and one fewer does not;
 * - memory.auto_fit picks that micro-batch count at init and trains;
 * - memory.wait_s retries a reservation that fails because the memory is held elsewhere (simulated by
 *   failing the arena allocation twice) and succeeds when it is released; with wait_s 0 it fails fast. */
#include <string.h>
#include <time.h>

#include "agent.h"
#include "harness.h"
#include "mem.h"

static rlt_config *base(double budget_mb) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char path[600], set[64];
    snprintf(path, sizeof path, "%s/configs/td3_pendulum.yaml", RLT_SOURCE_DIR);
    CHECK(rlt_config_load_file(cfg, path) == RLT_OK, "load");
    snprintf(set, sizeof set, "memory.budget_mb=%g", budget_mb);
    rlt_config_set(cfg, set);
    return cfg;
}

/* 1 when a trainer with cfg plus one override initialises (reserves its arena). */
static int fits_with(const rlt_config *cfg0, const char *set) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char text[16384];
    rlt_config_dump(cfg0, text, sizeof text);
    rlt_config_load_string(cfg, text, "copy");
    if (set) CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(cfg));
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK || rc == RLT_ENOFIT, "%s: %s", set ? set : "-", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc == RLT_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
    /* 10 MiB: the 256-batch plan (11.3 MiB) does not fit, micro-batches do. */
    rlt_config *cfg = base(10);
    rlt_fit_report f;
    char table[16384], err[1024], set[64];
    CHECK(rlt_plan_fit(cfg, &f, table, sizeof table, err, sizeof err) == RLT_OK, "plan_fit: %s", err);
    printf("need %.2f MiB, limit %.2f MiB, max batch %d, max capacity %lld, accum %d (micro %d)\n", f.need_bytes / 1048576.0,
           f.limit_bytes / 1048576.0, f.max_batch_size, (long long)f.max_replay_capacity, f.min_grad_accum_steps, f.micro_batch);
    CHECK(!f.fits && strstr(table, "DOES NOT FIT"), "the configured plan does not fit");
    CHECK(!fits_with(cfg, NULL), "and init agrees");
    CHECK(f.max_batch_size > 0 && f.max_batch_size < 256, "max batch %d", f.max_batch_size);
    snprintf(set, sizeof set, "train.batch_size=%d", f.max_batch_size);
    CHECK(fits_with(cfg, set), "max batch fits");
    snprintf(set, sizeof set, "train.batch_size=%d", f.max_batch_size + 1);
    CHECK(!fits_with(cfg, set), "max batch + 1 does not");
    CHECK(f.max_replay_capacity > 0 && f.max_replay_capacity < 100000, "max capacity %lld", (long long)f.max_replay_capacity);
    snprintf(set, sizeof set, "replay.capacity=%lld", (long long)f.max_replay_capacity);
    CHECK(fits_with(cfg, set), "max capacity fits");
    snprintf(set, sizeof set, "replay.capacity=%lld", (long long)f.max_replay_capacity + 1);
    CHECK(!fits_with(cfg, set), "max capacity + 1 does not");
    CHECK(f.min_grad_accum_steps > 1 && 256 % f.min_grad_accum_steps == 0 && f.micro_batch * f.min_grad_accum_steps == 256,
          "accumulation %d", f.min_grad_accum_steps);
    snprintf(set, sizeof set, "train.grad_accum_steps=%d", f.min_grad_accum_steps);
    CHECK(fits_with(cfg, set), "the proposed accumulation fits");
    int smaller = 0;
    for (int n = f.min_grad_accum_steps - 1; n >= 1 && !smaller; n--)
        if (256 % n == 0) smaller = n;
    snprintf(set, sizeof set, "train.grad_accum_steps=%d", smaller);
    CHECK(!fits_with(cfg, set), "the next smaller divisor %d does not", smaller);

    /* memory.auto_fit chooses it at init, and the agent trains with it. */
    rlt_config_set(cfg, "memory.auto_fit=true");
    rlt_config_set(cfg, "train.total_steps=1500");
    rlt_config_set(cfg, "train.start_steps=500");
    rlt_config_set(cfg, "train.eval_every=0");
    rlt_config_set(cfg, "train.eval_episodes=1");
    const char *dir = test_tmpdir("planner");
    char od[600];
    snprintf(od, sizeof od, "out_dir=%s/run", dir);
    rlt_config_set(cfg, od);
    rlt_trainer *tr;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "auto_fit init: %s", rlt_trainer_errmsg(tr));
    if (tr && rlt_trainer_agent(tr)) {
        CHECK(rlt_trainer_agent(tr)->cfg.train.grad_accum_steps == f.min_grad_accum_steps, "auto_fit chose %d",
              rlt_trainer_agent(tr)->cfg.train.grad_accum_steps);
        CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "auto_fit run: %s", rlt_trainer_errmsg(tr));
    }
    rlt_trainer_free(tr);
    rlt_config_free(cfg);

    /* memory.wait_s: the arena allocation fails twice (memory held elsewhere), then succeeds. */
    cfg = base(64);
    rlt_config_set(cfg, "memory.wait_s=5");
    rlt_mem_fail_large(2, 4u << 20);
    double t0 = now_s();
    int rc = rlt_trainer_init(cfg, &tr);
    double waited = now_s() - t0;
    CHECK(rc == RLT_OK, "wait_s: init after retries: %s", rlt_trainer_errmsg(tr));
    CHECK(waited > 1.5 && waited < 4.0, "two retries a second apart: waited %.2f s", waited);
    rlt_trainer_free(tr);
    rlt_config_set(cfg, "memory.wait_s=0");
    rlt_mem_fail_large(1, 4u << 20);
    t0 = now_s();
    rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_ENOFIT && now_s() - t0 < 0.5, "without wait_s a held arena fails fast (%d)", rc);
    rlt_trainer_free(tr);
    rlt_mem_fail_large(0, 0);
    rlt_config_free(cfg);
    return test_summary("test_planner");
}
