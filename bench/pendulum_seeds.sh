#!/usr/bin/env bash
# pendulum_seeds.sh: runs a TD3 config on seeds 1..N and prints, per seed, the first evaluation step whose
# mean return is >= -200, the evaluation at 10,000 steps, the worst evaluation after that first step (does
# the policy swing back?), the final evaluation and the run's wall time; then
# how many seeds reached -200 by 10,000 steps. It is the check of issue 7's learning target ("eval >= -200 by
# 10,000 steps on most seeds") in one command.
#
#   bash bench/pendulum_seeds.sh [CONFIG] [N] [--set key=value]...
#
# CONFIG defaults to configs/td3_pendulum_fast.yaml and N to 10; further arguments go to rltrain as they are
# (e.g. --set td3.actor_lr=1e-3). Each seed runs as its own process, one after another, so the wall times are
# those of a whole run (start to exit) on whatever else the machine is doing. Needs ./build/rltrain.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/td3_pendulum_fast.yaml}
n=${2:-10}
shift $(($# < 2 ? $# : 2))
[ -x build/rltrain ] || { echo "pendulum_seeds: build/rltrain missing: run bash tools/setup.sh" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf "%-5s %11s %10s %12s %10s %8s\n" seed "first>=-200" "eval@10k" "worst_after" final wall_s
hits=0; swings=0
for s in $(seq 1 "$n"); do
  /usr/bin/time -f "%e" -o "$out/time" ./build/rltrain --config "$config" --quiet --set seed="$s" \
    --set out_dir="$out/run$s" "$@" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  # metrics.csv: kind,env_step,episode,return,...; the evaluation rows have kind "eval".
  read -r first at10k worst final < <(awk -F, '$1 == "eval" {
      if (first != "" && (worst == "" || $4 + 0 < worst + 0)) worst = $4
      if (first == "" && $4 + 0 >= -200) first = $2
      if ($2 == 10000) at10k = sprintf("%.1f", $4)
      final = sprintf("%.1f", $4) }
    END { printf "%s %s %s %s\n", first == "" ? "never" : first, at10k == "" ? "-" : at10k,
          worst == "" ? "-" : sprintf("%.1f", worst), final }' \
    "$out/run$s/metrics.csv")
  if [ "$first" != never ] && [ "$first" -le 10000 ]; then hits=$((hits + 1)); fi
  if [ "$worst" != - ] && awk "BEGIN{exit !($worst < -400)}"; then swings=$((swings + 1)); fi
  printf "%-5s %11s %10s %12s %10s %8s\n" "$s" "$first" "$at10k" "$worst" "$final" "$(cat "$out/time")"
done
echo "$hits of $n seeds reached -200 by 10,000 steps; $swings fell below -400 again after reaching -200"
echo "($config${*:+ $*})"
