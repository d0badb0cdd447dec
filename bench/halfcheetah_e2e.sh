#!/usr/bin/env bash
# halfcheetah_e2e.sh: end-to-end TD3 training speed on Gymnasium's HalfCheetah-v5 (environment stepping, acting,
# replay and updates, one process each, run one after another on one GPU): rltrain through the Python adapter
# with 1 and with N training environments (env.num_envs; the same one update per environment step: N copies
# stepped one by one in the process, and a gymnasium AsyncVectorEnv of N worker processes stepped at once), beside a
# PyTorch TD3 (bench/td3_reference.py, the authors' TD3.py ported to Gymnasium) eager and with its update
# captured as CUDA graphs. All with configs/td3_mujoco.yaml's settings (256-256, batch 256); STEPS steps of
# which the first START are random, one evaluation episode at the end; process start to exit.
#   bash bench/halfcheetah_e2e.sh [STEPS] [N]        (defaults: 40000 8; needs gymnasium[mujoco] and torch)
# On the GPU machine: after building into build/ (RLTRAIN_LIBRARY and RLT_CUDA_MODULE default to it).
set -uo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40000}; n=${2:-8}; start=10000
export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
export RLTRAIN_LIBRARY=${RLTRAIN_LIBRARY:-$PWD/build/librltrain.so}
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/build/librltrain_cuda.so}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
run() { # run NAME CMD...: prints steps/s from the wall time
  local name=$1; shift
  if /usr/bin/time -f "%e" -o "$out/t" "$@" >"$out/log" 2>&1; then
    awk -v s="$steps" -v n="$name" '{ printf "  %-52s %8.1f s %9.0f steps/s\n", n, $1, s / $1 }' "$out/t"
  else
    echo "  $name: FAILED"; tail -5 "$out/log"
  fi
}
rlt=(python3 -m rltrain.gym --config configs/td3_mujoco.yaml --env HalfCheetah-v5 --steps "$steps" --quiet
     --set train.start_steps=$start --set train.eval_every="$steps" --set train.eval_episodes=1
     --set device=cuda:0 --set out_dir="$out/rlt" --set train.overwrite=true)
ref=(python3 bench/td3_reference.py --env HalfCheetah-v5 --steps "$steps" --start-steps $start --eval-every "$steps"
     --eval-episodes 1 --device cuda --quiet --out "$out/ref.csv")
echo "TD3 on HalfCheetah-v5, $steps steps ($start random), 256-256, batch 256, one update per step, end to end"
run "rltrain (python -m rltrain.gym, 1 environment)" "${rlt[@]}"
run "rltrain (env.num_envs=$n)" "${rlt[@]}" --set env.num_envs="$n"
run "rltrain (AsyncVectorEnv($n), --vector async)" "${rlt[@]}" --set env.num_envs="$n" --vector async
run "PyTorch TD3 (td3_reference.py, eager)" "${ref[@]}"
run "PyTorch TD3 (td3_reference.py --graphs)" "${ref[@]}" --graphs
