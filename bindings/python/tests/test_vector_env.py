"""Gymnasium vector environments through the batched callbacks (reset_batch, step_batch): an AsyncVectorEnv, a
SyncVectorEnv and the same sub-environments given one by one train the same run; episode ends are where
Gymnasium puts them; an exception in a worker process comes back as itself and nothing hangs."""

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import rltrain
import rltrain.gym

gymnasium = pytest.importorskip("gymnasium")


def checkpoint_tensors(path) -> tuple[bytes, dict]:
    """A checkpoint's metadata and its tensors by name (engine/checkpoint.h, version 1): each record's header
    after the name, and its data."""
    d = Path(path).read_bytes()
    assert d[:8] == b"RLTCKPT1"
    meta_len = int.from_bytes(d[24:32], "little")
    meta, off, tensors = d[32:32 + meta_len], 32 + meta_len, {}
    while d[off:off + 4] == b"TNSR":
        name = d[off + 4:off + 68].rstrip(b"\0").decode()
        size = int.from_bytes(d[off + 108:off + 116], "little")
        data = off + 120 + (-(off + 120)) % 64
        tensors[name] = (d[off + 68:off + 120], d[data:data + size])
        off = data + size
    assert d[off:off + 6] == b"RLTEND" and int.from_bytes(d[off + 8:off + 12], "little") == len(tensors)
    return meta, tensors


def same_run_state(per_instance, vector) -> bool:
    """The checkpoint of environments stepped one by one against a vector environment's: the same metadata and
    tensors, byte for byte, but the environments' own state (the adapter's state for a SyncVectorEnv, none for an
    AsyncVectorEnv, whose sub-environments live in its workers, so its checkpoints do not resume)."""
    meta_a, a = checkpoint_tensors(per_instance)
    meta_b, b = checkpoint_tensors(vector)
    assert "trainer.user_env_state" in a
    a.pop("trainer.user_env_state")
    b.pop("trainer.user_env_state", None)
    return meta_a == meta_b and a == b
vector = pytest.importorskip("gymnasium.vector")
if not hasattr(vector, "AutoresetMode"):
    pytest.skip("gymnasium < 1.1 has no autoreset modes or reset_mask", allow_module_level=True)
AutoresetMode = vector.AutoresetMode

# DQN on CartPole: episodes of every length, ended by termination (and by a time limit below).
DQN = ("algo: dqn\nseed: 4\ndevice: cpu\ntrain: {batch_size: 16, eval_every: 1000, eval_episodes: 2}\n"
       "replay: {capacity: 2000}\nnetwork: {hidden: [16]}\ndqn: {learning_starts: 200}\n")


def cartpole():
    return gymnasium.make("CartPole-v1")


def rows(path):
    """metrics.csv's rows less wall_s, which differs between runs."""
    with open(path) as f:
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(f)]


def run(env, tmp_path, name, **sets):
    cfg = rltrain.Config.from_string(DQN, "dqn.yaml")
    for k, v in sets.items():
        cfg.set(k.replace("__", "."), v)
    events = []
    result = rltrain.gym.train(env, cfg, total_steps=2000, num_envs=4, out_dir=tmp_path / name, callback=events.append)
    episodes = [(e["step"], e["episodes"], e["return"], e["updates"]) for e in events if e["kind"] == "episode"]
    return result, episodes


@pytest.mark.parametrize("time_limit", [0, 25])
def test_async_and_sync_vector_envs_train_the_per_instance_run(tmp_path, time_limit):
    """AsyncVectorEnv in each autoreset mode (and with shared_memory=False in SAME_STEP), SyncVectorEnv, and the
    id with num_envs=4 (four environments stepped one by one): the same final.ckpt byte for byte, the same
    metrics.csv, the same episode events (step, count, return, updates). time_limit 25 adds the trainer's own
    limit (env.max_episode_steps), which ends episodes that the vector environment did not end itself."""
    sets = {"env__max_episode_steps": time_limit} if time_limit else {}
    ref, ref_episodes = run("CartPole-v1", tmp_path, "per_instance", **sets)
    assert ref["episodes"] > 40 and len(ref_episodes) == ref["episodes"]
    lengths = [int(r["length"]) for r in rows(tmp_path / "per_instance" / "metrics.csv") if r["kind"] == "episode"]
    if time_limit:  # the trainer's limit did end episodes
        assert max(lengths) == time_limit and lengths.count(time_limit) >= 3
    makers = {
        "async_next_step": lambda: vector.AsyncVectorEnv([cartpole] * 4),
        "async_same_step": lambda: vector.AsyncVectorEnv([cartpole] * 4, autoreset_mode=AutoresetMode.SAME_STEP),
        "async_disabled": lambda: vector.AsyncVectorEnv([cartpole] * 4, autoreset_mode=AutoresetMode.DISABLED),
        "async_same_step_pipes": lambda: vector.AsyncVectorEnv([cartpole] * 4, shared_memory=False,
                                                               autoreset_mode=AutoresetMode.SAME_STEP),
        "sync_next_step": lambda: vector.SyncVectorEnv([cartpole] * 4),
        "sync_same_step": lambda: vector.SyncVectorEnv([cartpole] * 4, autoreset_mode=AutoresetMode.SAME_STEP),
    }
    for name, make in makers.items():
        env = make()
        try:
            result, episodes = run(env, tmp_path, name, **sets)
        finally:
            env.close()
        ref_ckpt = tmp_path / "per_instance" / "final.ckpt"
        assert same_run_state(ref_ckpt, tmp_path / name / "final.ckpt"), name
        assert rows(tmp_path / name / "metrics.csv") == rows(tmp_path / "per_instance" / "metrics.csv"), name
        assert episodes == ref_episodes, name
        assert result["evaluations"] == ref["evaluations"] and result["updates"] == ref["updates"], name
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["env"] == "CartPole-v1" and summary["allocations_after_init"] == 0


