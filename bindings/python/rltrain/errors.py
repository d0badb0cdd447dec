"""Exceptions raised by the rltrain bindings.

Every failing call of the C library becomes an :class:`RltError` (or a subclass chosen by the status
code) whose text is the engine's own message: the failing statement's context, file:line:column for
configuration errors, and an actionable hint.
"""

from __future__ import annotations


class RltError(Exception):
    """A call into librltrain failed.

    Attributes:
        status: the negative status code (``rlt_status`` in rltrain.h).
        status_name: its C name, such as ``"RLT_ENOFIT"``.
        message: the engine's message for the failure (also ``str(exc)``).
    """

    def __init__(self, message: str, status: int, status_name: str = ""):
        super().__init__(message)
        self.message = message
        self.status = status
        self.status_name = status_name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status_name or self.status}: {self.message!r})"


class ConfigError(RltError):
    """The configuration is invalid (``RLT_ECONFIG``); the message has file:line:column and the key."""


class NoFitError(RltError):
    """The memory plan does not fit the budget or the device (``RLT_ENOFIT``).

    The message names the largest regions and what to change. ``plan`` holds the formatted plan table
    when the engine could produce one ("" otherwise).
    """

    def __init__(self, message: str, status: int, status_name: str = "", plan: str = ""):
        super().__init__(message, status, status_name)
        self.plan = plan


class DeviceError(RltError):
    """The requested device is not usable (``RLT_EDEVICE``): no CUDA module, driver or such GPU."""


class CheckpointError(RltError):
    """A checkpoint is invalid, damaged, or made with another network or other sizes (``RLT_ECHECKPOINT``)."""


class BusyError(RltError):
    """The out_dir belongs to another live run (``RLT_EBUSY``); the message names its pid."""


# Subclasses by the C name of the status (names, not numbers, so the table of rltrain.h stays the one
# source of the codes).
_BY_NAME = {
    "RLT_ECONFIG": ConfigError,
    "RLT_ENOFIT": NoFitError,
    "RLT_EDEVICE": DeviceError,
    "RLT_ECHECKPOINT": CheckpointError,
    "RLT_EBUSY": BusyError,
}


def error_for(status: int, message: str, **extra) -> RltError:
    """The exception for a failed call: the subclass for the status, carrying the engine's message."""
    from . import _native

    name = _native.status_name(status)
    cls = _BY_NAME.get(name, RltError)
    if not message:
        message = _native.strerror(status)
    if cls is NoFitError:
        return NoFitError(message, status, name, extra.get("plan", ""))
    return cls(message, status, name)
