"""A sweep worker: asks an Optuna study for batches of trials, runs each batch as one population (one rltrain
group, one process), reports every evaluation to the study, prunes trials by stopping their members, and writes
each trial's run directory and the study's best so far. Several workers (processes, machines) share one study
through its storage (a journal file on shared storage needs no server). docs/sweeps.md describes the whole.

Liveness: Optuna's own heartbeat exists only for RDB storages, so a worker keeps its own: while its trials run it
stamps each with the user attribute ``rltrain_heartbeat`` (seconds since the epoch) every ``heartbeat_s``, and
before each batch every worker marks FAIL the running trials whose stamp is older than ``grace_s`` (their worker
was killed), so a study never waits on a dead worker.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import Config, Group
from ..errors import NoFitError, RltError
from .space import Param, format_value, load_space

log = logging.getLogger("rltrain.sweep")

HEARTBEAT_ATTR = "rltrain_heartbeat"


def _optuna():
    try:
        import optuna
    except ImportError:
        raise ImportError("rltrain.sweep needs Optuna: pip install 'rltrain[sweep]' (or pip install optuna)") from None
    return optuna


def open_storage(spec: str):
    """``journal:PATH`` (a journal file; JournalFileBackend, or JournalFileStorage before Optuna 4), ``sqlite:PATH``,
    or any URL Optuna's RDB storage takes (``postgresql://...``)."""
    optuna = _optuna()
    if spec.startswith("journal:"):
        path = spec[len("journal:"):]
        if not path:
            raise ValueError("journal: needs a file path, like journal:runs/sweep.log")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        journal = optuna.storages.journal if hasattr(optuna.storages, "journal") else None
        backend_cls = getattr(journal, "JournalFileBackend", None) if journal else None
        if backend_cls is None:
            backend_cls = optuna.storages.JournalFileStorage  # Optuna 3.x
            storage_cls = optuna.storages.JournalStorage
        else:
            storage_cls = journal.JournalStorage
        return storage_cls(backend_cls(path))
    if spec.startswith("sqlite:") and not spec.startswith("sqlite:///"):
        path = spec[len("sqlite:"):]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(f"sqlite:///{os.path.abspath(path)}")
    if "://" in spec:
        return optuna.storages.RDBStorage(spec)
    raise ValueError(f"storage '{spec}': use journal:PATH, sqlite:PATH or a database URL")


def make_pruner(name: str, startup: int = 4, halving_factor: int = 3):
    optuna = _optuna()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup, n_warmup_steps=0)
    if name in ("halving", "successive_halving", "sha"):
        return optuna.pruners.SuccessiveHalvingPruner(reduction_factor=halving_factor)
    if name in ("none", "nop"):
        return optuna.pruners.NopPruner()
    raise ValueError(f"pruner '{name}': use median, halving or none")


def make_sampler(name: str, seed: int | None):
    optuna = _optuna()
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"sampler '{name}': use tpe or random")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _eval_rows(metrics: Path) -> list[tuple[int, float]]:
    """(env_step, eval_return) of each evaluation row of a run's metrics.csv so far."""
    rows = []
    try:
        with open(metrics, encoding="utf-8") as f:
            for line in f:
                if line.startswith("eval,"):
                    parts = line.split(",")
                    rows.append((int(parts[1]), float(parts[3])))
    except (OSError, ValueError, IndexError):
        pass
    return rows


def fail_stale_trials(study, storage, grace_s: float, requeue: bool = True) -> list[int]:
    """Marks FAIL the running trials whose worker stopped stamping them (killed) and, with ``requeue``, enqueues
    each one's parameters once more (a trial that is itself such a retry is not re-queued again); returns the
    failed trials' numbers."""
    optuna = _optuna()
    now = time.time()
    failed = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        stamp = t.user_attrs.get(HEARTBEAT_ATTR)
        if stamp is None:
            stamp = t.datetime_start.timestamp() if t.datetime_start else now
        if now - float(stamp) <= grace_s:
            continue
        try:
            storage.set_trial_user_attr(t._trial_id, "fail_reason",
                                        f"its worker ({t.user_attrs.get('worker', '?')}) stopped sending heartbeats "
                                        f"for {now - float(stamp):.0f} s (killed?)")
            storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
            failed.append(t.number)
        except Exception:  # noqa: BLE001 - another worker marked it first
            continue
        if requeue and "retry_of" not in t.user_attrs:
            study.enqueue_trial(dict(t.params), user_attrs={"retry_of": t.number})
    if failed:
        log.warning("sweep: marked failed the trials of a worker that stopped: %s", failed)
    return failed


