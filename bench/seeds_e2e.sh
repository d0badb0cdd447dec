#!/usr/bin/env bash
# seeds_e2e.sh: whole seed groups end to end on one GPU (train.num_seeds, train.seed_batching): the wall time of one
# seed, then of N seeds with one batched graph for their updates and their acting (one launch and one sync per step
# for all, train/seed_batch.h), with batched updates but each seed acting on its own (RLT_SEEDS_ACT=0: the route
# before batched acting, same build), and with a graph each (train.seed_batching=false); for configs/td3_pendulum.yaml
# and configs/dqn_cartpole.yaml. Each group line also gives the ratio to one seed's wall time (1.0: N seeds take
# what one does) and the group's own count of batched acting and update rounds.
# Usage: bash bench/seeds_e2e.sh [BUILD_DIR] [DEVICE] [N...]    (defaults: build cuda:0 "16 64"; builds nothing)
#   env: MODES (default "batched act_own graph_each"; also store_own, RLT_SEEDS_STORE=0: each seed issues its own
#   transition stores; conv, RLT_CUDA_SEEDS_CONV=1: a CNN config's convolutions batched too, with
#   CONFIGS=dqn_minatar_breakout; two_gpus: the seeds spread over devices [cuda:0, cuda:1], batched per GPU, on a
#   machine with two; gpus<K> (gpus2, gpus4, ...): over cuda:0 .. cuda:K-1; batches<K> (batches2, batches4):
#   train.seed_batches=K, K batched graphs and lock-steps on the one GPU; wait_all, RLT_ACT_ASIDE=0: acting waits for
#   every update, also TD3's critic-only ones: which group lines to run), CONFIGS (default "td3_pendulum
#   dqn_cartpole"), SETS (space-separated KEY=VALUE overrides for every run, e.g. SETS="train.total_steps=20000").
#   Groups get memory.budget_mb 4096: the configs' budgets are one run's (64 TD3 seeds need 816 MiB).
set -uo pipefail
build=${1:-build}
device=${2:-cuda:0}
shift 2 2>/dev/null || shift $#
ns=${*:-16 64}
out=${TMPDIR:-/tmp}/seeds_e2e
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/$build/librltrain_cuda.so}

# Runs rltrain with the given --set arguments into $out/run, prints "wall S" and the group's round counts.
run() {
  local log=$out/log.txt t0 t1 rc
  mkdir -p "$out"
  t0=$(date +%s.%N)
  local extra=()
  for kv in ${SETS:-}; do extra+=(--set "$kv"); done
  "$build/rltrain" "$@" ${extra[@]+"${extra[@]}"} --set device="$device" --set out_dir="$out/run" --set train.overwrite=true -q \
    > "$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  if [ $rc -ne 0 ]; then echo "  FAILED (exit $rc):"; tail -5 "$log"; wall=""; return; fi
  grep -h "seed group: .*act\|batched acting rounds" "$log" | sed 's/^/  /'
}

# The first CUDA process on a fresh machine starts about 0.6 s slower (2026-11-29, `nvidia-h200-x2`: one td3_pendulum
# seed 3.83 s first, 3.20 s last in one call); an untimed short run first keeps that out of the one-seed reference.
: "${CONFIGS:=td3_pendulum dqn_cartpole}"
run --config configs/${CONFIGS%% *}.yaml --set train.total_steps=1000 >/dev/null 2>&1 || true
for config in $CONFIGS; do
  echo "== configs/$config.yaml on $device"
  run --config configs/$config.yaml
  one=$wall
  printf "  %-44s %8.2f s\n" "1 seed" "${one:-0}"
  for n in $ns; do
    for mode in ${MODES:-batched act_own graph_each}; do
      case $mode in
        batched)    label="$n seeds, batched updates and acting";   env=""; batching=true ;;
        act_own)    label="$n seeds, batched updates, own acting";  env="RLT_SEEDS_ACT=0"; batching=true ;;
        store_own)  label="$n seeds, batched, own transition stores"; env="RLT_SEEDS_STORE=0"; batching=true ;;
        conv)       label="$n seeds, batched with convolutions";    env="RLT_CUDA_SEEDS_CONV=1"; batching=true ;;
        graph_each) label="$n seeds, a graph each";                 env=""; batching=false ;;
        two_gpus)   label="$n seeds over cuda:0 and cuda:1, batched"; env=""; batching=true ;;
        gpus*)      label="$n seeds over ${mode#gpus} GPUs, batched"; env=""; batching=true ;;
        batches*)   label="$n seeds, batched, ${mode#batches} batches on the GPU"; env=""; batching=true ;;
        wait_all)   label="$n seeds, batched, acting after every update"; env="RLT_ACT_ASIDE=0"; batching=true ;;
      esac
      spread=()
      case $mode in batches*) spread=(--set train.seed_batches=${mode#batches}) ;; esac
      k=0; [ "$mode" = two_gpus ] && k=2; case $mode in gpus*) k=${mode#gpus} ;; esac
      if [ "$k" -gt 0 ]; then
        list=$(seq -s, 0 $((k - 1)) | sed 's/\([0-9]*\)/cuda:\1/g; s/,/, /g')
        spread=(--set "devices=[$list]")
      fi
      if [ -n "$env" ]; then export $env; fi
      run --config configs/$config.yaml --set train.num_seeds=$n --set train.seed_batching=$batching \
        --set memory.budget_mb=4096 ${spread[@]+"${spread[@]}"}
      if [ -n "$env" ]; then unset ${env%%=*}; fi
      if [ -n "$wall" ] && [ -n "$one" ]; then
        printf "  %-44s %8.2f s  (%.2fx one seed's wall time)\n" "$label" "$wall" "$(awk -v a="$wall" -v b="$one" 'BEGIN { print a / b }')"
      fi
    done
  done
done
