"""The small things a user meets in the first week of the Python package (issue 41), each once."""

import subprocess
import sys

import pytest

import rltrain
import rltrain.gym
import rltrain.plot

gymnasium = pytest.importorskip("gymnasium")


def test_td3_on_a_discrete_env_suggests_dqn(tmp_path, configs):
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    with pytest.raises(rltrain.RltError, match="algo: dqn"):
        rltrain.gym.train("CartPole-v1", cfg, total_steps=100, out_dir=tmp_path / "r")


def test_gym_module_version_exits_0():
    p = subprocess.run([sys.executable, "-m", "rltrain.gym", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("rltrain-gym ") and rltrain.version() in p.stdout


def test_gym_module_default_out_dir_is_not_the_native_clis(configs):
    """python -m rltrain.gym without --set out_dir writes beside the native CLI's directory of the same config
    (runs/td3_pendulum_fast), never into it: one run would otherwise refuse the other's outputs."""
    assert rltrain.gym._default_out_dir("runs/td3_pendulum_fast", "Pendulum-v1") == "runs/td3_pendulum_fast-Pendulum-v1"
    assert rltrain.gym._default_out_dir("runs/x/", "MinAtar/Breakout-v1") == "runs/x-MinAtar_Breakout-v1"


def test_resume_command_quotes_every_set():
    cmd = rltrain.gym._resume_command(["--config", "c.yaml", "--set", "out_dir=a b", "--resume", "old"], "a b/final.ckpt")
    assert cmd == "python -m rltrain.gym --config c.yaml --set 'out_dir=a b' --resume 'a b/final.ckpt'"


def test_tensorboard_names_are_folder_safe():
    assert rltrain.plot._tb_name("TD3 fast/seed 1") == "TD3_fast_seed_1"
    assert rltrain.plot._tb_name("td3_s1.v-2") == "td3_s1.v-2"


def test_progress_line_shows_a_shared_gpus_memory():
    """GPU runs add the device's free memory and the other processes' to the line, as the native CLI prints it
    (tools/rltrain.c print_progress); CPU runs (NaN) keep the line as it was."""
    import math

    p = rltrain.Progress(env_steps=5, total_steps=10, episodes=0, updates=0, last_episode_return=math.nan,
                         last_eval_return=math.nan, best_eval_return=math.nan, updates_per_s=2.0,
                         env_steps_per_s=3.0, elapsed_s=1.0, eta_s=math.nan, is_eval=False)
    assert p.line().endswith("| 1.0s | ETA ?")
    gpu = rltrain.Progress(**{**p.__dict__, "device_free_mib": 812.4, "cotenants_mib": 5400.0})
    assert gpu.line().endswith("| 1.0s | ETA ? | GPU free 812 MiB, others 5400 MiB")


def test_keyword_argument_errors_name_the_argument(tmp_path, configs):
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    with pytest.raises(rltrain.ConfigError, match=r"^rltrain\.gym\.train\(total_steps=-5\): key 'train\.total_steps'"):
        rltrain.gym.train("Pendulum-v1", cfg, total_steps=-5, out_dir=tmp_path / "r")
    with pytest.raises(rltrain.ConfigError, match=r"^Config\.set\('out_dir', ''\): key 'out_dir'"):
        rltrain.Config().set("out_dir", "")
    with pytest.raises(rltrain.ConfigError, match=r"^--set train\.total_steps=abc:1:19: "):  # the --set form keeps it
        rltrain.Config().set("train.total_steps=abc")


def test_group_progress_line_shows_a_shared_gpus_memory():
    import math

    r = rltrain.GroupProgress(env_steps=10, total_steps=20, updates=4, n_members=2, n_evaluated=0, eval_mean=math.nan,
                              eval_min=math.nan, eval_max=math.nan, updates_per_s=2.0, env_steps_per_s=3.0,
                              elapsed_s=1.0, eta_s=math.nan, is_eval=False)
    assert r.line().endswith("| 1.0s | ETA ?")
    gpu = rltrain.GroupProgress(**{**r.__dict__, "device_free_mib": 700.0, "cotenants_mib": 5400.4})
    assert gpu.line().endswith("| 1.0s | ETA ? | GPU free 700 MiB, others 5400 MiB")


def test_sweep_launcher_reads_devices_and_picks_the_telling_status():
    # The --devices launcher's pure parts (rltrain.sweep.launch), without Optuna: its list, the status it exits
    # with when workers end differently, and the arguments it passes on.
    from rltrain.sweep.launch import _without, parse_devices, worst_status

    assert parse_devices("cuda:0, cuda:1") == ["cuda:0", "cuda:1"]
    assert parse_devices("cpu,cpu") == ["cpu", "cpu"]
    for bad in ("", " ", "cuda:0,", ",cuda:1", "cuda:0,,cuda:1"):
        with pytest.raises(ValueError, match="--devices"):
            parse_devices(bad)
    assert worst_status([0, 0]) == 0
    assert worst_status([0, 130]) == 130
    assert worst_status([130, 1]) == 1  # a failure says more than an interruption
    assert worst_status([1, 3]) == 3  # nothing fits: change the config
    assert worst_status([3, 2, 1]) == 2  # a bad config or space first
    assert worst_status([0, -9]) == 1  # a worker killed by a signal failed
    argv = ["--config", "c.yaml", "--devices", "cuda:0,cuda:1", "--sampler-seed=4", "--device", "cpu", "--quiet"]
    assert _without(_without(_without(argv, "--devices"), "--device"), "--sampler-seed") == \
        ["--config", "c.yaml", "--quiet"]
