#!/bin/sh
# run_fuzz.sh [SECONDS] [BUILD_DIR]: builds the libFuzzer targets with clang (-DRLT_FUZZ=ON: coverage, ASan and
# UBSan over the whole library) into BUILD_DIR (default build-fuzz) and runs each target for SECONDS (default
# 60), starting from the seed corpus in tests/fuzz/corpus plus checkpoints written fresh by the current
# build. What the fuzzer adds to the corpus stays in BUILD_DIR/fuzz-work/<target>; a crash, leak, undefined
# behaviour or hang (an input over 10 s) stops that target, leaves the input as
# BUILD_DIR/fuzz-work/<target>-crash-* (or -leak-, -timeout-) and makes the script exit 1.
# Reproduce one with: BUILD_DIR/tests/fuzz/fuzz_<target> FILE
#   sh tests/fuzz/run_fuzz.sh 120        # two minutes per target
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-60}
bin=${2:-$root/build-fuzz}
cc=${CC_FUZZ:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "run_fuzz.sh: $cc not found: install clang (Debian/Ubuntu: apt-get install clang), or set CC_FUZZ" >&2
  exit 2
fi
"$cc" --version | head -1
mkdir -p "$bin"
jobs=${JOBS:-2}

cmake -S "$root" -B "$bin" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLT_CUDA=OFF -DRLT_FUZZ=ON \
  -DRLT_BUILD_BENCH=OFF >"$bin/configure.log" 2>&1 || { cat "$bin/configure.log" >&2; exit 2; }
cmake --build "$bin" -j"$jobs" --target fuzz_config fuzz_checkpoint fuzz_corpus

work="$bin/fuzz-work"
mkdir -p "$work/config" "$work/checkpoint"
# Fresh checkpoints of the fuzz trainers, so the fuzzer starts from files this build loads.
(cd "$work" && "$bin/tests/fuzz/fuzz_corpus" --write-seeds "$work/checkpoint")

status=0
for target in config checkpoint; do
  start=$(date +%s)
  echo "== fuzz_$target for ${secs}s"
  # The first directory collects new inputs; the committed corpus is only read. Leak checks stay on.
  if ! "$bin/tests/fuzz/fuzz_$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/$target-" "$work/$target" "$here/corpus/$target" 2>"$work/$target.log"; then
    status=1
    echo "fuzz_$target FOUND A PROBLEM (log: $work/$target.log):" >&2
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$work/$target.log" >&2 || tail -30 "$work/$target.log" >&2
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done|cov:" "$work/$target.log" | tail -4
  echo "fuzz_$target: $(($(date +%s) - start)) s, corpus $(ls "$work/$target" | wc -l) files"
done
exit $status
