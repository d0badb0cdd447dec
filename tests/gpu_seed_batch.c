/* gpu_seed_batch.c: seeds sharing a GPU run one batched update graph (train/seed_batch.h), and each seed still
 * trains exactly as its single run does.
 * - TD3 (Pendulum, 64-64) and DQN (CartPole) groups of three and of eight seeds on cuda:0 with train.seed_batching
 *   say they run batched, and each member ends with the final.ckpt (byte for byte) and metrics.csv (but wall_s) of
 *   the single run with its seed: block z of every batched kernel computes agent z's update and nothing else (from
 *   eight seeds on, with each network's forward fused into one launch: linear_chain.cu).
 *   Their device arenas lie at one stride (rlt_backend.span: mapped through CUDA's virtual memory management), which
 *   the group's log states.
 * - A group whose replay is in host memory cannot batch (a batched kernel moves device-arena pointers only): it
 *   says why, each seed runs its own graphs, and the results are again the single runs'. So does a bf16 group,
 *   whose products are cuBLASLt's (it used to be told only that the seeds' plans differ).
 * Skipped (77) without a GPU. */
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

int main(void) {
    rlt_config *probe = config(k_td3, test_tmpdir("tmp_gpu_batch_probe"), NULL, NULL);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(probe, &tr);
    rlt_trainer_free(tr);
    rlt_config_free(probe);
    if (rc == RLT_EDEVICE) test_skip("no GPU: cuda:0 does not open");
    /* The batched seeds' device arenas are mapped at one stride (rlt_backend.span), which the log states. */
    group_vs_single(k_td3, "td3", 3, NULL, "device arenas lie");
    group_vs_single(k_dqn, "dqn", 3, NULL, "run as one batched graph");
    /* From 8 seeds on, a network's forward is one launch (linear_chain.cu). */
    group_vs_single(k_td3, "td3_8", 8, NULL, "device arenas lie");
    group_vs_single(k_dqn, "dqn_8", 8, NULL, "run as one batched graph");
    group_vs_single(k_td3, "td3_host_replay", 3, "replay.location=host",
                    "each seed runs its own update graph: the replay is in host memory");
    group_vs_single(k_td3, "td3_bf16", 3, "precision=bf16",
                    "each seed runs its own update graph: the plan computes in bf16");
    return test_summary("gpu_seed_batch");
}
