#!/usr/bin/env bash
# mujoco_parity.sh: learning parity of rltrain against reference implementations, many seeds side by side
# (docs/parity.md). Every (implementation, environment, seed) runs as its own background process, all at
# once, sharing the GPU through CUDA MPS; then bench/parity_report.py compares them.
#
#   bash bench/mujoco_parity.sh td3|dqn|report [SEEDS] [STEPS] [OUTDIR]
#     td3     rltrain (python -m rltrain.gym, configs/td3_mujoco.yaml: TD3.py's settings)
#             against bench/td3_reference.py (the authors' TD3.py/main.py) on Hopper-v5, Walker2d-v5 and
#             HalfCheetah-v5; STEPS default 300000
#     dqn     rltrain against bench/dqn_reference.py with the same configs: CartPole-v1 (configs/dqn_cartpole.yaml,
#             both through Gymnasium on the CPU, as the config says) and MinAtar Breakout
#             (configs/dqn_minatar_breakout.yaml: rltrain's built-in Breakout through the native CLI, the
#             reference on the minatar package's MinAtar/Breakout-v1, both on the GPU); STEPS default: each
#             config's total_steps
#     report  the table (OUTDIR/parity_table.md) and the plot (OUTDIR/parity.png) of whatever OUTDIR holds
#             (`report OUTDIR` works too)
#   SEEDS   a count (5: seeds 1..5) or a comma-separated list (1,2,3); default 5
#   OUTDIR  default /tmp/parity; runs write OUTDIR/<impl>/<env>/seed<k>.csv (env_steps,eval_return,wall_s) and
#           seed<k>.log (<env> is the id with '/' as '-'); rltrain's run directories are seed<k>.run
# Environment: IMPLS ("ref rltrain") and ENVS (the mode's list) pick a part of the runs, so that each call
#   stays inside a time limit; DEADLINE_S (540) stops every run still going with SIGINT (rows written so far
#   stay); TD3_START (25000, main.py's start_timesteps; 10000 is the paper's) is given to both sides;
#   RLT_SET adds space-separated --set overrides to the rltrain runs (e.g. RLT_SET="replay.capacity=100000"
#   to repeat issue 19's runs) and RLT_NAME (rltrain) names their folder, so that such an arm sits beside the
#   others in one report; REF_ARGS adds arguments to the reference runs (e.g. "--obs-scale 0.00392157");
#   DEVICE (cuda when nvidia-smi works, else cpu).
# On the GPU machine: the library built in build/ (librltrain.so and librltrain_cuda.so; RLTRAIN_LIBRARY and
# RLT_CUDA_MODULE override), gymnasium, mujoco and minatar importable or carried as wheels in .whl/ (installed
# into /tmp/site when missing). With $OUT set, the CSVs, logs, table and plot are also packed into $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
mode=${1:-}
case "$mode" in td3|dqn|report) ;; *) echo "usage: bash bench/mujoco_parity.sh td3|dqn|report [SEEDS] [STEPS] [OUTDIR]" >&2; exit 2 ;; esac
seeds_arg=${2:-5}
steps=${3:-}
outdir=${4:-/tmp/parity}
if [ "$mode" = report ] && [ $# -eq 2 ]; then outdir=$2; seeds_arg=5; fi  # report OUTDIR
if [[ $seeds_arg == *,* ]]; then seeds=${seeds_arg//,/ }; else seeds=$(seq 1 "$seeds_arg"); fi
PY=${PYTHON:-python3}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

pack() {  # what comes back from the GPU machine: at most 8 files, so one archive per call
  [ -n "${OUT:-}" ] || return 0
  local name=$1
  # CSVs (rltrain's metrics.csv with them), logs, wall times, table and plot; not the checkpoints.
  (cd "$outdir" && find . \( -name '*.csv' -o -name '*.log' -o -name 'times.txt' -o -name 'parity*' \) -print0 |
     tar czf "$OUT/$name.tgz" --null -T -) && echo "packed: \$OUT/$name.tgz"
}

if [ "$mode" = report ]; then
  $PY bench/parity_report.py "$outdir" --md "$outdir/parity_table.md" --png "$outdir/parity.png" || exit 1
  if [ -n "${OUT:-}" ]; then cp "$outdir/parity_table.md" "$outdir/parity.png" "$OUT/"; fi
  exit 0
fi

if [ -z "${DEVICE:-}" ]; then
  if nvidia-smi -L >/dev/null 2>&1; then DEVICE=cuda; else DEVICE=cpu; fi
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MPLBACKEND=Agg PYTHONUNBUFFERED=1
if ! $PY -c "import gymnasium, mujoco, minatar" >/dev/null 2>&1; then
  if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  $PY -c "import gymnasium, mujoco, minatar" || { echo "gymnasium, mujoco and minatar are needed (or wheels in .whl/)" >&2; exit 1; }
fi
export PYTHONPATH=$ROOT/bindings/python${PYTHONPATH:+:$PYTHONPATH}
BUILD=${BUILD:-$ROOT/build}
export RLTRAIN_LIBRARY=${RLTRAIN_LIBRARY:-$BUILD/librltrain.so}
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$BUILD/librltrain_cuda.so}
[ -f "$RLTRAIN_LIBRARY" ] || { echo "no $RLTRAIN_LIBRARY: build the library into build/ first" >&2; exit 1; }

if [ "$DEVICE" = cuda ]; then
  rdev=cuda:0
  graphs=--graphs
  if command -v nvidia-cuda-mps-control >/dev/null; then
    # Many runs share the GPU at once only through MPS (/work/shared/device/README.md); quit it on every exit.
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p /tmp/mps_pipe /tmp/mps_log && nvidia-cuda-mps-control -d
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
  fi
else
  rdev=cpu
  graphs=
fi

IMPLS=${IMPLS:-ref rltrain}
RLT_NAME=${RLT_NAME:-rltrain}
DEADLINE_S=${DEADLINE_S:-540}
read -r -a rlt_set <<< "${RLT_SET:-}"
read -r -a ref_args <<< "${REF_ARGS:-}"
rlt_sets=()
for s in "${rlt_set[@]}"; do rlt_sets+=(--set "$s"); done
T0=$(date +%s)
pids=()

# launch IMPL ENV SEED CMD...: one run in the background, its output in the log, its wall time in times.txt.
launch() {
  local impl=$1 env=$2 seed=$3
  shift 3
  local dir="$outdir/$impl/${env//\//-}"
  mkdir -p "$dir"
  (
    t=$(date +%s)
    timeout --signal=INT --kill-after=30 "$DEADLINE_S" "$@" > "$dir/seed$seed.log" 2>&1 < /dev/null
    rc=$?
    echo "$impl $env seed$seed rc=$rc $(( $(date +%s) - t ))s" | tee -a "$outdir/times.txt"
  ) &
  pids+=($!)
}

# rltrain's metrics.csv eval rows (kind,env_step,episode,return,length,updates,wall_s,...) as the common CSV.
convert() {
  local run
  for run in "$outdir"/*/*/seed*.run; do
    [ -f "$run/metrics.csv" ] || continue
    awk -F, 'BEGIN { print "env_steps,eval_return,wall_s" } $1 == "eval" { print $2 "," $4 "," $7 }' \
      "$run/metrics.csv" > "${run%.run}.csv"
  done
}

if [ "$mode" = td3 ]; then
  steps=${steps:-300000}
  ENVS=${ENVS:-Hopper-v5 Walker2d-v5 HalfCheetah-v5}
  start=${TD3_START:-25000}
  # configs/td3_mujoco.yaml holds TD3.py / main.py's settings (256-256, Adam 3e-4, batch 256, replay 1e6,
  # evaluation every 5000 steps of 10 episodes); only the start steps, device and outputs are set here.
  td3_sets=(--set train.start_steps="$start" --set train.progress_every_s=30
            --set device="$rdev" --set train.overwrite=true)
  echo "td3: seeds ${seeds//$'\n'/ }, $steps steps, start_steps $start, device $DEVICE, impls '$IMPLS', envs '$ENVS'"
  for env in $ENVS; do
    for k in $seeds; do
      dir="$outdir/ref/$env"
      [[ " $IMPLS " == *" ref "* ]] && launch ref "$env" "$k" $PY bench/td3_reference.py --env "$env" --seed "$k" \
        --steps "$steps" --start-steps "$start" --eval-every 5000 --out "$dir/seed$k.csv" --device "$DEVICE" $graphs \
        "${ref_args[@]}"
      [[ " $IMPLS " == *" rltrain "* ]] && launch "$RLT_NAME" "$env" "$k" $PY -m rltrain.gym \
        --config configs/td3_mujoco.yaml --env "$env" --seed "$k" --steps "$steps" "${td3_sets[@]}" \
        --set out_dir="$outdir/$RLT_NAME/$env/seed$k.run" "${rlt_sets[@]}"
    done
  done
else
  ENVS=${ENVS:-CartPole-v1 MinAtar/Breakout-v1}
  echo "dqn: seeds ${seeds//$'\n'/ }, steps ${steps:-as configured}, device $DEVICE, impls '$IMPLS', envs '$ENVS'"
  for env in $ENVS; do
    case "$env" in
      CartPole-v1) cfg=configs/dqn_cartpole.yaml ;;
      MinAtar/Breakout-v1) cfg=configs/dqn_minatar_breakout.yaml ;;
      *) echo "dqn: no config for $env" >&2; exit 2 ;;
    esac
    n=${steps:-$(awk '$1 == "total_steps:" { print $2; exit }' "$cfg")}
    sets=(--set train.total_steps="$n" --set checkpoint.include_replay=false --set train.overwrite=true)
    if [ "$env" = CartPole-v1 ]; then
      dev=cpu  # the config's device: a 256-256 MLP on 4 inputs
    else
      dev=$DEVICE
      # Epsilon falls over the first 100,000 steps (MinAtar's schedule) whatever the run's length.
      frac=$(awk -v s="$n" 'BEGIN { f = 100000 / s; printf "%.6f", (f > 1 ? 1 : f) }')
      sets+=(--set dqn.eps_fraction="$frac")
    fi
    edir=${env//\//-}
    for k in $seeds; do
      [[ " $IMPLS " == *" ref "* ]] && launch ref "$env" "$k" $PY bench/dqn_reference.py --env "$env" --seed "$k" \
        --device "$dev" $([ "$dev" = cuda ] && echo --graphs) "${sets[@]}" --out "$outdir/ref/$edir/seed$k.csv" \
        "${ref_args[@]}"
      if [[ " $IMPLS " == *" rltrain "* ]]; then
        rsets=("${sets[@]}" --set seed="$k" --set out_dir="$outdir/$RLT_NAME/$edir/seed$k.run" "${rlt_sets[@]}")
        if [ "$env" = CartPole-v1 ]; then
          launch "$RLT_NAME" "$env" "$k" $PY -m rltrain.gym --config "$cfg" --env "$env" --set device=cpu "${rsets[@]}" --quiet
        else
          # rltrain's built-in Breakout (envs/minatar_breakout.c, MinAtar's rules; the adapter takes only
          # (C, H, W) images and MinAtar's are (H, W, C)).
          launch "$RLT_NAME" "$env" "$k" "$BUILD/rltrain" --config "$cfg" --set device="$( [ "$dev" = cuda ] && echo cuda:0 || echo cpu)" \
            "${rsets[@]}" --quiet
        fi
      fi
    done
  done
fi

echo "${#pids[@]} runs started; deadline ${DEADLINE_S}s"
fails=0
for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
convert
echo "all runs ended after $(( $(date +%s) - T0 ))s"
grep -c "rc=0 " "$outdir/times.txt" | sed 's/^/runs with rc=0 (all calls so far): /'
pack "parity_${mode}_$(echo "$IMPLS" | tr ' ' '+')_${RLT_NAME}_$(date +%H%M%S)"
exit 0
