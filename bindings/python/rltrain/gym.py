"""The Gymnasium adapter: trains an rltrain agent on any Gymnasium environment.

:func:`train` drives an environment with Box observations (1-D float, or uint8 images in (C, H, W)
layout) and Box or Discrete actions through :class:`rltrain.Agent`, evaluates the deterministic policy on
a separate environment instance every ``train.eval_every`` steps, and returns the results.

From the shell (the native ``rltrain`` CLI runs only the built-in environments)::

    python -m rltrain.gym --config configs/td3_pendulum_fast.yaml --env Pendulum-v1
    python -m rltrain.gym --config configs/dqn_cartpole.yaml --env CartPole-v1 --set train.total_steps=20000

Episode ends follow Gymnasium's API: ``terminated`` (a terminal state: no bootstrapping) and
``truncated`` (a time limit: the agent still bootstraps from the real final observation, which
``env.step`` returns). The environment must not reset itself (no autoreset wrapper): the adapter resets
it after each episode end.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from .core import Agent, Config, _as_config
from .errors import ConfigError, DeviceError, NoFitError, RltError

log = logging.getLogger("rltrain.gym")


def _make(env_or_id, what: str):
    """(env, created_here) from a Gymnasium id, an EnvSpec or an environment."""
    import gymnasium

    if isinstance(env_or_id, (str, gymnasium.envs.registration.EnvSpec)):
        return gymnasium.make(env_or_id), True
    if env_or_id is None:
        raise ValueError(f"no {what} environment")
    return env_or_id, False


def _env_action(action, space, discrete: bool):
    """The agent's action as the environment takes it (Discrete: plus the space's start)."""
    if discrete:
        return int(action) + int(getattr(space, "start", 0))
    return np.asarray(action, dtype=space.dtype)


def evaluate(agent: Agent, env, episodes: int, discrete: bool, seed: int | None = None) -> float:
    """Mean return of ``episodes`` episodes of the deterministic policy (``explore=False``) on ``env``.

    ``seed`` seeds the first reset only; later episodes continue the environment's own generator.
    """
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed if ep == 0 else None)
        done, ret = False, 0.0
        while not done:
            a = agent.act(obs, explore=False)
            obs, r, terminated, truncated, _ = env.step(_env_action(a, env.action_space, discrete))
            ret += float(r)
            done = terminated or truncated
        total += ret
    return total / episodes


def train(
    env: Any,
    config: "Config | str | os.PathLike",
    total_steps: int | None = None,
    seed: int | None = None,
    callback: Callable[[dict], Any] | None = None,
    *,
    eval_env: Any = None,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
    save_path: str | os.PathLike | None = None,
) -> dict:
    """Trains an agent on a Gymnasium environment and returns its results.

    Args:
        env: a Gymnasium id (``"Pendulum-v1"``), an ``EnvSpec``, or an environment instance. The
            algorithm of the config must suit its action space (td3: Box, dqn: Discrete).
        config: a :class:`rltrain.Config` or a path to a YAML file. It is copied, not changed.
        total_steps: environment steps (default: the config's ``train.total_steps``). It also sets the
            config's value, which DQN's epsilon schedule is relative to.
        seed: seeds the agent (the config's ``seed``), the first ``env.reset``, ``env.action_space`` and,
            with ``seed + 100``, the evaluation environment. Default: the config's ``seed``.
        callback: called with a dict after each episode (``kind="episode"``) and each evaluation
            (``kind="eval"``), with ``step``, ``episodes``, ``updates``, ``return``,
            ``best_eval_return`` and ``elapsed_s``; returning a true value stops training.
        eval_env: the environment for evaluations; default: a new one from ``env``'s id or spec.
        eval_every: steps between evaluations (default ``train.eval_every``; 0 evaluates only at the end).
        eval_episodes: episodes per evaluation (default ``train.eval_episodes``).
        save_path: where to save the agent's checkpoint at the end, if given.

    Returns:
        A dict with ``final_eval_return``, ``best_eval_return``, ``evaluations`` (a list of
        ``(step, mean_return)``), ``env_steps``, ``episodes``, ``updates``, ``last_episode_return``,
        ``wall_s``, ``stopped`` (True when the callback stopped the run) and
        ``allocations_after_init``.
    """
    cfg = _as_config(config).copy()
    if total_steps is not None:
        cfg.set("train.total_steps", int(total_steps))
    if seed is not None:
        cfg.set("seed", int(seed))
    values = cfg.to_dict()
    steps = int(values["train"]["total_steps"])
    seed = int(values["seed"])
    every = int(values["train"]["eval_every"] if eval_every is None else eval_every)
    episodes_per_eval = int(values["train"]["eval_episodes"] if eval_episodes is None else eval_episodes)

    env, own_env = _make(env, "training")
    if eval_env is None:
        if env.spec is None:
            raise ValueError("pass eval_env: the environment has no spec to make an evaluation copy from")
        eval_env = env.spec
    eval_env, own_eval = _make(eval_env, "evaluation")
    agent = None
    try:
        agent = Agent(cfg, env.observation_space, env.action_space)
        log.info("memory plan:\n%s", agent.plan_table().rstrip())
        discrete = agent.act_space.kind == "discrete"
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        eval_seed: int | None = seed + 100
        t0 = time.perf_counter()
        evaluations: list[tuple[int, float]] = []
        best = -math.inf
        episodes = updates = 0
        ep_return, last_return = 0.0, math.nan
        stopped = False

        def report(kind: str, step: int, ret: float) -> bool:
            if callback is None:
                return False
            return bool(callback({
                "kind": kind, "step": step, "episodes": episodes, "updates": updates, "return": ret,
                "best_eval_return": best if evaluations else math.nan,
                "elapsed_s": time.perf_counter() - t0,
            }))

        for step in range(1, steps + 1):
            action = agent.act(obs, explore=True)
            next_obs, reward, terminated, truncated, _ = env.step(_env_action(action, env.action_space, discrete))
            # next_obs is the real final observation also on truncation: the agent bootstraps from it.
            agent.observe(obs, action, reward, next_obs, terminated, truncated)
            updates += agent.update()
            ep_return += float(reward)
            obs = next_obs
            if terminated or truncated:
                episodes += 1
                last_return, ep_return = ep_return, 0.0
                obs, _ = env.reset()
                stopped = report("episode", step, last_return)
            if (every > 0 and step % every == 0) or step == steps:
                mean = evaluate(agent, eval_env, episodes_per_eval, discrete, eval_seed)
                eval_seed = None  # seeded once; later evaluations continue its generator
                evaluations.append((step, mean))
                best = max(best, mean)
                stopped = report("eval", step, mean) or stopped
            if stopped:
                break
        if save_path is not None:
            agent.save(save_path)
        return {
            "final_eval_return": evaluations[-1][1] if evaluations else math.nan,
            "best_eval_return": best if evaluations else math.nan,
            "evaluations": evaluations,
            "env_steps": step if steps > 0 else 0,
            "episodes": episodes,
            "updates": updates,
            "last_episode_return": last_return,
            "wall_s": time.perf_counter() - t0,
            "stopped": stopped,
            "allocations_after_init": agent.allocations_after_init,
        }
    finally:
        if agent is not None:
            agent.close()
        if own_env:
            env.close()
        if own_eval:
            eval_env.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m rltrain.gym``: train on a Gymnasium environment from the shell.

    Exit codes as the native CLI: 0 success, 1 runtime failure, 2 config error, 3 the plan does not fit,
    4 the device is not usable.
    """
    ap = argparse.ArgumentParser(prog="python -m rltrain.gym", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="YAML config (algo td3 for Box actions, dqn for Discrete)")
    ap.add_argument("--env", required=True, help="Gymnasium environment id, such as Pendulum-v1")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    ap.add_argument("--steps", type=int, help="environment steps (default: train.total_steps)")
    ap.add_argument("--seed", type=int, help="seed (default: the config's seed)")
    ap.add_argument("--save", help="write the agent's checkpoint here at the end")
    ap.add_argument("--quiet", action="store_true", help="print only the final summary")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="rltrain: %(message)s")

    def progress(ev: dict) -> None:
        if ev["kind"] == "eval" and not args.quiet:
            print(f"step {ev['step']:8d}  eval {ev['return']:9.2f}  best {ev['best_eval_return']:9.2f}  "
                  f"episodes {ev['episodes']:6d}  updates {ev['updates']:8d}  {ev['elapsed_s']:7.1f} s", flush=True)

    try:
        cfg = Config.from_file(args.config)
        for s in args.set:
            cfg.set(s)
        result = train(args.env, cfg, total_steps=args.steps, seed=args.seed, callback=progress, save_path=args.save)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except NoFitError as e:
        print(f"{e.plan}\n{e}", file=sys.stderr)
        return 3
    except DeviceError as e:
        print(f"device error: {e}", file=sys.stderr)
        return 4
    except RltError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # JSON has no NaN: a value that does not exist yet is null.
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()}
    print(json.dumps(clean, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
