/* test_data_parallel.c: data-parallel runs (`devices` with one seed, train/seed_group.c) on the CPU, where two
 * ranks are two CPU backends averaging through the host communicator (base/comm.h). GPU ranks differ only in
 * the communicator (NCCL); tests/gpu_data_parallel.c covers that part.
 * - The communicator: the mean is exact and the same bits on every rank; the agreement is an OR; an abort frees
 *   a rank waiting for ranks that never come.
 * - TD3 and DQN over [cpu, cpu]: the ranks see different data (their replays differ) yet end with the same
 *   parameters, Adam moments and targets, bit for bit, which only the gradient average makes possible.
 * - A stop requested mid-run ends both ranks at the same step; resuming both from final.ckpt gives the same
 *   final.ckpt as the run that was never stopped.
 * - A rank whose environment fails ends the run with an error naming the rank, and the other rank does not
 *   wait for it forever; a rank that stops answering for longer than dist.timeout_s fails the run (RLT_ERUNTIME)
 *   with a message naming both ranks and the timeout.
 * - Gradient buckets (dist.bucket_mb > 0: the average in pieces during the backward) give the same bits as one
 *   average per step (0), also with gradient accumulation and the CPU worker.
 * - The refusals (batch not divisible, on_oom cpu, mixed or repeated devices, one trainer on a list).
 * Learning over two ranks: test_learn_dp_pendulum.c. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "comm.h"
#include "harness.h"
#include "rltrain.h"

static const char *const k_td3 =
    "algo: td3\ndevices: [cpu, cpu]\n"
    "train: {total_steps: 2000, start_steps: 500, batch_size: 64, eval_every: 1000, eval_episodes: 2, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 3000}\n";

static const char *const k_dqn =
    "algo: dqn\nenv: {name: cartpole}\ndevices: [cpu, cpu]\n"
    "train: {total_steps: 2000, batch_size: 32, eval_every: 1000, eval_episodes: 2, progress_every_s: 0}\n"
    "dqn: {learning_starts: 300, train_freq: 4, gradient_steps: 1, target_update_every: 100, max_grad_norm: 10, "
    "eval_epsilon: 0}\n"
    "network: {hidden: [32, 32]}\nreplay: {capacity: 3000}\n";

static rlt_config *config(const char *base, const char *out_dir, const char *const *sets) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, base, "dp.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    for (int i = 0; sets && sets[i]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(cfg));
    return cfg;
}

/* ---- the communicator ------------------------------------------------------------------------------- */

enum { NR = 3, NX = 10 };
typedef struct comm_arg {
    rlt_comm *c;
    int32_t rank;
    float x[NX];
    int32_t any;
    int rc_reduce, rc_any;
} comm_arg;

static void *comm_rank(void *p) {
    comm_arg *a = p;
    for (int i = 0; i < NX; i++) a->x[i] = (float)(a->rank * 10 + i) + 0.1f * (float)a->rank;
    a->rc_reduce = rlt_comm_allreduce_mean(a->c, a->rank, a->x, NX);
    a->rc_any = rlt_comm_any(a->c, a->rank, a->rank == 2, &a->any);
    return NULL;
}

static void *comm_wait(void *p) {
    comm_arg *a = p;
    a->rc_any = rlt_comm_any(a->c, a->rank, 0, &a->any);
    return NULL;
}

static void comm_collectives(void) {
    rlt_comm *c = rlt_comm_create(NR);
    CHECK(c && rlt_comm_size(c) == NR, "a communicator of 3 ranks");
    if (!c) return;
    comm_arg a[NR];
    pthread_t t[NR];
    for (int r = 0; r < NR; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].c = c;
        a[r].rank = r;
        pthread_create(&t[r], NULL, comm_rank, &a[r]);
    }
    for (int r = 0; r < NR; r++) pthread_join(t[r], NULL);
    for (int r = 0; r < NR; r++) {
        CHECK(a[r].rc_reduce == RLT_OK && a[r].rc_any == RLT_OK, "rank %d: collectives succeed", r);
        CHECK(a[r].any == 1, "rank %d: the agreement is the OR of the flags (rank 2 raised one)", r);
        CHECK(memcmp(a[r].x, a[0].x, sizeof a[0].x) == 0, "rank %d: the same bits as rank 0", r);
    }
    for (int i = 0; i < NX; i++) {
        float want = 0.0f;
        for (int r = 0; r < NR; r++) want += (float)(r * 10 + i) + 0.1f * (float)r;
        CHECK_NEAR(a[0].x[i], want / NR, 1e-5, 1e-6, "the mean over the ranks");
    }
    /* Rank 0 waits for ranks 1 and 2, which never come: the abort releases it, and later calls fail at once. */
    comm_arg w;
    memset(&w, 0, sizeof w);
    w.c = c;
    pthread_t tw;
    pthread_create(&tw, NULL, comm_wait, &w);
    struct timespec ms = {0, 50 * 1000 * 1000};
    nanosleep(&ms, NULL);
    rlt_comm_abort(c);
    pthread_join(tw, NULL);
    CHECK(w.rc_any == RLT_EINTERRUPTED, "a waiting rank is released by the abort (rc %d)", w.rc_any);
    float x[2] = {1, 2};
    CHECK(rlt_comm_allreduce_mean(c, 1, x, 2) == RLT_EINTERRUPTED && rlt_comm_aborted(c), "later collectives fail");
    rlt_comm_free(c);
}

