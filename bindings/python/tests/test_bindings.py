"""Tests of the rltrain Python bindings: errors, the agent API with numpy, checkpoints, struct layouts
against the C header, the trainer, the Gymnasium adapter, and (marker "learning") learning on Gymnasium's
Pendulum-v1 with TD3 and CartPole-v1 with DQN."""

import ctypes
import logging
import math
import os
import shutil
import subprocess
import sys

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
           _native.rlt_fit_report]


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
    with rltrain.Trainer(trainer_config(tmp_path)) as tr:
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


def test_gym_adapter_passes_real_final_observations(monkeypatch):
    seen = []

    class Recording(rltrain.Agent):
        def observe(self, obs, action, reward, next_obs, terminated, truncated=None):
            seen.append((np.array(obs), int(action), np.array(next_obs), bool(terminated), bool(truncated)))
            super().observe(obs, action, reward, next_obs, terminated, truncated)

    monkeypatch.setattr(rltrain.gym, "Agent", Recording)
    cfg = rltrain.Config.from_string(
        "algo: dqn\nseed: 4\ndevice: cpu\ntrain: {batch_size: 8}\nreplay: {capacity: 500}\n"
        "network: {hidden: [16]}\ndqn: {learning_starts: 20, train_freq: 4, gradient_steps: 1}\n", "chain.yaml")
    env = gymnasium.make("RltTestChain-v0")
    result = rltrain.gym.train(env, cfg, total_steps=200, seed=11, eval_env=gymnasium.make("RltTestChain-v0"),
                               eval_every=100, eval_episodes=2)
    log = env.unwrapped.log
    assert len(seen) == len(log) == 200 == result["env_steps"]
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
    assert result["episodes"] == sum(1 for *_, te, tr in seen if te or tr)
    assert [s for s, _ in result["evaluations"]] == [100, 200]


def test_gym_train_results_and_callback_stop(configs):
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("train.start_steps", 100)
    events = []
    result = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, callback=events.append,
                               eval_every=200, eval_episodes=1)
    assert result["env_steps"] == 400 and result["episodes"] == 2 and result["updates"] == 300
    assert [s for s, _ in result["evaluations"]] == [200, 400]
    assert result["best_eval_return"] == max(r for _, r in result["evaluations"])
    assert result["final_eval_return"] == result["evaluations"][-1][1]
    assert result["allocations_after_init"] == 0 and not result["stopped"]
    assert [e["kind"] for e in events] == ["episode", "eval", "episode", "eval"]
    assert cfg.get("train.total_steps") == 20000  # the caller's config is not changed
    stopped = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                                callback=lambda e: e["kind"] == "eval")
    assert stopped["stopped"] and stopped["env_steps"] == 200
    again = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1)
    assert again["evaluations"] == result["evaluations"]  # same seed, same run


