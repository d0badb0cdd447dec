/* test_learn_dqn_cartpole.c: DQN (configs/dqn_cartpole.yaml, RL Baselines3 Zoo's tuned CartPole-v1 settings)
 * learns the built-in CartPole-v1 within 50,000 env steps on the CPU, over seeds 1-5 trained as one seed group:
 * the median of the seeds' best mean evaluation returns must reach 475, Gymnasium's reward threshold for
 * CartPole-v1 (the zoo reports 500 for these settings). The median needs three of the five seeds there; at
 * befb921 four reached 500 and seed 2 peaked at 133.8. The final evaluation is not asserted: with these
 * settings DQN's greedy policy on CartPole still swings between 500 and under 150 from one evaluation to the
 * next late in the run (final evaluations 37-500 across the five seeds). */
#include "harness.h"
#include "rltrain.h"

enum { SEEDS = 5 };

int main(void) {
    rlt_progress p[SEEDS];
    double best[SEEDS];
    test_train_seeds("dqn_cartpole.yaml", NULL, "learn_dqn", SEEDS, p);
    for (int k = 0; k < SEEDS; k++) {
        CHECK(p[k].env_steps == 50000, "seed %d ran 50,000 steps, not %lld", k + 1, (long long)p[k].env_steps);
        best[k] = p[k].best_eval_return;
    }
    double med = test_median(best, SEEDS);
    CHECK(med >= 475.0, "DQN's median best mean eval return over seeds 1-5 is %.1f (need >= 475)", med);
    return test_summary("test_learn_dqn_cartpole");
}
