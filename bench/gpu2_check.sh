#!/usr/bin/env bash
# gpu2_check.sh: everything issue 38 needs from a machine with two GPUs, in one call of at most 9 minutes:
# the build for sm_90, gpu_data_parallel, the CLI on [cuda:0, cuda:1] without NCCL_CUMEM_ENABLE or
# NCCL_RUNTIME_CONNECT set (rltrain sets both to 0 when unset), the same run
# launched by torchrun (one process per GPU), a GPU rank killed mid-run (the other must exit 1 within
# dist.timeout_s), the scaling benchmark (TD3 1024-1024/b16384, fp32 and bf16, one GPU against two, both launch
# models, in one process with gradient buckets (dist.bucket_mb=2) and without (0); 16 td3_pendulum seeds on one
# GPU against two), and the NCCL diagnostic (bench/nccl_diag.c). Every
# command runs under `timeout`; a step that would not fit the time left is skipped and says so.
# Results (7 files) in $OUT: summary.txt (pass/fail lines and the tables), build.txt, test.txt, cli.txt, dead.txt,
# bench.txt, diag.txt.
#   Run from the repository root on the device machine: bash bench/gpu2_check.sh
set -uo pipefail
OUT=${OUT:-gpu2_out}; mkdir -p "$OUT"
S="$OUT/summary.txt"; : >"$S"
BUDGET=${BUDGET:-525} # seconds for the whole script (the call allows 540)
export NCCL_NVLS_ENABLE=0 # the machine's setting: no NVLink multicast, in every process started here
unset NCCL_CUMEM_ENABLE NCCL_RUNTIME_CONNECT # the product must work without them (rltrain sets both to 0)
source "$(dirname "$0")/timebox.sh" # say, left, t

if [ -f .devdeps/deps.sh ]; then source .devdeps/deps.sh unpack .devdeps >/dev/null
else say "no .devdeps: libyaml and OpenBLAS must come from the system (see shared/device/README.md)"; fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
nvidia-smi topo -m 2>/dev/null | head -4 >>"$S"
ldconfig -p 2>/dev/null | grep libnccl.so | head -2 >>"$S"

# ---- build -------------------------------------------------------------------------------------------------
t 200 bash -c 'cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j32' >"$OUT/build.txt" 2>&1
rc=$?; say "build: exit $rc after ${SECONDS}s"
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.txt" | tee -a "$S"; exit 1; fi
tail -5 "$OUT/build.txt" >"$OUT/build.tail"; mv "$OUT/build.tail" "$OUT/build.txt"
export RLT_CUDA_MODULE=$PWD/build/librltrain_cuda.so
R=$PWD/build/rltrain
W=/tmp/gpu2_check; rm -rf "$W"; mkdir -p "$W"

# ---- gpu_data_parallel (one rank through NCCL, a rank that never arrives, two GPUs) ---------------------------
t0=$SECONDS
t 150 bash -c 'cd build/tests && ./gpu_data_parallel' >"$OUT/test.txt" 2>&1
rc=$?; say "gpu_data_parallel: exit $rc in $((SECONDS - t0))s: $(tail -1 "$OUT/test.txt")"
grep -E "rank 0 of 2 alone|FAIL|failed" "$OUT/test.txt" | head -8 | tee -a "$S"
# The replicas with NCCL's cuMem buffers forced on (ctest gpu_data_parallel_cumem): the first captured all-reduce hung
# with them until rltrain set NCCL_RUNTIME_CONNECT=0.
t1=$SECONDS
t 120 bash -c 'cd build/tests && NCCL_CUMEM_ENABLE=1 ./gpu_data_parallel cumem' >"$W/test_cumem.txt" 2>&1
say "gpu_data_parallel cumem (NCCL_CUMEM_ENABLE=1): exit $? in $((SECONDS - t1))s: $(tail -1 "$W/test_cumem.txt")"
if [ $rc -ne 0 ]; then # is it the non-blocking communicators? Once more with blocking ones.
  t0=$SECONDS
  t 100 bash -c 'cd build/tests && RLT_NCCL_BLOCKING=1 ./gpu_data_parallel' >"$W/test_blocking.txt" 2>&1
  say "gpu_data_parallel with RLT_NCCL_BLOCKING=1: exit $? in $((SECONDS - t0))s: $(tail -1 "$W/test_blocking.txt")"
  { echo; echo "== RLT_NCCL_BLOCKING=1"; grep -E "FAIL|failed|passed" "$W/test_blocking.txt" | head -12; } >>"$OUT/test.txt"
