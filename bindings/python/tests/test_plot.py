"""Tests of rltrain.plot (learning curves from run directories) and rltrain.tensorboard.

The aggregation is checked numerically without matplotlib; the figure tests train two short runs on the
built-in pendulum and plot them through the command line. The TensorBoard tests need the tensorboard
package (and gymnasium for the adapter's live scalars) and skip without them.
"""

import csv
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import rltrain
from rltrain import plot as rplot

HEADER = "kind,env_step,episode,return,length,updates,wall_s,critic_loss,actor_loss,loss_scale,amp_skipped\n"


def write_metrics(run_dir, rows):
    """A metrics.csv with the trainer's columns; rows are (kind, env_step, return)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [HEADER]
    for i, (kind, step, ret) in enumerate(rows):
        if kind == "episode":
            lines.append(f"episode,{step},{i + 1},{ret},200,0,0.01,,,,\n")
        else:
            lines.append(f"eval,{step},{i},{ret},,5,0.02,0.5,1.5,,\n")
    (run_dir / "metrics.csv").write_text("".join(lines))
    return run_dir


# ---------------------------------------------------------------------------------------------------
# Reading and aggregating: numpy only
# ---------------------------------------------------------------------------------------------------
def test_aggregate_mean_min_max_std_at_shared_steps():
    # Run c stopped early (no step 400) and run b evaluated once more (step 250): the statistics are taken
    # at the steps all three have.
    a = (np.array([100, 200, 300, 400]), np.array([-10.0, -6.0, -2.0, 0.0]))
    b = (np.array([100, 200, 250, 300, 400]), np.array([-20.0, -4.0, 99.0, -1.0, 1.0]))
    c = (np.array([100, 200, 300]), np.array([-30.0, -8.0, -3.0]))
    st = rplot.aggregate([a, b, c])
    assert st["n"] == 3
    assert st["steps"].tolist() == [100, 200, 300]
    assert st["mean"] == pytest.approx([-20.0, -6.0, -2.0])
    assert st["min"].tolist() == [-30.0, -8.0, -3.0]
    assert st["max"].tolist() == [-10.0, -4.0, -1.0]
    expected_std = [np.sqrt(200.0 / 3), np.sqrt(8.0 / 3), np.sqrt(2.0 / 3)]  # over runs, ddof 0
    assert st["std"] == pytest.approx(expected_std)


def test_aggregate_interpolates_runs_with_different_steps():
    # Episode rows end at different steps in each run: both are linear in the step, so linear
    # interpolation is exact, and the grid covers only the range both runs have.
    s1 = np.array([0, 100, 300, 1000])
    s2 = np.array([50, 400, 700, 900, 1200])
    st = rplot.aggregate([(s1, 2.0 * s1), (s2, 4.0 * s2)], interpolate=True, points=11)
    assert st["steps"][0] == 50 and st["steps"][-1] == 1000 and len(st["steps"]) == 11
    assert st["mean"] == pytest.approx(3.0 * st["steps"])
    assert st["min"] == pytest.approx(2.0 * st["steps"]) and st["max"] == pytest.approx(4.0 * st["steps"])


def test_aggregate_refuses_runs_without_common_steps():
    with pytest.raises(rplot.PlotError, match="share no step"):
        rplot.aggregate([(np.array([100, 200]), np.zeros(2)), (np.array([150, 250]), np.zeros(2))])
    with pytest.raises(rplot.PlotError, match="no common range"):
        rplot.aggregate([(np.array([0, 10]), np.zeros(2)), (np.array([20, 30]), np.zeros(2))], interpolate=True)
    with pytest.raises(rplot.PlotError, match="no rows"):
        rplot.aggregate([(np.array([], np.int64), np.array([]))])


def test_smooth_is_a_trailing_mean():
    assert rplot.smooth(np.array([1.0, 3.0, 5.0, 7.0]), 2).tolist() == [1.0, 2.0, 4.0, 6.0]
    assert rplot.smooth(np.array([1.0, 3.0, 5.0]), 1).tolist() == [1.0, 3.0, 5.0]
    assert rplot.smooth(np.array([2.0, 4.0, 9.0]), 10).tolist() == [2.0, 3.0, 5.0]


def test_load_curve_reads_one_kind_and_later_rows_win(tmp_path):
    # The rows after step 200 are written twice (an interrupted run, then its resumption): the later ones win.
    run = write_metrics(tmp_path / "r", [("episode", 100, -5.0), ("eval", 100, -50.0), ("eval", 200, -40.0),
                                         ("eval", 300, -35.0), ("eval", 300, -30.0), ("eval", 400, -20.0),
                                         ("episode", 250, -4.0)])
    steps, returns = rplot.load_curve(run, "eval")
    assert steps.tolist() == [100, 200, 300, 400] and returns.tolist() == [-50.0, -40.0, -30.0, -20.0]
    steps, returns = rplot.load_curve(run, "episode")
    assert steps.tolist() == [100, 250] and returns.tolist() == [-5.0, -4.0]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.csv").write_text("a,b\n1,2\n")
    with pytest.raises(rplot.PlotError, match="not an rltrain metrics.csv"):
        rplot.load_curve(tmp_path / "bad")


def test_find_runs_takes_a_folder_of_seeds(tmp_path):
    for s in (2, 1, 10):
        write_metrics(tmp_path / "td3" / f"seed_{s}", [("eval", 100, float(s))])
    assert rplot.find_runs(tmp_path / "td3" / "seed_1") == [tmp_path / "td3" / "seed_1"]
    assert [p.name for p in rplot.find_runs(tmp_path / "td3")] == ["seed_1", "seed_10", "seed_2"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(rplot.PlotError, match="no metrics.csv"):
        rplot.find_runs(tmp_path / "empty")


def test_default_label_names_algo_and_env(tmp_path):
    # summary.json names a Gymnasium run's env by its id (config.yaml keeps the built-in env.name).
    for s in (1, 2):
        run = write_metrics(tmp_path / "hc" / f"seed_{s}", [("eval", 100, 1.0)])
        (run / "summary.json").write_text('{"algo": "td3", "env": "HalfCheetah-v5"}')
        (run / "config.yaml").write_text("algo: td3\nenv: {name: pendulum}\n")
    assert rplot.default_label([tmp_path / "hc"]) == "td3 HalfCheetah-v5"
    (tmp_path / "hc" / "seed_2" / "summary.json").write_text('{"algo": "dqn", "env": "CartPole-v1"}')
    assert rplot.default_label([tmp_path / "hc"]) == "hc"  # they disagree: the common folder


def test_csv_output_without_matplotlib(tmp_path):
    """--csv needs no matplotlib; drawing without it is exit 1 with a message saying what to install."""
    write_metrics(tmp_path / "a", [("eval", 100, -10.0), ("eval", 200, -4.0)])
    write_metrics(tmp_path / "b", [("eval", 100, -20.0), ("eval", 200, -2.0)])
    # A None entry in sys.modules makes `import matplotlib` raise ImportError, as if it were not installed.
    code = ("import sys; sys.modules['matplotlib'] = None; from rltrain.plot import main; "
            "sys.exit(main(sys.argv[1:]))")
    out = tmp_path / "curves.csv"
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a"), str(tmp_path / "b"), "--csv", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["env_step"]), float(r["mean"]), float(r["min"]), float(r["max"]), int(r["n"])) for r in rows] == [
        (100, -15.0, -20.0, -10.0, 2), (200, -3.0, -4.0, -2.0, 2)]
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a"), "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "needs matplotlib" in p.stderr and "pip install matplotlib" in p.stderr
    assert not (tmp_path / "x.png").exists()


def test_cli_usage_errors(tmp_path):
    p = subprocess.run([sys.executable, "-m", "rltrain.plot", str(tmp_path / "missing")], capture_output=True, text=True)
    assert p.returncode == 2 and "no such run directory" in p.stderr
    p = subprocess.run([sys.executable, "-m", "rltrain.plot", "--group", "only_a_label"], capture_output=True, text=True)
    assert p.returncode == 2 and "at least one run directory" in p.stderr


# ---------------------------------------------------------------------------------------------------
# Figures of real runs (matplotlib)
# ---------------------------------------------------------------------------------------------------
def short_run(out_dir, seed, steps=600):
    """A short TD3 run on the built-in pendulum with an evaluation every 200 steps."""
    cfg = rltrain.Config.from_string(
        "algo: td3\nenv: {name: pendulum}\ndevice: cpu\ntrain: {batch_size: 16, start_steps: 100, eval_every: 200, "
        "eval_episodes: 1, progress_every_s: 0.0}\ntd3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\n"
        "replay: {capacity: 1000}\n", "short_run.yaml")
    cfg.set("seed", seed).set("train.total_steps", steps).set("out_dir", str(out_dir))
    with rltrain.Trainer(cfg) as tr:
        tr.run()
    return out_dir


def png_size(path):
    """(width, height) of a PNG file, after checking its signature and the CRC of its IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    (crc,) = struct.unpack(">I", data[29:33])
    assert zlib.crc32(data[12:29]) == crc, "IHDR CRC mismatch"
    assert data[-8:-4] == b"IEND"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return [short_run(root / "td3" / f"seed_{s}", s) for s in (1, 2)]


