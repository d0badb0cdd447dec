#!/usr/bin/env bash
# precision.sh: the memory levers of issue #5 side by side on one GPU, in one run: updates/s and arena bytes
# for fp32, bf16 and fp16, each with grad_accum_steps 1, 2 and 4, for TD3 at HalfCheetah sizes, DQN with the
# Nature CNN, and TD3 with 1024-1024 networks and batch 4096 (where the tensor cores should pay); tf32 (fp32
# storage, the cuBLASLt products on TF32 tensor cores) for the two cases that have such products (the Nature
# CNN's 3136-wide head, the 1024-wide layers; at HalfCheetah sizes every product stays on the fp32 kernels).
# Usage (build first): bash bench/precision.sh [build_dir] [device]
set -uo pipefail
B=${1:-build}; DEV=${2:-cuda:0}
row() { # label, command...: prints label, updates/s, device arena MiB
  local label=$1; shift
  local out; out=$("$@" 2>&1)
  local ups arena
  ups=$(echo "$out" | awk '/updates\/s/ {print $2; exit}')
  arena=$(echo "$out" | awk '/arena/ {for (i=1;i<=NF;i++) if ($i=="device") print $(i+1); exit}')
  [ -n "$ups" ] || { echo "$label: FAILED"; echo "$out" | tail -3; return; }
  printf "%-44s %10s %12s MiB\n" "$label" "$ups" "$arena"
}
printf "%-44s %10s %16s\n" "case" "updates/s" "device arena"
for p in fp32 bf16 fp16; do for n in 1 2 4; do
  row "TD3 17/6 256-256 b256 $p accum $n" "$B/bench/bench_td3_update" --device "$DEV" --updates 5000 --precision $p --accum $n
done; done
for p in fp32 tf32 bf16 fp16; do for n in 1 2 4; do
  row "DQN Nature CNN b32 $p accum $n" "$B/bench/bench_dqn_update" --device "$DEV" --case nature --updates 1000 --precision $p --accum $n
done; done
for p in fp32 tf32 bf16 fp16; do for n in 1 4; do
  row "TD3 17/6 1024-1024 b4096 $p accum $n" "$B/bench/bench_td3_update" --device "$DEV" --hidden 1024 --batch 4096 --updates 300 --precision $p --accum $n
done; done
