#!/usr/bin/env python3
"""parity_report.py: the side-by-side statistics of bench/mujoco_parity.sh's runs: per environment and
implementation, the mean, standard deviation, minimum and maximum over seeds of the evaluation return at each
checkpoint (the evaluation row nearest to it) and of the final-10% average (each seed's mean over the
evaluations in the last 10% of its steps), with Welch's t-test and the Mann-Whitney U test (two-sided,
scipy) of each implementation against the reference ("ref"); a markdown table and a PNG of the mean +- std
curves, one panel per environment.

  python3 bench/parity_report.py OUTDIR [--md FILE] [--png FILE] [--checkpoints 100000,200000,300000]

OUTDIR holds <impl>/<env>/seed<k>.csv (columns env_steps,eval_return,wall_s); <env> is the environment id with
'/' written as '-'; <impl> is ref, rltrain, or another name given to an rltrain arm (RLT_NAME). Without --checkpoints an environment's checkpoints are a third, two thirds and all of its
longest run (100k/200k/300k for 300k-step runs).
"""
import argparse
import glob
import math
import os
import sys

import numpy as np

LABELS = {"ref": "reference", "rltrain": "rltrain"}
ORDER = ["ref", "rltrain"]


def read_csv(path):
    """(steps, returns) arrays of one run; empty when it wrote no evaluation."""
    steps, rets = [], []
    with open(path) as f:
        header = f.readline().strip().split(",")
        i_s, i_r = header.index("env_steps"), header.index("eval_return")
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < len(header):
                continue
            try:
                steps.append(int(float(parts[i_s])))
                rets.append(float(parts[i_r]))
            except ValueError:
                continue
    return np.array(steps, dtype=np.int64), np.array(rets, dtype=np.float64)


def load(outdir):
    """{env: {impl: {seed: (steps, returns)}}} for every CSV under outdir."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(outdir, "*", "*", "seed*.csv"))):
        impl = os.path.basename(os.path.dirname(os.path.dirname(path)))
        env = os.path.basename(os.path.dirname(path))
        seed = os.path.basename(path)[4:-4]
        steps, rets = read_csv(path)
        if len(steps):
            runs.setdefault(env, {}).setdefault(impl, {})[seed] = (steps, rets)
    return runs


def at(steps, rets, target):
    """The return of the evaluation nearest to `target` steps (None when the run stopped well before it)."""
    k = int(np.argmin(np.abs(steps - target)))
    if abs(int(steps[k]) - target) > max(0.05 * target, 1):
        return None
    return float(rets[k])


def final_avg(steps, rets, total):
    """The mean over the evaluations in the last 10% of `total` steps (None when the run ended before it)."""
    sel = steps > 0.9 * total
    return float(rets[sel].mean()) if sel.any() and steps.max() >= 0.95 * total else None


def stats(values):
    v = np.array([x for x in values if x is not None], dtype=np.float64)
    if len(v) == 0:
        return None
    return dict(n=len(v), mean=v.mean(), std=v.std(ddof=1) if len(v) > 1 else 0.0, min=v.min(), max=v.max(), v=v)


def tests(a, b):
    """(Welch p, Mann-Whitney U p), NaN where a test cannot run (fewer than 2 values on a side)."""
    from scipy import stats as st

    if a is None or b is None or a["n"] < 2 or b["n"] < 2:
        return math.nan, math.nan
    with np.errstate(all="ignore"):
        welch = st.ttest_ind(a["v"], b["v"], equal_var=False).pvalue
    try:
        mwu = st.mannwhitneyu(a["v"], b["v"], alternative="two-sided").pvalue
    except ValueError:  # every value equal on both sides
        mwu = math.nan
    return float(welch), float(mwu)


def fmt(s):
    if s is None:
        return "n/a"
    return f"{s['mean']:.1f} +- {s['std']:.1f} [{s['min']:.1f}, {s['max']:.1f}] (n={s['n']})"


def fmt_p(p):
    return "n/a" if p is None or math.isnan(p) else f"{p:.3f}"


def table(runs, checkpoints):
    """The markdown table: one row per environment and checkpoint; with the reference among the
    implementations, each other one's p-values against it."""
    impls = [i for i in ORDER if any(i in r for r in runs.values())]
    impls += sorted({i for r in runs.values() for i in r} - set(impls))
    base = impls[0] if len(impls) > 1 else None
    others = [i for i in impls if i != base] if base else []
    head = "| env | checkpoint | " + " | ".join(f"{LABELS.get(i, i)} mean +- std [min, max]" for i in impls) + " |"
    for i in others:
        tag = "" if len(others) == 1 else f" ({LABELS.get(i, i)})"
        head += f" Welch p{tag} | Mann-Whitney p{tag} |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for env in sorted(runs):
        by_impl = runs[env]
        total = max(int(s.max()) for r in by_impl.values() for s, _ in r.values())
        # Thirds of the run, each moved to the nearest step that an evaluation was made at.
        grid = np.unique(np.concatenate([s for r in by_impl.values() for s, _ in r.values()]))
        cps = checkpoints or [int(grid[np.argmin(np.abs(grid - t))]) for t in (total / 3, 2 * total / 3, total)]
        for cp in list(cps) + ["final 10%"]:
            row = {}
            for impl in impls:
                seeds = by_impl.get(impl, {})
                if cp == "final 10%":
                    vals = [final_avg(s, r, total) for s, r in seeds.values()]
                else:
                    vals = [at(s, r, cp) for s, r in seeds.values()]
                row[impl] = stats(vals)
            name = cp if isinstance(cp, str) else f"{cp // 1000}k" if cp % 1000 == 0 else str(cp)
            line = f"| {env} | {name} | " + " | ".join(fmt(row[i]) for i in impls) + " |"
            for i in others:
                w, m = tests(row[base], row[i])
                line += f" {fmt_p(w)} | {fmt_p(m)} |"
            lines.append(line)
    return "\n".join(lines) + "\n"


def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted(runs)
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.8), squeeze=False)
    for ax, env in zip(axes[0], envs):
        for impl in ORDER + sorted(set(runs[env]) - set(ORDER)):
            seeds = runs[env].get(impl)
            if not seeds:
                continue
            grid = sorted({int(x) for s, _ in seeds.values() for x in s})
            mean, std = [], []
            for g in grid:
                v = [float(r[s == g][0]) for s, r in seeds.values() if (s == g).any()]
                mean.append(np.mean(v))
                std.append(np.std(v, ddof=1) if len(v) > 1 else 0.0)
            mean, std, x = np.array(mean), np.array(std), np.array(grid)
            line, = ax.plot(x, mean, label=f"{LABELS.get(impl, impl)} ({len(seeds)} seeds)")
            ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        ax.set_title(env)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("evaluation return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--md", help="also write the table to this markdown file")
    ap.add_argument("--png", help="plot file (default OUTDIR/parity.png)")
    ap.add_argument("--checkpoints", help="comma-separated env steps (default: thirds of each environment's run)")
    args = ap.parse_args(argv)
    runs = load(args.outdir)
    if not runs:
        print(f"parity_report: no seed*.csv with evaluation rows under {args.outdir}/<impl>/<env>/", file=sys.stderr)
        return 1
    cps = [int(float(c)) for c in args.checkpoints.split(",")] if args.checkpoints else None
    md = table(runs, cps)
    print(md, end="")
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    png = args.png or os.path.join(args.outdir, "parity.png")
    plot(runs, png)
    print(f"plot: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
