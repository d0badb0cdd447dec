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
``env.step`` returns). A single environment must not reset itself (no autoreset wrapper): the trainer resets
it after each episode end.

Vector environments (``gymnasium.vector.SyncVectorEnv``, ``AsyncVectorEnv`` or any ``VectorEnv``) train as
the trainer's ``env.num_envs`` environments through one batched step per vector step (``step_batch`` of
``rlt_env_callbacks``), so sub-environments in worker processes work. Their autoreset is handled for each
mode (``metadata["autoreset_mode"]``): the transition always gets the real final observation and the next
step acts on the new episode's first one (see :class:`_VectorCallbacks`). Evaluation runs on a single
environment made from the sub-environments' spec.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import io
import json
import logging
import math
import os
import pickle
import shlex
import signal
import sys
import threading
from typing import Any, Callable

import numpy as np

from . import _native
from .core import Agent, Config, Group, GroupProgress, Progress, Trainer, _as_config
from .errors import CheckpointError, ConfigError, DeviceError, NoFitError, RltError
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


def _time_limit(env) -> int:
    """The environment's own step limit (a TimeLimit wrapper, or its spec's max_episode_steps), 0 when it has none.
    The trainer applies it too (as truncation, at the same step), so it knows evaluation episodes end."""
    for layer in _env_layers(env):
        limit = getattr(layer, "_max_episode_steps", None)
        if type(layer).__name__ == "TimeLimit" and isinstance(limit, int) and limit > 0:
            return limit
    spec = getattr(env, "spec", None)
    limit = getattr(spec, "max_episode_steps", None)
    return limit if isinstance(limit, int) and limit > 0 else 0


def _env_layers(env) -> list:
    """The environment and every wrapper around it, outermost first, down to ``env.unwrapped``."""
    layers = [env]
    while getattr(layers[-1], "env", None) is not None and layers[-1] is not getattr(layers[-1], "unwrapped",
                                                                                     layers[-1]):
        layers.append(layers[-1].env)
    return layers


def _layers_state(env) -> list[dict]:
    """What a checkpoint keeps of an environment: each layer's attributes but the one holding the next layer."""
    return [{k: v for k, v in vars(layer).items() if k != "env"} for layer in _env_layers(env)]


def _restore_layers(env, states) -> None:
    layers = _env_layers(env)
    if not isinstance(states, list) or len(states) != len(layers) or not all(isinstance(x, dict) for x in states):
        raise ValueError(f"the checkpoint's environment state has {len(states) if isinstance(states, list) else '?'} "
                         f"layers (wrappers and the environment), this environment {len(layers)}: another environment "
                         "or other wrappers than the run that wrote it")
    for layer, state in zip(layers, states):
        layer.__dict__.update(state)


# Globals an environment's state may name besides those it named at the start: numpy's arrays, scalars, dtypes
# and random generators (an environment makes its generator at its first reset), and a few plain containers.
_NUMPY_BUILDERS = {"_reconstruct", "scalar", "_frombuffer", "__generator_ctor", "__bit_generator_ctor",
                   "__randomstate_ctor"}
_PLAIN = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"), ("builtins", "slice"),
          ("builtins", "bytearray"), ("collections", "OrderedDict"), ("collections", "deque"),
          ("copyreg", "_reconstructor")}


def _state_bytes(parts) -> bytes:
    """An environment state as pickle bytes that depend only on its values: without pickle's memo (fast mode),
    which would write a shared object (an interned attribute name) once and a copy of it twice, so that a resumed
    run, whose objects are copies, would write other bytes for the same state. An object graph with a cycle is
    refused (ValueError), and the state is then not kept."""
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=4)
    p.fast = True
    p.dump(parts)
    return f.getvalue()


class _StateUnpickler(pickle.Unpickler):
    """Reads an environment state written by :meth:`_GymCallbacks._save_state`. A checkpoint is untrusted input,
    and unpickling can call any global it names: only the globals that this run's own environments' state used at
    the start (``allowed``; None: any, to find them out), numpy's array, scalar, dtype and random-generator
    builders, and a few plain containers may appear."""

    def __init__(self, data: bytes, allowed: "set[tuple[str, str]] | None"):
        super().__init__(io.BytesIO(data))
        self.allowed, self.seen = allowed, set()

    def _numpy(self, module: str, name: str) -> bool:
        if module.split(".")[0] != "numpy":
            return False
        if name in _NUMPY_BUILDERS or (module.startswith("numpy.random.") and name.startswith("__pyx_unpickle_")):
            return True  # the builders check what they build: their class comes through find_class too
        obj = super().find_class(module, name)
        kinds = (np.ndarray, np.generic, np.dtype, np.random.BitGenerator, np.random.Generator, np.random.RandomState,
                 np.random.SeedSequence)
        return isinstance(obj, type) and issubclass(obj, kinds)

    def find_class(self, module, name):
        if self.allowed is not None and (module, name) not in self.allowed and (module, name) not in _PLAIN \
                and not self._numpy(module, name):
            raise pickle.UnpicklingError(f"the environment state names {module}.{name}, which this environment's "
                                         "state did not use at its start: refused (a checkpoint is untrusted input)")
        self.seen.add((module, name))
        return super().find_class(module, name)


