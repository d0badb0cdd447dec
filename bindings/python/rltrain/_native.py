"""Loading ``librltrain`` and declaring its C API for ctypes.

This module mirrors ``include/rltrain.h``: the structs below must have exactly the layout of their C
counterparts (the test suite compiles a small C program and compares every size and offset), and every
function used by the bindings gets its argument and result types declared here, once.

The library is looked for, in order:

1. the path in the environment variable ``RLTRAIN_LIBRARY`` (only there, when it is set);
2. next to this package: ``pip install ./bindings/python`` builds ``librltrain.so`` (and the CUDA module
   ``librltrain_cuda.so``, which the library finds beside itself) and installs it into ``rltrain/``;
3. the ``build/`` directory of the source tree, when the package is imported from ``bindings/python``;
4. the system's loader (``ldconfig`` paths, ``LD_LIBRARY_PATH``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from pathlib import Path

# The API version these bindings are written against (RLT_VERSION_MAJOR/MINOR of rltrain.h). While the
# major version is 0, a new minor version may change struct layouts, so both must match.
API_VERSION = (0, 1)

_LIB_NAMES = ("librltrain.so", "librltrain.so.0", "librltrain.dylib")


def _candidates() -> list[Path]:
    """Library files to try after RLTRAIN_LIBRARY, in order (only those that exist)."""
    here = Path(__file__).resolve().parent
    paths = [here / name for name in _LIB_NAMES]
    repo = here.parent.parent.parent  # bindings/python/rltrain -> the repository root
    if (repo / "include" / "rltrain.h").is_file():
        paths += [repo / "build" / name for name in _LIB_NAMES]
    return [p for p in paths if p.is_file()]


def _load() -> ctypes.CDLL:
    """Finds and loads librltrain, or raises ImportError saying what was tried and what to do."""
    env = os.environ.get("RLTRAIN_LIBRARY")
    if env:
        try:
            return ctypes.CDLL(env)
        except OSError as exc:
            raise ImportError(
                f"rltrain: RLTRAIN_LIBRARY={env!r} could not be loaded: {exc}. Point it at a built "
                "librltrain.so (cmake -S . -B build && cmake --build build makes build/librltrain.so), "
                "or unset it to search the usual places."
            ) from exc
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(str(path))
        except OSError as exc:
            tried.append(f"{path} ({exc})")
    system = ctypes.util.find_library("rltrain")
    for name in ([system] if system else []) + ["librltrain.so.0", "librltrain.so"]:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            tried.append(f"{name} ({exc})")
    raise ImportError(
        "rltrain: could not find the native library librltrain. Tried: "
        + "; ".join(tried)
        + ". Fix: install the package from the source tree (pip install ./bindings/python builds the "
        "library into it), or set RLTRAIN_LIBRARY=/path/to/librltrain.so, or install the library "
        "(cmake --install build --prefix P) where the loader finds it (LD_LIBRARY_PATH=P/lib)."
    )


def _load_blas_limited() -> ctypes.CDLL:
    """_load(), with OPENBLAS_NUM_THREADS=1 while the library loads under an address-space or data limit.

    OpenBLAS starts its threads when it is loaded and each takes 128 MiB of address space, retrying forever
    when it cannot: under ``ulimit -v`` that hangs. The library sets OpenBLAS's thread count itself when it
    opens the CPU backend, after checking that the limit leaves room, so only the idle threads at load are
    saved. The variable is put back afterwards, so other libraries loaded later see the user's value.
    """
    try:
        import resource

        limited = any(
            resource.getrlimit(r)[0] != resource.RLIM_INFINITY for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA)
        )
    except (ImportError, OSError, ValueError, AttributeError):
        limited = False
    if not limited:
        return _load()
    before = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        return _load()
    finally:
        if before is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = before


lib = _load_blas_limited()
LIBRARY_PATH = getattr(lib, "_name", "")

# ---------------------------------------------------------------------------------------------------
# Structs: one-to-one with rltrain.h (field names and types in the same order).
# ---------------------------------------------------------------------------------------------------


class rlt_space(ctypes.Structure):
    """``rlt_space``: an observation or action space."""

    _fields_ = [
        ("kind", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int32 * 4),
        ("n", ctypes.c_int32),
        ("low", ctypes.POINTER(ctypes.c_float)),
        ("high", ctypes.POINTER(ctypes.c_float)),
    ]


class rlt_plan_entry(ctypes.Structure):
    """``rlt_plan_entry``: one named buffer of the memory plan."""

    _fields_ = [
        ("name", ctypes.c_char * 64),
        ("region", ctypes.c_char * 24),
        ("location", ctypes.c_int32),
        ("reserved_", ctypes.c_int32),
        ("bytes", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
    ]


class rlt_plan_summary(ctypes.Structure):
    """``rlt_plan_summary``: the totals of a memory plan."""

    _fields_ = [
        ("host_bytes", ctypes.c_uint64),
        ("device_bytes", ctypes.c_uint64),
        ("budget_bytes", ctypes.c_uint64),
        ("device_total", ctypes.c_uint64),
        ("device_free", ctypes.c_uint64),
        ("context_bytes", ctypes.c_uint64),
        ("n_entries", ctypes.c_int32),
        ("fits", ctypes.c_int32),
        ("device", ctypes.c_char * 64),
        ("precision", ctypes.c_char * 8),
        ("note", ctypes.c_char * 120),
        ("handle_bytes", ctypes.c_uint64),
        ("process_bytes", ctypes.c_uint64),
        ("process_budget_bytes", ctypes.c_uint64),
    ]


class rlt_fit_report(ctypes.Structure):
    """``rlt_fit_report``: what fits the budget (the answers of ``rltrain plan``)."""

    _fields_ = [
        ("need_bytes", ctypes.c_uint64),
        ("limit_bytes", ctypes.c_uint64),
        ("max_replay_capacity", ctypes.c_int64),
        ("fits", ctypes.c_int32),
        ("max_batch_size", ctypes.c_int32),
        ("min_grad_accum_steps", ctypes.c_int32),
        ("micro_batch", ctypes.c_int32),
        ("min_need_bytes", ctypes.c_uint64),
        ("min_replay_capacity", ctypes.c_int64),
        ("fit_budget_bytes", ctypes.c_uint64),
        ("min_fit_budget_bytes", ctypes.c_uint64),
    ]


class rlt_progress(ctypes.Structure):
    """``rlt_progress``: the figures of a training run."""

    _fields_ = [
        ("env_steps", ctypes.c_int64),
        ("total_steps", ctypes.c_int64),
        ("episodes", ctypes.c_int64),
        ("updates", ctypes.c_int64),
        ("last_episode_return", ctypes.c_double),
        ("last_eval_return", ctypes.c_double),
        ("best_eval_return", ctypes.c_double),
        ("updates_per_s", ctypes.c_double),
        ("env_steps_per_s", ctypes.c_double),
        ("elapsed_s", ctypes.c_double),
        ("eta_s", ctypes.c_double),
        ("is_eval", ctypes.c_int32),
        ("reserved_", ctypes.c_int32),
        ("device_free_mib", ctypes.c_double),
        ("cotenants_mib", ctypes.c_double),
    ]


class rlt_group_report(ctypes.Structure):
    """``rlt_group_report``: the figures of a seed group's run (sums over the members, their eval returns)."""

    _fields_ = [
        ("env_steps", ctypes.c_int64),
        ("total_steps", ctypes.c_int64),
        ("updates", ctypes.c_int64),
        ("n_members", ctypes.c_int32),
        ("n_evaluated", ctypes.c_int32),
        ("eval_mean", ctypes.c_double),
        ("eval_min", ctypes.c_double),
        ("eval_max", ctypes.c_double),
        ("updates_per_s", ctypes.c_double),
        ("env_steps_per_s", ctypes.c_double),
        ("elapsed_s", ctypes.c_double),
        ("eta_s", ctypes.c_double),
        ("is_eval", ctypes.c_int32),
        ("reserved_", ctypes.c_int32),
        ("device_free_mib", ctypes.c_double),
        ("cotenants_mib", ctypes.c_double),
    ]


