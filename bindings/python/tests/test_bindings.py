"""Tests of the rltrain Python bindings: errors, the agent API with numpy, checkpoints, struct layouts
against the C header, the trainer, the Gymnasium adapter and its run directory, and (marker "learning")
learning on Gymnasium's Pendulum-v1 and MuJoCo's InvertedPendulum-v5 with TD3 and CartPole-v1 with DQN."""

import csv
import ctypes
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import rltrain
import rltrain.gym
from rltrain import _native

gymnasium = pytest.importorskip("gymnasium")

PENDULUM_OBS = rltrain.Space.box(3)
PENDULUM_ACT = rltrain.Space.box(1, low=-2.0, high=2.0)


def small_td3(**overrides) -> rltrain.Config:
    """A quick TD3 config: 32-32 networks, small batch and replay."""
    cfg = rltrain.Config.from_string(
        "algo: td3\nseed: 5\ndevice: cpu\ntrain: {batch_size: 16, start_steps: 50}\n"
        "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 1000}\n",
        "small_td3.yaml",
    )
    for k, v in overrides.items():
        cfg.set(k, v)
    return cfg


def random_transitions(rng, n, obs_dim=3, low=-2.0, high=2.0):
    obs = rng.standard_normal((n, obs_dim)).astype(np.float32)
    return (obs, rng.uniform(low, high, (n, 1)).astype(np.float32), rng.standard_normal(n).astype(np.float32),
            rng.standard_normal((n, obs_dim)).astype(np.float32), np.zeros(n, np.uint8), np.zeros(n, np.uint8))


# ---------------------------------------------------------------------------------------------------
# The library and the struct layouts
# ---------------------------------------------------------------------------------------------------
def test_library_loaded():
    assert rltrain.version().split(".")[:2] == [str(v) for v in rltrain.API_VERSION]
    assert rltrain.status_name(-3) == "RLT_ENOFIT"
    assert rltrain.strerror(0) == "success"
    print(f"rltrain package {rltrain.__file__}, library {rltrain.LIBRARY_PATH}")


