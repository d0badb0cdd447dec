#!/bin/sh
# check_setup.sh: what tools/setup.sh builds, without building (RLT_SETUP_DRY_RUN=1), against fake nvcc and
# nvidia-smi on PATH: the CUDA module only for the GPU nvidia-smi reports; with nvcc but no GPU, every default
# architecture and a note of how long that takes with the way out; RLT_CUDA=OFF and RLT_CUDA_ARCHS as given.
# Registered as the ctest test "setup_script" (needs the build dependencies installed: setup.sh checks them).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/gpu" "$fake/nogpu"
for d in gpu nogpu; do printf '#!/bin/sh\nexit 0\n' >"$fake/$d/nvcc"; done
printf '#!/bin/sh\necho 8.6\necho 8.6\n' >"$fake/gpu/nvidia-smi"
# No GPU: nvidia-smi fails as it does without a driver (and hides a real one on a GPU machine's PATH).
printf '#!/bin/sh\necho "NVIDIA-SMI has failed" >&2\nexit 9\n' >"$fake/nogpu/nvidia-smi"
chmod +x "$fake"/*/*
base=$(dirname "$(command -v cmake)"):/usr/bin:/bin
fail() { echo "check_setup.sh: $*" >&2; exit 1; }
out=$(cd "$src" && PATH="$fake/gpu:$base" RLT_SETUP_DRY_RUN=1 bash tools/setup.sh)
echo "$out" | grep -q -- "-DCMAKE_CUDA_ARCHITECTURES=86$" || fail "a GPU of sm_86: $out"
out=$(cd "$src" && PATH="$fake/nogpu:$base" RLT_SETUP_DRY_RUN=1 bash tools/setup.sh)
echo "$out" | grep -q "no GPU found" && echo "$out" | grep -q "RLT_CUDA=OFF" && echo "$out" | grep -q "minutes" ||
  fail "nvcc without a GPU: $out"
echo "$out" | grep -q "cmake args: $" || fail "nvcc without a GPU builds every default architecture: $out"
out=$(cd "$src" && PATH="$fake/gpu:$base" RLT_CUDA=OFF RLT_SETUP_DRY_RUN=1 bash tools/setup.sh)
echo "$out" | grep -q -- "cmake args: -DRLT_CUDA=OFF$" || fail "RLT_CUDA=OFF: $out"
out=$(cd "$src" && PATH="$fake/nogpu:$base" RLT_CUDA_ARCHS="80;90" RLT_SETUP_DRY_RUN=1 bash tools/setup.sh)
echo "$out" | grep -q -- "-DCMAKE_CUDA_ARCHITECTURES=80;90$" || fail "RLT_CUDA_ARCHS: $out"
echo "check_setup.sh: ok"
