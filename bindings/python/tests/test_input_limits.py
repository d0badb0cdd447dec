"""Inputs that C cannot take as given are refused at the Python boundary with ValueError, never cut short or
wrapped on the way through ctypes: space sizes beyond int32 (2^32 + 4 used to arrive as 4), and strings and
paths with a NUL byte (C would read a shorter string: another file, another value)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import rltrain
from rltrain import _native


def test_space_sizes_beyond_int32_are_refused():
    with pytest.raises(ValueError, match="2\\^31 - 1"):
        rltrain.Space.box(2**32 + 4)
    with pytest.raises(ValueError, match="2\\^31 - 1"):
        rltrain.Space.box((65536, 65536, 65536))  # each fits, the product does not
    with pytest.raises(ValueError, match="2\\^31 - 1"):
        rltrain.Space.box((2**31, 1), np.uint8)
    with pytest.raises(ValueError, match="2\\^31 - 1"):
        rltrain.Space.discrete(2**31)
    # A space made without the constructors is checked where it is converted.
    raw = rltrain.Space("box", (2**32 + 4,), np.dtype(np.float32))
    with pytest.raises(ValueError, match="2\\^31 - 1"):
        raw.to_c()


def test_space_sizes_at_the_int32_limit_convert_exactly():
    s = rltrain.Space.box(2**31 - 1)
    assert s.size == 2**31 - 1
    c, _ = s.to_c()
    assert c.shape[0] == 2**31 - 1
    d, _ = rltrain.Space.discrete(2**31 - 1).to_c()
    assert d.n == 2**31 - 1


def test_nul_bytes_in_strings_and_paths_are_refused(tmp_path):
    with pytest.raises(ValueError, match="NUL"):
        rltrain.Config.from_file(str(tmp_path / "a.yaml") + "\0.ignored")
    with pytest.raises(ValueError, match="NUL"):
        rltrain.Config.from_string("algo: td3\n\0train: {total_steps: 5}\n")
    with pytest.raises(ValueError, match="NUL"):
        rltrain.Config.from_string("algo: td3\n", "name\0tail")
    cfg = rltrain.Config()
    with pytest.raises(ValueError, match="NUL"):
        cfg.set("out_dir=runs/a\0b")
    # As a Python value the NUL is escaped in YAML ("\u0000") and reaches the engine whole, which refuses it.
    with pytest.raises(rltrain.ConfigError, match="NUL"):
        cfg.set("out_dir", "runs/a\0b")
    # The value was not applied, cut short or otherwise.
    assert "runs/a" not in cfg.dump()
    with pytest.raises(ValueError, match="NUL"):
        _native.c_path(b"dir/file\0.ckpt")


def test_nul_bytes_in_checkpoint_paths_write_nothing(tmp_path):
    cfg = rltrain.Config.from_string(
        "algo: td3\ndevice: cpu\ntrain: {batch_size: 8}\ntd3: {actor_hidden: [8], critic_hidden: [8]}\n"
        "replay: {capacity: 100}\n"
    )
    agent = rltrain.Agent(cfg, rltrain.Space.box(3), rltrain.Space.box(1))
    target = tmp_path / "agent.ckpt"
    with pytest.raises(ValueError, match="NUL"):
        agent.save(str(target) + "\0.bak")
    assert not target.exists(), "the path was not cut short at the NUL"
    with pytest.raises(ValueError, match="NUL"):
        agent.load(str(target) + "\0.bak")
    agent.save(target)  # the same agent saves to a clean path
    assert target.exists()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no threads on one CPU")
def test_under_an_address_space_limit_openblas_starts_no_threads_at_load():
    # OpenBLAS's idle threads at load would each take 128 MiB of address space and retry forever without
    # it; under a limit the package loads the library with OPENBLAS_NUM_THREADS=1 (and puts it back).
    code = (
        "import resource, os, ctypes\n"
        "resource.setrlimit(resource.RLIMIT_AS, (64 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "import rltrain._native as n\n"
        # dlsym through librltrain's handle finds the OpenBLAS it links (not numpy's own copy).
        "threads = n.lib.openblas_get_num_threads()\n"
        "print(threads, os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "None"], out.stdout


def test_values_that_conversion_would_change_are_refused():
    """Issue 37: a float Discrete action (1.7 stored as 1) and complex observations, actions or rewards (numpy
    drops the imaginary part) are refused; whole floats and ints are actions."""
    cfg = rltrain.Config.from_string("algo: dqn\nenv: {name: cartpole}\n")
    agent = rltrain.Agent(cfg, rltrain.Space.box((4,)), rltrain.Space.discrete(2))
    o = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="whole numbers"):
        agent.observe(o, 1.7, 0.0, o, False)
    with pytest.raises(ValueError, match="whole numbers"):
        agent.observe(o, float("nan"), 0.0, o, False)
    with pytest.raises(TypeError, match="complex"):
        agent.observe(o, 1 + 0j, 0.0, o, False)
    with pytest.raises(TypeError, match="complex"):
        agent.observe(o, 1, 0.5j, o, False)
    with pytest.raises(TypeError, match="complex"):
        agent.act(np.zeros(4, np.complex64))
    agent.observe(o, 1.0, 0.0, o, False)
    agent.observe(o, np.int64(1), 0.0, o, False)


def test_config_keys_cannot_inject_yaml_and_non_bmp_paths_work(tmp_path):
    """Issue 37: a mapping key (or a key) holding YAML syntax would set other keys; a path with a character
    beyond the BMP (written by json as surrogate escapes that YAML refuses) is a path like any other."""
    cfg = rltrain.Config()
    with pytest.raises(ValueError, match="not a config key"):
        cfg.set("train", {"batch_size: 5, total_steps": 7})
    with pytest.raises(ValueError, match="not a config key"):
        cfg.set("train.batch_size: 5, x", 3)
    with pytest.raises(TypeError, match="strings"):
        cfg.set("train", {1: 2})
    assert cfg.to_dict()["train"]["batch_size"] == rltrain.Config().to_dict()["train"]["batch_size"]
    cfg.set("out_dir", str(tmp_path / "run_\U0001F600"))
    assert cfg.to_dict()["out_dir"] == str(tmp_path / "run_\U0001F600")
    # A control character in a string value is refused by the library (it would be another path).
    with pytest.raises(rltrain.ConfigError, match="control character 0x0a"):
        cfg.set("out_dir", "a\nb")


def test_an_owned_out_dir_is_refused_with_busy_error(tmp_path):
    """Issue 37: a second trainer into an out_dir that a live one owns (here in this process) is refused at once
    with BusyError naming the owner's pid, and the owner runs on untouched."""
    cfg = rltrain.Config.from_string("algo: td3\ntrain: {total_steps: 300, start_steps: 100, eval_episodes: 1}\n"
                                     "td3: {actor_hidden: [16], critic_hidden: [16]}\n").set("out_dir", str(tmp_path))
    with rltrain.Trainer(cfg) as first, rltrain.Trainer(cfg) as second:
        first.run()  # it keeps the lock until closed
        with pytest.raises(rltrain.BusyError, match=f"process {os.getpid()} holds"):
            second.run()