/* ---- training ------------------------------------------------------------------------------------- */


static int run_group(rlt_config *cfg, const char *resume, rlt_group_progress_fn fn, void *user, rlt_group **out) {
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "group init: %s", rlt_group_errmsg(g));
    if (rc == RLT_OK && resume) {
        rc = rlt_group_resume(g, resume);
        CHECK(rc == RLT_OK, "group resume: %s", rlt_group_errmsg(g));
    }
    if (rc == RLT_OK) rc = rlt_group_run(g, fn, user);
    *out = g;
    return rc;
}

/* The two ranks of out_dir hold the same replicas: every state tensor but the replay's. */
static void replicas_equal(const char *dir, const char *what, const char *replay_field) {
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/rank_0/final.ckpt", dir);
    snprintf(b, sizeof b, "%s/rank_1/final.ckpt", dir);
    CHECK(test_ckpt_same_replica(a, b), "%s: parameters, Adam moments and targets are the same on both ranks", what);
    CHECK(test_ckpt_same_tensor(a, b, replay_field) == 0, "%s: the ranks' replays differ (each its own environments)", what);
}

static void trains_replicas(const char *base, const char *dir, const char *what, const char *replay_field) {
    rlt_config *cfg = config(base, dir, NULL);
    CHECK(rlt_config_ranks(cfg) == 2 && rlt_group_count(cfg) == 2, "two ranks");
    rlt_group *g;
    int rc = run_group(cfg, NULL, NULL, NULL, &g);
    CHECK(rc == RLT_OK, "%s: run: %s", what, rlt_group_errmsg(g));
    CHECK(rlt_group_ranks(g) == 2, "a data-parallel group");
    rlt_progress p0, p1;
    rlt_trainer_progress(rlt_group_member(g, 0), &p0);
    rlt_trainer_progress(rlt_group_member(g, 1), &p1);
    CHECK(p0.env_steps == 2000 && p1.env_steps == 2000 && p0.updates == p1.updates && p0.updates > 400,
          "%s: both ranks ran every step and the same updates (%lld, %lld)", what, (long long)p0.updates,
          (long long)p1.updates);
    CHECK(p0.last_eval_return == p1.last_eval_return, "%s: equal replicas evaluate alike (%.3f, %.3f)", what,
          p0.last_eval_return, p1.last_eval_return);
    rlt_group_free(g);
    rlt_config_free(cfg);
    replicas_equal(dir, what, replay_field);
}

static int stop_at_1200(void *user, const rlt_group_report *r) {
    (void)user;
    return r->env_steps >= 2 * 1200;
}

