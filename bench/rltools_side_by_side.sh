#!/usr/bin/env bash
# rltools_side_by_side.sh: rltrain's whole TD3 Pendulum run (configs/td3_pendulum_fast.yaml: 64-64, batch 100,
# 20,000 steps) next to RLtools' own TD3 Pendulum example (rl_environments_pendulum_td3_blas, the same sizes),
# each timed process start to exit, best of N, run back to back so both see the same machine load.
#
#   bash bench/rltools_side_by_side.sh [RLTOOLS_DIR] [N]
#
# RLTOOLS_DIR (default /tmp/rl-tools) holds RLtools' source; its build goes to RLTOOLS_DIR/build. When the
# binary is missing it is built there (the source is cloned from GitHub first when the directory is empty).
# Nothing of RLtools ever goes into this repository. RLtools runs with its best build's settings on this
# machine kind (issue 7): OpenBLAS with one thread and OPENBLAS_CORETYPE=SkylakeX; rltrain as configured
# (its own kernels, one thread). Needs ./build/rltrain (bash tools/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rlt_dir=${1:-/tmp/rl-tools}
n=${2:-5}
bin="$rlt_dir/build/src/rl/environments/pendulum/td3/cpu/rl_environments_pendulum_td3_blas"

if [ ! -x "$bin" ]; then
  if [ ! -f "$rlt_dir/CMakeLists.txt" ]; then
    echo "side_by_side: cloning RLtools into $rlt_dir"
    git clone --depth 1 https://github.com/rl-tools/rl-tools "$rlt_dir"
  fi
  echo "side_by_side: building rl_environments_pendulum_td3_blas in $rlt_dir/build (a few minutes)"
  cmake -S "$rlt_dir" -B "$rlt_dir/build" -DCMAKE_BUILD_TYPE=Release -DRL_TOOLS_BACKEND_DISABLE_CUDA=ON \
    -DRL_TOOLS_DISABLE_JSON=ON -DRL_TOOLS_DISABLE_HDF5=ON -DRL_TOOLS_DISABLE_ZLIB=ON \
    -DRL_TOOLS_DISABLE_TENSORBOARD=ON -DRL_TOOLS_DISABLE_CLI11=ON -DBLA_VENDOR=OpenBLAS >"$rlt_dir/build.log" 2>&1 \
    || { tail -20 "$rlt_dir/build.log"; exit 1; }
  cmake --build "$rlt_dir/build" --target rl_environments_pendulum_td3_blas -j"$(nproc)" >>"$rlt_dir/build.log" 2>&1 \
    || { tail -20 "$rlt_dir/build.log"; exit 1; }
fi
[ -x build/rltrain ] || { echo "side_by_side: build/rltrain missing: run bash tools/setup.sh" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
best_rlt=999999; best_ref=999999; user_rlt=0; user_ref=0; ret_rlt=""; ret_ref=""
for i in $(seq 1 "$n"); do
  /usr/bin/time -f "%e %U" -o "$out/t1" ./build/rltrain --config configs/td3_pendulum_fast.yaml --quiet \
    --set out_dir="$out/rltrain" --set train.overwrite=true >"$out/log1" 2>&1
  read -r w u <"$out/t1"
  if awk "BEGIN{exit !($w < $best_rlt)}"; then best_rlt=$w; user_rlt=$u; fi
  ret_rlt=$(sed -n 's/.*"final_eval_return": *\([-0-9.]*\).*/\1/p' "$out/rltrain/summary.json")
  OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX /usr/bin/time -f "%e %U" -o "$out/t2" "$bin" >"$out/log2" 2>&1
  read -r w u <"$out/t2"
  if awk "BEGIN{exit !($w < $best_ref)}"; then best_ref=$w; user_ref=$u; fi
  ret_ref=$(grep "Mean return" "$out/log2" | tail -1 | sed 's/.*Mean return: *\([-0-9.]*\).*/\1/')
  echo "run $i: rltrain ${best_rlt}s best so far, RLtools ${best_ref}s best so far"
done
echo
echo "TD3 Pendulum-v1, 64-64, batch 100, 20,000 steps; whole process, best of $n ($(lscpu | sed -n 's/^Model name: *//p'))"
printf "  %-44s %8s %8s %14s\n" "" "wall s" "user s" "final return"
printf "  %-44s %8s %8s %14s\n" "rltrain (configs/td3_pendulum_fast.yaml)" "$best_rlt" "$user_rlt" "$ret_rlt"
printf "  %-44s %8s %8s %14s\n" "RLtools (OpenBLAS 1 thread, SkylakeX)" "$best_ref" "$user_ref" "$ret_ref"
awk "BEGIN{printf \"  rltrain / RLtools wall time: %.2f\n\", $best_rlt / $best_ref}"
