"""Learning curves from rltrain run directories: the mean and spread over seeds, one line per group.

    python -m rltrain.plot runs/td3_s1 runs/td3_s2 runs/td3_s3 -o curves.png
    rltrain-plot --group td3 runs/td3_s* --group dqn runs/dqn_s* -o curves.png

Every run directory (of ``rltrain --config``, ``rltrain.Trainer`` or ``rltrain.gym.train``) has a
``metrics.csv`` with one row per evaluation (``kind=eval``) and per episode (``kind=episode``). Reading and
aggregating (:func:`find_runs`, :func:`load_curve`, :func:`aggregate`) need only numpy; drawing needs
matplotlib (``pip install 'rltrain[plot]'``), imported only when a figure is drawn, so that the numbers
are available on machines without it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

KINDS = ("eval", "episode")
SPREADS = ("minmax", "std", "none")
# Episode returns are noisy and end at a different step in each run: they are smoothed over this many
# episodes and sampled on a common grid of this many steps.
DEFAULT_EPISODE_SMOOTHING = 10
GRID_POINTS = 200


class PlotError(ValueError):
    """Run directories that cannot be plotted (none found, no rows of the kind asked, no shared steps)."""


def find_runs(path: str | os.PathLike) -> list[Path]:
    """The run directories at ``path``: itself when it holds a ``metrics.csv``, else every directory below
    it that does (sorted), so that a folder of seeds stands for all of them."""
    root = Path(path)
    if (root / "metrics.csv").is_file():
        return [root]
    if not root.is_dir():
        raise PlotError(f"{root}: no such run directory")
    runs = sorted(p.parent for p in root.rglob("metrics.csv") if p.is_file())
    if not runs:
        raise PlotError(f"{root}: no metrics.csv in it or below it (is it a run directory's out_dir?)")
    return runs


def load_curve(run_dir: str | os.PathLike, kind: str = "eval") -> tuple[np.ndarray, np.ndarray]:
    """``(env_steps, returns)`` of one run's ``kind`` rows (``eval`` or ``episode``), steps increasing.

    A resumed run continues from its checkpoint's step; should rows of an interrupted run follow with
    steps at or beyond that point, the later rows win, so the curve is the one the run finally took.
    """
    if kind not in KINDS:
        raise PlotError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    path = Path(run_dir) / "metrics.csv"
    steps: list[int] = []
    values: list[float] = []
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"kind", "env_step", "return"} - set(reader.fieldnames or [])
            if missing:
                raise PlotError(f"{path}: not an rltrain metrics.csv (no column {', '.join(sorted(missing))})")
            for line, row in enumerate(reader, start=2):
                if row["kind"] != kind:
                    continue
                try:
                    step, value = int(row["env_step"]), float(row["return"])
                except (TypeError, ValueError):
                    raise PlotError(f"{path}:{line}: env_step and return must be numbers") from None
                while steps and steps[-1] >= step:
                    steps.pop()
                    values.pop()
                steps.append(step)
                values.append(value)
    except OSError as exc:
        raise PlotError(f"{path}: {exc.strerror or exc}") from None
    return np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """The trailing mean over ``window`` values (fewer at the start); ``window`` 1 returns the values."""
    values = np.asarray(values, dtype=np.float64)
    if window <= 1 or values.size == 0:
        return values
    sums = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, values.size + 1)
    start = np.maximum(idx - window, 0)
    return (sums[idx] - sums[start]) / (idx - start)


def aggregate(curves: Sequence[tuple[np.ndarray, np.ndarray]], *, interpolate: bool = False,
              points: int = GRID_POINTS) -> dict[str, np.ndarray | int]:
    """Mean, standard deviation, minimum and maximum over runs, step by step.

    Without ``interpolate`` the statistics are taken at the steps every run has (evaluations of runs with
    the same ``train.eval_every``; a run that stopped early limits all to its steps). With ``interpolate``
    (episode rows, which end at different steps in each run) each run is interpolated linearly on
    ``points`` steps spread over the range all runs cover. Returns ``steps``, ``mean``, ``std`` (over
    runs, ddof 0), ``min``, ``max`` (arrays) and ``n`` (the number of runs).
    """
    curves = [(np.asarray(s, dtype=np.int64), np.asarray(v, dtype=np.float64)) for s, v in curves]
    if not curves:
        raise PlotError("no runs to aggregate")
    for s, v in curves:
        if s.shape != v.shape or s.ndim != 1:
            raise PlotError("each curve needs as many steps as values")
        if s.size == 0:
            raise PlotError("a run has no rows of this kind (did it reach its first evaluation?)")
    if interpolate:
        lo = max(int(s[0]) for s, _ in curves)
        hi = min(int(s[-1]) for s, _ in curves)
        if hi < lo:
            raise PlotError(f"the runs cover no common range of steps (the latest start is {lo}, the earliest end {hi})")
        steps = np.unique(np.linspace(lo, hi, max(points, 1)).round().astype(np.int64))
        table = np.stack([np.interp(steps, s, v) for s, v in curves])
    else:
        steps = curves[0][0]
        for s, _ in curves[1:]:
            steps = np.intersect1d(steps, s)
        if steps.size == 0:
            raise PlotError("the runs share no step (different train.eval_every?); use interpolate=True")
        table = np.stack([v[np.searchsorted(s, steps)] for s, v in curves])
    return {"steps": steps, "mean": table.mean(axis=0), "std": table.std(axis=0), "min": table.min(axis=0),
            "max": table.max(axis=0), "n": len(curves)}


def group_stats(runs: Iterable[str | os.PathLike], kind: str = "eval", smoothing: int = 1) -> dict:
    """:func:`aggregate` over the runs (each one :func:`find_runs` result or more), smoothed per run."""
    dirs = [d for r in runs for d in find_runs(r)]
    curves = []
    for d in dirs:
        s, v = load_curve(d, kind)
        if s.size == 0:
            raise PlotError(f"{d}/metrics.csv has no {kind} rows")
        curves.append((s, smooth(v, smoothing)))
    stats = aggregate(curves, interpolate=(kind == "episode"))
    stats["runs"] = dirs
    return stats


def _run_name(run_dir: Path) -> str:
    """``algo env`` of one run: from summary.json (whose ``env`` is the Gymnasium id for runs of
    rltrain.gym), else from config.yaml (a run still going has no summary yet)."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        return f"{summary['algo']} {summary['env']}"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
    env = cfg.get("env") or {}
    return f"{cfg.get('algo', '?')} {env.get('name', '?') if isinstance(env, dict) else env}"