def test_missing_library_is_a_clear_import_error(tmp_path):
    env = {**os.environ, "RLTRAIN_LIBRARY": str(tmp_path / "nope.so")}
    p = subprocess.run([sys.executable, "-c", "import rltrain"], env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "RLTRAIN_LIBRARY" in p.stderr and "nope.so" in p.stderr


STRUCTS = [_native.rlt_space, _native.rlt_plan_entry, _native.rlt_plan_summary, _native.rlt_progress,
           _native.rlt_fit_report, _native.rlt_env_callbacks]


def test_struct_layouts_match_the_c_header(tmp_path, source_dir):
    """Every size and field offset of the ctypes mirrors equals the C compiler's for rltrain.h."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to check the struct layouts with")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "rltrain.h"', "int main(void) {"]
    for s in STRUCTS:
        lines.append(f'    printf("{s.__name__} size %zu\\n", sizeof({s.__name__}));')
        for name, _ in s._fields_:
            lines.append(f'    printf("{s.__name__} {name} %zu\\n", offsetof({s.__name__}, {name}));')
    lines += ["    return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(source_dir / "include"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    expected = []
    for s in STRUCTS:
        expected.append(f"{s.__name__} size {ctypes.sizeof(s)}")
        expected += [f"{s.__name__} {name} {getattr(s, name).offset}" for name, _ in s._fields_]
    assert [line for line in out if line] == expected


# ---------------------------------------------------------------------------------------------------
# Config and errors
# ---------------------------------------------------------------------------------------------------
def test_config_file_error_has_file_line_and_suggestion(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("algo: td3\ntrain:\n  batch_sise: 64\n")
    with pytest.raises(rltrain.ConfigError) as info:
        rltrain.Config.from_file(path)
    e = info.value
    assert isinstance(e, rltrain.RltError)
    assert e.status == -2 and e.status_name == "RLT_ECONFIG"
    assert f"{path}:3:" in str(e)
    assert "batch_size" in str(e)  # the nearest valid key


def test_config_string_and_set_errors():
    with pytest.raises(rltrain.ConfigError, match=r"inline\.yaml:2:\d+"):
        rltrain.Config.from_string("algo: td3\nseed: -1\n", "inline.yaml")
    cfg = rltrain.Config()
    with pytest.raises(rltrain.ConfigError, match="total_steps"):
        cfg.set("train.total_stepz=10")
    with pytest.raises(rltrain.ConfigError):
        cfg.set("train.batch_size", 0)


def test_config_set_dump_copy_get():
    cfg = rltrain.Config().set("td3.actor_hidden=[48, 48]").set("td3.critic_hidden", [40, 40])
    cfg.set("train.total_steps", 1234).set("td3.actor_lr", 1e-4).set("out_dir", "runs/x y")
    cfg.validate()
    assert cfg.get("td3.actor_hidden") == [48, 48]
    assert cfg.get("td3.critic_hidden") == [40, 40]
    assert cfg.get("train.total_steps") == 1234
    assert math.isclose(cfg.get("td3.actor_lr"), 1e-4)
    assert cfg.get("out_dir") == "runs/x y"
    assert cfg.get("no.such", None) is None
    copy = cfg.copy().set("train.total_steps", 99)
    assert copy.get("train.total_steps") == 99 and cfg.get("train.total_steps") == 1234
    expected = cfg.to_dict()
    expected["train"]["total_steps"] = 99
    assert copy.to_dict() == expected


def test_plan_that_does_not_fit_raises_nofit_with_hints():
    cfg = small_td3(**{"memory.budget_mb": 1, "replay.capacity": 1_000_000})
    with pytest.raises(rltrain.NoFitError) as info:
        rltrain.Agent(cfg, PENDULUM_OBS, PENDULUM_ACT)
    e = info.value
    assert e.status_name == "RLT_ENOFIT"
    assert "hint:" in str(e) and "replay.capacity" in str(e)
    assert "DOES NOT FIT" in e.plan


def test_plan_fit_answers_what_fits():
    cfg = small_td3(**{"memory.budget_mb": 1, "replay.capacity": 1_000_000})
    report, table = cfg.plan_fit()
    assert not report["fits"] and report["need_bytes"] > report["limit_bytes"] == 1 << 20
    assert 0 < report["max_replay_capacity"] < 1_000_000
    assert "memory plan" in table
    fitting, _ = cfg.copy().set("replay.capacity", report["max_replay_capacity"]).plan_fit()
    assert fitting["fits"]


def test_unusable_device_raises_device_error():
    with pytest.raises(rltrain.DeviceError) as info:
        rltrain.Agent(small_td3(device="cuda:99"), PENDULUM_OBS, PENDULUM_ACT)
    assert info.value.status_name == "RLT_EDEVICE" and str(info.value)


def test_bad_spaces_are_refused():
    with pytest.raises(rltrain.RltError, match="td3"):
        rltrain.Agent(small_td3(), rltrain.Space.box((4, 10, 10), np.uint8), PENDULUM_ACT)
    with pytest.raises(ValueError):
        rltrain.Space.box(3, np.float64)


def test_library_log_goes_to_python_logging(caplog):
    caplog.set_level(logging.DEBUG, logger="rltrain")
    with rltrain.Agent(small_td3(device="auto"), PENDULUM_OBS, PENDULUM_ACT) as agent:
        summary, _ = agent.memory_plan()
    if summary["device"] == "cpu":  # without a usable GPU, auto says why it took the CPU
        assert any(r.name == "rltrain" and "device auto" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------------------------------
# The agent API with numpy
# ---------------------------------------------------------------------------------------------------
def test_td3_act_observe_update_roundtrip():
    rng = np.random.default_rng(0)
    with rltrain.Agent(small_td3(), PENDULUM_OBS, PENDULUM_ACT) as agent:
        a = agent.act(np.zeros(3, np.float32))
        assert a.shape == (1,) and a.dtype == np.float32 and -2 <= a[0] <= 2
        batch = agent.act(rng.standard_normal((7, 3)))  # float64 is converted
        assert batch.shape == (7, 1) and np.all(np.abs(batch) <= 2)
        with pytest.raises(ValueError):
            agent.act(np.zeros(4, np.float32))
        # 40 transitions in one call, then single ones: learning starts after start_steps (50).
        agent.observe(*random_transitions(rng, 40))
        assert agent.update() == 0
        total = 0
        for _ in range(20):
            o, act, r, o2, term, trunc = random_transitions(rng, 1)
            agent.observe(o[0], act[0], float(r[0]), o2[0], False, False)
            total += agent.update()
        assert total == 10  # steps 51..60, one update each (train.updates_per_step 1)
        det = agent.act(np.ones((5, 3), np.float32), explore=False)
        assert np.array_equal(det, agent.act(np.ones((5, 3), np.float32), explore=False))
        summary, entries = agent.memory_plan()
        assert summary["fits"] and summary["device"] == "cpu" and summary["n_entries"] == len(entries)
        assert {"params", "adam_m", "adam_v"} <= {e["name"] for e in entries}
        assert sum(e["bytes"] for e in entries if e["location"] == "host") <= summary["host_bytes"]
        assert "memory plan on cpu" in agent.plan_table()
        assert agent.allocations_after_init == 0
        with pytest.raises(ValueError):
            agent.observe(o, act, r, o2[:, :2], term, trunc)
    with pytest.raises(ValueError, match="closed"):
        agent.act(np.zeros(3, np.float32))


def test_dqn_discrete_actions_and_uint8_images():
    cfg = rltrain.Config.from_string(
        "algo: dqn\nseed: 2\ndevice: cpu\ntrain: {batch_size: 8}\nreplay: {capacity: 200}\n"
        "network: {hidden: [32], conv: minatar}\n"
        "dqn: {learning_starts: 20, train_freq: 4, gradient_steps: 2, eps_fraction: 0.5}\n",
        "dqn_small.yaml",
    )
    obs_space = rltrain.Space.box((4, 10, 10), np.uint8)
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 2, (41, 4, 10, 10), dtype=np.uint8) * 255
    with rltrain.Agent(cfg, obs_space, rltrain.Space.discrete(3)) as agent:
        a = agent.act(frames[0])
        assert isinstance(a, int) and 0 <= a < 3
        batch = agent.act(frames[:5], explore=False)
        assert batch.dtype == np.int32 and batch.shape == (5,) and np.all((0 <= batch) & (batch < 3))
        # One environment's consecutive steps, as one batch: 40 transitions.
        actions = rng.integers(0, 3, 40).astype(np.int32)
        done = np.zeros(40, np.uint8)
        agent.observe(frames[:40], actions, np.ones(40, np.float32), frames[1:], done, done)
        updates = agent.update()  # step 40: a training round (40 % 4 == 0) of 2 gradient steps
        assert updates == 2
        with pytest.raises(rltrain.RltError, match="outside"):
            agent.observe(frames[0], 3, 1.0, frames[1], False, False)
        assert agent.allocations_after_init == 0


def test_save_load_gives_identical_actions(tmp_path):
    rng = np.random.default_rng(3)
    probe = rng.standard_normal((16, 3)).astype(np.float32)
    path = tmp_path / "agent.ckpt"
    with rltrain.Agent(small_td3(), PENDULUM_OBS, PENDULUM_ACT) as agent:
        agent.observe(*random_transitions(rng, 200))
        for _ in range(30):
            agent.update()
        before = agent.act(probe, explore=False)
        agent.save(path)
    with rltrain.Agent(small_td3(), PENDULUM_OBS, PENDULUM_ACT) as fresh:
        assert not np.array_equal(fresh.act(probe, explore=False), before)
        fresh.load(path)
        assert np.array_equal(fresh.act(probe, explore=False), before)
    other = small_td3(**{"td3.actor_hidden": [16, 16]})
    with rltrain.Agent(other, PENDULUM_OBS, PENDULUM_ACT) as mismatched:
        with pytest.raises(rltrain.CheckpointError, match=r"the checkpoint's network is 'actor_hidden: \[32, 32\]"):
            mismatched.load(path)
    damaged = tmp_path / "damaged.ckpt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with rltrain.Agent(small_td3(), PENDULUM_OBS, PENDULUM_ACT) as agent:
        with pytest.raises(rltrain.CheckpointError):
            agent.load(damaged)


# ---------------------------------------------------------------------------------------------------
# Trainer (built-in environments)
# ---------------------------------------------------------------------------------------------------
def trainer_config(tmp_path, steps=600):
    return small_td3(**{"train.total_steps": steps, "train.eval_every": 300, "train.eval_episodes": 1,
                        "train.progress_every_s": 0.0, "out_dir": str(tmp_path / "run")})


def test_trainer_runs_reports_and_writes_outputs(tmp_path):
    seen = []
    with rltrain.Trainer(trainer_config(tmp_path)) as tr:
        assert "memory plan" in tr.plan_table() and tr.memory_plan()[0]["fits"]
        final = tr.run(progress=seen.append)
        assert final.env_steps == 600 and final.episodes == 3 and final.updates == 550
        assert [p.env_steps for p in seen if p.is_eval] == [300, 600]
        assert not math.isnan(final.best_eval_return)
        assert tr.progress() == final
        for name in ("config.yaml", "metrics.csv", "summary.json", "final.ckpt"):
            assert (tmp_path / "run" / name).is_file()


def test_trainer_plan_that_does_not_fit(tmp_path):
    cfg = trainer_config(tmp_path).set("memory.budget_mb", 0.01)
    with pytest.raises(rltrain.NoFitError) as info:
        rltrain.Trainer(cfg)
    assert "hint:" in str(info.value) and "DOES NOT FIT" in info.value.plan
    assert not (tmp_path / "run").exists()  # nothing is written when the plan does not fit


def test_trainer_stops_when_progress_returns_true_and_reraises(tmp_path):
    with rltrain.Trainer(trainer_config(tmp_path)) as tr:
        p = tr.run(progress=lambda p: p.is_eval)
        assert p.env_steps == 300
    # A second run into the first one's out_dir would be refused (train.overwrite): a directory of its own.
    with rltrain.Trainer(trainer_config(tmp_path / "second")) as tr:
        def boom(p):
            raise RuntimeError("stop here")
        with pytest.raises(RuntimeError, match="stop here"):
            tr.run(progress=boom)


# ---------------------------------------------------------------------------------------------------
# The Gymnasium adapter
# ---------------------------------------------------------------------------------------------------
class ChainEnv(gymnasium.Env):
    """A 1-D walk with Discrete(2, start=1) actions: 2 moves right, 1 left. Reaching 4 terminates; the
    registered time limit (7 steps) truncates. It records what each step returned."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Box(-10, 10, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2, start=1)
        self.log = []  # (obs before, action, obs after, terminated)
        self.pos = 0

    def _obs(self):
        return np.array([self.pos, self.np_random.random()], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        self.last = self._obs()
        return self.last, {}

    def step(self, action):
        assert action in (1, 2), action
        before = self.last
        self.pos += 1 if action == 2 else -1
        self.last = self._obs()
        terminated = self.pos >= 4
        self.log.append((before, action, self.last, terminated))
        return self.last, 1.0, terminated, False, {}


gymnasium.register("RltTestChain-v0", entry_point=ChainEnv, max_episode_steps=7)


class ActionLog(gymnasium.Wrapper):
    """Records every action the environment is stepped with."""

    def __init__(self, env):
        super().__init__(env)
        self.actions = []

    def step(self, action):
        self.actions.append(np.array(action, np.float64))
        return self.env.step(action)


def reference_train(env, eval_env, cfg, steps, seed, eval_every, eval_episodes, seen=None):
    """The Gymnasium loop written out over rltrain.Agent (act, observe, update, evaluate): what train() does
    inside the native trainer. It records what the agent observed in ``seen``; returns the evaluations."""
    discrete = isinstance(env.action_space, gymnasium.spaces.Discrete)
    evaluations = []
    cfg = cfg.copy().set("seed", seed).set("train.total_steps", steps)
    with rltrain.Agent(cfg, env.observation_space, env.action_space) as agent:
        obs, _ = env.reset(seed=seed)
        eval_seed = seed + 100
        for step in range(1, steps + 1):
            action = agent.act(obs)
            next_obs, reward, term, trunc, _ = env.step(rltrain.gym._env_action(action, env.action_space, discrete))
            if seen is not None:
                seen.append((np.array(obs), action, np.array(next_obs), bool(term), bool(trunc)))
            agent.observe(obs, action, reward, next_obs, term, trunc)
            agent.update()
            obs = next_obs
            if term or trunc:
                obs, _ = env.reset()
            if step % eval_every == 0 or step == steps:
                evaluations.append((step, rltrain.gym.evaluate(agent, eval_env, eval_episodes, discrete, eval_seed)))
                eval_seed = None
    return evaluations


CHAIN_DQN = ("algo: dqn\nseed: 4\ndevice: cpu\ntrain: {batch_size: 8}\nreplay: {capacity: 500}\n"
             "network: {hidden: [16]}\ndqn: {learning_starts: 20, train_freq: 4, gradient_steps: 1}\n")


def test_gym_adapter_passes_real_final_observations(tmp_path):
    """train() hands the environment to the native trainer; the agent gets what a loop over rltrain.Agent
    gives it: the real final observation on truncation, terminated and truncated apart, Discrete's start."""
    cfg = rltrain.Config.from_string(CHAIN_DQN, "chain.yaml")
    seen = []
    ref_env = gymnasium.make("RltTestChain-v0")
    ref_evals = reference_train(ref_env, gymnasium.make("RltTestChain-v0"), cfg, 200, 11, 100, 2, seen)
    log = ref_env.unwrapped.log
    assert len(seen) == len(log) == 200
    steps_in_episode = 0
    for (obs, action, next_obs, term, trunc), (before, env_action, after, env_term) in zip(seen, log):
        steps_in_episode += 1
        assert env_action == action + 1  # Discrete start offset
        assert np.array_equal(obs, before) and np.array_equal(next_obs, after)
        assert term == env_term
        assert trunc == (steps_in_episode == 7 and not env_term)  # the time limit, only when not terminal
        if term or trunc:
            steps_in_episode = 0
    assert any(t for *_, t in seen) and any(t for *_, t, _ in seen)  # both kinds of episode end happened

    env = gymnasium.make("RltTestChain-v0")
    result = rltrain.gym.train(env, cfg, total_steps=200, seed=11, eval_env=gymnasium.make("RltTestChain-v0"),
                               eval_every=100, eval_episodes=2, out_dir=tmp_path / "run")
    # The same observations, actions and episode ends, step by step, and the same evaluations.
    assert len(env.unwrapped.log) == 200 == result["env_steps"]
    for (b1, a1, o1, t1), (b2, a2, o2, t2) in zip(env.unwrapped.log, log):
        assert np.array_equal(b1, b2) and a1 == a2 and np.array_equal(o1, o2) and t1 == t2
    assert result["evaluations"] == ref_evals and [s for s, _ in ref_evals] == [100, 200]
    assert result["episodes"] == sum(1 for *_, te, tr in seen if te or tr)
    with open(tmp_path / "run" / "metrics.csv") as f:
        lengths = [int(row["length"]) for row in csv.DictReader(f) if row["kind"] == "episode"]
    ends = [i + 1 for i, (*_, te, tr) in enumerate(seen) if te or tr]
    assert lengths == [b - a for a, b in zip([0] + ends, ends)]


def test_gym_train_takes_the_steps_of_a_loop_over_agent(tmp_path, configs):
    """TD3 on Pendulum-v1 through train() steps the environment with exactly the actions of the loop over
    rltrain.Agent, also after an evaluation in the middle of an episode (an evaluation must not overwrite
    the observation the next training step acts on)."""
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("train.start_steps", 200)
    ref_env = ActionLog(gymnasium.make("Pendulum-v1"))
    ref_evals = reference_train(ref_env, gymnasium.make("Pendulum-v1"), cfg, 700, 2, 300, 1)
    env = ActionLog(gymnasium.make("Pendulum-v1"))
    result = rltrain.gym.train(env, cfg, total_steps=700, seed=2, eval_env=gymnasium.make("Pendulum-v1"),
                               eval_every=300, eval_episodes=1, out_dir=tmp_path / "run")
    assert len(env.actions) == len(ref_env.actions) == 700
    differ = [i for i, (a, b) in enumerate(zip(env.actions, ref_env.actions)) if not np.array_equal(a, b)]
    assert differ == [], f"the first different action is at step {differ[0] + 1}"
    # The trainer sums float32 rewards, the loop above Python floats: equal to float32's precision.
    assert [s for s, _ in result["evaluations"]] == [s for s, _ in ref_evals] == [300, 600, 700]
    assert [r for _, r in result["evaluations"]] == pytest.approx([r for _, r in ref_evals], rel=1e-5)


def test_gym_train_writes_the_cli_run_directory(tmp_path, configs):
    """train() writes what `rltrain --config` writes: config.yaml (loadable again), metrics.csv with the
    trainer's columns, summary.json with its keys, final.ckpt, best.ckpt."""
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("train.start_steps", 100)
    run = tmp_path / "gym"
    result = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                               out_dir=run)
    assert result["out_dir"] == str(run)
    expected = cfg.copy().set("train.total_steps", 400).set("seed", 3).set("train.eval_every", 200)
    expected.set("train.eval_episodes", 1).set("out_dir", str(run))
    # The native trainer's run directory for the same config on its built-in pendulum, for reference.
    native = tmp_path / "native"
    with rltrain.Trainer(expected.copy().set("out_dir", str(native))) as tr:
        tr.run()
    names = ["best.ckpt", "config.yaml", "final.ckpt", "metrics.csv", "summary.json"]
    # .rltrain.lock is the out_dir's owner lock (docs/reliability.md), not an output.
    outputs = lambda d: sorted(p.name for p in d.iterdir() if p.name != ".rltrain.lock")  # noqa: E731
    assert outputs(run) == outputs(native) == names
    assert rltrain.Config.from_file(run / "config.yaml").to_dict() == expected.to_dict()
    with open(run / "metrics.csv") as f, open(native / "metrics.csv") as g:
        rows, native_rows = list(csv.reader(f)), list(csv.reader(g))
    assert rows[0] == native_rows[0] and rows[0][:4] == ["kind", "env_step", "episode", "return"]
    assert [r[0] for r in rows[1:]] == [r[0] for r in native_rows[1:]] == ["episode", "eval", "episode", "eval"]
    assert all(len(r) == len(rows[0]) for r in rows)
    evals = [(int(r[1]), float(r[3])) for r in rows[1:] if r[0] == "eval"]
    assert [s for s, _ in evals] == [s for s, _ in result["evaluations"]] == [200, 400]
    assert [r for _, r in evals] == pytest.approx([r for _, r in result["evaluations"]], rel=1e-6)
    summary = json.loads((run / "summary.json").read_text())
    assert summary.keys() == json.loads((native / "summary.json").read_text()).keys()
    assert summary["status"] == "finished" and summary["env"] == "Pendulum-v1" and summary["algo"] == "td3"
    assert summary["seed"] == 3 and summary["env_steps"] == 400 and summary["episodes"] == 2
    assert summary["updates"] == result["updates"] == 300 and summary["allocations_after_init"] == 0
    assert summary["best_eval_return"] == pytest.approx(result["best_eval_return"], rel=1e-5)
    assert (run / "final.ckpt").stat().st_size > 0


def test_gym_train_num_envs(tmp_path, configs):
    """num_envs=N (copies made from the id) or a SyncVectorEnv: N instances step together, every step is
    counted, each environment's episodes are rows of their own; num_envs=1 is the run without it."""
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("train.start_steps", 100)
    four = rltrain.gym.train("Pendulum-v1", cfg, total_steps=800, seed=3, eval_every=400, eval_episodes=1,
                             num_envs=4, out_dir=tmp_path / "four")
    # 200 steps of each of 4 environments: one 200-step episode each; 700 updates after step 100.
    assert four["env_steps"] == 800 and four["episodes"] == 4 and four["updates"] == 700
    assert [s for s, _ in four["evaluations"]] == [400, 800]
    assert rltrain.Config.from_file(tmp_path / "four" / "config.yaml").get("env.num_envs") == 4
    with open(tmp_path / "four" / "metrics.csv") as f:
        rows = [r for r in csv.reader(f) if r[0] == "episode"]
    assert [(int(r[1]), int(r[4])) for r in rows] == [(800, 200)] * 4
    vec = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1")] * 2)
    two = rltrain.gym.train(vec, cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                            out_dir=tmp_path / "two")
    assert two["env_steps"] == 400 and two["episodes"] == 2
    with pytest.raises(ValueError, match="vector environment has 2"):
        rltrain.gym.train(vec, cfg, total_steps=400, num_envs=3, out_dir=tmp_path / "bad")
    vec.close()
    one = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                            num_envs=1, out_dir=tmp_path / "one")
    ref = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                            out_dir=tmp_path / "ref")
    assert one["evaluations"] == ref["evaluations"] and one["updates"] == ref["updates"]
    with pytest.raises(rltrain.RltError, match="multiple of env.num_envs"):
        rltrain.gym.train("Pendulum-v1", cfg, total_steps=402, num_envs=4, out_dir=tmp_path / "odd")