class _GymCallbacks:
    """Gymnasium environments as ``rlt_env_callbacks``: ``envs`` is the N training environments then the
    evaluation one (instances 0..N-1 train, instance N evaluates, as the trainer numbers them).

    The trainer passes the addresses of its own observation and action buffers; numpy views of them are
    made once per address. An exception in a callback is kept in ``raised`` and the callback returns 1,
    which stops the run; :func:`train` raises the exception again. ``on_episode`` is called at each reset
    of a training instance that follows an episode end (the trainer has counted the episode by then), with
    no arguments here (:class:`_VectorCallbacks` passes the episode's place and return).
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
        self._save_fn = _native.ENV_STATE_FN(self._save_state)
        self._load_fn = _native.ENV_STATE_FN(self._load_state)
        self._allowed: set[tuple[str, str]] = set()
        # The evaluation in progress: episodes left, the step in the episode, the state from before it.
        self._eval_episodes, self._eval_limit = 1, 100000
        self._eval_left = self._eval_t = 0
        self._eval_before = b""
        self._name = _native.c_string(name, "environment name")[:63]
        obs_c, self._keep_obs = obs_space.to_c()
        act_c, self._keep_act = act_space.to_c()
        cb = _native.rlt_env_callbacks()
        cb.struct_size = ctypes.sizeof(cb)
        cb.name = self._name
        cb.obs, cb.act = obs_c, act_c
        # Gymnasium's TimeLimit ends episodes (as truncation); the trainer is told its limit (the evaluation
        # environment's, which ends at the same step), so it does not cut evaluation episodes at 100,000 steps
        # or warn that there is no limit. A positive env.max_episode_steps in the config replaces it.
        cb.max_episode_steps = min(_time_limit(envs[-1]), (1 << 31) - 1) if envs[-1] is not None else 0
        cb.reset, cb.step = self._reset_fn, self._step_fn
        self.struct = cb

    # -- checkpoints: the environments' state, so that a stopped run resumes bit for bit ---------------------
    def _state_parts(self, instance: int) -> dict:
        """Training instance k's state (every wrapper layer's attributes, the random generators included, and
        the adapter's own counters); instance 0 also carries the evaluation environment's, which the trainer
        does not save on its own."""
        parts = {"env": _layers_state(self._train_env(instance)), "first_seed": self.first_seed[instance],
                 "resets": self.resets[instance], "extra": self._extra_state(instance)}
        if instance == 0:
            # During an evaluation that a stop cut, the state from before it: the trainer rewinds its own streams
            # and does the whole evaluation again when it resumes.
            parts["eval"] = self._eval_before if self._eval_left > 0 else self._eval_state()
        return parts

    def _train_env(self, instance: int):
        """Training instance k's environment (a vector environment's: its sub-environment k)."""
        return self.envs[instance]

    def _extra_state(self, instance: int) -> dict:
        """What else instance k's state needs (a vector environment's adapter: its own per-row state)."""
        return {}

    def _apply_extra(self, instance: int, extra: dict) -> None:
        if extra:
            raise ValueError(f"environment instance {instance}'s state in the checkpoint is a vector environment's")

    def _eval_state(self) -> bytes:
        e = self.n_train
        return _state_bytes({"env": _layers_state(self.envs[e]), "first_seed": self.first_seed[e],
                             "resets": self.resets[e], "extra": {}})

    def track_evaluations(self, episodes: int, limit: int) -> None:
        """Lets the adapter tell an evaluation in progress (``episodes`` episodes of at most ``limit`` steps, the
        trainer's time limit; 0: none) from a finished one, for checkpoints written while a stop cuts one."""
        self._eval_episodes, self._eval_limit = int(episodes), int(limit) if limit > 0 else 100000

    def _eval_step_ended(self, ended: bool) -> None:
        self._eval_t += 1
        if ended or self._eval_t >= self._eval_limit:
            self._eval_t = 0
            self._eval_left -= 1

    def enable_resume(self) -> "str | None":
        """Gives the trainer save_state and load_state, so that checkpoints hold the environments' state and
        resume. Returns None, or why not (a state that pickle cannot write); then checkpoints are still written,
        and resuming from them is refused by the trainer. The state's size is fixed here: 64 KiB per instance, or
        4 times what the state takes now if that is more."""
        try:
            largest = 0
            for k in range(self.n_train):
                blob = _state_bytes(self._state_parts(k))
                reader = _StateUnpickler(blob, None)
                parts = reader.load()
                self._allowed |= reader.seen
                if k == 0:
                    reader = _StateUnpickler(parts["eval"], None)
                    reader.load()
                    self._allowed |= reader.seen
                largest = max(largest, len(blob))
        except Exception as exc:  # noqa: BLE001 - any environment: say why and run without it
            return f"{type(exc).__name__}: {exc}"
        self.struct.state_bytes = max(1 << 16, 1 << (4 * largest + 8).bit_length())
        self.struct.save_state, self.struct.load_state = self._save_fn, self._load_fn
        return None

    # The state's first 8 bytes: its pickle's length, or _NO_STATE followed by why there is none.
    _NO_STATE = (1 << 64) - 1

    def _save_state(self, user, instance: int, state: int) -> int:
        cap = int(self.struct.state_bytes)
        ctypes.memset(state, 0, cap)  # the same bytes for the same state: checkpoints compare byte for byte
        try:
            blob = _state_bytes(self._state_parts(instance))
            if len(blob) + 8 > cap:
                raise ValueError(f"it had grown to {len(blob)} bytes, more than the {cap - 8} this run set aside at "
                                 "its start (4 times what it took then)")
            ctypes.memmove(state, len(blob).to_bytes(8, "little") + blob, len(blob) + 8)
        except Exception as exc:  # noqa: BLE001 - the checkpoint is still written, without the state
            why = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[: cap - 9]
            ctypes.memmove(state, self._NO_STATE.to_bytes(8, "little") + why, len(why) + 8)
            if not getattr(self, "_warned_state", False):
                self._warned_state = True
                log.warning("environment instance %d's state is not in this checkpoint, which therefore cannot be "
                            "resumed: %s", instance, why.decode("utf-8", "replace"))
        return 0

    def _restore(self, instance: int, parts, more: set) -> None:
        if not isinstance(parts, dict) or set(parts) != {"env", "first_seed", "resets", "extra"} | more \
                or not isinstance(parts["extra"], dict):
            raise ValueError(f"environment instance {instance}'s state in the checkpoint is not this adapter's")
        train = instance < self.n_train
        _restore_layers(self._train_env(instance) if train else self.envs[instance], parts["env"])
        self.first_seed[instance], self.resets[instance] = parts["first_seed"], int(parts["resets"])
        if train:
            self._apply_extra(instance, parts["extra"])

    def _load_state(self, user, instance: int, state: int) -> int:
        try:
            cap = int(self.struct.state_bytes)
            n = int.from_bytes(ctypes.string_at(state, 8), "little")
            if n == self._NO_STATE:
                why = ctypes.string_at(state + 8, cap - 8).rstrip(b"\0").decode("utf-8", "replace")
                raise ValueError(f"the checkpoint holds no state of environment instance {instance}, so the run "
                                 f"cannot continue from it: {why}")
            if n > cap - 8:
                raise ValueError(f"environment instance {instance}'s state in the checkpoint says {n} bytes, more "
                                 f"than its {cap - 8}")
            parts = _StateUnpickler(ctypes.string_at(state + 8, n), self._allowed).load()
            self._restore(instance, parts, {"eval"} if instance == 0 else set())
            if instance == 0:
                if not isinstance(parts["eval"], bytes):
                    raise ValueError("the evaluation environment's state in the checkpoint is not this adapter's")
                self._restore(self.n_train, _StateUnpickler(parts["eval"], self._allowed).load(), set())
                self._eval_left = self._eval_t = 0
            return 0
        except BaseException as exc:  # noqa: BLE001
            self.raised.append(exc)
            return 1

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
        if o.dtype.kind in "cO":
            raise TypeError(f"the environment returned an observation of dtype {o.dtype}: rltrain takes real numbers")
        if o.shape != self.obs_space.shape:
            raise ValueError(f"the environment returned an observation of shape {o.shape}: expected {self.obs_space.shape}")
        np.copyto(self._view(address, "obs"), o, casting="unsafe")  # float64 -> float32 as Agent.act does

    def _reset(self, user, instance: int, seed: int, obs: int) -> int:
        try:
            if instance == self.n_train and self._eval_left <= 0:  # an evaluation begins
                self._eval_left, self._eval_t = self._eval_episodes, 0
                if self.struct.save_state:
                    try:
                        self._eval_before = self._eval_state()
                    except Exception:  # noqa: BLE001 - the checkpoint then says why it holds no state
                        self._eval_before = b""
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
            if instance == self.n_train:
                self._eval_step_ended(bool(term or trunc))
            # The real next observation, also at the end of an episode: the agent bootstraps from it.
            self._write_obs(obs, o)
            ctypes.c_float.from_address(reward).value = float(r)
            ctypes.c_uint8.from_address(terminated).value = 1 if term else 0
            ctypes.c_uint8.from_address(truncated).value = 1 if trunc else 0
            return 0
        except BaseException as exc:  # noqa: BLE001
            self.raised.append(exc)
            return 1


def _autoreset_mode(vector) -> str:
    """The vector environment's autoreset mode as Gymnasium's AutoresetMode value ("NextStep", "SameStep",
    "Disabled"); one that does not say is Gymnasium's default, NextStep. The mode the environment steps with
    (Sync/AsyncVectorEnv's autoreset_mode) comes first: metadata["autoreset_mode"] can be another vector
    environment's, as Gymnasium 1.2 writes it into the sub-environments' metadata dict, which their class shares."""
    base = getattr(vector, "unwrapped", vector)
    mode = getattr(base, "autoreset_mode", None)
    if mode is None:
        mode = (getattr(vector, "metadata", None) or {}).get("autoreset_mode")
    return str(getattr(mode, "value", mode)) if mode is not None else "NextStep"


class _VectorCallbacks(_GymCallbacks):
    """A Gymnasium vector environment as the trainer's N training instances (``reset_batch`` and
    ``step_batch``: one ``vector.step`` per vector step), and ``eval_env`` as the evaluation instance N (per
    instance, as :class:`_GymCallbacks`).

    Episode ends. The trainer counts the episodes that a step ended and then asks ``reset_batch`` for the first
    observation of each one's next episode; the transition itself always gets the real final observation.
    How the new episode is had depends on the vector environment's autoreset mode:

    - ``SAME_STEP``: the step that ends an episode already restarted the sub-environment; it returns the new
      first observation and the final one in ``info["final_obs"]``. The final one goes to the transition, the
      first one is kept and handed over by ``reset_batch``, with no further call into the environment.
    - ``NEXT_STEP`` (Gymnasium's default) and ``DISABLED``: the step returns the final observation;
      ``reset_batch`` resets the ended sub-environments at once with ``vector.reset(options={"reset_mask":
      ...})``, so the next step is a real step for every one of them (NEXT_STEP would spend it on the reset,
      with reward 0, which is no transition). An ``AsyncVectorEnv(shared_memory=False)`` in NEXT_STEP mode is
      refused: its workers do not forget the pending autoreset after such a reset.

    A sub-environment that the trainer's own time limit (``env.max_episode_steps``) ended is reset with
    ``reset_mask`` in every mode. The first reset seeds sub-environment k with ``seed + k`` (``vector.reset(seed=
    seed)``), later ones continue each sub-environment's generator, as the per-instance adapter does, so a
    vector environment trains exactly the run of its sub-environments given one by one.
    """

    def __init__(self, vector, eval_env, obs_space: Space, act_space: Space, seed: int, name: str):
        self.vector = vector
        self.n = int(vector.num_envs)
        super().__init__((*([None] * self.n), eval_env), obs_space, act_space, seed, name)
        self.seed = seed
        self.same_step = _autoreset_mode(vector) == "SameStep"
        self._started = False
        self._kept: dict[int, np.ndarray] = {}  # SAME_STEP: row -> its next episode's first observation
        # Each row's episode return as the trainer sums it (float32 rewards into a float64), for the callback.
        self._returns = np.zeros(self.n)
        self._reset_batch_fn = _native.ENV_RESET_BATCH_FN(self._reset_batch)
        self._step_batch_fn = _native.ENV_STEP_BATCH_FN(self._step_batch)
        self.struct.reset_batch, self.struct.step_batch = self._reset_batch_fn, self._step_batch_fn

    def enable_resume(self) -> "str | None":
        """A SyncVectorEnv without vector wrappers resumes: its sub-environments live in this process. Not an
        AsyncVectorEnv (they live in its workers) nor a wrapped one (a vector wrapper's own state, such as running
        observation statistics, is not kept)."""
        base = getattr(self.vector, "unwrapped", self.vector)
        if type(base).__name__ != "SyncVectorEnv" or not hasattr(base, "envs"):
            return ("the sub-environments of an AsyncVectorEnv live in its worker processes, so their state is not in "
                    "the checkpoint; to resume, use a SyncVectorEnv or num_envs (copies stepped one by one)")
        if base is not self.vector:
            return ("the vector environment is wrapped (a vector wrapper's own state is not kept); to resume, pass the "
                    "SyncVectorEnv itself with its wrappers on the sub-environments, or use num_envs")
        self._sync = base
        return super().enable_resume()

    def _train_env(self, instance: int):
        return self._sync.envs[instance]

    def _extra_state(self, instance: int) -> dict:
        auto = getattr(self._sync, "_autoreset_envs", None)
        return {"started": bool(self._started), "return": float(self._returns[instance]),
                "autoreset": bool(auto[instance]) if auto is not None else False,
                "kept": self._kept[instance].copy() if instance in self._kept else None}

    def _apply_extra(self, instance: int, extra: dict) -> None:
        if set(extra) != {"started", "return", "autoreset", "kept"}:
            raise ValueError(f"environment instance {instance}'s state in the checkpoint is not a vector environment's")
        self._started = bool(extra["started"])
        self._returns[instance] = float(extra["return"])
        auto = getattr(self._sync, "_autoreset_envs", None)
        if auto is not None:
            auto[instance] = bool(extra["autoreset"])
        if extra["kept"] is None:
            self._kept.pop(instance, None)
        else:
            self._kept[instance] = np.asarray(extra["kept"])

    def _rows(self, address: int, kind: str) -> np.ndarray:
        """A numpy array over one of the trainer's batch buffers at ``address``: n rows."""
        key = (address, "rows-" + kind)
        view = self._views.get(key)
        if view is None:
            if kind == "obs":
                raw = (self._obs_ctype * (self.obs_space.size * self.n)).from_address(address)
                view = np.ctypeslib.as_array(raw).reshape((self.n, *self.obs_space.shape))
            elif kind == "act":
                ctype = ctypes.c_int32 if self.discrete else ctypes.c_float
                view = np.ctypeslib.as_array((ctype * (self.act_space.size * self.n)).from_address(address))
                view = view.reshape(self.n, self.act_space.size)
            else:
                ctype = {"f32": ctypes.c_float, "u8": ctypes.c_uint8}[kind]
                view = np.ctypeslib.as_array((ctype * self.n).from_address(address))
            self._views[key] = view
        return view

    def _write_row(self, view: np.ndarray, k: int, obs) -> None:
        """One sub-environment's observation into row k."""
        if self.obs_space.kind == "dict":
            obs = self.obs_space.flatten(obs)
        o = np.asarray(obs)
        if o.dtype.kind in "cO":
            raise TypeError(f"the environment returned an observation of dtype {o.dtype}: rltrain takes real numbers")
        if o.shape != self.obs_space.shape:
            raise ValueError(f"sub-environment {k} returned an observation of shape {o.shape}: expected "
                             f"{self.obs_space.shape}")
        np.copyto(view[k], o, casting="unsafe")

    def _write_rows(self, view: np.ndarray, obs, rows) -> None:
        """The vector environment's batched observation ``obs`` into ``rows`` of view (all when None)."""
        rows = range(self.n) if rows is None else rows
        if self.obs_space.kind == "dict":  # a dict of batched parts: one flattened row per sub-environment
            for k in rows:
                self._write_row(view, k, {key: part[k] for key, part in obs.items()})
            return
        o = np.asarray(obs)
        if o.dtype.kind in "cO":
            raise TypeError(f"the environment returned an observation of dtype {o.dtype}: rltrain takes real numbers")
        if o.shape != (self.n, *self.obs_space.shape):
            raise ValueError(f"the vector environment returned observations of shape {o.shape}: expected "
                             f"{(self.n, *self.obs_space.shape)}")
        if len(rows) == self.n:
            np.copyto(view, o, casting="unsafe")  # float64 -> float32 as the per-instance adapter does
            return
        for k in rows:
            np.copyto(view[k], o[k], casting="unsafe")

    def _reset_batch(self, user, n: int, mask: int, seeds: int, obs: int) -> int:
        try:
            view = self._rows(obs, "obs")
            if not self._started:  # the run's first reset: every row, seeded
                self._started = True
                o, _ = self.vector.reset(seed=self.seed)
                self._write_rows(view, o, None)
                return 0
            rows = [int(k) for k in np.flatnonzero(self._rows(mask, "u8"))]
            need = np.zeros(self.n, dtype=np.bool_)
            for k in rows:
                first = self._kept.pop(k, None)
                if first is None:
                    need[k] = True  # not restarted by the step: NEXT_STEP, DISABLED, or the trainer's time limit
                else:
                    view[k] = first
            if need.any():
                o, _ = self.vector.reset(options={"reset_mask": need})
                self._write_rows(view, o, np.flatnonzero(need))
            for i, k in enumerate(rows):  # the trainer has counted these episodes, in this order
                ret, self._returns[k] = float(self._returns[k]), 0.0
                if self.on_episode is not None:
                    self.on_episode(len(rows) - 1 - i, ret)
            return 0
        except BaseException as exc:  # noqa: BLE001 - carried across the C frames and raised by train()
            self.raised.append(exc)
            return 1

    def _step_batch(self, user, n: int, actions: int, obs: int, rewards: int, terminated: int, truncated: int) -> int:
        try:
            a = self._rows(actions, "act")
            space = self.vector.single_action_space
            if self.discrete:
                env_actions = a[:, 0].astype(np.int64) + self.act_space.start
            else:  # a copy: the trainer reuses its buffer for the next actions
                env_actions = np.array(a, dtype=space.dtype).reshape((self.n, *space.shape))
            o, r, term, trunc, info = self.vector.step(env_actions)
            view = self._rows(obs, "obs")
            self._write_rows(view, o, None)
            ended = np.flatnonzero(np.logical_or(term, trunc))
            if self.same_step and len(ended):
                # o holds the new episodes' first observations; the transitions take the final ones.
                final = info.get("final_obs") if isinstance(info, dict) else None
                if final is None:
                    raise ValueError("the vector environment's autoreset mode is SAME_STEP, but a step that ended "
                                     "an episode gave no info['final_obs']")
                for k in ended:
                    self._kept[int(k)] = view[k].copy()
                    self._write_row(view, int(k), final[k])
            rew = self._rows(rewards, "f32")
            np.copyto(rew, np.asarray(r).reshape(self.n), casting="unsafe")
            np.copyto(self._rows(terminated, "u8"), np.asarray(term).reshape(self.n), casting="unsafe")
            np.copyto(self._rows(truncated, "u8"), np.asarray(trunc).reshape(self.n), casting="unsafe")
            self._returns += rew
            return 0
        except BaseException as exc:  # noqa: BLE001
            self.raised.append(exc)
            return 1


def _check_vector(vector) -> None:
    """Refuses a vector environment whose autoreset this adapter cannot drive exactly, saying what to use."""
    mode = _autoreset_mode(vector)
    if mode not in ("NextStep", "SameStep", "Disabled"):
        raise ValueError(f"{type(vector).__name__}: autoreset mode {mode!r} is none of Gymnasium's NEXT_STEP, "
                         "SAME_STEP and DISABLED")
    base = getattr(vector, "unwrapped", vector)
    if mode == "NextStep" and type(base).__name__ == "AsyncVectorEnv" and not getattr(base, "shared_memory", True):
        raise ValueError("AsyncVectorEnv(shared_memory=False) in autoreset mode NEXT_STEP: its workers keep a "
                         "pending autoreset through reset(options={'reset_mask': ...}), so the step after an "
                         "episode end would be a reset, not a transition; construct it with "
                         "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (one call per step, the fastest "
                         "here) or shared_memory=True")


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
    resume: "str | os.PathLike | None" = None,
) -> dict:
    """Trains an agent on a Gymnasium environment, writes the run directory, and returns the results.

    Args:
        env: a Gymnasium id (``"Pendulum-v1"``), an ``EnvSpec``, an environment instance, or a vector
            environment (``gymnasium.vector.SyncVectorEnv``, ``AsyncVectorEnv``, ``gymnasium.make_vec(...)``):
            its sub-environments become the trainer's N training environments (``env.num_envs``), stepped
            with one ``step`` call per vector step, in any autoreset mode (an ``AsyncVectorEnv(shared_memory=
            False)`` needs SAME_STEP or DISABLED; SAME_STEP makes one call per step also when episodes end).
            The transitions are those of the same sub-environments given one by one, final observations
            included. The caller closes it. The algorithm of the config must suit its action space (td3:
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
        eval_env: the environment for evaluations; default: a new one from ``env``'s id or spec (a vector
            environment's: its sub-environments' spec).
        eval_every: steps between evaluations (default ``train.eval_every``; 0 evaluates only at the end).
        eval_episodes: episodes per evaluation (default ``train.eval_episodes``).
        save_path: where to save the agent's checkpoint at the end, if given (``out_dir/final.ckpt`` is
            the trainer's checkpoint, written always).
        out_dir: the run directory (default: the config's ``out_dir``). It gets what ``rltrain --config``
            writes: config.yaml (the resolved config), metrics.csv, summary.json, final.ckpt and (with
            ``checkpoint.best``, the default) best.ckpt.
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
        resume: a checkpoint of this run to continue from (``out_dir/final.ckpt`` after a stop, or a periodic
            ``ckpt_<step>.ckpt``), with the same config, environment and arguments; on the CPU the continued run
            is bit for bit the one that was never stopped. Checkpoints hold the environments' state (each wrapper's
            and the environment's attributes, random generators included, pickled; only the globals the
            environment's own state uses are accepted when reading it back); a SyncVectorEnv's sub-environments
            too. An AsyncVectorEnv's (in its workers), a wrapped vector environment's, or a state that pickle cannot
            write is not kept, and resuming from such a checkpoint is refused with the reason. With
            several seeds: the file name, which each member finds in its own ``out_dir/seed_<s>/``.

    Ctrl-C (SIGINT) and SIGTERM stop the run after the current step, as in the native CLI: the outputs and
    final.ckpt are written, summary.json says ``stopped``, then KeyboardInterrupt (for Ctrl-C, or whatever the
    signal's handler does) is raised; ``train(..., resume=out_dir / "final.ckpt")`` continues.

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

    def arg(key: str, value, name: str) -> None:  # an error names the keyword argument, not a --set
        cfg.set(key, value, source=f"rltrain.gym.train({name}={value!r})")

    if total_steps is not None:
        arg("train.total_steps", int(total_steps), "total_steps")
    if seed is not None:
        arg("seed", int(seed), "seed")
    if eval_every is not None:
        arg("train.eval_every", int(eval_every), "eval_every")
    if eval_episodes is not None:
        arg("train.eval_episodes", int(eval_episodes), "eval_episodes")
    if out_dir is not None:
        arg("out_dir", os.fspath(out_dir), "out_dir")
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
        return _train_group(env, eval_env, cfg, callback, resume)
    seed = int(cfg.get("seed"))

    # A vector environment (it has single_observation_space) is the trainer's env.num_envs training
    # environments, stepped all at once (_VectorCallbacks), wherever its sub-environments live.
    vector = env if hasattr(env, "single_observation_space") else None
    if vector is not None:
        _check_vector(vector)
        if num_envs is not None and int(num_envs) != int(vector.num_envs):
            raise ValueError(f"num_envs={num_envs}, but the vector environment has {vector.num_envs}")
        num_envs = int(vector.num_envs)
    if num_envs is not None:
        cfg.set("env.num_envs", int(num_envs))
    n_envs = int(cfg.get("env.num_envs"))
    if vector is not None:
        # The sub-environments' spec (from the workers for an AsyncVectorEnv) names the run and makes the
        # evaluation environment, as an environment's own spec does for one environment.
        base = getattr(vector, "unwrapped", vector)  # under any vector wrappers
        try:
            spec = base.get_attr("spec")[0] if hasattr(base, "get_attr") else None
        except Exception:  # noqa: BLE001 - a wrapper that Gymnasium cannot record has no spec
            spec = None
        train_envs, own_env = [], False
        name = spec.id if spec is not None and spec.id else type(base).__name__
        obs_gym, act_gym = vector.single_observation_space, vector.single_action_space
        if eval_env is None:
            if spec is None:
                raise ValueError("pass eval_env: the vector environment's sub-environments have no spec to make an "
                                 "evaluation environment from")
            eval_env = spec
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
        name, obs_gym, act_gym = _env_name(env), env.observation_space, env.action_space
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
        if type(obs_gym).__name__ == "Dict":
            obs_space = Space.from_gym_dict(obs_gym, cfg)
        else:
            obs_space = Space.from_gym(obs_gym)
        act_space = Space.from_gym(act_gym, actions=True)
        if vector is not None:
            bridge = _VectorCallbacks(vector, eval_env, obs_space, act_space, seed, name)
        else:
            bridge = _GymCallbacks((*train_envs, eval_env), obs_space, act_space, seed, name)
        bridge.track_evaluations(int(cfg.get("train.eval_episodes")),
                                 int(cfg.get("env.max_episode_steps")) or int(bridge.struct.max_episode_steps))
        why_not = bridge.enable_resume()
        if why_not is not None:
            log.info("checkpoints of this run cannot be resumed: %s", why_not)
        trainer = Trainer(cfg, _env=bridge.struct)
        log.info("memory plan:\n%s", trainer.plan_table().rstrip())
        if resume is not None:
            try:
                trainer.resume(resume)
            except RltError as err:
                if bridge.raised:  # load_state's own reason
                    raise CheckpointError(f"{err.message}: {bridge.raised[0]}", err.status, err.status_name) from None
                if why_not is not None:  # no save_state: why this run's environments are not in its checkpoints
                    raise type(err)(f"{err.message}; here: {why_not}", err.status, err.status_name) from None
                raise
        # The trainer draws its own random actions; the environments' action spaces are seeded for an
        # environment that samples them itself (a SyncVectorEnv's here too; an AsyncVectorEnv's live in its workers).
        for k, e in enumerate(train_envs if vector is None else getattr(base, "envs", None) or []):
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

        def on_episode(later: int = 0, ret: float | None = None) -> None:
            # A vector environment reports the episodes one step ended after the trainer counted all of them:
            # `later` of them come after this one, and `ret` is this one's return.
            nonlocal stopped
            p = trainer.progress()
            if ret is not None:
                p = dataclasses.replace(p, episodes=p.episodes - later, last_episode_return=ret)
            if report("episode", p):
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
        for e in train_envs[1:]:
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
    """The members' seeds as the config names them (train.seeds, else seed .. seed + train.num_seeds - 1); a
    data-parallel run's ranks (``devices`` with one seed) all have the run's seed."""
    ranks = int(_native.lib.rlt_config_ranks(cfg._handle))
    if ranks > 0:
        return [int(cfg.get("seed"))] * ranks
    listed = cfg.get("train.seeds")
    if listed:
        return [int(s) for s in listed]
    first = int(cfg.get("seed"))
    return [first + k for k in range(int(cfg.get("train.num_seeds")))]


def _train_group(env, eval_env, cfg: Config, callback, resume=None) -> dict:
    """train() for several seeds: a seed group whose member k trains on environments of its own."""
    make = _factory(env, "training")
    make_eval = _factory(eval_env if eval_env is not None else env, "evaluation")
    n_envs = int(cfg.get("env.num_envs"))
    eval_episodes, max_steps = int(cfg.get("train.eval_episodes")), int(cfg.get("env.max_episode_steps"))
    seeds = _group_seeds(cfg)
    made: list = []
    group = None
    try:
        bridges = []
        obs_space = act_space = None
        ranks = int(_native.lib.rlt_config_ranks(cfg._handle))
        for r, s in enumerate(seeds):
            # Rank r of a data-parallel run steps environments r N .. r N + N - 1 of one numbering, as the engine
            # numbers its built-in ones: their first resets and action spaces take seed + that number.
            if ranks > 0:
                s = s + r * n_envs
            train_envs = [make() for _ in range(n_envs)]
            made += train_envs
            ev = make_eval()
            made.append(ev)
            if obs_space is None:
                obs_space = Space.from_gym(train_envs[0].observation_space)
                act_space = Space.from_gym(train_envs[0].action_space, actions=True)
            bridges.append(_GymCallbacks((*train_envs, ev), obs_space, act_space, s, _env_name(train_envs[0])))
            bridges[-1].track_evaluations(eval_episodes, max_steps or int(bridges[-1].struct.max_episode_steps))
            why_not = bridges[-1].enable_resume()
            if why_not is not None and r == 0:
                log.info("checkpoints of this run cannot be resumed: %s", why_not)
            if ranks > 0:  # the replicas evaluate on the same episodes, as the engine's ranks do
                bridges[-1].first_seed[-1] = seeds[0] + 100
            for k, e in enumerate(train_envs):
                e.action_space.seed(s + k)
        group = Group(cfg, _envs=[b.struct for b in bridges])
        log.info("memory plan:\n%s", group.plan_table().rstrip())
        if resume is not None:
            try:
                group.resume(os.path.basename(os.fspath(resume)))
            except RltError as err:
                raised = [exc for b in bridges for exc in b.raised]
                if raised:
                    raise CheckpointError(f"{err.message}: {raised[0]}", err.status, err.status_name) from None
                raise
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
            "ranks": ranks,  # > 0: a data-parallel run, runs[k] is rank k (out_dir/rank_<k>)
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


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("rltrain")
    except Exception:  # noqa: BLE001 - run from a source tree, not installed
        return "(not installed)"


def _say_interrupted(out_dir, argv: list[str], cfg, vector) -> None:
    """The closing lines of a run stopped by Ctrl-C or SIGTERM: what was written, and the command that continues it."""
    group = cfg is not None and _native.lib.rlt_group_count(cfg._handle) > 0
    where = os.path.join(out_dir, "summary.csv" if group else "final.ckpt") if out_dir else None
    if where is None or not os.path.exists(where):
        print("interrupted before training started: nothing was written", file=sys.stderr)
        return
    if group:
        print(f"interrupted: outputs written to {out_dir}/seed_<seed>/ (final.ckpt each)", file=sys.stderr)
    else:
        print(f"interrupted: outputs written to {out_dir}/ (final.ckpt)", file=sys.stderr)
    if vector:
        print("a vector environment's run cannot be resumed (its sub-environments' state is not in the checkpoint); "
              "run without --vector to get resumable checkpoints", file=sys.stderr)
        return
    resume = "final.ckpt" if group else os.path.join(out_dir, "final.ckpt")
    print(f"continue with  {_resume_command(argv, resume)}", file=sys.stderr)
    print(f"  (from Python: rltrain.gym.train(..., resume={resume!r}) with the same arguments)", file=sys.stderr)


def _json_clean(value):
    """value with NaN floats as None, nested lists and dicts included (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_clean(v) for v in value]
    return value


