#!/usr/bin/env bash
# td3_large.sh: the TD3 update at larger networks and batches, rltrain beside PyTorch + CUDA graphs in one call on
# one GPU, in three precisions, with the ratio rltrain / PyTorch:
#   fp32  TF32 off on both sides (rltrain's default: exact fp32 products);
#   tf32  rltrain's precision: tf32 (its cuBLASLt products on TF32 tensor cores) / PyTorch's allow_tf32;
#   bf16  rltrain's precision: bf16 (16-bit compute copies, fp32 masters) / PyTorch's bf16 autocast, fp32 masters.
# Then the line that must not regress: 256-256 at batch 256 in fp32, whose products stay on rltrain's own kernels;
# its last losses are compared with the ones recorded before cuBLASLt (the same bits give the same losses).
# Run on the GPU machine after a build (bash bench/run_gpu.sh tests builds build/):  bash bench/td3_large.sh
# Environment: B (build directory, default build), DEV (default cuda:0).
set -uo pipefail
B=${B:-build}; DEV=${DEV:-cuda:0}
export RLT_CUDA_MODULE=${RLT_CUDA_MODULE:-$PWD/$B/librltrain_cuda.so}
# The 256-256/b256 run before the cuBLASLt work (bench/RESULTS.md, H100, 20,000 updates after 50 warm-up ones).
REF_256_LOSSES="critic 1.148 actor -41.78"
REF_256_UPS="10,113-10,165"

printf "%-16s %-5s %12s %16s %7s   %s\n" "networks, batch" "prec" "rltrain /s" "torch graphs /s" "ratio" "rltrain last losses"
for hb in "1024 4096" "1024 1024" "512 1024"; do
  set -- $hb
  case "$1/$2" in 1024/4096) n=500 ;; 1024/1024) n=1000 ;; *) n=2000 ;; esac
  # One PyTorch process for the three precisions (each with its own model, optimiser and graph).
  tout=$(python3 bench/td3_torch.py --device "$DEV" --mode graphs --precision fp32,tf32,bf16 --hidden "$1" --batch "$2" \
           --updates 300 --skip-critic-wgrad 2>&1)
  for p in fp32 tf32 bf16; do
    rout=$("$B/bench/bench_td3_update" --device "$DEV" --hidden "$1" --batch "$2" --updates "$n" --precision "$p" 2>&1)
    r=$(echo "$rout" | awk '/updates\/s/ {print $2; exit}')
    l=$(echo "$rout" | awk '/last losses/ {print $3, $4, $5, $6; exit}')
    t=$(echo "$tout" | awk -v p="$p" '$1 == "torch" && $2 == "graphs" && $3 == p && $4 == "updates/s" {print $5; exit}')
    if [ -z "$r" ]; then
      echo "$1-$1/b$2 $p: rltrain FAILED"; echo "$rout" | tail -3; continue
    fi
    if [ -z "$t" ]; then
      ratio="n/a"; t="FAILED"
      echo "$tout" | grep -E "^torch graphs +$p" | head -1
    else
      ratio=$(awk -v a="$r" -v b="$t" 'BEGIN { printf "%.2fx", a / b }')
    fi
    printf "%-16s %-5s %12s %16s %7s   %s\n" "$1-$1/b$2" "$p" "$r" "$t" "$ratio" "$l"
  done
done

echo "== no regression: 256-256/b256, fp32 (the fused kernels; before: $REF_256_UPS updates/s, last losses $REF_256_LOSSES)"
rout=$("$B/bench/bench_td3_update" --device "$DEV" --hidden 256 --batch 256 --updates 20000 2>&1)
r=$(echo "$rout" | awk '/updates\/s/ {print $2; exit}')
l=$(echo "$rout" | awk '/last losses/ {print $3, $4, $5, $6; exit}')
if [ -z "$r" ]; then
  echo "256-256/b256 fp32: rltrain FAILED"; echo "$rout" | tail -3
else
  same=$([ "$l" = "$REF_256_LOSSES" ] && echo "the same losses as before" || echo "DIFFERENT losses from before ($REF_256_LOSSES)")
  printf "%-16s %-5s %12s   last losses %s: %s\n" "256-256/b256" "fp32" "$r" "$l" "$same"
fi
