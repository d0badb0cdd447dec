/* test_eval_rows.c: evaluation episodes side by side (train/trainer_eval.c).
 * - trainer_eval_rows_for: as many rows as episodes, up to the copies taken and the agent's acting rows, spread
 *   evenly over the waves (100 episodes at 64 rows: two waves of 50); one row with a convolutional torso (acting
 *   rows 1) or a user environment (one copy).
 * - TD3 on Pendulum and DQN on CartPole (CPU, untrained policies, 10 episodes): the trainer evaluates on 10 rows;
 *   the same evaluation on 1, 3 (waves of 3, 3, 3 and 1) and 10 rows gives the same mean return, to the rounding of
 *   the policy's forward over a different number of rows (the same episodes: an episode's start depends on its
 *   index alone), and moves the evaluation stream by the same 10 x 2^40 counter values; the next evaluation starts
 *   elsewhere and gives another mean. CartPole's episodes end at different steps within a wave. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"
#include "trainer.h"

static const char *const k_td3 =
    "algo: td3\ndevice: cpu\nseed: 3\n"
    "train: {total_steps: 2000, start_steps: 500, batch_size: 32, eval_every: 1000, eval_episodes: 10, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 2000}\n";

static const char *const k_dqn =
    "algo: dqn\ndevice: cpu\nseed: 5\nenv: {name: cartpole}\n"
    "train: {total_steps: 2000, batch_size: 32, eval_every: 1000, eval_episodes: 10, progress_every_s: 0}\n"
    "replay: {capacity: 2000}\nnetwork: {hidden: [32, 32]}\ndqn: {learning_starts: 500, eval_epsilon: 0.0}\n";

static void rows_rule(void) {
    CHECK(trainer_eval_rows_for(10, 10, 64) == 10, "10 episodes, 10 copies: one wave of 10");
    CHECK(trainer_eval_rows_for(100, 64, 64) == 50, "100 episodes at 64: two waves of 50 (got %d)",
          (int)trainer_eval_rows_for(100, 64, 64));
    CHECK(trainer_eval_rows_for(130, 64, 64) == 44, "130 episodes at 64: three waves of 44, 44, 42 (got %d)",
          (int)trainer_eval_rows_for(130, 64, 64));
    CHECK(trainer_eval_rows_for(10, 10, 1) == 1, "a conv torso acts on one row: one episode at a time");
    CHECK(trainer_eval_rows_for(10, 1, 64) == 1, "a user environment's one evaluation instance");
    CHECK(trainer_eval_rows_for(3, 3, 64) == 3, "3 episodes: 3 rows");
}

/* The evaluation of tr on `rows` rows from the stream state `from`: its mean, and the stream's counter after. */
static double evaluate_on(rlt_trainer *tr, int32_t rows, rlt_rng from, uint64_t *ctr_after) {
    tr->eval_rows = rows;
    tr->eval_env.rng = from;
    double mean = NAN;
    CHECK(trainer_evaluate(tr, &mean) == RLT_OK, "evaluate on %d rows: %s", (int)rows, tr->err.msg);
    *ctr_after = tr->eval_env.rng.ctr;
    return mean;
}

static void same_whatever_the_rows(const char *yaml, const char *tag) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmpdir(tag));
    rlt_config *cfg = test_config_text(yaml, "eval.yaml", dir, NULL, NULL);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "%s: init: %s", tag, rlt_trainer_errmsg(tr));
    if (rc != RLT_OK) return;
    CHECK(tr->eval_rows == 10, "%s: 10 episodes on %d rows, want 10", tag, (int)tr->eval_rows);
    const rlt_rng from = tr->eval_env.rng;
    uint64_t after[3];
    const int32_t rows[3] = {1, 3, 10};
    double mean[3];
    for (int i = 0; i < 3; i++) mean[i] = evaluate_on(tr, rows[i], from, &after[i]);
    printf("%s: mean return on 1, 3, 10 rows: %.9g %.9g %.9g\n", tag, mean[0], mean[1], mean[2]);
    for (int i = 1; i < 3; i++) {
        CHECK_NEAR(mean[i], mean[0], 1e-3, 1e-5, "the same episodes on more rows");
        CHECK(after[i] == after[0], "%s: the stream moves the same on %d rows", tag, (int)rows[i]);
    }
    CHECK(after[0] - from.ctr == 10ull << 40, "%s: the stream moved by %llu, want 10 x 2^40", tag,
          (unsigned long long)(after[0] - from.ctr));
    /* The next evaluation: other start states. */
    rlt_rng next = from;
    next.ctr = after[0];
    uint64_t after2;
    double mean2 = evaluate_on(tr, 10, next, &after2);
    CHECK(fabs(mean2 - mean[0]) > 1e-3, "%s: the next evaluation starts elsewhere (%.9g against %.9g)", tag, mean2, mean[0]);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

int main(void) {
    rlt_log_set_callback(NULL, NULL);
    rows_rule();
    same_whatever_the_rows(k_td3, "tmp_eval_rows_td3");
    same_whatever_the_rows(k_dqn, "tmp_eval_rows_dqn");
    return test_summary("test_eval_rows");
}
