/* test_described_gpu.c: planning for a GPU that is not here (rlt_config_describe_gpu, `rltrain plan --arch
 * --gpu-memory --others`), for CI without one:
 * - the workspace follows the CUDA backend's rules (cuda_plan_rules.h): none for small layers, 4 MiB + 3 x 4 MiB
 *   before Hopper and 32 MiB + 3 x 4 MiB on it when a dense layer goes to the library (1024-wide at batch 4096);
 * - the context and handles are the table's, the free memory what the others and the context leave;
 * - a co-tenant that leaves too little: exit 3 with the plan, the same in JSON; one that leaves room: exit 0;
 * - refusals: an architecture not in the table, a trainer (it cannot reserve), a convolution (its workspace comes
 *   from the device), --arch without --device cuda on a CPU config.
 * - a seed group's arenas (rlt_plan_group): with train.seed_batching on a described sm_90 the leading seed of 16
 *   TD3 256-256 seeds holds the batched library workspace (32 MiB + 3 x 4 MiB more than each other seed, whose plan
 *   has none), without it or with one seed all are alike; `rltrain plan` for 40 such seeds at 512 MiB says the
 *   lead plus 39 others do not fit and that 38 do (the numbers rlt_group_init's check gave on an H200); over two
 *   GPUs each has a lead (rlt_plan_group_leads: 2, and 1 when one GPU has a single seed), 2 x 56.07 + 38 x 12.07
 *   MiB, 35 fit; and so do two batches on one GPU (train.seed_batches 2; 4 leads for 16 seeds in 4, 3 for 6 seeds,
 *   none for 3 seeds or without train.seed_batching). train.seed_batches 0 (the default) plans 2 leads for 16 such
 *   seeds at 512 MiB (at most 2 for an update that large) and 1 at 250 MiB (halved while they exceed the budget), 4
 *   over two GPUs; 16 seeds of configs/dqn_cartpole.yaml 2 at its 256 MiB (4 leads do not fit), 4 at 1024 MiB.
 * tests/gpu_described_plan.c holds the same plans against a real GPU's. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "described/described.h"
#include "harness.h"
#include "rltrain.h"

#define MIB (1024.0 * 1024.0)

static rlt_config *config(const char *file, const char *const *sets, int n) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_file(cfg, file) == RLT_OK, "%s: %s", file, rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "device=cuda") == RLT_OK, "device");
    for (int i = 0; i < n; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(cfg));
    return cfg;
}

/* The plan's entry `name` in the table text: its bytes as printed ("32.00 MiB"), or "" */
static const char *entry_line(const char *table, const char *name, char *out, size_t cap) {
    const char *at = strstr(table, name);
    out[0] = '\0';
    if (at) snprintf(out, cap, "%.*s", (int)strcspn(at, "\n"), at);
    return out;
}

static void test_workspace_rules(void) {
    static char table[1 << 16];
    char err[2048], line[512];
    rlt_fit_report f;
    const char *big[] = {"td3.actor_hidden=[1024,1024]", "td3.critic_hidden=[1024,1024]", "train.batch_size=4096",
                         "replay.capacity=10000", "memory.budget_mb=4096"};
    struct { int32_t arch; int big; double ws_mib; } cases[] = {{75, 0, 0}, {90, 0, 0}, {75, 1, 16}, {86, 1, 16}, {90, 1, 44}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_config *cfg = config(RLT_SOURCE_DIR "/configs/td3_pendulum.yaml", big, cases[i].big ? 5 : 0);
        CHECK(rlt_config_describe_gpu(cfg, 80ull << 30, cases[i].arch, 0) == RLT_OK, "describe");
        int rc = rlt_plan_fit(cfg, &f, table, sizeof table, err, sizeof err);
        CHECK(rc == RLT_OK && f.fits, "sm_%d: plan %d (%s)", cases[i].arch, rc, err);
        /* The region totals: "workspace 44.00 MiB;" (a zero-size entry has no row of its own). */
        entry_line(table, "by region:", line, sizeof line);
        char want[48];
        if (cases[i].ws_mib > 0) snprintf(want, sizeof want, "workspace %.2f MiB;", cases[i].ws_mib);
        else snprintf(want, sizeof want, "workspace 0 B;");
        CHECK(strstr(line, want) != NULL, "sm_%d %s: %s, expected %s", cases[i].arch,
              cases[i].big ? "1024-wide at batch 4096" : "256-256", line, want);
        CHECK(strstr(table, "memory plan on cuda (described: sm_") != NULL, "the device is named as described");
        const described_arch *row = described_arch_find(cases[i].arch);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "context and kernels %.2f MiB + library handles %.2f MiB",
                 (double)row->context_bytes / MIB,
                 (double)(cases[i].big ? row->cublas_bytes + row->cublaslt_bytes : 0) / MIB);
        if (!cases[i].big) snprintf(ctx, sizeof ctx, "context and kernels %.2f MiB + library handles 0 B",
                                    (double)row->context_bytes / MIB);
        CHECK(strstr(table, ctx) != NULL, "sm_%d: %s in the table", cases[i].arch, ctx);
        rlt_config_free(cfg);
    }
}

