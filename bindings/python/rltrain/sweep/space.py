"""The search space of a sweep: a YAML file of config keys and what each may take, checked against the config
schema before any trial starts.

.. code-block:: yaml

    td3.actor_lr: {log_uniform: [1e-4, 3e-3]}   # a float, uniform in log space
    td3.tau: [0.002, 0.005, 0.01]               # one of these (categorical)
    td3.gamma: {uniform: [0.95, 0.995]}         # a float, uniform
    td3.policy_delay: {int: [1, 4]}             # an integer in [1, 4]

A key is either one a population may vary (docs/populations.md: the trials of a batch with the same shapes run as
one population) or one of SHAPE_KEYS, which change the memory plan's shapes: trials that differ in them run as
separate populations, one per shape, side by side in the same process. Lists of lists are choices of a list key:
``td3.actor_hidden: [[64, 64], [256, 256]]``.

The check is the engine's own: a population key and its bounds or choices are read by the config parser as a
population entry, a shape key's values are set on the base config, so an unknown key, a key that cannot vary, or a
value out of the key's range is refused with the space file's FILE:LINE:COL, as configs are.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..core import Config
from ..errors import ConfigError

KINDS = ("log_uniform", "uniform", "int", "log_int")
# Keys that change the plan's shapes but may differ between trials: each shape runs as a population of its own.
SHAPE_KEYS = ("train.batch_size", "train.grad_accum_steps", "replay.capacity", "td3.actor_hidden",
              "td3.critic_hidden", "network.hidden")


class SpaceError(ConfigError):
    """A search space that cannot be swept; the message starts with FILE:LINE:COL."""

    def __init__(self, message: str):
        super().__init__(message, -2, "RLT_ECONFIG")


@dataclass
class Param:
    """One key of the space: ``kind`` is one of KINDS or ``choice``; ``low``/``high`` for ranges, ``choices``
    (Python values) and their texts for a categorical."""

    key: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: list = field(default_factory=list)
    texts: list = field(default_factory=list)
    line: int = 0
    col: int = 0
    shape: bool = False  # one of SHAPE_KEYS: trials that differ in it run as separate populations

    def distribution(self):
        """The Optuna distribution of this parameter."""
        import optuna

        if self.kind == "choice":
            return optuna.distributions.CategoricalDistribution(self.choices)
        if self.kind in ("int", "log_int"):
            return optuna.distributions.IntDistribution(int(self.low), int(self.high), log=self.kind == "log_int")
        return optuna.distributions.FloatDistribution(self.low, self.high, log=self.kind == "log_uniform")


def format_value(v: Any) -> str:
    """A sampled value as the config parser reads it back exactly (repr of a float is the shortest round trip)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _scalar(text: str) -> Any:
    """A categorical choice's Python value: an int, a float, a bool, else the text (an enum name)."""
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _where(path: str, node) -> str:
    return f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _flow(node) -> str:
    """A node's value as YAML flow text: a scalar's text, or [a, b] for a list of scalars."""
    if isinstance(node, yaml.SequenceNode):
        return "[" + ", ".join(_flow(n) for n in node.value) + "]"
    return node.value


def _shape_check(config: Config, path: str, key_node, value_nodes, texts) -> None:
    """Sets KEY=text on a copy of the config for each value, with the engine's checks; an error is moved to the
    value's line and column."""
    for node, text in zip(value_nodes, texts):
        probe = config.copy()
        try:
            probe.set(f"{key_node.value}={text}")
            probe.validate()
        except ConfigError as exc:
            rest = re.sub(r"^--set [^:]*:\d+:\d+: ", "", str(exc))
            raise SpaceError(f"{_where(path, node)}: {rest}") from None
        finally:
            probe.close()


def _engine_check(config: Config, path: str, key_node, value_nodes, texts) -> None:
    """Reads ``population: {KEY: [texts]}`` with the engine's parser; its error is moved to the space file's
    line and column (the key's, or the value's that it names). A key of SHAPE_KEYS is checked by _shape_check."""
    if key_node.value in SHAPE_KEYS:
        _shape_check(config, path, key_node, value_nodes, texts)
        return
    line = f"  {key_node.value}: ["
    cols = []
    for i, t in enumerate(texts):
        if i:
            line += ", "
        cols.append(len(line) + 1)
        line += t
    line += "]"
    probe = config.copy()
    try:
        probe.load_string("population:\n" + line + "\n", "<space>")
        probe.validate()
    except ConfigError as exc:
        msg = str(exc)
        m = re.match(r"^<space>:(\d+):(\d+): (.*)$", msg, re.S)
        if not m:
            raise SpaceError(f"{_where(path, key_node)}: key '{key_node.value}': {msg}") from None
        col = int(m.group(2))
        node = key_node
        for i, c in enumerate(cols):
            if col >= c:
                node = value_nodes[i] if i < len(value_nodes) else key_node
        rest = m.group(3).replace("key 'population.", "key '")
        raise SpaceError(f"{_where(path, node)}: {rest}") from None
    finally:
        probe.close()


