#!/usr/bin/env bash
# seeds.sh: several independent agents in one process (seed groups: train.num_seeds, train/seed_group.c).
# bench_td3_update and bench_dqn_update --seeds N make N agents, one thread each, and print agent 0's updates/s
# alone, the N agents' updates/s together, first with a graph each, then with one batched graph for all
# (train.seed_batching), and the ratios (the target on an H100: 16 agents >= 8x one, for TD3 256-256/b256 and DQN
# MLP). Then whole seed groups end to end, both ways: configs/td3_pendulum.yaml and configs/dqn_cartpole.yaml, 16 seeds.
# Usage: bash bench/seeds.sh [BUILD_DIR] [DEVICE] [N...]    (defaults: build cuda:0 "2 4 8 16"; builds nothing)
set -uo pipefail
build=${1:-build}
device=${2:-cuda:0}
shift 2 2>/dev/null || shift $#
ns=${*:-2 4 8 16}
# The bench programs link the library statically: point them at the CUDA module of this build.
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/$build/librltrain_cuda.so}
for n in $ns; do
  echo "== $n agents in one process: TD3 HalfCheetah sizes 256-256/b256, then DQN CartPole MLP"
  "$build/bench/bench_td3_update" --device "$device" --updates 5000 --seeds "$n"
  "$build/bench/bench_dqn_update" --device "$device" --case mlp --updates 10000 --seeds "$n"
done
for config in td3_pendulum dqn_cartpole; do
  echo "== one seed end to end (the reference for the groups below): configs/$config.yaml on $device"
  /usr/bin/time -f "wall %e s" "$build/rltrain" --config configs/$config.yaml --set device="$device" \
    --set out_dir=/tmp/seeds_single --set train.overwrite=true --quiet 2>&1 | tail -2
  for batching in false true; do
    echo "== a seed group end to end: configs/$config.yaml, train.num_seeds=16, train.seed_batching=$batching, on $device"
    /usr/bin/time -f "wall %e s" "$build/rltrain" --config configs/$config.yaml --set device="$device" \
      --set train.num_seeds=16 --set train.seed_batching=$batching --set out_dir=/tmp/seeds_group \
      --set train.overwrite=true --quiet 2>&1 | tail -3
  done
done
