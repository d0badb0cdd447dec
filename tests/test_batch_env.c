/* test_batch_env.c: a vector user environment (rlt_env_callbacks' reset_batch and step_batch) against the same
 * environment given per instance. The environment is this file's: a point mass per instance whose episodes end
 * three ways (terminated when it leaves the track, truncated by a fuel budget of its own, truncated by the
 * trainer's time limit), with one world struct behind both sets of callbacks. Checks:
 * - batched callbacks whose resets use the trainer's seeds train exactly the per-instance run: final.ckpt and
 *   metrics.csv (less wall_s) are byte-identical, with TD3 and with DQN, N = 4; step_batch is called once per
 *   vector step and the per-instance callbacks only for the evaluation instance; nothing is allocated during
 *   the run;
 * - a vector environment that restarts ended instances on its own inside step_batch (Gymnasium's autoreset:
 *   the final observation in obs, the new one kept for reset_batch) trains exactly the per-instance run of an
 *   environment that ignores the seeds, also when the trainer's time limit ends episodes the environment did
 *   not restart itself;
 * - a struct_size of the first version ignores batched fields beyond it (the per-instance run);
 * - resume: with save_state/load_state a run resumed from its periodic checkpoint ends in the uninterrupted
 *   run's final.ckpt; without them resuming is refused (RLT_ESTATE, naming save_state);
 * - only one of the two batched callbacks is refused; a failing step_batch, and a non-finite observation in one
 *   row, stop the run naming the callback, its code and the instance. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

#include "alloc_counter.h"

#define BE_N 4            /* training instances */
#define BE_INST (BE_N + 1) /* and the evaluation one */
#define BE_LIMIT 1.5      /* |x| beyond this terminates */
#define BE_TIME_LIMIT 40  /* the trainer's time limit */

typedef struct be_state { double x, v; int32_t fuel; uint64_t rng; } be_state;

typedef struct be_world {
    be_state inst[BE_INST];
    int use_seed;  /* resets seed the instance from the trainer's seed; else its own generator continues */
    int autoreset; /* step_batch restarts ended instances itself (needs use_seed 0) */
    int discrete;
    /* Autoreset: the first observation of each instance's next episode, kept for reset_batch. */
    float pending[BE_N][2];
    int has_pending[BE_N];
    long step_calls[BE_INST], reset_calls[BE_INST], batch_steps, batch_resets, batch_reset_rows;
    long ends_terminated, ends_fuel, real_resets_after_autoreset, bad_calls;
    long fail_at_batch;   /* > 0: step_batch returns -7 at this call */
    long nan_at_batch;    /* > 0: step_batch writes NaN into row 2 at this call */
} be_world;

static uint64_t be_next(uint64_t *s) { /* xorshift64*, the simulator's own generator */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static double be_rand(uint64_t *s) { return (double)(be_next(s) >> 11) / 9007199254740992.0; }

static void be_start(be_world *w, int32_t k, uint64_t seed, float *obs) {
    be_state *s = &w->inst[k];
    if (w->use_seed) s->rng = seed | 1;
    else if (s->rng == 0) s->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1); /* seeded once per instance */
    s->x = 2.0 * be_rand(&s->rng) - 1.0;
    s->v = 0.4 * be_rand(&s->rng) - 0.2;
    s->fuel = 15 + (int32_t)(be_next(&s->rng) % 40); /* some episodes outlast the trainer's time limit */
    obs[0] = (float)s->x;
    obs[1] = (float)s->v;
}

/* One step of instance k: the dynamics both sets of callbacks share. */
static void be_advance(be_world *w, int32_t k, const void *action, float *obs, float *reward, uint8_t *terminated,
                       uint8_t *truncated) {
    be_state *s = &w->inst[k];
    double u = w->discrete ? (double)(((const int32_t *)action)[0] - 1) : ((const float *)action)[0];
    s->v += 0.1 * u;
    s->x += 0.1 * s->v;
    s->fuel--;
    obs[0] = (float)s->x;
    obs[1] = (float)s->v;
    *reward = (float)(1.0 - s->x * s->x - 0.05 * u * u);
    if (fabs(s->x) > BE_LIMIT) {
        *terminated = 1;
        if (k < BE_N) w->ends_terminated++;
    } else if (s->fuel <= 0) {
        *truncated = 1;
        if (k < BE_N) w->ends_fuel++;
    }
}

static int be_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    be_world *w = user;
    if (instance < 0 || instance >= BE_INST) return w->bad_calls++, -1;
    w->reset_calls[instance]++;
    be_start(w, instance, seed, obs);
    return 0;
}

