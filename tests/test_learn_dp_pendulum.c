/* test_learn_dp_pendulum.c: TD3 over two data-parallel ranks on the CPU (devices: [cpu, cpu]: two replicas,
 * each with its own environment, replay shard and half of every batch, averaging their gradients) learns the
 * built-in Pendulum-v1 as one run does. configs/td3_pendulum_fast.yaml (64-64, batch 100, so 50 per rank) for
 * 20,000 steps per rank, seeds 1-3: the median best evaluation return must reach -250, test_learn_td3_pendulum's
 * threshold (published TD3 and SAC Pendulum-v1 results settle between -150 and -200; a policy that cannot swing
 * up scores below -700), and the median final one -300. */
#include <stdio.h>

#include "harness.h"
#include "rltrain.h"

static int run_group(rlt_config *cfg, rlt_group **out) {
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "group init: %s", rlt_group_errmsg(g));
    if (rc == RLT_OK) rc = rlt_group_run(g, NULL, NULL);
    CHECK(rc == RLT_OK, "run: %s", rlt_group_errmsg(g));
    *out = g;
    return rc;
}

int main(void) {
    const char *dir = test_tmpdir("tmp_learn_dp");
    double best[3], last[3];
    for (int s = 0; s < 3; s++) {
        char out[700], seed[32];
        snprintf(out, sizeof out, "out_dir=%s/seed%d", dir, s + 1);
        snprintf(seed, sizeof seed, "seed=%d", s + 1);
        rlt_config *cfg;
        CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
        CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum_fast.yaml") == RLT_OK, "%s",
              rlt_config_errmsg(cfg));
        /* One thread per rank: two ranks on a 2-core machine leave no core for a worker each. */
        const char *sets[] = {"devices=[cpu, cpu]", "cpu.threads=1", "train.progress_every_s=0", seed, out, NULL};
        for (int i = 0; sets[i]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(cfg));
        rlt_group *g;
        int rc = run_group(cfg, &g);
        rlt_progress p;
        rlt_trainer_progress(rlt_group_member(g, 0), &p);
        best[s] = rc == RLT_OK ? p.best_eval_return : -1e9;
        last[s] = rc == RLT_OK ? p.last_eval_return : -1e9;
        printf("  seed %d over 2 ranks: %lld steps per rank, best eval %.1f, final %.1f\n", s + 1, (long long)p.env_steps,
               p.best_eval_return, p.last_eval_return);
        rlt_group_free(g);
        rlt_config_free(cfg);
    }
    CHECK(test_median(best, 3) >= -250.0, "median best eval %.1f over seeds 1-3 (need >= -250)", test_median(best, 3));
    CHECK(test_median(last, 3) >= -300.0, "median final eval %.1f over seeds 1-3 (need >= -300)", test_median(last, 3));
    return test_summary("test_learn_dp_pendulum");
}
