#!/usr/bin/env bash
# ckpt diff --values benchmark (not part of CI): throughput of `ckpt diff --values A B` on a pair of
# ~1 GB torch.save files (bench/make_diff_pair.py: float32 + bfloat16, every element of B different,
# and a re-saved equal copy), files in the page cache, against the Python baseline: torch.load both
# (torch 1.13 has no mmap=True), then per tensor max |a - b| and max |a - b| / |b| in float32 (what
# one would write; ckpt computes in float64, which is more work). Prints GB/s (bytes of A's and B's tensors read per
# second of wall time, whole process), ckpt's peak RSS (it reads both files through bounded windows:
# flat whatever their size) and the ratio to the baseline; OLD=path/to/ckpt times an older build as well
# (the "before" figure). `uptime` is printed: the machine is shared.
#
# Environment: CKPT=build/ckpt  OLD=  BENCH_DIR=/tmp/ckpt-diff-bench  MIB=1024  RUNS=3  TORCH_PY=/usr/bin/python3
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CKPT=${CKPT:-build/ckpt}
OLD=${OLD:-}
BENCH_DIR=${BENCH_DIR:-/tmp/ckpt-diff-bench}
MIB=${MIB:-1024}
RUNS=${RUNS:-3}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
A=$BENCH_DIR/a.pt B=$BENCH_DIR/b.pt SAME=$BENCH_DIR/same.pt
if [ ! -s "$A" ] || [ ! -s "$B" ] || [ ! -s "$SAME" ]; then
  echo "bench: writing $BENCH_DIR/{a,b,same}.pt (about $MIB MiB each)..." >&2
  "$TORCH_PY" bench/make_diff_pair.py "$BENCH_DIR" --mib "$MIB" >&2 || exit 1
fi
cat "$A" "$B" "$SAME" >/dev/null  # into the page cache
# Bytes compared: every tensor's bytes, on both sides (what the progress bar counts).
BYTES=$("$CKPT" summary --json "$A" | /usr/bin/python3 -c 'import json,sys; print(2 * json.load(sys.stdin)["totals"]["bytes"])') || exit 1
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/')"
echo "pair: $(basename "$A") vs $(basename "$B") / $(basename "$SAME"): $BYTES bytes of tensors compared per diff"

best() {  # "best wall seconds, largest peak RSS in KiB" of RUNS runs of "$@"
  local b=1e9 m=0 t f
  f=$(mktemp) || exit 1
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -o "$f" -f "%e %M" "$@" >/dev/null 2>&1
    read -r t k <<<"$(tail -1 "$f")"
    b=$(/usr/bin/python3 -c "import sys; print(min(float(sys.argv[1]), float(sys.argv[2])))" "$b" "$t")
    [ "$k" -gt "$m" ] && m=$k
  done
  rm -f "$f"
  echo "$b $m"
}
row() {  # label, "seconds [peak RSS KiB]"
  /usr/bin/python3 -c "import sys; a=sys.argv[2].split(); s=float(a[0]); print('%-46s %8.3f s %8.2f GB/s%s' % (sys.argv[1], s, int(sys.argv[3]) / s / 1e9, '  peak RSS %.1f MiB' % (int(a[1]) / 1024) if len(a) > 1 else ''))" "$1" "$2" "$BYTES"
}

NEW_B=$(best "$CKPT" diff --values "$A" "$B")
NEW_S=$(best "$CKPT" diff --values "$A" "$SAME")
row "ckpt diff --values a b (all differ)" "$NEW_B"
row "ckpt diff --values a same (all equal)" "$NEW_S"
if [ -n "$OLD" ]; then
  OLD_B=$(best "$OLD" diff --values "$A" "$B")
  row "old ckpt diff --values a b ($OLD)" "$OLD_B"
  /usr/bin/python3 -c "import sys; print('speed-up against the old build: %.1fx' % (float(sys.argv[1].split()[0]) / float(sys.argv[2].split()[0])))" "$OLD_B" "$NEW_B"
fi
PY=$("$TORCH_PY" - "$A" "$B" <<'PY'
import sys, time, torch
t0 = time.perf_counter()
a, b = torch.load(sys.argv[1], map_location="cpu"), torch.load(sys.argv[2], map_location="cpu")
t1 = time.perf_counter()
for k, ta in a.items():  # what one would write: in float32 (bfloat16 upcast), relative where b != 0
    fa, fb = ta.float(), b[k].float()
    diff = (fa - fb).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    max_rel = (diff / fb.abs()).nan_to_num(0.0, 0.0, 0.0).max().item() if diff.numel() else 0.0
t2 = time.perf_counter()
print("%.4f %.4f" % (t1 - t0, t2 - t1))
PY
) || exit 1
read -r PY_LOAD PY_CMP <<<"$PY"
PY_ALL=$(/usr/bin/python3 -c "import sys; print(float(sys.argv[1]) + float(sys.argv[2]))" "$PY_LOAD" "$PY_CMP")
row "python: torch.load both + compare (calls)" "$PY_ALL"
echo "  of which torch.load ${PY_LOAD} s, float32 max abs / rel ${PY_CMP} s ($(nproc) torch threads)"
/usr/bin/python3 -c "import sys; print('ckpt against the Python baseline: %.1fx faster' % (float(sys.argv[1]) / float(sys.argv[2].split()[0])))" "$PY_ALL" "$NEW_B"