@contextlib.contextmanager
def ignore_sigint_in_workers():
    """SIGINT ignored while an AsyncVectorEnv starts its workers, which inherit that::

        with rltrain.gym.ignore_sigint_in_workers():
            vec = gymnasium.vector.AsyncVectorEnv([make] * 4)

    Ctrl-C in a terminal goes to every process of the foreground group, and a worker that gets it fails its next
    step (Gymnasium's worker reports the KeyboardInterrupt as its error), where the run is to stop after the step.
    The workers end with the vector environment's close(). ``python -m rltrain.gym --vector async`` does this."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise_interrupt(signum, frame):  # noqa: ARG001 - a signal handler
    raise KeyboardInterrupt(f"signal {signum}")


def _resume_command(argv: list[str], resume: str) -> str:
    """The command line that continues this run: the same arguments (every --set included), quoted for a POSIX
    shell, with --resume RESUME in place of any earlier --resume."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--resume":
            skip = True
        elif not a.startswith("--resume="):
            kept.append(a)
    return shlex.join(["python", "-m", "rltrain.gym", *kept, "--resume", resume])


def _default_out_dir(out_dir: str, env_id: str) -> str:
    """Where python -m rltrain.gym writes when no --set out_dir is given: the config's out_dir with the
    environment's id added (runs/td3_pendulum_fast-Pendulum-v1), so that it never meets the directory of the
    native CLI's run of the same config (runs/td3_pendulum_fast), which would refuse the other's outputs."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in env_id)
    return f"{out_dir.rstrip('/')}-{safe}"


def main(argv: list[str] | None = None) -> int:
    """``python -m rltrain.gym``: train on a Gymnasium environment from the shell.

    Prints the native CLI's progress lines and its closing lines (where the outputs went); ``--json``
    prints the results as one JSON object instead. Exit codes as the native CLI: 0 success, 1 runtime
    failure, 2 config error, 3 the plan does not fit, 4 the device is not usable, 5 interrupted (Ctrl-C or
    SIGTERM, after the current step; the outputs and final.ckpt are written, and ``--resume`` continues).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m rltrain.gym", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version",
                    version=f"rltrain-gym {_package_version()} (library {_native.version()})")
    ap.add_argument("--config", required=True, help="YAML config (algo td3 for Box actions, dqn for Discrete)")
    ap.add_argument("--env", required=True, help="Gymnasium environment id, such as Pendulum-v1")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    ap.add_argument("--steps", type=int, help="environment steps (default: train.total_steps)")
    ap.add_argument("--seed", type=int, help="seed (default: the config's seed)")
    ap.add_argument("--resume", metavar="CKPT", help="continue the run saved in CKPT (its out_dir/final.ckpt after a "
                    "stop, or a ckpt_<step>.ckpt), with the same arguments otherwise")
    ap.add_argument("--save", help="also write the agent's checkpoint here at the end")
    ap.add_argument("--quiet", action="store_true", help="no progress lines (and no memory plan on stderr)")
    ap.add_argument("--json", action="store_true", help="print only the results, as one JSON object")
    ap.add_argument("--tensorboard", metavar="LOGDIR", help="also write TensorBoard scalars here (needs tensorboard)")
    ap.add_argument("--vector", choices=("sync", "async"),
                    help="step the env.num_envs training environments as one Gymnasium vector environment "
                         "(gymnasium.make_vec with this vectorization mode and SAME_STEP autoreset; async: a worker "
                         "process each) instead of copies stepped one by one in this process; the same run")
    args = ap.parse_args(argv)
    quiet = args.quiet or args.json
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="rltrain: %(message)s")

    def progress(ev: dict) -> None:
        if ev["kind"] != "episode" and not quiet:
            print(ev["progress"].line(), flush=True)

    out_dir = vector = None
    # SIGTERM as Ctrl-C: the run stops after its step and writes its outputs (rltrain/_signals.py), then exit 5.
    main_thread = threading.current_thread() is threading.main_thread()
    on_term = signal.signal(signal.SIGTERM, _raise_interrupt) if main_thread else None
    try:
        cfg = Config.from_file(args.config)
        for s in args.set:
            cfg.set(s)
        if not any(s.split("=", 1)[0].strip() == "out_dir" for s in args.set):
            cfg.set("out_dir", _default_out_dir(cfg.get("out_dir"), args.env))
        out_dir = cfg.get("out_dir")
        env = args.env
        if args.vector:
            import gymnasium

            same_step = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}
            with ignore_sigint_in_workers():
                vector = env = gymnasium.make_vec(args.env, num_envs=int(cfg.get("env.num_envs")),
                                                  vectorization_mode=args.vector, vector_kwargs=same_step)
        result = train(env, cfg, total_steps=args.steps, seed=args.seed, callback=progress, save_path=args.save,
                       tensorboard=args.tensorboard, resume=args.resume)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except NoFitError as e:
        print(f"{e.plan}\n{e}", file=sys.stderr)
        return 3
    except DeviceError as e:
        print(f"device error: {e}", file=sys.stderr)
        return 4
    except CheckpointError as e:
        print(f"checkpoint error: {e}", file=sys.stderr)
        return 2
    except RltError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _say_interrupted(out_dir, argv, cfg if out_dir else None, args.vector)
        return EXIT_INTERRUPTED
    except (ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:  # --tensorboard without the tensorboard package
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if vector is not None:
            vector.close()
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
    if args.json:
        # JSON has no NaN: a value that does not exist yet is null.
        print(json.dumps(_json_clean(result)))
        return 0
    best = ", best.ckpt" if cfg.get("checkpoint.best") else ""
    if "runs" in result:  # a seed group: the native CLI's closing lines for one
        for r in result["runs"]:
            print(f"seed {r['seed']}: {r['env_steps']} env steps, {r['updates']} updates in {r['wall_s']:.1f}s; "
                  f"final eval {r['final_eval_return']:.1f}, best {r['best_eval_return']:.1f}")
        rate = result["updates"] / result["wall_s"] if result["wall_s"] > 0 else 0.0
        print(f"finished {len(result['runs'])} seeds: {result['env_steps']} env steps, {result['updates']} updates in "
              f"{result['wall_s']:.1f}s ({rate:.0f} updates/s together); final eval mean {result['final_eval_mean']:.1f}, "
              f"min {result['final_eval_min']:.1f}, max {result['final_eval_max']:.1f}")
        print(f"outputs written to {result['out_dir']}/seed_<seed>/ (config.yaml, metrics.csv, summary.json, "
              f"final.ckpt{best} each) and {result['out_dir']}/summary.csv")
        return 0
    # The native CLI's closing lines.
    print(f"finished: {result['env_steps']} env steps, {result['updates']} updates in {result['wall_s']:.1f}s "
          f"({result['updates'] / result['wall_s'] if result['wall_s'] > 0 else 0.0:.0f} updates/s); "
          f"final eval {result['final_eval_return']:.1f}, best {result['best_eval_return']:.1f}")
    print(f"outputs written to {result['out_dir']}/ (config.yaml, metrics.csv, summary.json, final.ckpt{best})")
    if args.save:
        print(f"agent checkpoint written to {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
