"""python -m rltrain.sweep.report STUDY --storage SPEC [--out DIR]: what a sweep found.

Writes into DIR (default: the study's sweep directory, found from its trials' run directories, else
./sweep_report_<STUDY>):
  trials.csv          one row per trial: number, state, value, params, run_dir, seconds, fail_reason
  best.yaml           the best trial's config, loadable as it is (rltrain --config best.yaml --set out_dir=...)
  best.json           its number, value, params, run directory and best.ckpt
  objective.png       each trial's value in the order they were asked, and the best so far
  importances.png     the parameters' importances (Optuna's evaluator; skipped with fewer than 2 completed trials)
  parallel.png        parallel coordinates: each completed trial's parameters, coloured by its value
and prints the table (best first). Plots need matplotlib (pip install 'rltrain[sweep]').
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from .worker import HEARTBEAT_ATTR, _optuna, _write_atomic, open_storage, write_best


def _rows(study):
    rows = []
    for t in study.get_trials(deepcopy=False):
        secs = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start \
            else None
        rows.append({"number": t.number, "state": t.state.name, "value": t.value, "params": dict(t.params),
                     "run_dir": t.user_attrs.get("run_dir", ""), "seconds": secs,
                     "fail_reason": t.user_attrs.get("fail_reason", ""),
                     "last_step": max(t.intermediate_values) if t.intermediate_values else None})
    return rows


def _plots(study, rows, out: Path, keys: list[str]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("rltrain.sweep.report: matplotlib is not installed: no plots (pip install matplotlib)", file=sys.stderr)
        return []
    made = []
    done = [r for r in rows if r["state"] == "COMPLETE" and r["value"] is not None]
    # Objective over trials, with the pruned trials' last intermediate value marked apart.
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [r["number"] for r in done]
    ax.scatter(xs, [r["value"] for r in done], label="completed", color="tab:blue")
    pruned = [t for t in study.get_trials(deepcopy=False) if t.state.name == "PRUNED" and t.intermediate_values]
    if pruned:
        ax.scatter([t.number for t in pruned], [t.intermediate_values[max(t.intermediate_values)] for t in pruned],
                   label="pruned (last report)", color="tab:gray", marker="x")
    best, line = -math.inf, []
    for r in sorted(done, key=lambda r: r["number"]):
        best = max(best, r["value"])
        line.append((r["number"], best))
    if line:
        ax.step([p[0] for p in line], [p[1] for p in line], where="post", color="tab:red", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("objective (evaluation return)")
    ax.set_title(f"study {study.study_name}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "objective.png", dpi=100)
    plt.close(fig)
    made.append("objective.png")
    # Importances: Optuna's default evaluator over the completed trials.
    if len(done) >= 2 and keys:
        try:
            imp = _optuna().importance.get_param_importances(study)
        except Exception as exc:  # noqa: BLE001 - too few distinct values, or an evaluator's own limits
            print(f"rltrain.sweep.report: no importances: {exc}", file=sys.stderr)
            imp = {}
        if imp:
            fig, ax = plt.subplots(figsize=(6, 0.5 + 0.5 * len(imp)))
            names = list(imp)[::-1]
            ax.barh(names, [imp[n] for n in names], color="tab:green")
            ax.set_xlabel("importance")
            fig.tight_layout()
            fig.savefig(out / "importances.png", dpi=100)
            plt.close(fig)
            made.append("importances.png")
    # Parallel coordinates: each parameter scaled to [0, 1] on its axis (log for log ranges), lines by value.
    if done and keys:
        fig, ax = plt.subplots(figsize=(1.8 * len(keys) + 2, 4))
        vals = [r["value"] for r in done]
        lo, hi = min(vals), max(vals)
        cmap = plt.get_cmap("viridis")
        scaled = {}
        for k in keys:
            col = [r["params"].get(k) for r in done]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in col):
                fv = [float(v) for v in col]
                logs = min(fv) > 0 and max(fv) / min(fv) > 20
                fv = [math.log(v) for v in fv] if logs else fv
                a, b = min(fv), max(fv)
                scaled[k] = [(v - a) / (b - a) if b > a else 0.5 for v in fv]
            else:
                cats = sorted({str(v) for v in col})
                scaled[k] = [(cats.index(str(v)) + 0.5) / len(cats) for v in col]
        for i, r in enumerate(done):
            c = cmap((r["value"] - lo) / (hi - lo) if hi > lo else 0.5)
            ax.plot(range(len(keys)), [scaled[k][i] for k in keys], color=c, alpha=0.8)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=15)
        ax.set_yticks([])
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(lo, hi))
        fig.colorbar(sm, ax=ax, label="objective")
        ax.set_title("parallel coordinates (each axis: the parameter's range)")
        fig.tight_layout()
        fig.savefig(out / "parallel.png", dpi=100)
        plt.close(fig)
        made.append("parallel.png")
    return made


def report(study_name: str, storage: str, out: str | None = None, plots: bool = True) -> dict:
    """Writes the report of ``study_name`` (see the module's doc) and returns {"dir", "rows", "best", "plots"}."""
    optuna = _optuna()
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage))
    rows = _rows(study)
    if out:
        dest = Path(out)
    else:
        dirs = [t.user_attrs["sweep_dir"] for t in study.get_trials(deepcopy=False) if "sweep_dir" in t.user_attrs]
        dest = Path(dirs[0]) if dirs else Path(f"sweep_report_{study_name}")
    dest.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r["params"]})
    with open(dest / "trials.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["number", "state", "value", *keys, "last_step", "seconds", "run_dir", "fail_reason"])
        for r in rows:
            w.writerow([r["number"], r["state"], "" if r["value"] is None else repr(r["value"]),
                        *[r["params"].get(k, "") for k in keys], r["last_step"] if r["last_step"] is not None else "",
                        "" if r["seconds"] is None else f"{r['seconds']:.2f}", r["run_dir"], r["fail_reason"]])
    best = write_best(study, dest)
    made = _plots(study, rows, dest, keys) if plots else []
    # The table, best first, then the rest by number.
    order = sorted(rows, key=lambda r: (r["value"] is None, -(r["value"] or 0.0), r["number"]))
    head = ["trial", "state", "value", *keys]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in order:
        v = "" if r["value"] is None else f"{r['value']:.2f}"
        ps = [f"{r['params'][k]:.4g}" if isinstance(r["params"].get(k), float) else str(r["params"].get(k, ""))
              for k in keys]
        lines.append(" | ".join([str(r["number"]), r["state"], v, *ps]))
    text = "\n".join(lines) + "\n"
    _write_atomic(dest / "trials.md", text)
    counts = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    summary = {"study": study_name, "trials": len(rows), "states": counts, "best": best, "plots": made,
               "ignored_attrs": [HEARTBEAT_ATTR]}
    _write_atomic(dest / "report.json", json.dumps(summary, indent=2) + "\n")
    return {"dir": str(dest), "rows": rows, "best": best, "plots": made, "table": text}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rltrain.sweep.report", description=__doc__.splitlines()[0])
    ap.add_argument("study")
    ap.add_argument("--storage", required=True, help="journal:PATH, sqlite:PATH or a database URL")
    ap.add_argument("--out", help="where to write (default: the study's sweep directory)")
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    try:
        r = report(a.study, a.storage, a.out, plots=not a.no_plots)
    except (KeyError, ValueError, ImportError, OSError) as exc:
        print(f"rltrain.sweep.report: {exc}", file=sys.stderr)
        return 1
    print(r["table"], end="")
    b = r["best"]
    print(f"\nreport written to {r['dir']}: trials.csv, trials.md, best.yaml, best.json"
          + "".join(f", {p}" for p in r["plots"])
          + (f"\nbest: trial {b['trial']} = {b['value']:.2f}; its best.ckpt: {b['best_ckpt']}" if b else "\nno trial "
             "completed yet"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