static void stop_and_resume(const char *whole, const char *dir) {
    rlt_config *cfg = config(k_td3, dir, NULL);
    rlt_group *g;
    int rc = run_group(cfg, NULL, stop_at_1200, NULL, &g);
    CHECK(rc == RLT_EINTERRUPTED, "stopped mid-run: %d (%s)", rc, rlt_group_errmsg(g));
    rlt_progress p0, p1;
    rlt_trainer_progress(rlt_group_member(g, 0), &p0);
    rlt_trainer_progress(rlt_group_member(g, 1), &p1);
    CHECK(p0.env_steps == p1.env_steps && p0.env_steps < 2000 && p0.updates == p1.updates,
          "both ranks stop at the same step (%lld, %lld)", (long long)p0.env_steps, (long long)p1.env_steps);
    rlt_group_free(g);
    rc = run_group(cfg, "final.ckpt", NULL, NULL, &g);
    CHECK(rc == RLT_OK, "resumed to the end: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    char a[700], b[700];
    CHECK(strcmp(whole, dir) != 0, "two runs in two directories");
    for (int r = 0; r < 2; r++) {
        snprintf(a, sizeof a, "%s/rank_%d/final.ckpt", whole, r);
        snprintf(b, sizeof b, "%s/rank_%d/final.ckpt", dir, r);
        CHECK(test_files_differ(a, b) == 0, "rank %d: stopped and resumed = never stopped (%ld bytes differ)", r,
              test_files_differ(a, b));
    }
}

/* ---- gradient buckets (dist.bucket_mb) ---------------------------------------------------------------- */

/* Two ranks with dist.bucket_mb small enough that TD3's blocks average in buckets during the backward (one per
 * network at 0.004 MiB, two per network at 0.0005 MiB: the 32-wide layers are about 1100 and 200 floats) end
 * with the same replicas, replays and evaluations, bit for bit, as the same run with one average per step
 * (dist.bucket_mb=0): the buckets' a+b is the block's a+b. Also with gradient accumulation (only the last
 * micro-batch issues buckets) and with the CPU worker (cpu.threads=2: buckets issued on side lanes). */
static void bucket_run(const char *dir, const char *bucket, const char *extra, rlt_progress *p) {
    const char *sets[] = {bucket, extra, NULL};
    rlt_config *cfg = config(k_td3, dir, sets);
    rlt_group *g;
    int rc = run_group(cfg, NULL, NULL, NULL, &g);
    CHECK(rc == RLT_OK, "%s %s: run: %s", bucket, extra, rlt_group_errmsg(g));
    rlt_trainer_progress(rlt_group_member(g, 0), p);
    rlt_group_free(g);
    rlt_config_free(cfg);
}

static void buckets_same(const char *root) {
    static const char *const extras[] = {"train.grad_accum_steps=1", "train.grad_accum_steps=2", "cpu.threads=2"};
    static const char *const buckets[] = {"dist.bucket_mb=0.004", "dist.bucket_mb=0.0005"};
    for (int e = 0; e < 3; e++) {
        char d0[700], d1[700], a[800], b[800];
        rlt_progress p0, p1;
        snprintf(d0, sizeof d0, "%s/e%d_b0", root, e);
        bucket_run(d0, "dist.bucket_mb=0", extras[e], &p0);
        for (int k = 0; k < 2; k++) {
            snprintf(d1, sizeof d1, "%s/e%d_b%d", root, e, k + 1);
            bucket_run(d1, buckets[k], extras[e], &p1);
            CHECK(p0.updates == p1.updates && p0.last_eval_return == p1.last_eval_return,
                  "%s, %s: the same updates and evaluation as one average (%.6f, %.6f)", buckets[k], extras[e],
                  p0.last_eval_return, p1.last_eval_return);
            for (int r = 0; r < 2; r++) {
                snprintf(a, sizeof a, "%s/rank_%d/final.ckpt", d0, r);
                snprintf(b, sizeof b, "%s/rank_%d/final.ckpt", d1, r);
                CHECK(test_ckpt_same_replica(a, b) && test_ckpt_same_tensor(a, b, "replay.obs") == 1,
                      "%s, %s, rank %d: the same parameters, moments, targets and replay as dist.bucket_mb=0",
                      buckets[k], extras[e], r);
            }
        }
    }
}

/* ---- a user environment whose second rank fails ---------------------------------------------------- */

typedef struct line_world {
    float x;
    int64_t steps;
    int64_t fail_at; /* 0: never */
    int64_t hang_at; /* 0: never; else sleeps 3 s once at that step */
} line_world;

static int line_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    line_world *w = user;
    (void)instance;
    w->x = (float)(seed % 7) * 0.1f - 0.3f;
    ((float *)obs)[0] = w->x;
    return 0;
}

static int line_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *term,
                     uint8_t *trunc) {
    line_world *w = user;
    (void)instance;
    (void)term;
    (void)trunc;
    if (w->fail_at && ++w->steps >= w->fail_at) return -1;
    if (w->hang_at && ++w->steps == w->hang_at) {
        struct timespec ts = {3, 0};
        nanosleep(&ts, NULL);
    }
    w->x += 0.1f * ((const float *)action)[0];
    ((float *)obs)[0] = w->x;
    *reward = -w->x * w->x;
    return 0;
}

