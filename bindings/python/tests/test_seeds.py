"""Seed groups from Python: rltrain.Group (the built-in environment) and rltrain.gym.train(..., seeds=[...])
with one Gymnasium environment per seed: each member is the single run of its seed (the same final.ckpt byte
for byte and the same metrics.csv but wall_s, on the CPU), out_dir/summary.csv, stopping and resuming, and the
refusals."""

import csv
import ctypes
import itertools
import math
import shutil
import subprocess
import sys

import pytest

import rltrain
import rltrain.gym
from rltrain import _native

gymnasium = pytest.importorskip("gymnasium")


def quick(configs, out_dir, steps=600) -> rltrain.Config:
    """configs/td3_pendulum_fast.yaml, short: learning from step 200, an evaluation every 300 steps."""
    cfg = rltrain.Config.from_file(configs / "td3_pendulum_fast.yaml")
    for key, value in (("train.total_steps", steps), ("train.start_steps", 200), ("train.eval_every", 300),
                       ("train.eval_episodes", 2), ("train.batch_size", 32), ("train.progress_every_s", 0.05),
                       ("out_dir", str(out_dir))):
        cfg.set(key, value)
    return cfg


def metrics_without_wall(path):
    """metrics.csv's rows without the wall_s column (the 7th), which differs between runs."""
    with open(path) as f:
        return [row[:6] + row[7:] for row in csv.reader(f)]


