/* gpu_train.c: TD3 and DQN on the GPU, end to end.
 * - Trajectory parity: from the same seed (so the same initial weights, replay indices and target noise,
 *   all from Philox) and the same replay contents, 30 TD3 updates on cuda:0 match the CPU. Tolerance:
 *   GEMMs sum in another order (relative 1e-6 per update), and Adam's first steps move each weight by
 *   about lr * sign(g), so a gradient that rounds to the other sign moves a weight 2 lr the other way;
 *   the parameters' relative distance stays below 1e-3 while a wrong op gives order 1.
 * - Determinism: the same run twice on the same GPU gives bit-identical parameters.
 * - No allocation after init: the engine hook counts none, and the device's free memory (read by opening
 *   a probe backend, which frees what it takes when closed) is the same before and after 5,000 updates.
 * - Compact replay (replay.obs_dtype fp16 and bf16): the GPU's first batch is bit-identical to the CPU's (the
 *   host rounds the observations the same way for both, and the gathers widen them exactly), and 30 updates
 *   keep the trajectory parity above.
 * - Convolutions on parallel lanes: DQN on MinAtar Breakout (a conv torso) runs its three forwards on three lanes,
 *   each convolution's kernels on its lane's stream and each set with its own workspace; 2,000 updates give a final
 *   checkpoint byte-identical to the run with every op on one lane (RLT_CUDA_LANES=1).
 * - Acting beside the updates (train/agent.c): a TD3 Pendulum run acts beside its critic-only updates (half of its
 *   actions after the first update come back while an update still runs) and ends with the final.ckpt and the
 *   metrics.csv (but wall_s) of the same run with acting waiting for every update (RLT_ACT_ASIDE=0), which acts
 *   beside none; TD3 with an actor whose forward calls the library (hidden 2048: K beyond linear.cu's kernels) falls
 *   back to waiting at its first aside action and still gives the waiting run's checkpoint.
 * - Transition stores without a wait (engine/replay.c's staging ring): TD3 Pendulum and DQN CartPole runs of 3,000
 *   steps sync once a lap of the ring's 256 rows, not once a store, and end with the final.ckpt and metrics.csv (but
 *   wall_s) of the same runs with every store synced (RLT_STORE_SYNC=1).
 * - Learning: TD3 on the built-in Pendulum reaches -250 within 20,000 steps and DQN on CartPole 475
 *   within 50,000 steps on the GPU, the CPU tests' thresholds.
 * Skipped without a usable GPU. */
#include <math.h>
#include <string.h>

#include "../agents/td3.h"
#include "agent.h"
#include "backend_registry.h"
#include "harness.h"
#include "mem.h"

static rlt_agent *td3_agent(const char *device) {
    char set[64];
    snprintf(set, sizeof set, "device=%s", device);
    const char *sets[] = {set, NULL};
    int rc;
    rlt_agent *ag = test_td3_synthetic(sets, &rc);
    CHECK(ag || rc == RLT_EDEVICE, "%s: init failed with %d", device, rc);
    return ag;
}

static float params_a[1 << 20], params_b[1 << 20];

static double param_distance(rlt_agent *a, rlt_agent *b) {
    uint64_t n = td3_state(a)->n_total;
    CHECK(n <= (1 << 20) && agent_fetch(a, params_a, td3_state(a)->params, n * 4) == RLT_OK &&
              agent_fetch(b, params_b, td3_state(b)->params, n * 4) == RLT_OK, "fetch");
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        num += ((double)params_a[i] - params_b[i]) * ((double)params_a[i] - params_b[i]);
        den += (double)params_b[i] * params_b[i];
    }
    return sqrt(num / den);
}

static uint64_t device_free(void) {
    rlt_backend bk;
    rlt_err e;
    if (rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) != RLT_OK) return 0;
    uint64_t f = bk.device_free;
    rlt_backend_close(&bk);
    return f;
}