fi

# ---- the CLI on two GPUs in one process, NCCL_CUMEM_ENABLE and NCCL_RUNTIME_CONNECT unset ---------------------
C=configs/td3_pendulum.yaml
common=(--config $C --quiet --set train.total_steps=3000 --set dist.timeout_s=60)
t0=$SECONDS
t 90 $R "${common[@]}" --set 'devices=[cuda:0, cuda:1]' --set out_dir=$W/inproc >"$W/inproc.log" 2>&1
rc=$?; say "CLI devices: [cuda:0, cuda:1], NCCL_CUMEM_ENABLE unset: exit $rc in $((SECONDS - t0))s"
{ echo "== in-process (devices: [cuda:0, cuda:1])"; grep -vE "^ |^$|resolved config|^[a-z_]+:$" "$W/inproc.log" | tail -12
  cat $W/inproc/summary.csv 2>/dev/null; } >"$OUT/cli.txt"
grep -E "NCCL_CUMEM|final eval|rltrain:" "$W/inproc.log" | tail -3 | tee -a "$S"

# ---- torchrun: one process per GPU ---------------------------------------------------------------------------
t0=$SECONDS
t 90 python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29517 --no-python \
  $R "${common[@]}" --set device=cuda --set out_dir=$W/torchrun >"$W/torchrun.log" 2>&1
rc=$?; say "torchrun --nproc_per_node 2 rltrain (device: cuda): exit $rc in $((SECONDS - t0))s"
{ echo; echo "== torchrun --nproc_per_node 2"; grep -E "launched by|finished|final eval|rltrain:|Error|error" "$W/torchrun.log" | tail -14
  cat $W/torchrun/summary.csv 2>/dev/null; } >>"$OUT/cli.txt"
for k in 0 1; do
  if cmp -s $W/inproc/rank_$k/final.ckpt $W/torchrun/rank_$k/final.ckpt; then
    say "rank $k: torchrun's final.ckpt = the in-process run's, byte for byte"
  else say "rank $k: torchrun's final.ckpt DIFFERS from the in-process run's ($(cmp $W/inproc/rank_$k/final.ckpt $W/torchrun/rank_$k/final.ckpt 2>&1 | head -1))"; fi
done

# ---- a GPU rank killed mid-run ---------------------------------------------------------------------------------
t0=$SECONDS
{
  env=(env MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 WORLD_SIZE=2)
  dead=(--config $C --quiet --set device=cuda --set train.total_steps=200000 --set dist.timeout_s=20 --set out_dir=$W/dead)
  t 120 "${env[@]}" RANK=0 LOCAL_RANK=0 $R "${dead[@]}" >"$W/dead0.log" 2>&1 &
  p0=$!
  # Rank 1 under a timeout whose pid is known, so that the rltrain under it (its only child) can be killed.
  bash -c 'echo $$ >'"$W/dead1.pid"'; exec timeout -k 5 120 "$@"' _ "${env[@]}" RANK=1 LOCAL_RANK=1 $R "${dead[@]}" \
    >"$W/dead1.log" 2>&1 &
  p1=$!
  for i in $(seq 1 600); do [ -s $W/dead/rank_1/metrics.csv ] && break; sleep 0.1; done
  sleep 3
  pkill -KILL -P "$(cat $W/dead1.pid)"
  tk=$SECONDS
  wait $p0; rc0=$?
  wait $p1
  echo "rank 1 killed at $((tk - t0))s; rank 0 exit $rc0 $((SECONDS - tk))s later (dist.timeout_s 20)"
  tail -4 "$W/dead0.log"
} >"$OUT/dead.txt" 2>&1
say "dead rank on GPU: $(head -1 "$OUT/dead.txt")"
grep -o "rank 0 (cuda:0)[^;]*" "$OUT/dead.txt" | head -1 | tee -a "$S"

