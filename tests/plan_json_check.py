"""plan_json_check.py RLTRAIN SOURCE_DIR: `rltrain plan --json` read as a script would (json.loads), field
by field against docs/plan_json.md: exit 3 and 0, stdout holding the document and nothing else, the
types of every field, entries adding up to their regions, the largest region named, every hint's "set"
making the plan fit when applied with --set, and docs/memory_plan.md showing the examples of tests/examples/ word
for word. Registered as the ctest test cli_plan_json_check."""
import json
import subprocess
import sys

RLTRAIN, SRC = sys.argv[1], sys.argv[2]
TD3 = f"{SRC}/configs/td3_pendulum.yaml"
MIB = 1 << 20


def plan(*args):
    p = subprocess.run([RLTRAIN, "plan", "--json", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_document(doc, budget_mb):
    assert doc["schema_version"] == 1
    assert isinstance(doc["generator"], str) and doc["generator"].startswith("rltrain ")
    assert doc["algo"] in ("td3", "dqn") and isinstance(doc["env"], str) and isinstance(doc["precision"], str)
    assert isinstance(doc["fits"], bool)
    dev = doc["device"]
    assert isinstance(dev["name"], str) and isinstance(dev["is_host"], bool)
    assert all(is_int(dev[k]) for k in ("total_bytes", "free_bytes", "context_bytes"))
    b = doc["budget"]
    assert b["key"] == "memory.budget_mb" and b["arena"] in ("host", "device")
    assert b["budget_bytes"] == budget_mb * MIB and is_int(b["limit_bytes"]) and b["limit_bytes"] <= b["budget_bytes"]
    assert b["fit_budget_bytes"] is None or (is_int(b["fit_budget_bytes"]) and b["fit_budget_bytes"] % MIB == 0)
    t = doc["totals"]
    assert all(is_int(t[k]) for k in ("need_bytes", "host_arena_bytes", "device_arena_bytes"))
    assert t["need_bytes"] == t[b["arena"] + "_arena_bytes"]
    assert doc["fits"] == (t["need_bytes"] <= b["limit_bytes"])

    entries = doc["entries"]
    assert entries and len({e["name"] for e in entries}) == len(entries)
    for e in entries:
        assert isinstance(e["name"], str) and isinstance(e["region"], str) and e["location"] in ("host", "device")
        assert is_int(e["bytes"]) and e["bytes"] > 0 and is_int(e["offset"])
    regions = {r["name"]: r for r in doc["regions"]}
    assert len(regions) == len(doc["regions"])
    for name, r in regions.items():
        mine = [e for e in entries if e["region"] == name]
        assert r["bytes"] == sum(e["bytes"] for e in mine) == r["host_bytes"] + r["device_bytes"]
        assert r["host_bytes"] == sum(e["bytes"] for e in mine if e["location"] == "host")
    assert sum(e["bytes"] for e in entries if e["location"] == "host") <= t["host_arena_bytes"]
    largest = doc["largest_region"]
    key = b["arena"] + "_bytes"
    assert largest["bytes"] == max(r[key] for r in regions.values()) == regions[largest["name"]][key]

    assert all(isinstance(n, str) for n in doc["notes"])
    lf = doc["largest_fitting"]
    for k in ("train.batch_size", "replay.capacity", "train.grad_accum_steps", "micro_batch"):
        assert lf[k] is None or (is_int(lf[k]) and lf[k] > 0)
    small = doc["smallest_sizes"]
    assert small["train.batch_size"] == 1 and is_int(small["replay.capacity"]) and is_int(small["need_bytes"])
    assert isinstance(small["fits"], bool)
    for h in doc["hints"]:
        assert isinstance(h["set"], dict) and isinstance(h["text"], str) and h["text"]
    assert (doc["hints"] == []) == doc["fits"]


def check_hints_fit(config, budget_mb, doc):
    """Every hint's set, applied with --set over the same config and budget, makes the plan fit."""
    for h in doc["hints"]:
        assert h["set"], h
        args = ["--config", config, "--budget-mb", str(budget_mb)]
        for k, v in h["set"].items():
            args += ["--set", f"{k}={v}"]
        code, out, err = plan(*args)
        assert code == 0 and json.loads(out)["fits"], (h, code, err)


def main():
    # Over budget, levers that fit: exit 3, the document alone on stdout, hints that work.
    code, out, err = plan("--config", TD3, "--budget-mb", "10")
    assert code == 3, (code, err)
    assert err == "", err
    doc = json.loads(out)
    check_document(doc, 10)
    assert doc["fits"] is False and doc["largest_fitting"]["replay.capacity"] is not None
    check_hints_fit(TD3, 10, doc)

    # Nothing fits by batch or replay alone: nulls (not 0), and the smallest sizes with their budget.
    code, out, err = plan("--config", TD3, "--budget-mb", "4")
    assert code == 3, (code, err)
    doc = json.loads(out)
    check_document(doc, 4)
    assert all(v is None for v in doc["largest_fitting"].values()), doc["largest_fitting"]
    assert doc["smallest_sizes"]["fits"] is False and doc["smallest_sizes"]["fit_budget_bytes"] > 4 * MIB
    assert any("nothing fits" in h["text"] for h in doc["hints"])
    check_hints_fit(TD3, 4, doc)

    # Fits: exit 0, no hints.
    code, out, err = plan("--config", TD3, "--budget-mb", "64")
    assert code == 0, (code, err)
    doc = json.loads(out)
    check_document(doc, 64)
    assert doc["fits"] is True and doc["hints"] == []

    # DQN with images: replay is the largest region.
    code, out, err = plan("--config", f"{SRC}/configs/dqn_minatar_breakout.yaml", "--device", "cpu", "--budget-mb", "16")
    assert code == 3, (code, err)
    doc = json.loads(out)
    check_document(doc, 16)
    assert doc["algo"] == "dqn" and doc["largest_region"]["name"] == "replay" and doc["notes"]

    # A config error: exit 2, the message on stderr, nothing on stdout.
    code, out, err = plan("--config", TD3, "--set", "train.bach_size=3")
    assert code == 2 and out == "" and "batch_size" in err, (code, out, err)
    # docs/memory_plan.md shows the examples that ctest runs (tests/examples/): word for word.
    with open(f"{SRC}/docs/memory_plan.md", encoding="utf-8") as f:
        doc_text = f.read()
    for name in ("plan_fails_fast.cmake", "test_plan_fails_fast.py"):
        with open(f"{SRC}/tests/examples/{name}", encoding="utf-8") as f:
            assert f.read() in doc_text, f"docs/memory_plan.md no longer shows tests/examples/{name} as it is"
    print("plan_json_check: passed")


if __name__ == "__main__":
    main()
