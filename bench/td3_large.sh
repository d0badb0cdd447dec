#!/usr/bin/env bash
# td3_large.sh: the TD3 update at larger networks and batches, rltrain beside PyTorch (eager and CUDA graphs,
# fp32 with TF32 off on both sides), in one call on one GPU. Run on the GPU machine after a build
# (bash bench/run_gpu.sh tests builds build/):  bash bench/td3_large.sh
set -uo pipefail
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/build/librltrain_cuda.so}
for hb in "1024 4096" "1024 1024" "512 1024" "256 256"; do
  set -- $hb
  n=$([ "$1" = 256 ] && echo 20000 || echo 1000)
  echo "== hidden $1-$1, batch $2"
  build/bench/bench_td3_update --device cuda:0 --hidden "$1" --batch "$2" --updates "$n" | grep -E "updates/s|losses"
  for m in eager graphs; do
    python3 bench/td3_torch.py --device cuda:0 --mode $m --hidden "$1" --batch "$2" --updates 300 --skip-critic-wgrad | tail -1
  done
done
