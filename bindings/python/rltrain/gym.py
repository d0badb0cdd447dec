"""The Gymnasium adapter: trains an rltrain agent on any Gymnasium environment.

:func:`train` hands a Gymnasium environment with Box observations (1-D float, or uint8 images in (C, H, W)
layout) and Box or Discrete actions to the native trainer as callbacks (``rlt_trainer_init_env``). The
trainer runs the loop, evaluates the deterministic policy on a second environment instance every
``train.eval_every`` steps, and writes the run directory the native CLI writes: ``out_dir`` with
config.yaml, metrics.csv, summary.json and final.ckpt (one implementation of those formats, in C).

From the shell (the native ``rltrain`` CLI runs only the built-in environments)::

    python -m rltrain.gym --config configs/td3_pendulum_fast.yaml --env Pendulum-v1
    python -m rltrain.gym --config configs/dqn_cartpole.yaml --env CartPole-v1 --set train.total_steps=20000

Episode ends follow Gymnasium's API: ``terminated`` (a terminal state: no bootstrapping) and
``truncated`` (a time limit: the agent still bootstraps from the real final observation, which
``env.step`` returns). The environment must not reset itself (no autoreset wrapper): the trainer resets
it after each episode end.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import math
import os
import sys
from typing import Any, Callable

import numpy as np

from . import _native
from .core import Agent, Config, Group, GroupProgress, Progress, Trainer, _as_config
from .errors import ConfigError, DeviceError, NoFitError, RltError
from .spaces import Space

log = logging.getLogger("rltrain.gym")

# The CLI's exit code for a run stopped by SIGINT (tools/rltrain.c): outputs and final.ckpt are written.
EXIT_INTERRUPTED = 5


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

    For an :class:`rltrain.Agent` driven by hand; :func:`train` evaluates inside the native trainer.
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


class _GymCallbacks:
    """Gymnasium environments as ``rlt_env_callbacks``: ``envs`` is the N training environments then the
    evaluation one (instances 0..N-1 train, instance N evaluates, as the trainer numbers them).

    The trainer passes the addresses of its own observation and action buffers; numpy views of them are
    made once per address. An exception in a callback is kept in ``raised`` and the callback returns 1,
    which stops the run; :func:`train` raises the exception again. ``on_episode`` is called at each reset
    of a training instance that follows an episode end (the trainer has counted the episode by then).
    """

    def __init__(self, envs, obs_space: Space, act_space: Space, seed: int, name: str):
        self.envs = envs
        self.obs_space, self.act_space = obs_space, act_space
        self.discrete = act_space.kind == "discrete"
        # Each instance's first reset is seeded (training environment k: seed + k, as Gymnasium's vector
        # environments seed theirs; evaluation: seed + 100); later resets continue the environment's own
        # generator. The trainer's per-episode seeds are not used, so a run draws the same episodes as an
        # environment seeded once, as Gymnasium users expect.
        self.n_train = len(envs) - 1
        self.first_seed: list[int | None] = [seed + k for k in range(self.n_train)] + [seed + 100]
        self.resets = [0] * len(envs)
        self.raised: list[BaseException] = []
        self.on_episode: Callable[[], None] | None = None
        self._views: dict[tuple[int, str], np.ndarray] = {}
        self._obs_ctype = ctypes.c_uint8 if obs_space.dtype == np.uint8 else ctypes.c_float
        self._reset_fn = _native.ENV_RESET_FN(self._reset)  # alive as long as this object
        self._step_fn = _native.ENV_STEP_FN(self._step)
        self._name = _native.c_string(name, "environment name")[:63]
        obs_c, self._keep_obs = obs_space.to_c()
        act_c, self._keep_act = act_space.to_c()
        cb = _native.rlt_env_callbacks()
        cb.struct_size = ctypes.sizeof(cb)
        cb.name = self._name
        cb.obs, cb.act = obs_c, act_c
        # Gymnasium's TimeLimit ends episodes (as truncation); a positive env.max_episode_steps in the
        # config adds the trainer's own limit on top.
        cb.max_episode_steps = 0
        cb.reset, cb.step = self._reset_fn, self._step_fn
        self.struct = cb

    def _view(self, address: int, kind: str) -> np.ndarray:
        """A numpy array over the trainer's buffer at ``address`` (observation or action)."""
        key = (address, kind)
        view = self._views.get(key)
        if view is None:
            if kind == "obs":
                raw = (self._obs_ctype * self.obs_space.size).from_address(address)
                view = np.ctypeslib.as_array(raw).reshape(self.obs_space.shape)
            else:
                ctype = ctypes.c_int32 if self.discrete else ctypes.c_float
                view = np.ctypeslib.as_array((ctype * self.act_space.size).from_address(address))
            self._views[key] = view
        return view

    def _write_obs(self, address: int, obs) -> None:
        if self.obs_space.kind == "dict":  # keys matched by name, parts laid out as network.inputs says
            obs = self.obs_space.flatten(obs)
        o = np.asarray(obs)
        if o.shape != self.obs_space.shape:
            raise ValueError(f"the environment returned an observation of shape {o.shape}: expected {self.obs_space.shape}")
        np.copyto(self._view(address, "obs"), o, casting="unsafe")  # float64 -> float32 as Agent.act does

    def _reset(self, user, instance: int, seed: int, obs: int) -> int:
        try:
            seed0, self.first_seed[instance] = self.first_seed[instance], None
            o, _ = self.envs[instance].reset(seed=seed0)
            self._write_obs(obs, o)
            self.resets[instance] += 1
            if instance < self.n_train and self.resets[instance] > 1 and self.on_episode is not None:
                self.on_episode()
            return 0
        except BaseException as exc:  # noqa: BLE001 - carried across the C frames and raised by train()
            self.raised.append(exc)
            return 1

    def _step(self, user, instance: int, action: int, obs: int, reward: int, terminated: int, truncated: int) -> int:
        try:
            env = self.envs[instance]
            a = self._view(action, "act")
            if self.discrete:
                env_action = int(a[0]) + self.act_space.start
            else:  # a copy: the trainer reuses its buffer for the next action
                env_action = np.array(a, dtype=env.action_space.dtype).reshape(env.action_space.shape)
            o, r, term, trunc, _ = env.step(env_action)
            # The real next observation, also at the end of an episode: the agent bootstraps from it.
            self._write_obs(obs, o)
            ctypes.c_float.from_address(reward).value = float(r)
            ctypes.c_uint8.from_address(terminated).value = 1 if term else 0
            ctypes.c_uint8.from_address(truncated).value = 1 if trunc else 0
            return 0
        except BaseException as exc:  # noqa: BLE001
            self.raised.append(exc)
            return 1