def test_gym_module_cli(tmp_path, configs):
    cmd = [sys.executable, "-m", "rltrain.gym", "--config", str(configs / "td3_pendulum_fast.yaml"),
           "--env", "Pendulum-v1", "--steps", "300", "--set", "train.start_steps=100", "--set",
           "train.eval_every=0", "--set", "train.eval_episodes=1", "--save", str(tmp_path / "a.ckpt"), "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert '"env_steps": 300' in p.stdout and (tmp_path / "a.ckpt").is_file()
    bad = subprocess.run(cmd[:-1] + ["--set", "train.batch_sise=3"], capture_output=True, text=True)
    assert bad.returncode == 2 and "batch_size" in bad.stderr
    nofit = subprocess.run(cmd + ["--set", "memory.budget_mb=0.01"], capture_output=True, text=True)
    assert nofit.returncode == 3 and "hint" in nofit.stderr


# ---------------------------------------------------------------------------------------------------
# Learning on Gymnasium environments (minutes; deselect with -m "not learning")
# ---------------------------------------------------------------------------------------------------
def print_curve(name, result):
    curve = ", ".join(f"{s}: {r:.1f}" for s, r in result["evaluations"])
    print(f"{name}: best {result['best_eval_return']:.1f}, final {result['final_eval_return']:.1f} "
          f"in {result['wall_s']:.1f} s; evaluations {curve}")


@pytest.mark.learning
def test_td3_learns_gymnasium_pendulum(configs):
    """TD3 with 64-64 networks and batch 100 (td3_pendulum_fast.yaml) on Gymnasium's Pendulum-v1 reaches a
    mean evaluation return of -250 within 20,000 steps, as the built-in environment does (TD3 paper and
    RLtools report about -150 to -200)."""
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    result = rltrain.gym.train("Pendulum-v1", cfg, total_steps=20000, seed=1)
    print_curve("td3 Pendulum-v1", result)
    assert result["env_steps"] == 20000
    assert result["best_eval_return"] >= -250.0
    assert result["allocations_after_init"] == 0


@pytest.mark.learning
def test_dqn_learns_gymnasium_cartpole(configs):
    """DQN with RL Baselines3 Zoo's CartPole-v1 settings (dqn_cartpole.yaml) on Gymnasium's CartPole-v1
    reaches Gymnasium's reward threshold, 475, within 50,000 steps."""
    cfg = rltrain.Config.from_file(configs / "dqn_cartpole.yaml").set("out_dir", "unused")
    result = rltrain.gym.train("CartPole-v1", cfg, total_steps=50000, seed=1)
    print_curve("dqn CartPole-v1", result)
    assert result["env_steps"] == 50000
    assert result["best_eval_return"] >= 475.0
    assert result["allocations_after_init"] == 0


def _mujoco_env(env_id: str):
    """The MuJoCo environment, or a skip when mujoco (gymnasium[mujoco]) is not installed here."""
    pytest.importorskip("mujoco", reason="gymnasium[mujoco] is not installed (no MuJoCo wheel for this platform?)")
    try:
        gymnasium.make(env_id).close()
    except Exception as e:  # a broken MuJoCo install is a skip, not a failure of rltrain
        pytest.skip(f"{env_id} cannot be made here: {e}")


@pytest.mark.learning
def test_td3_learns_mujoco_inverted_pendulum(configs):
    """TD3 through the Gymnasium adapter on MuJoCo's InvertedPendulum-v5 reaches a mean evaluation return of
    900 (of 1000) within 30,000 steps.

    Issue #6 asks for 20,000 steps "or as documented". The jump from ~100 to 1000 happens late and suddenly:
    with session 1's CPU kernels seeds 1, 2, 3 first evaluated at 1000 at 18k, 18k and 20k steps; the faster
    CPU kernels of session 2 sum in another order, and seed 1 was at 108 at 20k and at 1000 by 30k (seed 2
    too). A bar at the edge of the learning curve would fail on rounding changes, so the test allows 30k.

    The config is td3_mujoco_paper.yaml: the TD3 paper's original hyper-parameters (400-300 networks, Adam
    1e-3, batch 100, 1000 random steps). With the authors' later defaults (td3_pendulum.yaml: 256-256, 3e-4,
    batch 256) neither rltrain (best 91) nor the authors' PyTorch TD3 (best 78) gets past 100 by 20,000
    steps on this task, while the PyTorch TD3 with the paper's settings reaches 1000 at 18,000 steps as
    rltrain does (seed 1). So it is not an adapter bug: random actions score 5 and zero actions 23 as
    expected, actions are scaled to [-3, 3], and termination (the pole falls) and truncation (1000 steps)
    reach the agent apart. About 2-4 minutes on one CPU core."""
    _mujoco_env("InvertedPendulum-v5")
    cfg = rltrain.Config.from_file(configs / "td3_mujoco_paper.yaml")
    result = rltrain.gym.train("InvertedPendulum-v5", cfg, total_steps=30000, seed=1)
    print_curve("td3 InvertedPendulum-v5", result)
    assert result["env_steps"] == 30000
    assert result["best_eval_return"] >= 900.0
    assert result["allocations_after_init"] == 0
