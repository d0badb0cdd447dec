#!/usr/bin/env bash
# run_gpu.sh: everything the GPU machine checks in one call: build for sm_90, the GPU tests, and the
# benchmarks whose figures go into bench/RESULTS.md. Logs go to $OUT (or ./gpu_out).
# Usage on the device machine (see shared/device/README.md): bash bench/run_gpu.sh [tests|bench|seeds|seeds_jax|asan|all] [minatar_steps]
# (seeds_jax: only bench/seeds_vs_jax.sh, rltrain's seeds beside the JAX vmap anchor bench/jax_vmap.py)
# (seeds: only bench/seeds.sh, several agents in one process, 4, 8 and 16 of them; asan: the GPU tests and a
# batched seed benchmark again, built with AddressSanitizer and UBSan in build-asan-gpu: the host code of the CUDA
# paths, which CI's sanitizer build (no GPU) never runs)
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
what=${1:-all}
source .devdeps/deps.sh unpack .devdeps >/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# NCCL for the data-parallel test and benchmark: the loader's libnccl.so.2, else PyTorch's nvidia-nccl wheel.
if [ -z "${RLT_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q libnccl.so.2; then
  RLT_NCCL_LIBRARY=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -n "$RLT_NCCL_LIBRARY" ] && export RLT_NCCL_LIBRARY
fi
if [ "$what" = asan ]; then
  cmake -S . -B build-asan-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLT_SANITIZE=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$OUT/asan_build.log" 2>&1 && cmake --build build-asan-gpu -j16 >>"$OUT/asan_build.log" 2>&1 ||
    { tail -30 "$OUT/asan_build.log"; exit 1; }
  export RLT_CUDA_MODULE=$PWD/build-asan-gpu/librltrain_cuda.so
  # The CUDA runtime maps memory where ASan keeps its shadow gap; leaks are the runtime's own.
  export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
  rc=0
  ctest --test-dir build-asan-gpu -L gpu --output-on-failure 2>&1 | tee "$OUT/asan_gpu_tests.log" |
    grep -E "tests passed|Failed|ERROR: AddressSanitizer|runtime error" || rc=1
  for n in 2 16; do
    build-asan-gpu/bench/bench_dqn_update --device cuda:0 --case mlp --updates 200 --seeds $n >"$OUT/asan_seeds_$n.log" 2>&1 ||
      { echo "bench_dqn_update --seeds $n under ASan failed:"; tail -20 "$OUT/asan_seeds_$n.log"; rc=1; }
  done
  grep -q "100% tests passed" "$OUT/asan_gpu_tests.log" || rc=1
  exit $rc
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1
cmake --build build -j16 >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export RLT_CUDA_MODULE=$PWD/build/librltrain_cuda.so
if [ "$what" = seeds ]; then bash bench/seeds.sh build cuda:0 2>&1 | tee "$OUT/seeds.log"; exit 0; fi
if [ "$what" = seeds_jax ]; then # the build's time counts: the whole call stays under the device's 10 minutes
  left=$((560 - SECONDS)); SEEDS_JAX_BUDGET_S=${SEEDS_JAX_BUDGET_S:-$((left < 450 ? left : 450))} bash bench/seeds_vs_jax.sh build cuda:0
  exit 0
fi
if [ "$what" != bench ]; then
  ctest --test-dir build -L gpu --output-on-failure -V 2>&1 | tee "$OUT/gpu_tests.log" |
    grep -E "[0-9]+: (gpu_|TD3|device free|hog|plan|rltrain is|updates beside|.*on cuda:0)|tests passed|Failed|Passed"
fi
[ "$what" = tests ] && exit 0
{
  echo "== rltrain TD3 update, HalfCheetah sizes, fp32, replay on device"
  for ups in 1 8; do build/bench/bench_td3_update --device cuda:0 --updates 20000 --ups $ups; done
  echo "== the same update in bf16 (precision: bf16; the target is fp32)"
  build/bench/bench_td3_update --device cuda:0 --updates 20000 --precision bf16 | grep -E "updates/s|last losses"
  echo "== one dependent graph node per op kind (bench_layer_chain): the shapes of the TD3 update's layers"
  for s in "--fi 17" "--fi 23" "" "--fo 6" "--fo 1"; do build/bench/bench_layer_chain $s --reps 200 | tail -n +2; done
  echo "== PyTorch TD3 reference (same update), same GPU"
  for m in eager graphs; do python3 bench/td3_torch.py --device cuda:0 --mode $m --updates 2000 --skip-critic-wgrad; done
  echo "== rltrain DQN update: MLP (CartPole) and Nature CNN"
  build/bench/bench_dqn_update --device cuda:0 --case mlp --updates 20000
  build/bench/bench_dqn_update --device cuda:0 --case nature --updates 3000
  build/bench/bench_dqn_update --device cuda:0 --case nature --updates 3000 --precision bf16 | grep -E "updates/s|last loss"
  echo "== 16 agents in one process (seed groups; bench/seeds.sh has 4 and 8 too)"
  build/bench/bench_td3_update --device cuda:0 --updates 5000 --seeds 16
  build/bench/bench_dqn_update --device cuda:0 --case mlp --updates 10000 --seeds 16
  echo "== PyTorch DQN reference (eager), same GPU"
  python3 bench/dqn_torch.py --case mlp --updates 3000
  python3 bench/dqn_torch.py --case nature --updates 1000
  echo "== end-to-end TD3 on the built-in Pendulum (configs/td3_pendulum.yaml) on the GPU"
  /usr/bin/time -f "wall %e s" build/rltrain --config configs/td3_pendulum.yaml --set device=cuda:0 --set out_dir=/tmp/p_gpu --set train.overwrite=true --quiet | tail -2
  echo "== fail-fast: process start to exit 3 (plan over budget) on the GPU"
  /usr/bin/time -f "wall %e s" build/rltrain --config configs/td3_pendulum.yaml --set device=cuda:0 --set memory.budget_mb=8 --set out_dir=/tmp/ff >/dev/null 2>"$OUT/ff.txt"; echo "exit $?"; tail -1 "$OUT/ff.txt"
} 2>&1 | tee "$OUT/bench.log"
if [ "${2:-0}" != 0 ]; then
  echo "== MinAtar Breakout DQN learning curve on the GPU"
  timeout 330 bash bench/minatar_curve.sh "$2" /tmp/minatar 2>&1 | tee "$OUT/minatar.log"
  cp /tmp/minatar/metrics.csv "$OUT/minatar_metrics.csv" 2>/dev/null
fi
