#!/usr/bin/env bash
# seeds_vs_jax.sh: rltrain's many-seeds update rate beside the JAX anchor (bench/jax_vmap.py: jax.vmap over N
# stacked train states, 50 updates per jitted lax.scan call), in one call on one GPU (issue #39, item 4):
#   TD3 obs 17, act 6, batch 256, at 256-256 and 64-64 (the rejax regime), N = 1, 16, 64, 256 agents;
#   DQN CartPole MLP (120-84, batch 128) and Nature CNN (batch 32), N = 1 and 16;
#   each in rltrain fp32 against JAX exact fp32 (jax_default_matmul_precision highest) and rltrain
#   precision tf32 against JAX's default (TF32 products on Hopper).
# rltrain's side is bench_td3_update / bench_dqn_update --seeds N (bench/seed_bench.h): N agents, a thread each,
# first each with its own graphs, then one batched update graph for all (what train.seed_batching runs), in
# lock-step, then that graph launched from one thread alone; N = 1 is the plain single-agent run. The table
# gives each rltrain figure, JAX's, the TFLOP/s of each (the same analytic count of the update's products,
# bench/jax_vmap.py's td3_flops / dqn_flops) with JAX's share of the device's peak for that precision, and the
# ratios rltrain / JAX: of the batched lock-step figure (a seed group with train.seed_batching) and of rltrain's
# best figure. Updates per agent shrink as N grows; every command runs under `timeout`, and none starts once
# SEEDS_JAX_BUDGET_S (default 450) seconds have passed: the whole script stays under 8 minutes on an H100. Runs
# are ordered by importance (256-256 first, 256 agents last); a skipped or timed-out one shows in the table.
# Usage: bash bench/seeds_vs_jax.sh [BUILD_DIR] [DEVICE]   (defaults: build cuda:0; builds nothing: run
# `bash bench/run_gpu.sh seeds_jax` to build and run it). Logs and the table go to $OUT (default gpu_out).
set -uo pipefail
build=${1:-build}
device=${2:-cuda:0}
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/$build/librltrain_cuda.so}
budget=${SEEDS_JAX_BUDGET_S:-450}
py=${PYTHON:-python3}
rows=$OUT/seeds_vs_jax_rltrain.tsv
jj=$OUT/seeds_vs_jax_jax.json
log=$OUT/seeds_vs_jax.log
: >"$rows"
: >"$log"
rm -f "$jj"

# The seconds a command may run: its own limit, cut to what is left of the budget; fails when nothing is left.
limit() {
  local left=$((budget - SECONDS))
  [ "$left" -ge 10 ] || return 1
  echo $(($1 < left ? $1 : left))
}

# jax_run LABEL LIMIT ARGS...: bench/jax_vmap.py with ARGS, its records tagged LABEL in $jj.
jax_run() {
  local label=$1 t
  t=$(limit "$2") || { echo "== skipped (time budget): jax_vmap.py $label" | tee -a "$log"; return; }
  shift 2
  echo "== jax_vmap.py $* (timeout $t s)" | tee -a "$log"
  timeout "$t" "$py" bench/jax_vmap.py "$@" --seconds 1 --json "$jj" --label "$label" 2>&1 | tee -a "$log" |
    grep -E "updates/s|Error|error" || true
}

# rl LABEL N PRECISION LIMIT COMMAND...: one rltrain bench run; one TSV row: label, N, precision, the rate with a
# graph each (N = 1: the single run), batched in lock-step, batched from one thread, and a note.
rl() {
  local label=$1 n=$2 prec=$3 t out rc own bat one note=""
  t=$(limit "$4") || { printf '%s\t%s\t%s\t\t\t\tskipped (time budget)\n' "$label" "$n" "$prec" >>"$rows"; return; }
  shift 4
  echo "== $* (timeout $t s)" | tee -a "$log"
  out=$(timeout "$t" "$@" 2>&1)
  rc=$?
  echo "$out" >>"$log"
  if [ "$n" = 1 ]; then
    own=$(echo "$out" | awk '/^  updates\/s/ {print $2; exit}')
    bat="" one=""
  else
    own=$(echo "$out" | awk '/updates\/s together, each its own graphs/ {print $3; exit}')
    bat=$(echo "$out" | awk '/updates\/s together, one batched graph/ {print $3; exit}')
    one=$(echo "$out" | sed -n 's/.*no lock-step: \([0-9]*\) updates\/s.*/\1/p' | head -1)
  fi
  [ "$rc" = 124 ] && note="timed out after $t s"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && note="exit $rc: $(echo "$out" | grep -iE "error|refus|batched graphs|fail|more than" | head -1 | tr '\t' ' ' | cut -c1-100)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$n" "$prec" "$own" "$bat" "$one" "$note" >>"$rows"
  echo "   graph each: ${own:--}  batched lock-step: ${bat:--}  batched one thread: ${one:--}  ${note}" | tee -a "$log"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | tee -a "$log"
td3=$build/bench/bench_td3_update
dqn=$build/bench/bench_dqn_update
updates_for() { case $1 in 1) echo 5000 ;; 16) echo 1000 ;; 64) echo 300 ;; *) echo 100 ;; esac; }
limit_for() { case $1 in 1) echo 60 ;; 16) echo 90 ;; 64) echo 120 ;; *) echo 150 ;; esac; }

