"""Sweeps on Optuna (rltrain.sweep): the search space's checks, a 12-trial sweep of td3_pendulum_fast by two worker
processes sharing a journal file (it finishes, prunes, writes each trial's directory, the best so far and the
report, and its best trial reproduces bit for bit when rerun from its config), and a killed worker whose trials
are marked failed while the study goes on, and --devices, a worker per listed device from one command. run_tests.sh
installs Optuna; without it these tests skip, saying so."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rltrain

optuna = pytest.importorskip("optuna", reason="Optuna is not installed: pip install optuna (run_tests.sh installs it)")

from rltrain.sweep import SpaceError, load_space, open_storage  # noqa: E402

# Short runs: 4000 steps (3000 updates) with an evaluation every 500 steps after learning starts at 1000.
SETS = ["train.total_steps=4000", "train.eval_every=500", "train.eval_episodes=3", "train.progress_every_s=0.2"]
SPACE = "td3.actor_lr: {log_uniform: [1e-4, 3e-3]}\ntd3.tau: [0.002, 0.005, 0.01]\n"


def _worker(configs, tmp_path, space, study, trials, extra=(), sets=SETS):
    cmd = [sys.executable, "-m", "rltrain.sweep", "--config", str(configs / "td3_pendulum_fast.yaml"),
           "--space", str(space), "--trials", str(trials), "--storage", f"journal:{tmp_path / 'study.journal'}",
           "--study", study, "--out", str(tmp_path / "sweep"), "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    return subprocess.Popen(cmd + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _study(tmp_path, name):
    return optuna.load_study(study_name=name, storage=open_storage(f"journal:{tmp_path / 'study.journal'}"))


def _wait_running(tmp_path, name, n, timeout=60.0):
    """The study's running trials with a heartbeat, once there are n of them (or what there is after timeout s)."""
    deadline = time.time() + timeout
    running = []
    while time.time() < deadline and len(running) < n:
        time.sleep(0.3)
        if (tmp_path / "study.journal").exists():
            try:
                running = [t for t in _study(tmp_path, name).trials
                           if t.state.name == "RUNNING" and "rltrain_heartbeat" in t.user_attrs]
            except KeyError:  # the study is not created yet
                running = []
    return running


def test_space_is_checked_against_the_schema(configs, tmp_path):
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    good = tmp_path / "good.yaml"
    good.write_text(SPACE + "td3.policy_delay: {int: [1, 3]}\ndqn.loss: [huber, mse]\n")
    params = load_space(good, cfg)
    assert [(p.key, p.kind) for p in params] == [("td3.actor_lr", "log_uniform"), ("td3.tau", "choice"),
                                                ("td3.policy_delay", "int"), ("dqn.loss", "choice")]
    assert params[1].choices == [0.002, 0.005, 0.01] and params[3].choices == ["huber", "mse"]
    cases = {
        # a typo: the key's line and column, and the nearest key
        "td3.actor_lr: {log_uniform: [1e-4, 3e-3]}\ntd3.tua: [0.002, 0.005]\n":
            (":2:1: unknown key 'td3.tua'; did you mean 'td3.tau'?",),
        # a value out of the key's range: the value's column
        "td3.actor_lr: {log_uniform: [1e-4, 3]}\n": (":1:36: key 'td3.actor_lr': entry 2: 3 is out of range",),
        # a key that changes shapes and cannot vary between trials, and a bad value of one that can
        "env.name: [pendulum, cartpole]\n": (":1:1: key 'env.name'", "the environment"),
        "td3.actor_hidden: [[64, 64], [64, 0]]\n": (":1:30: key 'td3.actor_hidden'", "out of range"),
        "train.batch_size: {int: [0, 128]}\n": (":1:26: key 'train.batch_size'", "out of range"),
        # fractions for an integer key
        "td3.policy_delay: {uniform: [1, 3]}\n": (":1:20:", "use int: [low, high]"),
        "td3.tau: {normal: [0, 1]}\n": (":1:11:", "'normal' is not a kind of range"),
        "td3.tau: {uniform: [0.1, 0.01]}\n": (":1:20:", "must be below high"),
    }
    for text, parts in cases.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(SpaceError) as info:
            load_space(bad, cfg)
        msg = str(info.value)
        assert msg.startswith(str(bad) + ":"), msg
        for part in parts:
            assert part in msg, (part, msg)
    # The command line refuses it with exit 2 before any trial starts.
    bad.write_text("td3.actor_lr: {log_uniform: [1e-4, 3e-3]}\ntd3.tua: [0.002, 0.005]\n")
    p = _worker(configs, tmp_path, bad, "refused", 4)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 2 and "bad.yaml:2:1: unknown key 'td3.tua'" in out, out
    assert not (tmp_path / "study.journal").exists() or not _study(tmp_path, "refused").trials


