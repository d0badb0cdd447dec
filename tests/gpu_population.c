/* gpu_population.c: populations (docs/populations.md) on cuda:0 with train.seed_batching.
 * - Four TD3 members whose td3.actor_lr, critic_lr, tau, gamma, policy_noise and noise_clip (and seeds) differ run
 *   as ONE batched update graph, which reads each member's scalars from its own hparams block
 *   (engine/agent_core.h): each member ends with the final.ckpt (byte for byte) and metrics.csv (but wall_s) of the
 *   single run with its values on the GPU. Were a member's kernels to read the lead's values, its checkpoint would
 *   differ.
 * - The same for four DQN members whose dqn.lr, gamma, max_grad_norm (all above 0), tau and eps_end differ.
 * - Schedules are host code: TD3 members of different train.start_steps, updates_per_step and exploration_noise,
 *   and DQN members of different learning_starts, train_freq, gradient_steps and target_update_every, batch too,
 *   each again its single run (the lock-step pairs each member's k-th update with the others' k-th).
 * - td3.policy_delay changes which update variant runs: members that differ in it are told so and run a graph each,
 *   each member still its single run.
 * - A population that varies only the seed runs batched, each member its single run.
 * Skipped (77) without a GPU. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

#define MAX_MEMBERS 4

static const char *const k_td3 =
    "algo: td3\ndevice: cuda:0\n"
    "train: {total_steps: 3000, start_steps: 500, batch_size: 128, eval_every: 1500, eval_episodes: 2, "
    "progress_every_s: 0, seed_batching: true}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 4000, location: device}\n";

static const char *const k_dqn =
    "algo: dqn\ndevice: cuda:0\nenv: {name: cartpole}\n"
    "train: {total_steps: 4000, batch_size: 64, eval_every: 2000, eval_episodes: 2, progress_every_s: 0, "
    "seed_batching: true}\n"
    "replay: {capacity: 5000, location: device}\n"
    "network: {hidden: [64, 64]}\n"
    "dqn: {learning_starts: 500, train_freq: 4, gradient_steps: 2, target_update_every: 100}\n";

static rlt_config *config(const char *base, const char *extra, const char *out_dir) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, base, "pop.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    if (extra) CHECK(rlt_config_load_string(cfg, extra, "extra.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    return cfg;
}

/* A population (pop, n members) of base whose log must say `expect`; then member k against the single run of base
 * with --set single[k][0..] (up to 8 key=value settings, NULL-terminated). */
static void population_vs_single(const char *base, const char *tag, const char *pop, int n,
                                 const char *const single[MAX_MEMBERS][9], const char *expect) {
    char gdir[600], sdir[600], what[160];
    snprintf(what, sizeof what, "tmp_gpu_pop_%s", tag);
    snprintf(gdir, sizeof gdir, "%s", test_tmpdir(what));
    rlt_config *cfg = config(base, pop, gdir);
    (void)test_group_logged(cfg, tag, expect);
    for (int k = 0; k < n; k++) {
        snprintf(what, sizeof what, "tmp_gpu_pop_%s_single%d", tag, k);
        snprintf(sdir, sizeof sdir, "%s", test_tmpdir(what));
        rlt_config *one = config(base, NULL, sdir);
        for (int j = 0; single[k][j]; j++)
            CHECK(rlt_config_set(one, single[k][j]) == RLT_OK, "%s: %s: %s", tag, single[k][j], rlt_config_errmsg(one));
        char mdir[640];
        snprintf(mdir, sizeof mdir, "%s/member_%d", gdir, k);
        snprintf(what, sizeof what, "%s member %d", tag, k);
        test_single_same(one, sdir, mdir, what);
    }
}

