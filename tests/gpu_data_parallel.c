/* gpu_data_parallel.c: data-parallel training on GPUs, the NCCL side of tests/test_data_parallel.c.
 * - One GPU: a communicator of one rank (NCCL's, made by the CUDA module's comm_init) attached to a TD3 run on
 *   cuda:0. Its gradient averages are ncclAllReduce nodes inside the captured update graph, and over one rank
 *   they are identities, so the run must end with the same parameters, Adam moments and targets, bit for bit,
 *   as the run without it: this checks that NCCL loads, that its calls capture, and that they touch only the
 *   gradients; in fp32 and in fp16 (where the average comes before the loss scaler's overflow check).
 * - A rank that never arrives: rank 0 of a communicator of two ranks whose rank 1 never starts fails NCCL's
 *   set-up after dist.timeout_s (3 s here), with a message naming the rank, its GPU, what it waited for and the
 *   NCCL settings to try, instead of waiting forever (one GPU is enough).
 * - Two GPUs or more (when cuda:1 opens): devices: [cuda:0, cuda:1] trains two replicas on different data that
 *   end equal, bit for bit, as on the CPU; and gradient buckets (dist.bucket_mb > 0, NCCL on the comm lane during
 *   the backward) give the same bits as one all-reduce (0), in fp32, bf16 and fp16.
 * - `gpu_data_parallel cumem` (ctest gpu_data_parallel_cumem, NCCL_CUMEM_ENABLE=1 in its environment): the two-GPU
 *   replicas check alone, with NCCL's cuMem buffers, which hung the first captured all-reduce until rltrain set
 *   NCCL_RUNTIME_CONNECT=0 (docs/data_parallel.md); dist.timeout_s 30 makes a regression fail in time. Skipped (77)
 *   with one GPU.
 * Skipped (77) without a GPU. NCCL comes from RLT_NCCL_LIBRARY or libnccl.so.2; its absence on a GPU machine
 * fails the test (a multi-GPU run there would fail the same way). */
#include <string.h>
#include <time.h>

#include "backend_registry.h"
#include "checkpoint.h"
#include "comm.h"
#include "config.h"
#include "harness.h"
#include "rltrain.h"

static const char *const k_td3 =
    "algo: td3\ndevice: cuda:0\n"
    "train: {total_steps: 3000, start_steps: 500, batch_size: 256, eval_every: 1500, eval_episodes: 2, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 4000, location: device}\n";


static rlt_config *config(const char *out_dir, const char *extra) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, k_td3, "dp.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    if (extra) CHECK(rlt_config_set(cfg, extra) == RLT_OK, "%s: %s", extra, rlt_config_errmsg(cfg));
    return cfg;
}

static void run_single(const char *dir, rlt_comm *comm, const char *extra) {
    rlt_config *cfg = config(dir, extra);
    cfg->comm = comm; /* what a group sets in a rank's config */
    cfg->rank = 0;
    cfg->n_ranks = 1;
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "init%s: %s", comm ? " with a comm" : "", rlt_trainer_errmsg(tr));
    if (rc == RLT_OK) CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "run: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static void one_rank_nccl(const rlt_backend_ops *ops, const char *extra) {
    rlt_err e = {0};
    void *dev = NULL;
    int32_t idx[1] = {0};
    rlt_comm_init_desc d = {.mode = RLT_COMM_INIT_RANKS, .world = 1, .first_rank = 0, .n = 1, .devices = idx, .timeout_s = 60};
    int rc = ops->comm_init(&d, &dev, &e);
    CHECK(rc == RLT_OK && dev, "NCCL communicator of one rank on cuda:0: %s", e.msg);
    if (rc != RLT_OK) return;
    rlt_comm *comm = rlt_comm_create(1);
    rlt_comm_set_device(comm, &dev, ops->comm_abort);
    char plain[600], nccl[600]; /* test_tmpdir's buffer is reused by its next call */
    snprintf(plain, sizeof plain, "%s", test_tmpdir("tmp_gpu_dp_plain"));
    snprintf(nccl, sizeof nccl, "%s", test_tmpdir("tmp_gpu_dp_nccl"));
    run_single(plain, NULL, extra);
    run_single(nccl, comm, extra);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/final.ckpt", plain);
    snprintf(b, sizeof b, "%s/final.ckpt", nccl);
    const char *what = extra ? extra : "fp32";
    CHECK(test_ckpt_same_replica(a, b), "one rank through NCCL (%s): the same parameters, moments and targets as without it",
          what);
    /* Not the same bytes: a data-parallel rank's checkpoint names its rank (so it is never resumed as a single run). */
    ops->comm_destroy(dev);
    rlt_comm_free(comm);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void rank_never_arrives(const rlt_backend_ops *ops) {
    rlt_err e = {0};
    void *dev = NULL;
    int32_t idx[1] = {0};
    rlt_comm_init_desc d = {.mode = RLT_COMM_INIT_ID, .world = 2, .first_rank = 0, .n = 1, .devices = idx, .timeout_s = 3};
    CHECK(ops->comm_init(&d, NULL, &e) == RLT_OK, "the run's NCCL id: %s", e.msg);
    d.mode = RLT_COMM_INIT_RANKS;
    double t0 = now_s();
    int rc = ops->comm_init(&d, &dev, &e);
    double took = now_s() - t0;
    printf("rank 0 of 2 alone: rc %d after %.1f s: %s\n", rc, took, e.msg);
    CHECK(rc == RLT_ERUNTIME && !dev, "rank 0 of 2 alone fails NCCL's set-up (rc %d)", rc);
    CHECK(took >= 2.9 && took < 3 + 10 + 3, "within the timeout and the abort's limit (%.1f s)", took);
    CHECK(strstr(e.msg, "rank 0 (cuda:0) of 2") && strstr(e.msg, "dist.timeout_s") && strstr(e.msg, "set-up") &&
          strstr(e.msg, "NCCL_CUMEM_ENABLE=0") && strstr(e.msg, "NCCL_P2P_DISABLE=1") && strstr(e.msg, "NCCL_DEBUG=INFO"),
          "the message names the rank, its GPU, the wait and the settings to try: %s", e.msg);
}

