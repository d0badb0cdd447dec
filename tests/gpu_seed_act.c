/* gpu_seed_act.c: seeds sharing a GPU act as one batched graph (train/seed_batch.h): each step one launch and one
 * sync for the whole group instead of an H2D copy, the policy's kernels, a D2H copy and a stream sync per seed, and
 * each seed still acts, explores and trains exactly as its single run does.
 * - TD3 (Pendulum, 64-64) and DQN (CartPole) groups of four seeds on cuda:0 with train.seed_batching say that they
 *   act batched and ran batched acting rounds, and each member ends with the final.ckpt (byte for byte) and the
 *   metrics.csv (but wall_s) of the single run with its seed: the acting graph computes each seed's forward with its
 *   single run's kernels (exact mode) and the exploration draws stay in each seed's thread.
 * - Eight TD3 seeds: from eight on, the acting forward is one fused launch (linear_chain.cu), still each seed's bits.
 * - DQN with env.num_envs 2: the group captures acting on 2 rows (training) and 3 (evaluation: its 3 episodes side by
 *   side, train/trainer_eval.c); CartPole's evaluation episodes end at different steps for different seeds, so seeds
 *   evaluating and seeds training (acting on the other row count, or waiting to update) meet in one lock-step, and
 *   the results are still the single runs'.
 * - Acting beside the updates: the TD3 groups' acting rounds after a critic-only batched update run beside it (the
 *   log counts them, and they are more than 30% of the acting rounds), still giving each seed its single run, which
 *   acts beside its own critic-only updates; DQN's updates all change the policy, and none of its rounds runs beside.
 * - Several batches on one GPU (8 DQN seeds in the 2 that train.seed_batches 0 picks, which the log says; 6 TD3
 *   seeds with train.seed_batches 2): two batched graphs and lock-steps each, every seed still its single run.
 * Skipped (77) without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

static const char *const k_td3 =
    "algo: td3\ndevice: cuda:0\n"
    "train: {total_steps: 3000, start_steps: 500, batch_size: 128, eval_every: 1000, eval_episodes: 2, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 4000, location: device}\n";

static const char *const k_dqn =
    "algo: dqn\ndevice: cuda:0\nenv: {name: cartpole}\n"
    "train: {total_steps: 4000, batch_size: 64, eval_every: 1000, eval_episodes: 3, progress_every_s: 0}\n"
    "replay: {capacity: 5000, location: device}\n"
    "network: {hidden: [64, 64]}\n"
    "dqn: {learning_starts: 500, train_freq: 4, gradient_steps: 2, target_update_every: 100, eps_fraction: 0.3}\n";

static rlt_config *config(const char *yaml, const char *out_dir, const char *set1, const char *set2) {
    return test_config_text(yaml, "act.yaml", out_dir, set1, set2);
}

/* The number written just before the first `phrase` in text; 0 when there is none. */
static unsigned long long number_before(const char *text, const char *phrase) {
    const char *b = strstr(text, phrase);
    if (!b) return 0;
    while (b > text && b[-1] >= '0' && b[-1] <= '9') b--;
    return strtoull(b, NULL, 10);
}

/* A batched group of seeds 1..n of yaml (plus extra), whose log must say `expect` and count batched acting rounds;
 * then each seed against its single run. */
static void group_vs_single(const char *yaml, const char *tag, int n, const char *extra, const char *expect, int beside) {
    char gdir[600], sdir[600], what[160];
    snprintf(what, sizeof what, "tmp_gpu_act_%s", tag);
    snprintf(gdir, sizeof gdir, "%s", test_tmpdir(what));
    char num[40];
    snprintf(num, sizeof num, "train.num_seeds=%d", n);
    rlt_config *cfg = config(yaml, gdir, num, extra);
    CHECK(rlt_config_set(cfg, "train.seed_batching=true") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    const char *g_log = test_group_logged(cfg, tag, expect);
    /* The first batch's counts ("seed group: N batched acting rounds and M batched update rounds ...; K acting rounds
     * ran beside ...", with " on <device>" before the colon when the group has several batches). */
    unsigned long long act_rounds = number_before(g_log, " batched acting rounds and ");
    unsigned long long update_rounds = number_before(g_log, " batched update rounds");
    CHECK(act_rounds > 0 && update_rounds > 0, "%s: batched acting rounds %llu and update rounds %llu (both > 0); log:\n%s",
          tag, act_rounds, update_rounds, g_log);
    unsigned long long aside = number_before(g_log, " acting rounds ran beside");
    printf("%s: %llu of %llu batched acting rounds ran beside an update\n", tag, aside, act_rounds);
    if (beside)
        CHECK(aside * 10 > act_rounds * 3 && aside < act_rounds, "%s: %llu of %llu acting rounds beside an update",
              tag, aside, act_rounds);
    else
        CHECK(aside == 0, "%s: %llu acting rounds beside an update", tag, aside);
    for (int s = 1; s <= n; s++) {
        snprintf(what, sizeof what, "tmp_gpu_act_%s_single%d", tag, s);
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

int main(void) {
    rlt_config *probe = config(k_td3, test_tmpdir("tmp_gpu_act_probe"), NULL, NULL);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(probe, &tr);
    rlt_trainer_free(tr);
    rlt_config_free(probe);
    if (rc == RLT_EDEVICE) test_skip("no GPU: cuda:0 does not open");
    group_vs_single(k_td3, "td3", 4, NULL, "the 4 seeds act as one batched graph (one launch and one sync per step for all) on 1 row", 1);
    group_vs_single(k_dqn, "dqn", 4, NULL, "the 4 seeds act as one batched graph (one launch and one sync per step for all) on 1 row", 0);
    group_vs_single(k_td3, "td3_8", 8, "train.seed_batches=1", "the 8 seeds act as one batched graph (one launch and one sync per step for all) on 1 row", 1);
    group_vs_single(k_dqn, "dqn_envs2", 4, "env.num_envs=2",
                    "on 2 rows (training) and 3 rows (evaluation)", 0);
    group_vs_single(k_dqn, "dqn_batches2", 8, NULL, "2 batches a GPU (train.seed_batches 0 picks", 0);
    group_vs_single(k_td3, "td3_batches2", 6, "train.seed_batches=2", "the 3 seeds on cuda:0", 1);
    return test_summary("gpu_seed_act");
}
