/* test_envs.c: the built-in environments against their reference implementations, and the registry.
 *
 * Golden trajectories (tests/data/env_*.txt, written by tests/gen_env_goldens.py from Gymnasium 1.x and
 * MinAtar) start from an internal state loaded into both sides, so the comparison does not depend on
 * either side's random numbers; each is then replayed action by action.
 *
 * Tolerances: the float64 states, float32 observations and rewards of Pendulum-v1 and CartPole-v1 must be
 * bit-identical after every step. The state is checked because a last-bit difference in a double usually
 * vanishes when rounded to a float32 observation and would only surface hundreds of steps later. Exact
 * equality is fair: the C code performs the same IEEE double and float operations in the same order as
 * NumPy, and NumPy's float64 sin/cos/pow and float32 powf are glibc's libm functions, which this test
 * calls too on a glibc system. Elsewhere a different libm may differ in the last bit of sin or pow and the
 * dynamics can grow that, so there we accept a relative error of 1e-4 (far below any behavioural
 * difference). MinAtar Breakout is integer logic: observations, rewards and flags must be identical. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "envs/envs_internal.h"
#include "harness.h"

#ifndef RLT_SOURCE_DIR
#define RLT_SOURCE_DIR ".."
#endif

#ifdef __GLIBC__
#define FLOAT_RTOL 0.0
#else
#define FLOAT_RTOL 1e-4
#endif

/* ---- reading the golden files ---------------------------------------------------------------- */

typedef struct golden {
    FILE *f;
    char path[512];
    char line[1024];
    int lineno;
} golden;

static int golden_open(golden *g, const char *name) {
    snprintf(g->path, sizeof g->path, "%s/tests/data/%s", RLT_SOURCE_DIR, name);
    g->f = fopen(g->path, "r");
    g->lineno = 0;
    CHECK(g->f != NULL, "cannot open %s (regenerate with tests/gen_env_goldens.py)", g->path);
    return g->f != NULL;
}

/* The next line that is not a comment, or NULL at the end of the file. */
static const char *golden_next(golden *g) {
    while (fgets(g->line, sizeof g->line, g->f)) {
        g->lineno++;
        if (g->line[0] != '#' && g->line[0] != '\n') return g->line;
    }
    return NULL;
}

static int floats_match(float got, float want) {
    if (got == want) return 1;
    return FLOAT_RTOL > 0 && fabs((double)got - (double)want) <= FLOAT_RTOL * (fabs((double)want) + 1e-6);
}

static int doubles_match(double got, double want) {
    if (got == want) return 1;
    return FLOAT_RTOL > 0 && fabs(got - want) <= FLOAT_RTOL * (fabs(want) + 1e-6);
}

static int check_doubles(const golden *g, const char *what, const double *got, const double *want, int n, int *reported) {
    int ok = 1;
    for (int i = 0; i < n; i++) ok = ok && doubles_match(got[i], want[i]);
    if (!ok && !*reported) {
        *reported = 1;
        for (int i = 0; i < n; i++)
            CHECK(doubles_match(got[i], want[i]), "%s:%d %s[%d]: got %.17g want %.17g", g->path, g->lineno, what, i,
                  got[i], want[i]);
    }
    return ok;
}

/* Compares n floats; reports only the first difference of a trajectory so a divergence is one line. */
static int check_floats(const golden *g, const char *what, const float *got, const float *want, int n, int *reported) {
    int ok = 1;
    for (int i = 0; i < n; i++) ok = ok && floats_match(got[i], want[i]);
    if (!ok && !*reported) {
        *reported = 1;
        for (int i = 0; i < n; i++)
            CHECK(floats_match(got[i], want[i]), "%s:%d %s[%d]: got %.9g want %.9g", g->path, g->lineno, what, i,
                  (double)got[i], (double)want[i]);
    }
    return ok;
}

/* ---- Pendulum-v1 ----------------------------------------------------------------------------- */

