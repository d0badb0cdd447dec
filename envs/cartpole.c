/* cartpole.c: Gymnasium's CartPole-v1 (gymnasium/envs/classic_control/cartpole.py, the Euler integrator)
 * operation for operation, so trajectories match the reference bit for bit (tests/test_envs.c replays
 * goldens recorded from Gymnasium 1.x).
 *
 * Precision: Gymnasium 1.x keeps the state as float64 between steps (self.state = np.array(..., float64))
 * and rounds to float32 only for the observation it returns, so this file does all arithmetic in double,
 * in the reference's association order, and never rounds the state. (Gym 0.2x also kept float64 state;
 * only the observation was ever float32.) np.square is x * x. tests/test_envs.c checks the float64 state
 * after every step, not just the float32 observation. */
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

#define CARTPOLE_PI 3.14159265358979323846

/* The constructor's constants, derived the way the Python computes them (total_mass = 0.1 + 1.0 and
 * polemass_length = 0.1 * 0.5 are rounded double results, not the decimal values). */
static const double gravity = 9.8;
static const double masscart = 1.0;
static const double masspole = 0.1;
static const double length = 0.5; /* half the pole's length */
static const double force_mag = 10.0;
static const double tau = 0.02;
static const double x_threshold = 2.4;

typedef struct cartpole_state {
    double s[4];                     /* x, x_dot, theta, theta_dot */
    int32_t steps_beyond_terminated; /* -1: not terminated yet (Python's None) */
} cartpole_state;

_Static_assert(sizeof(cartpole_state) <= RLT_ENV_STATE_BYTES, "cartpole state must fit in rlt_env.state");

static cartpole_state *state_of(rlt_env *env) { return (cartpole_state *)(void *)env->state; }

static void observe(const cartpole_state *c, float *obs) {
    for (int i = 0; i < 4; i++) obs[i] = (float)c->s[i];
}

static int cartpole_setup(rlt_env *env) {
    env->obs_space = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 1, .shape = {4}};
    env->act_space = (rlt_space){.kind = RLT_SPACE_DISCRETE, .dtype = RLT_DTYPE_I32, .ndim = 1, .shape = {1}, .n = 2};
    env->max_steps = 500;
    state_of(env)->steps_beyond_terminated = -1;
    return RLT_OK;
}

static int cartpole_reset(rlt_env *env, void *obs) {
    cartpole_state *c = state_of(env);
    /* np_random.uniform(-0.05, 0.05, size=(4,)), in state order. */
    for (int i = 0; i < 4; i++) c->s[i] = rlt_rng_range_f64(&env->rng, -0.05, 0.05);
    c->steps_beyond_terminated = -1;
    env->t = 0;
    observe(c, obs);
    return RLT_OK;
}

static int cartpole_step(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated,
                         uint8_t *truncated) {
    (void)truncated;
    cartpole_state *c = state_of(env);
    int32_t a = *(const int32_t *)action;
    /* Gymnasium asserts action_space.contains(action); here a bad action is the caller's error. */
    if (a != 0 && a != 1) return RLT_EINVAL;

    const double total_mass = masspole + masscart;
    const double polemass_length = masspole * length;
    const double theta_threshold = 12 * 2 * CARTPOLE_PI / 360;

    double x = c->s[0], x_dot = c->s[1], theta = c->s[2], theta_dot = c->s[3];
    double force = a == 1 ? force_mag : -force_mag;
    double costheta = cos(theta);
    double sintheta = sin(theta);
    double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
    double thetaacc = (gravity * sintheta - costheta * temp) /
                      (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
    double xacc = temp - polemass_length * thetaacc * costheta / total_mass;

    x = x + tau * x_dot;
    x_dot = x_dot + tau * xacc;
    theta = theta + tau * theta_dot;
    theta_dot = theta_dot + tau * thetaacc;
    c->s[0] = x;
    c->s[1] = x_dot;
    c->s[2] = theta;
    c->s[3] = theta_dot;

    int done = x < -x_threshold || x > x_threshold || theta < -theta_threshold || theta > theta_threshold;
    /* Reward 1 on every step up to and including the one that terminates; steps taken after that
     * (undefined behaviour in Gymnasium, which warns) earn 0, as the reference gives them. */
    if (!done) {
        *reward = 1.0f;
    } else if (c->steps_beyond_terminated < 0) {
        c->steps_beyond_terminated = 0;
        *reward = 1.0f;
    } else {
        c->steps_beyond_terminated++;
        *reward = 0.0f;
    }
    *terminated = (uint8_t)done;
    observe(c, obs);
    return RLT_OK;
}

/* The state must be finite (one NaN makes every later observation NaN), and steps_beyond_terminated counts
 * steps taken after termination: -1 before it, then at most one more per step. */
static int cartpole_check_state(const rlt_env *env, const unsigned char *state, int32_t t, char *why, size_t cap) {
    (void)env;
    static const char *names[4] = {"x (the cart position)", "x_dot (the cart velocity)", "theta (the pole angle)",
                                   "theta_dot (the pole's angular velocity)"};
    cartpole_state c;
    memcpy(&c, state, sizeof c);
    for (int i = 0; i < 4; i++)
        if (!isfinite(c.s[i])) {
            snprintf(why, cap, "%s is %g", names[i], c.s[i]);
            return -1;
        }
    if (c.steps_beyond_terminated < -1 || c.steps_beyond_terminated > t) {
        snprintf(why, cap, "steps_beyond_terminated is %d; %d steps after a reset it is -1..%d",
                 (int)c.steps_beyond_terminated, (int)t, (int)t);
        return -1;
    }
    return 0;
}

void rlt_cartpole_set_state(rlt_env *env, const double state[4], float *obs) {
    cartpole_state *c = state_of(env);
    memcpy(c->s, state, sizeof c->s);
    c->steps_beyond_terminated = -1;
    if (obs) observe(c, obs);
}

void rlt_cartpole_get_state(const rlt_env *env, double state[4]) {
    memcpy(state, ((const cartpole_state *)(const void *)env->state)->s, 4 * sizeof(double));
}

const rlt_env_class rlt_env_class_cartpole = {
    .name = "cartpole",
    .description = "Gymnasium CartPole-v1: balance a pole on a cart (Box(4) obs, Discrete(2) push left/right, "
                   "500 steps)",
    .setup = cartpole_setup,
    .reset = cartpole_reset,
    .step = cartpole_step,
    .check_state = cartpole_check_state,
};
