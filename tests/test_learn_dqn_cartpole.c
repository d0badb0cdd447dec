/* test_learn_dqn_cartpole.c: DQN (configs/dqn_cartpole.yaml, seed 1, RL Baselines3 Zoo's tuned
 * CartPole-v1 settings) learns the built-in CartPole-v1 to a mean evaluation return of at least 475 within
 * 50,000 env steps on the CPU. 475 is Gymnasium's reward threshold for CartPole-v1; the zoo reports 500
 * for these settings. */
#include "harness.h"
#include "rltrain.h"

int main(void) {
    rlt_progress p;
    test_train_config("dqn_cartpole.yaml", "cpu", "learn_dqn", &p);
    CHECK(p.env_steps == 50000, "ran 50,000 steps");
    CHECK(p.best_eval_return >= 475.0, "DQN reached a mean eval return of %.1f (need >= 475)", p.best_eval_return);
    return test_summary("test_learn_dqn_cartpole");
}