static void test_cotenant_and_refusals(void) {
    static char table[1 << 16];
    char err[2048];
    rlt_fit_report f;
    rlt_config *cfg = config(RLT_SOURCE_DIR "/configs/td3_lowmem.yaml", NULL, 0);
    /* A 6 GiB card with a 5.4 GiB simulator: 600 MiB less the sm_75 context (300 MiB) leave room for the arena. */
    CHECK(rlt_config_describe_gpu(cfg, 6ull << 30, 75, (uint64_t)(5.4 * (1 << 30))) == RLT_OK, "describe");
    CHECK(rlt_plan_fit(cfg, &f, table, sizeof table, err, sizeof err) == RLT_OK && f.fits, "fits beside 5.4 GiB");
    /* 6144 - 5529.6 - 300 (the sm_75 row's context) MiB. */
    CHECK(strstr(table, "device memory: total 6.00 GiB, free 314.40 MiB before the reservation") != NULL, "free: %s", table);
    /* 5.9 GiB taken: nothing left after the context. */
    CHECK(rlt_config_describe_gpu(cfg, 6ull << 30, 75, (uint64_t)(5.9 * (1 << 30))) == RLT_OK, "describe");
    CHECK(rlt_plan_fit(cfg, &f, table, sizeof table, err, sizeof err) == RLT_OK && !f.fits, "does not fit beside 5.9 GiB");
    size_t len = 0;
    int32_t fits = 1;
    static char json[1 << 17];
    CHECK(rlt_plan_fit_json(cfg, json, sizeof json, &len, &fits, err, sizeof err) == RLT_OK && !fits, "json: %s", err);
    CHECK(strstr(json, "\"name\": \"cuda (described: sm_75, 6.00 GiB)\"") != NULL, "json device: %.300s", json);
    /* It cannot train. */
    rlt_trainer *tr = NULL;
    CHECK(rlt_config_describe_gpu(cfg, 6ull << 30, 75, 0) == RLT_OK, "describe");
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_EDEVICE && strstr(rlt_trainer_errmsg(tr), "only plans"), "trainer: %s",
          rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    CHECK(rlt_config_describe_gpu(cfg, 6ull << 30, 61, 0) == RLT_ECONFIG && strstr(rlt_config_errmsg(cfg), "sm_75"),
          "sm_61: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
    cfg = config(RLT_SOURCE_DIR "/configs/dqn_minatar_breakout.yaml", NULL, 0);
    CHECK(rlt_config_describe_gpu(cfg, 16ull << 30, 75, 0) == RLT_OK, "describe");
    CHECK(rlt_plan_fit(cfg, &f, table, sizeof table, err, sizeof err) == RLT_EDEVICE && strstr(err, "convolution"),
          "conv: %s", err);
    rlt_config_free(cfg);
}

static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/rltrain' %s 2>&1", RLT_BINARY_DIR, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void) {
    static char out[1 << 17];
    const char *cfg = "plan --config " RLT_SOURCE_DIR "/configs/td3_lowmem.yaml --device cuda";
    char args[1024];
    snprintf(args, sizeof args, "%s --arch sm_75 --gpu-memory 6GiB --others 5.4GiB", cfg);
    CHECK(run_cli(args, out, sizeof out) == 0, "fits beside 5.4 GiB: %s", out);
    snprintf(args, sizeof args, "%s --gpu t4 --others 14.8GiB", cfg);
    CHECK(run_cli(args, out, sizeof out) == 3 && strstr(out, "DOES NOT FIT"), "t4 beside 14.8 GiB: exit 3");
    snprintf(args, sizeof args, "%s --arch 7.5 --gpu-memory 6144MiB --others 5.9GiB --json", cfg);
    CHECK(run_cli(args, out, sizeof out) == 3 && strstr(out, "\"fits\": false"), "json exit 3: %.400s", out);
    snprintf(args, sizeof args, "plan --config " RLT_SOURCE_DIR "/configs/td3_lowmem.yaml --device cpu --arch sm_75 "
             "--gpu-memory 6GiB");
    CHECK(run_cli(args, out, sizeof out) == 2 && strstr(out, "--device cuda"), "cpu config: %s", out);
    snprintf(args, sizeof args, "%s --arch sm_75", cfg);
    CHECK(run_cli(args, out, sizeof out) == 2 && strstr(out, "--gpu-memory"), "memory missing: %s", out);
}

