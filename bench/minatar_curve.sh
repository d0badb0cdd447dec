#!/usr/bin/env bash
# minatar_curve.sh: DQN on the built-in MinAtar Breakout (configs/dqn_minatar_breakout.yaml) on the GPU,
# printing the learning curve: evaluation return against env steps and wall time (from metrics.csv).
# Usage (on the GPU machine, after building into build/): bash bench/minatar_curve.sh [STEPS] [OUT_DIR]
set -euo pipefail
steps=${1:-300000}
out=${2:-${OUT:-runs}/minatar_curve}
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/build/librltrain_cuda.so}
# Epsilon falls over the first 100,000 steps (MinAtar's schedule) whatever the run's length.
frac=$(awk -v s="$steps" 'BEGIN { f = 100000 / s; printf "%.6f", (f > 1 ? 1 : f) }')
build/rltrain --config configs/dqn_minatar_breakout.yaml --set device=cuda:0 --set train.total_steps="$steps" \
  --set dqn.eps_fraction="$frac" \
  --set train.eval_every=25000 --set train.eval_episodes=20 --set out_dir="$out" --set train.overwrite=true --quiet | tail -3
echo "env_steps  wall_s  eval_return(20 episodes, greedy)"
awk -F, '$1 == "eval" { printf "%9d  %6.1f  %6.2f\n", $2, $7, $4 }' "$out/metrics.csv"