static void failing_rank(const char *dir, int hang) {
    static const float lo[1] = {-1.0f}, hi[1] = {1.0f};
    line_world w[2] = {{0, 0, 0, 0}, {0, 0, hang ? 0 : 700, hang ? 700 : 0}};
    rlt_env_callbacks cb[2];
    const rlt_env_callbacks *envs[2] = {&cb[0], &cb[1]};
    for (int k = 0; k < 2; k++) {
        memset(&cb[k], 0, sizeof cb[k]);
        cb[k].struct_size = sizeof cb[k];
        cb[k].name = "line";
        cb[k].obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
        cb[k].act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, lo, hi};
        cb[k].max_episode_steps = 50;
        cb[k].user = &w[k];
        cb[k].reset = line_reset;
        cb[k].step = line_step;
    }
    rlt_config *cfg = config(k_td3, dir, (const char *const[]){"dist.timeout_s=1", NULL});
    rlt_group *g;
    int rc = rlt_group_init_env(cfg, envs, 2, &g);
    CHECK(rc == RLT_OK, "init with user environments: %s", rlt_group_errmsg(g));
    if (rc == RLT_OK && hang) {
        /* Rank 1 stops answering for 3 s: rank 0 gives up after dist.timeout_s (1 s), naming it. */
        rc = rlt_group_run(g, NULL, NULL);
        CHECK(rc == RLT_ERUNTIME, "a rank that hangs fails the run (%d)", rc);
        CHECK(strstr(rlt_group_errmsg(g), "rank 0 (cpu) waited 1 s (dist.timeout_s)") &&
              strstr(rlt_group_errmsg(g), "rank 1 (cpu) never arrived"), "the message names both ranks and the "
              "timeout: %s", rlt_group_errmsg(g));
    } else if (rc == RLT_OK) {
        rc = rlt_group_run(g, NULL, NULL);
        CHECK(rc != RLT_OK && rc != RLT_EINTERRUPTED, "the run fails (%d)", rc);
        CHECK(strstr(rlt_group_errmsg(g), "rank 1") != NULL, "the message names the failing rank: %s",
              rlt_group_errmsg(g));
        rlt_progress p0;
        rlt_trainer_progress(rlt_group_member(g, 0), &p0);
        CHECK(p0.env_steps < 2000, "rank 0 stopped too, at step %lld", (long long)p0.env_steps);
    }
    rlt_group_free(g);
    rlt_config_free(cfg);
}

/* ---- refusals -------------------------------------------------------------------------------------- */

static void refused(const char *base, const char *set, const char *want) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, base, "dp.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    int rc = rlt_config_set(cfg, set);
    if (rc == RLT_OK) rc = rlt_config_validate(cfg);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_config_errmsg(cfg), want), "%s refused (%s): %s", set, want,
          rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
}

/* device: [..] is the list key written where one device goes; the dump writes it back as devices, which reads
 * back to the same config; a bad entry is refused with file:line:column and the key. */
static void device_list_syntax(void) {
    rlt_config *cfg, *again;
    static char dump[1 << 16], dump2[1 << 16];
    CHECK(rlt_config_init(&cfg) == RLT_OK && rlt_config_init(&again) == RLT_OK, "configs");
    CHECK(rlt_config_load_string(cfg, "algo: td3\ndevice: [cuda:1, cuda]\ntrain: {batch_size: 64}\n", "l.yaml") ==
          RLT_OK, "device as a list: %s", rlt_config_errmsg(cfg));
    rlt_config_dump(cfg, dump, sizeof dump);
    CHECK(strstr(dump, "\ndevices: [cuda:1, cuda:0]\n") != NULL, "the dump writes the list (a bare cuda is GPU 0):\n%s", dump);
    CHECK(rlt_config_load_string(again, dump, "dump.yaml") == RLT_OK, "the dump reads back: %s", rlt_config_errmsg(again));
    rlt_config_dump(again, dump2, sizeof dump2);
    CHECK(strcmp(dump, dump2) == 0, "and dumps the same");
    CHECK(rlt_config_ranks(again) == 2, "two ranks");
    CHECK(rlt_config_load_string(again, "devices: [cuda:0, gpu1]\n", "bad.yaml") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(again), "bad.yaml:1:") && strstr(rlt_config_errmsg(again), "key 'devices'") &&
              strstr(rlt_config_errmsg(again), "entry 2: 'gpu1' is not a device"),
          "a bad entry names file, line, key and entry: %s", rlt_config_errmsg(again));
    rlt_config_free(cfg);
    rlt_config_free(again);
}

