"""python -m rltrain.sweep: one sweep worker, or one per device with --devices (see rltrain.sweep.worker.sweep,
rltrain.sweep.launch and docs/sweeps.md).

Exit status: 0 when the study is complete, 2 for a bad config or search space (FILE:LINE:COL), 3 when not even one
trial fits in memory, 130 on Ctrl-C (SIGINT: the running trials are told failed), 1 for any other failure; with
--devices the first of 2, 3, 1, 130 that a worker returned, else 0."""

from __future__ import annotations

import argparse
import logging
import sys

from ..errors import ConfigError, NoFitError, RltError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rltrain.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="the base config (YAML); must not hold a population")
    ap.add_argument("--space", required=True, help="the search space (YAML): key: {log_uniform: [lo, hi]} | "
                    "{uniform: [lo, hi]} | {int: [lo, hi]} | [choices]")
    ap.add_argument("--trials", type=int, required=True, help="trials of the whole study (all workers together)")
    ap.add_argument("--storage", required=True, help="journal:PATH (a file, shared by workers), sqlite:PATH, or a "
                    "database URL")
    ap.add_argument("--study", required=True, help="the study's name (created when missing)")
    ap.add_argument("--workers-batch", type=int, default=8, help="trials run at once as one population (fewer if "
                    "fewer fit in memory; default 8)")
    ap.add_argument("--device", help="cpu, cuda, cuda:K: one worker per GPU")
    ap.add_argument("--devices", help="a comma-separated list (cuda:0,cuda:1): one worker process per entry on the "
                    "one study, their output prefixed with the device; --sampler-seed N gives worker k seed N + k")
    ap.add_argument("--out", help="the sweep's directory (default: the config's out_dir/sweep_<study>)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a base config key")
    ap.add_argument("--pruner", default="median", choices=["median", "halving", "none"])
    ap.add_argument("--prune-startup", type=int, default=4, help="median: trials completed before pruning starts")
    ap.add_argument("--halving-factor", type=int, default=3, help="successive halving's reduction factor")
    ap.add_argument("--sampler", default="tpe", choices=["tpe", "random"])
    ap.add_argument("--sampler-seed", type=int, help="seed of the sampler (each worker its own)")
    ap.add_argument("--objective", default="last", choices=["last", "best"], help="a trial's value: its final "
                    "evaluation return (last) or its best")
    ap.add_argument("--heartbeat", type=float, default=10.0, help="seconds between a worker's heartbeats")
    ap.add_argument("--grace", type=float, help="seconds without a heartbeat before a running trial is marked "
                    "failed (default 3 x --heartbeat)")
    ap.add_argument("--no-requeue", action="store_true", help="leave a dead worker's trials failed (by default "
                    "each is enqueued once more with its parameters)")
    ap.add_argument("--max-batches", type=int, help="stop this worker after this many batches (--max-batches 1 "
                    "--workers-batch 1: one trial per process)")
    ap.add_argument("--no-seed-batching", action="store_true", help="give each trial of a population its own update "
                    "graphs (by default a population of one shape on a GPU runs one batched graph, train.seed_batching)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.devices is not None:
        from .launch import parse_devices, run_workers

        if a.device:
            print("rltrain.sweep: give --device (this process is the worker) or --devices (a worker per device), "
                  "not both", file=sys.stderr)
            return 2
        try:
            devices = parse_devices(a.devices)
        except ValueError as exc:
            print(f"rltrain.sweep: {exc}", file=sys.stderr)
            return 2
        try:
            return run_workers(list(sys.argv[1:] if argv is None else argv), devices, a.sampler_seed)
        except KeyboardInterrupt:  # before the workers were started
            return 130
    from .launch import follow_launcher

    follow_launcher()
    logging.basicConfig(level=logging.WARNING if a.quiet else logging.INFO, format="%(message)s")
    from .worker import sweep

    try:
        r = sweep(a.config, a.space, a.trials, a.storage, a.study, workers_batch=a.workers_batch, device=a.device,
                  out=a.out, sets=a.set, pruner=a.pruner, prune_startup=a.prune_startup,
                  halving_factor=a.halving_factor, sampler=a.sampler, sampler_seed=a.sampler_seed,
                  objective=a.objective, heartbeat_s=a.heartbeat, grace_s=a.grace, max_batches=a.max_batches,
                  requeue=not a.no_requeue, seed_batching=not a.no_seed_batching)
    except ConfigError as exc:
        print(f"rltrain.sweep: {exc}", file=sys.stderr)
        return 2
    except NoFitError as exc:
        print(f"rltrain.sweep: {exc}", file=sys.stderr)
        return 3
    except (RltError, ValueError, OSError, ImportError) as exc:
        print(f"rltrain.sweep: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rltrain.sweep: interrupted; this worker's running trials were told failed, and the study goes on with "
              "the other workers", file=sys.stderr)
        return 130
    best = r.best
    print(f"worker done in {r.wall_s:.1f}s: {len(r.completed)} trials completed, {len(r.pruned)} pruned, "
          f"{len(r.failed)} failed" + (f"; study best: trial {best['trial']} = {best['value']:.2f} "
                                        f"({best['run_dir']})" if best else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