def _env_name(env) -> str:
    """The name for summary.json and logs: the Gymnasium id when there is one."""
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None and spec.id else type(getattr(env, "unwrapped", env)).__name__


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
    out_dir: str | os.PathLike | None = None,
    tensorboard: str | os.PathLike | None = None,
    num_envs: int | None = None,
    seeds: "list[int] | None" = None,
) -> dict:
    """Trains an agent on a Gymnasium environment, writes the run directory, and returns the results.

    Args:
        env: a Gymnasium id (``"Pendulum-v1"``), an ``EnvSpec``, an environment instance, or a
            ``gymnasium.vector.SyncVectorEnv`` (its sub-environments become the trainer's N training
            environments, ``env.num_envs``). The algorithm of the config must suit its action space (td3:
            Box, dqn: Discrete).
        config: a :class:`rltrain.Config` or a path to a YAML file. It is copied, not changed.
        total_steps: environment steps (default: the config's ``train.total_steps``). It also sets the
            config's value, which DQN's epsilon schedule is relative to.
        seed: seeds the agent (the config's ``seed``), the first ``env.reset``, ``env.action_space`` and,
            with ``seed + 100``, the evaluation environment's first reset. Default: the config's ``seed``.
        callback: called with a dict after each episode (``kind="episode"``), after each evaluation
            (``kind="eval"``) and every ``train.progress_every_s`` seconds (``kind="progress"``), with
            ``step``, ``episodes``, ``updates``, ``return`` (of that episode or evaluation; the last
            episode's for ``progress``), ``best_eval_return``, ``elapsed_s`` and ``progress`` (a
            :class:`rltrain.Progress`); returning a true value stops training after the current step.
        eval_env: the environment for evaluations; default: a new one from ``env``'s id or spec.
        eval_every: steps between evaluations (default ``train.eval_every``; 0 evaluates only at the end).
        eval_episodes: episodes per evaluation (default ``train.eval_episodes``).
        save_path: where to save the agent's checkpoint at the end, if given (``out_dir/final.ckpt`` is
            the trainer's checkpoint, written always).
        out_dir: the run directory (default: the config's ``out_dir``). It gets what ``rltrain --config``
            writes: config.yaml (the resolved config), metrics.csv, summary.json and final.ckpt.
        tensorboard: a folder for TensorBoard scalars of the run as it trains (``episode/return``,
            ``eval/return``, ``progress/updates_per_s``, ...); needs the ``tensorboard`` package
            (:mod:`rltrain.tensorboard`). ``callback`` is still called.
        num_envs: training environments stepped together (the config's ``env.num_envs``; default: the
            config's, or the vector environment's count). With an id or a spec, that many are made; one
            act call serves all of them and each gets its own first-reset seed (``seed + k``).
            ``total_steps`` and the evaluation interval count all of their steps and must be multiples
            of it.
        seeds: several independent runs at once, one per seed (the config's ``train.seeds``; a config with
            ``train.num_seeds`` or ``train.seeds`` does the same without it): a seed group (:class:`rltrain.Group`)
            whose member for seed s is the run ``train(..., seed=s)`` would make, into ``out_dir/seed_<s>/``,
            with ``out_dir/summary.csv`` beside them. Each member gets environments of its own, so ``env`` (and
            ``eval_env``) must be an id, an ``EnvSpec`` or a function that makes a new environment. The members
            train concurrently, in threads of the library. ``callback`` then gets the group's reports
            (``kind`` ``"progress"`` or ``"eval"``, after every member's evaluation) with ``step`` and
            ``updates`` summed over the members, ``eval_mean``, ``eval_min``, ``eval_max`` and ``progress`` (a
            :class:`rltrain.GroupProgress`); returning a true value stops every member. Not with ``seed``,
            ``save_path`` or ``tensorboard``.

    Returns:
        A dict with ``final_eval_return``, ``best_eval_return``, ``evaluations`` (a list of
        ``(step, mean_return)``), ``env_steps``, ``episodes``, ``updates``, ``last_episode_return``,
        ``wall_s``, ``stopped`` (True when the callback stopped the run), ``allocations_after_init`` and
        ``out_dir``. With several seeds: ``seeds``, ``runs`` (one such dict per seed, with ``seed``, in
        order), ``final_eval_mean`` / ``_min`` / ``_max`` over the seeds, ``evaluations`` (a list of
        ``(step over all seeds, mean, min, max)``), ``env_steps``, ``updates``, ``wall_s``, ``stopped`` and
        ``out_dir``.
    """
    if seeds is not None and seed is not None:
        raise ValueError("give seed= (one run) or seeds= (one run per seed), not both")
    cfg = _as_config(config).copy()
    if total_steps is not None:
        cfg.set("train.total_steps", int(total_steps))
    if seed is not None:
        cfg.set("seed", int(seed))
    if eval_every is not None:
        cfg.set("train.eval_every", int(eval_every))
    if eval_episodes is not None:
        cfg.set("train.eval_episodes", int(eval_episodes))
    if out_dir is not None:
        cfg.set("out_dir", os.fspath(out_dir))
    if seeds is not None:
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds=[] names no run: give at least one seed")
        cfg.set("train.num_seeds", 1)
        cfg.set("train.seeds", seeds)
    if _native.lib.rlt_group_count(cfg._handle) > 0:
        if save_path is not None or tensorboard is not None:
            raise ValueError("save_path and tensorboard are for one run: with several seeds each writes "
                             "out_dir/seed_<seed>/final.ckpt, and rltrain.plot draws their curves")
        if num_envs is not None:
            cfg.set("env.num_envs", int(num_envs))
        return _train_group(env, eval_env, cfg, callback)
    seed = int(cfg.get("seed"))

    # A vector environment (it has single_observation_space) is stepped through its sub-environments, one
    # trainer instance each: that needs them in this process, as SyncVectorEnv keeps them (``envs``).
    vector = env if hasattr(env, "single_observation_space") else None
    if vector is not None:
        subs = list(getattr(vector, "envs", None) or [])
        if not subs:
            raise ValueError(f"{type(vector).__name__}: the trainer steps each sub-environment itself, so it needs "
                             "them in this process; pass a gymnasium.vector.SyncVectorEnv (AsyncVectorEnv keeps them "
                             "in worker processes), or an id with num_envs=N")
        if num_envs is not None and int(num_envs) != len(subs):
            raise ValueError(f"num_envs={num_envs}, but the vector environment has {len(subs)}")
        num_envs = len(subs)
    if num_envs is not None:
        cfg.set("env.num_envs", int(num_envs))
    n_envs = int(cfg.get("env.num_envs"))
    if vector is not None:
        train_envs, own_env, env = subs, False, subs[0]
    else:
        env, own_env = _make(env, "training")
        train_envs = [env]
        if n_envs > 1 and env.spec is None:
            if own_env:
                env.close()
            raise ValueError("num_envs > 1 with an environment that has no spec to copy: pass an id, a spec or a "
                             "gymnasium.vector.SyncVectorEnv")
        if n_envs > 1:
            # More of the same: copies made here from its id or spec (closed at the end).
            train_envs += [_make(env.spec, "training")[0] for _ in range(n_envs - 1)]
    if eval_env is None:
        if env.spec is None:
            raise ValueError("pass eval_env: the environment has no spec to make an evaluation copy from")
        eval_env = env.spec
    eval_env, own_eval = _make(eval_env, "evaluation")
    trainer = board = None
    try:
        if tensorboard is not None:
            from .tensorboard import TrainCallback

            board = callback = TrainCallback(tensorboard, then=callback)
        if type(env.observation_space).__name__ == "Dict":
            obs_space = Space.from_gym_dict(env.observation_space, cfg)
        else:
            obs_space = Space.from_gym(env.observation_space)
        act_space = Space.from_gym(env.action_space, actions=True)
        bridge = _GymCallbacks((*train_envs, eval_env), obs_space, act_space, seed, _env_name(env))
        trainer = Trainer(cfg, _env=bridge.struct)
        log.info("memory plan:\n%s", trainer.plan_table().rstrip())
        for k, e in enumerate(train_envs):
            e.action_space.seed(seed + k)
        evaluations: list[tuple[int, float]] = []
        stopped = False

        def report(kind: str, p: Progress) -> bool:
            if callback is None:
                return False
            ret = p.last_eval_return if kind == "eval" else p.last_episode_return
            return bool(callback({
                "kind": kind, "step": p.env_steps, "episodes": p.episodes, "updates": p.updates, "return": ret,
                "best_eval_return": p.best_eval_return, "elapsed_s": p.elapsed_s, "progress": p,
            }))

        def on_episode() -> None:
            nonlocal stopped
            if report("episode", trainer.progress()):
                stopped = True
                trainer.request_stop()  # after this step, as the loop would have broken here

        def on_progress(p: Progress) -> bool:
            nonlocal stopped
            if p.is_eval:
                evaluations.append((p.env_steps, p.last_eval_return))
            if report("eval" if p.is_eval else "progress", p):
                stopped = True
            return stopped

        bridge.on_episode = on_episode
        try:
            final = trainer.run(progress=on_progress)
        except RltError:
            if bridge.raised:  # the environment's (or the callback's) own exception says more
                raise bridge.raised[0] from None
            raise
        if bridge.raised:
            raise bridge.raised[0]
        if save_path is not None:
            trainer.save_agent(save_path)
        return {
            "final_eval_return": final.last_eval_return,
            "best_eval_return": final.best_eval_return,
            "evaluations": evaluations,
            "env_steps": final.env_steps,
            "episodes": final.episodes,
            "updates": final.updates,
            "last_episode_return": final.last_episode_return,
            "wall_s": final.elapsed_s,
            "stopped": stopped,
            "allocations_after_init": trainer.allocations_after_init,
            "out_dir": trainer.out_dir,
        }
    finally:
        if trainer is not None:
            trainer.close()
        if board is not None:
            board.close()
        if own_env:
            env.close()
        for e in train_envs[1:] if vector is None else []:
            e.close()  # the copies made here
        if own_eval:
            eval_env.close()