def test_group_report_layout_matches_the_c_header(tmp_path, source_dir):
    """rlt_group_report's ctypes mirror has the C compiler's size and offsets."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to check the struct layout with")
    s = _native.rlt_group_report
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "rltrain.h"', "int main(void) {",
             '    printf("size %zu\\n", sizeof(rlt_group_report));']
    lines += [f'    printf("{name} %zu\\n", offsetof(rlt_group_report, {name}));' for name, _ in s._fields_]
    lines += ["    return 0;", "}"]
    (tmp_path / "layout.c").write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-I", str(source_dir / "include"), str(tmp_path / "layout.c"), "-o",
                    str(tmp_path / "layout")], check=True)
    out = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout.split()
    expected = ["size", str(ctypes.sizeof(s))]
    for name, _ in s._fields_:
        expected += [name, str(getattr(s, name).offset)]
    assert out == expected


def test_gym_train_seeds_are_the_single_runs(tmp_path, configs):
    """train(..., seeds=[3, 4]): each member's final.ckpt and metrics.csv (but wall_s) are those of
    train(..., seed=s); summary.csv has their rows; the results hold each run and the mean, min and max."""
    reports = []
    result = rltrain.gym.train("Pendulum-v1", quick(configs, tmp_path / "group"), seeds=[3, 4],
                               callback=lambda ev: reports.append(ev) and False)
    assert result["seeds"] == [3, 4] and [r["seed"] for r in result["runs"]] == [3, 4]
    assert result["env_steps"] == 1200 and result["out_dir"] == str(tmp_path / "group")
    assert [e[0] for e in result["evaluations"]][-1] == 1200 and all(len(e) == 4 for e in result["evaluations"])
    assert any(ev["kind"] == "eval" for ev in reports) and all("eval_mean" in ev for ev in reports)
    finals = []
    for run in result["runs"]:
        s = run["seed"]
        single = rltrain.gym.train("Pendulum-v1", quick(configs, tmp_path / f"single_{s}"), seed=s)
        member = tmp_path / "group" / f"seed_{s}"
        assert run["out_dir"] == str(member) and run["allocations_after_init"] == 0
        assert (member / "final.ckpt").read_bytes() == (tmp_path / f"single_{s}" / "final.ckpt").read_bytes()
        assert metrics_without_wall(member / "metrics.csv") == metrics_without_wall(tmp_path / f"single_{s}" / "metrics.csv")
        assert run["final_eval_return"] == single["final_eval_return"]
        assert run["updates"] == single["updates"] and run["env_steps"] == 600
        finals.append(run["final_eval_return"])
    assert result["final_eval_mean"] == pytest.approx(sum(finals) / 2)
    assert (result["final_eval_min"], result["final_eval_max"]) == (min(finals), max(finals))
    with open(tmp_path / "group" / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["seed"]), r["status"], int(r["env_steps"])) for r in rows] == [(3, "finished", 600), (4, "finished", 600)]
    assert [float(r["last_eval_return"]) for r in rows] == pytest.approx(finals, abs=1e-5)


def test_group_stops_on_request_and_resumes(tmp_path, configs):
    """rltrain.Group on the built-in pendulum (train.num_seeds): a progress callback's True stops every member
    (their outputs written, status "stopped"); Group.resume("final.ckpt") continues each to the end."""
    cfg = quick(configs, tmp_path / "g", steps=2000).set("train.num_seeds", 2).set("seed", 7)
    with rltrain.Group(cfg) as g:
        assert g.seeds == [7, 8] and "seed group: 2 seeds" in g.plan_table()
        p = g.run(progress=lambda r: r.env_steps >= 800)
        assert 800 <= p.env_steps < 4000 and p.n_members == 2
    with open(tmp_path / "g" / "summary.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["stopped", "stopped"]
    with rltrain.Group(cfg) as g:
        g.resume("final.ckpt")
        p = g.run()
        assert p.env_steps == 4000 and p.n_evaluated == 2 and not math.isnan(p.eval_mean)
        assert [g.member_progress(k).env_steps for k in range(2)] == [2000, 2000]
        assert g.member_out_dir(1) == str(tmp_path / "g" / "seed_8")
    with open(tmp_path / "g" / "summary.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["finished", "finished"]


def test_gym_train_seeds_refusals_and_errors(tmp_path, configs):
    """An environment instance (one cannot serve several runs), seed with seeds, seeds=[], save_path and
    duplicate seeds are refused; a group that does not fit raises NoFitError naming the seeds that fit; an
    environment's exception in one member is raised again."""
    cfg = quick(configs, tmp_path / "r")
    env = gymnasium.make("Pendulum-v1")
    with pytest.raises(ValueError, match="environments of its own"):
        rltrain.gym.train(env, cfg, seeds=[1, 2])
    env.close()
    with pytest.raises(ValueError, match="not both"):
        rltrain.gym.train("Pendulum-v1", cfg, seed=1, seeds=[1, 2])
    with pytest.raises(ValueError, match="no run"):
        rltrain.gym.train("Pendulum-v1", cfg, seeds=[])
    with pytest.raises(ValueError, match="save_path"):
        rltrain.gym.train("Pendulum-v1", cfg, seeds=[1, 2], save_path=tmp_path / "a.ckpt")
    with pytest.raises(rltrain.ConfigError, match="repeats entry 1"):
        rltrain.gym.train("Pendulum-v1", cfg, seeds=[1, 1])
    need = cfg.plan_fit()[0]["need_bytes"]
    tight = cfg.copy().set("memory.budget_mb", 2.5 * need / 2**20)
    with pytest.raises(rltrain.NoFitError, match="at most 2 seeds fit") as info:
        rltrain.gym.train("Pendulum-v1", tight, seeds=[1, 2, 3])
    assert "seed group: 3 seeds" in info.value.plan

    made = itertools.count()

    class Boom(gymnasium.Wrapper):
        def step(self, action):
            raise RuntimeError("boom in the second seed's environment")

    def make():
        e = gymnasium.make("Pendulum-v1")
        return Boom(e) if next(made) == 2 else e  # member 0: envs 0 (train) and 1 (eval); member 1 trains on 2

    with pytest.raises(RuntimeError, match="boom in the second seed"):
        rltrain.gym.train(make, quick(configs, tmp_path / "boom"), seeds=[1, 2])
    with open(tmp_path / "boom" / "summary.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["stopped", "failed"]


def test_gym_module_cli_with_num_seeds(tmp_path, configs):
    """python -m rltrain.gym with --set train.num_seeds=2: the group's progress lines and closing lines."""
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "rltrain.gym", "--config", str(configs / "td3_pendulum_fast.yaml"), "--env",
           "Pendulum-v1", "--steps", "300", "--set", "train.start_steps=100", "--set", "train.eval_every=150",
           "--set", "train.eval_episodes=1", "--set", "train.num_seeds=2", "--set", f"out_dir={out}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[-4].startswith("seed 1: 300 env steps") and lines[-3].startswith("seed 2: 300 env steps"), lines
    assert lines[-2].startswith("finished 2 seeds: 600 env steps") and "final eval mean" in lines[-2]
    assert lines[-1] == f"outputs written to {out}/seed_<seed>/ (config.yaml, metrics.csv, summary.json, final.ckpt, " \
                        f"best.ckpt each) and {out}/summary.csv"
    assert any(line.startswith("[eval] step 600/600 (2 seeds) | eval mean") for line in lines), lines
    assert (out / "seed_2" / "final.ckpt").is_file() and (out / "summary.csv").is_file()


def test_gym_train_data_parallel_over_two_cpu_ranks(tmp_path, configs):
    """devices=[cpu, cpu] with one seed: train() runs the ranks of one data-parallel run, each on Gymnasium
    environments of its own (rank 1's first reset seeded after rank 0's), out_dir/rank_<k>/; the replicas end with
    the same parameters (the evaluations agree exactly) while their data differ (their episodes do)."""
    cfg = quick(configs, tmp_path / "dp")
    cfg.set("devices=[cpu, cpu]")
    assert _native.lib.rlt_config_ranks(cfg._handle) == 2
    result = rltrain.gym.train("Pendulum-v1", cfg)
    assert result["ranks"] == 2 and len(result["runs"]) == 2
    r0, r1 = result["runs"]
    assert r0["out_dir"] == str(tmp_path / "dp" / "rank_0") and r1["out_dir"] == str(tmp_path / "dp" / "rank_1")
    assert r0["env_steps"] == r1["env_steps"] == 600 and r0["updates"] == r1["updates"] > 0
    assert r0["final_eval_return"] == r1["final_eval_return"]
    assert r0["last_episode_return"] != r1["last_episode_return"]
    with open(tmp_path / "dp" / "summary.csv") as f:
        assert [int(r["rank"]) for r in csv.DictReader(f)] == [0, 1]
