"""TensorBoard scalars of rltrain runs, when the ``tensorboard`` package is installed.

    rltrain.gym.train("Pendulum-v1", cfg, tensorboard="tb/pendulum")    # live, during training
    rltrain-plot runs/td3_s* --tensorboard tb/                           # afterwards, from metrics.csv

Event files are written with TensorBoard's own writer (no TensorFlow or PyTorch needed); ``tensorboard
--logdir tb`` shows them. The package is imported only when one of these is used, so it stays an optional
dependency (``pip install 'rltrain[tensorboard]'``).
"""

from __future__ import annotations

import csv
import math
import os
import time
from pathlib import Path
from typing import Any, Callable


def _tensorboard():
    """TensorBoard's event writer and protocol buffers, or an ImportError saying how to get them."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as exc:
        raise ImportError(
            "rltrain.tensorboard needs the tensorboard package: pip install tensorboard "
            "(or pip install 'rltrain[tensorboard]'). metrics.csv in the run directory has the same numbers, "
            "and rltrain-plot draws them."
        ) from exc
    return EventFileWriter, event_pb2, summary_pb2


class ScalarWriter:
    """Scalars into one TensorBoard run folder (``logdir``): ``add(tag, value, step)``, then ``close()``."""

    def __init__(self, logdir: str | os.PathLike):
        writer_cls, self._event_pb2, self._summary_pb2 = _tensorboard()
        self.logdir = os.fspath(logdir)
        os.makedirs(self.logdir, exist_ok=True)
        self._writer = writer_cls(self.logdir)

    def add(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """One point of the curve ``tag``; NaN and infinite values are left out (TensorBoard hides them)."""
        value = float(value)
        if not math.isfinite(value):
            return
        summary = self._summary_pb2.Summary(value=[self._summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        event = self._event_pb2.Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step),
                                      summary=summary)
        self._writer.add_event(event)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "ScalarWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TrainCallback:
    """A callback for :func:`rltrain.gym.train` that writes its events as scalars, then calls ``then``.

    Episodes give ``episode/return``; evaluations ``eval/return``; progress reports ``progress/updates_per_s``
    and ``progress/env_steps_per_s``; all against the environment step. ``train(..., tensorboard=dir)``
    makes one of these and closes it at the end; made by hand, pass it as ``callback`` and ``close()`` it.
    """

    def __init__(self, logdir: str | os.PathLike, then: Callable[[dict], Any] | None = None):
        self.writer = ScalarWriter(logdir)
        self.then = then

    def __call__(self, event: dict) -> Any:
        kind, step = event["kind"], event["step"]
        if kind in ("episode", "eval"):
            self.writer.add(f"{kind}/return", event["return"], step)
        if kind == "eval":
            self.writer.flush()  # evaluations are rare: show each one at once
        progress = event.get("progress")
        if kind == "progress" and progress is not None:
            self.writer.add("progress/updates_per_s", progress.updates_per_s, step)
            self.writer.add("progress/env_steps_per_s", progress.env_steps_per_s, step)
        return self.then(event) if self.then is not None else None

    def close(self) -> None:
        self.writer.close()


# metrics.csv columns that are not curves: the row's kind, its position, and its time (the event's time).
_NOT_SCALARS = {"kind", "env_step", "episode", "wall_s"}


def write_run(run_dir: str | os.PathLike, logdir: str | os.PathLike) -> int:
    """Writes every numeric column of a run's metrics.csv as TensorBoard scalars ``<kind>/<column>``
    (``eval/return``, ``eval/critic_loss``, ``episode/return``, ``episode/length``, ...) against
    ``env_step``, timed by ``wall_s`` (TensorBoard's relative time axis is the run's own); returns the number of
    points written. Empty cells (columns another kind fills) are skipped."""
    path = Path(run_dir) / "metrics.csv"
    n = 0
    with open(path, newline="") as f, ScalarWriter(logdir) as w:
        for row in csv.DictReader(f):
            kind, step = row.get("kind"), row.get("env_step")
            if not kind or not step:
                continue
            try:
                wall = float(row.get("wall_s") or 0.0)
            except ValueError:
                wall = 0.0
            for column, cell in row.items():
                if column in _NOT_SCALARS or column is None or cell in (None, ""):
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    continue
                w.add(f"{kind}/{column}", value, int(step), wall_time=wall)
                n += 1
    return n
