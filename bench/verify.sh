#!/usr/bin/env bash
# `ckpt check --verify` / `--values` cost (not part of CI): on the 3.1 GB GPT-2-large torch.save file
# (bench/make_gpt2_large.py), in the page cache, best of RUNS wall times for: ckpt check (pickles
# only), ckpt check --verify (every member's CRC-32), ckpt check --values (every tensor's NaN / Inf),
# the peer `python3 -m zipfile -t` (the same CRC-32 check, one thread) and `cat FILE >/dev/null` (reading
# alone). Prints the ratios --verify / check (why --verify is opt-in) and --verify / zipfile -t.
#
# Environment: CKPT=build/ckpt  GPT2=/tmp/ckpt-bench/gpt2-large.pt  RUNS=3  TORCH_PY=/usr/bin/python3
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CKPT=${CKPT:-build/ckpt}
GPT2=${GPT2:-/tmp/ckpt-bench/gpt2-large.pt}
RUNS=${RUNS:-3}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
if [ ! -s "$GPT2" ]; then
  mkdir -p "$(dirname "$GPT2")"
  "$TORCH_PY" bench/make_gpt2_large.py "$GPT2" >&2 || exit 1
fi
cat "$GPT2" >/dev/null  # into the page cache
best() {  # best wall seconds of RUNS runs of "$@" (output discarded; any exit status)
  local b="" t0 t1 d
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    d=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$b" ] || [ "$(echo "$d < $b" | bc -l)" = 1 ]; then b=$d; fi
  done
  printf '%.3f' "$b"
}
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/')"
echo "file: $GPT2 ($(stat -c %s "$GPT2") bytes), best of $RUNS, page cache warm"
check=$(best "$CKPT" check "$GPT2")
verify=$(best "$CKPT" check --verify "$GPT2")
values=$(best "$CKPT" check --values "$GPT2")
zipt=$(best python3 -m zipfile -t "$GPT2")
catt=$(best cat "$GPT2")
printf '%-34s %8s s\n' "ckpt check" "$check" "ckpt check --verify" "$verify" "ckpt check --values" "$values" \
  "python3 -m zipfile -t (peer)" "$zipt" "cat FILE >/dev/null" "$catt"
printf 'ratio --verify / check: %.1fx (why --verify is opt-in)\n' "$(echo "$verify / $check" | bc -l)"
printf 'ratio --verify / zipfile -t: %.2f (lower is faster)\n' "$(echo "$verify / $zipt" | bc -l)"
