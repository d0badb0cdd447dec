#!/usr/bin/env bash
# sweep_bench.sh: a TRIALS-trial hyperparameter sweep of configs/td3_pendulum.yaml on one GPU (issue #40's target:
# <= 4x the wall time of one run), in one call:
#   1. one run of the config alone (the reference), and a 16-member population of it in one process (rltrain CLI;
#      td3.actor_lr and td3.tau differing: issue #39's target, <= 2x one run),
#   2. the sweep as populations: one worker (python -m rltrain.sweep), BATCH trials at a time in one process,
#   3. the same sweep one trial per process (a fresh `python -m rltrain.sweep --workers-batch 1 --max-batches 1` for
#      each trial, PROCS of them at a time), the way users run SB3 or CleanRL with Optuna.
# Both sweeps sample the same space with the random sampler (seed 1) and prune nothing (--pruner none), so they do
# the same work; a third line runs the populations again with the median pruner, what a user would run.
# The GPU machine has no Optuna: its wheels come from .whl (carried; git-ignored), made on a machine with pip by
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl optuna==5.0.0 alembic sqlalchemy colorlog tqdm Mako MarkupSafe \
#     greenlet typing_extensions packaging PyYAML
# Usage (device machine, repo root): bash bench/sweep_bench.sh [BUILD_DIR]   (default build; built when missing)
#   env: TRIALS (64), BATCH (64: one population), PROCS (1), DEVICE (cuda:0), STEPS (the config's total_steps),
#   PRECISION (the config's: fp32; tf32, bf16 or fp16 for every run here, the reference one included),
#   GPUS (1; 2 or more adds the sweep again with one worker per GPU, --devices cuda:0,..., on one journal file),
#   STAGES (default "1 2 3 4 5": which numbered parts to run; 1 is the 16-member population, and the one run, the
#   reference, always runs).
# Every command runs under `timeout`; the log and each sweep's trials.csv go to $OUT (or ./sweep_out).
set -uo pipefail
build=${1:-build}
OUT=${OUT:-sweep_out}; mkdir -p "$OUT"
TRIALS=${TRIALS:-64}; BATCH=${BATCH:-64}; PROCS=${PROCS:-1}; DEVICE=${DEVICE:-cuda:0}
log="$OUT/sweep_bench.log"
: >"$log"
say() { echo "$*" | tee -a "$log"; }

[ -f .devdeps/deps.sh ] && source .devdeps/deps.sh unpack .devdeps >/dev/null
if [ ! -x "$build/rltrain" ] || [ ! -f "$build/librltrain.so" ]; then
  say "== building $build (sm_90)"
  timeout 900 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1 &&
    timeout 900 cmake --build "$build" -j16 >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