static void refusals(const char *dir) {
    refused(k_td3, "train.batch_size=63", "does not split evenly over the 2 devices");
    refused(k_td3, "memory.on_oom=cpu", "use memory.on_oom: fail");
    refused(k_td3, "devices=[cpu, cuda:0]", "mixes cpu (entry 1) and cuda:0 (entry 2)");
    refused(k_td3, "device=[cuda:1, cuda:1]", "entry 2 (cuda:1) repeats entry 1");
    refused(k_td3, "devices=[cpu, auto]", "entry 2: 'auto' is not a device");
    refused(k_td3, "devices=cpu", "expected a list of devices");
    /* A rank that does not fit its device: exit 3's status, the rank and device named, nothing trained. */
    rlt_config *small = config(k_td3, dir, (const char *const[]){"memory.budget_mb=0.05", NULL});
    rlt_group *g;
    CHECK(rlt_group_init(small, &g) == RLT_ENOFIT && strstr(rlt_group_errmsg(g), "cpu (rank 0 of 2 of the data-parallel run)"),
          "a rank over budget is RLT_ENOFIT naming it: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(small);
    /* One trainer is one device; several seeds over devices are a seed group, not ranks. */
    rlt_config *cfg = config(k_td3, dir, NULL);
    rlt_trainer *tr;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_ECONFIG && strstr(rlt_trainer_errmsg(tr), "use rlt_group_init"),
          "rlt_trainer_init refuses a device list: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    CHECK(rlt_config_set(cfg, "train.num_seeds=3") == RLT_OK && rlt_config_ranks(cfg) == 0 && rlt_group_count(cfg) == 3,
          "seeds over devices: a seed group of 3, no ranks");
    CHECK(rlt_config_set(cfg, "train.num_seeds=1") == RLT_OK && rlt_config_set(cfg, "devices=[cpu]") == RLT_OK &&
          rlt_config_ranks(cfg) == 0 && rlt_group_count(cfg) == 0, "one device in the list: a plain run");
    rlt_config_free(cfg);
}

/* Several seeds with a device list: a seed group whose seed k runs on device k mod R, each the single run of its
 * seed (on the CPU byte for byte, as any seed group member). */
static void seeds_over_devices(const char *dir) {
    char group[600], single[600], a[700], b[700];
    snprintf(group, sizeof group, "%s/group", dir);
    snprintf(single, sizeof single, "%s/single", dir);
    rlt_config *cfg = config(k_td3, group, (const char *const[]){"train.seeds=[3, 4, 5]", NULL});
    rlt_group *g;
    int rc = run_group(cfg, NULL, NULL, NULL, &g);
    CHECK(rc == RLT_OK && rlt_group_ranks(g) == 0 && rlt_group_size(g) == 3, "3 seeds over 2 devices: %s",
          rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    cfg = config(k_td3, single, (const char *const[]){"devices=[]", "seed=5", NULL});
    rlt_trainer *tr;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK && rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "single run: %s",
          rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    snprintf(a, sizeof a, "%s/seed_5/final.ckpt", group);
    snprintf(b, sizeof b, "%s/final.ckpt", single);
    CHECK(test_files_differ(a, b) == 0, "seed 5 of the group (on the first device again) = its single run (%ld bytes "
          "differ)", test_files_differ(a, b));
}

int main(void) {
    comm_collectives();
    char whole[600]; /* test_tmpdir's buffer is reused by its next call */
    snprintf(whole, sizeof whole, "%s", test_tmpdir("tmp_dp_td3"));
    trains_replicas(k_td3, whole, "td3", "replay.obs");
    trains_replicas(k_dqn, test_tmpdir("tmp_dp_dqn"), "dqn", "replay.frame");
    stop_and_resume(whole, test_tmpdir("tmp_dp_stop"));
    buckets_same(test_tmpdir("tmp_dp_buckets"));
    failing_rank(test_tmpdir("tmp_dp_fail"), 0);
    failing_rank(test_tmpdir("tmp_dp_hang"), 1);
    device_list_syntax();
    refusals(test_tmpdir("tmp_dp_refuse"));
    seeds_over_devices(test_tmpdir("tmp_dp_seeds"));
    return test_summary("test_data_parallel");
}