def test_gym_train_results_and_callback_stop(tmp_path, configs):
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("train.start_steps", 100)
    events = []
    result = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, callback=events.append,
                               eval_every=200, eval_episodes=1, out_dir=tmp_path / "a")
    assert result["env_steps"] == 400 and result["episodes"] == 2 and result["updates"] == 300
    assert [s for s, _ in result["evaluations"]] == [200, 400]
    assert result["best_eval_return"] == max(r for _, r in result["evaluations"])
    assert result["final_eval_return"] == result["evaluations"][-1][1]
    assert result["allocations_after_init"] == 0 and not result["stopped"]
    kinds = [e["kind"] for e in events if e["kind"] != "progress"]  # progress: every 2 s, if this is slow
    assert kinds == ["episode", "eval", "episode", "eval"]
    ends = [e for e in events if e["kind"] == "episode"]
    assert [(e["step"], e["episodes"], e["updates"]) for e in ends] == [(200, 1, 100), (400, 2, 300)]
    assert cfg.get("train.total_steps") == 20000  # the caller's config is not changed
    stopped = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                                callback=lambda e: e["kind"] == "eval", out_dir=tmp_path / "b")
    assert stopped["stopped"] and stopped["env_steps"] == 200
    # Stopped at an episode's end: the step's evaluation still runs, as in the loop the adapter replaced.
    at_episode = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                                   callback=lambda e: e["kind"] == "episode", out_dir=tmp_path / "c")
    assert at_episode["stopped"] and at_episode["env_steps"] == 200 and len(at_episode["evaluations"]) == 1
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["status"] == "stopped"
    again = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                              out_dir=tmp_path / "d")
    assert again["evaluations"] == result["evaluations"]  # same seed, same run


