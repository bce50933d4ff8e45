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
#   PEERS=1                 0: leave out the peers section below
#
# Peers (issue 39), in the same run, on gpt2-large.pt and its safetensors twin gpt2-large.safetensors
# (written once from the .pt with safetensors' save_file, lm_head.weight left out as transformers does):
# `ckpt summary`, `ckpt load --device cpu` and `ckpt load --device meta` beside torch 2.15's
# torch.load(mmap=True, weights_only=True, map_location='cpu'|'meta') and safetensors' load_file / safe_open,
# with the ratios ckpt / peer of this run. The Python with torch 2.15 and safetensors is the truth
# environment's (scripts/truth-env.sh --print) or `bench/run.sh --python PATH`; without one the peers
# section says so and is left out. Its torch runs with CUDA_VISIBLE_DEVICES="" (CPU only).
#   PEER_RUNS=3             timed runs per peers row (the ratios are of the medians)
#   PEER_READ_RUNS=1        timed runs of the two "+ isfinite" rows (each reads all 3.1 GB: ~20 s here)
set -u

PEER_PY=
while [ $# -gt 0 ]; do
  case $1 in
    --python) PEER_PY=${2:-}; shift 2 || { echo "bench: --python needs a path" >&2; exit 2; } ;;
    --python=*) PEER_PY=${1#--python=}; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;;
    *) echo "bench: unknown argument $1 (see bench/run.sh --help)" >&2; exit 2 ;;
  esac
done

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
PEERS=${PEERS:-1}
PEER_RUNS=${PEER_RUNS:-3}
PEER_READ_RUNS=${PEER_READ_RUNS:-1}
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
PEER_TSV=$(mktemp "${TMPDIR:-/tmp}/ckpt-bench-peers.XXXXXX.tsv") || exit 1
trap 'rm -f "$TSV" "$PEER_TSV"' EXIT

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

# ---- Peers: torch 2.15 and safetensors from the truth environment, in this same run ----
[ "$PEERS" = 1 ] || exit 0
[ "$ONLY" = 100k ] && exit 0
echo
if [ -z "$PEER_PY" ]; then
  PEER_PY=$(scripts/truth-env.sh --print 2>/dev/null) || PEER_PY=
fi
if [ -z "$PEER_PY" ] || ! CUDA_VISIBLE_DEVICES= "$PEER_PY" -c 'import torch, safetensors' 2>/dev/null; then
  echo "bench: NOTE: no truth environment${PEER_PY:+ ($PEER_PY cannot import torch and safetensors)}: the peers" \
       "section (torch 2.15, safetensors) is left out. Make it with scripts/truth-env.sh, or pass --python PATH." >&2
  exit 0
fi
export CUDA_VISIBLE_DEVICES=  # torch from PyPI is a CUDA build: keep every peers row on the CPU
TWIN=$BENCH_DIR/gpt2-large.safetensors
if [ ! -s "$TWIN" ]; then
  echo "bench: writing $TWIN (about 3.1 GB) with safetensors' save_file..." >&2
  "$PEER_PY" - "$GPT2" "$TWIN" <<'PY' >&2 || exit 1
import os, sys, torch
from safetensors.torch import save_file
sd = torch.load(sys.argv[1], mmap=True, weights_only=True, map_location="cpu")
# lm_head.weight is transformer.wte.weight (one storage): transformers' save_pretrained leaves it out.
save_file({k: v for k, v in sd.items() if k != "lm_head.weight"}, sys.argv[2] + ".tmp", metadata={"format": "pt"})
os.replace(sys.argv[2] + ".tmp", sys.argv[2])
PY
fi
# What each peer row runs. "+ isfinite" reads every byte and counts NaN / Inf, as ckpt load --device cpu does;
# torch.load(mmap=True) and load_file alone map the file and leave its pages unread until a tensor is used.
TL='import sys, torch; torch.load(sys.argv[1], mmap=True, weights_only=True, map_location=sys.argv[2])'
TL_CHECK='import sys, torch
sd = torch.load(sys.argv[1], mmap=True, weights_only=True, map_location="cpu")
print(sum(t.numel() - int(torch.isfinite(t).sum()) for t in sd.values() if t.is_floating_point()))'
ST='import sys; from safetensors.torch import load_file; load_file(sys.argv[1])'
ST_CHECK='import sys, torch; from safetensors.torch import load_file
sd = load_file(sys.argv[1])
print(sum(t.numel() - int(torch.isfinite(t).sum()) for t in sd.values() if t.is_floating_point()))'
ST_HEADER='import sys; from safetensors import safe_open
with safe_open(sys.argv[1], framework="pt") as f:
    shapes = {k: f.get_slice(k).get_shape() for k in f.keys()}'