def _factory(env_or_id, what: str) -> Callable[[], Any]:
    """A function that makes a new environment, from a Gymnasium id, an EnvSpec or such a function."""
    import gymnasium

    if isinstance(env_or_id, (str, gymnasium.envs.registration.EnvSpec)):
        return lambda: gymnasium.make(env_or_id)
    if callable(env_or_id) and not isinstance(env_or_id, gymnasium.Env) and not hasattr(env_or_id, "single_observation_space"):
        return env_or_id
    raise ValueError(f"with several seeds each run needs {what} environments of its own: pass a Gymnasium id, an "
                     f"EnvSpec or a function that makes one, not a {type(env_or_id).__name__}")


def _group_seeds(cfg: Config) -> list[int]:
    """The members' seeds as the config names them (train.seeds, else seed .. seed + train.num_seeds - 1)."""
    listed = cfg.get("train.seeds")
    if listed:
        return [int(s) for s in listed]
    first = int(cfg.get("seed"))
    return [first + k for k in range(int(cfg.get("train.num_seeds")))]


def _train_group(env, eval_env, cfg: Config, callback) -> dict:
    """train() for several seeds: a seed group whose member k trains on environments of its own."""
    make = _factory(env, "training")
    make_eval = _factory(eval_env if eval_env is not None else env, "evaluation")
    n_envs = int(cfg.get("env.num_envs"))
    seeds = _group_seeds(cfg)
    made: list = []
    group = None
    try:
        bridges = []
        obs_space = act_space = None
        for s in seeds:
            train_envs = [make() for _ in range(n_envs)]
            made += train_envs
            ev = make_eval()
            made.append(ev)
            if obs_space is None:
                obs_space = Space.from_gym(train_envs[0].observation_space)
                act_space = Space.from_gym(train_envs[0].action_space, actions=True)
            bridges.append(_GymCallbacks((*train_envs, ev), obs_space, act_space, s, _env_name(train_envs[0])))
            for k, e in enumerate(train_envs):
                e.action_space.seed(s + k)
        group = Group(cfg, _envs=[b.struct for b in bridges])
        log.info("memory plan:\n%s", group.plan_table().rstrip())
        evaluations: list[tuple[int, float, float, float]] = []
        stopped = False

        def on_progress(p: GroupProgress) -> bool:
            nonlocal stopped
            if p.is_eval:
                evaluations.append((p.env_steps, p.eval_mean, p.eval_min, p.eval_max))
            if callback is not None and callback({
                "kind": "eval" if p.is_eval else "progress", "step": p.env_steps, "updates": p.updates,
                "eval_mean": p.eval_mean, "eval_min": p.eval_min, "eval_max": p.eval_max, "elapsed_s": p.elapsed_s,
                "progress": p,
            }):
                stopped = True
            return stopped

        try:
            final = group.run(progress=on_progress)
        except RltError:
            raised = [exc for b in bridges for exc in b.raised]
            if raised:  # the environment's own exception says more
                raise raised[0] from None
            raise
        for b in bridges:
            if b.raised:
                raise b.raised[0]
        runs = []
        for k, s in enumerate(group.seeds):
            p = group.member_progress(k)
            runs.append({
                "seed": s, "final_eval_return": p.last_eval_return, "best_eval_return": p.best_eval_return,
                "env_steps": p.env_steps, "episodes": p.episodes, "updates": p.updates,
                "last_episode_return": p.last_episode_return, "wall_s": p.elapsed_s,
                "allocations_after_init": group.member_allocations_after_init(k), "out_dir": group.member_out_dir(k),
            })
        return {
            "seeds": group.seeds,
            "runs": runs,
            "final_eval_mean": final.eval_mean,
            "final_eval_min": final.eval_min,
            "final_eval_max": final.eval_max,
            "evaluations": evaluations,
            "env_steps": final.env_steps,
            "updates": final.updates,
            "wall_s": final.elapsed_s,
            "stopped": stopped,
            "out_dir": group.out_dir,
        }
    finally:
        if group is not None:
            group.close()
        for e in made:
            e.close()