static void learn(const char *config, double threshold, int64_t steps) {
    rlt_progress p;
    test_train_config(config, "cuda:0", "gpu_learn", &p);
    CHECK(p.env_steps == steps && p.best_eval_return >= threshold, "%s reached %.1f on cuda:0 (need %.0f)", config,
          p.best_eval_return, threshold);
}

static float batch_c[256 * 23], batch_g[256 * 23];

/* TD3 with observations stored as obs_dtype, on the CPU and on cuda:0: the first update's gathered batch
 * ([obs | action] rows and the next observations) bit for bit, then 29 more updates within the parity bound. */
static void compact_parity(const char *obs_dtype) {
    char dt[64];
    snprintf(dt, sizeof dt, "replay.obs_dtype=%s", obs_dtype);
    const char *sc[] = {"device=cpu", dt, NULL}, *sg[] = {"device=cuda:0", dt, NULL};
    int rc;
    rlt_agent *cpu = test_td3_synthetic(sc, &rc), *gpu = test_td3_synthetic(sg, &rc);
    CHECK(cpu && gpu, "%s agents: %d", obs_dtype, rc);
    if (!cpu || !gpu) {
        rlt_agent_free(cpu);
        rlt_agent_free(gpu);
        return;
    }
    int32_t done;
    CHECK(rlt_agent_update(cpu, &done) == RLT_OK && rlt_agent_update(gpu, &done) == RLT_OK, "first update: %s",
          rlt_agent_errmsg(gpu));
    int32_t O = td3_state(cpu)->O, ld = td3_state(cpu)->O + td3_state(cpu)->A, B = td3_state(cpu)->Bm;
    CHECK(B * ld <= 256 * 23, "batch fits the test's buffers");
    uint64_t bytes = (uint64_t)B * ld * 4;
    int bad = 0;
    CHECK(agent_fetch(gpu, batch_g, td3_state(gpu)->s_a, bytes) == RLT_OK, "fetch s_a");
    memcpy(batch_c, td3_state(cpu)->s_a, bytes);
    bad += memcmp(batch_c, batch_g, bytes) != 0;
    /* s2_a2's action columns hold pi'(s') by now (GEMM order differs); its observation columns are the gather's. */
    CHECK(agent_fetch(gpu, batch_g, td3_state(gpu)->s2_a2, bytes) == RLT_OK, "fetch s2_a2");
    memcpy(batch_c, td3_state(cpu)->s2_a2, bytes);
    for (int32_t i = 0; i < B; i++) bad += memcmp(batch_c + i * ld, batch_g + i * ld, (size_t)O * 4) != 0;
    CHECK(bad == 0, "obs_dtype %s: the GPU's gathered batch differs from the CPU's (%d)", obs_dtype, bad);
    for (int k = 1; k < 30; k++) {
        CHECK(rlt_agent_update(cpu, &done) == RLT_OK, "cpu update");
        CHECK(rlt_agent_update(gpu, &done) == RLT_OK, "gpu update: %s", rlt_agent_errmsg(gpu));
    }
    double d = param_distance(gpu, cpu);
    printf("TD3 with obs_dtype %s: first batch bit-identical on GPU and CPU%s; after 30 updates distance %.3g\n",
           obs_dtype, bad ? " (NOT)" : "", d);
    CHECK(d < 1e-3, "obs_dtype %s trajectory parity: %.3g", obs_dtype, d);
    rlt_agent_free(gpu);
    rlt_agent_free(cpu);
}

static void conv_lanes(void) {
    const char *sets[] = {"device=cuda:0", "train.total_steps=3000", "dqn.learning_starts=1000", "train.eval_every=3000",
                          NULL};
    rlt_progress a, b;
    setenv("RLT_CUDA_LANES", "1", 1);
    test_train_config_sets("dqn_minatar_breakout.yaml", sets, "lanes1", &a);
    unsetenv("RLT_CUDA_LANES");
    test_train_config_sets("dqn_minatar_breakout.yaml", sets, "lanes4", &b);
    long d = test_files_differ("tmp_lanes1/run/final.ckpt", "tmp_lanes4/run/final.ckpt");
    printf("DQN MinAtar, %lld updates, conv torso on 1 lane vs 3: %ld checkpoint bytes differ\n", (long long)b.updates, d);
    CHECK(a.updates >= 1000 && a.updates == b.updates, "updates %lld and %lld", (long long)a.updates, (long long)b.updates);
    CHECK(d == 0, "conv forwards on parallel lanes change the result (%ld bytes differ)", d);
}