static void test_group(void) {
    const char *file = RLT_SOURCE_DIR "/configs/td3_pendulum.yaml";
    char err[2048];
    const char *batched[] = {"replay.location=device", "train.num_seeds=16", "train.seed_batching=true"};
    const char *graphs[] = {"replay.location=device", "train.num_seeds=16", "train.seed_batching=false"};
    const char *one[] = {"replay.location=device", "train.seed_batching=true"};
    const char *const *sets[3] = {batched, graphs, one};
    const int ns[3] = {3, 3, 2};
    uint64_t first[3] = {0}, each[3] = {0};
    for (int i = 0; i < 3; i++) {
        rlt_config *cfg = config(file, sets[i], ns[i]);
        CHECK(rlt_config_describe_gpu(cfg, 80ull << 30, 90, 0) == RLT_OK, "describe");
        CHECK(rlt_plan_group(cfg, &first[i], &each[i], err, sizeof err) == RLT_OK, "case %d: %s", i, err);
        rlt_config_free(cfg);
    }
    CHECK(first[0] - each[0] == (32ull + 3 * 4) << 20, "batched: the lead holds 44 MiB more (%llu against %llu bytes)",
          (unsigned long long)first[0], (unsigned long long)each[0]);
    CHECK(first[1] == each[1] && each[1] < each[0] && each[0] - each[1] <= 4096,
          "a graph each: every member alike, as a batched group's others but their seed table (%.2f MiB)", each[1] / MIB);
    CHECK(first[2] == each[2], "one run: its plan twice (%.2f, %.2f MiB)", first[2] / MIB, each[2] / MIB);
    /* A 256-256 DQN at batch 64 (configs/dqn_cartpole.yaml): only its weight gradients go to the library batched
     * (the rule's output bound); the plan once missed them, and the group fell back to a graph each. */
    const char *dqn[] = {"replay.location=device", "train.num_seeds=16", "train.seed_batching=true"};
    rlt_config *dc = config(RLT_SOURCE_DIR "/configs/dqn_cartpole.yaml", dqn, 3);
    uint64_t dfirst = 0, deach = 0;
    CHECK(rlt_config_describe_gpu(dc, 80ull << 30, 90, 0) == RLT_OK, "describe");
    CHECK(rlt_plan_group(dc, &dfirst, &deach, err, sizeof err) == RLT_OK, "dqn: %s", err);
    /* train.seed_batches 0: 4 batches for 16 seeds of it, whose 4 leads exceed its 256 MiB: 2 there, 4 at 1024. */
    CHECK(4 * dfirst + 12 * deach > (256ull << 20) && rlt_plan_group_leads(dc) == 2, "16 DQN seeds at 256 MiB (4 leads "
          "need %.2f MiB): 2 leads, got %d", (4 * dfirst + 12 * deach) / MIB, (int)rlt_plan_group_leads(dc));
    CHECK(rlt_config_set(dc, "memory.budget_mb=1024") == RLT_OK && rlt_plan_group_leads(dc) == 4,
          "16 DQN seeds at 1024 MiB: 4 leads, got %d", (int)rlt_plan_group_leads(dc));
    CHECK(dfirst - deach == (32ull + 3 * 4) << 20, "batched DQN 256-256/b64: the lead holds 44 MiB more (%llu against "
          "%llu bytes)", (unsigned long long)dfirst, (unsigned long long)deach);
    rlt_config_free(dc);
    /* Seeds spread over two GPUs batch per GPU: a leading seed on each (rlt_plan_group_leads). */
    const char *two[] = {"replay.location=device", "train.num_seeds=16", "train.seed_batching=true",
                         "devices=[cuda:0, cuda:1]"};
    rlt_config *tc = config(file, two, 4);
    CHECK(rlt_plan_group_leads(tc) == 4, "16 seeds over two GPUs (train.seed_batches 0: 2 batches of 4 a GPU): 4 "
          "leads, got %d", (int)rlt_plan_group_leads(tc));
    CHECK(rlt_config_set(tc, "train.seed_batches=1") == RLT_OK && rlt_plan_group_leads(tc) == 2,
          "16 seeds over two GPUs, one batch a GPU: 2 leads, got %d", (int)rlt_plan_group_leads(tc));
    CHECK(rlt_config_set(tc, "train.num_seeds=3") == RLT_OK && rlt_plan_group_leads(tc) == 1,
          "3 seeds over two GPUs: cuda:1's one seed leads no batch (got %d)", (int)rlt_plan_group_leads(tc));
    rlt_config_free(tc);
    rlt_config *oc = config(file, batched, 3);
    /* train.seed_batches 0 (the default): a batch for every 4 seeds, at most 2 for a TD3 256-256 at batch 256 (4 for
     * the DQN below), halved while the leads and the others exceed memory.budget_mb: 2 x 56.07 + 14 x 12.07 MiB =
     * 281.1 fit 512 MiB, one lead 237.1 MiB. */
    CHECK(rlt_plan_group_leads(oc) == 2, "one GPU, 16 TD3 seeds at 512 MiB: 2 leads, got %d", (int)rlt_plan_group_leads(oc));
    CHECK(rlt_config_describe_gpu(oc, 80ull << 30, 90, 0) == RLT_OK, "describe"); /* plans, so the budget counts */
    CHECK(rlt_plan_group_leads(oc) == 2, "16 TD3 seeds at 512 MiB, planned: 2 leads, got %d", (int)rlt_plan_group_leads(oc));
    uint64_t f1 = 0, e1 = 0;
    CHECK(rlt_config_set(oc, "memory.budget_mb=250") == RLT_OK && rlt_plan_group_leads(oc) == 1 &&
              rlt_plan_group(oc, &f1, &e1, err, sizeof err) == RLT_OK && f1 + 15 * e1 <= 250ull << 20 && f1 > e1,
          "16 seeds at 250 MiB: 1 lead (got %d), %.2f + 15 x %.2f MiB", (int)rlt_plan_group_leads(oc), f1 / MIB, e1 / MIB);
    CHECK(rlt_config_set(oc, "memory.budget_mb=200") == RLT_OK && rlt_plan_group_leads(oc) == 1,
          "16 seeds at 200 MiB (none fits): 1 lead, as the refusal counts it");
    CHECK(rlt_config_set(oc, "memory.budget_mb=512") == RLT_OK && rlt_config_set(oc, "train.seed_batches=1") == RLT_OK &&
              rlt_plan_group_leads(oc) == 1,
          "one GPU, train.seed_batches 1: one lead");
    /* Several batches on one GPU (train.seed_batches): a lead each, at least two seeds a batch. */
    CHECK(rlt_config_set(oc, "train.seed_batches=4") == RLT_OK && rlt_plan_group_leads(oc) == 4,
          "16 seeds in 4 batches: 4 leads, got %d", (int)rlt_plan_group_leads(oc));
    CHECK(rlt_config_set(oc, "train.num_seeds=6") == RLT_OK && rlt_plan_group_leads(oc) == 3,
          "6 seeds asking for 4 batches: 3 of 2 seeds, got %d leads", (int)rlt_plan_group_leads(oc));
    CHECK(rlt_config_set(oc, "train.num_seeds=3") == RLT_OK && rlt_plan_group_leads(oc) == 1,
          "3 seeds: one batch, got %d leads", (int)rlt_plan_group_leads(oc));
    CHECK(rlt_config_set(oc, "train.num_seeds=16") == RLT_OK && rlt_config_set(oc, "train.seed_batching=false") == RLT_OK &&
              rlt_plan_group_leads(oc) == 1,
          "train.seed_batches without train.seed_batching: no batch leads (got %d)", (int)rlt_plan_group_leads(oc));
    rlt_config_free(oc);
    static char out[1 << 17];
    char args[1024];
    snprintf(args, sizeof args, "plan --config %s --device cuda --arch sm_90 --gpu-memory 80GiB --set "
             "replay.location=device --set train.num_seeds=40 --set train.seed_batching=true", file);
    CHECK(run_cli(args, out, sizeof out) == 3 && strstr(out, "56.07 MiB for the leading seed") &&
              strstr(out, "39 x 12.07 MiB") && strstr(out, "train.num_seeds          38 fit"),
          "rltrain plan, 40 batched seeds: %s", out);
    /* Two leads: over two GPUs, or in two batches on one. */
    const char *two_leads[2][2] = {{"'devices=[cuda:0, cuda:1]'", "over two GPUs"},
                                   {"train.seed_batches=2", "in two batches on one GPU"}};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "plan --config %s --device cuda --arch sm_90 --gpu-memory 80GiB --set "
                 "replay.location=device --set train.num_seeds=40 --set train.seed_batching=true --set %s", file,
                 two_leads[i][0]);
        CHECK(run_cli(args, out, sizeof out) == 3 && strstr(out, "2 x 56.07 MiB for each batch's leading seed") &&
                  strstr(out, "38 x 12.07 MiB") && strstr(out, "train.num_seeds          35 fit"),
              "rltrain plan, 40 batched seeds %s: %s", two_leads[i][1], out);
    }
}

int main(void) {
    rlt_log_set_callback(NULL, NULL);
    test_group();
    test_workspace_rules();
    test_cotenant_and_refusals();
    test_cli();
    return test_summary("test_described_gpu");
}
