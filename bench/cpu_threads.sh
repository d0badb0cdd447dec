#!/bin/sh
# cpu_threads.sh: the CPU backend's two-thread efficiency (#22). Runs bench_cpu_peak and bench_td3_update
# (HalfCheetah sizes, 256-256, batch 256) on 1 and 2 threads, best of REPS each, and prints the TD3 update rate
# next to the GFLOP/s it implies and bench_cpu_peak's figure measured in the same run, with the ratio.
#   bench/cpu_threads.sh [BUILD_DIR] [REPS] [UPDATES]      (defaults: b 3 2000)
# FLOP per update (one FMA = 2): 2 x batch x (the MACs of target actor + 2 target critics + 2 critic
# forwards + 2 critic backwards (dW and dx, 2x the forward), plus, every second update (policy_delay 2),
# actor forward + q1 forward + q1 backward dx + actor backward (2x)); 424.1 MFLOP at the defaults.
set -eu
B=${1:-b}; REPS=${2:-3}; UPD=${3:-2000}
OBS=17; ACT=6; H=256; BATCH=256
best() { # best updates/s of $REPS runs of bench_td3_update on $1 threads
    r=0
    for _ in $(seq "$REPS"); do
        u=$("$B/bench/bench_td3_update" --device cpu --threads "$1" --updates "$UPD" --obs $OBS --act $ACT --hidden $H \
            --batch $BATCH | awk '/updates\/s/ {print $2}')
        r=$(awk -v a="$r" -v b="$u" 'BEGIN {print (b > a) ? b : a}')
    done
    echo "$r"
}
peak() { # best AVX2/AVX-512 GFLOP/s of $REPS runs of bench_cpu_peak: $1 = 1 or 2 threads
    p=0
    for _ in $(seq "$REPS"); do
        q=$("$B/bench/bench_cpu_peak" --threads 2 | awk -v f="$1" '/thread/ {v = (f == 1) ? $4 : $8; if (v > m) m = v} END {print m}')
        p=$(awk -v a="$p" -v b="$q" 'BEGIN {print (b > a) ? b : a}')
    done
    echo "$p"
}
MFLOP=$(awk -v o=$OBS -v a=$ACT -v h=$H -v n=$BATCH 'BEGIN {
    c = (o + a) * h + h * h + h; p = o * h + h * h + h * a
    printf "%.1f", 2 * n * (p + 2 * c + 2 * c + 4 * c + (p + c + c + 2 * p) / 2) / 1e6 }')
P1=$(peak 1); P2=$(peak 2); U1=$(best 1); U2=$(best 2)
awk -v m="$MFLOP" -v p1="$P1" -v p2="$P2" -v u1="$U1" -v u2="$U2" -v r="$REPS" 'BEGIN {
    printf "TD3 256-256 batch 256 (%.1f MFLOP per update), best of %d\n", m, r
    printf "  threads  updates/s  GFLOP/s  bench_cpu_peak  ratio\n"
    printf "  1        %9.0f  %7.1f  %14.1f  %4.0f%%\n", u1, u1 * m / 1e3, p1, 100 * u1 * m / 1e3 / p1
    printf "  2        %9.0f  %7.1f  %14.1f  %4.0f%%\n", u2, u2 * m / 1e3, p2, 100 * u2 * m / 1e3 / p2
    printf "  2-thread speed-up %.2fx\n", u2 / u1 }'
