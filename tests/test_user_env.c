/* test_user_env.c: a user-registered C environment driven by the trainer (rlt_trainer_init_env). The
 * environment is this file's own: a point mass on a line that must be held near the origin, with a
 * continuous force (TD3) or three discrete pushes (DQN). Checks:
 * - TD3 learns it through rlt_trainer_run to a mean evaluation return of at least 85 (of at most 100; doing
 *   nothing scores about 50 and random forces about 35, see sanity_returns), with zero allocations anywhere
 *   in the process during the run (the C allocator is interposed, as in test_noalloc) and 0 engine-hook
 *   allocations after init;
 * - terminated and truncated reach the agent apart: episodes end by termination (the mass leaves the
 *   track) and by the trainer's time limit, and the callbacks see every step's flags cleared first;
 * - a Discrete user environment runs with DQN;
 * - bit-exact resume with save_state/load_state: a run resumed from its periodic checkpoint ends with a
 *   final checkpoint byte-identical to the uninterrupted run's; without the state callbacks resuming is
 *   refused with RLT_ESTATE;
 * - bad registrations (struct_size, missing callbacks, bad spaces) and a failing callback give clear errors. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

#include "alloc_counter.h"

/* ---- the simulator: a point mass, written for this test ---- */
#define PM_DT 0.1
#define PM_LIMIT 2.0   /* |x| beyond this terminates the episode */
#define PM_STEPS 100   /* the time limit the trainer applies (truncation) */

typedef struct pm_state { double x, v; uint64_t rng; } pm_state;

typedef struct pm_world {
    pm_state inst[2];  /* 0 training, 1 evaluation */
    int discrete;      /* actions: 0 push left, 1 none, 2 push right */
    long resets[2], steps[2], terminations, flags_not_cleared;
    long fail_at_step; /* > 0: step returns -42 at this (training) step */
} pm_world;

static double pm_rand(uint64_t *s) { /* xorshift64*: the simulator's own generator */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void pm_observe(const pm_state *s, float *obs) {
    obs[0] = (float)s->x;
    obs[1] = (float)s->v;
}

static int pm_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    pm_world *w = user;
    pm_state *s = &w->inst[instance];
    s->rng = seed | 1; /* xorshift needs a nonzero state */
    s->x = 2.0 * pm_rand(&s->rng) - 1.0;
    s->v = pm_rand(&s->rng) - 0.5;
    w->resets[instance]++;
    pm_observe(s, obs);
    return 0;
}

/* Force u in [-2, 2]; reward 1 - x^2 / 2 - 0.01 u^2 while on the track, 0 on leaving it (terminal). */
static int pm_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    pm_world *w = user;
    pm_state *s = &w->inst[instance];
    if (*terminated || *truncated) w->flags_not_cleared++;
    w->steps[instance]++;
    if (instance == 0 && w->fail_at_step > 0 && w->steps[0] == w->fail_at_step) return -42;
    double u = w->discrete ? 2.0 * (((const int32_t *)action)[0] - 1) : ((const float *)action)[0];
    if (!(u >= -2.0 && u <= 2.0)) return -1; /* the trainer must keep Box actions within the bounds */
    s->v += u * PM_DT;
    s->x += s->v * PM_DT;
    pm_observe(s, obs);
    if (fabs(s->x) > PM_LIMIT) {
        *terminated = 1;
        *reward = 0.0f;
        if (instance == 0) w->terminations++;
    } else {
        *reward = (float)(1.0 - 0.5 * s->x * s->x - 0.01 * u * u);
    }
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

static const float pm_low[1] = {-2.0f}, pm_high[1] = {2.0f};

static rlt_env_callbacks pm_callbacks(pm_world *w, int with_state) {
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = w->discrete ? "point_mass_discrete" : "point_mass";
    cb.obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    if (w->discrete) cb.act = (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL};
    else cb.act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, pm_low, pm_high};
    cb.max_episode_steps = PM_STEPS;
    cb.user = w;
    cb.reset = pm_reset;
    cb.step = pm_step;
    if (with_state) {
        cb.state_bytes = (int32_t)sizeof(pm_state);
        cb.save_state = pm_save;
        cb.load_state = pm_load;
    }
    return cb;
}

