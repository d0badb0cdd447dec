#!/usr/bin/env bash
# gpu_verify.sh: the GPU checks a change needs before it lands, in one call on a two-GPU machine (about 6 minutes):
# the build for sm_90, every GPU test (ctest -L gpu, each under its ctest timeout), a GPU rank killed mid-run (the
# other must end with exit 1, never a crash or a hang), and the headline update rates (one TD3 agent, 16 seeds
# batched in fp32 and tf32). Every command runs under `timeout`; results in $OUT (gpu_tests.log, dead.txt,
# bench.txt, summary.txt).   From the repository root on the device machine: bash bench/gpu_verify.sh
set -uo pipefail
OUT=${OUT:-gpu_verify_out}; mkdir -p "$OUT"
S="$OUT/summary.txt"; : >"$S"
say() { echo "$*" | tee -a "$S"; }
export NCCL_NVLS_ENABLE=0 # the machine's setting: no NVLink multicast
[ -f .devdeps/deps.sh ] && source .devdeps/deps.sh unpack .devdeps >/dev/null
nvidia-smi --query-gpu=index,name --format=csv,noheader | tee -a "$S"
timeout 240 bash -c 'cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build build -j32' >"$OUT/build.log" 2>&1 || { say "build failed"; tail -30 "$OUT/build.log"; exit 1; }
export RLT_CUDA_MODULE=$PWD/build/librltrain_cuda.so
t0=$SECONDS
timeout 330 ctest --test-dir build -L gpu --output-on-failure >"$OUT/gpu_tests.log" 2>&1
say "ctest -L gpu: exit $? in $((SECONDS - t0)) s"
grep -E "Test +#|tests passed|tests failed" "$OUT/gpu_tests.log" | tee -a "$S"

# A GPU rank killed mid-run: the other writes its outputs and exits 1 (dist.timeout_s bounds the wait).
R=$PWD/build/rltrain W=/tmp/gpu_verify_dead; rm -rf $W; mkdir -p $W
env=(env MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 WORLD_SIZE=2)
run=(--config configs/td3_pendulum.yaml --quiet --set device=cuda --set train.total_steps=200000 --set dist.timeout_s=20
  --set out_dir=$W/run)
timeout 90 "${env[@]}" RANK=0 LOCAL_RANK=0 $R "${run[@]}" >"$W/r0.log" 2>&1 &
p0=$!
bash -c 'echo $$ >'"$W/r1.pid"'; exec timeout 90 "$@"' _ "${env[@]}" RANK=1 LOCAL_RANK=1 $R "${run[@]}" >"$W/r1.log" 2>&1 &
for i in $(seq 1 600); do [ -s $W/run/rank_1/metrics.csv ] && break; sleep 0.1; done
sleep 3; pkill -KILL -P "$(cat $W/r1.pid)"; tk=$SECONDS
wait $p0; rc0=$?
{ echo "rank 1 killed; rank 0 exit $rc0 after $((SECONDS - tk)) s (want 1)"; tail -3 "$W/r0.log"; } >"$OUT/dead.txt" 2>&1
say "$(head -1 "$OUT/dead.txt")"

{ timeout 60 build/bench/bench_td3_update --device cuda:0 --updates 3000 --seeds 16 --precision fp32 | tail -4
  timeout 60 build/bench/bench_td3_update --device cuda:0 --updates 3000 --seeds 16 --precision tf32 | tail -3
} >"$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt" | tee -a "$S"
