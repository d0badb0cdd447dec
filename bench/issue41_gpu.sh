#!/usr/bin/env bash
# issue41_gpu.sh: the GPU checks of issue 41 in one call (the GPU machine; logs and figures in $OUT):
#  1. the described GPU against this one: gpu_described_plan (the arena to the byte, context and handles within 5%
#     for a measured row; prints the row to record in kernels/described/described_backend.c), and the same by the
#     CLI: `rltrain plan --json` on cuda:0 and with --arch/--gpu-memory of this GPU, side by side;
#  2. watching a shared GPU: gpu_watch_memory (a 2 GiB hog beside a run), and a short run's progress lines;
#  3. the other GPU tests (measure_memory now refreshes the free memory during training), as run_gpu.sh tests.
# Usage: bash bench/issue41_gpu.sh [BUILD_DIR]     (builds BUILD_DIR, default build, for the GPU that is here)
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
bin=${1:-build}
[ -f .devdeps/deps.sh ] && source .devdeps/deps.sh unpack .devdeps >/dev/null
arch=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 | tr -d ' .')
mem=$(timeout 30 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
echo "GPU: sm_$arch, ${mem} MiB" | tee "$OUT/gpu.txt"
timeout 1800 cmake -S . -B "$bin" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$OUT/build.log" 2>&1 &&
  timeout 1800 cmake --build "$bin" -j"$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export RLT_CUDA_MODULE=$PWD/$bin/librltrain_cuda.so
rc=0
timeout 900 ctest --test-dir "$bin" -R 'gpu_described_plan|gpu_watch_memory' --output-on-failure -V \
  >"$OUT/issue41_gpu_tests.log" 2>&1 || rc=1
grep -E "^[0-9]+: (sm_|table row|progress:|gpu_)|tests passed|Failed" "$OUT/issue41_gpu_tests.log"
for cfg in td3_lowmem td3_pendulum dqn_cartpole; do
  timeout 300 "$bin/rltrain" plan --config "configs/$cfg.yaml" --device cuda:0 --json >"$OUT/plan_real_$cfg.json"
  timeout 300 "$bin/rltrain" plan --config "configs/$cfg.yaml" --device cuda --arch "sm_$arch" --gpu-memory "${mem}MiB" \
    --json >"$OUT/plan_described_$cfg.json"
  python3 - "$OUT/plan_real_$cfg.json" "$OUT/plan_described_$cfg.json" "$cfg" <<'PY' || rc=1
import json, sys
r, d = (json.load(open(p)) for p in sys.argv[1:3])
ra, da = r["totals"]["need_bytes"], d["totals"]["need_bytes"]
rc, dc = r["device"]["context_bytes"], d["device"]["context_bytes"]
print(f"{sys.argv[3]}: arena real {ra} described {da} ({'same' if ra == da else 'DIFFERENT'}); context real "
      f"{rc / 2**20:.2f} MiB described {dc / 2**20:.2f} MiB ({100 * (dc - rc) / rc:+.1f}%)")
sys.exit(0 if ra == da else 1)
PY
done 2>&1 | tee "$OUT/plan_side_by_side.txt"
timeout 300 "$bin/rltrain" --config configs/td3_pendulum_fast.yaml --set device=cuda:0 --set train.total_steps=4000 \
  --set train.progress_every_s=0.5 --set "out_dir=$OUT/watch_run" --set train.overwrite=true >"$OUT/watch_run.log" 2>&1 || rc=1
grep -E "GPU free|warn_free" "$OUT/watch_run.log" | head -5
head -2 "$OUT/watch_run/metrics.csv"
timeout 1800 ctest --test-dir "$bin" -L gpu --output-on-failure >"$OUT/gpu_tests.log" 2>&1 || rc=1
grep -E "tests passed|Failed" "$OUT/gpu_tests.log"
exit $rc
