#!/usr/bin/env bash
# ckpt benchmark (not part of CI): ckpt summary against the Python baselines of DESIGN.md section 7.
# See bench/README.md. Run from anywhere; paths are relative to the repository root.
#
# Environment (all optional):
#   CKPT=build/ckpt         the ckpt binary to time (relative paths: from the repository root)
#   BENCH_DIR=/tmp/ckpt-bench  scratch folder for the generated checkpoints (reused if present)
#   RUNS=5                  timed runs per command for ckpt and py_unpickler (best is reported)
#   TORCH_RUNS=3            timed runs per command that imports torch (they take seconds)
#   WARMUP=0                extra untimed runs (the first run of each row, under /usr/bin/time for
#                           peak RSS, is untimed already and warms the page cache)
#   PY=/usr/bin/python3     interpreter for py_unpickler.py (it needs no torch). Debian's 3.11
#                           starts fastest here, so it is the strictest baseline, and it reproduces
#                           DESIGN.md's 0.031 s; without it, the real binary behind the
#                           python3 on PATH (not a pyenv shim: that adds ~0.1 s of bash per start)
#   TORCH_PY=/usr/bin/python3  interpreter with torch (Debian's torch 1.13)
#   CPU_LOAD=0              1: also time torch.load(map_location='cpu') (reads all 3.1 GB; slow)
#   COLD=1                  also the "[cold cache]" rows: ckpt summary and py_unpickler with the page
#                           cache dropped before every run (root only; 0 leaves them out)
#   ONLY=                   gpt2 or 100k: one file only
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

CKPT=${CKPT:-build/ckpt}
BENCH_DIR=${BENCH_DIR:-/tmp/ckpt-bench}
RUNS=${RUNS:-5}
TORCH_RUNS=${TORCH_RUNS:-3}
WARMUP=${WARMUP:-0}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
CPU_LOAD=${CPU_LOAD:-0}
COLD=${COLD:-1}
ONLY=${ONLY:-}
if [ -z "${PY:-}" ]; then
  if [ -x /usr/bin/python3 ]; then
    PY=/usr/bin/python3
  else
    PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PY=python3
  fi
fi

GPT2=$BENCH_DIR/gpt2-large.pt
MANY=$BENCH_DIR/entries100k.pt
MEASURE=("$PY" bench/measure.py)

mkdir -p "$BENCH_DIR" || exit 1

if ! "$TORCH_PY" -c 'import torch' 2>/dev/null; then
  echo "bench: $TORCH_PY cannot import torch; set TORCH_PY to a Python with torch" >&2
  exit 1
fi

# Generate once; make_gpt2_large.py renames into place only a complete file.
if [ "$ONLY" != 100k ] && [ ! -s "$GPT2" ]; then
  echo "bench: writing $GPT2 (about 3.1 GB)..." >&2
  "$TORCH_PY" bench/make_gpt2_large.py "$GPT2" >&2 || exit 1
fi
if [ "$ONLY" != gpt2 ] && [ ! -s "$MANY" ]; then
  echo "bench: writing $MANY (100,000 entries)..." >&2
  "$TORCH_PY" bench/make_gpt2_large.py --entries 100000 "$MANY" >&2 || exit 1
fi

HAVE_CKPT=1
if ! command -v "$CKPT" >/dev/null 2>&1; then
  HAVE_CKPT=0
  echo "bench: NOTE: $CKPT does not exist (or is not executable): build it first, or set CKPT=path." >&2
  echo "bench: NOTE: timing the baselines only; no ckpt figures, no goal check." >&2
fi

TSV=$(mktemp "${TMPDIR:-/tmp}/ckpt-bench.XXXXXX.tsv") || exit 1
trap 'rm -f "$TSV"' EXIT

# torch 1.13 may not take map_location='meta' for every file: fall back to 'cpu' and say so.
LOAD_META='import sys, torch
try:
    torch.load(sys.argv[1], map_location="meta")
except Exception as e:
    print("bench: torch.load(map_location=meta) failed (%s: %s); fell back to map_location=cpu" % (type(e).__name__, e), file=sys.stderr)
    torch.load(sys.argv[1], map_location="cpu")
    sys.exit(3)'

bench_file() { # label path
  local label=$1 file=$2
  echo "bench: $label: $file" >&2
  if [ "$HAVE_CKPT" = 1 ]; then
    "${MEASURE[@]}" run "$TSV" "$label" "ckpt summary --json" "$RUNS" "$WARMUP" -- "$CKPT" summary --json "$file"
  fi
  "${MEASURE[@]}" run "$TSV" "$label" "py_unpickler" "$RUNS" "$WARMUP" -- "$PY" bench/py_unpickler.py "$file"
  if [ "$COLD" = 1 ]; then  # peak RSS and time with nothing of the file in the page cache
    [ "$HAVE_CKPT" = 1 ] && COLD=1 "${MEASURE[@]}" run "$TSV" "$label" "ckpt summary --json [cold cache]" 3 0 \
      -- "$CKPT" summary --json "$file"
    COLD=1 "${MEASURE[@]}" run "$TSV" "$label" "py_unpickler [cold cache]" 3 0 -- "$PY" bench/py_unpickler.py "$file"
  fi
  if ! "${MEASURE[@]}" run "$TSV" "$label" "torch.load(map_location='meta')" "$TORCH_RUNS" "$WARMUP" \
       -- "$TORCH_PY" -c "$LOAD_META" "$file"; then
    # Exit 3: meta failed and the cpu fallback worked; time the fallback under its own name.
    if tail -n 1 "$TSV" | grep -q 'fell back'; then
      "${MEASURE[@]}" run "$TSV" "$label" "torch.load(map_location='cpu') [meta failed]" "$TORCH_RUNS" 0 \
        -- "$TORCH_PY" -c 'import sys, torch; torch.load(sys.argv[1], map_location="cpu")' "$file"
    fi
  fi
  if [ "$CPU_LOAD" = 1 ]; then
    "${MEASURE[@]}" run "$TSV" "$label" "torch.load(map_location='cpu')" "$TORCH_RUNS" "$WARMUP" \
      -- "$TORCH_PY" -c 'import sys, torch; torch.load(sys.argv[1], map_location="cpu")' "$file"
  fi
}

"${MEASURE[@]}" run "$TSV" "(none)" "import torch (alone)" "$TORCH_RUNS" "$WARMUP" -- "$TORCH_PY" -c 'import torch'
[ "$ONLY" != 100k ] && bench_file gpt2-large "$GPT2"
[ "$ONLY" != gpt2 ] && bench_file entries100k "$MANY"

echo
echo "ckpt: $CKPT$([ "$HAVE_CKPT" = 1 ] || echo ' (missing: baselines only)')"
echo "py_unpickler: $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
echo "torch: $TORCH_PY (torch $("$TORCH_PY" -c 'import torch; print(torch.__version__)' 2>/dev/null))"
echo "runs: $RUNS (torch rows: $TORCH_RUNS), warm-up $WARMUP; files in $BENCH_DIR (page cache warm)"
echo
"${MEASURE[@]}" table "$TSV"
