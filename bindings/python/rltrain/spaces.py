"""Observation and action spaces, and their conversion to the C struct ``rlt_space``.

The agent API knows two kinds of spaces:

* ``Box``: float32 vectors (TD3 observations and actions, DQN observations) or uint8 images in
  (C, H, W) layout (DQN observations). Box actions have bounds; the engine returns actions inside them.
* ``Discrete``: ``n`` actions numbered 0..n-1 (DQN), exchanged as int32.
* ``Dict`` (observations): the parts the config's ``network.inputs`` names, exchanged as one row of bytes
  per observation, each part in its own dtype at the offset the engine gives (:meth:`Space.from_gym_dict`,
  :meth:`Space.flatten`).

:meth:`Space.from_gym` builds one from a Gymnasium space.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from . import _native

# The C struct holds sizes as int32: a larger one would wrap on the way there (2^32 + 4 arrives as 4).
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Space:
    """An observation or action space for :class:`rltrain.Agent`.

    Attributes:
        kind: ``"box"`` or ``"discrete"``.
        shape: the shape of one observation or action (``()`` for Discrete).
        dtype: numpy dtype exchanged with the engine: float32 or uint8 (Box), int32 (Discrete).
        n: the number of actions of a Discrete space (0 for Box).
        low, high: float32 bounds of a Box (one value per element), or None for [-1, 1].
        start: the first action of a Gymnasium Discrete space (the engine numbers from 0; the Gymnasium
            adapter adds this offset when it steps the environment).
    """

    kind: str
    shape: tuple
    dtype: np.dtype
    n: int = 0
    low: np.ndarray | None = field(default=None, compare=False)
    high: np.ndarray | None = field(default=None, compare=False)
    start: int = 0
    # Dict spaces: (name, byte offset, dtype, shape) of each part, in network.inputs order.
    parts: tuple = ()

    @classmethod
    def from_gym_dict(cls, space, config) -> "Space":
        """A dict observation space: Gymnasium ``Dict`` ``space`` matched by key to ``config``'s
        ``network.inputs`` (a :class:`rltrain.Config`). Every key must be an input and every input a key
        (refused by name otherwise), with the input's shape and a dtype that fits it: uint8 Boxes for
        ``u8`` inputs, float Boxes for ``f32`` ones."""
        handle = config._handle
        keys = list(space.spaces.keys())
        c = _native.rlt_space()
        if _native.lib.rlt_config_dict_space(handle, ctypes.byref(c)) != 0:
            raise ValueError(f"the observation space is a Dict ({', '.join(map(str, keys))}) but the config has no "
                             "network.inputs: declare one input per key")
        parts, names = [], set()
        for k in keys:
            off, dt, n = ctypes.c_int64(), ctypes.c_int32(), ctypes.c_int64()
            if _native.lib.rlt_config_input_part(handle, _native.c_string(str(k), "key"), ctypes.byref(off),
                                                  ctypes.byref(dt), ctypes.byref(n)) != 0:
                raise ValueError(f"the observation's key '{k}' is not one of network.inputs")
            sub = space.spaces[k]
            shape = tuple(sub.shape)
            if math.prod(shape) != n.value:
                raise ValueError(f"observation part '{k}' has shape {shape} ({math.prod(shape)} elements); "
                                 f"network.inputs declares {n.value} elements")
            want = np.dtype(np.uint8) if dt.value == _native.DTYPE_U8 else np.dtype(np.float32)
            got = np.dtype(sub.dtype)
            if (want == np.uint8) != (got == np.uint8) or not (got == np.uint8 or np.issubdtype(got, np.floating)):
                raise ValueError(f"observation part '{k}' is {got}; network.inputs declares it "
                                 f"{'u8' if want == np.uint8 else 'f32'}")
            if want == np.uint8:
                # The engine scales this part by 1 / its declared high: it must be the space's largest value,
                # or 0/1 planes would enter the network 255 times too small (or frames 255 times too large).
                declared = ctypes.c_int32()
                _native.lib.rlt_config_input_high(handle, _native.c_string(str(k), "key"), ctypes.byref(declared))
                box_high = int(np.max(np.asarray(getattr(sub, "high", 255))))
                if box_high != declared.value:
                    raise ValueError(f"observation part '{k}': its Box's largest value is {box_high} but network.inputs "
                                     f"scales it by 1/{declared.value}: write high: {box_high} for input '{k}'")
            parts.append((str(k), off.value, want, shape))
            names.add(str(k))
        if len(parts) != c.n:
            raise ValueError(f"the observation has {len(parts)} parts ({', '.join(sorted(names))}) but network.inputs "
                             f"declares {c.n}: a declared input is missing from the observation")
        parts.sort(key=lambda p: p[1])
        return cls("dict", (int(c.shape[0]),), np.dtype(np.uint8), len(parts), parts=tuple(parts))

    def flatten(self, obs) -> np.ndarray:
        """One dict observation (a mapping of the parts' names) as its row of bytes."""
        row = np.zeros(self.shape[0], np.uint8)
        missing = [name for name, *_ in self.parts if name not in obs]
        extra = [k for k in obs if k not in {p[0] for p in self.parts}]
        if missing or extra:
            raise ValueError(f"dict observation: missing keys {missing}, unknown keys {extra}")
        for name, off, dtype, shape in self.parts:
            v = np.ascontiguousarray(obs[name], dtype=dtype)
            if v.shape != shape:
                raise ValueError(f"dict observation part '{name}' has shape {v.shape}: expected {shape}")
            row[off:off + v.nbytes] = v.reshape(-1).view(np.uint8)
        return row

    @classmethod
    def box(cls, shape, dtype=np.float32, low=None, high=None) -> "Space":
        """A Box space: 1-D float32 (vectors) or 3-D uint8 (images, (C, H, W)).

        ``low`` and ``high`` (scalars or arrays of the shape) bound actions; omit them for [-1, 1].
        """
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.float32), np.dtype(np.uint8)):
            raise ValueError(f"Box spaces hold float32 or uint8 values, not {dtype}")
        if not 1 <= len(shape) <= 4 or min(shape) < 1:
            raise ValueError(f"Box shape {shape}: need 1 to 4 dimensions of size >= 1")
        # math.prod: exact Python integers (numpy's product would wrap at 2^63 as silently as int32 does).
        size = math.prod(shape)
        if max(shape) > _INT32_MAX or size > _INT32_MAX:
            raise ValueError(
                f"Box shape {shape}: {size} elements; each dimension and the whole must be at most 2^31 - 1 "
                "(the engine's sizes are int32)"
            )

        def bound(v):
            if v is None:
                return None
            return np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.float32), shape).reshape(size))

        return cls("box", shape, dtype, 0, bound(low), bound(high))

    @classmethod
    def discrete(cls, n: int, start: int = 0) -> "Space":
        """A Discrete space of ``n`` actions (the engine exchanges them as int32 0..n-1)."""
        if int(n) < 1:
            raise ValueError(f"Discrete space of {n} actions")
        if int(n) > _INT32_MAX:
            raise ValueError(f"Discrete space of {n} actions: at most 2^31 - 1 (the engine's sizes are int32)")
        return cls("discrete", (), np.dtype(np.int32), int(n), None, None, int(start))

    @classmethod
    def from_gym(cls, space, actions: bool = False) -> "Space":
        """Converts a Gymnasium space (``actions=True`` for an action space: Box bounds must be finite).

        Supported: ``Discrete(n, start)``; ``Box`` of floats with one dimension (float64 is exchanged as
        float32); ``Box`` of uint8 with three dimensions, which must already be (C, H, W) (transpose
        channels-last images first, e.g. with ``gymnasium.wrappers.TransformObservation``).
        """
        name = type(space).__name__
        if name == "Discrete" or (hasattr(space, "n") and not hasattr(space, "low")):
            return cls.discrete(int(space.n), int(getattr(space, "start", 0)))
        if name == "Box" or (hasattr(space, "low") and hasattr(space, "high")):
            dtype = np.dtype(space.dtype)
            shape = tuple(space.shape)
            if dtype == np.uint8 and len(shape) == 3:
                # The engine scales frames by 1 / the largest value a channel holds: 255 for camera frames,
                # 1 for 0/1 planes (MinAtar), so both reach the network in [0, 1].
                cls.box(shape, np.uint8)  # the checks
                hi = np.asarray(np.broadcast_to(space.high, shape), dtype=np.float32).reshape(shape[0], -1).max(axis=1)
                return cls("box", shape, np.dtype(np.uint8), 0, np.zeros(shape[0], np.float32), np.ascontiguousarray(hi))
            if np.issubdtype(dtype, np.floating) and len(shape) == 1:
                low = np.asarray(space.low, dtype=np.float64)
                high = np.asarray(space.high, dtype=np.float64)
                if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
                    return cls.box(shape, np.float32, low, high)
                if actions:
                    raise ValueError(f"action space {space} has infinite bounds: actions need finite low and high")
                return cls.box(shape, np.float32)  # observations need no bounds
            raise ValueError(
                f"unsupported Box space {space}: rltrain takes 1-D float Boxes and 3-D uint8 (C, H, W) Boxes"
            )
        raise ValueError(f"unsupported space {space!r}: rltrain takes Box and Discrete spaces")

    @property
    def size(self) -> int:
        """Elements of one observation or action (1 for Discrete)."""
        return math.prod(self.shape) if self.shape else 1

    def to_c(self) -> tuple[_native.rlt_space, tuple]:
        """The ``rlt_space`` struct, and the arrays its pointers refer to (keep them alive with it)."""
        s = _native.rlt_space()
        keep = ()
        # Spaces built without box()/discrete() are checked here too: ctypes would wrap an oversized int.
        if any(not 0 < int(v) <= _INT32_MAX for v in (*self.shape, self.n or 1)) or len(self.shape) > 4:
            raise ValueError(f"space {self.kind} {self.shape} (n={self.n}): sizes must be 1 to 2^31 - 1, at most 4 dimensions")
        if self.kind == "discrete":
            s.kind, s.dtype, s.ndim, s.n = _native.SPACE_DISCRETE, _native.DTYPE_I32, 1, self.n
            s.shape[0] = 1
            return s, keep
        if self.kind == "dict":
            s.kind, s.dtype, s.ndim, s.n = _native.SPACE_DICT, _native.DTYPE_U8, 1, self.n
            s.shape[0] = self.shape[0]
            return s, keep
        s.kind = _native.SPACE_BOX
        s.dtype = _native.DTYPE_U8 if self.dtype == np.uint8 else _native.DTYPE_F32
        s.ndim = len(self.shape)
        for i, d in enumerate(self.shape):
            s.shape[i] = d
        fp = ctypes.POINTER(ctypes.c_float)
        if self.low is not None and self.high is not None:
            s.low = self.low.ctypes.data_as(fp)
            s.high = self.high.ctypes.data_as(fp)
            keep = (self.low, self.high)
        return s, keep
