#!/bin/sh
# run_tests.sh BUILD_DIR [pytest args...]: tests the Python bindings against BUILD_DIR/librltrain.so.
# Creates a virtual environment in BUILD_DIR/python-venv (it sees the system's packages, so what is
# already installed is not downloaded again), installs gymnasium, numpy, pyyaml, matplotlib, pytest, optuna (the
# sweep tests; `pip install rltrain[sweep]` for users) and the package itself (pip install ./bindings/python, without building the library again: RLTRAIN_LIBRARY points
# at BUILD_DIR's), tries gymnasium[mujoco] and tensorboard (MuJoCo wheels do not exist for every platform:
# without them the MuJoCo and TensorBoard tests skip), and runs pytest from outside the source tree so that
# the installed package is the one tested. Registered as the ctest test "python_bindings" (label learning).
# test_pip_install.sh checks the install that builds and bundles the library.
#   sh bindings/python/run_tests.sh build -m "not learning"     # the quick tests only
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-$here/../../build}" && pwd)
[ $# -gt 0 ] && shift
lib="$bin/librltrain.so"
if [ ! -f "$lib" ]; then
  echo "run_tests.sh: $lib not found: build the library first (cmake --build $bin)" >&2
  exit 1
fi
py=${PYTHON:-python3}
pip_quiet="--quiet --disable-pip-version-check --no-input"
venv="$bin/python-venv"
# The package's build (scikit-build-core) leaves the source folder as it was, so pip installs from it
# directly; RLTRAIN_PYTHON_BUNDLE=OFF skips building the C library, which is BUILD_DIR's here.
no_bundle="--config-settings=cmake.define.RLTRAIN_PYTHON_BUNDLE=OFF"
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE

if [ -x "$venv/bin/python" ] || "$py" -m venv --system-site-packages "$venv" >/dev/null 2>&1; then
  vpy="$venv/bin/python"
  # shellcheck disable=SC2086
  "$vpy" -m pip install $pip_quiet gymnasium numpy pyyaml matplotlib pytest
  # shellcheck disable=SC2086
  "$vpy" -m pip install $pip_quiet optuna ||
    echo "run_tests.sh: optuna does not install here; the sweep tests will skip" >&2
  # shellcheck disable=SC2086
  "$vpy" -m pip install $pip_quiet "gymnasium[mujoco]" ||
    echo "run_tests.sh: gymnasium[mujoco] does not install here; the MuJoCo test will skip" >&2
  # shellcheck disable=SC2086
  "$vpy" -m pip install $pip_quiet tensorboard ||
    echo "run_tests.sh: tensorboard does not install here; the TensorBoard tests will skip" >&2
  # shellcheck disable=SC2086
  "$vpy" -m pip install $pip_quiet --force-reinstall --no-deps "$no_bundle" "$here"
else
  # No venv module (Debian's python3 without python3-venv): install into a folder on PYTHONPATH.
  echo "run_tests.sh: '$py -m venv' failed; installing into $bin/python-site instead" >&2
  vpy="$py"
  site="$bin/python-site"
  rm -rf "$site"
  # shellcheck disable=SC2086
  "$py" -m pip install $pip_quiet --target "$site" gymnasium numpy pyyaml matplotlib pytest
  # shellcheck disable=SC2086
  "$py" -m pip install $pip_quiet --target "$site" optuna ||
    echo "run_tests.sh: optuna does not install here; the sweep tests will skip" >&2
  # shellcheck disable=SC2086
  "$py" -m pip install $pip_quiet --target "$site" --no-deps "$no_bundle" "$here"
  # shellcheck disable=SC2086
  "$py" -m pip install $pip_quiet --target "$site" "gymnasium[mujoco]" ||
    echo "run_tests.sh: gymnasium[mujoco] does not install here; the MuJoCo test will skip" >&2
  # shellcheck disable=SC2086
  "$py" -m pip install $pip_quiet --target "$site" tensorboard ||
    echo "run_tests.sh: tensorboard does not install here; the TensorBoard tests will skip" >&2
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi

RLTRAIN_LIBRARY="$lib"
RLTRAIN_SOURCE_DIR=$(cd "$here/../.." && pwd)
export RLTRAIN_LIBRARY RLTRAIN_SOURCE_DIR
# Run from the build tree, not the source tree, so that `import rltrain` finds the installed package.
cd "$bin"
set +e
"$vpy" -m pytest -rA --durations=5 -p no:cacheprovider --rootdir "$here" -c "$here/pyproject.toml" "$here/tests" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "run_tests.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$rc"
