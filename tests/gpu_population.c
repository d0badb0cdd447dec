/* gpu_population.c: populations (docs/populations.md) on cuda:0 with train.seed_batching.
 * - Members whose hyperparameters differ (td3.actor_lr, td3.tau) cannot share the batched update graph, which bakes
 *   one member's scalars into its kernels: the group says so, runs a graph per member, and each member ends with
 *   the final.ckpt (byte for byte) and metrics.csv (but wall_s) of the single run with its values on the GPU.
 * - A population that varies only the seed still runs as one batched graph, each member again its single run.
 * Skipped (77) without a GPU. */
#include <string.h>

#include "harness.h"
#include "rltrain.h"

static const char *const k_td3 =
    "algo: td3\ndevice: cuda:0\n"
    "train: {total_steps: 3000, start_steps: 500, batch_size: 128, eval_every: 1500, eval_episodes: 2, "
    "progress_every_s: 0, seed_batching: true}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 4000, location: device}\n";

static char g_log[8192];

static void on_log(void *user, int level, const char *message) {
    (void)user;
    (void)level;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", message);
}

static rlt_config *config(const char *extra, const char *out_dir) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, k_td3, "pop.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    if (extra) CHECK(rlt_config_load_string(cfg, extra, "extra.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    return cfg;
}

/* A population (pop, 3 members) whose log must say `expect`; then member k against the single run of single[k]. */
static void population_vs_single(const char *tag, const char *pop, const char *const single[3], const char *expect) {
    char gdir[600], sdir[600], what[160];
    snprintf(what, sizeof what, "tmp_gpu_pop_%s", tag);
    snprintf(gdir, sizeof gdir, "%s", test_tmpdir(what));
    rlt_config *cfg = config(pop, gdir);
    g_log[0] = '\0';
    rlt_log_set_callback(on_log, NULL);
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "%s: group init: %s", tag, rlt_group_errmsg(g));
    if (rc == RLT_OK) rc = rlt_group_run(g, NULL, NULL);
    CHECK(rc == RLT_OK, "%s: group run: %s", tag, rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    rlt_log_set_callback(NULL, NULL);
    CHECK(strstr(g_log, expect) != NULL, "%s: the group's log says '%s'; it says:\n%s", tag, expect, g_log);
    for (int k = 0; k < 3; k++) {
        snprintf(what, sizeof what, "tmp_gpu_pop_%s_single%d", tag, k);
        snprintf(sdir, sizeof sdir, "%s", test_tmpdir(what));
        rlt_config *one = config(single[k], sdir);
        rlt_trainer *tr;
        rc = rlt_trainer_init(one, &tr);
        CHECK(rc == RLT_OK, "%s: single init: %s", tag, rlt_trainer_errmsg(tr));
        if (rc == RLT_OK) CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "%s: single run: %s", tag, rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        rlt_config_free(one);
        char mdir[640];
        snprintf(mdir, sizeof mdir, "%s/member_%d", gdir, k);
        snprintf(what, sizeof what, "%s member %d", tag, k);
        test_same_run(mdir, sdir, what);
    }
}

int main(void) {
    rlt_config *probe = config(NULL, test_tmpdir("tmp_gpu_pop_probe"));
    rlt_trainer *tr;
    int rc = rlt_trainer_init(probe, &tr);
    rlt_trainer_free(tr);
    rlt_config_free(probe);
    if (rc == RLT_EDEVICE) test_skip("no GPU: cuda:0 does not open");
    const char *values[3] = {"td3: {actor_lr: 1e-4, tau: 0.005}\nseed: 3\n", "td3: {actor_lr: 1e-3, tau: 0.01}\nseed: 3\n",
                             "td3: {actor_lr: 3e-4, tau: 0.002}\nseed: 4\n"};
    population_vs_single("values", "population:\n  td3.actor_lr: [1e-4, 1e-3, 3e-4]\n  td3.tau: [0.005, 0.01, 0.002]\n"
                         "  seed: [3, 3, 4]\n", values,
                         "each member runs its own update graph: the members' td3.actor_lr differ");
    const char *seeds[3] = {"seed: 5\n", "seed: 6\n", "seed: 7\n"};
    population_vs_single("seeds", "population: {seed: [5, 6, 7]}\n", seeds, "run as one batched graph");
    return test_summary("gpu_population");
}