def load_space(path: str | os.PathLike, config: Config) -> list[Param]:
    """Reads and checks the space at ``path`` against ``config`` (the sweep's base config): every key must be one a
    population may vary and every bound or choice a value the key accepts. Raises :class:`SpaceError`."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise SpaceError(f"{where}: YAML syntax error: {getattr(exc, 'problem', exc)}") from None
    if root is None or not isinstance(root, yaml.MappingNode) or not root.value:
        raise SpaceError(f"{path}:1:1: a search space is a mapping of config keys to ranges or lists, like "
                         "'td3.actor_lr: {log_uniform: [1e-4, 3e-3]}'")
    params: list[Param] = []
    seen: dict[str, int] = {}
    for key_node, value_node in root.value:
        key = key_node.value
        if not isinstance(key_node, yaml.ScalarNode):
            raise SpaceError(f"{_where(path, key_node)}: a key must be a dotted config key like td3.actor_lr")
        if key in seen:
            raise SpaceError(f"{_where(path, key_node)}: key '{key}': duplicate key (first given on line {seen[key]})")
        seen[key] = key_node.start_mark.line + 1
        p = Param(key=key, kind="choice", line=key_node.start_mark.line + 1, col=key_node.start_mark.column + 1,
                  shape=key in SHAPE_KEYS)
        if isinstance(value_node, yaml.SequenceNode):
            items = value_node.value
            flat = all(isinstance(n, yaml.ScalarNode) for n in items)
            lists = all(isinstance(n, yaml.SequenceNode) and all(isinstance(m, yaml.ScalarNode) for m in n.value)
                        for n in items)
            if not items or not (flat or (lists and p.shape)):
                raise SpaceError(f"{_where(path, value_node)}: key '{key}': a list of choices needs one or more plain "
                                 "values, like [0.002, 0.005, 0.01] (or lists, like [[64, 64], [256, 256]], for a "
                                 "list key such as td3.actor_hidden)")
            p.texts = [_flow(n) for n in items]
            # A list value is kept as its text (Optuna's choices are scalars) and set as it is written.
            p.choices = [t if lists else _scalar(t) for t in p.texts]
            if len(set(map(repr, p.choices))) != len(p.choices):
                raise SpaceError(f"{_where(path, value_node)}: key '{key}': a choice is listed twice")
            _engine_check(config, path, key_node, items, p.texts)
        elif isinstance(value_node, yaml.MappingNode) and len(value_node.value) == 1:
            kind_node, bounds = value_node.value[0]
            kind = kind_node.value
            if kind not in KINDS:
                raise SpaceError(f"{_where(path, kind_node)}: key '{key}': '{kind}' is not a kind of range; use one of "
                                 f"{', '.join(KINDS)}, or a list of choices")
            if (not isinstance(bounds, yaml.SequenceNode) or len(bounds.value) != 2
                    or not all(isinstance(n, yaml.ScalarNode) for n in bounds.value)):
                raise SpaceError(f"{_where(path, bounds)}: key '{key}': {kind} takes [low, high]")
            texts = [n.value for n in bounds.value]
            try:
                lo, hi = (int(t) for t in texts) if kind in ("int", "log_int") else (float(t) for t in texts)
            except ValueError:
                what = "whole numbers" if kind in ("int", "log_int") else "numbers"
                raise SpaceError(f"{_where(path, bounds)}: key '{key}': {kind} bounds must be {what}, got "
                                 f"[{', '.join(texts)}]") from None
            if not (lo < hi) or not all(map(math.isfinite, (lo, hi))):
                raise SpaceError(f"{_where(path, bounds)}: key '{key}': low {texts[0]} must be below high {texts[1]}")
            if kind in ("log_uniform", "log_int") and lo <= 0:
                raise SpaceError(f"{_where(path, bounds)}: key '{key}': {kind} needs low above 0")
            p.kind, p.low, p.high = kind, lo, hi
            _engine_check(config, path, key_node, bounds.value, texts)
            if kind in ("uniform", "log_uniform"):
                # A float range on an integer key would sample values the key refuses: say so now.
                mid = format_value(lo + (hi - lo) / 3.0)
                try:
                    _engine_check(config, path, key_node, [bounds], [mid])
                except SpaceError as exc:
                    raise SpaceError(f"{_where(path, kind_node)}: key '{key}': {kind} samples fractions, which this "
                                     f"key does not take ({exc}); use int: [low, high]") from None
        else:
            raise SpaceError(f"{_where(path, value_node)}: key '{key}': expected a list of choices or one range like "
                             "{log_uniform: [1e-4, 3e-3]}, {uniform: [0.9, 0.99]} or {int: [1, 4]}")
        params.append(p)
    return params