static int be_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    be_world *w = user;
    if (instance < 0 || instance >= BE_INST) return w->bad_calls++, -1;
    w->step_calls[instance]++;
    be_advance(w, instance, action, obs, reward, terminated, truncated);
    return 0;
}

static int be_reset_batch(void *user, int32_t n, const uint8_t *mask, const uint64_t *seeds, void *obs) {
    be_world *w = user;
    if (n != BE_N) return w->bad_calls++, -1;
    w->batch_resets++;
    float *o = obs;
    for (int32_t k = 0; k < n; k++) {
        if (!mask[k]) {
            if (w->has_pending[k]) w->bad_calls++; /* the trainer must ask for every row that ended */
            continue;
        }
        w->batch_reset_rows++;
        if (w->autoreset && w->has_pending[k]) { /* restarted inside step_batch: hand the observation over */
            memcpy(o + 2 * k, w->pending[k], sizeof w->pending[k]);
            w->has_pending[k] = 0;
            continue;
        }
        if (w->autoreset && w->batch_resets > 1) w->real_resets_after_autoreset++; /* the trainer's time limit */
        be_start(w, k, seeds[k], o + 2 * k);
    }
    return 0;
}

static int be_step_batch(void *user, int32_t n, const void *actions, void *obs, float *rewards, uint8_t *terminated,
                         uint8_t *truncated) {
    be_world *w = user;
    if (n != BE_N) return w->bad_calls++, -1;
    w->batch_steps++;
    if (w->fail_at_batch > 0 && w->batch_steps == w->fail_at_batch) return -7;
    const size_t ab = w->discrete ? sizeof(int32_t) : sizeof(float);
    float *o = obs;
    for (int32_t k = 0; k < n; k++) {
        if (terminated[k] || truncated[k]) w->bad_calls++; /* the trainer clears the flags first */
        be_advance(w, k, (const unsigned char *)actions + (size_t)k * ab, o + 2 * k, &rewards[k], &terminated[k],
                   &truncated[k]);
        if (w->autoreset && (terminated[k] || truncated[k])) {
            be_start(w, k, 0, w->pending[k]);
            w->has_pending[k] = 1;
        }
    }
    if (w->nan_at_batch > 0 && w->batch_steps == w->nan_at_batch) o[2 * 2 + 1] = NAN;
    return 0;
}

static int be_save(void *user, int32_t instance, void *state) {
    memcpy(state, &((be_world *)user)->inst[instance], sizeof(be_state));
    return 0;
}

static int be_load(void *user, int32_t instance, const void *state) {
    memcpy(&((be_world *)user)->inst[instance], state, sizeof(be_state));
    return 0;
}

static const float be_low[1] = {-1.0f}, be_high[1] = {1.0f};

static rlt_env_callbacks be_callbacks(be_world *w, int batched, int with_state) {
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.name = "batch_point_mass";
    cb.obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    if (w->discrete) cb.act = (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL};
    else cb.act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, be_low, be_high};
    cb.max_episode_steps = BE_TIME_LIMIT;
    cb.user = w;
    cb.reset = be_reset;
    cb.step = be_step;
    if (batched) {
        cb.reset_batch = be_reset_batch;
        cb.step_batch = be_step_batch;
    }
    if (with_state) {
        cb.state_bytes = (int32_t)sizeof(be_state);
        cb.save_state = be_save;
        cb.load_state = be_load;
    }
    return cb;
}

static const char *td3_yaml =
    "algo: td3\nseed: 5\nenv: {num_envs: 4}\n"
    "train: {total_steps: 1200, start_steps: 200, batch_size: 32, eval_every: 400, eval_episodes: 2,"
    " progress_every_s: 1000}\n"
    "td3: {actor_hidden: [16], critic_hidden: [16]}\nreplay: {capacity: 1500}\n"
    "checkpoint: {every: 600, keep: 1}\n";

static const char *dqn_yaml =
    "algo: dqn\nseed: 6\nenv: {num_envs: 4}\n"
    "train: {total_steps: 1200, batch_size: 32, eval_every: 600, eval_episodes: 2, progress_every_s: 1000}\n"
    "network: {hidden: [16]}\nreplay: {capacity: 1500}\ndqn: {learning_starts: 200}\n";

/* Trains yaml into dir with cb (resuming from `from` when not NULL); returns the run's status, or the resume's
 * when it is refused (then *why gets the message). count: assert that nothing is allocated during the run. */