/* Acting beside the critic-only updates against acting after every update (RLT_ACT_ASIDE=0). */
static void count_acts(rlt_trainer *tr, void *user) {
    const rlt_agent *ag = rlt_trainer_agent(tr);
    uint64_t *n = user;
    n[0] = ag->acts;
    n[1] = ag->aside_acts;
}

static void act_aside_pair(const char *tag, const char *extra, int library) {
    const char *sets[] = {"device=cuda:0", "train.total_steps=3000", "train.start_steps=1000", "train.eval_every=1000",
                          extra, NULL};
    rlt_progress p[2];
    uint64_t n[2][2] = {{0, 0}, {0, 0}};
    char dir[2][96], what[96];
    for (int k = 0; k < 2; k++) {
        if (k == 0) setenv("RLT_ACT_ASIDE", "0", 1);
        else unsetenv("RLT_ACT_ASIDE");
        snprintf(dir[k], sizeof dir[k], "%s_aside%d", tag, k);
        test_train_config_then("td3_pendulum.yaml", sets, dir[k], &p[k], count_acts, n[k]);
    }
    printf("%s: %llu acting launches, %llu of them beside an update (waiting: %llu, %llu)\n", tag,
           (unsigned long long)n[1][0], (unsigned long long)n[1][1], (unsigned long long)n[0][0],
           (unsigned long long)n[0][1]);
    CHECK(n[0][0] > 2000 && n[0][0] == n[1][0] && n[0][1] == 0, "%s: the waiting run made %llu acting launches, %llu "
          "aside; the other %llu", tag, (unsigned long long)n[0][0], (unsigned long long)n[0][1], (unsigned long long)n[1][0]);
    if (library)
        CHECK(n[1][1] == 0, "%s: an actor on the library acted aside %llu times", tag, (unsigned long long)n[1][1]);
    else /* 2,000 training steps after the first update, every second one after a critic-only update (and evaluations) */
        CHECK(n[1][1] >= 900 && n[1][1] < n[1][0], "%s: %llu of %llu acting launches beside an update", tag,
              (unsigned long long)n[1][1], (unsigned long long)n[1][0]);
    char a[160], b[160];
    snprintf(a, sizeof a, "tmp_%s/run", dir[0]);
    snprintf(b, sizeof b, "tmp_%s/run", dir[1]);
    snprintf(what, sizeof what, "%s: acting beside updates against waiting", tag);
    test_same_run(b, a, what);
}

/* A single run's transition stores queue their copies without a wait (engine/replay.c): the staging ring syncs once
 * a lap (256 rows; DQN takes 2 a transition, TD3 1), and the run ends as the one whose every store synced
 * (RLT_STORE_SYNC=1): a staging row overwritten before its copy read it would change the replay. */
static void count_syncs(rlt_trainer *tr, void *user) {
    const rlt_agent *ag = rlt_trainer_agent(tr);
    uint64_t *n = user;
    n[0] = ag->replay.stage_syncs;
    n[1] = (uint64_t)ag->env_steps;
}

