/* gpu_seed_batch.c: seeds sharing a GPU run one batched update graph (train/seed_batch.h), and each seed still
 * trains exactly as its single run does.
 * - TD3 (Pendulum, 64-64) and DQN (CartPole) groups of three and of eight seeds (one batch) on cuda:0 with train.seed_batching
 *   say they run batched, and each member ends with the final.ckpt (byte for byte) and metrics.csv (but wall_s) of
 *   the single run with its seed: block z of every batched kernel computes agent z's update and nothing else (from
 *   eight seeds on, with each network's forward fused into one launch: linear_chain.cu).
 *   Their device arenas lie at one stride (rlt_backend.span: mapped through CUDA's virtual memory management), which
 *   the group's log states.
 * - The seeds' transition stores are held for the group's rounds, each of which runs all of them in one launch
 *   (the DQN group's log counts those rounds), and each member's replay is still its single run's (the same
 *   final.ckpt, replay included).
 * - A group whose replay is in host memory cannot batch (a batched kernel moves device-arena pointers only): it
 *   says why, each seed runs its own graphs, and the results are again the single runs'.
 * - bf16 and fp16 groups batch their updates (16-bit products as cuBLASLt's strided calls over the seeds) and their
 *   acting (fp32 masters); each member finishes (lp_groups_batch).
 * - Only each batch's leading seed runs its batched graph, so only its arena holds the batched library workspace:
 *   16 seeds of configs/td3_pendulum.yaml (256-256, batch 256) with replay on the device fit the default
 *   memory.budget_mb in 2 batches (train.seed_batches 0; each seed once planned the lead's workspace: 897 MiB),
 *   every other seed's arena is the same size and smaller than the leads', and the group's plan table states the
 *   sum of what the members reserved; rlt_plan_group (`rltrain plan`) planned those sizes and leads before. Where
 *   only one lead fits memory.budget_mb the group plans one batch and fits, as rlt_plan_group planned. Where only
 *   memory.process_budget_mb, which the start-up checks, holds one lead and not the 2 planned, rlt_group_init starts
 *   the group again with one batch and it fits.
 * - A MinAtar DQN (a convolution) batches with RLT_CUDA_SEEDS_CONV=1: its fp32 convolutions run for all seeds in one
 *   launch each; by default it keeps a graph per seed and the log says why.
 * - A 256-256 DQN at batch 64 batches too: its weight gradients are batched library products (the plan reserves the
 *   workspace for them; it once missed them, and such a group ran a graph each).
 * - Seeds whose arenas span more than 2^31 floats together (40 seeds of a 256-256 TD3, each with a replay of 7M
 *   transitions on the device, in fp32, tf32 and bf16) run batched to the end: cuBLASLt's strided products faulted past
 *   that span (gemm_lt.c runs them in spans it takes), which a 128-seed benchmark hit and no test did. Those run
 *   with RLT_CUDA_SPAN_HOT=0; by default (tf32) the part of each arena before its replay is mapped a second time,
 *   packed, and the log's second spacing proves one strided call covers all 40 there.
 * - Reading through that second mapping changes no bit: 32 seeds of a 64-64 TD3 (every product on the library, its
 *   forward one strided call either way) end with the same final.ckpt and metrics.csv per seed with the second
 *   mapping and without (RLT_CUDA_SPAN_HOT=0). An agent read at the wrong place would not.
 * - With two GPUs (when cuda:1 opens): 4 seeds spread over devices: [cuda:0, cuda:1] batch per GPU (seeds 1 and 3 on
 *   cuda:0, 2 and 4 on cuda:1, each pair one batched graph, which the log states), and each member ends
 *   with the final.ckpt and metrics.csv of its single run on its GPU. With one GPU the case says it was not run.
 * Skipped (77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

static const char *const k_td3 =
    "algo: td3\ndevice: cuda:0\n"
    "train: {total_steps: 3000, start_steps: 500, batch_size: 128, eval_every: 1500, eval_episodes: 2, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 4000, location: device}\n";

static const char *const k_dqn =
    "algo: dqn\ndevice: cuda:0\nenv: {name: cartpole}\n"
    "train: {total_steps: 4000, batch_size: 64, eval_every: 2000, eval_episodes: 2, progress_every_s: 0}\n"
    "replay: {capacity: 5000, location: device}\n"
    "network: {hidden: [64, 64]}\n"
    "dqn: {learning_starts: 500, train_freq: 4, gradient_steps: 2, target_update_every: 100}\n";

static rlt_config *config(const char *yaml, const char *out_dir, const char *set1, const char *set2) {
    return test_config_text(yaml, "batch.yaml", out_dir, set1, set2);
}

/* A group of seeds 1..n of yaml (plus extra), whose log must say `expect`; then each seed against its single run. */
static void group_vs_single(const char *yaml, const char *tag, int n, const char *extra, const char *expect) {
    char gdir[600], sdir[600], what[160];
    snprintf(what, sizeof what, "tmp_gpu_batch_%s", tag);
    snprintf(gdir, sizeof gdir, "%s", test_tmpdir(what));
    char num[40];
    snprintf(num, sizeof num, "train.num_seeds=%d", n);
    rlt_config *cfg = config(yaml, gdir, num, extra);
    CHECK(rlt_config_set(cfg, "train.seed_batching=true") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    (void)test_group_logged(cfg, tag, expect);
    for (int s = 1; s <= n; s++) {
        snprintf(what, sizeof what, "tmp_gpu_batch_%s_single%d", tag, s);
        snprintf(sdir, sizeof sdir, "%s", test_tmpdir(what));
        char seed[32];
        snprintf(seed, sizeof seed, "seed=%d", s);
        rlt_config *one = config(yaml, sdir, seed, extra);
        char mdir[640];
        snprintf(mdir, sizeof mdir, "%s/seed_%d", gdir, s);
        snprintf(what, sizeof what, "%s seed %d", tag, s);
        test_single_same(one, sdir, mdir, what);
    }
}

/* 3 seeds of a bf16 or fp16 TD3 run one batched update graph (their 16-bit products strided cuBLASLt calls over the
 * seeds' arenas, the casts, passes and loss scaling with grid z the agent) and act as one batched graph too (acting
 * reads the fp32 masters on our kernels, single-run bits). Each member finishes with every update done and nothing allocated after init; how close each
 * seed's values stay to its single run's is gpu_lowp's seeds case (every op within its bound of the CPU twin). Whether
 * a member's final.ckpt is its single run's byte for byte (the same algorithms) is printed, not required. */
static void lp_groups_batch(const char *precision) {
    char gdir[600], sdir[600], tag[64], set[48], path[700], text[4096];
    snprintf(tag, sizeof tag, "tmp_gpu_batch_td3_%s", precision);
    snprintf(gdir, sizeof gdir, "%s", test_tmpdir(tag));
    snprintf(set, sizeof set, "precision=%s", precision);
    rlt_config *cfg = config(k_td3, gdir, "train.num_seeds=3", set);
    CHECK(rlt_config_set(cfg, "train.seed_batching=true") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    snprintf(tag, sizeof tag, "td3 %s", precision);
    const char *log = test_group_logged(cfg, tag, "the 3 seeds' updates run as one batched graph");
    /* Acting reads the fp32 masters (td3_policy), so it batches exactly as an fp32 group's does. */
    CHECK(strstr(log, "act as one batched graph") != NULL, "%s: the log says the seeds act batched:\n%s", tag, log);
    for (int s = 1; s <= 3; s++) {
        snprintf(path, sizeof path, "%s/seed_%d/summary.json", gdir, s);
        test_read_text(path, text, sizeof text);
        const char *u = strstr(text, "\"updates\": ");
        const long updates = u ? strtol(u + 11, NULL, 10) : 0;
        CHECK(strstr(text, "\"status\": \"finished\"") && strstr(text, "\"allocations_after_init\": 0") &&
                  updates == 2500,
              "%s seed %d: finished, 2500 updates, nothing allocated after init: %s", tag, s, text);
    }
    /* Seed 1's single run, for the byte-for-byte report. */
    snprintf(tag, sizeof tag, "tmp_gpu_batch_td3_%s_single", precision);
    snprintf(sdir, sizeof sdir, "%s", test_tmpdir(tag));
    rlt_config *one = config(k_td3, sdir, "seed=1", set);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(one, &tr);
    if (rc == RLT_OK) rc = rlt_trainer_run(tr, NULL, NULL);
    CHECK(rc == RLT_OK, "%s single run: %s", precision, rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(one);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/seed_1/final.ckpt", gdir);
    snprintf(b, sizeof b, "%s/final.ckpt", sdir);
    printf("  td3 %s, batched seed 1 against its single run: final.ckpt %s\n", precision,
           test_files_differ(a, b) == 0 ? "byte for byte the same" : "differs (the library's batched algorithms)");
}

/* 3 seeds of a MinAtar DQN (a 16@3x3 convolution, then 128) with RLT_CUDA_SEEDS_CONV=1: one batched graph, the
 * convolutions' kernels run for all three (grid z the agent; gpu_dqn_parity checks each agent's values against its
 * own run), and the group trains to its end. */
static void dqn_conv_batches(void) {
    static const char *const k_minatar =
        "algo: dqn\ndevice: cuda:0\nenv: {name: minatar_breakout}\n"
        "train: {total_steps: 1500, batch_size: 32, eval_every: 1500, eval_episodes: 1, progress_every_s: 0, "
        "num_seeds: 3, seed_batching: true}\nreplay: {capacity: 2000, location: device}\n"
        "network: {conv: minatar}\ndqn: {learning_starts: 500, train_freq: 1, target_update_every: 200}\n";
    setenv("RLT_CUDA_SEEDS_CONV", "1", 1); /* an opt-in (kernels/cuda/cuda_ops.h) */
    rlt_config *cfg = config(k_minatar, test_tmpdir("tmp_gpu_batch_minatar"), NULL, NULL);
    (void)test_group_logged(cfg, "minatar conv", "the 3 seeds' updates run as one batched graph");
    unsetenv("RLT_CUDA_SEEDS_CONV");
    /* By default such a group keeps a graph per seed, and says why. */
    cfg = config(k_minatar, test_tmpdir("tmp_gpu_batch_minatar_off"), NULL, NULL);
    (void)test_group_logged(cfg, "minatar conv, default", "cannot run for several seeds at once");
}

/* 3 seeds of a 256-256 DQN at batch 64 (configs/dqn_cartpole.yaml's network): one batched graph. */
static void dqn_wide_batches(void) {
    rlt_config *cfg = config(k_dqn, test_tmpdir("tmp_gpu_batch_dqn_wide"), "train.num_seeds=3", "network.hidden=[256, 256]");
    CHECK(rlt_config_set(cfg, "train.seed_batching=true") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    (void)test_group_logged(cfg, "dqn 256-256", "the 3 seeds' updates run as one batched graph");
}

/* 40 seeds of a 256-256 TD3 (its layers on the library's strided products) whose arenas lie so far apart that the
 * agents' offsets pass 2^31 floats; the log's spacing proves they do. The group must run to its end. */
static const char *const k_td3_far =
    "algo: td3\ndevice: cuda:0\n"
    "train: {total_steps: 700, start_steps: 400, batch_size: 256, eval_every: 700, eval_episodes: 1, "
    "progress_every_s: 0, num_seeds: 40, seed_batching: true, seed_batches: 1}\n"
    "td3: {actor_hidden: [256, 256], critic_hidden: [256, 256]}\nreplay: {capacity: 7000000, location: device}\n"
    "memory: {budget_mb: 16000}\n";

static void seeds_far_apart(const char *precision, int hot) {
    char what[80], set[40];
    setenv("RLT_CUDA_SPAN_HOT", hot ? "1" : "0", 1);
    snprintf(what, sizeof what, "tmp_gpu_batch_far_%s_%d", precision, hot);
    snprintf(set, sizeof set, "precision=%s", precision);
    rlt_config *cfg = config(k_td3_far, test_tmpdir(what), set, NULL);
    snprintf(what, sizeof what, "40 seeds far apart, %s%s", precision, hot ? ", hot parts packed" : "");
    const char *log = test_group_logged(cfg, what, "the 40 seeds' updates run as one batched graph");
    unsetenv("RLT_CUDA_SPAN_HOT");
    const char *at = strstr(log, "lie ");
    double mib = at ? atof(at + 4) : 0;
    CHECK(40.0 * mib * 1048576.0 / 4.0 > 2147483648.0, "%s: the arenas lie %.2f MiB apart, so 40 of them span more "
          "than 2^31 floats (the case this checks):\n%s", what, mib, log);
    const char *packed = strstr(log, "(and read ");
    if (!hot) {
        CHECK(!packed, "%s: RLT_CUDA_SPAN_HOT=0 still packed:\n%s", what, log);
        return;
    }
    double hot_mib = packed ? atof(packed + 10) : 0;
    /* Under 2^31 bytes for all 40: one strided call of the tf32 span reads them all (gemm_lt.c). */
    CHECK(hot_mib > 0 && 40.0 * hot_mib * 1048576.0 < 2147483648.0, "%s: the hot parts lie %.2f MiB apart (want 40 "
          "of them within 2^31 bytes):\n%s", what, hot_mib, log);
}

/* 32 seeds (every product on the library, the forward one strided cuBLASLt call) read through the packed second
 * mapping and through the arenas: each seed's run must be the same bits. */
static void hot_same_bits(void) {
    char dir[2][600], a[640], b[640], what[80];
    for (int hot = 0; hot < 2; hot++) {
        setenv("RLT_CUDA_SPAN_HOT", hot ? "1" : "0", 1);
        snprintf(what, sizeof what, "tmp_gpu_batch_hot%d", hot);
        snprintf(dir[hot], sizeof dir[hot], "%s", test_tmpdir(what));
        rlt_config *cfg = config(k_td3, dir[hot], "train.num_seeds=32", "replay.capacity=100000");
        CHECK(rlt_config_set(cfg, "train.total_steps=1500") == RLT_OK, "%s", rlt_config_errmsg(cfg));
        CHECK(rlt_config_set(cfg, "train.seed_batches=1") == RLT_OK, "%s", rlt_config_errmsg(cfg));
        CHECK(rlt_config_set(cfg, "train.eval_every=750") == RLT_OK, "%s", rlt_config_errmsg(cfg));
        snprintf(what, sizeof what, "32 seeds, hot parts %s", hot ? "packed" : "not mapped");
        const char *log = test_group_logged(cfg, what, "the 32 seeds' updates run as one batched graph");
        CHECK(!strstr(log, "(and read ") == !hot, "%s: the log %s the second mapping:\n%s", what,
              hot ? "does not state" : "states", log);
    }
    unsetenv("RLT_CUDA_SPAN_HOT");
    for (int s = 1; s <= 32; s++) {
        snprintf(a, sizeof a, "%s/seed_%d", dir[0], s);
        snprintf(b, sizeof b, "%s/seed_%d", dir[1], s);
        snprintf(what, sizeof what, "seed %d, packed against not", s);
        test_same_run(a, b, what);
    }
}

/* Seeds spread over two GPUs batch per GPU: seed s (member s - 1) on cuda:((s - 1) mod 2), against its single run
 * there. */
static void two_gpus(void) {
    rlt_config *probe = config(k_td3, test_tmpdir("tmp_gpu_batch_probe1"), "device=cuda:1", NULL);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(probe, &tr);
    rlt_trainer_free(tr);
    rlt_config_free(probe);
    if (rc == RLT_EDEVICE) {
        printf("gpu_seed_batch: one GPU (cuda:1 does not open): the case of seeds spread over two GPUs did not run\n");
        return;
    }
    char gdir[600], sdir[600], mdir[640], what[80];
    snprintf(gdir, sizeof gdir, "%s", test_tmpdir("tmp_gpu_batch_two"));
    rlt_config *cfg = config(k_td3, gdir, "train.num_seeds=4", "devices=[cuda:0, cuda:1]");
    CHECK(rlt_config_set(cfg, "train.seed_batching=true") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    const char *log = test_group_logged(cfg, "two GPUs", "seeds' updates on cuda:1");
    CHECK(strstr(log, "the 2 seeds' updates on cuda:0") != NULL, "two GPUs: cuda:0's pair batches too:\n%s", log);
    for (int s = 1; s <= 4; s++) {
        snprintf(what, sizeof what, "tmp_gpu_batch_two_single%d", s);
        snprintf(sdir, sizeof sdir, "%s", test_tmpdir(what));
        char seed[32], dev[32];
        snprintf(seed, sizeof seed, "seed=%d", s);
        snprintf(dev, sizeof dev, "device=cuda:%d", (s - 1) % 2);
        rlt_config *one = config(k_td3, sdir, seed, dev);
        snprintf(mdir, sizeof mdir, "%s/seed_%d", gdir, s);
        snprintf(what, sizeof what, "two GPUs, seed %d on cuda:%d", s, (s - 1) % 2);
        test_single_same(one, sdir, mdir, what);
    }
}

/* 16 batched seeds of the shipped TD3 config at `budget` MiB: the group reserves what rlt_plan_group planned, each
 * batch's leading seed (train.seed_batches 0: 2 batches, fewer when their leads do not fit) the larger arena; the
 * plan table states the sum. Returns the leads the plan gave. */
static int32_t group_as_planned(double budget) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    const char *sets[] = {"device=cuda:0", "replay.location=device", "train.num_seeds=16", "train.seed_batching=true"};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", test_tmpdir("tmp_gpu_batch_lead_ws"));
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    snprintf(set, sizeof set, "memory.budget_mb=%.3f", budget);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    /* What rltrain plan says the members take (rlt_plan_group), against what the group reserves below. */
    uint64_t planned_first = 0, planned_each = 0;
    char err[2048];
    CHECK(rlt_plan_group(cfg, &planned_first, &planned_each, err, sizeof err) == RLT_OK, "rlt_plan_group: %s", err);
    const int32_t leads = rlt_plan_group_leads(cfg);
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "16 batched TD3 seeds (%d leads planned) fit memory.budget_mb %.2f: %s", (int)leads, budget,
          rlt_group_errmsg(g));
    if (rc == RLT_OK) {
        uint64_t sum = 0;
        for (int32_t k = 0; k < rlt_group_size(g); k++) {
            rlt_plan_summary s;
            CHECK(rlt_trainer_memory_plan(rlt_group_member(g, k), &s, NULL) == RLT_OK, "member %d's plan", (int)k);
            sum += s.device_bytes;
            /* Member k leads batch k mod the batches: the first `leads` members. */
            const uint64_t want = k < leads ? planned_first : planned_each;
            CHECK(s.device_bytes == want, "%.0f MiB, %d leads: member %d reserved %llu bytes, rlt_plan_group planned "
                  "%llu (%s)", budget, (int)leads, (int)k, (unsigned long long)s.device_bytes, (unsigned long long)want,
                  k < leads ? "a lead" : "not a lead");
        }
        CHECK(planned_each < planned_first, "the other seeds' arenas (%llu) are smaller than a lead's (%llu), which "
              "holds the batched workspace", (unsigned long long)planned_each, (unsigned long long)planned_first);
        CHECK(sum <= (uint64_t)(budget * 1048576.0), "all 16 arenas (%llu bytes) within the budget",
              (unsigned long long)sum);
        static char text[1 << 16];
        rlt_group_plan_format(g, text, sizeof text);
        const char *at = strstr(text, "device arenas ");
        CHECK(at != NULL, "the plan table states the seeds' device arenas:\n%s", text);
        char want[64];
        if (sum >= (1ull << 30)) snprintf(want, sizeof want, "device arenas %.2f GiB", sum / 1073741824.0);
        else snprintf(want, sizeof want, "device arenas %.2f MiB", sum / 1048576.0);
        if (at) CHECK(strncmp(at, want, strlen(want)) == 0, "the plan table's total is the members' reservations "
                      "summed (%s): %.60s", want, at);
    }
    rlt_group_free(g);
    rlt_config_free(cfg);
    return leads;
}

/* train.seed_batches 0 at the shipped budget (512 MiB): 2 batches of 8 seeds (at most 2 for TD3 256-256 at batch
 * 256), each lead with its workspace. At a budget where 2 leads do not fit but one does (one lead's and 15 others'
 * arenas and 1 MiB), the group takes one batch and fits, as rlt_plan_group planned. */
static void lead_workspace_only(void) {
    CHECK(group_as_planned(512) == 2, "16 seeds at 512 MiB: 2 batches, one lead each");
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK && rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum.yaml") ==
              RLT_OK && rlt_config_set(cfg, "device=cuda:0") == RLT_OK &&
              rlt_config_set(cfg, "replay.location=device") == RLT_OK && rlt_config_set(cfg, "train.num_seeds=16") ==
              RLT_OK && rlt_config_set(cfg, "train.seed_batches=1") == RLT_OK,
          "config");
    uint64_t first = 0, each = 0;
    char err[2048];
    CHECK(rlt_plan_group(cfg, &first, &each, err, sizeof err) == RLT_OK, "rlt_plan_group: %s", err);
    rlt_config_free(cfg);
    const double tight = (first + 15 * each) / 1048576.0 + 1.0;
    CHECK(group_as_planned(tight) == 1, "16 seeds at %.2f MiB: one batch", tight);
}

/* A budget only the start-up sees (memory.process_budget_mb: the context, each seed's arena and handles) that holds
 * one lead but not the 2 the default plans under memory.budget_mb: rlt_group_init starts again with one batch and
 * fits (member 1 then reserves a plain seed's arena, not a lead's). The budget is the middle of one lead's and two
 * leads' process totals, read from a group of one batch. */
static void restart_fewer(void) {
    const char *sets[] = {"device=cuda:0", "replay.location=device", "train.num_seeds=16", "train.seed_batching=true"};
    uint64_t dev[2] = {0, 0}, handles[2] = {0, 0}, context = 0;
    char set[700];
    for (int pass = 0; pass < 2; pass++) {
        rlt_config *cfg;
        CHECK(rlt_config_init(&cfg) == RLT_OK && rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum.yaml") ==
              RLT_OK, "config");
        for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
            CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(cfg));
        snprintf(set, sizeof set, "out_dir=%s", test_tmpdir("tmp_gpu_batch_restart"));
        CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
        if (pass == 0) {
            CHECK(rlt_config_set(cfg, "train.seed_batches=1") == RLT_OK, "%s", rlt_config_errmsg(cfg));
        } else {
            const uint64_t per = dev[0] + handles[0], per_rest = dev[1] + handles[1];
            const uint64_t one = context - handles[0] + per + 15 * per_rest, two = one + per - per_rest;
            snprintf(set, sizeof set, "memory.process_budget_mb=%.3f", (one + two) / 2.0 / 1048576.0);
            CHECK(per > per_rest && rlt_config_set(cfg, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(cfg));
            CHECK(rlt_plan_group_leads(cfg) == 2, "the default plans 2 leads under memory.budget_mb (got %d)",
                  (int)rlt_plan_group_leads(cfg));
        }
        rlt_group *g;
        int rc = rlt_group_init(cfg, &g);
        CHECK(rc == RLT_OK, "pass %d (%s): %s", pass, pass ? set : "one batch", rlt_group_errmsg(g));
        for (int32_t k = 0; rc == RLT_OK && k < 2; k++) {
            rlt_plan_summary s;
            CHECK(rlt_trainer_memory_plan(rlt_group_member(g, k), &s, NULL) == RLT_OK, "member %d's plan", (int)k);
            if (pass == 0) {
                dev[k] = s.device_bytes, handles[k] = s.handle_bytes;
                if (k == 0) context = s.context_bytes;
            } else {
                CHECK(s.device_bytes == dev[k], "restarted with one batch: member %d reserved %llu bytes, %llu in one "
                      "batch", (int)k, (unsigned long long)s.device_bytes, (unsigned long long)dev[k]);
            }
        }
        rlt_group_free(g);
        rlt_config_free(cfg);
        if (rc != RLT_OK) return;
    }
}

int main(void) {
    rlt_config *probe = config(k_td3, test_tmpdir("tmp_gpu_batch_probe"), NULL, NULL);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(probe, &tr);
    rlt_trainer_free(tr);
    rlt_config_free(probe);
    if (rc == RLT_EDEVICE) test_skip("no GPU: cuda:0 does not open");
    /* The batched seeds' device arenas are mapped at one stride (rlt_backend.span), which the log states. */
    group_vs_single(k_td3, "td3", 3, NULL, "device arenas lie");
    /* The seeds' transition stores run by the rounds, one launch for all (train/seed_batch.h). */
    group_vs_single(k_dqn, "dqn", 3, NULL, "ran the seeds' transition stores in one launch");
    /* From 8 seeds on, a network's forward is one launch (linear_chain.cu). */
    group_vs_single(k_td3, "td3_8", 8, "train.seed_batches=1", "device arenas lie");
    group_vs_single(k_dqn, "dqn_8", 8, "train.seed_batches=1", "run as one batched graph");
    lead_workspace_only();
    restart_fewer();
    group_vs_single(k_td3, "td3_host_replay", 3, "replay.location=host",
                    "each seed runs its own update graph: the replay is in host memory");
    lp_groups_batch("bf16");
    lp_groups_batch("fp16");
    dqn_wide_batches();
    dqn_conv_batches();
    hot_same_bits();
    seeds_far_apart("fp32", 0);
    seeds_far_apart("tf32", 0);
    seeds_far_apart("tf32", 1);
    /* bf16: every 16-bit product in runs of seeds (gemm_lt.c's lt_go), or one call at the hot slots */
    seeds_far_apart("bf16", 0);
    seeds_far_apart("bf16", 1);
    two_gpus();
    return test_summary("gpu_seed_batch");
}