if ! python3 -c "import optuna" 2>/dev/null; then
  ls .whl/*.whl >/dev/null 2>&1 || { say "no Optuna and no .whl folder of wheels (see the header)"; exit 1; }
  timeout 300 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
export RLTRAIN_LIBRARY=$PWD/$build/librltrain.so RLT_CUDA_MODULE=$PWD/$build/librltrain_cuda.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log"
say "optuna $(python3 -c 'import optuna; print(optuna.__version__)'), $TRIALS trials, populations of $BATCH, $PROCS process(es) at a time for the per-process sweep, on $DEVICE, precision ${PRECISION:-fp32}"

work=/tmp/sweep_bench; rm -rf "$work"; mkdir -p "$work"
cat >"$work/space.yaml" <<'EOF'
td3.actor_lr: {log_uniform: [1e-4, 3e-3]}
td3.critic_lr: {log_uniform: [1e-4, 3e-3]}
td3.tau: [0.002, 0.005, 0.01]
EOF
sets=(--set device="$DEVICE" --set train.progress_every_s=5)
[ -n "${STEPS:-}" ] && sets+=(--set train.total_steps="$STEPS")
[ -n "${PRECISION:-}" ] && sets+=(--set precision="$PRECISION")
common=(--config configs/td3_pendulum.yaml --space "$work/space.yaml" --trials "$TRIALS" --sampler random
        --sampler-seed 1 --quiet "${sets[@]}")
now() { date +%s.%N; }
want() { case " ${STAGES:-1 2 3 4 5} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
one=0 p16=0 pop=0 proc=0 med=0
elapsed() { python3 -c "print(f'{$2 - $1:.1f}')"; }

# Untimed first: the first CUDA process on a fresh machine starts about 0.6 s slower (bench/seeds_e2e.sh).
timeout 120 "$build/rltrain" --config configs/td3_pendulum.yaml "${sets[@]}" --set train.total_steps=1000 \
  --set out_dir="$work/warmup" --quiet >/dev/null 2>&1
say "== 1. one run of configs/td3_pendulum.yaml on $DEVICE"
t0=$(now)
timeout 300 "$build/rltrain" --config configs/td3_pendulum.yaml "${sets[@]}" --set out_dir="$work/single" --quiet \
  >>"$log" 2>&1
rc=$?; t1=$(now); one=$(elapsed "$t0" "$t1"); say "one run: ${one} s (exit $rc)"

if want 1; then
say "== 1b. a 16-member population of configs/td3_pendulum.yaml (td3.actor_lr and td3.tau differing) in one process (issue #39: <= 2x one run)"
cp configs/td3_pendulum.yaml "$work/pop16.yaml"
python3 - "$work/pop16.yaml" <<'PY'
import sys
lrs = [1e-4 * (30 ** (k / 15)) for k in range(16)]
taus = [(0.002, 0.005, 0.01, 0.02)[k % 4] for k in range(16)]
open(sys.argv[1], "a").write("population:\n  td3.actor_lr: [" + ", ".join(repr(v) for v in lrs) + "]\n"
                             "  td3.tau: [" + ", ".join(repr(v) for v in taus) + "]\n")
PY
t0=$(now)
timeout 600 "$build/rltrain" --config "$work/pop16.yaml" "${sets[@]}" \
  --set out_dir="$work/pop16" --quiet >>"$log" 2>&1
rc=$?; t1=$(now); p16=$(elapsed "$t0" "$t1")
say "16-member population: ${p16} s (exit $rc); $(python3 -c "print(f'{$p16 / $one:.2f}')")x one run"
cp "$work/pop16/summary.csv" "$OUT/population16_summary.csv" 2>/dev/null

fi
if want 2; then
say "== 2. the sweep as populations of $BATCH (one worker, one process), no pruning"
t0=$(now)
timeout 900 python3 -m rltrain.sweep "${common[@]}" --storage "journal:$work/pop.journal" --study pop \
  --out "$work/pop" --workers-batch "$BATCH" --pruner none >>"$log" 2>&1
rc=$?; t1=$(now); pop=$(elapsed "$t0" "$t1")
say "populations: ${pop} s for $TRIALS trials (exit $rc); $(python3 -c "print(f'{$pop / $one:.2f}')")x one run"
timeout 120 python3 -m rltrain.sweep.report pop --storage "journal:$work/pop.journal" --out "$work/pop_report" \
  --no-plots >/dev/null 2>>"$log" && cp "$work/pop_report/trials.csv" "$OUT/populations_trials.csv"

fi
if want 3; then
say "== 3. the same sweep, one trial per process ($PROCS at a time), no pruning"
t0=$(now)
loop() {
  for _ in $(seq 1 "$TRIALS"); do
    timeout 600 python3 -m rltrain.sweep "${common[@]}" --storage "journal:$work/proc.journal" --study proc \
      --out "$work/proc" --workers-batch 1 --max-batches 1 --pruner none >>"$work/proc_$1.log" 2>&1 || break
    python3 - "$work/proc.journal" <<'PY' || break
import sys, optuna
from rltrain.sweep import open_storage
s = optuna.load_study(study_name="proc", storage=open_storage("journal:" + sys.argv[1]))
n = sum(t.state.name in ("COMPLETE", "PRUNED", "RUNNING") for t in s.trials)
sys.exit(1 if n >= int(__import__("os").environ["TRIALS"]) else 0)
PY
  done
}
export TRIALS
for p in $(seq 1 "$PROCS"); do loop "$p" & done
wait
t1=$(now); proc=$(elapsed "$t0" "$t1")
done_n=$(python3 -c "
import optuna; from rltrain.sweep import open_storage
s = optuna.load_study(study_name='proc', storage=open_storage('journal:$work/proc.journal'))
print(sum(t.state.name == 'COMPLETE' for t in s.trials))" 2>>"$log")
say "one trial per process: ${proc} s for ${done_n} completed trials; $(python3 -c "print(f'{$proc / $one:.2f}')")x one run; populations $(python3 -c "print(f'{$proc / $pop:.2f}' if $pop else '-')")x faster"
tail -3 "$work"/proc_1.log >>"$log" 2>/dev/null
timeout 120 python3 -m rltrain.sweep.report proc --storage "journal:$work/proc.journal" --out "$work/proc_report" \
  --no-plots >/dev/null 2>>"$log" && cp "$work/proc_report/trials.csv" "$OUT/processes_trials.csv"

fi
if want 4; then
say "== 4. populations of $BATCH again with the median pruner (what a user runs)"
t0=$(now)
timeout 900 python3 -m rltrain.sweep "${common[@]}" --storage "journal:$work/med.journal" --study med \
  --out "$work/med" --workers-batch "$BATCH" --pruner median >>"$log" 2>&1
rc=$?; t1=$(now); med=$(elapsed "$t0" "$t1")
say "populations with pruning: ${med} s (exit $rc); $(python3 -c "print(f'{$med / $one:.2f}')")x one run"
cp "$work/med/best.json" "$OUT/median_best.json" 2>/dev/null
fi
multi=""
if [ "${GPUS:-1}" -gt 1 ] && want 5; then
  say "== 5. the sweep over $GPUS GPUs, one worker each (--devices cuda:0,...: a worker process per GPU) on one journal file, no pruning"
  t0=$(now)
  devices=$(seq -s, 0 $((GPUS - 1)) | sed 's/[0-9][0-9]*/cuda:&/g')
  # --sampler-seed 1 in common: the launcher gives worker k seed 1 + k.
  timeout 900 python3 -m rltrain.sweep "${common[@]}" --devices "$devices" --storage "journal:$work/multi.journal" \
    --study multi --out "$work/multi" --workers-batch "$(( (BATCH + GPUS - 1) / GPUS ))" --pruner none \
    >>"$work/multi.log" 2>&1
  rc=$?; t1=$(now); multi=$(elapsed "$t0" "$t1")
  say "$GPUS GPUs: ${multi} s for $TRIALS trials (exit $rc); $(python3 -c "print(f'{$multi / $one:.2f}')")x one run"
  grep -E "worker done|ended with" "$work/multi.log" >>"$log" 2>/dev/null
  multi=" | $GPUS GPUs ${multi} s"
fi
say "summary: one run ${one} s | 16-member population ${p16} s | populations ${pop} s | one per process ${proc} s | populations + median pruner ${med} s${multi}"
