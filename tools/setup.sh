#!/usr/bin/env bash
# setup.sh: installs the build dependencies (Debian/Ubuntu packages) when missing, then configures and
# builds rltrain in ./build. Safe to run again: it only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="build-essential cmake pkg-config libyaml-dev libopenblas-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    # -n: fail at once instead of waiting for a password nobody will type (CI, scripts).
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup: missing packages:$missing" >&2
      echo "setup: not root and no sudo; as root run: apt-get install -y$missing" >&2
      exit 1
    fi
    sudo="sudo -n"
  fi
  echo "setup: installing$missing"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
# nvcc is optional: the CUDA backend module is built when it is found.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RLT_CMAKE_ARGS:-} >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
grep -A8 "configuration summary" build-configure.log || true
cmake --build build -j"$(nproc)"