int main(void) {
    rlt_config *probe = config(k_td3, NULL, test_tmpdir("tmp_gpu_pop_probe"));
    rlt_trainer *tr;
    int rc = rlt_trainer_init(probe, &tr);
    rlt_trainer_free(tr);
    rlt_config_free(probe);
    if (rc == RLT_EDEVICE) test_skip("no GPU: cuda:0 does not open");
    const char *batched = "run as one batched graph";

    const char *const td3[MAX_MEMBERS][9] = {
        {"td3.actor_lr=1e-4", "td3.critic_lr=1e-3", "td3.tau=0.005", "td3.gamma=0.99", "td3.policy_noise=0.2",
         "td3.noise_clip=0.5", "seed=3", NULL},
        {"td3.actor_lr=1e-3", "td3.critic_lr=3e-4", "td3.tau=0.01", "td3.gamma=0.98", "td3.policy_noise=0.1",
         "td3.noise_clip=0.3", "seed=3", NULL},
        {"td3.actor_lr=3e-4", "td3.critic_lr=1e-3", "td3.tau=0.002", "td3.gamma=0.95", "td3.policy_noise=0.3",
         "td3.noise_clip=0.5", "seed=4", NULL},
        {"td3.actor_lr=5e-4", "td3.critic_lr=2e-3", "td3.tau=0.02", "td3.gamma=0.999", "td3.policy_noise=0.05",
         "td3.noise_clip=0.2", "seed=5", NULL},
    };
    population_vs_single(k_td3, "td3_values",
                         "population:\n  td3.actor_lr: [1e-4, 1e-3, 3e-4, 5e-4]\n"
                         "  td3.critic_lr: [1e-3, 3e-4, 1e-3, 2e-3]\n"
                         "  td3.tau: [0.005, 0.01, 0.002, 0.02]\n  td3.gamma: [0.99, 0.98, 0.95, 0.999]\n"
                         "  td3.policy_noise: [0.2, 0.1, 0.3, 0.05]\n  td3.noise_clip: [0.5, 0.3, 0.5, 0.2]\n"
                         "  seed: [3, 3, 4, 5]\n",
                         4, td3, batched);

    const char *const dqn[MAX_MEMBERS][9] = {
        {"dqn.lr=1e-3", "dqn.gamma=0.99", "dqn.max_grad_norm=10", "dqn.tau=1.0", "dqn.eps_end=0.05", "seed=1", NULL},
        {"dqn.lr=5e-4", "dqn.gamma=0.95", "dqn.max_grad_norm=1", "dqn.tau=0.5", "dqn.eps_end=0.1", "seed=2", NULL},
        {"dqn.lr=2e-3", "dqn.gamma=0.9", "dqn.max_grad_norm=0.5", "dqn.tau=1.0", "dqn.eps_end=0.02", "seed=3", NULL},
        {"dqn.lr=1e-4", "dqn.gamma=0.999", "dqn.max_grad_norm=10", "dqn.tau=0.1", "dqn.eps_end=0.05", "seed=4", NULL},
    };
    population_vs_single(k_dqn, "dqn_values",
                         "population:\n  dqn.lr: [1e-3, 5e-4, 2e-3, 1e-4]\n  dqn.gamma: [0.99, 0.95, 0.9, 0.999]\n"
                         "  dqn.max_grad_norm: [10, 1, 0.5, 10]\n  dqn.tau: [1.0, 0.5, 1.0, 0.1]\n"
                         "  dqn.eps_end: [0.05, 0.1, 0.02, 0.05]\n  seed: [1, 2, 3, 4]\n",
                         4, dqn, batched);

    const char *const td3_sched[MAX_MEMBERS][9] = {
        {"train.start_steps=400", "train.updates_per_step=1", "td3.exploration_noise=0.1", "seed=6", NULL},
        {"train.start_steps=500", "train.updates_per_step=2", "td3.exploration_noise=0.2", "seed=7", NULL},
        {"train.start_steps=700", "train.updates_per_step=1", "td3.exploration_noise=0.1", "seed=8", NULL},
    };
    population_vs_single(k_td3, "td3_schedule",
                         "population:\n  train.start_steps: [400, 500, 700]\n  train.updates_per_step: [1, 2, 1]\n"
                         "  td3.exploration_noise: [0.1, 0.2, 0.1]\n  seed: [6, 7, 8]\n",
                         3, td3_sched, batched);

    const char *const dqn_sched[MAX_MEMBERS][9] = {
        {"dqn.learning_starts=500", "dqn.train_freq=4", "dqn.gradient_steps=2", "dqn.target_update_every=100",
         "seed=5", NULL},
        {"dqn.learning_starts=300", "dqn.train_freq=2", "dqn.gradient_steps=1", "dqn.target_update_every=50",
         "seed=6", NULL},
        {"dqn.learning_starts=800", "dqn.train_freq=4", "dqn.gradient_steps=1", "dqn.target_update_every=200",
         "seed=7", NULL},
    };
    population_vs_single(k_dqn, "dqn_schedule",
                         "population:\n  dqn.learning_starts: [500, 300, 800]\n  dqn.train_freq: [4, 2, 4]\n"
                         "  dqn.gradient_steps: [2, 1, 1]\n  dqn.target_update_every: [100, 50, 200]\n"
                         "  seed: [5, 6, 7]\n",
                         3, dqn_sched, batched);

    const char *const delay[MAX_MEMBERS][9] = {
        {"td3.policy_delay=2", "seed=3", NULL},
        {"td3.policy_delay=3", "seed=3", NULL},
        {"td3.policy_delay=2", "seed=4", NULL},
    };
    population_vs_single(k_td3, "td3_delay", "population:\n  td3.policy_delay: [2, 3, 2]\n  seed: [3, 3, 4]\n", 3,
                         delay, "each member runs its own update graph (train.seed_batching): the members' "
                                "td3.policy_delay differ");

    const char *const seeds[MAX_MEMBERS][9] = {{"seed=5", NULL}, {"seed=6", NULL}, {"seed=7", NULL}};
    population_vs_single(k_td3, "seeds", "population: {seed: [5, 6, 7]}\n", 3, seeds, batched);
    return test_summary("gpu_population");
}
