/* minatar_breakout.c: MinAtar Breakout (Young and Tian 2019, github.com/kenjyoung/MinAtar,
 * minatar/environments/breakout.py with the sticky actions of minatar/environment.py), rule for rule,
 * exposed as Gymnasium's "MinAtar/Breakout-v1": the minimal action set (no-op, left, right) and the
 * observation as uint8 [4, 10, 10] in (C, H, W) order with channels paddle, ball, trail, brick.
 *
 * Choices where the reference leaves room:
 *   - Sticky actions: with probability sticky_action_prob (0.1, MinAtar's default) the previous action
 *     is repeated. As in MinAtar, a uniform draw is made on every step, and the previous action survives
 *     resets (MinAtar's Environment.reset does not clear last_action).
 *   - Difficulty ramping: Breakout has none (its difficulty_ramp() returns None), so there is nothing to
 *     implement.
 *   - Time limit: MinAtar has none, and its Gymnasium registration sets no max_episode_steps, but the
 *     game can run forever (a paddle that always returns the ball sees the wall refilled endlessly). We
 *     truncate at 10,000 steps as a safety cap far beyond ordinary episodes. (gymnax's port ends episodes
 *     at 1,000 steps, as a termination; we keep truncation so that bootstrapping stays correct.) */
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "envs_internal.h"

#define GRID 10
#define N_CHANNELS 4
enum { CH_PADDLE = 0, CH_BALL = 1, CH_TRAIL = 2, CH_BRICK = 3 };
/* MinAtar's full action set is ['n','l','u','r','d','f']; Breakout's minimal set is n, l, r. */
enum { ACT_N = 0, ACT_L = 1, ACT_R = 3 };
static const int32_t minimal_actions[3] = {ACT_N, ACT_L, ACT_R};

typedef struct breakout_state {
    rlt_breakout_game g;
    double sticky_action_prob;
} breakout_state;

_Static_assert(sizeof(breakout_state) <= RLT_ENV_STATE_BYTES, "breakout state must fit in rlt_env.state");

static breakout_state *state_of(rlt_env *env) { return (breakout_state *)(void *)env->state; }

/* Env.state(), transposed from MinAtar's (H, W, C) to (C, H, W). */
static void observe(const rlt_breakout_game *g, uint8_t *obs) {
    memset(obs, 0, N_CHANNELS * GRID * GRID);
    obs[(CH_BALL * GRID + g->ball_y) * GRID + g->ball_x] = 1;
    obs[(CH_PADDLE * GRID + 9) * GRID + g->pos] = 1;
    obs[(CH_TRAIL * GRID + g->last_y) * GRID + g->last_x] = 1;
    memcpy(obs + CH_BRICK * GRID * GRID, g->brick_map, GRID * GRID);
}

static void fill_bricks(rlt_breakout_game *g) {
    for (int y = 1; y < 4; y++) memset(g->brick_map[y], 1, GRID);
}

static int bricks_left(const rlt_breakout_game *g) {
    int n = 0;
    for (int y = 0; y < GRID; y++)
        for (int x = 0; x < GRID; x++) n += g->brick_map[y][x] != 0;
    return n;
}

/* Every channel is a 0/1 plane (MinAtar's observation is boolean): the agent scales the frames by 1, as
 * MinAtar's own DQN does, not by the 1/255 of camera frames. */
static const float breakout_obs_high[N_CHANNELS] = {1, 1, 1, 1};

static int breakout_setup(rlt_env *env) {
    env->obs_space = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_U8, .ndim = 3, .shape = {N_CHANNELS, GRID, GRID},
                                 .high = breakout_obs_high};
    env->act_space = (rlt_space){.kind = RLT_SPACE_DISCRETE, .dtype = RLT_DTYPE_I32, .ndim = 1, .shape = {1}, .n = 3};
    env->max_steps = 10000;
    breakout_state *s = state_of(env);
    s->sticky_action_prob = 0.1;
    s->g.last_action = ACT_N; /* MinAtar's Environment starts with last_action = 0 */
    return RLT_OK;
}

static int breakout_reset(rlt_env *env, void *obs) {
    rlt_breakout_game *g = &state_of(env)->g;
    int32_t last_action = g->last_action;
    memset(g, 0, sizeof *g);
    g->last_action = last_action;
    g->ball_y = 3;
    /* The ball starts at the left wall heading down-right or at the right wall heading down-left. */
    if (rlt_rng_below(&env->rng, 2) == 0) {
        g->ball_x = 0;
        g->ball_dir = 2;
    } else {
        g->ball_x = 9;
        g->ball_dir = 3;
    }
    g->pos = 4;
    fill_bricks(g);
    g->last_x = g->ball_x;
    g->last_y = g->ball_y;
    env->t = 0;
    observe(g, obs);
    return RLT_OK;
}

/* Env.act: one move of the paddle and the ball. Directions: 0 up-left, 1 up-right, 2 down-right,
 * 3 down-left. */