static void two_gpus(const char *extra) {
    const char *dir = test_tmpdir("tmp_gpu_dp_two");
    rlt_config *cfg = config(dir, "devices=[cuda:0, cuda:1]");
    if (extra) CHECK(rlt_config_set(cfg, extra) == RLT_OK, "%s: %s", extra, rlt_config_errmsg(cfg));
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK && rlt_group_ranks(g) == 2, "two ranks: %s", rlt_group_errmsg(g));
    if (rc == RLT_OK) rc = rlt_group_run(g, NULL, NULL);
    CHECK(rc == RLT_OK, "run on two GPUs: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/rank_0/final.ckpt", dir);
    snprintf(b, sizeof b, "%s/rank_1/final.ckpt", dir);
    CHECK(test_ckpt_same_replica(a, b), "two GPUs: the same parameters, moments and targets on both ranks");
    CHECK(test_ckpt_same_tensor(a, b, "replay.obs") == 0, "two GPUs: the ranks' replays differ");
}

/* Gradient buckets on two GPUs: dist.bucket_mb=0.001 (262 floats: the 64-wide critics' buckets are their two
 * upper layers and their first layer, averaged by NCCL on the comm lane inside the captured graph while the
 * backward goes on) ends with the same replicas, bit for bit, as dist.bucket_mb=0 (one all-reduce after the
 * backward): with two ranks each element's average is (a + b) / 2 either way. fp32, bf16, and fp16 (the
 * unscale and overflow check after the buckets' join). */
static void two_gpus_buckets(void) {
    static const char *const precs[] = {"precision=fp32", "precision=bf16", "precision=fp16"};
    char root[600]; /* test_tmpdir's buffer is reused by its next call */
    snprintf(root, sizeof root, "%s", test_tmpdir("tmp_gpu_dp_buckets"));
    for (int p = 0; p < 3; p++) {
        char dirs[2][700];
        for (int k = 0; k < 2; k++) {
            snprintf(dirs[k], sizeof dirs[k], "%s/p%d_b%d", root, p, k);
            rlt_config *cfg = config(dirs[k], "devices=[cuda:0, cuda:1]");
            CHECK(rlt_config_set(cfg, precs[p]) == RLT_OK && rlt_config_set(cfg, "train.total_steps=1200") == RLT_OK &&
                      rlt_config_set(cfg, k ? "dist.bucket_mb=0.001" : "dist.bucket_mb=0") == RLT_OK,
                  "%s", rlt_config_errmsg(cfg));
            rlt_group *g;
            int rc = rlt_group_init(cfg, &g);
            if (rc == RLT_OK) rc = rlt_group_run(g, NULL, NULL);
            CHECK(rc == RLT_OK, "%s, %s: run on two GPUs: %s", precs[p], k ? "buckets" : "one average", rlt_group_errmsg(g));
            rlt_group_free(g);
            rlt_config_free(cfg);
        }
        for (int r = 0; r < 2; r++) {
            char a[800], b[800];
            snprintf(a, sizeof a, "%s/rank_%d/final.ckpt", dirs[0], r);
            snprintf(b, sizeof b, "%s/rank_%d/final.ckpt", dirs[1], r);
            CHECK(test_ckpt_same_replica(a, b) && test_ckpt_same_tensor(a, b, "replay.obs") == 1,
                  "%s, rank %d: dist.bucket_mb=0.001 gives the same parameters, moments, targets and replay as 0",
                  precs[p], r);
        }
    }
}

int main(int argc, char **argv) {
    rlt_backend bk;
    rlt_err e = {0};
    memset(&bk, 0, sizeof bk);
    if (rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) != RLT_OK) test_skip("no GPU: cuda:0 does not open");
    rlt_backend_close(&bk);
    if (argc > 1 && !strcmp(argv[1], "cumem")) {
        const char *cm = getenv("NCCL_CUMEM_ENABLE");
        CHECK(cm && !strcmp(cm, "1"), "run with NCCL_CUMEM_ENABLE=1 (ctest sets it)");
        memset(&bk, 0, sizeof bk);
        if (rlt_backend_open(&bk, &e, "cuda:1", 1, NULL, 0) != RLT_OK) test_skip("one GPU: cuda:1 does not open");
        rlt_backend_close(&bk);
        two_gpus("dist.timeout_s=30");
        return test_summary("gpu_data_parallel cumem");
    }
    char why[512];
    const rlt_backend_ops *ops = rlt_backend_cuda_ops(why, sizeof why);
    CHECK(ops && ops->comm_init, "the CUDA module and its collectives: %s", why);
    if (ops && ops->comm_init) {
        one_rank_nccl(ops, NULL);
        /* fp16: the average comes before the loss scaler's overflow check (agent_grads_ready). */
        one_rank_nccl(ops, "precision=fp16");
        rank_never_arrives(ops);
    }
    memset(&bk, 0, sizeof bk);
    int second = rlt_backend_open(&bk, &e, "cuda:1", 1, NULL, 0) == RLT_OK;
    if (second) rlt_backend_close(&bk);
    if (second) two_gpus(NULL);
    if (second) two_gpus_buckets();
    else printf("gpu_data_parallel: one GPU here: the two-GPU replicas check did not run\n");
    return test_summary("gpu_data_parallel");
}