class EpisodeLog(vector.VectorWrapper):
    """Collects, in the main process, the (return, length) that each sub-environment's RecordEpisodeStatistics
    (inside the worker) reports at the end of its episodes, in the order of the steps and sub-environments."""

    def __init__(self, env):
        super().__init__(env)
        self.ends = []

    def step(self, actions):
        obs, rew, term, trunc, info = self.env.step(actions)
        for k in np.flatnonzero(info.get("_episode", [])):
            self.ends.append((float(info["episode"]["r"][k]), int(info["episode"]["l"][k])))
        return obs, rew, term, trunc, info


def recorded_cartpole():
    return gymnasium.wrappers.RecordEpisodeStatistics(gymnasium.make("CartPole-v1"))


def test_vector_episode_ends_are_gymnasiums(tmp_path):
    """The episode rows of metrics.csv are the episodes that Gymnasium's RecordEpisodeStatistics counts in the
    worker processes: the same returns and lengths in the same order, so no transition is lost or added at an
    autoreset (NEXT_STEP, Gymnasium's default: the step after an end would be a reset with reward 0)."""
    env = EpisodeLog(vector.AsyncVectorEnv([recorded_cartpole] * 4))
    try:
        result, episodes = run(env, tmp_path, "logged")
    finally:
        env.close()
    with open(tmp_path / "logged" / "metrics.csv") as f:
        ends = [(float(r["return"]), int(r["length"])) for r in csv.DictReader(f) if r["kind"] == "episode"]
    assert len(ends) == result["episodes"] > 40
    assert ends == env.ends
    assert [r for _, _, r, _ in episodes] == [r for r, _ in ends]
    assert sum(length for _, length in ends) <= 2000 and len({length for _, length in ends}) > 5


WORKER_FAILS = textwrap.dedent("""
    import json, sys, time
    import gymnasium, rltrain, rltrain.gym

    class Breaks(gymnasium.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.steps = 0

        def step(self, action):
            self.steps += 1
            if self.steps == 60:
                raise RuntimeError("the simulator broke in its worker")
            return self.env.step(action)

    def make():
        return Breaks(gymnasium.make("CartPole-v1"))

    cfg = rltrain.Config.from_string(sys.argv[2], "dqn.yaml")
    env = gymnasium.vector.AsyncVectorEnv([make] * 4)
    t0 = time.monotonic()
    try:
        rltrain.gym.train(env, cfg, total_steps=2000, out_dir=sys.argv[1], eval_env=make())
        print("no exception")
    except Exception as exc:
        print(f"raised {type(exc).__name__}: {exc}")
    env.close()
    print(f"closed after {time.monotonic() - t0:.1f}s")
""")


def test_worker_exception_surfaces_and_nothing_hangs(tmp_path):
    """A sub-environment that raises in its worker process: train() raises that exception (type and message), the
    trainer still writes its outputs (summary.json: failed, at the step it reached), and closing the vector
    environment returns, as does the process (run apart, with a timeout)."""
    script = tmp_path / "fails.py"
    script.write_text(WORKER_FAILS)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "run"), DQN], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "raised RuntimeError: the simulator broke in its worker" in p.stdout, p.stdout + p.stderr
    assert "closed after" in p.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # The 60th step of each worker fails: 59 vector steps of 4 went through.
    assert summary["status"] == "failed" and summary["env_steps"] == 59 * 4


