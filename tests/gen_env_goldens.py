#!/usr/bin/env python3
"""gen_env_goldens.py: records the golden trajectories that tests/test_envs.c replays against rltrain's
built-in environments, from the reference implementations themselves:

    pip install gymnasium minatar      # recorded with gymnasium 1.x, minatar 1.0.15, numpy 2.x
    python3 tests/gen_env_goldens.py   # writes tests/data/env_{pendulum,cartpole,breakout}.txt

Random streams differ between NumPy and rltrain, so each trajectory starts by writing an internal state
into the reference env (the C test loads the same state through envs/envs_internal.h) and then replays a
fixed action sequence. The output is plain text so that the C test needs no Python. Float32 values are
written with %.9g and float64 values with %.17g, both of which read back exactly.

File formats (lines starting with '#' are comments):
  pendulum:  traj <steps> <th> <thdot> / init <obs x3> / then per step:
             <action> <obs x3> <reward> <terminated> <truncated> <state after the step: th thdot>
  cartpole:  traj <steps> <x> <x_dot> <theta> <theta_dot> / init <obs x4> / then per step:
             <action> <obs x4> <reward> <terminated> <truncated> <state after the step x4>
  breakout:  traj <steps> / state <ball_x ball_y ball_dir pos last_x last_y strike terminal last_action> /
             bricks <100 digits 0/1, row-major [y][x]> / init <obs> / then per step:
             <action> <reward> <terminated> <truncated> <obs>
             where <obs> is the 400 0/1 values in (C, H, W) order, four to a hex digit (MSB first).
"""
import copy
import os
import sys

import numpy as np
import gymnasium as gym
from minatar.gym import register_envs

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def f9(x):
    return "%.9g" % float(x)


def f17(x):
    return "%.17g" % float(x)


def pendulum(out):
    env = gym.make("Pendulum-v1")
    rng = np.random.default_rng(1234)
    cases = [
        ("hanging down, random torques beyond the bounds", np.pi - 0.01, 0.0, "uniform3"),
        ("from a reset state", None, None, "uniform2"),
        ("fast spin: hits the speed clip and wraps the angle", 3.1, 7.9, "max"),
        ("angle far outside [-pi, pi] (negative remainder)", -10.0, -3.0, "bangbang"),
        ("near upright, small torques", 0.05, -0.2, "small"),
    ]
    out.write("# Pendulum-v1 goldens from gymnasium %s, numpy %s\n" % (gym.__version__, np.__version__))
    for k, (what, th, thdot, kind) in enumerate(cases):
        env.reset(seed=100 + k)
        if th is not None:
            env.unwrapped.state = np.array([th, thdot], dtype=np.float64)
        th, thdot = env.unwrapped.state
        n = 200
        if kind == "uniform3":
            acts = rng.uniform(-3.0, 3.0, n)
        elif kind == "uniform2":
            acts = rng.uniform(-2.0, 2.0, n)
        elif kind == "max":
            acts = np.full(n, 2.0)
        elif kind == "bangbang":
            acts = np.where(rng.random(n) < 0.5, -2.0, 2.0)
        else:
            acts = rng.normal(0.0, 0.3, n)
        acts = acts.astype(np.float32)
        out.write("# %s\n" % what)
        out.write("traj %d %s %s\n" % (n, f17(th), f17(thdot)))
        out.write("init %s\n" % " ".join(f9(v) for v in env.unwrapped._get_obs()))
        for a in acts:
            obs, r, term, trunc, _ = env.step(np.array([a], dtype=np.float32))
            assert obs.dtype == np.float32
            st = " ".join(f17(v) for v in env.unwrapped.state)
            out.write("%s %s %s %d %d %s\n" % (f9(a), " ".join(f9(v) for v in obs), f17(r), term, trunc, st))
        assert trunc, "Pendulum must truncate at 200"


def cartpole(out):
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(99)

    def balance(s):
        # A linear controller good enough to reach the 500-step limit.
        x, x_dot, th, th_dot = s
        return int(th + 0.5 * th_dot + 0.01 * x + 0.05 * x_dot > 0)

    cases = [
        ("reset state, random actions, two steps past termination", None, "random"),
        ("reset state, balanced to the 500-step limit", None, "balance"),
        ("cart running out to the right: x threshold", [2.3, 1.5, 0.0, 0.0], "right"),
        ("pole falling left: theta threshold", [0.0, 0.0, -0.19, -0.5], "random"),
        ("fast spin", [0.1, -0.3, 0.15, 3.0], "random"),
    ]
    out.write("# CartPole-v1 goldens from gymnasium %s, numpy %s\n" % (gym.__version__, np.__version__))
    for k, (what, state, kind) in enumerate(cases):
        env.reset(seed=200 + k)
        if state is not None:
            env.unwrapped.state = np.array(state, dtype=np.float64)
        s0 = np.array(env.unwrapped.state, dtype=np.float64)
        lines = []
        extra = 2 if kind == "random" and state is None else 0
        after = 0
        while True:
            s = env.unwrapped.state
            if kind == "random":
                a = int(rng.integers(2))
            elif kind == "balance":
                a = balance(s)
            else:
                a = 1
            obs, r, term, trunc, _ = env.step(a)
            st = " ".join(f17(v) for v in env.unwrapped.state)
            lines.append("%d %s %s %d %d %s\n" % (a, " ".join(f9(v) for v in obs), f17(r), term, trunc, st))
            if trunc:
                break
            if term:
                if after == extra:
                    break
                after += 1
        out.write("# %s\n" % what)
        out.write("traj %d %s\n" % (len(lines), " ".join(f17(v) for v in s0)))
        out.write("init %s\n" % " ".join(f9(v) for v in np.array(s0, dtype=np.float32)))
        out.writelines(lines)