def test_a_worker_asks_only_for_the_trials_that_fit(configs, tmp_path):
    from rltrain.sweep.worker import _batch_fit

    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    need = cfg.plan_fit()[0]["need_bytes"]
    cfg.set(f"memory.budget_mb={need * 2.5 / 2**20!r}")
    assert _batch_fit(cfg, 8) == 2
    assert _batch_fit(cfg, 1) == 1
    # A group's members as rltrain plan counts them: on the CPU the first is planned as every other (no batched
    # library workspace), and each is one run's plan.
    group = cfg.copy()
    group.set("train.num_seeds=4")
    group.set("train.seed_batching=true")
    first, each = group.plan_group()
    assert first == each == need, (first, each, need)
    # One lead on the CPU, whatever train.seed_batches asks (nothing batches there), so the fit is unchanged.
    assert group.plan_group_leads() == 1
    cfg.set("train.seed_batches=4")
    assert _batch_fit(cfg, 8) == 2
    cfg.set("train.seed_batches=1")
    # A shape key's largest value is what is planned: hidden sizes of 400 need more than the configured 64.
    space = tmp_path / "space.yaml"
    space.write_text("td3.actor_hidden: [[64, 64], [400, 400]]\n")
    assert _batch_fit(cfg, 8, load_space(space, cfg)) < 2
    # Not even one trial fits: exit 3 before any trial is asked.
    space.write_text(SPACE)
    p = _worker(configs, tmp_path, space, "nofit", 4, sets=SETS + ["memory.budget_mb=0.01"])
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3 and "does not fit" in out, out
    assert not _study(tmp_path, "nofit").trials