def test_vector_env_refusals(tmp_path):
    cfg = rltrain.Config.from_string(DQN, "dqn.yaml")
    # Its workers keep a pending NEXT_STEP autoreset through a masked reset: the step after would not be one.
    env = vector.AsyncVectorEnv([cartpole] * 2, shared_memory=False)
    try:
        with pytest.raises(ValueError, match="SAME_STEP"):
            rltrain.gym.train(env, cfg, total_steps=100, out_dir=tmp_path / "a")
    finally:
        env.close()
    env = vector.SyncVectorEnv([cartpole] * 2)
    try:
        with pytest.raises(ValueError, match="vector environment has 2"):
            rltrain.gym.train(env, cfg, total_steps=100, num_envs=4, out_dir=tmp_path / "b")
    finally:
        env.close()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_gym_module_cli_vector(tmp_path, configs):
    """python -m rltrain.gym --vector async (gymnasium.make_vec, a worker process per environment) trains the
    run of the copies stepped one by one: the same results and final.ckpt."""
    base = [sys.executable, "-m", "rltrain.gym", "--config", str(configs / "td3_pendulum_fast.yaml"), "--env",
            "Pendulum-v1", "--steps", "800", "--json", "--set", "train.start_steps=200", "--set", "env.num_envs=4",
            "--set", "train.eval_every=400", "--set", "train.eval_episodes=1"]
    results = {}
    for name, extra in (("copies", []), ("async", ["--vector", "async"])):
        p = subprocess.run(base + ["--set", f"out_dir={tmp_path / name}"] + extra, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        results[name] = json.loads(p.stdout)
    assert results["async"]["evaluations"] == results["copies"]["evaluations"]
    assert results["async"]["episodes"] == results["copies"]["episodes"] == 4
    assert same_run_state(tmp_path / "copies" / "final.ckpt", tmp_path / "async" / "final.ckpt")


class DictEnv(gymnasium.Env):
    """Dict observations (an 8 x 8 uint8 screen and two floats) whose episodes end at random (terminated) or at
    the registered 10-step limit (truncated)."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Dict({
            "screen": gymnasium.spaces.Box(0, 255, (1, 8, 8), np.uint8),
            "stats": gymnasium.spaces.Box(-1, 1, (2,), np.float32),
        })
        self.action_space = gymnasium.spaces.Discrete(2)

    def _obs(self):
        screen = np.zeros((1, 8, 8), np.uint8)
        screen[0, self.np_random.integers(8), self.np_random.integers(8)] = 255
        return {"screen": screen, "stats": self.np_random.uniform(-1, 1, 2).astype(np.float32)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        obs = self._obs()
        return obs, float(obs["stats"][0] * (int(action) - 0.5)), bool(self.np_random.uniform() < 0.15), False, {}


gymnasium.register("RltTestVecDict-v0", entry_point=DictEnv, max_episode_steps=10)

DICT_DQN = """
algo: dqn
seed: 2
device: cpu
train: {batch_size: 16, eval_every: 400, eval_episodes: 2}
replay: {capacity: 1000}
dqn: {learning_starts: 100}
network:
  hidden: [16]
  inputs:
    - {name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 4, kernel: 3}]}
    - {name: stats, shape: [2]}
"""


def test_vector_env_dict_observations(tmp_path):
    """Dict observations through a vector environment (batched parts flattened row by row, SAME_STEP's
    info["final_obs"] one dict per row): the run of the copies stepped one by one. Both vector environments are
    made before either trains: Gymnasium 1.2 writes each one's autoreset mode into the metadata dict that their
    sub-environments' class shares, so the adapter must read the mode each steps with."""
    cfg = rltrain.Config.from_string(DICT_DQN, "dict.yaml")
    ref = rltrain.gym.train("RltTestVecDict-v0", cfg, total_steps=800, num_envs=4, out_dir=tmp_path / "copies")
    assert ref["episodes"] > 40
    make = lambda: gymnasium.make("RltTestVecDict-v0")  # noqa: E731
    for name, env in (("sync", vector.SyncVectorEnv([make] * 4)),
                      ("async_same_step", vector.AsyncVectorEnv([make] * 4, autoreset_mode=AutoresetMode.SAME_STEP))):
        try:
            result = rltrain.gym.train(env, cfg, total_steps=800, out_dir=tmp_path / name)
        finally:
            env.close()
        assert result["evaluations"] == ref["evaluations"] and result["episodes"] == ref["episodes"], name
        assert same_run_state(tmp_path / "copies" / "final.ckpt", tmp_path / name / "final.ckpt"), name
