/* test_learn_dqn_cartpole.c: DQN (configs/dqn_cartpole.yaml, seed 1, RL Baselines3 Zoo's tuned
 * CartPole-v1 settings) learns the built-in CartPole-v1 to a mean evaluation return of at least 475 within
 * 50,000 env steps on the CPU. 475 is Gymnasium's reward threshold for CartPole-v1; the zoo reports 500
 * for these settings. */
#include <string.h>

#include "harness.h"
#include "rltrain.h"

static int on_progress(void *user, const rlt_progress *p) {
    (void)user;
    if (p->is_eval)
        printf("step %6lld  eval %6.1f  best %6.1f  %6.0f updates/s\n", (long long)p->env_steps, p->last_eval_return,
               p->best_eval_return, p->updates_per_s);
    fflush(stdout);
    return 0;
}

int main(void) {
    const char *dir = test_tmpdir("learn_dqn");
    char path[600];
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    snprintf(path, sizeof path, "%s/configs/dqn_cartpole.yaml", RLT_SOURCE_DIR);
    CHECK(rlt_config_load_file(cfg, path) == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    snprintf(path, sizeof path, "out_dir=%s/run", dir);
    CHECK(rlt_config_set(cfg, path) == RLT_OK, "out_dir");
    rlt_trainer *tr;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    CHECK(rlt_trainer_run(tr, on_progress, NULL) == RLT_OK, "run: %s", rlt_trainer_errmsg(tr));
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    printf("final eval %.1f, best %.1f after %lld steps (%.1f s)\n", p.last_eval_return, p.best_eval_return,
           (long long)p.env_steps, p.elapsed_s);
    CHECK(p.env_steps == 50000, "ran 50,000 steps");
    CHECK(p.best_eval_return >= 475.0, "DQN reached a mean eval return of %.1f (need >= 475)", p.best_eval_return);
    CHECK(rlt_agent_allocations_after_init(rlt_trainer_agent(tr)) == 0, "no allocation after init");
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return test_summary("test_learn_dqn_cartpole");
}
