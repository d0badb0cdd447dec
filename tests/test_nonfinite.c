/* test_nonfinite.c: NaN and inf never get into an agent. rlt_agent_observe refuses a non-finite observation,
 * next observation, reward or continuous action (and a Discrete action out of range) with RLT_EINVAL and a
 * message naming the argument, row and element, before any row of the batch is stored; rlt_agent_act refuses
 * a non-finite observation; the agent keeps working afterwards. A user environment whose reset or step
 * returns a non-finite observation stops the run with a message naming the callback and the element. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"
#include "agent.h"

static rlt_config *config(const char *yaml) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, yaml, "nonfinite.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    return cfg;
}

/* rc must be RLT_EINVAL with a message holding every one of want (a NULL-terminated list), and the agent
 * must hold what it held before: replay size and position, transitions observed. */
static void expect_refused(rlt_agent *ag, int rc, const char *const *want, int64_t size, int64_t pos, int64_t steps,
                           const char *what) {
    const char *msg = rlt_agent_errmsg(ag);
    int has = 1;
    for (int i = 0; want[i]; i++) has = has && strstr(msg, want[i]) != NULL;
    CHECK(rc == RLT_EINVAL && has, "%s: want RLT_EINVAL naming the value, got %s: %s", what, rlt_status_name(rc), msg);
    int64_t env_steps = -1;
    rlt_agent_counters(ag, &env_steps, NULL);
    CHECK(ag->replay.size == size && ag->replay.pos == pos && env_steps == steps,
          "%s: nothing stored (replay size %lld pos %lld steps %lld, was %lld %lld %lld)", what,
          (long long)ag->replay.size, (long long)ag->replay.pos, (long long)env_steps, (long long)size, (long long)pos,
          (long long)steps);
    if (rc != RLT_OK) printf("  refused: %s\n", msg);
}

enum { N = 4, O = 3 };

static void test_td3(void) {
    rlt_config *cfg = config("algo: td3\nseed: 1\ndevice: cpu\ntrain: {start_steps: 0, batch_size: 4}\n"
                             "td3: {actor_hidden: [8], critic_hidden: [8]}\nreplay: {capacity: 64}\n");
    float lo[1] = {-2.0f}, hi[1] = {2.0f};
    rlt_space obs = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {O}};
    rlt_space act = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {1}, .low = lo, .high = hi};
    rlt_agent *ag = NULL;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "td3 init: %s", rlt_agent_errmsg(ag));
    if (rc != RLT_OK) goto done;
    float o[N][O], o2[N][O], a[N], r[N];
    uint8_t term[N] = {0}, trunc[N] = {0};
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < O; j++) o[i][j] = 0.1f * (float)(i + j), o2[i][j] = 0.1f * (float)(i + j + 1);
        a[i] = 0.5f;
        r[i] = -1.0f;
    }
    CHECK(rlt_agent_observe(ag, o, a, r, o2, term, trunc, N) == RLT_OK, "observe: %s", rlt_agent_errmsg(ag));

    /* One bad value at a time, in the last row, so a partial store would show. */
    o[3][2] = NAN;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N), (const char *[]){"obs row 3 element 2", "nan", NULL},
                   N, N, N, "NaN obs");
    o[3][2] = 0.0f;
    o2[3][0] = -INFINITY;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N),
                   (const char *[]){"next_obs row 3 element 0", "-inf", NULL}, N, N, N, "-inf next_obs");
    o2[3][0] = 0.0f;
    r[3] = INFINITY;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N), (const char *[]){"rewards row 3", "inf", NULL},
                   N, N, N, "inf reward");
    r[3] = 0.0f;
    a[3] = NAN;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N), (const char *[]){"actions row 3", "nan", NULL},
                   N, N, N, "NaN action");
    a[3] = 0.0f;

    float out[N];
    o[2][1] = NAN;
    expect_refused(ag, rlt_agent_act(ag, o, N, 0, out), (const char *[]){"rlt_agent_act", "obs row 2 element 1", NULL}, N, N,
                   N, "act on NaN obs");
    o[2][1] = 0.0f;

    /* Still a working agent: more transitions, updates, finite actions. */
    CHECK(rlt_agent_observe(ag, o, a, r, o2, term, trunc, N) == RLT_OK, "observe after refusals: %s", rlt_agent_errmsg(ag));
    int32_t done = 0;
    CHECK(rlt_agent_update(ag, &done) == RLT_OK && done > 0, "update: %s", rlt_agent_errmsg(ag));
    CHECK(rlt_agent_act(ag, o, N, 0, out) == RLT_OK, "act: %s", rlt_agent_errmsg(ag));
    for (int i = 0; i < N; i++) CHECK(isfinite(out[i]) && out[i] >= -2.0f && out[i] <= 2.0f, "action %d = %g", i, out[i]);
done:
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