def trials_in_play(study) -> int:
    optuna = _optuna()
    S = optuna.trial.TrialState
    return len(study.get_trials(deepcopy=False, states=(S.COMPLETE, S.PRUNED, S.RUNNING, S.WAITING)))


def write_best(study, root: Path) -> dict | None:
    """root/best.yaml (the best trial's config, loadable as it is) and root/best.json; None before any trial
    completed."""
    try:
        best = study.best_trial
    except ValueError:
        return None
    run_dir = best.user_attrs.get("run_dir")
    info = {"study": study.study_name, "trial": best.number, "value": best.value, "params": best.params,
            "run_dir": run_dir, "best_ckpt": str(Path(run_dir) / "best.ckpt") if run_dir else None}
    if run_dir and (Path(run_dir) / "config.yaml").is_file():
        text = (Path(run_dir) / "config.yaml").read_text(encoding="utf-8")
        _write_atomic(root / "best.yaml", f"# best trial {best.number} of study {study.study_name}: final "
                      f"evaluation {best.value:.6g}; rerun with  rltrain --config best.yaml --set out_dir=DIR\n" + text)
    _write_atomic(root / "best.json", json.dumps(info, indent=2) + "\n")
    return info


@dataclass
class SweepResult:
    """What one worker did: the trial numbers it ran, by outcome, and the study's best afterwards."""

    completed: list
    pruned: list
    failed: list
    best: dict | None
    wall_s: float


def _shape_combos(params: list[Param], cap: int = 64) -> list[list[str]]:
    """The --set assignments of the shapes a trial may take: every combination of the shape keys' choices (ranges:
    their ends), or, past ``cap`` combinations, the largest of each alone."""
    shapes = [p for p in params if p.shape]
    options = [p.texts if p.kind == "choice" else [format_value(int(p.low)), format_value(int(p.high))] for p in shapes]
    combos = [[]]
    for p, opts in zip(shapes, options):
        combos = [c + [f"{p.key}={o}"] for c in combos for o in opts]
        if len(combos) > cap:
            return [[f"{p.key}={opts[-1]}" for p, opts in zip(shapes, options)]]
    return combos