# ---- scaling: TD3 1024-1024/b16384, one GPU against two, threads and processes ---------------------------------
: >"$OUT/bench.txt"
# One process: with gradient buckets (dist.bucket_mb=2, the average overlapping the backward) and with
# dist.bucket_mb=0 (one all-reduce after the backward) side by side; one process per GPU with the default.
table=("| precision | launch | dist.bucket_mb | one GPU (updates/s) | two GPUs (updates/s) | ratio |" "|---|---|---|---|---|---|")
for prec in fp32 bf16; do
  n=1000; [ $prec = bf16 ] && n=3000
  for mode in devices:2 devices:0 procs:0; do
    bmb=${mode#*:}; mode=${mode%:*}
    t0=$SECONDS
    t 100 build/bench/bench_td3_update --device cuda:0 --obs 17 --act 6 --hidden 1024 --batch 16384 --precision $prec \
      --updates $n --$mode 2 --set dist.bucket_mb=$bmb >"$W/b.log" 2>&1
    rc=$?; cat "$W/b.log" >>"$OUT/bench.txt"
    one=$(awk '/^ *one device/ {print $3}' "$W/b.log"); two=$(awk '/^ *[0-9]+ devices? / {print $3; exit}' "$W/b.log")
    ratio=$(awk '/ratio/ {print $2}' "$W/b.log")
    table+=("| $prec | $([ $mode = devices ] && echo 'one process' || echo 'one process per GPU') | $bmb | ${one:-?} | ${two:-?} | ${ratio:-?} (exit $rc, $((SECONDS - t0))s) |")
  done
done
# 16 td3_pendulum seeds: one GPU, then spread over two (end to end, wall time of the CLI).
seeds=(--config $C --quiet --set train.num_seeds=16)
t0=$SECONDS; t 100 $R "${seeds[@]}" --set device=cuda --set out_dir=$W/s1 >"$W/s1.log" 2>&1; rc1=$?; s1=$((SECONDS - t0))
t0=$SECONDS; t 100 $R "${seeds[@]}" --set 'devices=[cuda:0, cuda:1]' --set out_dir=$W/s2 >"$W/s2.log" 2>&1; rc2=$?; s2=$((SECONDS - t0))
tail -2 "$W/s1.log" "$W/s2.log" >>"$OUT/bench.txt"
table+=("" "16 td3_pendulum seeds: one GPU ${s1}s (exit $rc1), over two GPUs ${s2}s (exit $rc2), $(awk -v a=$s1 -v b=$s2 'BEGIN{if (b > 0) printf "%.2fx", a / b}')")
printf '%s\n' "${table[@]}" | tee -a "$S" >>"$OUT/bench.txt"

# ---- the NCCL diagnostic: the cases in fresh processes, NCCL's defaults first ------------------------------------
# The diagnostic calls NCCL directly, so with both variables unset it runs NCCL's defaults (cuMem buffers, runtime
# connection), not rltrain's.
D=build/bench/bench_nccl_diag
{
  t 20 $D info
  for c in initall nonblocking group contexts arena capture captured captured_warm connect; do
    echo "--- $c, NCCL_CUMEM_ENABLE and NCCL_RUNTIME_CONNECT unset"
    t 20 env -u NCCL_CUMEM_ENABLE -u NCCL_RUNTIME_CONNECT $D $c; echo "exit $?"
  done
  echo "--- initall, NCCL_CUMEM_ENABLE=0"; t 20 env NCCL_CUMEM_ENABLE=0 $D initall; echo "exit $?"
  echo "--- nonblocking, NCCL_CUMEM_ENABLE=0"; t 20 env NCCL_CUMEM_ENABLE=0 $D nonblocking; echo "exit $?"
  # rltrain's first captured all-reduce hung with NCCL_CUMEM_ENABLE=1: NCCL connected the peers at that first
  # collective, inside the capture (docs/data_parallel.md, the cuMem hang). captured with cuMem forced on, then
  # connected at set-up instead (NCCL_RUNTIME_CONNECT=0), then with cuMem off (no runtime connection).
  echo "--- captured, NCCL_CUMEM_ENABLE=1"; t 20 env NCCL_CUMEM_ENABLE=1 $D captured; echo "exit $?"
  echo "--- captured, NCCL_CUMEM_ENABLE=1 NCCL_RUNTIME_CONNECT=0"
  t 20 env NCCL_CUMEM_ENABLE=1 NCCL_RUNTIME_CONNECT=0 $D captured; echo "exit $?"
  echo "--- captured, NCCL_CUMEM_ENABLE=0"; t 20 env NCCL_CUMEM_ENABLE=0 $D captured; echo "exit $?"
  # What NCCL takes after its set-up in the other settings (NCCL's defaults: in the loop above).
  for e in "NCCL_CUMEM_ENABLE=1 NCCL_RUNTIME_CONNECT=0" "NCCL_CUMEM_ENABLE=0 NCCL_RUNTIME_CONNECT=1" \
           "NCCL_CUMEM_ENABLE=0 NCCL_RUNTIME_CONNECT=0"; do
    echo "--- connect, $e"; t 20 env $e $D connect; echo "exit $?"
  done
  echo "--- initall, CUDA_DEVICE_MAX_CONNECTIONS=32 (what a seed group sets), NCCL_CUMEM_ENABLE unset"
  t 20 env CUDA_DEVICE_MAX_CONNECTIONS=32 $D initall; echo "exit $?"
  echo "--- initall, NCCL_CUMEM_ENABLE unset, NCCL_DEBUG=INFO (last lines)"
  t 20 env NCCL_DEBUG=INFO $D initall >"$W/debug.log" 2>&1; echo "exit $?"
  grep -E "NCCL INFO (cuMem|Init|Channel 00|Connected|comm 0x)|WARN|NCCL version" "$W/debug.log" | tail -25
} >"$OUT/diag.txt" 2>&1
say "diagnostic (exit 124 = hung until the 20 s timeout):"
grep -E "NCCL version code|^--- |^case |^exit |^  set-up |NCCL took" "$OUT/diag.txt" >>"$S"
# ---- the same scaling end to end through the CLI, as issue 38 measured it (time permitting) -----------------------
# TD3 1024-1024, batch 16384, 2,000 updates on Pendulum; summary.json's updates_per_s (rank 0's).
big=(--config $C --quiet --set train.start_steps=1000 --set train.total_steps=3000 --set train.batch_size=16384
     --set 'td3.actor_hidden=[1024, 1024]' --set 'td3.critic_hidden=[1024, 1024]' --set train.eval_every=0
     --set train.eval_episodes=1 --set memory.budget_mb=16384)
ups() { grep -o '"updates_per_s": [0-9.]*' "$1" 2>/dev/null | awk '{print $2}'; }
table=("| precision (CLI, summary.json updates/s) | one GPU | [cuda:0, cuda:1] | torchrun 2 procs |" "|---|---|---|---|")
for prec in fp32 bf16; do
  [ "$(left)" -lt 40 ] && { table+=("| $prec | (no time left) | | |"); continue; }
  t 60 $R "${big[@]}" --set precision=$prec --set device=cuda --set out_dir=$W/c1_$prec >"$W/c1.log" 2>&1
  t 45 $R "${big[@]}" --set precision=$prec --set 'devices=[cuda:0, cuda:1]' --set out_dir=$W/c2_$prec >"$W/c2.log" 2>&1
  t 45 python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29541 --no-python \
    $R "${big[@]}" --set precision=$prec --set device=cuda --set out_dir=$W/c3_$prec >"$W/c3.log" 2>&1
  table+=("| $prec | $(ups $W/c1_$prec/summary.json) | $(ups $W/c2_$prec/rank_0/summary.json) | $(ups $W/c3_$prec/rank_0/summary.json) |")
  tail -2 "$W/c1.log" "$W/c2.log" "$W/c3.log" >>"$OUT/bench.txt"
done
printf '%s\n' "${table[@]}" | tee -a "$S" >>"$OUT/bench.txt"
say "total ${SECONDS}s"
