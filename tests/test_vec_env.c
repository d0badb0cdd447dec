/* test_vec_env.c: env.num_envs, several training environments stepped together.
 * - Config: 0 and 257 are out of range; num_envs > 1 with dqn, or with a step count that is not a multiple of
 *   it, is refused.
 * - A user environment with N = 4: instances 0..3 train, instance 4 evaluates; resume is bit-exact.
 * - N = 4 on pendulum (200-step episodes): 2,000 env steps are 500 per environment, so 8 episodes of 200 steps,
 *   4 rows at env_step 800 and 4 at 1,600; updates_per_step is per env step (1,500 updates after start_steps
 *   500); nothing is allocated after init.
 * - N = 1 written out is the run with no key: final.ckpt byte-identical.
 * - N = 4 resumes bit-exactly: a fresh run resumed from the periodic checkpoint at 1,000, and a run stopped on
 *   request and resumed in place, end in A's final.ckpt byte for byte; a checkpoint of 4 environments is
 *   refused by a config of 1 or 2, naming env.num_envs. */
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "rltrain.h"

#include "alloc_counter.h"

static rlt_config *config(const char *out_dir, const char *extra) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg,
                                 "algo: td3\nseed: 7\nenv: {num_envs: 4}\n"
                                 "train: {total_steps: 2000, start_steps: 500, batch_size: 64,"
                                 " eval_every: 1000, eval_episodes: 2, progress_every_s: 0.01}\n"
                                 "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 2500}\n"
                                 "checkpoint: {every: 1000, keep: 2, include_replay: true}\n",
                                 "vec.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[600];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", set);
    if (extra) CHECK(rlt_config_set(cfg, extra) == RLT_OK, "%s: %s", extra, rlt_config_errmsg(cfg));
    return cfg;
}

static int stop_at_1200(void *user, const rlt_progress *p) {
    if (p->env_steps >= 1200) rlt_trainer_request_stop((rlt_trainer *)user);
    return 0;
}

/* One run; *p gets its final progress. */
static int run(const char *out_dir, const char *extra, const char *resume, int stop, int count, rlt_progress *p) {
    rlt_config *cfg = config(out_dir, extra);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    if (resume) CHECK(rlt_trainer_resume(tr, resume) == RLT_OK, "resume %s: %s", resume, rlt_trainer_errmsg(tr));
    n_alloc = 0;
    counting = count;
    rc = rlt_trainer_run(tr, stop ? stop_at_1200 : NULL, tr);
    counting = 0;
    if (count) {
        CHECK(n_alloc == 0, "process-wide allocations during the N=4 run: %ld (must be 0)", n_alloc);
        CHECK(rlt_agent_allocations_after_init(rlt_trainer_agent(tr)) == 0, "engine hook allocations after init");
    }
    rlt_trainer_progress(tr, p);
    printf("%s%s: rc %d at step %lld, %lld episodes, %lld updates\n", out_dir, resume ? " (resumed)" : "", rc,
           (long long)p->env_steps, (long long)p->episodes, (long long)p->updates);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static void config_errors(void) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_set(cfg, "env.num_envs=0") != RLT_OK || rlt_config_validate(cfg) != RLT_OK, "num_envs 0 refused");
    CHECK(strstr(rlt_config_errmsg(cfg), "env.num_envs") != NULL, "message: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
    rlt_config_init(&cfg);
    CHECK(rlt_config_set(cfg, "env.num_envs=257") != RLT_OK || rlt_config_validate(cfg) != RLT_OK, "num_envs 257 refused");
    CHECK(strstr(rlt_config_errmsg(cfg), "env.num_envs") != NULL, "message: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
    rlt_config_init(&cfg);
    CHECK(rlt_config_set(cfg, "env.num_envs=256") == RLT_OK && rlt_config_set(cfg, "train.total_steps=25600") == RLT_OK &&
          rlt_config_set(cfg, "train.eval_every=2560") == RLT_OK && rlt_config_validate(cfg) == RLT_OK, "256 accepted: %s",
          rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "env.num_envs=3") == RLT_OK && rlt_config_validate(cfg) == RLT_ECONFIG,
          "total_steps 25600 is no multiple of 3");
    CHECK(strstr(rlt_config_errmsg(cfg), "not a multiple of env.num_envs") != NULL, "message: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "env.num_envs=4") == RLT_OK && rlt_config_set(cfg, "algo=dqn") == RLT_OK &&
          rlt_config_set(cfg, "env.name=cartpole") == RLT_OK && rlt_config_validate(cfg) == RLT_OK, "dqn accepted: %s",
          rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
}

/* ---- a user environment of N + 1 instances: a point mass that never terminates, 50-step episodes ---- */
#define UE_MAX 9
typedef struct ue_state { double x, v; } ue_state;
typedef struct ue_world { ue_state inst[UE_MAX]; long resets[UE_MAX], steps[UE_MAX]; int32_t bad_instance; } ue_world;

static int ue_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    ue_world *w = user;
    if (instance < 0 || instance >= UE_MAX) return w->bad_instance = 1, -1;
    w->inst[instance].x = (double)(seed % 1000) / 1000.0 - 0.5;
    w->inst[instance].v = 0.0;
    w->resets[instance]++;
    ((float *)obs)[0] = (float)w->inst[instance].x;
    ((float *)obs)[1] = 0.0f;
    return 0;
}

