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
# nvcc is optional: the CUDA backend module is built when it is found. It is most of the build's time (about
# 2.5 minutes on 2 cores for the five default architectures, against 75 s for the rest), so it is built only for
# the GPU that is here (nvidia-smi's compute capability); with no GPU it is built for every default architecture
# (CI does so, to compile the CUDA code), and RLT_CUDA=OFF skips it. RLT_CUDA_ARCHS (e.g. "86;90") picks them.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cuda_args=()
if [ "${RLT_CUDA:-}" = OFF ] || [ "${RLT_CUDA:-}" = 0 ]; then
  cuda_args=(-DRLT_CUDA=OFF)
  echo "setup: RLT_CUDA=$RLT_CUDA: building without the CUDA backend module"
elif command -v nvcc >/dev/null 2>&1; then
  archs=${RLT_CUDA_ARCHS:-}
  if [ -z "$archs" ] && command -v nvidia-smi >/dev/null 2>&1; then
    # "8.6" per GPU -> "86"; several GPUs of different kinds -> "80;90".
    archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' |
            sort -u | paste -sd ';' || true)
  fi
  if [ -n "$archs" ]; then
    cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="$archs")
    echo "setup: building the CUDA backend module for this machine's GPU (sm_${archs//;/, sm_}): a minute or two"
  else
    echo "setup: no GPU found (nvidia-smi), but nvcc is here: building the CUDA backend module for the default"
    echo "setup: architectures (sm_75 .. sm_90), which takes about 2-3 minutes on 2 cores (the rest about 75 s);"
    echo "setup: RLT_CUDA=OFF bash tools/setup.sh builds without it, RLT_CUDA_ARCHS=86 for one architecture"
  fi
fi
if [ -n "${RLT_SETUP_DRY_RUN:-}" ]; then  # tests/check_setup.sh: what would be configured, and nothing else
  echo "setup: cmake args: ${cuda_args[*]:-}"
  exit 0
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" ${RLT_CMAKE_ARGS:-} >build-configure.log 2>&1 ||
  { cat build-configure.log; exit 1; }
grep -A8 "configuration summary" build-configure.log || true
echo "setup: building with $(nproc) jobs (progress in percent; the CUDA kernels are the long steps)"
start=$(date +%s)
cmake --build build -j"$(nproc)"
echo "setup: built in $(( $(date +%s) - start )) s into build/"
