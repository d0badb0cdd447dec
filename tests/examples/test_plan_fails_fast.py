# test_plan_fails_fast.py: a pytest test that a config fails fast, and why. RLTRAIN names the binary
# (default: rltrain on PATH), BIG_CONFIG the config that must not fit.
import json
import os
import subprocess

RLTRAIN = os.environ.get("RLTRAIN", "rltrain")
CONFIG = os.environ.get("BIG_CONFIG", "tests/data/td3_big_replay.yaml")  # from the rltrain checkout


def test_big_replay_fails_fast():
    assert os.path.isfile(CONFIG), f"{CONFIG} not found: set BIG_CONFIG to the config that must not fit"
    p = subprocess.run([RLTRAIN, "plan", "--config", CONFIG, "--json"], capture_output=True, text=True)
    assert p.returncode == 3, p.stderr  # 3: the memory plan does not fit
    plan = json.loads(p.stdout)
    assert plan["schema_version"] == 1
    assert plan["fits"] is False
    assert plan["largest_region"]["name"] == "replay"