class FailingChainEnv(ChainEnv):
    def step(self, action):
        if len(self.log) == 30:
            raise RuntimeError("the simulator broke")
        return super().step(action)


gymnasium.register("RltTestFailingChain-v0", entry_point=FailingChainEnv, max_episode_steps=7)


def test_gym_train_raises_what_the_environment_or_callback_raised(tmp_path):
    cfg = rltrain.Config.from_string(CHAIN_DQN, "chain.yaml")
    with pytest.raises(RuntimeError, match="the simulator broke"):
        rltrain.gym.train("RltTestFailingChain-v0", cfg, total_steps=100, out_dir=tmp_path / "a")
    # The trainer still wrote what it had, as the CLI does when a run fails.
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["env_steps"] == 30

    def boom(event):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        rltrain.gym.train("RltTestChain-v0", cfg, total_steps=100, callback=boom, out_dir=tmp_path / "b")


# The native CLI's progress line (tools/rltrain.c, print_progress).
PROGRESS_LINE = re.compile(
    r"^(\[eval\]|      ) step \d+/\d+ \| episodes \d+ \| last return -?\d+\.\d \| "
    r"eval (-|-?\d+\.\d \(best -?\d+\.\d\)) \| \d+ updates/s \| \d+ steps/s \| [\dm.]+s \| ETA ([\dm.]+s|\?)$"
)