/* Mean return of fixed policies, to put the learning threshold in context. */
static void sanity_returns(double *zero, double *random) {
    pm_world w;
    memset(&w, 0, sizeof w);
    uint64_t pick = 99;
    double tot[2] = {0, 0};
    float obs[2], r = 0.0f, a;
    for (int pol = 0; pol < 2; pol++) {
        for (int ep = 0; ep < 100; ep++) {
            pm_reset(&w, 0, 1000 + (uint64_t)ep, obs);
            for (int t = 0; t < PM_STEPS; t++) {
                uint8_t term = 0, trunc = 0;
                a = pol == 0 ? 0.0f : (float)(4.0 * pm_rand(&pick) - 2.0);
                pm_step(&w, 0, &a, obs, &r, &term, &trunc);
                tot[pol] += r;
                if (term) break;
            }
        }
    }
    *zero = tot[0] / 100;
    *random = tot[1] / 100;
}

static rlt_config *make_config(const char *yaml, const char *out_dir) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config init");
    CHECK(rlt_config_load_string(cfg, yaml, "user_env.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "out_dir");
    return cfg;
}

static int print_eval(void *user, const rlt_progress *p) {
    (void)user;
    if (p->is_eval)
        printf("  step %6lld  eval %7.2f  best %7.2f  episodes %5lld\n", (long long)p->env_steps, p->last_eval_return,
               p->best_eval_return, (long long)p->episodes);
    return 0;
}

static const char *td3_yaml =
    "algo: td3\nseed: 7\n"
    "train: {total_steps: 8000, start_steps: 1000, batch_size: 100, eval_every: 1000, eval_episodes: 10,"
    " progress_every_s: 1000}\n"
    "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 10000}\n";

static void test_td3_learns(void) {
    double zero, rnd;
    sanity_returns(&zero, &rnd);
    printf("point mass: doing nothing scores %.1f, random forces %.1f (the maximum is below 100)\n", zero, rnd);
    CHECK(zero < 70 && rnd < 70, "the task is not trivial: zero %.1f, random %.1f", zero, rnd);

    pm_world w;
    memset(&w, 0, sizeof w);
    rlt_env_callbacks cb = pm_callbacks(&w, 0);
    rlt_config *cfg = make_config(td3_yaml, test_tmpdir("user_env_td3"));
    rlt_trainer *tr;
    CHECK(rlt_trainer_init_env(cfg, &cb, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    memset(&cb, 0xA5, sizeof cb); /* the trainer copied the struct: scribbling on ours must not matter */
    counting = 1;
    int rc = rlt_trainer_run(tr, print_eval, NULL);
    counting = 0;
    CHECK(rc == RLT_OK, "run: %s", rlt_trainer_errmsg(tr));
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    printf("td3 point mass: best %.2f, final %.2f, %lld episodes (%ld terminated), %lld updates, %.1f s\n",
           p.best_eval_return, p.last_eval_return, (long long)p.episodes, w.terminations,
           (long long)p.updates, p.elapsed_s);
    CHECK(p.env_steps == 8000, "steps %lld", (long long)p.env_steps);
    CHECK(p.best_eval_return >= 85.0, "TD3 learns the point mass: best evaluation %.2f (threshold 85)", p.best_eval_return);
    CHECK(n_alloc == 0, "process-wide allocations during the run: %ld (must be 0)", n_alloc);
    CHECK(rlt_agent_allocations_after_init(rlt_trainer_agent(tr)) == 0, "engine hook allocations after init");
    CHECK(w.flags_not_cleared == 0, "the trainer clears terminated/truncated before each step (%ld not)", w.flags_not_cleared);
    CHECK(w.terminations > 0, "some training episodes terminate (the mass leaves the track)");
    CHECK(p.episodes > w.terminations, "some training episodes are truncated by the time limit (%lld episodes, %ld terminated)",
          (long long)p.episodes, w.terminations);
    CHECK(w.resets[1] >= 80 && w.steps[1] > 0, "evaluation runs on instance 1 (%ld resets)", w.resets[1]);

    /* summary.json names the user environment. */
    char path[700], text[4096] = "";
    snprintf(path, sizeof path, "%s/summary.json", rlt_trainer_out_dir(tr));
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(text, "\"env\": \"point_mass\"") && strstr(text, "\"allocations_after_init\": 0"), "summary.json: %s", text);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static void test_dqn_discrete(void) {
    pm_world w;
    memset(&w, 0, sizeof w);
    w.discrete = 1;
    rlt_env_callbacks cb = pm_callbacks(&w, 0);
    rlt_config *cfg = make_config("algo: dqn\nseed: 3\ntrain: {total_steps: 1500, eval_every: 500, eval_episodes: 2,"
                                  " batch_size: 32}\nnetwork: {hidden: [32, 32]}\nreplay: {capacity: 2000}\n"
                                  "dqn: {learning_starts: 200}\n",
                                  test_tmpdir("user_env_dqn"));
    rlt_trainer *tr;
    CHECK(rlt_trainer_init_env(cfg, &cb, &tr) == RLT_OK, "dqn init: %s", rlt_trainer_errmsg(tr));
    counting = 1;
    int rc = rlt_trainer_run(tr, NULL, NULL);
    counting = 0;
    CHECK(rc == RLT_OK, "dqn run: %s", rlt_trainer_errmsg(tr));
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    CHECK(p.env_steps == 1500 && p.updates > 0, "dqn trained: %lld steps, %lld updates", (long long)p.env_steps,
          (long long)p.updates);
    CHECK(n_alloc == 0, "process-wide allocations during the DQN run: %ld", n_alloc);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static size_t slurp(const char *path, unsigned char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f) fclose(f);
    return n;
}

static const char *resume_yaml =
    "algo: td3\nseed: 11\n"
    "train: {total_steps: 1500, start_steps: 300, batch_size: 32, eval_every: 500, eval_episodes: 2, progress_every_s: 1000}\n"
    "td3: {actor_hidden: [16, 16], critic_hidden: [16, 16]}\nreplay: {capacity: 2000}\n"
    "checkpoint: {every: 1000, keep: 1}\n";

/* Runs resume_yaml into dir (resuming from `from` when not NULL); returns the run's status. */
static int resume_run(const char *dir, const char *from, int with_state, int *resume_rc) {
    pm_world w;
    memset(&w, 0, sizeof w);
    rlt_env_callbacks cb = pm_callbacks(&w, with_state);
    rlt_config *cfg = make_config(resume_yaml, dir);
    rlt_trainer *tr;
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    if (from && rc == RLT_OK) {
        *resume_rc = rlt_trainer_resume(tr, from);
        if (*resume_rc != RLT_OK) printf("resume refused as expected? %s\n", rlt_trainer_errmsg(tr));
    }
    if (rc == RLT_OK && (!from || *resume_rc == RLT_OK)) rc = rlt_trainer_run(tr, NULL, NULL);
    CHECK(rc == RLT_OK, "run: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static unsigned char ckpt_a[1 << 20], ckpt_b[1 << 20];

static void test_resume(void) {
    char a[700], b[700], from[800], fa[800], fb[800];
    snprintf(a, sizeof a, "%s", test_tmpdir("user_env_resume_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("user_env_resume_b"));
    int rrc = 0;
    resume_run(a, NULL, 1, &rrc);
    snprintf(from, sizeof from, "%s/ckpt_1000.ckpt", a);
    resume_run(b, from, 1, &rrc);
    CHECK(rrc == RLT_OK, "resume with state callbacks");
    snprintf(fa, sizeof fa, "%s/final.ckpt", a);
    snprintf(fb, sizeof fb, "%s/final.ckpt", b);
    size_t na = slurp(fa, ckpt_a, sizeof ckpt_a), nb = slurp(fb, ckpt_b, sizeof ckpt_b);
    CHECK(na > 0 && na < sizeof ckpt_a && na == nb && memcmp(ckpt_a, ckpt_b, na) == 0,
          "resumed run's final.ckpt equals the uninterrupted run's (%zu vs %zu bytes)", na, nb);

    /* A resumed run that fails (the environment's step fails 300 steps after the checkpoint) writes its state to
     * failed.ckpt and leaves final.ckpt, the last good one, as it was. */
    pm_world w;
    memset(&w, 0, sizeof w);
    w.fail_at_step = 300;
    {
        rlt_env_callbacks cbf = pm_callbacks(&w, 1);
        rlt_config *cfg = make_config(resume_yaml, a);
        rlt_trainer *tr;
        CHECK(rlt_trainer_init_env(cfg, &cbf, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
        snprintf(from, sizeof from, "%s/ckpt_1000.ckpt", a);
        CHECK(rlt_trainer_resume(tr, from) == RLT_OK, "resume: %s", rlt_trainer_errmsg(tr));
        CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_ERUNTIME && strstr(rlt_trainer_errmsg(tr), "returned -42"),
              "the failing step fails the run: %s", rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
        size_t nf = slurp(fa, ckpt_b, sizeof ckpt_b);
        CHECK(nf == na && memcmp(ckpt_a, ckpt_b, na) == 0, "the failed run left final.ckpt as it was");
        snprintf(fb, sizeof fb, "%s/failed.ckpt", a);
        CHECK(slurp(fb, ckpt_b, sizeof ckpt_b) > 0, "the failed run's state is in failed.ckpt");
    }
    memset(&w, 0, sizeof w);

    /* Without save_state/load_state the episode state cannot come back: refused, with the reason. */
    rlt_env_callbacks cb = pm_callbacks(&w, 0);
    rlt_config *cfg = make_config(resume_yaml, test_tmpdir("user_env_resume_c"));
    rlt_trainer *tr;
    CHECK(rlt_trainer_init_env(cfg, &cb, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    CHECK(rlt_trainer_resume(tr, from) == RLT_ESTATE && strstr(rlt_trainer_errmsg(tr), "save_state"),
          "resume without state callbacks is refused: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static void expect_init_error(rlt_env_callbacks cb, const char *needle, const char *what) {
    rlt_config *cfg = make_config("algo: td3\n", test_tmpdir("user_env_bad"));
    rlt_trainer *tr;
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_EINVAL && strstr(rlt_trainer_errmsg(tr), needle), "%s: rc %d, message '%s' (want '%s')", what, rc,
          rlt_trainer_errmsg(tr), needle);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static void test_errors(void) {
    pm_world w;
    memset(&w, 0, sizeof w);
    rlt_env_callbacks good = pm_callbacks(&w, 0), cb;
    cb = good; cb.struct_size = 8;
    expect_init_error(cb, "struct_size", "a struct_size from no known version");
    cb = good; cb.step = NULL;
    expect_init_error(cb, "reset and step are required", "no step callback");
    cb = good; cb.save_state = pm_save;
    expect_init_error(cb, "both save_state and load_state", "half of the state callbacks");
    cb = good; cb.obs.shape[0] = 0;
    expect_init_error(cb, "observation dimension 0", "an empty observation");
    cb = good; cb.act.shape[0] = 17;
    expect_init_error(cb, "1..16", "too many action dimensions");
    static const float bad_low[1] = {1.0f}, bad_high[1] = {-1.0f};
    cb = good; cb.act.low = bad_low; cb.act.high = bad_high;
    expect_init_error(cb, "need finite low < high", "inverted bounds");
    rlt_config *cfg = make_config("algo: td3\n", test_tmpdir("user_env_bad"));
    rlt_trainer *tr = (rlt_trainer *)&w;
    CHECK(rlt_trainer_init_env(cfg, NULL, &tr) == RLT_EINVAL && tr == NULL, "NULL callbacks");
    /* A DQN config with a Box action space: the agent's own check speaks. */
    rlt_config_set(cfg, "algo=dqn");
    CHECK(rlt_trainer_init_env(cfg, &good, &tr) == RLT_EINVAL, "dqn with Box actions is refused: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);

    /* A callback that fails stops the run with its code, the callback and the step in the message. */
    rlt_config_set(cfg, "algo=td3");
    rlt_config_set(cfg, "train.total_steps=300");
    rlt_config_set(cfg, "train.start_steps=100");
    w.fail_at_step = 150;
    CHECK(rlt_trainer_init_env(cfg, &good, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    int rc = rlt_trainer_run(tr, NULL, NULL);
    CHECK(rc == RLT_ERUNTIME && strstr(rlt_trainer_errmsg(tr), "step returned -42") &&
              strstr(rlt_trainer_errmsg(tr), "'point_mass'"),
          "failing step: rc %d, '%s'", rc, rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

int main(void) {
    test_errors();
    test_dqn_discrete();
    test_resume();
    test_td3_learns();
    return test_summary("test_user_env");
}