static int ue_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    ue_world *w = user;
    (void)terminated, (void)truncated;
    if (instance < 0 || instance >= UE_MAX) return w->bad_instance = 1, -1;
    ue_state *st = &w->inst[instance];
    st->v += 0.1 * ((const float *)action)[0];
    st->x += 0.1 * st->v;
    w->steps[instance]++;
    ((float *)obs)[0] = (float)st->x;
    ((float *)obs)[1] = (float)st->v;
    *reward = (float)(-st->x * st->x);
    return 0;
}

static int ue_save(void *user, int32_t instance, void *state) {
    memcpy(state, &((ue_world *)user)->inst[instance], sizeof(ue_state));
    return 0;
}

static int ue_load(void *user, int32_t instance, const void *state) {
    memcpy(&((ue_world *)user)->inst[instance], state, sizeof(ue_state));
    return 0;
}

static const float ue_low[1] = {-1.0f}, ue_high[1] = {1.0f};

static int ue_run(ue_world *w, const char *out_dir, const char *resume, rlt_progress *p) {
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = "vec_point_mass";
    cb.obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    cb.act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, ue_low, ue_high};
    cb.max_episode_steps = 50;
    cb.user = w;
    cb.reset = ue_reset;
    cb.step = ue_step;
    cb.state_bytes = (int32_t)sizeof(ue_state);
    cb.save_state = ue_save;
    cb.load_state = ue_load;
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg,
                                 "algo: td3\nseed: 3\nenv: {num_envs: 4}\n"
                                 "train: {total_steps: 800, start_steps: 200, batch_size: 32, eval_every: 400,"
                                 " eval_episodes: 1, progress_every_s: 0}\n"
                                 "td3: {actor_hidden: [16], critic_hidden: [16]}\nreplay: {capacity: 1000}\n"
                                 "checkpoint: {every: 400, keep: 1}\n",
                                 "user.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[600];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    rlt_config_set(cfg, set);
    rlt_trainer *tr;
    CHECK(rlt_trainer_init_env(cfg, &cb, &tr) == RLT_OK, "user init: %s", rlt_trainer_errmsg(tr));
    if (resume) CHECK(rlt_trainer_resume(tr, resume) == RLT_OK, "user resume: %s", rlt_trainer_errmsg(tr));
    int rc = rlt_trainer_run(tr, NULL, NULL);
    CHECK(rc == RLT_OK, "user run: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_progress(tr, p);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

/* Instances 0..3 train (200 steps each: 4 episodes each), instance 4 evaluates (2 evaluations of 1 episode);
 * a fresh run resumed from the checkpoint at 400 ends in the same final.ckpt. */
static void user_env(const char *dir) {
    static ue_world w, w2;
    char a[512], b[512], path[700], path2[700];
    snprintf(a, sizeof a, "%s/UA", dir);
    snprintf(b, sizeof b, "%s/UB", dir);
    rlt_progress p;
    ue_run(&w, a, NULL, &p);
    CHECK(p.env_steps == 800 && p.episodes == 16, "user: %lld steps, %lld episodes", (long long)p.env_steps,
          (long long)p.episodes);
    for (int k = 0; k < 4; k++)
        CHECK(w.steps[k] == 200 && w.resets[k] == 5, "instance %d: %ld steps, %ld resets", k, w.steps[k], w.resets[k]);
    CHECK(w.steps[4] == 100 && w.resets[4] == 2, "evaluation instance 4: %ld steps, %ld resets", w.steps[4], w.resets[4]);
    CHECK(!w.bad_instance && w.steps[5] == 0 && w.resets[5] == 0, "no other instance");
    snprintf(path, sizeof path, "%s/ckpt_400.ckpt", a);
    ue_run(&w2, b, path, &p);
    snprintf(path, sizeof path, "%s/final.ckpt", a);
    snprintf(path2, sizeof path2, "%s/final.ckpt", b);
    CHECK(test_files_differ(path, path2) == 0, "user environment: the resumed run's final.ckpt is the first one's");
}

static char text[1 << 20];

int main(void) {
    config_errors();
    const char *dir = test_tmpdir("vec_env");
    char a[512], c[512], d[512], n1[512], n0[512], path[700], path2[700];
    snprintf(a, sizeof a, "%s/A", dir);
    snprintf(c, sizeof c, "%s/C", dir);
    snprintf(d, sizeof d, "%s/D", dir);
    snprintf(n1, sizeof n1, "%s/N1", dir);
    snprintf(n0, sizeof n0, "%s/N0", dir);
    rlt_progress p;

    /* A: four environments, counted steps and episodes, no allocation. */
    CHECK(run(a, NULL, NULL, 0, 1, &p) == RLT_OK, "A");
    CHECK(p.env_steps == 2000 && p.episodes == 8 && p.updates == 1500, "A: %lld steps, %lld episodes, %lld updates",
          (long long)p.env_steps, (long long)p.episodes, (long long)p.updates);
    snprintf(path, sizeof path, "%s/metrics.csv", a);
    test_read_text(path, text, sizeof text);
    int rows = 0, at800 = 0, at1600 = 0, evals = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        long long step, ep, len;
        double ret;
        if (sscanf(line, "episode,%lld,%lld,%lf,%lld,", &step, &ep, &ret, &len) == 4) {
            rows++;
            CHECK(len == 200 && ep == rows, "episode row %d: %s", rows, line);
            at800 += step == 800;
            at1600 += step == 1600;
        }
        evals += strncmp(line, "eval,", 5) == 0;
    }
    CHECK(rows == 8 && at800 == 4 && at1600 == 4 && evals == 2, "metrics rows: %d episodes (%d at 800, %d at 1600), %d evals",
          rows, at800, at1600, evals);

    /* num_envs 1 written out is the run without the key. */
    CHECK(run(n1, "env.num_envs=1", NULL, 0, 0, &p) == RLT_OK, "N1");
    {
        rlt_config *cfg;
        rlt_config_init(&cfg);
        CHECK(rlt_config_load_string(cfg,
                                     "algo: td3\nseed: 7\n"
                                     "train: {total_steps: 2000, start_steps: 500, batch_size: 64,"
                                     " eval_every: 1000, eval_episodes: 2, progress_every_s: 0.01}\n"
                                     "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 2500}\n"
                                     "checkpoint: {every: 1000, keep: 2, include_replay: true}\n",
                                     "nokey.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
        snprintf(path, sizeof path, "out_dir=%s", n0);
        rlt_config_set(cfg, path);
        rlt_trainer *tr;
        CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
        CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "N0: %s", rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
    }
    snprintf(path, sizeof path, "%s/final.ckpt", n1);
    snprintf(path2, sizeof path2, "%s/final.ckpt", n0);
    CHECK(test_files_differ(path, path2) == 0, "num_envs 1 and no key: identical final.ckpt");

    /* C: a fresh out_dir resumed from A's checkpoint at 1,000. */
    snprintf(path, sizeof path, "%s/ckpt_1000.ckpt", a);
    CHECK(run(c, NULL, path, 0, 0, &p) == RLT_OK, "C");
    CHECK(p.episodes == 8, "C episodes %lld", (long long)p.episodes);
    snprintf(path, sizeof path, "%s/final.ckpt", a);
    snprintf(path2, sizeof path2, "%s/final.ckpt", c);
    CHECK(test_files_differ(path, path2) == 0, "C's final.ckpt is A's");

    /* D: stopped part-way, resumed in place. */
    CHECK(run(d, NULL, NULL, 1, 0, &p) == RLT_EINTERRUPTED, "D stops on request");
    snprintf(path, sizeof path, "%s/final.ckpt", d);
    CHECK(run(d, NULL, path, 0, 0, &p) == RLT_OK, "D resumed");
    snprintf(path, sizeof path, "%s/final.ckpt", a);
    snprintf(path2, sizeof path2, "%s/final.ckpt", d);
    CHECK(test_files_differ(path, path2) == 0, "D's final.ckpt is A's");

    user_env(dir);

    /* A checkpoint of four environments and a config of one or two. */
    const char *others[] = {"env.num_envs=1", "env.num_envs=2"};
    for (int i = 0; i < 2; i++) {
        rlt_config *cfg = config(c, others[i]);
        rlt_trainer *tr;
        CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
        snprintf(path, sizeof path, "%s/ckpt_1000.ckpt", a);
        CHECK(rlt_trainer_resume(tr, path) == RLT_ECHECKPOINT, "%s refused", others[i]);
        CHECK(strstr(rlt_trainer_errmsg(tr), "holds 4 training environments") != NULL, "message: %s", rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
    }
    return test_summary("test_vec_env");
}
