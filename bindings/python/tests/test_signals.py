"""Ctrl-C and SIGTERM in every Python entry point stop the run after its current step, as the native CLI does:
the outputs and final.ckpt written, summary.json "stopped", exit 5 or KeyboardInterrupt after that, and a resume
that ends byte for byte where the run that was never stopped ends. The signal comes at random moments (seeded,
so a failure repeats), a few times per entry point, to keep the file quick."""

import csv
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import rltrain
import rltrain.gym

gymnasium = pytest.importorskip("gymnasium")

SETS = {"train.total_steps": 3000, "train.start_steps": 500, "train.eval_every": 500, "train.eval_episodes": 1,
        "train.progress_every_s": 0.05, "checkpoint.best": False}


def quick(configs, out_dir, **more) -> rltrain.Config:
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("out_dir", str(out_dir))
    for k, v in {**SETS, **more}.items():
        cfg.set(k, v)
    return cfg


def metrics_rows(run: Path) -> list[list[str]]:
    """metrics.csv without its wall_s column, which differs run to run."""
    with open(run / "metrics.csv") as f:
        rows = list(csv.reader(f))
    wall = rows[0].index("wall_s")
    return [r[:wall] + r[wall + 1:] for r in rows]


def same_run(a: Path, b: Path) -> None:
    assert (a / "final.ckpt").read_bytes() == (b / "final.ckpt").read_bytes()
    assert metrics_rows(a) == metrics_rows(b)


def status(run: Path) -> str:
    return json.loads((run / "summary.json").read_text())["status"]


class SignalDuringRun:
    """A progress callback that sends ``sig`` to this process during the run: from inside the callback at report
    ``at`` (the main thread is then in a ctypes callback, where Python's KeyboardInterrupt used to be lost), or,
    with ``at`` None, from another thread right after the first report (the main thread is then in C)."""

    def __init__(self, at, sig=signal.SIGINT):
        self.at, self.sig, self.n = at, sig, 0
        self.thread = None

    def __call__(self, p) -> bool:
        self.n += 1
        if self.at is None and self.thread is None:
            self.thread = threading.Thread(target=os.kill, args=(os.getpid(), self.sig))
            self.thread.start()
        elif self.n == self.at:
            os.kill(os.getpid(), self.sig)
        return False