def default_label(runs: Sequence[str | os.PathLike]) -> str:
    """``algo env`` of the runs when they agree, else the runs' common folder name."""
    try:
        names = {_run_name(d) for r in runs for d in find_runs(r)}
        if len(names) == 1:
            return names.pop()
    except Exception:  # noqa: BLE001 - a label is a convenience: the folder name below will do
        pass
    common = os.path.commonpath([os.path.abspath(r) for r in runs])
    return Path(common).name or common


def _matplotlib():
    """matplotlib's Figure, or an ImportError saying how to get it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "rltrain.plot needs matplotlib to draw learning curves: pip install matplotlib "
            "(or pip install 'rltrain[plot]'). Without it, rltrain.plot.aggregate gives the numbers, and "
            "--csv writes them."
        ) from exc
    return Figure


def plot(groups: dict[str, Sequence[str | os.PathLike]], output: str | os.PathLike, *, kind: str = "eval",
         spread: str = "minmax", smoothing: int | None = None, title: str | None = None) -> dict[str, dict]:
    """Draws one line per group (its label: its run directories) into ``output`` (PNG, SVG, PDF: by the
    file's extension): the mean over the group's runs, and a band from the minimum to the maximum
    (``spread="minmax"``), of one standard deviation around the mean (``"std"``), or none. Returns each
    group's :func:`aggregate` statistics (with ``runs``, the run directories)."""
    if spread not in SPREADS:
        raise PlotError(f"spread must be one of {', '.join(SPREADS)}, not {spread!r}")
    if smoothing is None:
        smoothing = DEFAULT_EPISODE_SMOOTHING if kind == "episode" else 1
    stats = {label: group_stats(runs, kind, smoothing) for label, runs in groups.items()}
    Figure = _matplotlib()
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for label, st in stats.items():
        line, = ax.plot(st["steps"], st["mean"], label=f"{label} ({st['n']} run{'s' if st['n'] != 1 else ''})")
        if spread != "none" and st["n"] > 1:
            lo, hi = (st["min"], st["max"]) if spread == "minmax" else (st["mean"] - st["std"], st["mean"] + st["std"])
            ax.fill_between(st["steps"], lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps")
    ylabel = "evaluation return" if kind == "eval" else "episode return"
    if kind == "episode" and smoothing > 1:
        ylabel += f" (mean of {smoothing} episodes)"
    ax.set_ylabel(ylabel)
    band = {"minmax": "band: min to max over runs", "std": "band: mean ± 1 std over runs", "none": ""}[spread]
    ax.set_title(title if title is not None else "; ".join(t for t in ("mean over runs", band) if t))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    fig.savefig(output, dpi=120)
    return stats


def write_csv(stats: dict[str, dict], path: str | os.PathLike) -> None:
    """The aggregated curves as one table: label, step, mean, std, min, max, n."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "env_step", "mean", "std", "min", "max", "n"])
        for label, st in stats.items():
            for i, step in enumerate(st["steps"]):
                w.writerow([label, int(step), f"{st['mean'][i]:.6g}", f"{st['std'][i]:.6g}",
                            f"{st['min'][i]:.6g}", f"{st['max'][i]:.6g}", st["n"]])


def _tb_name(text: str) -> str:
    """A label or run name as one folder name TensorBoard shows as it is: letters, digits, '.', '_' and '-' kept,
    anything else (spaces, '/', which would nest folders) as '_'."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text) or "_"


def _write_tensorboard(stats: dict[str, dict], logdir: str | os.PathLike) -> None:
    """Each run of each group into LOGDIR/LABEL/RUN (the run folder's name; made unique within its group), names
    made folder-safe by :func:`_tb_name`."""
    from .tensorboard import write_run

    for label, st in stats.items():
        taken: set[str] = set()
        for run in st["runs"]:
            name, k = _tb_name(run.name), 2
            while name in taken:
                name, k = f"{_tb_name(run.name)}_{k}", k + 1
            taken.add(name)
            write_run(run, Path(logdir) / _tb_name(label) / name)


def _summary_line(label: str, st: dict, kind: str) -> str:
    last = -1
    spread = "" if st["n"] == 1 else f" (min {st['min'][last]:.1f}, max {st['max'][last]:.1f})"
    where = "shared eval steps" if kind == "eval" else "grid steps"
    return (f"{label}: {st['n']} run{'s' if st['n'] != 1 else ''}, {len(st['steps'])} {where}; at step "
            f"{int(st['steps'][last])} mean {st['mean'][last]:.1f}{spread}, best mean {np.max(st['mean']):.1f}")


def main(argv: list[str] | None = None) -> int:
    """``python -m rltrain.plot`` / ``rltrain-plot``: exit 0, 1 when matplotlib is missing, 2 on bad input."""
    ap = argparse.ArgumentParser(
        prog="rltrain-plot",
        description="Learning curves from rltrain run directories (metrics.csv): the mean over runs (seeds) "
        "with a band of their spread, one line per group.",
        epilog="A folder that holds several run directories stands for all of them, e.g. runs/td3/ with "
        "seed_1/, seed_2/, ... below it.")
    ap.add_argument("runs", nargs="*", metavar="RUN_DIR", help="run directories averaged into one line")
    ap.add_argument("--label", help="the label of the RUN_DIR line (default: algo and env of the runs)")
    ap.add_argument("--group", nargs="+", action="append", default=[], metavar=("LABEL", "RUN_DIR"),
                    help="one more line: a label, then its run directories (repeatable)")
    ap.add_argument("-o", "--output", help="the figure (PNG, SVG, PDF by extension; default curves.png "
                    "unless only --csv is given)")
    ap.add_argument("--kind", choices=KINDS, default="eval",
                    help="eval: the evaluations' mean returns (default); episode: training episodes' returns")
    ap.add_argument("--spread", choices=SPREADS, default="minmax", help="the band around the mean (default minmax)")
    ap.add_argument("--smooth", type=int, metavar="N",
                    help=f"trailing mean over N rows of each run (default {DEFAULT_EPISODE_SMOOTHING} for "
                    "episodes, 1 for evaluations)")
    ap.add_argument("--title", help="the figure's title")
    ap.add_argument("--csv", metavar="PATH", help="also write the aggregated curves as CSV (needs no matplotlib)")
    ap.add_argument("--tensorboard", metavar="LOGDIR", help="also write every run's metrics.csv as TensorBoard "
                    "scalars into LOGDIR/LABEL/RUN (needs the tensorboard package)")
    # Intermixed: options may come between run directories (rltrain-plot runs/a -o x.png runs/b).
    args = ap.parse_intermixed_args(argv)

    groups: dict[str, list[str]] = {}
    if args.runs:
        groups[args.label or default_label(args.runs)] = args.runs
    elif args.label:
        ap.error("--label names the RUN_DIR line, but no RUN_DIR is given")
    for g in args.group:
        if len(g) < 2:
            ap.error(f"--group {g[0]}: give a label and at least one run directory")
        if g[0] in groups:
            ap.error(f"two lines are labelled {g[0]!r}")
        groups[g[0]] = g[1:]
    if not groups:
        ap.error("give run directories (RUN_DIR...) or --group LABEL RUN_DIR...")
    if args.smooth is not None and args.smooth < 1:
        ap.error("--smooth must be at least 1")
    output = args.output or (None if args.csv or args.tensorboard else "curves.png")
    smoothing = args.smooth if args.smooth is not None else (DEFAULT_EPISODE_SMOOTHING if args.kind == "episode" else 1)

    try:
        if output is not None:
            stats = plot(groups, output, kind=args.kind, spread=args.spread, smoothing=smoothing, title=args.title)
        else:
            stats = {label: group_stats(runs, args.kind, smoothing) for label, runs in groups.items()}
        if args.csv:
            write_csv(stats, args.csv)
        if args.tensorboard:
            _write_tensorboard(stats, args.tensorboard)
    except PlotError as exc:
        print(f"rltrain-plot: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"rltrain-plot: error: {exc}", file=sys.stderr)
        return 1
    for label, st in stats.items():
        print(_summary_line(label, st, args.kind))
    written = [p for p in (output, args.csv, args.tensorboard) if p]
    print("written: " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