def _batch_fit(config: Config, want: int, params: list[Param] = ()) -> int:
    """How many trials fit the memory budget and the device at once (exit-3 logic: the planner's need and limit,
    nothing reserved), each planned at the largest shape the space allows; NoFitError when not even one does."""
    need = first = limit = 0
    leads = 1
    for sets in _shape_combos(list(params)):
        cfg = config.copy()
        for s in sets:
            cfg.set(s)
        values, table = cfg.plan_fit()
        if not values["fits"]:
            cfg.close()
            last = table.strip().splitlines()[-1] if table.strip() else ""
            raise NoFitError(f"one trial's memory plan does not fit ({', '.join(sets) or 'the base config'}): {last}",
                             -3, "RLT_ENOFIT", table)
        # A batch is a seed group of `want` members: with train.seed_batching on a GPU its first member also holds
        # the batched graph's library workspace (rlt_plan_group), and so does each further batch's first with
        # train.seed_batches (rlt_plan_group_leads), which the group's own check counts.
        lead, each, n_leads = int(values["need_bytes"]), int(values["need_bytes"]), 1
        if want > 1:
            cfg.set(f"train.num_seeds={min(want, 256)}")
            lead, each = cfg.plan_group()
            n_leads = cfg.plan_group_leads()
        cfg.close()
        need = max(need, each)
        first = max(first, lead)
        leads = max(leads, n_leads)
        limit = int(values["limit_bytes"])
    # The other leads' extra is taken first, as the group's check and rltrain plan take it.
    taken = (leads - 1) * (first - need) if first > need else 0
    fit = (1 + (limit - first - taken) // need if limit >= first + taken else 0) if need > 0 else want
    if fit < want:
        log.info("sweep: %d trials per batch fit (%.2f MiB each at most%s, %.2f MiB available), not %d", fit,
                 need / 2**20, f", the first {first / 2**20:.2f} MiB" if first != need else "", limit / 2**20, want)
    return max(1, min(want, fit))


class _Heartbeat:
    """Stamps the given trials every interval from a thread until stopped."""

    def __init__(self, trials, interval: float):
        self.trials, self.interval = trials, interval
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_event.wait(self.interval):
            self.beat()

    def beat(self):
        now = time.time()
        for t in list(self.trials):
            try:
                t.set_user_attr(HEARTBEAT_ATTR, now)
            except Exception:  # noqa: BLE001 - finished meanwhile, or marked failed by another worker
                pass

    def __enter__(self):
        self.beat()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join()


def sweep(config, space, trials: int, storage: str, study: str, *, workers_batch: int = 8,
          device: str | None = None, out: str | os.PathLike | None = None, sets: list[str] | None = None,
          pruner: str = "median", prune_startup: int = 4, halving_factor: int = 3, sampler: str = "tpe",
          sampler_seed: int | None = None, objective: str = "last", heartbeat_s: float = 10.0,
          grace_s: float | None = None, max_batches: int | None = None, poll_s: float | None = None,
          requeue: bool = True, seed_batching: bool = True) -> SweepResult:
    """Runs one worker of a sweep until the study holds ``trials`` trials (complete, pruned or running) and none
    of them is still running; see docs/sweeps.md. ``config``: the base config (a path or a :class:`Config`), which
    must not hold a population; ``space``: the search space's YAML path; ``storage``: journal:PATH, sqlite:PATH or
    a URL; ``study``: its name (created when missing). Trials run ``workers_batch`` at a time (fewer when fewer fit
    in memory) as one population; each trial's run directory is ``out/trials/trial_<N>`` (``out`` defaults to the
    config's out_dir/sweep_<study>), and ``out/best.yaml`` and ``out/best.json`` hold the study's best so far.
    ``objective``: the trial's value, its final evaluation (``last``) or its best (``best``); maximised.
    ``requeue``: a trial whose worker died is marked failed and its parameters enqueued once more.
    ``seed_batching``: each population of one shape on a GPU runs one batched update graph (train.seed_batching;
    docs/seeds.md says what differs from a trial run alone); False gives each trial its own graphs."""
    optuna = _optuna()
    t_start = time.time()
    base = Config.from_file(config) if not isinstance(config, Config) else config.copy()
    for s in sets or []:
        base.set(s)
    if device:
        base.set(f"device={device}")
    if not seed_batching:  # on by default (the config's train.seed_batching decides otherwise)
        base.set("train.seed_batching=false")
    if base.to_dict().get("population"):
        raise RltError("the sweep's base config holds a population section: the sweep makes its own; remove it",
                       -2, "RLT_ECONFIG")
    base.validate()
    params = load_space(space, base)
    root = Path(out) if out else Path(base.get("out_dir")) / f"sweep_{study}"
    (root / "trials").mkdir(parents=True, exist_ok=True)
    (root / "batches").mkdir(parents=True, exist_ok=True)
    grace = grace_s if grace_s is not None else 3.0 * heartbeat_s
    poll = poll_s if poll_s is not None else min(heartbeat_s, 1.0)
    store = open_storage(storage)
    st = optuna.create_study(study_name=study, storage=store, direction="maximize", load_if_exists=True,
                             sampler=make_sampler(sampler, sampler_seed),
                             pruner=make_pruner(pruner, prune_startup, halving_factor))
    worker = f"{socket.gethostname()}-{os.getpid()}"
    per_batch = _batch_fit(base, max(1, workers_batch), params)
    dists = {p.key: p.distribution() for p in params}
    done = {"completed": [], "pruned": [], "failed": []}
    _INTERRUPTED.clear()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        _sweep_loop(st, store, base, params, dists, trials, per_batch, max_batches, grace, requeue, poll, root, worker,
                    objective, heartbeat_s, done)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    best = write_best(st, root)
    return SweepResult(done["completed"], done["pruned"], done["failed"], best, time.time() - t_start)


def _sweep_loop(st, store, base, params, dists, trials, per_batch, max_batches, grace, requeue, poll, root, worker,
                objective, heartbeat_s, done) -> None:
    optuna = _optuna()
    batches = 0
    all_failed = 0  # batches in a row whose every trial failed: a fault of the setup, not of the trials
    while max_batches is None or batches < max_batches:
        if _INTERRUPTED:
            raise KeyboardInterrupt
        if all_failed >= 3:
            raise RltError(f"the last {all_failed} batches failed in every trial (each trial's fail_reason says why: "
                           f"python -m rltrain.sweep.report); stopping this worker", -6, "RLT_ERUNTIME")
        fail_stale_trials(st, store, grace, requeue)
        room = trials - trials_in_play(st)
        # Trials enqueued again (a dead worker's) are in play but wait for a worker: they are asked first.
        room = max(room, len(st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))))
        if room <= 0:
            S = optuna.trial.TrialState
            if not st.get_trials(deepcopy=False, states=(S.RUNNING,)):
                break
            time.sleep(poll)  # other workers' trials still run: wait for them, or for their heartbeats to stop
            continue
        batch = []
        for _ in range(min(room, per_batch)):
            # One at a time, counting again before each: workers asking at once overshoot by at most a batch each.
            waiting = st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
            if batch and trials - trials_in_play(st) <= 0 and not waiting:
                break
            t = st.ask(dists)
            t.set_user_attr("worker", worker)
            batch.append(t)
        batches += 1
        failed_before = len(done["failed"])
        try:
            _run_batch(base, params, batch, st, root, worker, objective, heartbeat_s, done)
            all_failed = all_failed + 1 if len(done["failed"]) - failed_before == len(batch) else 0
        except NoFitError as exc:
            # The group's own check (every budget, the host's limits) refused what the planner allowed: those
            # trials are marked failed, and later batches are halved until one fits.
            if per_batch == 1:
                raise
            per_batch = max(1, per_batch // 2)
            log.warning("sweep: the batch did not fit (%s); batches of %d from now on", exc, per_batch)
        write_best(st, root)


def _population_yaml(params: list[Param], batch, names: list[str]) -> str:
    lines = ["population:", f"  name: [{', '.join(names)}]"]
    for p in params:
        if not p.shape:
            lines.append(f"  {p.key}: [{', '.join(format_value(t.params[p.key]) for t in batch)}]")
    return "\n".join(lines) + "\n"


# SIGINT and SIGTERM while a batch trains: every running group is asked to stop (each member writes its outputs), the
# batch's trials are told failed, and the worker ends (exit 130). The groups run inside C calls, where Python's
# default KeyboardInterrupt would be lost at a callback's boundary; this handler runs at the next progress report.
_ACTIVE: list = []
_INTERRUPTED: list = []


def _on_signal(signum, _frame) -> None:
    _INTERRUPTED.append(signum)
    for group in list(_ACTIVE):
        group.request_stop()


class _Population:
    """The trials of one shape in a batch: one rltrain group, its run directories and its pruning state."""

    def __init__(self, base: Config, params, trials, shape_sets, out_dir: Path, learn_from: int):
        self.trials, self.out_dir, self.learn_from = trials, out_dir, learn_from
        self.names = [f"trial_{t.number:05d}" for t in trials]
        cfg = base.copy()
        for s in shape_sets:
            cfg.set(s)
        cfg.load_string(_population_yaml(params, trials, self.names), "<sweep batch>")
        cfg.set(f"out_dir={json.dumps(str(out_dir))}")
        # Frequent reports: a pruned trial stops within a fraction of a second of its evaluation.
        if float(base.get("train.progress_every_s")) > 0.5:
            cfg.set("train.progress_every_s=0.5")
        self.cfg = cfg
        self.group = None
        self.error = None
        self.reported = {t.number: 0 for t in trials}
        self.pruned: set[int] = set()
        self.run_dirs = [out_dir / n for n in self.names]

    def on_progress(self, _report=None) -> bool:
        for k, t in enumerate(self.trials):
            if t.number in self.pruned:
                continue
            rows = _eval_rows(self.run_dirs[k] / "metrics.csv")
            total = self.group.member_progress(k).total_steps
            # Each evaluation is reported and judged on its own, so the pruner's decisions do not depend on how
            # many evaluations one callback finds.
            for step, value in rows[self.reported[t.number]:]:
                self.reported[t.number] += 1
                if not math.isfinite(value) or step <= self.learn_from:
                    continue
                t.report(value, step)
                if step < total and t.should_prune():
                    self.pruned.add(t.number)
                    self.group.stop_member(k)
                    log.info("sweep: trial %d pruned at step %d", t.number, step)
                    break
        return False

    def run(self) -> None:
        try:
            self.group.run(self.on_progress)
        except RltError as exc:
            self.error = exc
        except BaseException as exc:  # noqa: BLE001 - in a thread: kept for the caller
            self.error = exc
        self.on_progress()  # the last evaluations, written after the last report


def _run_batch(base: Config, params, batch, st, root: Path, worker: str, objective: str, heartbeat_s: float,
               done: dict) -> None:
    optuna = _optuna()
    S = optuna.trial.TrialState
    batch_dir = root / "batches" / f"{worker}-{batch[0].number:05d}"
    # Evaluations before learning starts are of the untrained policy: with a shared seed every trial's are the same,
    # and reported they would be each trial's best intermediate value, which MedianPruner compares, so nothing would
    # be pruned on what the hyperparameters did. Only those after the first update are reported.
    learn_from = int(base.get("train.start_steps"))
    if base.get("algo") == "dqn":
        learn_from = max(learn_from, int(base.get("dqn.learning_starts")))
    # One population per shape (the values of the shape keys), in the order their first trial was asked.
    by_shape: dict[tuple, list] = {}
    for t in batch:
        by_shape.setdefault(tuple(f"{p.key}={format_value(t.params[p.key])}" for p in params if p.shape), []).append(t)
    pops = []
    for i, (sets, trials) in enumerate(by_shape.items()):
        out_dir = batch_dir if len(by_shape) == 1 else batch_dir / f"shape_{i}"
        pops.append(_Population(base, params, trials, sets, out_dir, learn_from))
    pending = list(batch)
    log.info("sweep: %s runs trials %s as %d population(s)", worker, [t.number for t in batch], len(pops))

    def tell(t, state, value=None, reason=None):
        if reason:
            t.set_user_attr("fail_reason", reason)
        if t in pending:
            pending.remove(t)
        try:
            if state == S.COMPLETE:
                st.tell(t, value)
            else:
                st.tell(t, state=state)
        except Exception as exc:  # noqa: BLE001 - another worker marked it failed (no heartbeat seen)
            log.warning("sweep: trial %d could not be told: %s", t.number, exc)
            state = S.FAIL
        done[{S.COMPLETE: "completed", S.PRUNED: "pruned"}.get(state, "failed")].append(t.number)
        return state

    with _Heartbeat(pending, heartbeat_s):
        # Every population reserves its memory before any trains (one after another, so each sees the device's
        # free memory after the others), then they train side by side, each group in a thread of its own.
        started = []
        nofit = None
        for pop in pops:
            try:
                pop.group = Group(pop.cfg)
                started.append(pop)
            except RltError as exc:
                for t in pop.trials:
                    tell(t, S.FAIL, reason=str(exc))
                log.error("sweep: a population could not start: %s", exc)
                if isinstance(exc, NoFitError):
                    nofit = exc
        try:
            for pop in started:
                for k, t in enumerate(pop.trials):
                    t.set_user_attr("run_dir", str(pop.run_dirs[k]))
                    t.set_user_attr("sweep_dir", str(root))
                    link = root / "trials" / pop.names[k]
                    try:
                        if not link.exists():
                            link.symlink_to(os.path.relpath(pop.run_dirs[k], link.parent), target_is_directory=True)
                    except OSError:
                        pass
            _ACTIVE.extend(pop.group for pop in started)
            if _INTERRUPTED:  # the signal came while the groups were made: they stop at once
                for pop in started:
                    pop.group.request_stop()
            threads = [threading.Thread(target=pop.run, daemon=True) for pop in started[1:]]
            for th in threads:
                th.start()
            if started:
                started[0].run()
            for th in threads:
                th.join()
            for pop in started:
                for k, t in enumerate(pop.trials):
                    p = pop.group.member_progress(k)
                    value = p.best_eval_return if objective == "best" else p.last_eval_return
                    if t.number in pop.pruned:
                        state = tell(t, S.PRUNED)
                    elif pop.error is None and p.env_steps >= p.total_steps and math.isfinite(value):
                        state = tell(t, S.COMPLETE, value)
                    else:
                        state = tell(t, S.FAIL, reason=str(pop.error) if pop.error else
                                     "the worker was interrupted (SIGINT or SIGTERM)" if _INTERRUPTED else
                                     "the run ended without a final evaluation")
                    info = {"study": st.study_name, "trial": t.number, "state": state.name,
                            "value": value if math.isfinite(value) else None, "params": t.params, "worker": worker,
                            "intermediate": _eval_rows(pop.run_dirs[k] / "metrics.csv"),
                            "run_dir": str(pop.run_dirs[k])}
                    _write_atomic(pop.run_dirs[k] / "trial.json", json.dumps(info, indent=2) + "\n")
        finally:
            _ACTIVE.clear()
            for pop in started:
                pop.group.close()
    if _INTERRUPTED:  # SIGINT or SIGTERM: the trials were told failed above; this worker stops here
        raise KeyboardInterrupt
    if nofit is not None:
        raise nofit
