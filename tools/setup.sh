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
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "setup: installing$missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi
# nvcc is optional: the CUDA backend module is built when it is found.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RLT_CMAKE_ARGS:-} >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
grep -A8 "configuration summary" build-configure.log || true
cmake --build build -j"$(nproc)"
