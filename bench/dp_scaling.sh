#!/usr/bin/env bash
# dp_scaling.sh: issue 38's scaling on a machine with K GPUs (K = 2, 4, 8), in one call: the build for sm_90, the
# data-parallel test, a td3_pendulum run on all K GPUs in one process beside the same run launched by torchrun (one
# process per GPU; every rank's final.ckpt must match byte for byte), the update benchmark (TD3 1024-1024/b16384, fp32
# and bf16, on one GPU against each count of GPUs up to K, one process and one process per GPU), and seed groups end
# to end (16 and 64 td3_pendulum seeds, 16 dqn_cartpole seeds) on one GPU against spread over 2 .. K.
# Every command runs under `timeout`; a step that would not fit the time left is skipped and says so.
# Usage (repository root, device machine): BUDGET=540 bash bench/dp_scaling.sh [BUILD_DIR]
# Results in $OUT (default dp_out): summary.txt (the tables), bench.txt, seeds.txt, test.txt, cli.txt.
set -uo pipefail
OUT=${OUT:-dp_out}; mkdir -p "$OUT"
S="$OUT/summary.txt"; : >"$S"
BUDGET=${BUDGET:-540}
B=${1:-build}
export NCCL_NVLS_ENABLE=0 # the machines' setting: no NVLink multicast
source "$(dirname "$0")/timebox.sh" # say, left, t
if [ -f .devdeps/deps.sh ]; then source .devdeps/deps.sh unpack .devdeps >/dev/null; fi
K=$(nvidia-smi -L | wc -l)
say "$K GPUs: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
nvidia-smi topo -m 2>/dev/null | head -$((K + 1)) >>"$S"
counts=""; for k in 2 4 8 16; do [ $k -le $K ] && counts="$counts $k"; done

if [ ! -x "$B/rltrain" ]; then
  t 200 bash -c "cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build $B -j32" \
    >"$OUT/build.txt" 2>&1 || { say "build failed"; tail -30 "$OUT/build.txt" | tee -a "$S"; exit 1; }
  say "built in ${SECONDS}s"
fi
B=$(cd "$B" && pwd)
export RLT_CUDA_MODULE=$B/librltrain_cuda.so
R=$B/rltrain
W=/tmp/dp_scaling; rm -rf "$W"; mkdir -p "$W"
devs() { seq -s, 0 $(($1 - 1)) | sed 's/\([0-9]*\)/cuda:\1/g; s/,/, /g'; }

t0=$SECONDS
t 150 bash -c "cd $B/tests && ./gpu_data_parallel" >"$OUT/test.txt" 2>&1
say "gpu_data_parallel: exit $? in $((SECONDS - t0))s: $(tail -1 "$OUT/test.txt")"

# ---- all K GPUs: one process against torchrun, byte for byte -------------------------------------------------
common=(--config configs/td3_pendulum.yaml --quiet --set train.total_steps=3000 --set dist.timeout_s=60)
t0=$SECONDS
t 90 $R "${common[@]}" --set "devices=[$(devs $K)]" --set out_dir=$W/inproc >"$W/inproc.log" 2>&1
say "CLI devices: [$(devs $K)]: exit $? in $((SECONDS - t0))s"
t0=$SECONDS
t 90 python3 -m torch.distributed.run --nproc_per_node $K --master_port 29519 --no-python \
  $R "${common[@]}" --set device=cuda --set out_dir=$W/torchrun >"$W/torchrun.log" 2>&1
say "torchrun --nproc_per_node $K: exit $? in $((SECONDS - t0))s"
same=0
for k in $(seq 0 $((K - 1))); do
  cmp -s $W/inproc/rank_$k/final.ckpt $W/torchrun/rank_$k/final.ckpt && same=$((same + 1))
done
say "ranks whose torchrun final.ckpt equals the in-process one byte for byte: $same of $K"
{ tail -6 "$W/inproc.log"; cat $W/inproc/summary.csv; tail -6 "$W/torchrun.log"; } >"$OUT/cli.txt" 2>&1

# ---- the update: TD3 1024-1024, batch 16384 ------------------------------------------------------------------
: >"$OUT/bench.txt"
table=("| TD3 1024-1024/b16384 | launch | GPUs | one GPU (updates/s) | K GPUs (updates/s) | ratio |" "|---|---|---|---|---|---|")
for prec in fp32 bf16; do
  n=1000; [ $prec = bf16 ] && n=3000
  for k in $counts; do for mode in devices procs; do
    t0=$SECONDS
    t 100 $B/bench/bench_td3_update --device cuda:0 --obs 17 --act 6 --hidden 1024 --batch 16384 --precision $prec \
      --updates $n --$mode $k >"$W/b.log" 2>&1
    rc=$?; cat "$W/b.log" >>"$OUT/bench.txt"
    one=$(awk '/^ *one device/ {print $3}' "$W/b.log"); many=$(awk '/^ *[0-9]+ devices? / {print $3; exit}' "$W/b.log")
    ratio=$(awk '/ratio/ {print $2}' "$W/b.log")
    table+=("| $prec | $([ $mode = devices ] && echo 'one process' || echo 'one process per GPU') | $k | ${one:-?} | ${many:-?} | ${ratio:-?} (exit $rc, $((SECONDS - t0))s) |")
  done; done
done
printf '%s\n' "${table[@]}" | tee -a "$S"

# ---- seed groups end to end, one GPU against 2 .. K -------------------------------------------------------------
modes="batched"; for k in $counts; do modes="$modes gpus$k"; done
for cfg_n in "td3_pendulum 16 64" "dqn_cartpole 16"; do
  set -- $cfg_n; cfg=$1; shift
  [ "$(left)" -lt 60 ] && { say "(seeds of $cfg skipped: no time left)"; continue; }
  MODES="$modes" CONFIGS=$cfg t $(($(left) - 10)) bash bench/seeds_e2e.sh $B cuda:0 "$@" >>"$OUT/seeds.txt" 2>&1
done
grep -E "^==|seed|s  \(" "$OUT/seeds.txt" | grep -v "seed group:\|rounds" | tee -a "$S"
say "total ${SECONDS}s"
