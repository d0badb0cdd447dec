/* test_resume.c: bit-exact resume on the CPU. A run of 3,000 steps (A) is compared with
 * - D: the same run stopped on request part-way (at a step that depends on timing), then resumed from its
 *   final.ckpt into the same out_dir;
 * - C: a fresh run resumed from A's periodic checkpoint at step 2,000.
 * Their final checkpoints (every parameter, target, Adam moment, counter, RNG state, the replay and the
 * loop's state) must be byte-identical to A's, and D's metrics.csv identical to A's except the wall-clock
 * column. Also: periodic checkpoints are pruned to checkpoint.keep, and a checkpoint of another config
 * is refused without changing anything. */
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "rltrain.h"

static rlt_config *config(const char *out_dir) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg,
                                 "algo: td3\nseed: 5\ntrain: {total_steps: 3000, start_steps: 500, batch_size: 64,"
                                 " eval_every: 1000, eval_episodes: 2, progress_every_s: 0.02}\n"
                                 "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 2500}\n"
                                 "checkpoint: {every: 1000, keep: 1, include_replay: true}\n",
                                 "resume.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[600];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    rlt_config_set(cfg, set);
    return cfg;
}

static int stop_at_1500(void *user, const rlt_progress *p) {
    if (p->env_steps >= 1500) rlt_trainer_request_stop((rlt_trainer *)user);
    return 0;
}

static int run(const char *out_dir, const char *resume, int stop) {
    rlt_config *cfg = config(out_dir);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    if (resume) CHECK(rlt_trainer_resume(tr, resume) == RLT_OK, "resume %s: %s", resume, rlt_trainer_errmsg(tr));
    rc = rlt_trainer_run(tr, stop ? stop_at_1500 : NULL, tr);
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    printf("%s%s: rc %d at step %lld\n", out_dir, resume ? " (resumed)" : "", rc, (long long)p.env_steps);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static char a_buf[4 << 20], b_buf[4 << 20];

static void same_file(const char *a, const char *b, int strip) {
    size_t na = test_read_text(a, a_buf, sizeof a_buf), nb = test_read_text(b, b_buf, sizeof b_buf);
    if (strip) {
        test_strip_wall(a_buf);
        test_strip_wall(b_buf);
        na = strlen(a_buf);
        nb = strlen(b_buf);
    }
    CHECK(na > 0 && na == nb && memcmp(a_buf, b_buf, na) == 0, "%s and %s are identical (%zu vs %zu bytes)", a, b, na, nb);
}

int main(void) {
    const char *dir = test_tmpdir("resume");
    char a[512], c[512], d[512], path[700], path2[700];
    snprintf(a, sizeof a, "%s/A", dir);
    snprintf(c, sizeof c, "%s/C", dir);
    snprintf(d, sizeof d, "%s/D", dir);
    CHECK(run(a, NULL, 0) == RLT_OK, "A");
    struct stat st;
    snprintf(path, sizeof path, "%s/ckpt_1000.ckpt", a);
    CHECK(stat(path, &st) != 0, "checkpoint.keep 1 pruned ckpt_1000");
    snprintf(path, sizeof path, "%s/ckpt_2000.ckpt", a);
    CHECK(stat(path, &st) == 0, "ckpt_2000 kept");

    /* D: stopped part-way, then resumed in place. */
    CHECK(run(d, NULL, 1) == RLT_EINTERRUPTED, "D stops on request");
    snprintf(path, sizeof path, "%s/final.ckpt", d);
    CHECK(run(d, path, 0) == RLT_OK, "D resumed");
    snprintf(path, sizeof path, "%s/final.ckpt", a);
    snprintf(path2, sizeof path2, "%s/final.ckpt", d);
    same_file(path, path2, 0);
    snprintf(path, sizeof path, "%s/metrics.csv", a);
    snprintf(path2, sizeof path2, "%s/metrics.csv", d);
    same_file(path, path2, 1);

    /* C: a fresh out_dir resumed from A's periodic checkpoint. */
    snprintf(path, sizeof path, "%s/ckpt_2000.ckpt", a);
    CHECK(run(c, path, 0) == RLT_OK, "C");
    snprintf(path, sizeof path, "%s/final.ckpt", a);
    snprintf(path2, sizeof path2, "%s/final.ckpt", c);
    same_file(path, path2, 0);

    /* Another config's checkpoint is refused and changes nothing. */
    rlt_config *cfg = config(c);
    rlt_config_set(cfg, "td3.critic_hidden=[32,32]");
    rlt_trainer *tr;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "init");
    snprintf(path, sizeof path, "%s/final.ckpt", a);
    CHECK(rlt_trainer_resume(tr, path) == RLT_ECHECKPOINT, "mismatched sizes refused");
    CHECK(strstr(rlt_trainer_errmsg(tr), "but this config builds 'actor_hidden: [64, 64]; critic_hidden: [32, 32]'") != NULL,
          "message: %s", rlt_trainer_errmsg(tr));
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    CHECK(p.env_steps == 0, "nothing changed");
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return test_summary("test_resume");
}
