/* test_learn_td3_pendulum.c: TD3 with the authors' defaults (configs/td3_pendulum.yaml) learns the built-in
 * Pendulum-v1 within 20,000 env steps on the CPU, over seeds 1-3 trained as one seed group: the median of the
 * seeds' best mean evaluation returns must reach -250 and the median final one -300. The threshold: published
 * TD3 and SAC Pendulum-v1 results settle between -150 and -200 (the RL Baselines3 Zoo benchmark reports about
 * -150 to -170 for TD3); -250 leaves a margin, while a policy that cannot swing up scores below -700. At
 * befb921 the three seeds reached -120, -125 and -99 (final -169, -144, -99). */
#include "harness.h"
#include "rltrain.h"

enum { SEEDS = 3 };

int main(void) {
    rlt_progress p[SEEDS];
    double best[SEEDS], last[SEEDS];
    test_train_seeds("td3_pendulum.yaml", NULL, "learn_td3", SEEDS, p);
    for (int k = 0; k < SEEDS; k++) {
        CHECK(p[k].env_steps == 20000, "seed %d ran 20,000 steps, not %lld", k + 1, (long long)p[k].env_steps);
        best[k] = p[k].best_eval_return;
        last[k] = p[k].last_eval_return;
    }
    double mb = test_median(best, SEEDS), ml = test_median(last, SEEDS);
    CHECK(mb >= -250.0, "TD3's median best mean eval return over seeds 1-3 is %.1f (need >= -250)", mb);
    CHECK(ml >= -300.0, "and its median final one %.1f (need >= -300)", ml);
    return test_summary("test_learn_td3_pendulum");
}