# ---------------------------------------------------------------------------------------------------
# python -m rltrain.gym: exit 5, and the printed command resumes it bit for bit
# ---------------------------------------------------------------------------------------------------
def gym_cmd(configs, out_dir, *extra):
    sets = [a for k, v in SETS.items() for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
    return [sys.executable, "-m", "rltrain.gym", "--config", str(configs / "td3_pendulum_fast.yaml"), "--env",
            "Pendulum-v1", *sets, "--set", f"out_dir={out_dir}", *extra]


def interrupt_cli(cmd, rng, sig, group=False):
    """Starts cmd, waits for its first progress line (training has begun), sends sig at a random moment of the
    run (to its whole process group when group: what Ctrl-C in a terminal does) and returns (rc, stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    first = p.stdout.readline()
    assert "step" in first, first + p.stderr.read()
    time.sleep(rng.uniform(0.0, 0.25))
    if group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    return p.returncode, first + out, err


def test_gym_module_stops_on_signals_and_resumes_bit_for_bit(tmp_path, configs):
    ref = tmp_path / "ref"
    done = subprocess.run(gym_cmd(configs, ref, "--quiet"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no time limit" not in done.stderr  # Pendulum-v1's TimeLimit (200 steps) is the trainer's limit
    rng = random.Random(41)
    stopped = 0
    for i in range(5):
        run = tmp_path / f"run{i}"
        sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
        rc, out, err = interrupt_cli(gym_cmd(configs, run), rng, sig, group=sig == signal.SIGINT)
        assert "Exception ignored" not in err and "returned -1" not in err, err
        if rc == 0:  # the signal came after the last step: a finished run
            same_run(run, ref)
            continue
        assert rc == 5, (rc, err)
        stopped += 1
        assert status(run) == "stopped"
        resume = [line for line in err.splitlines() if line.startswith("continue with  ")]
        assert len(resume) == 1, err
        cmd = shlex.split(resume[0][len("continue with  "):])
        assert cmd[:3] == ["python", "-m", "rltrain.gym"] and cmd[-2:] == ["--resume", str(run / "final.ckpt")]
        assert f"out_dir={run}" in cmd  # every --set of the stopped run
        again = subprocess.run([sys.executable, *cmd[1:]], capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert status(run) == "finished"
        same_run(run, ref)
    assert stopped >= 3


def test_gym_module_async_vector_stops_on_ctrl_c(tmp_path, configs):
    """Ctrl-C reaches the AsyncVectorEnv's workers too (one process group): they ignore it, and the run stops
    after its step with exit 5; a vector environment's checkpoint does not resume, and the message says so."""
    run = tmp_path / "vec"
    cmd = gym_cmd(configs, run, "--vector", "async", "--set", "env.num_envs=2")
    rc, out, err = interrupt_cli(cmd, random.Random(7), signal.SIGINT, group=True)
    assert rc == 5 and status(run) == "stopped", err
    assert "Exception ignored" not in err and "KeyboardInterrupt" not in err, err
    assert "cannot be resumed" in err


# ---------------------------------------------------------------------------------------------------
# In-process: Trainer.run, Group.run, rltrain.gym.train (one environment, vector environments)
# ---------------------------------------------------------------------------------------------------
def test_trainer_run_stops_on_sigint_then_raises_and_resumes(tmp_path, configs):
    with rltrain.Trainer(quick(configs, tmp_path / "ref")) as tr:
        tr.run()
    before = signal.getsignal(signal.SIGINT)
    rng = random.Random(3)
    for i in range(3):
        cfg = quick(configs, tmp_path / f"t{i}")
        with rltrain.Trainer(cfg) as tr:
            with pytest.raises(KeyboardInterrupt):
                tr.run(progress=SignalDuringRun(None if i == 0 else rng.randint(1, 5)))
            assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back
        assert status(tmp_path / f"t{i}") == "stopped"
        with rltrain.Trainer(cfg) as tr:
            tr.resume(tmp_path / f"t{i}" / "final.ckpt")
            tr.run()
        same_run(tmp_path / f"t{i}", tmp_path / "ref")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_trainer_run_sigterm_goes_to_the_callers_handler(tmp_path, configs, sig):
    # SIGHUP (a closed terminal or ssh session) stops the run like SIGTERM, as in the native CLI.
    got = []
    previous = signal.signal(sig, lambda s, f: got.append(s))
    try:
        with rltrain.Trainer(quick(configs, tmp_path / "t")) as tr:
            p = tr.run(progress=SignalDuringRun(2, sig))
        assert got == [sig] and p.env_steps < 3000 and status(tmp_path / "t") == "stopped"
    finally:
        signal.signal(sig, previous)


def test_group_run_stops_on_sigint(tmp_path, configs):
    cfg = quick(configs, tmp_path / "g").set("train.num_seeds", 2)
    with rltrain.Group(cfg) as g:
        with pytest.raises(KeyboardInterrupt):
            g.run(progress=SignalDuringRun(None))
    with open(tmp_path / "g" / "summary.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["stopped", "stopped"]
    with rltrain.Group(cfg) as g:
        g.resume("final.ckpt")
        assert g.run().env_steps == 6000


@pytest.mark.parametrize("how", ["one", "sync", "async"])
def test_gym_train_stops_on_sigint(tmp_path, configs, how):
    """One environment and a SyncVectorEnv resume bit for bit; an AsyncVectorEnv's run stops the same way, and its
    checkpoint (no sub-environment state: they live in the workers) is refused by name."""
    cfg = quick(configs, tmp_path / "ref")
    same = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}
    made = []

    def env_for_run():
        if how == "one":
            return "Pendulum-v1", {}
        made.append(gymnasium.make_vec("Pendulum-v1", num_envs=2, vectorization_mode=how, vector_kwargs=same))
        # Gymnasium's batch_space seeds sub-environment 0's observation space (the vector's single one) from the OS
        # at construction; nothing samples it, but the checkpoint keeps it: seed it, so two runs compare byte for byte.
        made[-1].single_observation_space.seed(0)
        return made[-1], {"eval_env": "Pendulum-v1"}

    try:
        env, kw = env_for_run()
        rltrain.gym.train(env, cfg, **kw)
        out = tmp_path / "stopped"
        env, kw = env_for_run()
        with pytest.raises(KeyboardInterrupt):  # from inside an environment step (the report's callback)
            rltrain.gym.train(env, cfg, out_dir=out, callback=SignalDuringRun(3), **kw)
        assert status(out) == "stopped"
        if how == "async":
            with pytest.raises(rltrain.RltError, match="AsyncVectorEnv"):
                rltrain.gym.train(env, cfg, out_dir=out, resume=out / "final.ckpt", **kw)
        else:  # the same environment objects resume the run (a SyncVectorEnv's sub-environments are restored)
            rltrain.gym.train(env, cfg, out_dir=out, resume=out / "final.ckpt", **kw)
            same_run(out, tmp_path / "ref")
    finally:
        for v in made:
            v.close()


def test_gym_train_seeds_stop_on_sigint_and_resume(tmp_path, configs):
    cfg = quick(configs, tmp_path / "ref")
    rltrain.gym.train("Pendulum-v1", cfg, seeds=[1, 2])
    out = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        rltrain.gym.train("Pendulum-v1", cfg, seeds=[1, 2], out_dir=out, callback=SignalDuringRun(None))
    rltrain.gym.train("Pendulum-v1", cfg, seeds=[1, 2], out_dir=out, resume="final.ckpt")
    for s in (1, 2):
        same_run(out / f"seed_{s}", tmp_path / "ref" / f"seed_{s}")


def test_unpicklable_state_is_refused_by_name(tmp_path, configs):
    """A checkpoint's environment state is untrusted: a global the environment's state did not use is refused."""
    import pickle

    reader = rltrain.gym._StateUnpickler(pickle.dumps({"x": os.system}), {("builtins", "dict")})
    with pytest.raises(pickle.UnpicklingError, match="system"):
        reader.load()


class SignalAtStep(gymnasium.Wrapper):
    """Sends SIGINT to this process from inside the evaluation environment's step number ``countdown`` (a class
    attribute, so that the wrapper adds nothing to the state that checkpoints keep); None: never."""

    countdown = None

    def step(self, action):
        if SignalAtStep.countdown is not None:
            SignalAtStep.countdown -= 1
            if SignalAtStep.countdown == 0:
                os.kill(os.getpid(), signal.SIGINT)
        return self.env.step(action)


@pytest.mark.parametrize("at", [1, 250, 1001])
def test_gym_train_stopped_during_an_evaluation_resumes_bit_for_bit(tmp_path, configs, at):
    """A stop inside an evaluation cuts it; the checkpoint keeps the evaluation environment's state from before
    it, and the resumed run does the whole evaluation again, as the run that was never stopped did."""
    cfg = quick(configs, tmp_path / "ref", **{"train.eval_episodes": 2})

    def run(**kw):
        return rltrain.gym.train("Pendulum-v1", cfg, eval_env=SignalAtStep(gymnasium.make("Pendulum-v1")), **kw)

    run()
    out = tmp_path / "stopped"
    SignalAtStep.countdown = at
    try:
        with pytest.raises(KeyboardInterrupt):
            run(out_dir=out)
    finally:
        SignalAtStep.countdown = None
    assert status(out) == "stopped"
    run(out_dir=out, resume=out / "final.ckpt")
    same_run(out, tmp_path / "ref")


def test_an_ignored_sigint_stays_ignored(tmp_path, configs):
    """A process that ignores SIGINT (a background job, nohup) trains on through it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with rltrain.Trainer(quick(configs, tmp_path / "t")) as tr:
            p = tr.run(progress=SignalDuringRun(2))
        assert p.env_steps == 3000 and status(tmp_path / "t") == "finished"
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