static void test_pendulum_goldens(void) {
    golden g;
    if (!golden_open(&g, "env_pendulum.txt")) return;
    rlt_env env;
    rlt_err e = {0};
    CHECK(rlt_env_make(&env, &e, "Pendulum-v1", 1, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    int trajs = 0, steps_checked = 0;
    const char *ln;
    while ((ln = golden_next(&g))) {
        int n;
        double th, thdot;
        if (sscanf(ln, "traj %d %lf %lf", &n, &th, &thdot) != 3) {
            CHECK(0, "%s:%d: expected a traj line", g.path, g.lineno);
            break;
        }
        float obs[3], want[3], ignore[3];
        rlt_env_reset(&env, ignore);
        rlt_pendulum_set_state(&env, th, thdot, obs);
        ln = golden_next(&g);
        CHECK(ln && sscanf(ln, "init %f %f %f", &want[0], &want[1], &want[2]) == 3, "%s:%d: init", g.path, g.lineno);
        int reported = 0, good = 1;
        good &= check_floats(&g, "init obs", obs, want, 3, &reported);
        for (int t = 0; t < n; t++) {
            float a, rw;
            double r;
            int term, trunc;
            ln = golden_next(&g);
            double st_want[2], st[2];
            if (!ln || sscanf(ln, "%f %f %f %f %lf %d %d %lf %lf", &a, &want[0], &want[1], &want[2], &r, &term, &trunc,
                              &st_want[0], &st_want[1]) != 9) {
                CHECK(0, "%s:%d: bad step line", g.path, g.lineno);
                return;
            }
            uint8_t te, tr;
            CHECK(rlt_env_step(&env, &a, obs, &rw, &te, &tr) == RLT_OK, "step");
            good &= check_floats(&g, "obs", obs, want, 3, &reported);
            rlt_pendulum_get_state(&env, &st[0], &st[1]);
            good &= check_doubles(&g, "state", st, st_want, 2, &reported);
            float rwant = (float)r;
            good &= check_floats(&g, "reward", &rw, &rwant, 1, &reported);
            if (te != term || tr != trunc) {
                CHECK(0, "%s:%d: terminated/truncated %d/%d, want %d/%d", g.path, g.lineno, te, tr, term, trunc);
                good = 0;
            }
            steps_checked++;
        }
        CHECK(good, "pendulum trajectory %d matches Gymnasium", trajs);
        trajs++;
    }
    fclose(g.f);
    CHECK(trajs >= 4 && steps_checked >= 800, "pendulum goldens: %d trajectories, %d steps", trajs, steps_checked);
}

/* ---- CartPole-v1 ----------------------------------------------------------------------------- */

static void test_cartpole_goldens(void) {
    golden g;
    if (!golden_open(&g, "env_cartpole.txt")) return;
    rlt_env env;
    rlt_err e = {0};
    CHECK(rlt_env_make(&env, &e, "CartPole-v1", 1, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    int trajs = 0, steps_checked = 0, terminals = 0, truncations = 0;
    const char *ln;
    while ((ln = golden_next(&g))) {
        int n;
        double s[4];
        if (sscanf(ln, "traj %d %lf %lf %lf %lf", &n, &s[0], &s[1], &s[2], &s[3]) != 5) {
            CHECK(0, "%s:%d: expected a traj line", g.path, g.lineno);
            break;
        }
        float obs[4], want[4], ignore[4];
        rlt_env_reset(&env, ignore);
        rlt_cartpole_set_state(&env, s, obs);
        ln = golden_next(&g);
        CHECK(ln && sscanf(ln, "init %f %f %f %f", &want[0], &want[1], &want[2], &want[3]) == 4, "%s:%d: init", g.path,
              g.lineno);
        int reported = 0, good = 1;
        good &= check_floats(&g, "init obs", obs, want, 4, &reported);
        for (int t = 0; t < n; t++) {
            int32_t a;
            float rw;
            double r;
            int term, trunc;
            ln = golden_next(&g);
            double st_want[4], st[4];
            if (!ln || sscanf(ln, "%d %f %f %f %f %lf %d %d %lf %lf %lf %lf", &a, &want[0], &want[1], &want[2], &want[3],
                              &r, &term, &trunc, &st_want[0], &st_want[1], &st_want[2], &st_want[3]) != 12) {
                CHECK(0, "%s:%d: bad step line", g.path, g.lineno);
                return;
            }
            uint8_t te, tr;
            CHECK(rlt_env_step(&env, &a, obs, &rw, &te, &tr) == RLT_OK, "step");
            good &= check_floats(&g, "obs", obs, want, 4, &reported);
            rlt_cartpole_get_state(&env, st);
            good &= check_doubles(&g, "state", st, st_want, 4, &reported);
            float rwant = (float)r;
            good &= check_floats(&g, "reward", &rw, &rwant, 1, &reported);
            if (te != term || tr != trunc) {
                CHECK(0, "%s:%d: terminated/truncated %d/%d, want %d/%d", g.path, g.lineno, te, tr, term, trunc);
                good = 0;
            }
            terminals += term && r == 1.0;
            truncations += trunc;
            steps_checked++;
        }
        CHECK(good, "cartpole trajectory %d matches Gymnasium", trajs);
        trajs++;
    }
    fclose(g.f);
    CHECK(trajs >= 4 && terminals >= 3 && truncations == 1, "cartpole goldens: %d trajectories, %d terminals, %d truncations",
          trajs, terminals, truncations);
    CHECK(steps_checked > 500, "cartpole goldens: %d steps", steps_checked);
}

/* The termination test is strict: exactly at a threshold is still inside. */
static void test_cartpole_thresholds(void) {
    rlt_env env;
    rlt_err e = {0};
    CHECK(rlt_env_make(&env, &e, "CartPole-v1", 3, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    const double th = 12 * 2 * 3.14159265358979323846 / 360;
    struct { double s[4]; int want; } cases[] = {
        {{2.4, 0.0, 0.0, 0.0}, 0},   {{2.4, 0.01, 0.0, 0.0}, 1},  {{-2.4, 0.0, 0.0, 0.0}, 0},
        {{-2.4, -0.01, 0.0, 0.0}, 1}, {{0.0, 0.0, th, 0.0}, 0},    {{0.0, 0.0, th, 0.01}, 1},
        {{0.0, 0.0, -th, 0.0}, 0},   {{0.0, 0.0, -th, -0.01}, 1}, {{0.0, 0.0, 0.0, 0.0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float obs[4], r;
        uint8_t te, tr;
        int32_t a = 0;
        rlt_env_reset(&env, obs);
        rlt_cartpole_set_state(&env, cases[i].s, NULL);
        CHECK(rlt_env_step(&env, &a, obs, &r, &te, &tr) == RLT_OK, "step");
        CHECK(te == cases[i].want && r == 1.0f && !tr, "case %zu: terminated %d want %d, reward %g", i, te,
              cases[i].want, (double)r);
    }
    /* Far outside, so that the next step is still outside: Gymnasium gives such steps reward 0. */
    const double out[4] = {3.0, 0.0, 0.0, 0.0};
    float o[4], r;
    uint8_t te, tr;
    int32_t a = 1;
    rlt_env_reset(&env, o);
    rlt_cartpole_set_state(&env, out, NULL);
    CHECK(rlt_env_step(&env, &a, o, &r, &te, &tr) == RLT_OK && te && r == 1.0f, "the terminating step earns 1");
    CHECK(rlt_env_step(&env, &a, o, &r, &te, &tr) == RLT_OK && te && r == 0.0f, "a step after termination earns 0");
    int32_t bad = 2;
    CHECK(rlt_env_step(&env, &bad, o, &r, &te, &tr) == RLT_EINVAL, "action 2 is outside Discrete(2)");
}

/* ---- MinAtar Breakout ------------------------------------------------------------------------ */

static int parse_digits(const char *s, uint8_t *out, int n) {
    for (int i = 0; i < n; i++) {
        if (s[i] != '0' && s[i] != '1') return 0;
        out[i] = (uint8_t)(s[i] - '0');
    }
    return 1;
}

/* 400 0/1 values from 100 hex digits, four to a digit, most significant bit first. */
static int parse_hexbits(const char *s, uint8_t *out, int n) {
    for (int i = 0; i < n / 4; i++) {
        int c = s[i], v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else return 0;
        for (int k = 0; k < 4; k++) out[4 * i + k] = (uint8_t)((v >> (3 - k)) & 1);
    }
    return s[n / 4] == '\0';
}

static void test_breakout_goldens(void) {
    golden g;
    if (!golden_open(&g, "env_breakout.txt")) return;
    rlt_env env;
    rlt_err e = {0};
    CHECK(rlt_env_make(&env, &e, "MinAtar/Breakout-v1", 1, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    rlt_breakout_set_sticky_prob(&env, 0.0);
    int trajs = 0, steps_checked = 0, bricks = 0, terminals = 0;
    const char *ln;
    static char digits[512];
    while ((ln = golden_next(&g))) {
        int n;
        if (sscanf(ln, "traj %d", &n) != 1) {
            CHECK(0, "%s:%d: expected a traj line", g.path, g.lineno);
            break;
        }
        rlt_breakout_game game;
        memset(&game, 0, sizeof game);
        ln = golden_next(&g);
        int ok = ln && sscanf(ln, "state %d %d %d %d %d %d %d %d %d", &game.ball_x, &game.ball_y, &game.ball_dir,
                              &game.pos, &game.last_x, &game.last_y, &game.strike, &game.terminal,
                              &game.last_action) == 9;
        ln = ok ? golden_next(&g) : NULL;
        ok = ok && ln && sscanf(ln, "bricks %511s", digits) == 1 && parse_digits(digits, &game.brick_map[0][0], 100);
        CHECK(ok, "%s:%d: bad state or bricks line", g.path, g.lineno);
        if (!ok) break;

        uint8_t obs[400], want[400], ignore[400];
        rlt_env_reset(&env, ignore);
        rlt_breakout_set_game(&env, &game, obs);
        ln = golden_next(&g);
        CHECK(ln && sscanf(ln, "init %511s", digits) == 1 && parse_hexbits(digits, want, 400), "%s:%d: init", g.path,
              g.lineno);
        CHECK(memcmp(obs, want, 400) == 0, "%s:%d: initial observation differs", g.path, g.lineno);
        int good = 1;
        for (int t = 0; t < n; t++) {
            int32_t a;
            int r, term, trunc;
            ln = golden_next(&g);
            if (!ln || sscanf(ln, "%d %d %d %d %511s", &a, &r, &term, &trunc, digits) != 5 ||
                !parse_hexbits(digits, want, 400)) {
                CHECK(0, "%s:%d: bad step line", g.path, g.lineno);
                return;
            }
            float rw;
            uint8_t te, tr;
            CHECK(rlt_env_step(&env, &a, obs, &rw, &te, &tr) == RLT_OK, "step");
            if (good && (memcmp(obs, want, 400) != 0 || rw != (float)r || te != term || tr != trunc)) {
                CHECK(0, "%s:%d: step %d differs from MinAtar (reward %g want %d, terminated %d want %d, obs %s)",
                      g.path, g.lineno, t, (double)rw, r, te, term, memcmp(obs, want, 400) ? "differs" : "same");
                good = 0;
            }
            bricks += r;
            terminals += term && r == 0 && t + 1 < n;
            steps_checked++;
        }
        CHECK(good, "breakout trajectory %d matches MinAtar", trajs);
        trajs++;
    }
    fclose(g.f);
    CHECK(trajs >= 3 && steps_checked >= 300 && bricks > 0 && terminals > 0,
          "breakout goldens: %d trajectories, %d steps, %d bricks, %d terminal steps", trajs, steps_checked, bricks,
          terminals);
}

/* With probability 1 every action repeats the previous one, which starts as no-op: the paddle never moves.
 * At the default 0.1, requests that alternate left and right are overridden about 0.1 / 1.1 of the time
 * (a repeat is visible only when the previous applied action differs from the request). */
static void test_breakout_sticky(void) {
    rlt_env env;
    rlt_err e = {0};
    CHECK(rlt_env_make(&env, &e, "MinAtar/Breakout-v1", 11, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    uint8_t obs[400];
    float r;
    uint8_t te, tr;
    rlt_breakout_set_sticky_prob(&env, 1.0);
    rlt_env_reset(&env, obs);
    int moved = 0;
    for (int t = 0; t < 50 && !moved; t++) {
        int32_t a = 1 + (t & 1);
        CHECK(rlt_env_step(&env, &a, obs, &r, &te, &tr) == RLT_OK, "step");
        moved = !obs[9 * 10 + 4];
        if (te) rlt_env_reset(&env, obs);
    }
    CHECK(!moved, "sticky probability 1 keeps the paddle still");

    rlt_breakout_set_sticky_prob(&env, 0.1);
    int overridden = 0, n = 20000;
    for (int t = 0; t < n; t++) {
        int32_t a = 1 + (t & 1);
        rlt_breakout_game game;
        CHECK(rlt_env_step(&env, &a, obs, &r, &te, &tr) == RLT_OK, "step");
        rlt_breakout_get_game(&env, &game);
        overridden += game.last_action != (a == 1 ? 1 : 3);
        if (te || tr) rlt_env_reset(&env, obs);
    }
    double frac = (double)overridden / n;
    CHECK(frac > 0.08 && frac < 0.102, "visible sticky repeats %.4f, expected about 0.0909", frac);

    int32_t bad = 3;
    CHECK(rlt_env_step(&env, &bad, obs, &r, &te, &tr) == RLT_EINVAL, "action 3 is outside Discrete(3)");
}

/* ---- resets, time limits, the registry ------------------------------------------------------- */

static void test_reset_ranges(void) {
    rlt_env p, c, b;
    rlt_err e = {0};
    CHECK(rlt_env_make(&p, &e, "Pendulum-v1", 7, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    CHECK(rlt_env_make(&c, &e, "CartPole-v1", 7, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    CHECK(rlt_env_make(&b, &e, "MinAtar/Breakout-v1", 7, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    int bad_p = 0, bad_c = 0, bad_b = 0, left = 0, right = 0;
    double sin_lo = 1, sin_hi = -1, cos_lo = 1, v_lo = 1, v_hi = -1, c_lo = 1, c_hi = -1;
    const int n = 5000;
    for (int i = 0; i < n; i++) {
        float po[3], co[4];
        uint8_t bo[400];
        rlt_env_reset(&p, po);
        rlt_env_reset(&c, co);
        rlt_env_reset(&b, bo);
        bad_p += !(po[2] >= -1.0f && po[2] <= 1.0f && fabs(po[0] * po[0] + po[1] * po[1] - 1.0) < 1e-6);
        sin_lo = fmin(sin_lo, po[1]);
        sin_hi = fmax(sin_hi, po[1]);
        cos_lo = fmin(cos_lo, po[0]);
        v_lo = fmin(v_lo, po[2]);
        v_hi = fmax(v_hi, po[2]);
        for (int k = 0; k < 4; k++) {
            bad_c += !(co[k] >= -0.05f && co[k] <= 0.05f);
            c_lo = fmin(c_lo, co[k]);
            c_hi = fmax(c_hi, co[k]);
        }
        /* The ball starts at (0, 3) or (9, 3), on its trail, with the paddle at 4 and rows 1-3 full. */
        int at_left = bo[100 + 30 + 0] && bo[200 + 30 + 0], at_right = bo[100 + 30 + 9] && bo[200 + 30 + 9];
        int sum = 0;
        for (int k = 0; k < 400; k++) sum += bo[k];
        bad_b += !(at_left != at_right && bo[94] == 1 && sum == 33);
        left += at_left;
        right += at_right;
        CHECK(p.t == 0 && c.t == 0 && b.t == 0, "reset sets t = 0");
    }
    CHECK(bad_p == 0 && bad_c == 0 && bad_b == 0, "resets out of range: pendulum %d, cartpole %d, breakout %d", bad_p,
          bad_c, bad_b);
    /* The draws must cover the ranges, not just stay inside them. */
    CHECK(sin_lo < -0.99 && sin_hi > 0.99 && cos_lo < -0.99 && v_lo < -0.99 && v_hi > 0.99,
          "pendulum resets cover th in [-pi, pi] and thdot in [-1, 1]");
    CHECK(c_lo < -0.0499 && c_hi > 0.0499, "cartpole resets cover [-0.05, 0.05]: [%g, %g]", c_lo, c_hi);
    CHECK(left > n / 2 - 200 && right > n / 2 - 200, "breakout starts left %d, right %d", left, right);

    /* Same seed and stream: same episodes; another stream: different ones. */
    rlt_env p2, p3;
    CHECK(rlt_env_make(&p2, &e, "Pendulum-v1", 7, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    CHECK(rlt_env_make(&p3, &e, "Pendulum-v1", 7, RLT_STREAM_EVAL_ENV, 0) == RLT_OK, "%s", e.msg);
    float a[3], b2[3], c3[3];
    rlt_env_reset(&p2, a);
    rlt_env_reset(&p3, c3);
    CHECK(rlt_env_make(&p2, &e, "Pendulum-v1", 7, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    rlt_env_reset(&p2, b2);
    CHECK(memcmp(a, b2, sizeof a) == 0 && memcmp(a, c3, sizeof a) != 0, "resets follow (seed, stream)");
}

static void test_time_limits(void) {
    rlt_env env;
    rlt_err e = {0};
    CHECK(rlt_env_make(&env, &e, "Pendulum-v1", 5, RLT_STREAM_ENV, 0) == RLT_OK, "%s", e.msg);
    CHECK(env.max_steps == 200, "Pendulum-v1 is limited to 200 steps, got %d", env.max_steps);
    float obs[3], r, u = 0.5f;
    uint8_t te, tr;
    int first_trunc = -1, any_term = 0;
    rlt_env_reset(&env, obs);
    for (int t = 1; t <= 200; t++) {
        CHECK(rlt_env_step(&env, &u, obs, &r, &te, &tr) == RLT_OK, "step");
        if (tr && first_trunc < 0) first_trunc = t;
        any_term |= te;
    }
    CHECK(first_trunc == 200 && !any_term && env.t == 200, "truncated first at step %d (want 200), t %d", first_trunc,
          env.t);

    CHECK(rlt_env_make(&env, &e, "Pendulum-v1", 5, RLT_STREAM_ENV, 17) == RLT_OK, "%s", e.msg);
    rlt_env_reset(&env, obs);
    first_trunc = -1;
    for (int t = 1; t <= 20; t++) {
        CHECK(rlt_env_step(&env, &u, obs, &r, &te, &tr) == RLT_OK, "step");
        if (tr && first_trunc < 0) first_trunc = t;
    }
    CHECK(env.max_steps == 17 && first_trunc == 17, "a max_steps override truncates at 17, got %d", first_trunc);

    CHECK(rlt_env_make(&env, &e, "CartPole-v1", 5, RLT_STREAM_ENV, 0) == RLT_OK && env.max_steps == 500,
          "CartPole-v1 is limited to 500 steps");
    CHECK(rlt_env_make(&env, &e, "MinAtar/Breakout-v1", 5, RLT_STREAM_ENV, 0) == RLT_OK && env.max_steps == 10000,
          "MinAtar/Breakout-v1 has a 10,000-step safety cap");
    CHECK(rlt_env_make(&env, &e, "CartPole-v1", 5, RLT_STREAM_ENV, -1) == RLT_ECONFIG, "a negative limit is an error");
}

static void test_registry(void) {
    rlt_env env;
    rlt_err e = {0};
    const char *names[] = {"pendulum", "cartpole", "minatar_breakout"};
    const char *ids[] = {"Pendulum-v1", "CartPole-v1", "MinAtar/Breakout-v1"};
    for (int i = 0; i < 3; i++) {
        CHECK(rlt_env_make(&env, &e, ids[i], 1, 1, 0) == RLT_OK && strcmp(env.cls->name, names[i]) == 0,
              "the reference id %s is accepted for %s", ids[i], names[i]);
        CHECK(rlt_env_make(&env, &e, names[i], 1, 1, 0) == RLT_OK, "%s: %s", names[i], e.msg);
        CHECK(strcmp(env.cls->name, names[i]) == 0 && env.cls->description && env.cls->description[0],
              "%s has a name and a description", names[i]);
        CHECK(strstr(rlt_env_names(), names[i]) != NULL, "rlt_env_names lists %s", names[i]);
        CHECK(env.act_space.kind != RLT_SPACE_BOX || (env.act_space.low == env.act_low && env.act_space.high == env.act_high),
              "%s: Box bounds point into the env", names[i]);
    }
    CHECK(env.obs_space.ndim == 3 && rlt_space_bytes(&env.obs_space) == 400 && env.act_space.n == 3 &&
              env.act_space.kind == RLT_SPACE_DISCRETE && env.act_space.dtype == RLT_DTYPE_I32,
          "breakout spaces: uint8 [4,10,10], Discrete(3)");

    rlt_err_clear(&e);
    CHECK(rlt_env_make(&env, &e, "Pendulum-v0", 1, 1, 0) == RLT_ECONFIG, "unknown name fails");
    CHECK(e.status == RLT_ECONFIG && strstr(e.msg, "did you mean 'Pendulum-v1'") && strstr(e.msg, rlt_env_names()),
          "message names the nearest and lists all: %s", e.msg);
    CHECK(rlt_env_make(&env, &e, "cartpole-v1", 1, 1, 0) == RLT_ECONFIG && strstr(e.msg, "'CartPole-v1'"),
          "names are case-sensitive but a case slip is suggested: %s", e.msg);
    CHECK(rlt_env_make(&env, &e, "HalfCheetah-v4", 1, 1, 0) == RLT_ECONFIG && !strstr(e.msg, "did you mean") &&
              strstr(e.msg, "pendulum"),
          "no suggestion for an unrelated name: %s", e.msg);

    rlt_space s = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {3}};
    CHECK(rlt_space_elems(&s) == 3 && rlt_space_bytes(&s) == 12, "f32[3]");
    s = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_U8, .ndim = 3, .shape = {4, 10, 10}};
    CHECK(rlt_space_elems(&s) == 400 && rlt_space_bytes(&s) == 400, "u8[4,10,10]");
    s.dtype = RLT_DTYPE_F16;
    CHECK(rlt_space_bytes(&s) == 800, "f16");
    s.dtype = RLT_DTYPE_BF16;
    CHECK(rlt_space_bytes(&s) == 800, "bf16");
    s.dtype = RLT_DTYPE_I32;
    CHECK(rlt_space_bytes(&s) == 1600, "i32");
    s.dtype = 99;
    CHECK(rlt_space_bytes(&s) < 0, "unknown dtype is an error");
    s.dtype = RLT_DTYPE_F32;
    s.ndim = 0;
    CHECK(rlt_space_elems(&s) < 0, "ndim 0 is an error");
}

int main(void) {
    test_registry();
    test_time_limits();
    test_reset_ranges();
    test_cartpole_thresholds();
    test_pendulum_goldens();
    test_cartpole_goldens();
    test_breakout_goldens();
    test_breakout_sticky();
    return test_summary("test_envs");
}