static void test_dqn(void) {
    rlt_config *cfg = config("algo: dqn\nseed: 1\ndevice: cpu\ntrain: {batch_size: 4}\n"
                             "network: {hidden: [8], conv: none}\nreplay: {capacity: 64}\n");
    rlt_space obs = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {O}};
    rlt_space act = {.kind = RLT_SPACE_DISCRETE, .dtype = RLT_DTYPE_I32, .ndim = 1, .shape = {1}, .n = 3};
    rlt_agent *ag = NULL;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "dqn init: %s", rlt_agent_errmsg(ag));
    if (rc != RLT_OK) goto done;
    float o[N][O], o2[N][O], r[N] = {1, 1, 1, 1};
    int32_t a[N] = {0, 1, 2, 1};
    uint8_t term[N] = {0}, trunc[N] = {0};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < O; j++) o[i][j] = (float)(i + j), o2[i][j] = (float)(i + j + 1);
    CHECK(rlt_agent_observe(ag, o, a, r, o2, term, trunc, N) == RLT_OK, "observe: %s", rlt_agent_errmsg(ag));
    int64_t size = ag->replay.size, pos = ag->replay.pos;
    /* An action out of range in the last row: DQN stores row by row, so without the up-front check the first
     * rows were stored before the refusal. */
    a[3] = 3;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N), (const char *[]){"actions row 3 is 3", NULL},
                   size, pos, N, "action 3 of Discrete(3)");
    a[3] = -1;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N), (const char *[]){"actions row 3 is -1", NULL},
                   size, pos, N, "action -1");
    a[3] = 1;
    o2[3][1] = NAN;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N),
                   (const char *[]){"next_obs row 3 element 1", NULL}, size, pos, N, "NaN next_obs");
    o2[3][1] = 0.0f;
    r[3] = NAN;
    expect_refused(ag, rlt_agent_observe(ag, o, a, r, o2, term, trunc, N), (const char *[]){"rewards row 3", NULL}, size, pos,
                   N, "NaN reward");
    r[3] = 1.0f;
    CHECK(rlt_agent_observe(ag, o, a, r, o2, term, trunc, N) == RLT_OK, "observe after refusals: %s", rlt_agent_errmsg(ag));
done:
    rlt_agent_free(ag);
    rlt_config_free(cfg);
}

/* ---- a user environment that returns a non-finite observation on request ---- */
typedef struct bad_env {
    long steps;
    long bad_step;  /* > 0: step number (1-based) whose observation element 1 is NaN */
    int bad_reset;  /* 1: reset's observation element 0 is +inf */
} bad_env;

static int be_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    (void)instance;
    (void)seed;
    bad_env *b = user;
    float *o = obs;
    o[0] = b->bad_reset ? INFINITY : 0.5f;
    o[1] = -0.5f;
    return 0;
}

static int be_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    (void)action;
    (void)terminated;
    (void)truncated;
    bad_env *b = user;
    float *o = obs;
    if (instance == 0) b->steps++;
    o[0] = 0.25f;
    o[1] = instance == 0 && b->steps == b->bad_step ? NAN : 0.75f;
    *reward = 1.0f;
    return 0;
}

static void test_user_env(int bad_reset, long bad_step, const char *want) {
    char yaml[300];
    snprintf(yaml, sizeof yaml,
             "algo: td3\nseed: 1\ndevice: cpu\ntrain: {total_steps: 50, start_steps: 10, batch_size: 4, eval_every: 0,"
             " eval_episodes: 1, progress_every_s: 0}\ntd3: {actor_hidden: [8], critic_hidden: [8]}\n"
             "replay: {capacity: 64}\nout_dir: %s/run\n", test_tmpdir(bad_reset ? "nonfinite_reset" : "nonfinite_step"));
    rlt_config *cfg = config(yaml);
    bad_env b = {0, bad_step, bad_reset};
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = "bad";
    cb.obs = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {2}};
    cb.act = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {1}};
    cb.max_episode_steps = 20;
    cb.user = &b;
    cb.reset = be_reset;
    cb.step = be_step;
    rlt_trainer *tr = NULL;
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    if (rc == RLT_OK) {
        rc = rlt_trainer_run(tr, NULL, NULL);
        const char *msg = rlt_trainer_errmsg(tr);
        CHECK(rc == RLT_ERUNTIME && strstr(msg, want) && strstr(msg, "not finite"),
              "user env: want RLT_ERUNTIME naming '%s', got %s: %s", want, rlt_status_name(rc), msg);
        printf("  refused: %s\n", msg);
        int64_t steps = -1;
        rlt_agent_counters(rlt_trainer_agent(tr), &steps, NULL);
        CHECK(steps == (bad_reset ? 0 : bad_step - 1), "the agent observed only the finite steps (%lld)", (long long)steps);
    }
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

int main(void) {
    test_td3();
    test_dqn();
    test_user_env(0, 7, "step (observation element 1 is nan");
    test_user_env(1, 0, "reset (observation element 0 is inf");
    return test_summary("test_nonfinite");
}
