"""SIGINT, SIGTERM and SIGHUP during a native run: stop after the current step, as the native CLI does (SIGHUP: a
closed terminal or ssh session, which the CLI treats as SIGTERM).

Python's own SIGINT handler raises KeyboardInterrupt wherever the main thread is running Python code. During
a native run that is inside a ctypes callback (an environment's step, a progress report), where the exception
cannot cross the C frames: ctypes prints "Exception ignored on calling ctypes callback function" and goes on,
or the callback returns an error and the run fails with "step returned -1". And while the main thread waits
in C (a run without callbacks, a seed group whose members step in their own threads), the handler does not
run at all until the run returns.

:func:`stop_on_signals` replaces both handlers for the length of one run by one that only asks the library
to stop (``rlt_trainer_request_stop``, ``rlt_group_request_stop``: the run finishes its current step, writes
its outputs and final.ckpt, and returns). A wakeup file descriptor (``signal.set_wakeup_fd``), which Python's
C-level handler writes to at once, wakes a watcher thread that makes the same request, so the stop does not
wait for the main thread to run Python code. Once the run has returned, the handlers in place before are
restored and the signal is handed to the previous handler: Python's default SIGINT handler raises
KeyboardInterrupt there, after the outputs were written; SIGTERM's default ends the process, as it would have.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stop_on_signals(request_stop: Callable[[], None]) -> Iterator[list[int]]:
    """Within the block, SIGINT, SIGTERM and SIGHUP call ``request_stop()`` (async-signal-safe in the library) instead of
    their handlers; the list it yields gets each signal received. On leaving the block the previous handlers come
    back and the first signal received is delivered to its previous handler. Outside the main thread (where
    Python delivers no signals) it changes nothing."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_signal(signum, frame):  # noqa: ARG001 - Python's handler signature
        received.append(signum)
        request_stop()

    # A signal the process ignores (a background job's SIGINT, nohup) stays ignored.
    previous = {s: h for s in _SIGNALS if (h := signal.getsignal(s)) != signal.SIG_IGN}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # set_wakeup_fd requires it
    old_wakeup = -1
    watcher = None
    try:
        for s in previous:
            signal.signal(s, on_signal)
        old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

        def watch() -> None:
            # Python's C-level handler writes the signal number here as the signal arrives, while the main thread
            # may be in C for a long time: ask for the stop from this thread then.
            while True:
                try:
                    data = os.read(read_fd, 64)
                except OSError:
                    return
                if not data:  # the write end was closed: the run is over
                    return
                if any(b in previous for b in data):
                    request_stop()

        watcher = threading.Thread(target=watch, name="rltrain-signal-watcher", daemon=True)
        watcher.start()
        yield received
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        os.close(write_fd)
        if watcher is not None:
            watcher.join()
        os.close(read_fd)
    if received:
        deliver(received[0], previous[received[0]])


def deliver(signum: int, handler) -> None:
    """Hands a signal that arrived during the run to the handler that was in place before it."""
    if callable(handler):
        handler(signum, None)  # Python's default SIGINT handler raises KeyboardInterrupt here
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)  # the default action (SIGTERM: the process ends), now that the outputs exist
