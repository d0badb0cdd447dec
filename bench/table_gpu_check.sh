#!/usr/bin/env bash
# table_gpu_check.sh: what the backend table's merges (issue 36 item 2: graph, flat, lane, amp, reserve/release,
# the draw alone in gather_fields, workspace) need from one GPU, in one call of at most 9 minutes: the build for
# sm_90, then the GPU tests that call every merged op on both backends and compare them: gpu_ops_parity (flat's
# three modes bit for bit, the draw alone, lanes eager and captured, graph modes and refusals, workspace),
# gpu_dqn_parity, gpu_lowp (amp's two halves bit for bit), gpu_train (GPU against CPU after 30 updates),
# gpu_seed_batch and gpu_cotenant (reserve). Every command runs under `timeout`.
# Results in $OUT: summary.txt (one pass/fail line per test), build.txt, and <test>.txt for each test.
#   Run from the repository root on the device machine: bash bench/table_gpu_check.sh
set -uo pipefail
OUT=${OUT:-table_gpu_out}; mkdir -p "$OUT"
S="$OUT/summary.txt"; : >"$S"
BUDGET=${BUDGET:-525}
source "$(dirname "$0")/timebox.sh" # say, left, t
if [ -f .devdeps/deps.sh ]; then source .devdeps/deps.sh unpack .devdeps >/dev/null; fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
t 240 bash -c 'cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DRLT_BUILD_BENCH=OFF &&
  cmake --build build -j16' >"$OUT/build.txt" 2>&1
rc=$?; say "build: exit $rc after ${SECONDS}s"
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.txt" | tee -a "$S"; exit 1; fi
export RLT_CUDA_MODULE=$PWD/build/librltrain_cuda.so
for test in gpu_ops_parity gpu_lowp gpu_dqn_parity gpu_train gpu_seed_batch gpu_cotenant; do
  (cd build/tests && t 150 "./$test") >"$OUT/$test.txt" 2>&1
  rc=$?
  say "$test: exit $rc ($(grep -E 'passed, [0-9]+ failed' "$OUT/$test.txt" | tail -1))"
  [ $rc -ne 0 ] && grep -E 'CHECK|failed' "$OUT/$test.txt" | head -20 | tee -a "$S"
done
say "total ${SECONDS}s"