def breakout(out):
    register_envs()
    counts = {"break": 0, "refill": 0, "pass_through": 0, "paddle_same": 0, "paddle_corner": 0, "terminal": 0}

    def digits(a):
        return "".join(str(int(v)) for v in np.asarray(a).reshape(-1))

    def hexbits(a):
        # 0/1 values four to a hex digit, most significant first: 400 values become 100 digits.
        bits = np.asarray(a, dtype=np.uint8).reshape(-1, 4)
        return "".join("%x" % (8 * b[0] + 4 * b[1] + 2 * b[2] + b[3]) for b in bits)

    def chw(obs):
        return np.transpose(np.asarray(obs, dtype=np.uint8), (2, 0, 1))

    def landing_x(g):
        # Where the ball will be when it next reaches row 8 heading down: the game itself, run ahead on a
        # copy (the paddle plays no part before the ball reaches the bottom row).
        sim = copy.deepcopy(g)
        for _ in range(60):
            if sim.ball_y == 8 and sim.ball_dir in (2, 3):
                return sim.ball_x, (1 if sim.ball_dir == 2 else -1)
            sim.act(0)
        return sim.ball_x, 0

    cases = [
        ("seed 0 reset, a ball-tracking paddle, then let the ball drop", 0, None, 700),
        ("seed 3 reset (other start side), tracking, then drop", 3, None, 400),
        ("two bricks left: clearing them refills the wall", 5, "two_left", 600),
        ("inside the wall: a strike followed by a pass-through", 7, "tunnel", 300),
    ]
    out.write("# MinAtar/Breakout-v1 goldens from minatar (sticky_action_prob=0), numpy %s\n" % np.__version__)
    for what, seed, setup, track_steps in cases:
        env = gym.make("MinAtar/Breakout-v1", sticky_action_prob=0.0)
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        g = env.unwrapped.game.env
        if setup == "two_left":
            g.brick_map[:, :] = 0
            g.brick_map[2, 3] = 1
            g.brick_map[3, 7] = 1
        elif setup == "tunnel":
            # The ball inside the wall: it breaks a brick above, drops into the row below while the
            # strike flag is still set, and so passes into a brick's cell without breaking it.
            g.brick_map[2, 4] = 0
            g.ball_x, g.ball_y, g.ball_dir = 4, 2, 0
            g.last_x, g.last_y = 5, 3
        state_line = "state %d %d %d %d %d %d %d %d %d\n" % (
            g.ball_x, g.ball_y, g.ball_dir, g.pos, g.last_x, g.last_y, int(g.strike), int(g.terminal),
            env.unwrapped.game.last_action)
        bricks_line = "bricks %s\n" % digits(g.brick_map)
        init_line = "init %s\n" % hexbits(chw(g.state()))
        lines = []
        after = 0
        t = 0
        corner = False
        while True:
            # Head for where the ball will land (with some random moves) for track_steps steps, then move
            # away from the ball so that the episode ends.
            if t < track_steps:
                # Meeting the ball at its landing x bounces it straight back; one cell further along its
                # path deflects it off the paddle's corner. Switch between the two now and then.
                x, dx = landing_x(g)
                if rng.random() < 0.1:
                    corner = not corner
                target = min(max(x + (dx if corner else 0), 0), 9)
                if rng.random() < 0.03:
                    a = int(rng.integers(3))
                else:
                    a = 0 if g.pos == target else (1 if g.pos > target else 2)
            else:
                a = 2 if g.ball_x < 5 else 1
            before = (g.ball_x, g.ball_y, g.ball_dir, np.count_nonzero(g.brick_map), g.strike)
            obs, r, term, trunc, _ = env.step(a)
            t += 1
            bx, by, bdir, nb, strike = before
            if r > 0:
                counts["break"] += 1
            if nb == 0 and np.count_nonzero(g.brick_map) == 30:
                counts["refill"] += 1
            if strike and g.strike and r == 0:
                counts["pass_through"] += 1
            if by == 8 and g.ball_y == 8 and not term:
                counts["paddle_same" if bx == g.pos else "paddle_corner"] += 1
            if term and after == 0:
                counts["terminal"] += 1
            lines.append("%d %d %d %d %s\n" % (a, r, term, trunc, hexbits(chw(obs))))
            if term:
                if after == 2:
                    break
                after += 1
        out.write("# %s\n" % what)
        out.write("traj %d\n" % len(lines))
        out.write(state_line)
        out.write(bricks_line)
        out.write(init_line)
        out.writelines(lines)
    print("breakout coverage:", counts, file=sys.stderr)
    for k, v in counts.items():
        assert v > 0, "breakout goldens never exercise %s" % k


def main():
    os.makedirs(DATA, exist_ok=True)
    for name, fn in (("pendulum", pendulum), ("cartpole", cartpole), ("breakout", breakout)):
        path = os.path.join(DATA, "env_%s.txt" % name)
        with open(path, "w") as out:
            fn(out)
        print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
