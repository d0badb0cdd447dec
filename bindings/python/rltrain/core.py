"""Config, Agent and Trainer: Python classes over the handles of ``rltrain.h``.

Each class owns one C handle and frees it in :meth:`close` (also called by ``with`` blocks and, as a
last resort, by the garbage collector). A handle must not be used from two threads at once; different
handles may be.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import numpy as np

from . import _native
from ._native import lib
from ._signals import stop_on_signals
from .errors import error_for
from .spaces import Space

_MISSING = object()


_KEY = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")


def _key_text(key: Any, what: str) -> str:
    """A config key (or a mapping's key) as written in YAML: letters, digits, '_' and '.', nothing that YAML
    would read as more (``"batch_size: 5, total_steps"`` would otherwise set two keys)."""
    if not isinstance(key, str):
        raise TypeError(f"{what} {key!r} is a {type(key).__name__}: config keys are strings")
    if not _KEY.fullmatch(key):
        raise ValueError(f"{what} {key!r} is not a config key: keys are letters, digits, '_' and '.' (like "
                         f"'train.batch_size')")
    return key


def as_real_array(x, dtype, what: str) -> np.ndarray:
    """x as a contiguous array of dtype, refusing what the conversion would change silently: complex values
    (numpy drops the imaginary part) and, for an integer dtype, values that are not whole numbers (1.7 would
    become 1)."""
    a = np.asarray(x)
    if a.dtype.kind == "c":
        raise TypeError(f"{what} is complex ({a.dtype}): rltrain takes real numbers")
    if a.dtype.kind == "O":
        raise TypeError(f"{what} holds Python objects ({a.dtype}), not numbers")
    if np.dtype(dtype).kind in "iu" and a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ValueError(f"{what} must be whole numbers (a Discrete action is an index), got {a!r}")
    return np.ascontiguousarray(a, dtype=dtype)


def _yaml_flow(value: Any) -> str:
    """A Python value as a YAML flow scalar, list or mapping (the syntax of ``rlt_config_set``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        # A double-quoted YAML scalar; non-ASCII characters as themselves (json's \\ud83d\\ude00 surrogate
        # escapes of a character beyond the BMP are not YAML).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key_text(k, 'mapping key')}: {_yaml_flow(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as a config value")


class _Owned:
    """A C handle this object owns: ``close()`` (idempotent, also on ``with`` exit and garbage collection) frees
    it with the library function named by ``_free``; ``_handle`` raises once it is closed."""

    _free = ""
    _h = None

    @property
    def _handle(self) -> ctypes.c_void_p:
        if not self._h:
            raise ValueError(f"this {type(self).__name__} is closed")
        return self._h

    def close(self) -> None:
        """Frees the C handle and what it owns (idempotent)."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            getattr(lib, self._free)(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Config(_Owned):
    _free = "rlt_config_free"  # frees the handle and everything it owns
    """A strict rltrain configuration (``rlt_config``), starting from the documented defaults.

    >>> cfg = Config.from_file("configs/td3_pendulum_fast.yaml").set("train.total_steps=5000")
    >>> cfg.set("td3.actor_hidden", [64, 64]).validate()

    Unknown keys, wrong types and out-of-range values raise :class:`rltrain.ConfigError` whose message
    has file:line:column, the key and the nearest valid key.
    """

    def __init__(self):
        h = ctypes.c_void_p()
        rc = lib.rlt_config_init(ctypes.byref(h))
        if rc != 0:
            raise error_for(rc, "could not create a config")
        self._h = h

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "Config":
        """The defaults with a YAML file merged over them."""
        return cls().load_file(path)

    @classmethod
    def from_string(cls, yaml: str, name: str = "<string>") -> "Config":
        """The defaults with YAML text merged over them; ``name`` is used in error messages."""
        return cls().load_string(yaml, name)

    def load_file(self, path: str | os.PathLike) -> "Config":
        """Merges a YAML file over the current values; returns self."""
        self._check(lib.rlt_config_load_file(self._handle, _native.c_path(path, "config path")))
        return self

    def load_string(self, yaml: str, name: str = "<string>") -> "Config":
        """Merges YAML text over the current values; returns self."""
        self._check(lib.rlt_config_load_string(self._handle, _native.c_string(yaml, "YAML text"),
                                               _native.c_string(name, "name")))
        return self

    def set(self, assignment: str, value: Any = _MISSING, *, source: str | None = None) -> "Config":
        """One override; returns self.

        Either ``set("td3.actor_hidden=[64,64]")`` (the value in YAML flow syntax, as ``--set`` takes
        it) or ``set("td3.actor_hidden", [64, 64])`` (a Python value: bool, number, str, list, dict). An error
        names where the value came from: ``--set key=value:line:column`` for the first form, the call
        (``Config.set('key', value)``, or ``source``, such as ``rltrain.gym.train(out_dir='x')``) for the second.
        """
        label = None
        if value is not _MISSING:
            label = source or f"Config.set({assignment!r}, {value!r})"
            assignment = f"{_key_text(assignment, 'key')}={_yaml_flow(value)}"
        rc = lib.rlt_config_set(self._handle, _native.c_string(assignment, "assignment"))
        if rc != 0:
            msg = self.errmsg
            where = f"--set {assignment}:"
            if label and msg.startswith(where):  # "--set key=value:1:19: key ..." -> "<the call>: key ..."
                msg = label + re.sub(r"^\d+:\d+", "", msg[len(where):], count=1)
            raise error_for(rc, msg)
        return self

    def validate(self) -> "Config":
        """Checks the whole config for consistency now (the inits do it too); returns self."""
        self._check(lib.rlt_config_validate(self._handle))
        return self

    # -- reading --------------------------------------------------------------------------------------
    def dump(self) -> str:
        """The resolved config as YAML (every key, defaults included); loadable as a config."""
        return _native.read_sized(lib.rlt_config_dump, self._handle)

    def to_dict(self) -> dict:
        """The resolved config as nested dicts (parses :meth:`dump` with PyYAML)."""
        import yaml

        return yaml.safe_load(self.dump())

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """One resolved value by its dotted key, such as ``get("train.total_steps")``."""
        node: Any = self.to_dict()
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                if default is _MISSING:
                    raise KeyError(key)
                return default
            node = node[part]
        return node

    def plan_fit(self) -> tuple[dict, str]:
        """What fits the budget, without reserving memory (``rltrain plan``): a dict (need_bytes,
        limit_bytes, fits, max_replay_capacity, max_batch_size, min_grad_accum_steps, micro_batch) and
        the configured plan's table. Plans the trainer's built-in environment on the configured device."""
        report = _native.rlt_fit_report()
        table = ctypes.create_string_buffer(32768)
        err = ctypes.create_string_buffer(4096)
        rc = lib.rlt_plan_fit(self._handle, ctypes.byref(report), table, len(table), err, len(err))
        if rc != 0:
            raise error_for(rc, _native.text(err.value))
        values = {name: getattr(report, name) for name, _ in report._fields_}
        values["fits"] = bool(report.fits)
        return values, _native.text(table.value)

    def plan_group(self) -> tuple[int, int]:
        """What a seed group of this config reserves in its budgeted arenas, without reserving (``rltrain plan``'s
        group line): (the first member's bytes, each other member's). With train.seed_batching on a GPU the first is
        the leading seed, which also holds the batched graph's library workspace; otherwise the two are equal."""
        first, each = ctypes.c_uint64(0), ctypes.c_uint64(0)
        err = ctypes.create_string_buffer(4096)
        rc = lib.rlt_plan_group(self._handle, ctypes.byref(first), ctypes.byref(each), err, len(err))
        if rc != 0:
            raise error_for(rc, _native.text(err.value))
        return first.value, each.value

    def plan_group_leads(self) -> int:
        """How many members of a seed group of this config plan as the first of plan_group() (each batch's leading
        seed: one per GPU, times train.seed_batches, which 0 resolves as the group does: a batch for every 4 seeds
        a GPU has, at most 4 or 2 for a large update, halved while they exceed memory.budget_mb; at least 1); the others plan as the
        second."""
        return int(lib.rlt_plan_group_leads(self._handle))

    def copy(self) -> "Config":
        """An independent config with the same resolved values."""
        return Config.from_string(self.dump(), "<copy>")

    @property
    def errmsg(self) -> str:
        """The message of the last failed call on this config."""
        return _native.text(lib.rlt_config_errmsg(self._handle))

    # -- lifetime ------------------------------------------------------------------------------------
    def _check(self, rc: int) -> None:
        if rc != 0:
            raise error_for(rc, self.errmsg)


    def __str__(self) -> str:
        return self.dump()


def _as_config(config: "Config | str | os.PathLike") -> Config:
    """A Config from a Config or a path to a YAML file."""
    if isinstance(config, Config):
        return config
    if isinstance(config, (str, os.PathLike)):
        return Config.from_file(config)
    raise TypeError(f"expected a rltrain.Config or a path to a YAML file, not {type(config).__name__}")


def _plan_from(fn, handle) -> tuple[dict, list[dict]]:
    """Summary and entries of a memory plan as plain Python values."""
    s = _native.rlt_plan_summary()
    entries = ctypes.POINTER(_native.rlt_plan_entry)()
    rc = fn(handle, ctypes.byref(s), ctypes.byref(entries))
    if rc != 0:
        raise error_for(rc, "")
    summary = {name: getattr(s, name) for name, _ in s._fields_}
    for name, value in summary.items():
        if isinstance(value, bytes):  # char arrays: device, precision, note
            summary[name] = _native.text(value)
    summary["fits"] = bool(s.fits)
    rows = []
    for i in range(s.n_entries if entries else 0):
        e = entries[i]
        rows.append({
            "name": _native.text(e.name),
            "region": _native.text(e.region),
            "location": "device" if e.location == _native.LOC_DEVICE else "host",
            "bytes": int(e.bytes),
            "offset": int(e.offset),
        })
    return summary, rows


class Agent(_Owned):
    _free = "rlt_agent_free"  # frees the handle and everything it owns
    """An agent for a simulator that drives its own loop (``rlt_agent``): act, observe, update.

    Args:
        config: a :class:`Config` (``algo: td3`` for Box actions, ``algo: dqn`` for Discrete ones), or
            a path to a YAML file.
        obs_space: a :class:`Space` or a Gymnasium space for observations (float32 vectors; DQN also
            takes uint8 (C, H, W) images).
        act_space: a :class:`Space` or a Gymnasium space for actions (Box for TD3, Discrete for DQN).

    All memory is planned and reserved here; a plan that does not fit raises
    :class:`rltrain.NoFitError` with hints (and the plan table in its ``plan`` attribute).
    """

    def __init__(self, config: "Config | str | os.PathLike", obs_space, act_space):
        self.config = _as_config(config)  # the engine copies it at init; kept for the caller to read
        self.obs_space = obs_space if isinstance(obs_space, Space) else Space.from_gym(obs_space)
        self.act_space = act_space if isinstance(act_space, Space) else Space.from_gym(act_space, actions=True)
        if self.act_space.dtype == np.uint8:
            raise ValueError("actions are float32 (Box) or int32 (Discrete), not uint8")
        obs_c, keep_o = self.obs_space.to_c()
        act_c, keep_a = self.act_space.to_c()
        h = ctypes.c_void_p()
        rc = lib.rlt_agent_init(self.config._handle, ctypes.byref(obs_c), ctypes.byref(act_c), ctypes.byref(h))
        del keep_o, keep_a  # the engine copies the bounds at init
        self._h = h
        if rc != 0:
            msg = _native.text(lib.rlt_agent_errmsg(h)) if h else ""
            nofit = h and _native.status_name(rc) == "RLT_ENOFIT"  # only then is there a plan to show
            plan = _native.read_sized(lib.rlt_agent_plan_format, h) if nofit else ""
            self.close()
            raise error_for(rc, msg, plan=plan)
        self._obs_shape = self.obs_space.shape
        self._obs_dtype = self.obs_space.dtype
        self._discrete = self.act_space.kind == "discrete"
        self._act_dim = 1 if self._discrete else self.act_space.size
        self._updates = ctypes.c_int32()

    # -- the loop --------------------------------------------------------------------------------------
    def _flat(self, obs):
        """Dict spaces: a mapping of parts (or a list of them) as rows of bytes; other spaces: obs as it is."""
        if self.obs_space.kind != "dict" or isinstance(obs, np.ndarray):
            return obs
        if isinstance(obs, dict):
            return self.obs_space.flatten(obs)
        return np.stack([self.obs_space.flatten(o) for o in obs])

    def _rows(self, x: np.ndarray, what: str) -> int:
        """Number of observations in x (1 for a single one), checking its shape."""
        if x.shape == self._obs_shape:
            return 1
        if x.shape[1:] == self._obs_shape:
            return x.shape[0]
        raise ValueError(f"{what} has shape {x.shape}: expected {self._obs_shape} or (n, *{self._obs_shape})")

    def act(self, obs, explore: bool = True):
        """Actions for one observation or a batch (first axis).

        ``obs`` is converted to the observation dtype (float32 or uint8) only when it is not already a
        contiguous array of it. Returns a float32 array of the action shape (Box; already within the
        space's bounds) or an int (Discrete) for one observation, and arrays with a leading batch axis for
        a batch. ``explore=False`` gives the deterministic policy (TD3) or ``dqn.eval_epsilon`` (DQN).
        """
        x = as_real_array(self._flat(obs), self._obs_dtype, "obs")
        n = self._rows(x, "obs")
        out = np.empty(n, np.int32) if self._discrete else np.empty((n, self._act_dim), np.float32)
        rc = lib.rlt_agent_act(self._handle, x.ctypes.data, n, 1 if explore else 0, out.ctypes.data)
        if rc != 0:
            self._raise(rc)
        if x.shape == self._obs_shape:
            return int(out[0]) if self._discrete else out[0].reshape(self.act_space.shape)
        return out if self._discrete else out.reshape((n,) + self.act_space.shape)

    def observe(self, obs, action, reward, next_obs, terminated, truncated=None) -> None:
        """Stores one transition or a batch of them (first axis).

        ``next_obs`` must be the real observation after the action, also when the episode was
        truncated (a time limit): only ``terminated`` stops bootstrapping. ``truncated`` may be None.
        For DQN, a batch must be consecutive steps of one environment (its replay stores each
        observation once).
        """
        o = as_real_array(self._flat(obs), self._obs_dtype, "obs")
        o2 = as_real_array(self._flat(next_obs), self._obs_dtype, "next_obs")
        n = self._rows(o, "obs")
        if o2.shape != o.shape:
            raise ValueError(f"next_obs has shape {o2.shape} but obs has {o.shape}")
        a = as_real_array(action, np.int32 if self._discrete else np.float32, "action")
        if a.size != n * self._act_dim:
            raise ValueError(f"action has {a.size} values for {n} transitions of {self._act_dim}")
        r = as_real_array(reward, np.float32, "reward")
        term = np.ascontiguousarray(terminated, dtype=np.uint8)
        trunc = None if truncated is None else np.ascontiguousarray(truncated, dtype=np.uint8)
        for name, v in (("reward", r), ("terminated", term), ("truncated", trunc)):
            if v is not None and v.size != n:
                raise ValueError(f"{name} has {v.size} values for {n} transitions")
        rc = lib.rlt_agent_observe(self._handle, o.ctypes.data, a.ctypes.data, r.ctypes.data, o2.ctypes.data,
                                   term.ctypes.data, None if trunc is None else trunc.ctypes.data, n)
        if rc != 0:
            self._raise(rc)

    def update(self) -> int:
        """Runs the updates due at this point of the schedule; returns how many ran (0 before learning starts)."""
        rc = lib.rlt_agent_update(self._handle, ctypes.byref(self._updates))
        if rc != 0:
            self._raise(rc)
        return self._updates.value

    # -- state -----------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Writes parameters, targets, Adam moments and counters (atomically: temp file, fsync, rename)."""
        rc = lib.rlt_agent_save(self._handle, _native.c_path(path, "checkpoint path"))
        if rc != 0:
            self._raise(rc)

    def load(self, path: str | os.PathLike) -> None:
        """Loads a checkpoint of the same sizes; raises CheckpointError (changing nothing) otherwise."""
        rc = lib.rlt_agent_load(self._handle, _native.c_path(path, "checkpoint path"))
        if rc != 0:
            self._raise(rc)

    def memory_plan(self) -> tuple[dict, list[dict]]:
        """The memory plan: a summary dict (host_bytes, device_bytes, budget_bytes, fits, device, ...) and
        one dict per entry (name, region, location, bytes, offset)."""
        return _plan_from(lib.rlt_agent_memory_plan, self._handle)

    def plan_table(self) -> str:
        """The memory plan as the table rltrain prints at startup."""
        return _native.read_sized(lib.rlt_agent_plan_format, self._handle)

    @property
    def allocations_after_init(self) -> int:
        """Allocations through the engine's allocator since this agent's arena was sealed (expected 0)."""
        return int(lib.rlt_agent_allocations_after_init(self._handle))

    @property
    def errmsg(self) -> str:
        """The message of the last failed call on this agent."""
        return _native.text(lib.rlt_agent_errmsg(self._handle))

    # -- lifetime --------------------------------------------------------------------------------------
    def _raise(self, rc: int):
        raise error_for(rc, self.errmsg)



@dataclass
class Progress:
    """Figures of a :class:`Trainer` run (``rlt_progress``); eval returns are NaN before the first evaluation."""

    env_steps: int
    total_steps: int
    episodes: int
    updates: int
    last_episode_return: float
    last_eval_return: float
    best_eval_return: float
    updates_per_s: float
    env_steps_per_s: float
    elapsed_s: float
    eta_s: float
    is_eval: bool
    # GPU runs: the device's free memory and other processes' on it (NaN on the CPU); measurements, left out of ==.
    device_free_mib: float = field(default=math.nan, compare=False)
    cotenants_mib: float = field(default=math.nan, compare=False)

    @classmethod
    def from_c(cls, p: _native.rlt_progress) -> "Progress":
        values = {f.name: getattr(p, f.name) for f in fields(cls)}
        values["is_eval"] = bool(values["is_eval"])
        return cls(**values)

    def line(self) -> str:
        """The progress line the native ``rltrain`` CLI prints for these figures (tools/rltrain.c), so that
        ``python -m rltrain.gym`` prints the same; a test compares the two."""

        def duration(s: float) -> str:
            if math.isnan(s) or s < 0:
                return "?"
            return f"{s:.1f}s" if s < 120 else f"{int(s / 60)}m{int(math.fmod(s, 60)):02d}s"

        if math.isnan(self.last_eval_return):
            ev = "-"
        else:
            ev = f"{self.last_eval_return:.1f} (best {self.best_eval_return:.1f})"
        last = 0.0 if math.isnan(self.last_episode_return) else self.last_episode_return
        gpu = "" if math.isnan(self.device_free_mib) else \
            f" | GPU free {self.device_free_mib:.0f} MiB, others {self.cotenants_mib:.0f} MiB"
        return (f"{'[eval]' if self.is_eval else '      '} step {self.env_steps}/{self.total_steps} | "
                f"episodes {self.episodes} | last return {last:.1f} | eval {ev} | {self.updates_per_s:.0f} updates/s | "
                f"{self.env_steps_per_s:.0f} steps/s | {duration(self.elapsed_s)} | ETA {duration(self.eta_s)}{gpu}")


class Trainer(_Owned):
    _free = "rlt_trainer_free"  # frees the handle and everything it owns
    """A built-in environment, an agent and the training loop with its outputs (``rlt_trainer``).

    The environment is ``env.name`` of the config (pendulum, cartpole, minatar-breakout); outputs go to
    ``out_dir`` (config.yaml, metrics.csv, summary.json, final.ckpt). For Gymnasium environments use
    :func:`rltrain.gym.train` instead (it runs this trainer with the environment given as callbacks).
    """

    def __init__(self, config: "Config | str | os.PathLike", *, _env: "_native.rlt_env_callbacks | None" = None):
        # _env: callbacks for rlt_trainer_init_env (the Gymnasium adapter's); they must outlive the trainer.
        self.config = _as_config(config)
        self._stop_requested = False
        h = ctypes.c_void_p()
        if _env is None:
            rc = lib.rlt_trainer_init(self.config._handle, ctypes.byref(h))
        else:
            rc = lib.rlt_trainer_init_env(self.config._handle, ctypes.byref(_env), ctypes.byref(h))
        self._h = h
        if rc != 0:
            msg = _native.text(lib.rlt_trainer_errmsg(h)) if h else ""
            nofit = h and _native.status_name(rc) == "RLT_ENOFIT"
            plan = _native.read_sized(lib.rlt_trainer_plan_format, h) if nofit else ""
            self.close()
            raise error_for(rc, msg, plan=plan)

    def run(self, progress: Callable[[Progress], Any] | None = None) -> Progress:
        """Trains for ``train.total_steps`` steps and writes the outputs; returns the final progress.

        ``progress`` is called with a :class:`Progress` every ``train.progress_every_s`` seconds and after
        each evaluation; returning a true value stops the run early (its outputs are still written, and
        no exception is raised). An exception raised by ``progress`` stops the run and is raised again here.

        SIGINT (Ctrl-C) and SIGTERM during the run stop it after the current step, as in the native CLI: the
        outputs and final.ckpt are written, summary.json says ``stopped``, and then the signal goes to the
        handler that was in place (KeyboardInterrupt for Ctrl-C by default); :meth:`resume` continues the run.
        """
        _run_reporting(lib.rlt_trainer_run, self, _native.PROGRESS_FN, Progress.from_c, progress)
        return self.progress()

    def resume(self, path: str | os.PathLike) -> None:
        """Loads a checkpoint of this config's run (``out_dir/final.ckpt`` or a periodic ``ckpt_<step>.ckpt``)
        before :meth:`run`, which then continues from its step (``rlt_trainer_resume``; on the CPU bit for bit
        the run that was never stopped). A checkpoint in ``out_dir`` continues its metrics.csv there."""
        rc = lib.rlt_trainer_resume(self._handle, _native.c_path(path, "checkpoint path"))
        if rc != 0:
            raise error_for(rc, self.errmsg)

    def request_stop(self) -> None:
        """Asks a running :meth:`run` (of this thread, e.g. from an environment callback) to stop after the
        current step; it then writes its outputs and returns without raising."""
        self._stop_requested = True
        lib.rlt_trainer_request_stop(self._handle)

    def save_agent(self, path: str | os.PathLike) -> None:
        """Writes the agent's checkpoint (as :meth:`Agent.save`; final.ckpt in ``out_dir`` is the trainer's)."""
        agent = lib.rlt_trainer_agent(self._handle)
        rc = lib.rlt_agent_save(agent, _native.c_path(path, "checkpoint path"))
        if rc != 0:
            raise error_for(rc, _native.text(lib.rlt_agent_errmsg(agent)))

    @property
    def allocations_after_init(self) -> int:
        """Allocations through the engine's allocator since the agent's arena was sealed (expected 0)."""
        return int(lib.rlt_agent_allocations_after_init(lib.rlt_trainer_agent(self._handle)))

    def progress(self) -> Progress:
        """The latest progress figures (final after :meth:`run`)."""
        p = _native.rlt_progress()
        rc = lib.rlt_trainer_progress(self._handle, ctypes.byref(p))
        if rc != 0:
            raise error_for(rc, self.errmsg)
        return Progress.from_c(p)

    def memory_plan(self) -> tuple[dict, list[dict]]:
        """The memory plan (see :meth:`Agent.memory_plan`)."""
        return _plan_from(lib.rlt_trainer_memory_plan, self._handle)

    def plan_table(self) -> str:
        """The memory plan as the table rltrain prints at startup."""
        return _native.read_sized(lib.rlt_trainer_plan_format, self._handle)

    @property
    def out_dir(self) -> str:
        """Where :meth:`run` writes its outputs."""
        return _native.text(lib.rlt_trainer_out_dir(self._handle))

    @property
    def errmsg(self) -> str:
        """The message of the last failed call on this trainer."""
        return _native.text(lib.rlt_trainer_errmsg(self._handle))




@dataclass
class GroupProgress:
    """Figures of a :class:`Group` run (``rlt_group_report``): steps and updates summed over the members, and
    the mean, min and max of their latest evaluation returns (NaN before the first; ``n_evaluated`` members)."""

    env_steps: int
    total_steps: int
    updates: int
    n_members: int
    n_evaluated: int
    eval_mean: float
    eval_min: float
    eval_max: float
    updates_per_s: float
    env_steps_per_s: float
    elapsed_s: float
    eta_s: float
    is_eval: bool
    # GPU groups: the least free memory of the members' GPUs, the most others hold on one (NaN on the CPU).
    device_free_mib: float = field(default=math.nan, compare=False)
    cotenants_mib: float = field(default=math.nan, compare=False)

    @classmethod
    def from_c(cls, r: _native.rlt_group_report) -> "GroupProgress":
        values = {f.name: getattr(r, f.name) for f in fields(cls)}
        values["is_eval"] = bool(values["is_eval"])
        return cls(**values)

    def line(self) -> str:
        """The progress line the native ``rltrain`` CLI prints for a seed group (tools/rltrain.c)."""

        def duration(s: float) -> str:
            if math.isnan(s) or s < 0:
                return "?"
            return f"{s:.1f}s" if s < 120 else f"{int(s / 60)}m{int(math.fmod(s, 60)):02d}s"

        if self.n_evaluated == 0:
            ev = "-"
        else:
            ev = (f"mean {self.eval_mean:.1f} min {self.eval_min:.1f} max {self.eval_max:.1f} "
                  f"({self.n_evaluated} of {self.n_members})")
        gpu = "" if math.isnan(self.device_free_mib) else \
            f" | GPU free {self.device_free_mib:.0f} MiB, others {self.cotenants_mib:.0f} MiB"
        return (f"{'[eval]' if self.is_eval else '      '} step {self.env_steps}/{self.total_steps} "
                f"({self.n_members} seeds) | eval {ev} | {self.updates_per_s:.0f} updates/s | "
                f"{self.env_steps_per_s:.0f} steps/s | {duration(self.elapsed_s)} | ETA {duration(self.eta_s)}{gpu}")


class Group(_Owned):
    _free = "rlt_group_free"  # frees the handle and everything it owns
    """Several independent runs of one config in one process (``rlt_group``, a seed group).

    The config names the members with ``train.seeds`` (a list), ``train.num_seeds`` (seeds ``seed`` ..
    ``seed + N - 1``) or a ``population:`` section (members with their own hyperparameters,
    docs/populations.md). Member k is the run a :class:`Trainer` of the config with its seed would make, into
    ``out_dir/seed_<seed>/``; each has its own thread inside the library, so the members train at the same
    time (ctypes releases the GIL for the whole run). :meth:`run` also writes ``out_dir/summary.csv``. Every
    member's memory is reserved here; a group that does not fit raises :class:`rltrain.NoFitError` naming the
    largest number of seeds that fits. For Gymnasium environments use :func:`rltrain.gym.train` with ``seeds``.
    """

    def __init__(self, config: "Config | str | os.PathLike", *,
                 _envs: "list[_native.rlt_env_callbacks] | None" = None):
        # _envs: one rlt_env_callbacks per member (the Gymnasium adapter's); they must outlive the group.
        self.config = _as_config(config)
        self._stop_requested = False
        self._members_stopped: set[int] = set()
        h = ctypes.c_void_p()
        if _envs is None:
            rc = lib.rlt_group_init(self.config._handle, ctypes.byref(h))
        else:
            ptr = ctypes.POINTER(_native.rlt_env_callbacks)
            self._env_ptrs = (ptr * len(_envs))(*[ctypes.pointer(e) for e in _envs])
            rc = lib.rlt_group_init_env(self.config._handle, self._env_ptrs, len(_envs), ctypes.byref(h))
        self._h = h
        if rc != 0:
            msg = _native.text(lib.rlt_group_errmsg(h)) if h else ""
            nofit = h and _native.status_name(rc) == "RLT_ENOFIT"
            plan = _native.read_sized(lib.rlt_group_plan_format, h) if nofit else ""
            self.close()
            raise error_for(rc, msg, plan=plan)

    @property
    def seeds(self) -> list[int]:
        """The members' seeds, in order."""
        return [int(lib.rlt_group_seed(self._handle, k)) for k in range(lib.rlt_group_size(self._handle))]

    def resume(self, name: str = "final.ckpt") -> None:
        """Resumes every member from ``out_dir/seed_<seed>/<name>`` (a file name; a directory part is ignored)."""
        rc = lib.rlt_group_resume(self._handle, _native.c_string(os.fspath(name), "checkpoint name"))
        if rc != 0:
            raise error_for(rc, self.errmsg)

    def run(self, progress: Callable[[GroupProgress], Any] | None = None) -> GroupProgress:
        """Trains every member for ``train.total_steps`` steps at once and writes their outputs and
        ``out_dir/summary.csv``; returns the final :class:`GroupProgress`.

        ``progress`` is called (in this thread) every ``train.progress_every_s`` seconds and each time every
        member has made one more evaluation; returning a true value stops every member (their outputs are
        still written, and no exception is raised). A member that fails stops the others, and the error,
        raised here, names its seed. SIGINT and SIGTERM stop every member after its current step, then reach
        the handler that was in place, as for :meth:`Trainer.run`.
        """
        _run_reporting(lib.rlt_group_run, self, _native.GROUP_PROGRESS_FN, GroupProgress.from_c, progress)
        return self.progress()

    def request_stop(self) -> None:
        """Asks a running :meth:`run` to stop every member after its current step (callable from any thread)."""
        self._stop_requested = True
        lib.rlt_group_request_stop(self._handle)

    def stop_member(self, k: int) -> None:
        """Asks member k alone to stop after its current step (callable from the progress callback or any thread):
        it writes its outputs and final.ckpt with status ``stopped`` while the others go on; :meth:`run` then
        returns normally unless a member failed. A sweep prunes a trial this way."""
        member = self._member(k)
        self._members_stopped.add(k)
        lib.rlt_trainer_request_stop(member)

    def member_dir(self, k: int) -> str:
        """Member k's directory name under :attr:`out_dir`: ``seed_<seed>``, or for a population ``member_<k>`` or
        its ``population.name``."""
        self._member(k)
        return _native.text(lib.rlt_group_member_dir(self._handle, k))

    def progress(self) -> GroupProgress:
        """The group's figures now (final after :meth:`run`)."""
        r = _native.rlt_group_report()
        rc = lib.rlt_group_progress(self._handle, ctypes.byref(r))
        if rc != 0:
            raise error_for(rc, self.errmsg)
        return GroupProgress.from_c(r)

    def member_progress(self, k: int) -> Progress:
        """Member k's own figures (a :class:`Progress`)."""
        p = _native.rlt_progress()
        member = self._member(k)
        lib.rlt_trainer_progress(member, ctypes.byref(p))
        return Progress.from_c(p)

    def member_out_dir(self, k: int) -> str:
        """Member k's run directory, ``out_dir/seed_<seed>``."""
        return _native.text(lib.rlt_trainer_out_dir(self._member(k)))

    def member_allocations_after_init(self, k: int) -> int:
        """Allocations through the engine's allocator since the group was sealed, as member k counts them (0)."""
        return int(lib.rlt_agent_allocations_after_init(lib.rlt_trainer_agent(self._member(k))))

    def plan_table(self) -> str:
        """One member's memory plan table and the group's per-seed and total bytes."""
        return _native.read_sized(lib.rlt_group_plan_format, self._handle)

    @property
    def out_dir(self) -> str:
        """The group's directory: ``seed_<seed>/`` for each member and ``summary.csv``."""
        return _native.text(lib.rlt_group_out_dir(self._handle))

    @property
    def errmsg(self) -> str:
        """The message of the last failed call on this group."""
        return _native.text(lib.rlt_group_errmsg(self._handle))

    def _member(self, k: int) -> ctypes.c_void_p:
        n = lib.rlt_group_size(self._handle)
        if not 0 <= k < n:
            raise IndexError(f"member {k} of a group of {n}")
        return lib.rlt_group_member(self._handle, k)



def _run_reporting(run, owner, fn_type, convert, progress) -> None:
    """Runs ``run(owner._handle, callback, None)`` (a trainer's or a group's run), calling ``progress`` with each
    report converted by ``convert``. A true value from ``progress`` stops the run quietly; an exception in it
    stops the run and is raised again here; any other failure raises the run's error."""
    raised: list[BaseException] = []
    stopped = []

    def on_progress(user, report):
        try:
            if progress is not None and progress(convert(report.contents)):
                stopped.append(True)
                return 1
            return 0
        except BaseException as exc:  # noqa: BLE001 - carried across the C frames and raised below
            raised.append(exc)
            return 1

    callback = fn_type(on_progress)  # alive for the whole call
    # Ctrl-C and SIGTERM ask the run to stop after its current step instead of raising inside a callback
    # (rltrain/_signals.py); the signal reaches its own handler once the outputs are written.
    with stop_on_signals(owner.request_stop):
        rc = run(owner._handle, callback, None)
    if raised:
        raise raised[0]
    asked = stopped or owner._stop_requested or bool(getattr(owner, "_members_stopped", None))
    if rc != 0 and not (asked and _native.status_name(rc) == "RLT_EINTERRUPTED"):
        raise error_for(rc, owner.errmsg)