# Enum values of rltrain.h.
SPACE_BOX, SPACE_DISCRETE, SPACE_DICT = 0, 1, 2
DTYPE_F32, DTYPE_U8, DTYPE_I32 = 0, 1, 2
LOC_HOST, LOC_DEVICE = 0, 1

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(rlt_progress))
GROUP_PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(rlt_group_report))
# rlt_env_callbacks' reset and step. Pointers arrive as plain addresses (c_void_p): the Gymnasium adapter
# reads and writes them through numpy views it keeps per address, which costs less per step than ctypes
# pointer objects.
ENV_RESET_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64, ctypes.c_void_p)
ENV_STEP_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
# reset_batch(user, n, mask, seeds, obs) and step_batch(user, n, actions, obs, rewards, terminated, truncated).
# save_state / load_state: (user, instance, state) -> 0 or nonzero.
ENV_STATE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)
ENV_RESET_BATCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p)
ENV_STEP_BATCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class rlt_env_callbacks(ctypes.Structure):
    """``rlt_env_callbacks``: an environment the trainer drives through callbacks (``rlt_trainer_init_env``)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved_", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("obs", rlt_space),
        ("act", rlt_space),
        ("max_episode_steps", ctypes.c_int32),
        ("state_bytes", ctypes.c_int32),
        ("user", ctypes.c_void_p),
        ("reset", ENV_RESET_FN),
        ("step", ENV_STEP_FN),
        ("save_state", ENV_STATE_FN),  # NULL: checkpoints are written but cannot be resumed
        ("load_state", ENV_STATE_FN),
        ("reset_batch", ENV_RESET_BATCH_FN),  # a vector environment's training instances (NULL: per instance)
        ("step_batch", ENV_STEP_BATCH_FN),
    ]

# ---------------------------------------------------------------------------------------------------
# Functions. Handles are opaque pointers (c_void_p); out-parameters are pointers to them.
# ---------------------------------------------------------------------------------------------------
_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_I = ctypes.c_int
_I32 = ctypes.c_int32
_S = ctypes.c_char_p
_SZ = ctypes.c_size_t


def _declare(name: str, restype, *argtypes) -> None:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


_declare("rlt_strerror", _S, _I)
_declare("rlt_status_name", _S, _I)
_declare("rlt_version_string", _S)
_declare("rlt_log_set_callback", None, LOG_FN, _P)

_declare("rlt_config_init", _I, _PP)
_declare("rlt_config_free", None, _P)
_declare("rlt_config_load_file", _I, _P, _S)
_declare("rlt_config_load_string", _I, _P, _S, _S)
_declare("rlt_config_set", _I, _P, _S)
_declare("rlt_config_validate", _I, _P)
_declare("rlt_config_dump", _SZ, _P, ctypes.c_char_p, _SZ)
_declare("rlt_config_errmsg", _S, _P)
_declare("rlt_config_dict_space", _I, _P, ctypes.POINTER(rlt_space))
_declare("rlt_config_input_part", _I, _P, _S, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(_I32),
         ctypes.POINTER(ctypes.c_int64))
_declare("rlt_config_input_high", _I, _P, _S, ctypes.POINTER(_I32))

_declare("rlt_plan_fit", _I, _P, ctypes.POINTER(rlt_fit_report), ctypes.c_char_p, _SZ, ctypes.c_char_p, _SZ)
_declare("rlt_plan_group", _I, _P, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p,
         _SZ)
_declare("rlt_plan_group_leads", _I32, _P)

_declare("rlt_agent_init", _I, _P, ctypes.POINTER(rlt_space), ctypes.POINTER(rlt_space), _PP)
_declare("rlt_agent_free", None, _P)
_declare("rlt_agent_act", _I, _P, _P, _I32, _I32, _P)
_declare("rlt_agent_observe", _I, _P, _P, _P, _P, _P, _P, _P, _I32)
_declare("rlt_agent_update", _I, _P, ctypes.POINTER(_I32))
_SUMMARY_P = ctypes.POINTER(rlt_plan_summary)
_ENTRIES_PP = ctypes.POINTER(ctypes.POINTER(rlt_plan_entry))
_declare("rlt_agent_memory_plan", _I, _P, _SUMMARY_P, _ENTRIES_PP)
_declare("rlt_agent_plan_format", _SZ, _P, ctypes.c_char_p, _SZ)
_declare("rlt_agent_save", _I, _P, _S)
_declare("rlt_agent_load", _I, _P, _S)
_declare("rlt_agent_allocations_after_init", ctypes.c_uint64, _P)
_declare("rlt_agent_errmsg", _S, _P)

_declare("rlt_trainer_init", _I, _P, _PP)
_declare("rlt_trainer_init_env", _I, _P, ctypes.POINTER(rlt_env_callbacks), _PP)
_declare("rlt_trainer_agent", _P, _P)
_declare("rlt_trainer_request_stop", None, _P)
_declare("rlt_trainer_free", None, _P)
_declare("rlt_trainer_memory_plan", _I, _P, _SUMMARY_P, _ENTRIES_PP)
_declare("rlt_trainer_plan_format", _SZ, _P, ctypes.c_char_p, _SZ)
_declare("rlt_trainer_run", _I, _P, PROGRESS_FN, _P)
_declare("rlt_trainer_resume", _I, _P, _S)
_declare("rlt_trainer_progress", _I, _P, ctypes.POINTER(rlt_progress))
_declare("rlt_trainer_out_dir", _S, _P)
_declare("rlt_trainer_errmsg", _S, _P)

_declare("rlt_group_count", _I32, _P)
_declare("rlt_group_init", _I, _P, _PP)
_declare("rlt_group_init_env", _I, _P, ctypes.POINTER(ctypes.POINTER(rlt_env_callbacks)), _I32, _PP)
_declare("rlt_group_free", None, _P)
_declare("rlt_group_plan_format", _SZ, _P, ctypes.c_char_p, _SZ)
_declare("rlt_group_resume", _I, _P, _S)
_declare("rlt_group_run", _I, _P, GROUP_PROGRESS_FN, _P)
_declare("rlt_group_request_stop", None, _P)
_declare("rlt_group_progress", _I, _P, ctypes.POINTER(rlt_group_report))
_declare("rlt_group_size", _I32, _P)
_declare("rlt_group_ranks", _I32, _P)
_declare("rlt_config_ranks", _I32, _P)
_declare("rlt_group_member", _P, _P, _I32)
_declare("rlt_group_seed", ctypes.c_uint64, _P, _I32)
_declare("rlt_group_out_dir", _S, _P)
_declare("rlt_group_member_dir", _S, _P, _I32)
_declare("rlt_group_population_keys", _I32, _P)
_declare("rlt_group_errmsg", _S, _P)


def c_string(value: str, what: str) -> bytes:
    """``value`` as the NUL-terminated UTF-8 string the library takes; ValueError if it holds a NUL byte,
    which ctypes would pass on and C would read as the end of the string (a silently shorter value)."""
    raw = value.encode()
    nul = raw.find(b"\0")
    if nul >= 0:
        raise ValueError(f"{what} contains a NUL byte at position {nul}: {value!r}")
    return raw


def c_path(path: "str | bytes | os.PathLike", what: str = "path") -> bytes:
    """A file system path for the library (os.fsencode); ValueError if it holds a NUL byte, which would cut
    it short on the way to C: a different file than the one named."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise ValueError(f"{what} contains a NUL byte: {path!r}")
    return raw