def _json_clean(value):
    """value with NaN floats as None, nested lists and dicts included (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_clean(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m rltrain.gym``: train on a Gymnasium environment from the shell.

    Prints the native CLI's progress lines and its closing lines (where the outputs went); ``--json``
    prints the results as one JSON object instead. Exit codes as the native CLI: 0 success, 1 runtime
    failure, 2 config error, 3 the plan does not fit, 4 the device is not usable, 5 interrupted (Ctrl-C;
    the outputs are written).
    """
    ap = argparse.ArgumentParser(prog="python -m rltrain.gym", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="YAML config (algo td3 for Box actions, dqn for Discrete)")
    ap.add_argument("--env", required=True, help="Gymnasium environment id, such as Pendulum-v1")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    ap.add_argument("--steps", type=int, help="environment steps (default: train.total_steps)")
    ap.add_argument("--seed", type=int, help="seed (default: the config's seed)")
    ap.add_argument("--save", help="also write the agent's checkpoint here at the end")
    ap.add_argument("--quiet", action="store_true", help="no progress lines (and no memory plan on stderr)")
    ap.add_argument("--json", action="store_true", help="print only the results, as one JSON object")
    ap.add_argument("--tensorboard", metavar="LOGDIR", help="also write TensorBoard scalars here (needs tensorboard)")
    args = ap.parse_args(argv)
    quiet = args.quiet or args.json
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="rltrain: %(message)s")

    def progress(ev: dict) -> None:
        if ev["kind"] != "episode" and not quiet:
            print(ev["progress"].line(), flush=True)

    out_dir = None
    try:
        cfg = Config.from_file(args.config)
        for s in args.set:
            cfg.set(s)
        out_dir = cfg.get("out_dir")
        result = train(args.env, cfg, total_steps=args.steps, seed=args.seed, callback=progress, save_path=args.save,
                       tensorboard=args.tensorboard)
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
    except KeyboardInterrupt:
        print(f"interrupted: outputs written to {out_dir}/", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:  # --tensorboard without the tensorboard package
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json:
        # JSON has no NaN: a value that does not exist yet is null.
        print(json.dumps(_json_clean(result)))
        return 0
    if "runs" in result:  # a seed group: the native CLI's closing lines for one
        for r in result["runs"]:
            print(f"seed {r['seed']}: {r['env_steps']} env steps, {r['updates']} updates in {r['wall_s']:.1f}s; "
                  f"final eval {r['final_eval_return']:.1f}, best {r['best_eval_return']:.1f}")
        rate = result["updates"] / result["wall_s"] if result["wall_s"] > 0 else 0.0
        print(f"finished {len(result['runs'])} seeds: {result['env_steps']} env steps, {result['updates']} updates in "
              f"{result['wall_s']:.1f}s ({rate:.0f} updates/s together); final eval mean {result['final_eval_mean']:.1f}, "
              f"min {result['final_eval_min']:.1f}, max {result['final_eval_max']:.1f}")
        print(f"outputs written to {result['out_dir']}/seed_<seed>/ (config.yaml, metrics.csv, summary.json, "
              f"final.ckpt each) and {result['out_dir']}/summary.csv")
        return 0
    # The native CLI's closing lines.
    print(f"finished: {result['env_steps']} env steps, {result['updates']} updates in {result['wall_s']:.1f}s "
          f"({result['updates'] / result['wall_s'] if result['wall_s'] > 0 else 0.0:.0f} updates/s); "
          f"final eval {result['final_eval_return']:.1f}, best {result['best_eval_return']:.1f}")
    print(f"outputs written to {result['out_dir']}/ (config.yaml, metrics.csv, summary.json, final.ckpt)")
    if args.save:
        print(f"agent checkpoint written to {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
