#!/usr/bin/env python3
"""ktrace_summary.py: a seed-batched update's kernel timeline from bench/ktrace.c's CSV.

    python3 bench/ktrace_summary.py trace.csv AGENTS [--updates 40] [--timeline] [--exposed]

Takes the kernels launched over AGENTS agents (grid z) and everything running between the first and the last of them,
cuts them into updates at each batch gather, and prints for the last --updates updates: the time per update, how much
of it 0, 1, 2, ... kernels were running at once, and each kind of kernel's launches and time per update (summed: side
by side kernels count in full, so the sum exceeds the update's time). --timeline prints the last two updates kernel by
kernel (start, end, duration in us from the first). --exposed prints the time an update runs no library product,
shared among the kernels running then (what the update's own kernels cost where nothing of the library hides them)."""
import argparse
import collections
import csv


def is_library(name):
    return "cutlass" in name or "xmma" in name or "gemv" in name


def print_exposed(sel, n):
    """The time no library product runs, each stretch shared equally among the kernels running in it."""
    events = []
    for r in sel:
        key = "library" if is_library(r["name"]) else r["name"].split("I")[0][:48]
        events += [(int(r["start"]), 1, key), (int(r["end"]), -1, key)]
    events.sort()
    active, share, idle, bare = collections.Counter(), collections.Counter(), 0, 0
    prev = events[0][0]
    for t, d, key in events:
        dt = t - prev
        if dt > 0 and active["library"] == 0:
            names = [k for k, v in active.items() if v > 0]
            if not names:
                idle += dt
            else:
                bare += dt
                for k in names:
                    share[k] += dt / len(names)
        active[key] += d
        prev = t
    span = int(sel[-1]["end"]) - int(sel[0]["start"])
    print("no library product running: %.1f us an update (%.0f%%), idle %.1f us; shared among:" %
          (bare / 1e3 / n, 100 * bare / span, idle / 1e3 / n))
    for k, v in share.most_common(12):
        print("  %6.1f us  %s" % (v / 1e3 / n, k))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("agents", type=int)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--timeline", action="store_true")
    ap.add_argument("--exposed", action="store_true")
    a = ap.parse_args()
    rows = sorted(csv.DictReader(open(a.csv)), key=lambda r: int(r["start"]))
    batched = [r for r in rows if r["grid"].endswith("x%d" % a.agents)]
    if not batched:
        raise SystemExit("no kernel over %d agents in %s" % (a.agents, a.csv))
    t0, t1 = int(batched[0]["start"]), int(batched[-1]["end"])
    win = [r for r in rows if int(r["start"]) >= t0 and int(r["end"]) <= t1]
    cuts = [i for i, r in enumerate(win) if "gather" in r["name"]]
    n = min(a.updates, len(cuts) - 1)
    if n < 1:
        raise SystemExit("fewer than two updates (batch gathers) in the window")
    sel = win[cuts[-n - 1]:cuts[-1]]
    span = (int(sel[-1]["end"]) - int(sel[0]["start"])) / 1e3
    print("%d updates: %.1f us each, %.1f kernels each" % (n, span / n, len(sel) / n))
    events = sorted([(int(r["start"]), 1) for r in sel] + [(int(r["end"]), -1) for r in sel])
    running, prev, held = 0, events[0][0], collections.Counter()
    for t, d in events:
        held[running] += t - prev
        running += d
        prev = t
    total = sum(held.values())
    for k in sorted(held):
        print("  %d kernels running: %5.1f%% of the time (%.1f us an update)" % (k, 100 * held[k] / total,
                                                                            held[k] / 1e3 / n))
    kinds = collections.defaultdict(lambda: [0, 0])
    for r in sel:
        name = r["name"]
        key = ("library " + name[:60]) if is_library(name) else name.split("I")[0][:48]
        kinds[key][0] += 1
        kinds[key][1] += int(r["end"]) - int(r["start"])
    print("summed kernel time an update: %.1f us" % (sum(v[1] for v in kinds.values()) / 1e3 / n))
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print("  %5.1f launches  %7.1f us  %s" % (v[0] / n, v[1] / 1e3 / n, k))
    if a.exposed:
        print_exposed(sel, n)
    if a.timeline:
        one = win[cuts[-3]:cuts[-1]]
        s0 = int(one[0]["start"])
        for r in one:
            s, e = (int(r["start"]) - s0) / 1e3, (int(r["end"]) - s0) / 1e3
            print("%8.2f %8.2f %6.2f %10s %s" % (s, e, e - s, r["grid"], r["name"][:80]))


if __name__ == "__main__":
    main()