P=("${MEASURE[@]}" run "$PEER_TSV")
"${P[@]}" "(none)" "import torch (torch 2.15)" "$PEER_RUNS" 0 -- "$PEER_PY" -c 'import torch'
for f in "gpt2-large.pt|$GPT2" "gpt2-large.safetensors|$TWIN"; do
  label=${f%%|*} file=${f#*|}
  echo "bench: peers: $label" >&2
  if [ "$HAVE_CKPT" = 1 ]; then
    "${P[@]}" "$label" "ckpt summary --json" "$PEER_RUNS" 0 -- "$CKPT" summary --json "$file"
    "${P[@]}" "$label" "ckpt load --device cpu --json" "$PEER_RUNS" 0 -- "$CKPT" load --device cpu --json "$file"
    "${P[@]}" "$label" "ckpt load --device meta --json" "$PEER_RUNS" 0 -- "$CKPT" load --device meta --json "$file"
  fi
  if [ "$label" = gpt2-large.pt ]; then
    "${P[@]}" "$label" "torch.load(mmap, weights_only, cpu)" "$PEER_RUNS" 0 -- "$PEER_PY" -c "$TL" "$file" cpu
    "${P[@]}" "$label" "torch.load(mmap, weights_only, cpu) + isfinite" "$PEER_READ_RUNS" 0 -- "$PEER_PY" -c "$TL_CHECK" "$file"
    "${P[@]}" "$label" "torch.load(mmap, weights_only, meta)" "$PEER_RUNS" 0 -- "$PEER_PY" -c "$TL" "$file" meta
  else
    "${P[@]}" "$label" "safetensors load_file" "$PEER_RUNS" 0 -- "$PEER_PY" -c "$ST" "$file"
    "${P[@]}" "$label" "safetensors load_file + isfinite" "$PEER_READ_RUNS" 0 -- "$PEER_PY" -c "$ST_CHECK" "$file"
    "${P[@]}" "$label" "safetensors safe_open: names and shapes" "$PEER_RUNS" 0 -- "$PEER_PY" -c "$ST_HEADER" "$file"
  fi
done
echo
echo "peers: $PEER_PY (torch $("$PEER_PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)," \
     "safetensors $("$PEER_PY" -c 'import safetensors; print(safetensors.__version__)' 2>/dev/null));" \
     "$PEER_RUNS runs a row ($PEER_READ_RUNS for + isfinite) after one untimed run under /usr/bin/time (peak RSS)," \
     "CUDA_VISIBLE_DEVICES=''"
echo
A=gpt2-large.pt B=gpt2-large.safetensors
"${MEASURE[@]}" pairs "$PEER_TSV" \
  "$A" "ckpt summary --json" "torch.load(mmap, weights_only, meta)" \
  "$A" "ckpt load --device cpu --json" "torch.load(mmap, weights_only, cpu)" \
  "$A" "ckpt load --device cpu --json" "torch.load(mmap, weights_only, cpu) + isfinite" \
  "$A" "ckpt load --device meta --json" "torch.load(mmap, weights_only, meta)" \
  "$B" "ckpt summary --json" "safetensors safe_open: names and shapes" \
  "$B" "ckpt load --device cpu --json" "safetensors load_file" \
  "$B" "ckpt load --device cpu --json" "safetensors load_file + isfinite" \
  "$B" "ckpt load --device meta --json" "safetensors safe_open: names and shapes"
