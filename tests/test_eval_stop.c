/* test_eval_stop.c: evaluation ends when it must.
 * - A stop request (what SIGINT sends) during an evaluation ends it before the next evaluation step, not after
 *   the whole evaluation: no evaluation step runs after the request, the run returns RLT_EINTERRUPTED with
 *   its outputs, and summary.json says "stopped". Resumed from that final.ckpt, the run does the cut
 *   evaluation first and ends with the final.ckpt (byte for byte) and metrics.csv (except wall_s) of a run
 *   that was never interrupted: DQN's evaluation draws from the agent's and the evaluation environment's
 *   random streams, and both go back to where they were before the cut evaluation. A request made during
 *   the training step before an evaluation lets that evaluation run (it belongs to the step).
 * - A user environment with no time limit (max_episode_steps 0) whose episodes never end: each evaluation
 *   episode is cut at 100,000 steps, with a warning at init, instead of running forever; env.max_episode_steps
 *   sets the limit instead (no warning). */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "rltrain.h"

/* ---- a point mass with three pushes (left, none, right), held near the origin ---- */
typedef struct pm_state { double x, v; uint64_t rng; } pm_state;

typedef struct pm_world {
    pm_state inst[2];       /* 0 training, 1 evaluation */
    long eval_steps;        /* evaluation steps so far */
    long stop_at_eval_step; /* > 0: request a stop during this evaluation step */
    long eval_steps_after_stop;
    long train_steps, stop_at_train_step; /* > 0: request a stop during this training step */
    int stopped;
    rlt_trainer *tr;
} pm_world;

static double pm_rand(uint64_t *s) {
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static int pm_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    pm_state *s = &((pm_world *)user)->inst[instance];
    s->rng = seed | 1;
    s->x = 2.0 * pm_rand(&s->rng) - 1.0;
    s->v = pm_rand(&s->rng) - 0.5;
    ((float *)obs)[0] = (float)s->x;
    ((float *)obs)[1] = (float)s->v;
    return 0;
}

static int pm_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    (void)truncated;
    pm_world *w = user;
    pm_state *s = &w->inst[instance];
    if (instance == 0 && ++w->train_steps == w->stop_at_train_step) rlt_trainer_request_stop(w->tr);
    if (instance == 1) {
        if (w->stopped) w->eval_steps_after_stop++;
        if (++w->eval_steps == w->stop_at_eval_step) {
            rlt_trainer_request_stop(w->tr); /* as the CLI's SIGINT handler does */
            w->stopped = 1;
        }
    }
    double u = 2.0 * (((const int32_t *)action)[0] - 1);
    s->v += 0.1 * u;
    s->x += 0.1 * s->v;
    ((float *)obs)[0] = (float)s->x;
    ((float *)obs)[1] = (float)s->v;
    *terminated = s->x > 2.0 || s->x < -2.0;
    *reward = *terminated ? 0.0f : (float)(1.0 - 0.5 * s->x * s->x);
    return 0;
}

static int pm_save(void *user, int32_t instance, void *state) {
    memcpy(state, &((pm_world *)user)->inst[instance], sizeof(pm_state));
    return 0;
}

static int pm_load(void *user, int32_t instance, const void *state) {
    memcpy(&((pm_world *)user)->inst[instance], state, sizeof(pm_state));
    return 0;
}

static rlt_env_callbacks pm_callbacks(pm_world *w) {
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = "point_mass_discrete";
    cb.obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    cb.act = (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL};
    cb.max_episode_steps = 100;
    cb.user = w;
    cb.reset = pm_reset;
    cb.step = pm_step;
    cb.state_bytes = (int32_t)sizeof(pm_state);
    cb.save_state = pm_save;
    cb.load_state = pm_load;
    return cb;
}