static int be_run(const char *yaml, const char *dir, rlt_env_callbacks *cb, const char *from, int count, char *why,
                  size_t why_cap) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, yaml, "batch.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", set);
    rlt_trainer *tr;
    int rc = rlt_trainer_init_env(cfg, cb, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    if (rc == RLT_OK && from) {
        rc = rlt_trainer_resume(tr, from);
        if (rc != RLT_OK && why) snprintf(why, why_cap, "%s", rlt_trainer_errmsg(tr));
    }
    if (rc == RLT_OK) {
        n_alloc = 0;
        counting = count;
        rc = rlt_trainer_run(tr, NULL, NULL);
        counting = 0;
        if (rc != RLT_OK && why) snprintf(why, why_cap, "%s", rlt_trainer_errmsg(tr));
        if (count) CHECK(n_alloc == 0, "process-wide allocations during the batched run: %ld (must be 0)", n_alloc);
    }
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

/* Seeded resets: the batched run is the per-instance run (TD3, then DQN with discrete pushes). */
static void seeded_equals_per_instance(const char *root, int discrete) {
    static be_world wp, wb;
    memset(&wp, 0, sizeof wp);
    memset(&wb, 0, sizeof wb);
    wp.use_seed = wb.use_seed = 1;
    wp.discrete = wb.discrete = discrete;
    const char *yaml = discrete ? dqn_yaml : td3_yaml;
    char dp[600], db[600];
    snprintf(dp, sizeof dp, "%s/%s_per_instance", root, discrete ? "dqn" : "td3");
    snprintf(db, sizeof db, "%s/%s_batched", root, discrete ? "dqn" : "td3");
    rlt_env_callbacks cp = be_callbacks(&wp, 0, 0), cbb = be_callbacks(&wb, 1, 0);
    CHECK(be_run(yaml, dp, &cp, NULL, 0, NULL, 0) == RLT_OK, "per-instance run");
    CHECK(be_run(yaml, db, &cbb, NULL, 1, NULL, 0) == RLT_OK, "batched run");
    test_same_run(dp, db, discrete ? "dqn: batched vs per instance" : "td3: batched vs per instance");
    long episodes = wp.ends_terminated + wp.ends_fuel;
    printf("%s: %ld episodes ended by the environment (%ld terminated), %ld batched resets of %ld rows\n",
           discrete ? "dqn" : "td3", episodes, wp.ends_terminated, wb.batch_resets, wb.batch_reset_rows);
    CHECK(wb.batch_steps == 1200 / BE_N, "step_batch once per vector step: %ld calls", wb.batch_steps);
    for (int k = 0; k < BE_N; k++)
        CHECK(wb.step_calls[k] == 0 && wb.reset_calls[k] == 0, "instance %d: no per-instance call when batched", k);
    CHECK(wb.step_calls[BE_N] == wp.step_calls[BE_N] && wb.step_calls[BE_N] > 0 &&
              wb.reset_calls[BE_N] == wp.reset_calls[BE_N],
          "the evaluation instance stays per instance: %ld / %ld steps", wb.step_calls[BE_N], wp.step_calls[BE_N]);
    long per_instance_resets = 0;
    for (int k = 0; k < BE_N; k++) per_instance_resets += wp.reset_calls[k];
    CHECK(wb.batch_reset_rows == per_instance_resets,
          "reset_batch restarts the rows that per-instance resets restart: %ld vs %ld", wb.batch_reset_rows,
          per_instance_resets);
    CHECK(wp.ends_terminated > 0 && wp.ends_fuel > 0 && per_instance_resets - BE_N > episodes,
          "episodes end all three ways (terminated %ld, fuel %ld, time limit %ld)", wp.ends_terminated, wp.ends_fuel,
          per_instance_resets - BE_N - episodes);
    CHECK(wb.bad_calls == 0 && wp.bad_calls == 0, "calls with cleared flags, n = 4 and instances in range");
}

/* Autoreset inside step_batch, against per-instance resets of an environment that ignores the seeds. */
static void autoreset_equals_per_instance(const char *root) {
    static be_world wp, wb;
    memset(&wp, 0, sizeof wp);
    memset(&wb, 0, sizeof wb);
    wb.autoreset = 1;
    char dp[600], db[600];
    snprintf(dp, sizeof dp, "%s/auto_per_instance", root);
    snprintf(db, sizeof db, "%s/auto_batched", root);
    rlt_env_callbacks cp = be_callbacks(&wp, 0, 0), cbb = be_callbacks(&wb, 1, 0);
    CHECK(be_run(td3_yaml, dp, &cp, NULL, 0, NULL, 0) == RLT_OK, "per-instance run");
    CHECK(be_run(td3_yaml, db, &cbb, NULL, 0, NULL, 0) == RLT_OK, "autoreset run");
    test_same_run(dp, db, "autoreset batched vs per instance");
    CHECK(wb.real_resets_after_autoreset > 0,
          "the trainer's time limit made reset_batch restart rows the environment had not (%ld)",
          wb.real_resets_after_autoreset);
}

/* A caller compiled against the first version: the batched fields beyond its struct_size are not read. */
static void first_version_ignores_batch_fields(const char *root) {
    static be_world w;
    memset(&w, 0, sizeof w);
    w.use_seed = 1;
    rlt_env_callbacks cb = be_callbacks(&w, 1, 0);
    cb.struct_size = (uint32_t)offsetof(rlt_env_callbacks, reset_batch);
    char d[600], ref[600];
    snprintf(d, sizeof d, "%s/v1", root);
    snprintf(ref, sizeof ref, "%s/td3_per_instance", root);
    CHECK(be_run(td3_yaml, d, &cb, NULL, 0, NULL, 0) == RLT_OK, "v1 run");
    CHECK(w.batch_steps == 0 && w.step_calls[0] > 0, "version 1: per-instance calls only (%ld batched)", w.batch_steps);
    test_same_run(ref, d, "version 1 struct vs per instance");
}

static void resume(const char *root) {
    static be_world wa, wb, wc;
    memset(&wa, 0, sizeof wa);
    memset(&wb, 0, sizeof wb);
    memset(&wc, 0, sizeof wc);
    wa.use_seed = wb.use_seed = wc.use_seed = 1;
    char da[600], db[600], dc[600], from[700], why[1024] = "";
    snprintf(da, sizeof da, "%s/resume_a", root);
    snprintf(db, sizeof db, "%s/resume_b", root);
    snprintf(dc, sizeof dc, "%s/resume_c", root);
    rlt_env_callbacks ca = be_callbacks(&wa, 1, 1), cbb = be_callbacks(&wb, 1, 1), cc = be_callbacks(&wc, 1, 0);
    CHECK(be_run(td3_yaml, da, &ca, NULL, 0, NULL, 0) == RLT_OK, "run A");
    snprintf(from, sizeof from, "%s/ckpt_600.ckpt", da);
    CHECK(be_run(td3_yaml, db, &cbb, from, 0, why, sizeof why) == RLT_OK, "resumed run B: %s", why);
    char fa[700], fb[700];
    snprintf(fa, sizeof fa, "%s/final.ckpt", da);
    snprintf(fb, sizeof fb, "%s/final.ckpt", db);
    CHECK(test_files_differ(fa, fb) == 0, "a batched run resumed at 600 ends in the uninterrupted run's final.ckpt");
    CHECK(wb.batch_steps == 600 / BE_N, "B stepped from 600 on: %ld batched steps", wb.batch_steps);
    int rc = be_run(td3_yaml, dc, &cc, from, 0, why, sizeof why);
    CHECK(rc == RLT_ESTATE && strstr(why, "save_state"), "without save_state/load_state resuming is refused: %d '%s'", rc,
          why);
}

static void errors(const char *root) {
    static be_world w;
    memset(&w, 0, sizeof w);
    w.use_seed = 1;
    rlt_env_callbacks cb = be_callbacks(&w, 1, 0);
    cb.reset_batch = NULL;
    rlt_config *cfg;
    rlt_config_init(&cfg);
    rlt_config_load_string(cfg, td3_yaml, "batch.yaml");
    rlt_trainer *tr;
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_EINVAL && strstr(rlt_trainer_errmsg(tr), "both reset_batch and step_batch"),
          "half of the batched callbacks: %d '%s'", rc, rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);

    char d[600], why[1024] = "";
    memset(&w, 0, sizeof w);
    w.use_seed = 1;
    w.fail_at_batch = 40;
    cb = be_callbacks(&w, 1, 0);
    snprintf(d, sizeof d, "%s/fail", root);
    rc = be_run(td3_yaml, d, &cb, NULL, 0, why, sizeof why);
    CHECK(rc == RLT_ERUNTIME && strstr(why, "step_batch returned -7") && strstr(why, "at env step 156") &&
              strstr(why, "'batch_point_mass'"),
          "failing step_batch: %d '%s'", rc, why);
    memset(&w, 0, sizeof w);
    w.use_seed = 1;
    w.nan_at_batch = 10;
    cb = be_callbacks(&w, 1, 0);
    snprintf(d, sizeof d, "%s/nan", root);
    rc = be_run(td3_yaml, d, &cb, NULL, 0, why, sizeof why);
    CHECK(rc == RLT_ERUNTIME && strstr(why, "step_batch (instance 2) (observation element 1 is nan"),
          "a NaN in row 2: %d '%s'", rc, why);
}

int main(void) {
    const char *root = test_tmpdir("batch_env");
    seeded_equals_per_instance(root, 0);
    seeded_equals_per_instance(root, 1);
    autoreset_equals_per_instance(root);
    first_version_ignores_batch_fields(root);
    resume(root);
    errors(root);
    return test_summary("test_batch_env");
}