static void store_ring_pair(const char *yaml, const char *tag, const char *starts, uint64_t rows) {
    const char *sets[] = {"device=cuda:0", "train.total_steps=3000", "train.eval_every=1500", starts, NULL};
    rlt_progress p[2];
    uint64_t n[2][2] = {{0, 0}, {0, 0}};
    char dir[2][96], a[160], b[160], what[96];
    for (int k = 0; k < 2; k++) {
        if (k == 0) setenv("RLT_STORE_SYNC", "1", 1);
        else unsetenv("RLT_STORE_SYNC");
        snprintf(dir[k], sizeof dir[k], "%s_store%d", tag, k);
        test_train_config_then(yaml, sets, dir[k], &p[k], count_syncs, n[k]);
    }
    printf("%s: %llu transitions; the stores synced %llu times, %llu with RLT_STORE_SYNC=1\n", tag,
           (unsigned long long)n[1][1], (unsigned long long)n[1][0], (unsigned long long)n[0][0]);
    CHECK(n[0][1] == 3000 && n[1][1] == 3000 && n[0][0] >= 3000, "%s: %llu and %llu transitions; every store synced: "
          "%llu syncs", tag, (unsigned long long)n[0][1], (unsigned long long)n[1][1], (unsigned long long)n[0][0]);
    CHECK(n[1][0] >= 1 && n[1][0] <= 3000 * rows / 256 + 1, "%s: %llu syncs for 3000 stores of %llu staging rows (one "
          "a lap of 256)", tag, (unsigned long long)n[1][0], (unsigned long long)rows);
    snprintf(a, sizeof a, "tmp_%s/run", dir[0]);
    snprintf(b, sizeof b, "tmp_%s/run", dir[1]);
    snprintf(what, sizeof what, "%s: stores queued against synced", tag);
    test_same_run(b, a, what);
}

int main(void) {
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 0);
    rlt_agent *gpu = td3_agent("cuda:0");
    if (!gpu) test_skip("no usable CUDA device (cuda:0)");
    rlt_agent *cpu = td3_agent("cpu"), *gpu2 = td3_agent("cuda:0");
    int32_t done;
    for (int k = 0; k < 30; k++) {
        CHECK(rlt_agent_update(cpu, &done) == RLT_OK, "cpu update");
        CHECK(rlt_agent_update(gpu, &done) == RLT_OK, "gpu update: %s", rlt_agent_errmsg(gpu));
        CHECK(rlt_agent_update(gpu2, &done) == RLT_OK, "gpu update");
    }
    double d = param_distance(gpu, cpu);
    printf("TD3 after 30 updates: GPU vs CPU relative parameter distance %.3g\n", d);
    CHECK(d < 1e-3, "trajectory parity: %.3g", d);
    CHECK(d > 0, "the two backends really ran separately");
    d = param_distance(gpu, gpu2);
    CHECK(d == 0.0, "same seed, same GPU: bit-identical (%.3g)", d);

    uint64_t before = device_free();
    /* The engine's allocation counter is process-wide and the other agents above were made after this
     * one's seal, so count from here. */
    uint64_t allocs = rlt_mem_alloc_count();
    for (int k = 0; k < 5000; k++) CHECK(rlt_agent_update(gpu, &done) == RLT_OK, "update");
    float obs[17] = {0}, act[6];
    CHECK(rlt_agent_act(gpu, obs, 1, 1, act) == RLT_OK, "act (syncs)");
    uint64_t after = device_free();
    printf("device free memory before %llu, after 5,000 updates %llu\n", (unsigned long long)before, (unsigned long long)after);
    CHECK(before > 0 && before == after, "no device memory taken after init (%llu -> %llu)", (unsigned long long)before,
          (unsigned long long)after);
    CHECK(rlt_mem_alloc_count() == allocs, "no host allocation during 5,000 updates and an act");
    rlt_agent_free(gpu);
    rlt_agent_free(gpu2);
    rlt_agent_free(cpu);

    conv_lanes();
    act_aside_pair("td3", NULL, 0);
    act_aside_pair("td3_wide", "td3.actor_hidden=[2048, 2048]", 1);
    store_ring_pair("td3_pendulum.yaml", "td3", "train.start_steps=1000", 1);
    store_ring_pair("dqn_cartpole.yaml", "dqn", "dqn.learning_starts=1000", 2);
    compact_parity("fp16");
    compact_parity("bf16");
    learn("td3_pendulum.yaml", -250.0, 20000);
    learn("dqn_cartpole.yaml", 475.0, 50000);
    return test_summary("gpu_train");
}
