#!/bin/sh
# test_pip_install.sh BUILD_DIR: a new user's install, checked. In a fresh virtual environment that sees no
# system packages, `pip install ./bindings/python` builds the C library (scikit-build-core, CMake) and bundles
# it in the package; then, with RLTRAIN_LIBRARY unset and from outside the source tree, `import rltrain` loads
# the bundled library and trains 300 steps of the built-in pendulum, and rltrain-plot reads the run. The
# same again from an sdist of the package (it carries the C sources, so it builds away from the checkout).
# The source tree must be left as it was. Registered as the ctest test "python_pip_install"; pip fetches
# scikit-build-core, numpy and pyyaml from the package index.
# The library is built without the CUDA module (CMAKE_ARGS=-DRLT_CUDA=OFF) to keep the test short; with nvcc
# on PATH a plain `pip install` builds and bundles it as well.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-$here/../../build}" && pwd)
py=${PYTHON:-python3}
work="$bin/python-pip-test"
venv="$work/venv"
rm -rf "$work"
mkdir -p "$work"
if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
  echo "test_pip_install.sh: '$py -m venv' failed: install the venv module (Debian: python3-venv)" >&2
  exit 1
fi
vpy="$venv/bin/python"
pip_quiet="--quiet --disable-pip-version-check --no-input"
CMAKE_ARGS="-DRLT_CUDA=OFF"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
PYTHONDONTWRITEBYTECODE=1
export CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL PYTHONDONTWRITEBYTECODE
unset RLTRAIN_LIBRARY RLT_CUDA_MODULE

listing() { (cd "$here" && find . -name __pycache__ -prune -o -print | LC_ALL=C sort); }
before=$(listing)

# check LABEL: imports the installed package from $work (not the source tree), requires the bundled library,
# trains 300 steps with an evaluation every 100, and reads the run back with rltrain-plot (its CSV output
# needs no matplotlib, which this environment does not have).
check() {
  run="$work/run_$1"
  (cd "$work" && "$vpy" - "$run" <<'EOF'
import json, sys
from pathlib import Path
import rltrain
pkg = Path(rltrain.__file__).resolve().parent
lib = Path(rltrain.LIBRARY_PATH).resolve()
assert lib.parent == pkg and lib.name == "librltrain.so", f"library {lib} is not the one bundled in {pkg}"
cfg = rltrain.Config.from_string(
    "algo: td3\nenv: {name: pendulum}\ndevice: cpu\nseed: 1\n"
    "train: {total_steps: 300, start_steps: 100, batch_size: 32, eval_every: 100, eval_episodes: 1}\n"
    "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 1000}\n", "pip_check.yaml")
cfg.set("out_dir", sys.argv[1])
with rltrain.Trainer(cfg) as tr:
    p = tr.run()
    assert (p.env_steps, p.updates) == (300, 200), (p.env_steps, p.updates)
    assert tr.allocations_after_init == 0
summary = json.loads((Path(sys.argv[1]) / "summary.json").read_text())
assert summary["status"] == "finished" and summary["env_steps"] == 300
print(f"ok: rltrain {rltrain.version()} from {lib}: 300 steps, final eval {p.last_eval_return:.1f}")
EOF
  )
  "$venv/bin/rltrain-plot" "$run" --csv "$work/curve_$1.csv"
  n=$(grep -c "^td3 pendulum," "$work/curve_$1.csv")
  if [ "$n" -ne 3 ]; then
    echo "test_pip_install.sh: rltrain-plot wrote $n evaluation rows, expected 3" >&2
    exit 1
  fi
  # The native CLI comes with the package: `rltrain`, with the bundled library, from outside the source tree.
  (cd "$work" && "$venv/bin/rltrain" --version | grep -q "^rltrain ") ||
    { echo "test_pip_install.sh: the package's rltrain command does not run" >&2; exit 1; }
  (cd "$work" && "$venv/bin/rltrain" plan --config "$here/../../configs/td3_lowmem.yaml" --device cpu >/dev/null) ||
    { echo "test_pip_install.sh: rltrain plan from the package failed" >&2; exit 1; }
}

echo "== pip install $here (fresh venv, RLTRAIN_LIBRARY unset)"
t0=$(date +%s)
# shellcheck disable=SC2086
"$vpy" -m pip install $pip_quiet "$here"
echo "pip install took $(($(date +%s) - t0)) s"
check dir

echo "== the same from an sdist of $here"
# shellcheck disable=SC2086
"$vpy" -m pip install $pip_quiet scikit-build-core
(cd "$here" && "$vpy" -c "import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))" "$work/dist" >/dev/null)
sdist=$(ls "$work"/dist/rltrain-*.tar.gz)
if ! tar tzf "$sdist" | grep -q "/csrc/include/rltrain.h$"; then
  echo "test_pip_install.sh: $sdist does not carry the C sources (csrc/)" >&2
  exit 1
fi
"$vpy" -m pip uninstall --quiet --yes rltrain
t0=$(date +%s)
# shellcheck disable=SC2086
"$vpy" -m pip install $pip_quiet "$sdist"
echo "pip install of the sdist took $(($(date +%s) - t0)) s"
check sdist

if [ "$(listing)" != "$before" ]; then
  echo "test_pip_install.sh: the install changed the source tree $here:" >&2
  printf '%s\n' "$before" > "$work/before.txt"
  listing > "$work/after.txt"
  diff "$work/before.txt" "$work/after.txt" >&2 || true
  exit 1
fi
echo "test_pip_install.sh: ok (installed from the folder and from an sdist)"
