#!/usr/bin/env bash
# ckpt summary of a torch.export .pt2 at two weight sizes (not part of CI): the same 4-layer MLP graph
# with 64x64 and 8192x8192 float32 weights (65 KB and 1.07 GB). summary reads the zip directory and the
# JSON only, so its time and memory must not grow with the weights. See bench/RESULTS.md.
#
# Environment: CKPT=build/ckpt, BENCH_DIR=/tmp/ckpt-bench, RUNS=10,
#   GEN="chroot /work/sid python3" (a torch >= 2.6 that can write the files; BENCH_DIR must be visible
#   to it at the same path, e.g. BENCH_DIR=/work/sid/tmp/ckpt-bench with GEN_DIR=/tmp/ckpt-bench)
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CKPT=${CKPT:-build/ckpt}
RUNS=${RUNS:-10}
BENCH_DIR=${BENCH_DIR:-/work/sid/tmp/ckpt-bench}
GEN_DIR=${GEN_DIR:-/tmp/ckpt-bench}
GEN=${GEN:-chroot /work/sid python3}
mkdir -p "$BENCH_DIR" || exit 1
cp bench/make_pt2.py "$BENCH_DIR/make_pt2.py"
for w in 64 8192; do
  [ -s "$BENCH_DIR/mlp$w.pt2" ] || $GEN "$GEN_DIR/make_pt2.py" "$GEN_DIR/mlp$w.pt2" "$w" >&2 || exit 1
done
printf '| file | bytes | best s (median) of %s | peak RSS MiB |\n|---|---|---|---|\n' "$RUNS"
for w in 64 8192; do
  f=$BENCH_DIR/mlp$w.pt2
  rss=$( { /usr/bin/time -f '%M' "$CKPT" summary --json "$f" >/dev/null; } 2>&1 | tail -1)
  times=()
  for ((k = 0; k < RUNS; k++)); do
    s=$(date +%s.%N)
    "$CKPT" summary --json "$f" >/dev/null || exit 1
    e=$(date +%s.%N)
    times+=("$(echo "$e - $s" | bc)")
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -n)
  best=$(echo "$sorted" | head -1)
  med=$(echo "$sorted" | sed -n "$(((RUNS + 1) / 2))p")
  printf '| mlp%s.pt2 | %s | %.4f (%.4f) | %.1f |\n' "$w" "$(stat -c %s "$f")" "$best" "$med" "$(echo "$rss / 1024" | bc -l)"
done