static rlt_config *dqn_config(const char *out_dir) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg,
                                 "algo: dqn\nseed: 3\ntrain: {total_steps: 1200, eval_every: 400, eval_episodes: 3, "
                                 "batch_size: 32, progress_every_s: 0}\nreplay: {capacity: 2000}\nnetwork: {hidden: [32, 32]}\n"
                                 "dqn: {learning_starts: 200, train_freq: 1, target_update_every: 100, eval_epsilon: 0.2}\n",
                                 "eval_stop.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[600];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    return cfg;
}

static char errmsg[2048];

/* One run of the point mass into out_dir; stop_at_eval_step > 0 requests a stop during that evaluation step. */
static int run_pm(const char *out_dir, const char *resume, long stop_at_eval_step, pm_world *w) {
    memset(w, 0, sizeof *w);
    w->stop_at_eval_step = stop_at_eval_step;
    rlt_config *cfg = dqn_config(out_dir);
    rlt_env_callbacks cb = pm_callbacks(w);
    rlt_trainer *tr;
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    w->tr = tr;
    if (resume) CHECK(rlt_trainer_resume(tr, resume) == RLT_OK, "resume: %s", rlt_trainer_errmsg(tr));
    rc = rlt_trainer_run(tr, NULL, NULL);
    snprintf(errmsg, sizeof errmsg, "%s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

/* The same, requesting a stop during training step stop_at_train_step. */
static int run_pm_at(const char *out_dir, long stop_at_train_step, pm_world *w) {
    memset(w, 0, sizeof *w);
    w->stop_at_train_step = stop_at_train_step;
    rlt_config *cfg = dqn_config(out_dir);
    rlt_env_callbacks cb = pm_callbacks(w);
    rlt_trainer *tr;
    CHECK(rlt_trainer_init_env(cfg, &cb, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    w->tr = tr;
    int rc = rlt_trainer_run(tr, NULL, NULL);
    snprintf(errmsg, sizeof errmsg, "%s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static char a_buf[1 << 18], b_buf[1 << 18];


/* A file of a run directory, as text (test_read_text). */
static size_t read_run_file(const char *dir, const char *name, char *buf, size_t cap) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return test_read_text(path, buf, cap);
}
static void stop_during_evaluation(const char *dir) {
    char u[512], s[512], a[700], b[700];
    snprintf(u, sizeof u, "%s/uninterrupted", dir);
    snprintf(s, sizeof s, "%s/stopped", dir);
    pm_world w;
    CHECK(run_pm(u, NULL, 0, &w) == RLT_OK, "uninterrupted: %s", errmsg);
    long all_eval_steps = w.eval_steps;
    /* The first evaluation (at step 400) runs 3 episodes (a dozen steps or more each, at most 100): stop inside it. */
    CHECK(run_pm(s, NULL, 8, &w) == RLT_EINTERRUPTED, "stopped: %s", errmsg);
    printf("stop requested at evaluation step 8 (of %ld in the whole run): %ld evaluation steps after it\n",
           all_eval_steps, w.eval_steps_after_stop);
    CHECK(w.stopped && w.eval_steps_after_stop == 0, "no evaluation step after the request (%ld)", w.eval_steps_after_stop);
    CHECK(strstr(errmsg, "during the evaluation at step 400") != NULL, "message: %s", errmsg);
    read_run_file(s, "summary.json", b_buf, sizeof b_buf);
    CHECK(strstr(b_buf, "\"status\": \"stopped\"") && strstr(b_buf, "\"env_steps\": 400"), "summary: %.200s", b_buf);
    read_run_file(s, "metrics.csv", b_buf, sizeof b_buf);
    CHECK(strstr(b_buf, "\neval,") == NULL, "the cut evaluation has no row");
    /* Resumed: the evaluation at 400 first, then as the uninterrupted run. */
    snprintf(a, sizeof a, "%s/final.ckpt", s);
    CHECK(run_pm(s, a, 0, &w) == RLT_OK, "resumed: %s", errmsg);
    snprintf(a, sizeof a, "%s/final.ckpt", u);
    snprintf(b, sizeof b, "%s/final.ckpt", s);
    CHECK(test_files_differ(a, b) == 0, "final.ckpt equals the uninterrupted run's");
    read_run_file(u, "metrics.csv", a_buf, sizeof a_buf);
    read_run_file(s, "metrics.csv", b_buf, sizeof b_buf);
    test_strip_wall(a_buf);
    test_strip_wall(b_buf);
    CHECK(a_buf[0] && strcmp(a_buf, b_buf) == 0, "metrics.csv equals the uninterrupted run's (%zu vs %zu bytes)",
          strlen(a_buf), strlen(b_buf));
    /* Requested during training step 400: its evaluation runs, then the run stops. */
    snprintf(s, sizeof s, "%s/before", dir);
    memset(&w, 0, sizeof w);
    CHECK(run_pm_at(s, 400, &w) == RLT_EINTERRUPTED, "stopped before the evaluation: %s", errmsg);
    read_run_file(s, "metrics.csv", b_buf, sizeof b_buf);
    CHECK(strstr(b_buf, "\neval,400,") != NULL && strstr(errmsg, "stopped on request at step 400"),
          "the evaluation at 400 ran (%s): %s", errmsg, b_buf);
}

/* ---- an environment whose episodes never end, with no time limit ---- */
static long endless_eval_steps;

static int endless_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    (void)user, (void)instance, (void)seed;
    ((float *)obs)[0] = 0.0f;
    return 0;
}

static int endless_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                        uint8_t *truncated) {
    (void)user, (void)action, (void)terminated, (void)truncated;
    if (instance == 1) endless_eval_steps++;
    ((float *)obs)[0] = 0.0f;
    *reward = 1.0f;
    return 0;
}

static char logged[4096];
static void capture_log(void *user, int level, const char *msg) {
    (void)user;
    size_t used = strlen(logged);
    if (level == RLT_LOG_WARN) snprintf(logged + used, sizeof logged - used, "%s\n", msg);
}

static void endless_episodes(const char *dir, int32_t limit) {
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = "endless";
    cb.obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
    cb.act = (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 2, NULL, NULL};
    cb.max_episode_steps = 0;
    cb.reset = endless_reset;
    cb.step = endless_step;
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char text[512];
    snprintf(text, sizeof text, "algo: dqn\nenv: {max_episode_steps: %d}\ntrain: {total_steps: 64, eval_every: 0, "
             "eval_episodes: 2}\nreplay: {capacity: 100}\nnetwork: {hidden: [16]}\ndqn: {learning_starts: 1000}\n"
             "out_dir: %s/endless_%d\n", (int)limit, dir, (int)limit);
    CHECK(rlt_config_load_string(cfg, text, "endless.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    logged[0] = '\0';
    endless_eval_steps = 0;
    rlt_log_set_callback(capture_log, NULL);
    rlt_trainer *tr;
    CHECK(rlt_trainer_init_env(cfg, &cb, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    rlt_log_set_callback(NULL, NULL);
    int rc = rlt_trainer_run(tr, NULL, NULL);
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    long per_episode = limit ? limit : 100000;
    printf("no time limit, env.max_episode_steps %d: %ld evaluation steps, evaluation return %g\n", (int)limit,
           endless_eval_steps, p.last_eval_return);
    CHECK(rc == RLT_OK, "the run ends: %s", rlt_trainer_errmsg(tr));
    CHECK(endless_eval_steps == 2 * per_episode && p.last_eval_return == (double)per_episode,
          "each evaluation episode is cut at %ld steps (%ld steps, return %g)", per_episode, endless_eval_steps,
          p.last_eval_return);
    if (limit == 0)
        CHECK(strstr(logged, "no time limit") && strstr(logged, "100000"), "a warning at init: %s", logged);
    else
        CHECK(!strstr(logged, "no time limit"), "no time-limit warning with env.max_episode_steps: %s", logged);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

int main(void) {
    alarm(300); /* an evaluation that never ends fails the test instead of hanging it */
    const char *dir = test_tmpdir("eval_stop");
    stop_during_evaluation(dir);
    endless_episodes(dir, 0);
    endless_episodes(dir, 50);
    return test_summary("test_eval_stop");
}
