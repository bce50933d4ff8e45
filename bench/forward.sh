#!/usr/bin/env bash
# summary --example-input benchmark (not part of CI): the recorded forward of `ckpt summary
# --example-input` (per-module sizes through the bracketing operators, FLOPs through a RecordFunction
# observer) against a plain forward of the same TorchScript archive in Python (torch.jit.load, eval,
# no_grad), each the first forward of a fresh process, as the summary's is. Goal (issue D): the
# recorded forward within 10% of the plain one. ckpt runs its forward without the graph optimizer
# (one interpreted run), so the baseline is printed both that way (torch.jit.optimized_execution(False),
# the like-for-like ratio) and with Python's default (profiling) executor.
#
# Models (bench/make_forward_models.py, Debian's torch 1.13): a ResNet-18-shaped conv net on
# 1x3x224x224 and a GPT-shaped decoder (6 blocks, d_model 256) on 1x256 token ids.
#
# Environment: CKPT=build/ckpt  BENCH_DIR=/tmp/ckpt-bench  RUNS=7  TORCH_PY=/usr/bin/python3
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CKPT=${CKPT:-build/ckpt}
BENCH_DIR=${BENCH_DIR:-/tmp/ckpt-bench}
RUNS=${RUNS:-7}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
DIR=$BENCH_DIR/fwd
if [ ! -s "$DIR/resnet.pt" ] || [ ! -s "$DIR/gpt.pt" ]; then
  echo "bench: writing $DIR/{resnet,gpt}.pt..." >&2
  "$TORCH_PY" bench/make_forward_models.py "$DIR" >&2 || exit 1
fi
[ -x "$CKPT" ] || { echo "bench: no $CKPT (build it first)" >&2; exit 1; }

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

py_forward() {  # MODEL SPEC OPT -> seconds of the first forward in a fresh process
  "$TORCH_PY" - "$DIR/$1.pt" "$2" "$3" <<'PY'
import sys, time, torch
path, spec, opt = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
dims, _, rest = spec.partition(":")
shape = [int(d) for d in dims.split("x")]
if rest:
    lo, hi = rest.split(":")[1].split("..")
    x = torch.randint(int(lo), int(hi), shape)
else:
    x = torch.randn(shape)
m = torch.jit.load(path).eval()
with torch.no_grad(), torch.jit.optimized_execution(opt):
    t0 = time.perf_counter()
    m(x)
    print(time.perf_counter() - t0)
PY
}

printf '%-8s %-22s %14s %14s %14s %10s %10s\n' model input "ckpt (s)" "py noopt (s)" "py default (s)" "ratio" "goal<=1.10"
status=0
for row in "resnet 1x3x224x224" "gpt 1x256:int64:0..8192"; do
  set -- $row
  model=$1 spec=$2
  c=() p=() d=()
  for _ in $(seq "$RUNS"); do
    c+=("$("$CKPT" summary "$DIR/$model.pt" --example-input "$spec" --json | "$TORCH_PY" -c 'import json,sys; print(json.load(sys.stdin)["forward"]["seconds"])')")
    p+=("$(py_forward "$model" "$spec" 0)")
    d+=("$(py_forward "$model" "$spec" 1)")
  done
  cm=$(printf '%s\n' "${c[@]}" | median)
  pm=$(printf '%s\n' "${p[@]}" | median)
  dm=$(printf '%s\n' "${d[@]}" | median)
  ratio=$(awk -v a="$cm" -v b="$pm" 'BEGIN {printf "%.3f", a / b}')
  verdict=$(awk -v r="$ratio" 'BEGIN {print (r <= 1.10) ? "PASS" : "FAIL"}')
  [ "$verdict" = PASS ] || status=1
  printf '%-8s %-22s %14.4f %14.4f %14.4f %10s %10s\n' "$model" "$spec" "$cm" "$pm" "$dm" "$ratio" "$verdict"
done
echo "(medians of $RUNS fresh processes; ratio = ckpt / py noopt, the same executor mode)"
exit $status