def test_two_workers_sweep_prune_report_and_reproduce(configs, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    t0 = time.time()
    extra = ["--workers-batch", "3", "--pruner", "halving", "--sampler", "random"]
    workers = [_worker(configs, tmp_path, space, "td3", 12, extra + ["--sampler-seed", str(s)]) for s in (1, 2)]
    outs = [w.communicate(timeout=150)[0] for w in workers]
    for w, out in zip(workers, outs):
        assert w.returncode == 0, out
        assert "worker done" in out, out
    study = _study(tmp_path, "td3")
    states = [t.state.name for t in study.trials]
    done = states.count("COMPLETE") + states.count("PRUNED")
    # Workers count the study's trials before each ask: together they overshoot by at most a batch each.
    assert 12 <= done <= 12 + 2 * 3 and states.count("FAIL") == 0 and states.count("RUNNING") == 0, states
    assert states.count("PRUNED") >= 1, states
    assert states.count("COMPLETE") >= 1, states
    root = tmp_path / "sweep"
    for t in study.trials:
        run_dir = Path(t.user_attrs["run_dir"])
        info = json.loads((run_dir / "trial.json").read_text())
        assert info["trial"] == t.number and info["state"] == t.state.name and info["params"] == t.params
        assert (root / "trials" / f"trial_{t.number:05d}" / "config.yaml").is_file()
        if t.state.name == "PRUNED":  # stopped early: fewer steps than the run's length
            assert max(t.intermediate_values) < 4000, t.intermediate_values
        else:
            assert max(t.intermediate_values) == 4000, t.intermediate_values
    # Each batch's summary.csv names its trials' values.
    summaries = list((root / "batches").glob("*/summary.csv"))
    assert summaries and all(s.read_text().startswith("member,dir,seed,td3.actor_lr,td3.tau,status,") for s in summaries)
    # The study's best so far, written by the workers.
    best = json.loads((root / "best.json").read_text())
    assert best["trial"] == study.best_trial.number and best["value"] == study.best_value

    # The report: the table, the best config as a loadable YAML, and the plots.
    rep = subprocess.run([sys.executable, "-m", "rltrain.sweep.report", "td3", "--storage",
                          f"journal:{tmp_path / 'study.journal'}", "--out", str(tmp_path / "report")],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    out = tmp_path / "report"
    rows = (out / "trials.csv").read_text().splitlines()
    assert rows[0].startswith("number,state,value,td3.actor_lr,td3.tau") and len(rows) == 1 + len(study.trials)
    for plot in ("objective.png", "parallel.png"):
        assert (out / plot).stat().st_size > 1000, plot
    best_cfg = rltrain.Config.from_file(out / "best.yaml")
    assert best_cfg.get("td3.actor_lr") == study.best_params["td3.actor_lr"]

    # The best trial reproduces bit for bit from its config alone.
    best_cfg.set(f"out_dir={json.dumps(str(tmp_path / 'rerun'))}")
    with rltrain.Trainer(best_cfg) as tr:
        tr.run()
    trial_dir = Path(study.best_trial.user_attrs["run_dir"])
    assert (tmp_path / "rerun" / "final.ckpt").read_bytes() == (trial_dir / "final.ckpt").read_bytes()
    assert time.time() - t0 < 150


def test_trials_of_different_shapes_run_as_separate_populations(configs, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("td3.actor_hidden: [[32, 32], [48, 48]]\ntrain.batch_size: [64]\ntd3.tau: [0.005, 0.01]\n")
    w = _worker(configs, tmp_path, space, "shapes", 4, ["--workers-batch", "4", "--pruner", "none", "--sampler",
                                                         "random", "--sampler-seed", "3"],
                sets=["train.total_steps=1500", "train.eval_every=500", "train.eval_episodes=1"])
    out, _ = w.communicate(timeout=120)
    assert w.returncode == 0, out
    study = _study(tmp_path, "shapes")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 4
    shapes = {t.params["td3.actor_hidden"] for t in study.trials}
    for t in study.trials:
        run_dir = Path(t.user_attrs["run_dir"])
        cfg = rltrain.Config.from_file(run_dir / "config.yaml")
        assert cfg.get("td3.actor_hidden") == json.loads(t.params["td3.actor_hidden"])
        assert cfg.get("train.batch_size") == 64 and cfg.get("td3.tau") == t.params["td3.tau"]
        # Each shape is a population of its own (its own directory and summary.csv) when the batch has several.
        if len(shapes) > 1:
            assert run_dir.parent.name.startswith("shape_") and (run_dir.parent / "summary.csv").is_file()


def test_a_killed_workers_trials_are_marked_failed_and_the_study_goes_on(configs, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    beat = ["--heartbeat", "0.3", "--grace", "2"]
    # Worker A: two trials far too long to finish, killed once both run.
    a = _worker(configs, tmp_path, space, "killed", 4, ["--workers-batch", "2"] + beat,
                sets=["train.total_steps=10000000", "train.eval_every=1000", "train.eval_episodes=1"])
    running = _wait_running(tmp_path, "killed", 2)
    assert len(running) == 2, "worker A's trials did not start"
    a.send_signal(signal.SIGKILL)
    a.communicate(timeout=30)
    # Worker B finishes the study: A's trials, no longer stamped, are marked failed, and two more take their place.
    b = _worker(configs, tmp_path, space, "killed", 4, ["--workers-batch", "2"] + beat)
    out, _ = b.communicate(timeout=120)
    assert b.returncode == 0, out
    trials = _study(tmp_path, "killed").trials
    by_state = {}
    for t in trials:
        by_state.setdefault(t.state.name, []).append(t)
    assert sorted(t.number for t in by_state.get("FAIL", [])) == sorted(t.number for t in running), by_state
    assert all("stopped sending heartbeats" in t.user_attrs["fail_reason"] for t in by_state["FAIL"])
    assert len(by_state.get("COMPLETE", [])) + len(by_state.get("PRUNED", [])) == 4, by_state
    assert "RUNNING" not in by_state and "WAITING" not in by_state
    # Each of them was enqueued again with its parameters, and B ran the retries.
    retries = {t.user_attrs["retry_of"]: t for t in trials if "retry_of" in t.user_attrs}
    assert sorted(retries) == sorted(t.number for t in running), retries
    for t in running:
        assert retries[t.number].params == t.params and retries[t.number].state.name in ("COMPLETE", "PRUNED")
    if os.name == "posix":
        assert a.returncode == -signal.SIGKILL


def test_sigint_stops_the_worker_and_tells_its_trials(configs, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    w = _worker(configs, tmp_path, space, "interrupted", 4, ["--workers-batch", "2", "--heartbeat", "0.3"],
                sets=["train.total_steps=10000000", "train.eval_every=1000", "train.eval_episodes=1"])
    running = _wait_running(tmp_path, "interrupted", 2)
    assert len(running) == 2, "the worker's trials did not start"
    w.send_signal(signal.SIGINT)
    out, _ = w.communicate(timeout=60)
    assert w.returncode == 130 and "interrupted" in out, out
    trials = _study(tmp_path, "interrupted").trials
    assert [t.state.name for t in trials] == ["FAIL", "FAIL"], trials
    assert all("interrupted" in t.user_attrs["fail_reason"] for t in trials)
    # Each member was stopped, wrote its outputs and says so.
    for t in trials:
        summary = Path(t.user_attrs["run_dir"]).parent / "summary.csv"
        assert ",stopped," in summary.read_text()


def test_devices_runs_a_worker_per_device_and_forwards_sigint(configs, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    # Refused before anything runs: both --device and --devices, and a list with an empty entry.
    for bad in (["--device", "cpu", "--devices", "cpu,cpu"], ["--devices", " ,cpu"]):
        r = _worker(configs, tmp_path, space, "refused", 2, bad)
        out, _ = r.communicate(timeout=60)
        assert r.returncode == 2 and "--devices" in out, out
    w = _worker(configs, tmp_path, space, "devices", 4, ["--workers-batch", "1", "--heartbeat", "0.3", "--sampler",
                "random", "--sampler-seed", "5", "--devices", "cpu,cpu"],
                sets=["train.total_steps=10000000", "train.eval_every=1000", "train.eval_episodes=1"])
    running = _wait_running(tmp_path, "devices", 2)
    assert len(running) == 2, "the two workers' trials did not start"
    # One trial from each worker process, their samplers seeded 5 and 6: different points.
    assert len({t.user_attrs["worker"] for t in running}) == 2, [t.user_attrs for t in running]
    assert running[0].params != running[1].params, [t.params for t in running]
    w.send_signal(signal.SIGINT)  # the launcher's own process only: it forwards the signal to each worker once
    out, _ = w.communicate(timeout=60)
    assert w.returncode == 130, out
    lines = out.splitlines()
    for k in (0, 1):
        assert any(l.startswith(f"[cpu #{k}] ") and "interrupted" in l for l in lines), out
    assert "2 workers (cpu, cpu) ended with exit 130, 130" in out, out
    trials = _study(tmp_path, "devices").trials
    assert [t.state.name for t in trials] == ["FAIL", "FAIL"], trials


def test_workers_do_not_outlive_a_killed_launcher(configs, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    w = _worker(configs, tmp_path, space, "orphans", 4, ["--workers-batch", "1", "--heartbeat", "0.3",
                "--devices", "cpu,cpu"],
                sets=["train.total_steps=10000000", "train.eval_every=1000", "train.eval_episodes=1"])
    assert len(_wait_running(tmp_path, "orphans", 2)) == 2, "the two workers' trials did not start"
    w.send_signal(signal.SIGKILL)  # no forwarding: the kernel's parent-death signal must stop the workers
    w.communicate(timeout=30)
    deadline = time.time() + 60
    states = []
    while time.time() < deadline:
        states = [t.state.name for t in _study(tmp_path, "orphans").trials]
        if states == ["FAIL", "FAIL"]:
            break
        time.sleep(0.3)
    assert states == ["FAIL", "FAIL"], states
    assert all("interrupted" in t.user_attrs["fail_reason"] for t in _study(tmp_path, "orphans").trials)