static float breakout_act(rlt_breakout_game *g, int32_t a) {
    static const int32_t flip_x[4] = {1, 0, 3, 2};
    static const int32_t flip_y[4] = {3, 2, 1, 0};
    static const int32_t flip_xy[4] = {2, 3, 0, 1};
    float r = 0.0f;
    if (g->terminal) return r;

    if (a == ACT_L) g->pos = g->pos - 1 > 0 ? g->pos - 1 : 0;
    else if (a == ACT_R) g->pos = g->pos + 1 < 9 ? g->pos + 1 : 9;

    g->last_x = g->ball_x;
    g->last_y = g->ball_y;
    int32_t new_x = g->ball_x + (g->ball_dir == 1 || g->ball_dir == 2 ? 1 : -1);
    int32_t new_y = g->ball_y + (g->ball_dir >= 2 ? 1 : -1);

    int strike_toggle = 0;
    if (new_x < 0 || new_x > 9) {
        new_x = new_x < 0 ? 0 : 9;
        g->ball_dir = flip_x[g->ball_dir];
    }
    if (new_y < 0) {
        new_y = 0;
        g->ball_dir = flip_y[g->ball_dir];
    } else if (g->brick_map[new_y][new_x] == 1) {
        /* A brick is only broken if the ball did not strike one on the previous step; otherwise MinAtar
         * lets the ball move into the brick's cell. */
        strike_toggle = 1;
        if (!g->strike) {
            r += 1.0f;
            g->strike = 1;
            g->brick_map[new_y][new_x] = 0;
            new_y = g->last_y;
            g->ball_dir = flip_y[g->ball_dir];
        }
    } else if (new_y == 9) {
        if (bricks_left(g) == 0) fill_bricks(g);
        /* The paddle check uses the ball's old x against the paddle's new position, as MinAtar does. */
        if (g->ball_x == g->pos) {
            g->ball_dir = flip_y[g->ball_dir];
            new_y = g->last_y;
        } else if (new_x == g->pos) {
            g->ball_dir = flip_xy[g->ball_dir];
            new_y = g->last_y;
        } else {
            g->terminal = 1;
        }
    }
    if (!strike_toggle) g->strike = 0;

    g->ball_x = new_x;
    g->ball_y = new_y;
    return r;
}

static int breakout_step(rlt_env *env, const void *action, void *obs, float *reward, uint8_t *terminated,
                         uint8_t *truncated) {
    (void)truncated;
    breakout_state *s = state_of(env);
    int32_t i = *(const int32_t *)action;
    if (i < 0 || i > 2) return RLT_EINVAL;
    int32_t a = minimal_actions[i];
    /* Environment.act: the draw happens on every step, whatever the probability. */
    if (rlt_rng_uniform_f64(&env->rng) < s->sticky_action_prob) a = s->g.last_action;
    s->g.last_action = a;
    *reward = breakout_act(&s->g, a);
    *terminated = (uint8_t)s->g.terminal;
    observe(&s->g, obs);
    return RLT_OK;
}

/* Every position indexes the 10x10 grid (observe writes there, breakout_act reads the brick map one row
 * beyond the ball), so each must be in range; the ball reaches row 9 only as the game ends. */
static int breakout_check_state(const rlt_env *env, const unsigned char *state, int32_t t, char *why, size_t cap) {
    (void)env;
    (void)t;
    breakout_state s;
    memcpy(&s, state, sizeof s);
    const rlt_breakout_game *g = &s.g;
    const struct { const char *name; int32_t v, lo, hi; } f[] = {
        {"ball_x", g->ball_x, 0, GRID - 1}, {"ball_y", g->ball_y, 0, GRID - 1}, {"ball_dir", g->ball_dir, 0, 3},
        {"pos", g->pos, 0, GRID - 1},       {"last_x", g->last_x, 0, GRID - 1}, {"last_y", g->last_y, 0, GRID - 1},
        {"strike", g->strike, 0, 1},        {"terminal", g->terminal, 0, 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi) {
            snprintf(why, cap, "%s is %d, expected %d..%d", f[i].name, (int)f[i].v, (int)f[i].lo, (int)f[i].hi);
            return -1;
        }
    if (g->ball_y == GRID - 1 && !g->terminal) {
        snprintf(why, cap, "ball_y is %d but terminal is 0: the ball reaches the bottom row only as the game ends",
                 (int)g->ball_y);
        return -1;
    }
    if (g->last_action != ACT_N && g->last_action != ACT_L && g->last_action != ACT_R) {
        snprintf(why, cap, "last_action is %d, expected %d, %d or %d (no-op, left, right)", (int)g->last_action, ACT_N,
                 ACT_L, ACT_R);
        return -1;
    }
    for (int y = 0; y < GRID; y++)
        for (int x = 0; x < GRID; x++)
            if (g->brick_map[y][x] > 1) {
                snprintf(why, cap, "brick_map[%d][%d] is %d, expected 0 or 1", y, x, g->brick_map[y][x]);
                return -1;
            }
    if (!(s.sticky_action_prob >= 0.0 && s.sticky_action_prob <= 1.0)) {
        snprintf(why, cap, "sticky_action_prob is %g, expected a probability", s.sticky_action_prob);
        return -1;
    }
    return 0;
}

void rlt_breakout_set_game(rlt_env *env, const rlt_breakout_game *game, uint8_t *obs) {
    state_of(env)->g = *game;
    if (obs) observe(game, obs);
}

void rlt_breakout_get_game(const rlt_env *env, rlt_breakout_game *game) {
    *game = ((const breakout_state *)(const void *)env->state)->g;
}

void rlt_breakout_set_sticky_prob(rlt_env *env, double prob) { state_of(env)->sticky_action_prob = prob; }

const rlt_env_class rlt_env_class_minatar_breakout = {
    .name = "minatar_breakout",
    .description = "MinAtar Breakout: bounce a ball to break bricks (uint8 [4,10,10] obs, Discrete(3) no-op/left/right, "
                   "sticky actions 0.1, 10,000-step safety cap)",
    .setup = breakout_setup,
    .reset = breakout_reset,
    .step = breakout_step,
    .check_state = breakout_check_state,
};