def test_gym_module_cli(tmp_path, configs):
    """python -m rltrain.gym: the CLI's progress lines, its closing lines and its run directory; --json."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "rltrain.gym", "--config", str(configs / "td3_pendulum_fast.yaml"),
           "--env", "Pendulum-v1", "--steps", "300", "--set", "train.start_steps=100", "--set",
           "train.eval_every=100", "--set", "train.eval_episodes=1", "--set", f"out_dir={out}",
           "--set", "train.overwrite=true"]  # the runs below go into the same out_dir
    p = subprocess.run(cmd + ["--save", str(tmp_path / "a.ckpt")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) <= 10 and "{" not in p.stdout, p.stdout  # no JSON dump
    assert re.match(r"finished: 300 env steps, 200 updates in [\d.]+s \(\d+ updates/s\); final eval -?\d+\.\d, "
                    r"best -?\d+\.\d$", lines[-3]), lines[-3]
    assert lines[-2] == f"outputs written to {out}/ (config.yaml, metrics.csv, summary.json, final.ckpt, best.ckpt)"
    assert lines[-1] == f"agent checkpoint written to {tmp_path / 'a.ckpt'}"
    assert all(PROGRESS_LINE.match(line) for line in lines[:-3]), lines[:-3]
    assert [line.split()[2] for line in lines[:-3] if line.startswith("[eval]")] == ["100/300", "200/300", "300/300"]
    for name in ("config.yaml", "metrics.csv", "summary.json", "final.ckpt"):
        assert (out / name).is_file()
    assert (tmp_path / "a.ckpt").is_file()
    quiet = subprocess.run(cmd + ["--quiet"], capture_output=True, text=True)
    assert quiet.returncode == 0 and len(quiet.stdout.splitlines()) == 2, quiet.stdout
    js = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
    assert js.returncode == 0, js.stderr
    values = json.loads(js.stdout)  # one JSON object, nothing else
    assert values["env_steps"] == 300 and values["out_dir"] == str(out) and len(values["evaluations"]) == 3
    bad = subprocess.run(cmd + ["--set", "train.batch_sise=3"], capture_output=True, text=True)
    assert bad.returncode == 2 and "batch_size" in bad.stderr
    nofit = subprocess.run(cmd + ["--set", "memory.budget_mb=0.01"], capture_output=True, text=True)
    assert nofit.returncode == 3 and "hint" in nofit.stderr


def test_gym_module_cli_prints_the_native_cli_lines(tmp_path, configs):
    """The progress and closing lines of python -m rltrain.gym have the native CLI's format, number for
    number (the numbers themselves differ: Gymnasium's Pendulum-v1 against the built-in pendulum)."""
    cli = Path(rltrain.LIBRARY_PATH).resolve().parent / "rltrain"
    if not cli.is_file():
        pytest.skip(f"no native CLI next to {rltrain.LIBRARY_PATH} to compare with")
    config = str(configs / "td3_pendulum_fast.yaml")
    sets = ["train.total_steps=300", "train.start_steps=100", "train.eval_every=150", "train.eval_episodes=1",
            "train.progress_every_s=86400"]  # only evaluations report: the lines do not depend on timing
    args = [a for s in sets for a in ("--set", s)]
    native = subprocess.run([str(cli), "--config", config, *args, "--set", f"out_dir={tmp_path / 'n'}"],
                            capture_output=True, text=True)
    gym = subprocess.run([sys.executable, "-m", "rltrain.gym", "--config", config, "--env", "Pendulum-v1", *args,
                          "--set", f"out_dir={tmp_path / 'g'}"], capture_output=True, text=True)
    assert native.returncode == 0 and gym.returncode == 0, native.stderr + gym.stderr

    def shape(stdout, out_dir):
        keep = ("[eval] step", "       step", "finished:", "outputs written")
        lines = [line.replace(str(out_dir), "OUT") for line in stdout.splitlines() if line.startswith(keep)]
        return [re.sub(r"\d+(\.\d+)?", "N", line) for line in lines]

    expected = shape(native.stdout, tmp_path / "n")
    assert len(expected) == 4 and expected[0].startswith("[eval] step N/N | episodes N | last return")
    assert shape(gym.stdout, tmp_path / "g") == expected
    p = rltrain.Progress(env_steps=5, total_steps=10, episodes=0, updates=0, last_episode_return=math.nan,
                         last_eval_return=math.nan, best_eval_return=math.nan, updates_per_s=2.5,
                         env_steps_per_s=3.5, elapsed_s=125.0, eta_s=math.nan, is_eval=False)
    # printf's "%.0f" rounds halves to even, as Python's format does.
    assert p.line() == "       step 5/10 | episodes 0 | last return 0.0 | eval - | 2 updates/s | 4 steps/s | 2m05s | ETA ?"


def test_nonfinite_inputs_are_refused():
    # NaN and inf never reach the agent: the engine names the argument, row and element, and stores nothing.
    rng = np.random.default_rng(4)
    with rltrain.Agent(small_td3(), PENDULUM_OBS, PENDULUM_ACT) as agent:
        o, act, r, o2, term, trunc = random_transitions(rng, 3)
        o[2, 1] = np.nan
        with pytest.raises(rltrain.RltError, match="obs row 2 element 1 is nan"):
            agent.observe(o, act, r, o2, term, trunc)
        o[2, 1] = 0.0
        r[1] = np.inf
        with pytest.raises(rltrain.RltError, match="rewards row 1 is inf"):
            agent.observe(o, act, r, o2, term, trunc)
        with pytest.raises(rltrain.RltError, match="rlt_agent_act: obs row 0 element 2 is -inf"):
            agent.act(np.array([0.0, 0.0, -np.inf], np.float32))
        agent.observe(*random_transitions(rng, 3))  # the agent still works


# ---------------------------------------------------------------------------------------------------
# Learning on Gymnasium environments (minutes; deselect with -m "not learning")
# ---------------------------------------------------------------------------------------------------
def print_curve(name, result):
    curve = ", ".join(f"{s}: {r:.1f}" for s, r in result["evaluations"])
    print(f"{name}: best {result['best_eval_return']:.1f}, final {result['final_eval_return']:.1f} "
          f"in {result['wall_s']:.1f} s; evaluations {curve}")


# One seed's run in its own process: trains until the first evaluation at or above the target (then stops,
# since the answer is known) or for all the steps; prints its results as one JSON line.
SEED_RUN = r"""
import json, sys
import rltrain, rltrain.gym
env_id, config, steps, seed, target, out_dir = sys.argv[1:7]
reached = []
def stop_at_target(event):
    if event["kind"] == "eval" and event["return"] >= float(target):
        reached.append(event["step"])
        return True
    return False
r = rltrain.gym.train(env_id, rltrain.Config.from_file(config), total_steps=int(steps), seed=int(seed),
                      callback=stop_at_target, out_dir=out_dir)
print(json.dumps({"seed": int(seed), "reached_at": reached[0] if reached else None, "best": r["best_eval_return"],
                  "evaluations": r["evaluations"], "wall_s": r["wall_s"],
                  "allocations_after_init": r["allocations_after_init"]}))
"""


def seeds_reaching(tmp_path, env_id, config, steps, target, seeds, need, workers=2):
    """Trains ``env_id`` with ``config`` on each seed of ``seeds`` (in order, ``workers`` processes at a time,
    one CPU core each) until the outcome is decided: ``need`` seeds reached a mean evaluation return of
    ``target`` within ``steps`` steps, or too many did not for ``need`` to be possible. Seeds still running
    then are stopped and those not started are skipped. Prints each seed's curve; returns the results of
    the seeds that finished (a dict each: seed, reached_at (a step or None), best, evaluations, ...)."""
    pending, running, results = list(seeds), {}, []
    t0 = time.perf_counter()

    def decided():
        ok = sum(r["reached_at"] is not None for r in results)
        return ok >= need or len(results) - ok > len(seeds) - need

    try:
        while (pending or running) and not decided():
            while pending and len(running) < workers:
                seed = pending.pop(0)
                out = open(tmp_path / f"seed{seed}.out", "w+")
                args = [env_id, str(config), str(steps), str(seed), str(target), str(tmp_path / f"seed{seed}")]
                running[seed] = (subprocess.Popen([sys.executable, "-c", SEED_RUN, *args], stdout=out,
                                                  stderr=subprocess.STDOUT, text=True), out)
            time.sleep(0.2)
            for seed, (proc, out) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[seed]
                out.seek(0)
                text = out.read()
                out.close()
                assert proc.returncode == 0, f"seed {seed} failed:\n{text[-3000:]}"
                results.append(json.loads(text.strip().splitlines()[-1]))
    finally:
        for proc, out in running.values():  # decided: the rest cannot change the outcome
            proc.kill()
            proc.wait()
            out.close()
    done = {r["seed"] for r in results}
    for r in sorted(results, key=lambda r: r["seed"]):
        curve = ", ".join(f"{s}: {v:.1f}" for s, v in r["evaluations"])
        what = f"reached {target} at {r['reached_at']}" if r["reached_at"] else f"best {r['best']:.1f} by {steps}"
        print(f"{env_id} seed {r['seed']}: {what} steps ({r['wall_s']:.0f} s); evaluations {curve}")
    print(f"{env_id}: {sum(r['reached_at'] is not None for r in results)} of {len(results)} seeds run reached "
          f"{target} (need {need} of {len(seeds)}); not needed: {[s for s in seeds if s not in done]}; "
          f"{time.perf_counter() - t0:.0f} s with {workers} workers")
    for r in results:
        assert r["allocations_after_init"] == 0
    return results


@pytest.mark.learning
def test_td3_learns_gymnasium_pendulum(tmp_path, configs):
    """TD3 with 64-64 networks and batch 100 (td3_pendulum_fast.yaml) on Gymnasium's Pendulum-v1 reaches a
    mean evaluation return of -250 within 20,000 steps, as the built-in environment does (TD3 paper and
    RLtools report about -150 to -200).

    One seed suffices here: seed 1 passes -250 at 6,000 steps and stays between -100 and -200 from 8,000
    on, and all of seeds 1-10 pass -200 by 10,000 steps (bench/RESULTS.md), so the bar is far from the edge
    of the learning curve."""
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    result = rltrain.gym.train("Pendulum-v1", cfg, total_steps=20000, seed=1, out_dir=tmp_path / "run")
    print_curve("td3 Pendulum-v1", result)
    assert result["env_steps"] == 20000
    assert result["best_eval_return"] >= -250.0
    assert result["allocations_after_init"] == 0


@pytest.mark.learning
def test_dqn_learns_gymnasium_cartpole(tmp_path, configs):
    """DQN with RL Baselines3 Zoo's CartPole-v1 settings (dqn_cartpole.yaml) on Gymnasium's CartPole-v1: at
    least 3 of seeds 1-5 reach Gymnasium's reward threshold, 475 (of the maximum 500), within 50,000 steps.

    Several seeds, because the first evaluation at 500 comes late and varies: on seeds 1-9 at 25,000 to
    45,000 steps (seed 1 at 40,000; all 9 within 50,000), and between evaluations the return may drop to
    100-250 again. One seed would pass or fail with the summation order of the CPU kernels. The margin:
    2 of the 5 seeds may miss. Each seed stops at its first evaluation at 475 (about 20-60 s each)."""
    seeds_run = seeds_reaching(tmp_path, "CartPole-v1", configs / "dqn_cartpole.yaml", 50000, 475.0,
                               seeds=[1, 2, 3, 4, 5], need=3)
    assert sum(r["reached_at"] is not None for r in seeds_run) >= 3


def _mujoco_env(env_id: str):
    """The MuJoCo environment, or a skip when mujoco (gymnasium[mujoco]) is not installed here."""
    pytest.importorskip("mujoco", reason="gymnasium[mujoco] is not installed (no MuJoCo wheel for this platform?)")
    try:
        gymnasium.make(env_id).close()
    except Exception as e:  # a broken MuJoCo install is a skip, not a failure of rltrain
        pytest.skip(f"{env_id} cannot be made here: {e}")


@pytest.mark.learning
def test_td3_learns_mujoco_inverted_pendulum(tmp_path, configs):
    """TD3 through the Gymnasium adapter on MuJoCo's InvertedPendulum-v5: at least 3 of seeds 1-5 reach a
    mean evaluation return of 900 (of the maximum 1000) within 30,000 steps.

    The bar comes from the literature: the TD3 paper (Fujimoto et al. 2018) reports 1000, the maximum, on
    InvertedPendulum; 900 leaves 10% of it for evaluation noise. The jump from ~100 to 1000 happens late and
    suddenly, and which seeds make it by 30,000 steps varies with the machine's rounding: run beside the
    TD3 authors' own code with the same settings on seeds 1-8, rltrain reached 900 on 7 of 8 seeds
    (16,000-24,000 steps, median 19,000) and the authors' TD3 on 6 of 8 (14,000-26,000); each had one or two
    seeds that stayed near 100-300 at 30,000 steps, different seeds on different machines (seed 1 reaches
    1000 at 18,000 steps on some, and stays near 128 on others). So one seed cannot be the test. The margin:
    2 of the 5 seeds may miss, where about 1 in 8 did in those runs.

    The config is td3_mujoco_paper.yaml: the TD3 paper's original hyper-parameters (400-300 networks, Adam
    1e-3, batch 100, 1000 random steps). With the authors' later defaults (td3_pendulum.yaml: 256-256, 3e-4,
    batch 256) neither rltrain (best 91) nor the authors' PyTorch TD3 (best 78) gets past 100 by 20,000
    steps on this task. Random actions score 5 and zero actions 23, as expected.

    Time: 2-3 minutes per 30,000 steps on one CPU core. Two seeds run at once (CI has 2 cores), each stops
    at its first evaluation at 900, and no seed starts once 3 have reached it (or 3 have missed): 95-143 s
    on 2 cores when seeds 1-3 succeed, at most 3 rounds of 30,000 steps (5-8 minutes)."""
    _mujoco_env("InvertedPendulum-v5")
    seeds_run = seeds_reaching(tmp_path, "InvertedPendulum-v5", configs / "td3_mujoco_paper.yaml", 30000, 900.0,
                               seeds=[1, 2, 3, 4, 5], need=3)
    assert sum(r["reached_at"] is not None for r in seeds_run) >= 3
