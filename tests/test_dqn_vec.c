/* test_dqn_vec.c: DQN with several training environments (env.num_envs > 1). Rows of several environments
 * interleave in one observe call, so every transition keeps its own next frame: each valid replay slot's `next`
 * must name a frame holding that transition's next observation, whatever the episode ends. And the schedule
 * (learning_starts, train_freq, target updates) counts single environment steps, so N environments make as
 * many updates as one over the same number of steps. */
#include <string.h>

#include "../agents/dqn.h"
#include "agent.h"
#include "harness.h"

#define OD 4
#define NE 3

static void replay_links(void) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg,
                                 "algo: dqn\nenv: {name: cartpole, num_envs: 3}\nnetwork: {hidden: [16], conv: none}\n"
                                 "replay: {capacity: 64}\ntrain: {batch_size: 8, total_steps: 300, eval_every: 30}\n",
                                 "dqn_vec.yaml") == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {OD, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 2, NULL, NULL};
    rlt_agent *ag = NULL;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "init: %s", ag ? rlt_agent_errmsg(ag) : "");
    /* Environment j's observation at its step t is (1000 j + t, ...); its episodes end every 5 + j steps. */
    int t_of[NE] = {0, 0, 0};
    long checked = 0, bad = 0;
    for (int it = 0; it < 100; it++) {
        float o[NE][OD], o2[NE][OD], r[NE];
        int32_t a[NE];
        uint8_t term[NE], trunc[NE];
        for (int j = 0; j < NE; j++) {
            for (int i = 0; i < OD; i++) o[j][i] = 1000.0f * j + t_of[j] + 0.25f * i, o2[j][i] = o[j][i] + 1.0f;
            a[j] = (it + j) & 1;
            r[j] = 1.0f;
            term[j] = (t_of[j] + 1) % (5 + j) == 0;
            trunc[j] = 0;
        }
        CHECK(rlt_agent_observe(ag, o, a, r, o2, term, trunc, NE) == RLT_OK, "observe: %s", rlt_agent_errmsg(ag));
        for (int j = 0; j < NE; j++) t_of[j] = term[j] ? 0 : t_of[j] + 1;
        /* Every valid slot's next frame is its own frame + 1 (the replay is host memory on the CPU backend). */
        const rlt_replay *rp = &ag->replay;
        const float *fr = (const float *)rp->f[DQN_F_FRAME].data;
        const uint8_t *valid = (const uint8_t *)rp->f[DQN_F_VALID].data;
        const int32_t *next = (const int32_t *)rp->f[DQN_F_NEXT].data;
        for (int64_t p = 0; p < rp->size; p++) {
            if (!valid[p]) continue;
            checked++;
            bad += fr[(int64_t)next[p] * OD] != fr[p * OD] + 1.0f;
        }
    }
    CHECK(checked > 1000 && bad == 0, "%ld of %ld valid slots link to a frame that is not their next observation", bad,
          checked);
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

static void schedule(void) {
    rlt_progress one, four;
    const char *s1[] = {"train.total_steps=4000", "train.eval_every=4000", "train.eval_episodes=1", NULL};
    const char *s4[] = {"train.total_steps=4000", "train.eval_every=4000", "train.eval_episodes=1", "env.num_envs=4", NULL};
    CHECK(test_train_config_sets("dqn_cartpole.yaml", s1, "dqn_vec1", &one) == RLT_OK, "1 environment");
    CHECK(test_train_config_sets("dqn_cartpole.yaml", s4, "dqn_vec4", &four) == RLT_OK, "4 environments");
    /* learning_starts 1000, train_freq 256, 128 gradient steps: steps 1024 .. 3840, 12 rounds. */
    CHECK(one.updates == 12 * 128 && four.updates == one.updates, "updates: %lld with 1 environment, %lld with 4",
          (long long)one.updates, (long long)four.updates);
    CHECK(four.env_steps == 4000 && four.episodes > one.episodes / 2, "4 environments: %lld steps, %lld episodes",
          (long long)four.env_steps, (long long)four.episodes);
}

/* A run stopped at a checkpoint and resumed ends with the bytes of the run that went through. */
static int run_to(const char *tag, const char *resume, char *final_path, size_t cap) {
    rlt_config *cfg;
    char path[700];
    rlt_config_init(&cfg);
    snprintf(path, sizeof path, "%s/configs/dqn_cartpole.yaml", RLT_SOURCE_DIR);
    CHECK(rlt_config_load_file(cfg, path) == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    const char *sets[] = {"env.num_envs=4", "train.total_steps=8000", "train.eval_every=4000", "checkpoint.every=4000"};
    for (int i = 0; i < 4; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s", sets[i]);
    const char *dir = test_tmpdir(tag); /* made empty once */
    snprintf(path, sizeof path, "out_dir=%s", dir);
    rlt_config_set(cfg, path);
    snprintf(final_path, cap, "%s/final.ckpt", dir);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    if (rc == RLT_OK && resume) rc = rlt_trainer_resume(tr, resume);
    if (rc == RLT_OK) rc = rlt_trainer_run(tr, NULL, NULL);
    CHECK(rc == RLT_OK, "%s: %s", tag, rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static void resume(void) {
    char a[800], b[800], mid[800];
    run_to("dqn_vec_whole", NULL, a, sizeof a);
    snprintf(mid, sizeof mid, "%.*sckpt_4000.ckpt", (int)(strlen(a) - strlen("final.ckpt")), a);
    run_to("dqn_vec_resumed", mid, b, sizeof b);
    long d = test_files_differ(a, b);
    CHECK(d == 0, "4 environments, resumed at 4000: final.ckpt differs in %ld bytes from the run that went through", d);
}

int main(void) {
    replay_links();
    schedule();
    resume();
    return test_summary("test_dqn_vec");
}
