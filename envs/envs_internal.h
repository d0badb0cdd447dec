/* envs_internal.h: what the built-in environments share with the registry and with the tests, and nothing
 * the library's users see. Each class is one const table; the setters load a reference implementation's
 * internal state into an env, which is how the golden tests replay Gymnasium and MinAtar trajectories
 * step for step (their random streams cannot be reproduced, their states can). */
#ifndef RLT_ENVS_INTERNAL_H
#define RLT_ENVS_INTERNAL_H

#include <stdint.h>
#include "env.h"

extern const rlt_env_class rlt_env_class_pendulum;         /* "Pendulum-v1" */
extern const rlt_env_class rlt_env_class_cartpole;         /* "CartPole-v1" */
extern const rlt_env_class rlt_env_class_minatar_breakout; /* "MinAtar/Breakout-v1" */

/* Each setter replaces the episode state (not env->t) and, when obs is not NULL, writes the observation
 * that state produces, as reset would. */

/* Pendulum-v1: PendulumEnv.state = [th, thdot]. */
void rlt_pendulum_set_state(rlt_env *env, double th, double thdot, float *obs);
void rlt_pendulum_get_state(const rlt_env *env, double *th, double *thdot);

/* CartPole-v1: CartPoleEnv.state = [x, x_dot, theta, theta_dot]; also clears steps_beyond_terminated,
 * as a fresh reset does. */
void rlt_cartpole_set_state(rlt_env *env, const double state[4], float *obs);
void rlt_cartpole_get_state(const rlt_env *env, double state[4]);

/* MinAtar Breakout: the fields of minatar.environments.breakout.Env plus the Environment wrapper's
 * last_action (a full action index: 0 n, 1 l, 2 u, 3 r, 4 d, 5 f). brick_map is [y][x]. */
typedef struct rlt_breakout_game {
    int32_t ball_x, ball_y, ball_dir, pos;
    int32_t last_x, last_y;
    int32_t strike, terminal;
    int32_t last_action;
    uint8_t brick_map[10][10];
} rlt_breakout_game;

void rlt_breakout_set_game(rlt_env *env, const rlt_breakout_game *game, uint8_t *obs);
void rlt_breakout_get_game(const rlt_env *env, rlt_breakout_game *game);
/* MinAtar's sticky_action_prob (0.1 by default); the golden tests set it to 0 on both sides. */
void rlt_breakout_set_sticky_prob(rlt_env *env, double prob);

#endif
