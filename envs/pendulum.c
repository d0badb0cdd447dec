/* pendulum.c: Gymnasium's Pendulum-v1 (gymnasium/envs/classic_control/pendulum.py), operation for
 * operation, including where NumPy computes in float32 and where in float64, so that trajectories match
 * the reference bit for bit (tests/test_envs.c replays goldens recorded from Gymnasium 1.x, NumPy 2.x).
 *
 * Precision, as NumPy 2 promotes it (NEP 50: a Python float next to a float32 stays float32):
 *   - the state (th, thdot) is float64; the action arrives as float32 and u = clip(action) stays float32;
 *   - cost = angle_normalize(th)**2 + 0.1 * thdot**2 + 0.001 * u**2: the first two terms are float64
 *     pow(x, 2) (NumPy's scalar power calls libm pow, which is not always the correctly rounded x * x),
 *     the last is float32 powf(u, 2) times 0.001f, widened when it is added;
 *   - newthdot = thdot + (15 * sin(th) + 3.0f * u) * dt: 3.0 * u is a float32 product;
 *   - the observation [cos th, sin th, thdot] is computed in float64 and rounded to float32.
 * tests/test_envs.c checks the float64 state after every step, not just the float32 observation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "envs_internal.h"

/* The reference arithmetic is reproduced operation by operation, so a * b + c must never be contracted
 * into an fma (one rounding instead of two). ISO C modes already keep GCC from contracting; this holds
 * under -std=gnu11, -march=native and -ffp-contract=fast too (clang honours its pragma unless given
 * -ffp-contract=fast). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define PENDULUM_PI 3.14159265358979323846
#define MAX_SPEED 8.0
#define MAX_TORQUE 2.0f
#define DT 0.05
#define GRAVITY 10.0
#define MASS 1.0
#define LENGTH 1.0

typedef struct pendulum_state {
    double th;    /* angle, 0 upright */
    double thdot; /* angular velocity */
} pendulum_state;

_Static_assert(sizeof(pendulum_state) <= RLT_ENV_STATE_BYTES, "pendulum state must fit in rlt_env.state");

static pendulum_state *state_of(rlt_env *env) { return (pendulum_state *)(void *)env->state; }

/* ((x + pi) % (2 pi)) - pi with NumPy's float64 remainder: fmod, then moved into the divisor's sign. */
static double angle_normalize(double x) {
    double b = 2.0 * PENDULUM_PI;
    double mod = fmod(x + PENDULUM_PI, b);
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = copysign(0.0, b);
    }
    return mod - PENDULUM_PI;
}

/* x**2 as NumPy computes it for a float64 and a float32 scalar: a call to libm's pow/powf. GCC folds
 * pow(x, 2.0) into x * x, which differs from glibc's pow in the last bit for about 1 input in 1,000; the
 * volatile exponent keeps the real call. */
static double np_square_f64(double x) {
    volatile double two = 2.0;
    return pow(x, two);
}
static float np_square_f32(float x) {
    volatile float two = 2.0f;
    return powf(x, two);
}

static void observe(const pendulum_state *s, float *obs) {
    obs[0] = (float)cos(s->th);
    obs[1] = (float)sin(s->th);
    obs[2] = (float)s->thdot;
}

static int pendulum_setup(rlt_env *env) {
    env->obs_space = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {3}};
    env->act_low[0] = -MAX_TORQUE;
    env->act_high[0] = MAX_TORQUE;
    env->act_space = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {1},
                                 .low = env->act_low, .high = env->act_high};
    env->max_steps = 200;
    return RLT_OK;
}

static int pendulum_reset(rlt_env *env, void *obs) {
    pendulum_state *s = state_of(env);
    /* np_random.uniform(low=[-pi, -1], high=[pi, 1]): th first, then thdot. */
    s->th = rlt_rng_range_f64(&env->rng, -PENDULUM_PI, PENDULUM_PI);
    s->thdot = rlt_rng_range_f64(&env->rng, -1.0, 1.0);
    env->t = 0;
    observe(s, obs);
    return RLT_OK;
}

static int pendulum_step(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated,
                         uint8_t *truncated) {
    (void)terminated;
    (void)truncated;
    pendulum_state *s = state_of(env);
    float a = ((const float *)action)[0];
    /* np.clip keeps a NaN a NaN (fminf/fmaxf would not), so NaN actions show up instead of being hidden. */
    float u = a < -MAX_TORQUE ? -MAX_TORQUE : (a > MAX_TORQUE ? MAX_TORQUE : a);
    double th = s->th, thdot = s->thdot;

    double costs =
        np_square_f64(angle_normalize(th)) + 0.1 * np_square_f64(thdot) + (double)(0.001f * np_square_f32(u));

    const double g_term = 3 * GRAVITY / (2 * LENGTH);             /* 15.0, exact as in Python */
    const float u_term = (float)(3.0 / (MASS * LENGTH * LENGTH)); /* 3.0, multiplied in float32 */
    double newthdot = thdot + (g_term * sin(th) + (double)(u_term * u)) * DT;
    newthdot = newthdot < -MAX_SPEED ? -MAX_SPEED : (newthdot > MAX_SPEED ? MAX_SPEED : newthdot);
    double newth = th + newthdot * DT;

    s->th = newth;
    s->thdot = newthdot;
    observe(s, obs);
    *reward = (float)-costs;
    return RLT_OK;
}

/* A reset draws th in [-pi, pi] and thdot in [-1, 1]; a step clips thdot to [-MAX_SPEED, MAX_SPEED] and moves
 * th by thdot * DT, so t steps reach |th| <= pi + t * MAX_SPEED * DT (th is not wrapped, as in Gymnasium). */
static int pendulum_check_state(const rlt_env *env, const unsigned char *state, int32_t t, char *why, size_t cap) {
    (void)env;
    pendulum_state s;
    memcpy(&s, state, sizeof s);
    double th_max = (PENDULUM_PI + MAX_SPEED * DT * (double)t) * (1.0 + 1e-12);
    if (!isfinite(s.th) || fabs(s.th) > th_max) {
        snprintf(why, cap, "th (the angle) is %g; %d steps after a reset it is within +-%g", s.th, (int)t, th_max);
        return -1;
    }
    if (!isfinite(s.thdot) || fabs(s.thdot) > MAX_SPEED) {
        snprintf(why, cap, "thdot (the angular velocity) is %g; it is clipped to +-%g", s.thdot, MAX_SPEED);
        return -1;
    }
    return 0;
}

void rlt_pendulum_set_state(rlt_env *env, double th, double thdot, float *obs) {
    pendulum_state *s = state_of(env);
    s->th = th;
    s->thdot = thdot;
    if (obs) observe(s, obs);
}

void rlt_pendulum_get_state(const rlt_env *env, double *th, double *thdot) {
    const pendulum_state *s = (const pendulum_state *)(const void *)env->state;
    *th = s->th;
    *thdot = s->thdot;
}

const rlt_env_class rlt_env_class_pendulum = {
    .name = "pendulum",
    .description = "Gymnasium Pendulum-v1: swing a pendulum up and hold it (Box(3) obs, Box(1) torque in [-2, 2], "
                   "200 steps)",
    .setup = pendulum_setup,
    .reset = pendulum_reset,
    .step = pendulum_step,
    .check_state = pendulum_check_state,
};
