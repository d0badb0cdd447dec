/* test_best_ckpt.c: checkpoint.best. A run writes out_dir/best.ckpt after each evaluation that beats the best so
 * far: the state of the best evaluation's step without the replay. The best step is read from metrics.csv, and
 * best.ckpt must act as the full checkpoint of that step does (ckpt_<step>.ckpt, or final.ckpt at the last step)
 * on every observation tried, while being the smaller file (no replay). best.ckpt counts as one of a run's
 * outputs: train.overwrite removes it, and without that an out_dir holding one is refused; checkpoint.best:
 * false writes none. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "rltrain.h"

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static rlt_config *make_config(const char *out_dir, const char *best) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum_fast.yaml") == RLT_OK, "load");
    char out[700];
    snprintf(out, sizeof out, "out_dir=%s", out_dir);
    const char *sets[] = {"train.total_steps=10000", "train.eval_every=1000",
                          "checkpoint.every=1000", "checkpoint.keep=10", "train.progress_every_s=0", best, out, NULL};
    for (int i = 0; sets[i]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "--set %s", sets[i]);
    return cfg;
}

static int train(rlt_config *cfg) {
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    if (rc == RLT_OK) rc = rlt_trainer_run(tr, NULL, NULL);
    if (rc != RLT_OK) printf("run: %s\n", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    return rc;
}

/* The step of the best (first highest) evaluation in metrics.csv, or -1. */
static long best_step(const char *dir, double *best) {
    char path[700], line[512];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    long step = -1;
    *best = -INFINITY;
    while (f && fgets(line, sizeof line, f)) {
        long s, eps;
        double mean;
        if (sscanf(line, "eval,%ld,%ld,%lf", &s, &eps, &mean) == 3 && mean > *best) *best = mean, step = s;
    }
    if (f) fclose(f);
    return step;
}

static rlt_agent *load_agent(rlt_config *cfg, const char *path) {
    float low = -2.0f, high = 2.0f;
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, &low, &high};
    rlt_agent *ag;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "agent init: %s", rlt_agent_errmsg(ag));
    CHECK(rlt_agent_load(ag, path) == RLT_OK, "load %s: %s", path, rlt_agent_errmsg(ag));
    return ag;
}

int main(void) {
    const char *dir = test_tmpdir("best_ckpt");
    char run[600], path[700], ref[700];
    snprintf(run, sizeof run, "%s/run", dir);
    rlt_config *cfg = make_config(run, "checkpoint.best=true");
    CHECK(train(cfg) == RLT_OK, "run with checkpoint.best");

    double best;
    long step = best_step(run, &best);
    CHECK(step > 0, "an evaluation in metrics.csv");
    snprintf(path, sizeof path, "%s/best.ckpt", run);
    if (step == 10000) snprintf(ref, sizeof ref, "%s/final.ckpt", run);
    else snprintf(ref, sizeof ref, "%s/ckpt_%ld.ckpt", run, step);
    printf("best evaluation %.1f at step %ld; best.ckpt %ld bytes, %s %ld bytes\n", best, step, file_size(path), ref,
           file_size(ref));
    CHECK(file_size(path) > 0 && file_size(ref) > file_size(path), "best.ckpt written, smaller than %s (no replay)", ref);

    /* The same policy as the full checkpoint of the best step, on 64 observations across the state space. */
    rlt_agent *a = load_agent(cfg, path), *b = load_agent(cfg, ref);
    float obs[64 * 3], act_a[64], act_b[64];
    for (int i = 0; i < 64; i++) {
        double th = 6.283185307 * i / 64.0;
        obs[3 * i] = (float)cos(th), obs[3 * i + 1] = (float)sin(th), obs[3 * i + 2] = (float)(i % 17 - 8);
    }
    CHECK(rlt_agent_act(a, obs, 64, 0, act_a) == RLT_OK && rlt_agent_act(b, obs, 64, 0, act_b) == RLT_OK, "act");
    CHECK(memcmp(act_a, act_b, sizeof act_a) == 0, "best.ckpt acts as %s does", ref);
    /* and not as the final policy does, unless the best evaluation was the last */
    if (step != 10000) {
        snprintf(ref, sizeof ref, "%s/final.ckpt", run);
        rlt_agent *c = load_agent(cfg, ref);
        float act_c[64];
        CHECK(rlt_agent_act(c, obs, 64, 0, act_c) == RLT_OK, "act");
        CHECK(memcmp(act_a, act_c, sizeof act_a) != 0, "best.ckpt is not final.ckpt's policy");
        rlt_agent_free(c);
    }
    rlt_agent_free(a);
    rlt_agent_free(b);

    rlt_config_free(cfg);

    /* best.ckpt is one of a run's outputs: a run with checkpoint.best: false and train.overwrite into that out_dir
     * removes it with the rest (no stale best policy beside the new run) and writes none. */
    cfg = make_config(run, "checkpoint.best=false");
    CHECK(rlt_config_set(cfg, "train.overwrite=true") == RLT_OK, "overwrite");
    CHECK(train(cfg) == RLT_OK, "run without checkpoint.best");
    CHECK(file_size(path) < 0, "no best.ckpt with checkpoint.best: false");
    rlt_config_free(cfg);

    /* An out_dir holding only an earlier run's best.ckpt is refused without train.overwrite. */
    snprintf(run, sizeof run, "%s/only_best", dir);
    mkdir(run, 0755);
    snprintf(ref, sizeof ref, "%s/best.ckpt", run);
    CHECK(test_write_file(ref, "x", 1) == 0, "write %s", ref);
    cfg = make_config(run, "checkpoint.best=true");
    CHECK(train(cfg) == RLT_ECONFIG, "a run into an out_dir with an earlier best.ckpt is refused");
    rlt_config_free(cfg);
    return test_summary("test_best_ckpt");
}