def test_plot_two_runs_from_the_command_line(two_runs, tmp_path):
    pytest.importorskip("matplotlib")
    out, table = tmp_path / "curves.png", tmp_path / "curves.csv"
    p = subprocess.run([sys.executable, "-m", "rltrain.plot", *map(str, two_runs), "-o", str(out), "--csv", str(table)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    width, height = png_size(out)
    assert width >= 400 and height >= 300
    # The mean, min and max of the evaluation returns that the two runs wrote, step by step.
    evals = [rplot.load_curve(r, "eval") for r in two_runs]
    assert evals[0][0].tolist() == evals[1][0].tolist() == [200, 400, 600]
    both = np.stack([v for _, v in evals])
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert [r["label"] for r in rows] == ["td3 pendulum"] * 3  # from the runs' summary.json
    assert [float(r["mean"]) for r in rows] == pytest.approx(both.mean(axis=0).tolist(), rel=1e-5)
    assert [float(r["min"]) for r in rows] == pytest.approx(both.min(axis=0).tolist(), rel=1e-5)
    assert [float(r["max"]) for r in rows] == pytest.approx(both.max(axis=0).tolist(), rel=1e-5)
    assert "td3 pendulum: 2 runs, 3 shared eval steps" in p.stdout


def test_plot_groups_and_episode_curves(two_runs, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "groups.svg"
    stats = rplot.plot({"seed 1": [two_runs[0]], "both": [two_runs[0].parent]}, out, spread="std")
    assert out.read_text().lstrip().startswith("<?xml") and "<svg" in out.read_text()
    assert stats["seed 1"]["n"] == 1 and stats["both"]["n"] == 2
    assert stats["both"]["mean"] == pytest.approx(
        (stats["seed 1"]["mean"] + rplot.load_curve(two_runs[1])[1]) / 2, rel=1e-9)
    out = tmp_path / "episodes.png"
    p = subprocess.run([sys.executable, "-m", "rltrain.plot", "--kind", "episode", "--group", "td3",
                        str(two_runs[0].parent), "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    png_size(out)
    assert "td3: 2 runs" in p.stdout


# ---------------------------------------------------------------------------------------------------
# TensorBoard (optional)
# ---------------------------------------------------------------------------------------------------
def read_scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_scalars_from_a_run_directory(two_runs, tmp_path):
    pytest.importorskip("tensorboard")
    p = subprocess.run([sys.executable, "-m", "rltrain.plot", str(two_runs[0].parent), "--label", "td3",
                        "--tensorboard", str(tmp_path / "tb")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "curves.png").exists()  # only --tensorboard asked for
    for run in two_runs:
        scalars = read_scalars(tmp_path / "tb" / "td3" / run.name)
        steps, returns = rplot.load_curve(run, "eval")
        assert [s for s, _ in scalars["eval/return"]] == steps.tolist()
        assert [v for _, v in scalars["eval/return"]] == pytest.approx(returns.tolist(), rel=1e-6)
        assert len(scalars["episode/return"]) == 3 and "eval/critic_loss" in scalars


def test_gym_train_writes_tensorboard_scalars(tmp_path, configs):
    pytest.importorskip("tensorboard")
    pytest.importorskip("gymnasium")
    import rltrain.gym

    events = []
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml").set("train.start_steps", 100)
    result = rltrain.gym.train("Pendulum-v1", cfg, total_steps=400, seed=3, eval_every=200, eval_episodes=1,
                               out_dir=tmp_path / "run", tensorboard=tmp_path / "tb", callback=events.append)
    scalars = read_scalars(tmp_path / "tb")
    assert [s for s, _ in scalars["eval/return"]] == [s for s, _ in result["evaluations"]] == [200, 400]
    assert [v for _, v in scalars["eval/return"]] == pytest.approx([r for _, r in result["evaluations"]], rel=1e-6)
    assert [s for s, _ in scalars["episode/return"]] == [200, 400]
    assert [e["kind"] for e in events].count("eval") == 2  # the user's callback is still called