td3_rl() { # hidden N
  local h=$1 n=$2 p seeds=()
  [ "$n" -gt 1 ] && seeds=(--seeds "$n")
  for p in fp32 tf32; do
    rl "td3 $h-$h b256" "$n" $p "$(limit_for "$n")" "$td3" --device "$device" --hidden "$h" --batch 256 \
      --precision $p --updates "$(updates_for "$n")" "${seeds[@]}"
  done
}

# 1. TD3 256-256: JAX for every N, rltrain up to 64 agents.
jax_run "td3 256-256 b256" 170 --algo td3 --agents 1 16 64 256 --hidden 256 --batch 256 --precision highest default
for n in 1 16 64; do td3_rl 256 "$n"; done
# 2. DQN, MLP and Nature CNN: 1 and 16 agents.
jax_run "dqn mlp 120-84 b128" 60 --algo dqn_mlp --agents 1 16 --precision highest default
jax_run "dqn nature b32" 80 --algo dqn_cnn --agents 1 16 --precision highest default
for p in fp32 tf32; do
  rl "dqn mlp 120-84 b128" 1 $p 40 "$dqn" --device "$device" --case mlp --updates 10000 --precision $p
  rl "dqn mlp 120-84 b128" 16 $p 90 "$dqn" --device "$device" --case mlp --updates 3000 --precision $p --seeds 16
  rl "dqn nature b32" 1 $p 40 "$dqn" --device "$device" --case nature --updates 1000 --precision $p
  rl "dqn nature b32" 16 $p 120 "$dqn" --device "$device" --case nature --updates 200 --precision $p --seeds 16
done
# 3. TD3 64-64 (the rejax regime).
jax_run "td3 64-64 b256" 150 --algo td3 --agents 1 16 64 256 --hidden 64 --batch 256 --precision highest default
for n in 1 16 64; do td3_rl 64 "$n"; done
# 4. 256 agents on rltrain's side last: its set-up makes 256 agents for each phase.
td3_rl 256 256
td3_rl 64 256

"$py" - "$rows" "$jj" <<'EOF' | tee "$OUT/seeds_vs_jax.txt"
import json, os, sys
rows_path, jax_path = sys.argv[1], sys.argv[2]
jx = {}
if os.path.exists(jax_path):
    for r in json.load(open(jax_path)):
        jx[(r["label"], r["agents"], r["precision"])] = r
order = ["td3 256-256 b256", "td3 64-64 b256", "dqn mlp 120-84 b128", "dqn nature b32"]
rl = {}
for line in open(rows_path):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 7:
        rl[(f[0], int(f[1]), f[2])] = f
num = lambda s: float(s) if s else None
fmt = lambda v: "%.0f" % v if v else "-"
dev = next(iter(jx.values()))["device"] if jx else "?"
print("rltrain --seeds N beside JAX vmap (bench/jax_vmap.py), updates/s of all N agents together, on %s" % dev)
print("fp32 = rltrain precision fp32 vs JAX 'highest'; tf32 = rltrain precision tf32 vs JAX's default (TF32)")
hdr = ("case", "N", "prec", "rlt each", "rlt batched", "rlt 1-thread", "JAX vmap", "rlt TF/s (peak%)", "JAX TF/s (peak%)",
       "batched/JAX", "best/JAX", "note")
w = (20, 4, 5, 10, 12, 13, 10, 17, 17, 12, 9, 0)
print("  ".join(h.ljust(n) for h, n in zip(hdr, w)))
keys = sorted(set(list(rl) + [(l, n, {"highest": "fp32", "default": "tf32"}[p]) for l, n, p in jx]),
              key=lambda k: (order.index(k[0]) if k[0] in order else 9, k[1], k[2]))
for label, n, prec in keys:
    f = rl.get((label, n, prec), [label, n, prec, "", "", "", "not run"])
    own, bat, one = num(f[3]), num(f[4]), num(f[5])
    j = jx.get((label, n, "highest" if prec == "fp32" else "default"))
    ju = j["updates_per_s"] if j else None
    best = max([v for v in (own, bat, one) if v] or [0]) or None
    tf = lambda t: "%.2f" % t + (" (%.1f%%)" % (100 * t / j["peak_tflop_s"]) if j["peak_tflop_s"] else "")
    rtf = tf(best * j["flop_per_update"] / 1e12) if (best and j) else "-"
    jtf = tf(j["tflop_s"]) if j else "-"
    ratio = lambda v: "%.2fx" % (v / ju) if (v and ju) else "-"
    cells = (label, str(n), prec, fmt(own), fmt(bat), fmt(one), fmt(ju), rtf, jtf, ratio(bat if n > 1 else own),
             ratio(best), f[6] if len(f) > 6 else "")
    print("  ".join(c.ljust(n_) for c, n_ in zip(cells, w)))
print("rlt each: a graph per agent (N = 1: the single run); batched: one batched graph, lock-step (train.seed_batching);"
      " 1-thread: that graph launched from one thread. TF/s: the analytic product count of one update "
      "(bench/jax_vmap.py) times the rate (rltrain: its best); peak: the device's for that precision (fp32 or TF32 "
      "dense). Ratios >= 1.3x are issue #39's target.")
EOF