def text(raw: bytes | None) -> str:
    """Decodes a C string from the library (UTF-8; undecodable bytes are replaced, never raised)."""
    return raw.decode("utf-8", "replace") if raw else ""


def read_sized(fn, *args) -> str:
    """Calls a ``size_t fn(..., char *buf, size_t cap)`` formatter that returns the length it needs."""
    cap = 8192
    while True:
        buf = ctypes.create_string_buffer(cap)
        need = fn(*args, buf, cap)
        if need < cap:
            return text(buf.value)
        cap = need + 1


def status_name(status: int) -> str:
    """``RLT_ENOFIT`` for -3 (the C name of a status code)."""
    return text(lib.rlt_status_name(status))


def strerror(status: int) -> str:
    """``memory plan does not fit`` for -3."""
    return text(lib.rlt_strerror(status))


def version() -> str:
    """The library's version string."""
    return text(lib.rlt_version_string())


# ---------------------------------------------------------------------------------------------------
# Logging: the library's only output goes to Python's logging module, logger "rltrain".
# ---------------------------------------------------------------------------------------------------
logger = logging.getLogger("rltrain")
_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def _on_log(user, level, message) -> None:
    logger.log(_LEVELS.get(level, logging.INFO), "%s", text(message))


# The callback object must outlive every call into the library: a module global keeps it.
_log_callback = LOG_FN(_on_log)
lib.rlt_log_set_callback(_log_callback, None)


def _check_version() -> None:
    parts = version().split(".")
    try:
        found = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        found = None
    if found != API_VERSION:
        raise ImportError(
            f"rltrain: {LIBRARY_PATH} is version {version()!r}, but these bindings need "
            f"{API_VERSION[0]}.{API_VERSION[1]}.x (struct layouts may differ). Rebuild the library or "
            "install matching bindings."
        )


_check_version()
