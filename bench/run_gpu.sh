#!/usr/bin/env bash
# run_gpu.sh: everything the GPU machine checks in one call: build for sm_90, the GPU tests, the unit
# tests, and the benchmarks whose figures go into bench/RESULTS.md. Logs go to $OUT (or ./gpu_out).
# Usage on the device machine (see shared/device/README.md): bash bench/run_gpu.sh [quick]
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
source .devdeps/deps.sh unpack .devdeps >/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1
cmake --build build -j16 >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export RLT_CUDA_MODULE=$PWD/build/librltrain_cuda.so
ctest --test-dir build -L gpu --output-on-failure 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|Skipped|Test +#|hog|exit|updates"
[ "${1:-}" = quick ] && exit 0
{
  echo "== rltrain TD3 update, HalfCheetah sizes, fp32, replay on device"
  for ups in 1 8; do build/bench/bench_td3_update --device cuda:0 --updates 20000 --ups $ups; done
  echo "== rltrain on this machine's CPU (1 thread)"
  build/bench/bench_td3_update --device cpu --updates 300
  echo "== PyTorch reference (same update), same GPU"
  for m in eager graphs; do python3 bench/td3_torch.py --device cuda:0 --mode $m --updates 2000 --skip-critic-wgrad --json "$OUT/torch_$m.json"; done
  echo "== end-to-end TD3 on the built-in Pendulum (configs/td3_pendulum.yaml), GPU then CPU"
  /usr/bin/time -f "wall %e s" build/rltrain --config configs/td3_pendulum.yaml --set device=cuda:0 --set out_dir=/tmp/p_gpu --quiet | tail -2
  /usr/bin/time -f "wall %e s" build/rltrain --config configs/td3_pendulum.yaml --set device=cpu --set out_dir=/tmp/p_cpu --quiet | tail -2
  echo "== fail-fast: process start to exit 3 (plan over budget) on the GPU"
  /usr/bin/time -f "wall %e s" build/rltrain --config configs/td3_pendulum.yaml --set device=cuda:0 --set memory.budget_mb=8 --set out_dir=/tmp/ff 2>&1 | tail -3; echo "exit ${PIPESTATUS[0]}"
} 2>&1 | tee "$OUT/bench.log"
