#!/usr/bin/env bash
# The commands that read every byte (not part of CI): time, CPU and peak memory of `ckpt check`
# (pickles only), `check --verify` (every member's CRC-32), `check --values` (every tensor's NaN / Inf)
# and `diff --values FILE FILE` (every element of both sides) on the 3.1 GB GPT-2-large torch.save file
# (bench/make_gpt2_large.py), against the peer `python3 -m zipfile -t` (the same CRC-32s, one thread)
# and `cat FILE >/dev/null` (reading alone). Per command: the best wall time and the least CPU time (user
# + system, all threads) of RUNS runs, and the largest peak RSS (`/usr/bin/time`'s maximum resident set).
# Prints the ratio of --verify's CPU time to zipfile -t's (goal <= 0.25) and each peak RSS against its
# goal (check <= 20 MiB; --verify, --values, diff --values <= 64 MiB: they read through bounded windows,
# not the whole tensor). OLD=path/to/ckpt measures an older build as well (the "before" column).
#
# The page cache is set the same way for every run: the file is dropped from it (posix_fadvise
# DONTNEED) and read back once with cat, which leaves it in large folios. A cache refilled piecemeal
# (after memory pressure) may hold it in 4 KiB pages, and every reader through a mapping then costs
# more system time: a CRC-32 over the mapping took 0.39 s of CPU one way and 0.96 s the other.
#
# Environment: CKPT=build/ckpt  OLD=  GPT2=/tmp/ckpt-bench/gpt2-large.pt  RUNS=3  TORCH_PY=/usr/bin/python3
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CKPT=${CKPT:-build/ckpt}
OLD=${OLD:-}
GPT2=${GPT2:-/tmp/ckpt-bench/gpt2-large.pt}
RUNS=${RUNS:-3}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
if [ ! -s "$GPT2" ]; then
  mkdir -p "$(dirname "$GPT2")"
  "$TORCH_PY" bench/make_gpt2_large.py "$GPT2" >&2 || exit 1
fi
/usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$GPT2"
cat "$GPT2" >/dev/null  # into the page cache
T=$(mktemp) || exit 1
trap 'rm -f "$T"' EXIT
measure() {  # "wall cpu rss_kib" over RUNS runs of "$@" (output discarded; any exit status)
  local out=""
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -o "$T" -f "%e %U %S %M" "$@" >/dev/null 2>&1
    out="$out$(tail -1 "$T")"$'\n'
  done
  printf '%s' "$out" | awk 'NR == 1 || $1 < w { w = $1 } NR == 1 || $2 + $3 < c { c = $2 + $3 } $4 > m { m = $4 }
                            END { printf "%.3f %.3f %d\n", w, c, m }'
}
row() {  # label, "wall cpu rss_kib"
  set -- "$1" $2
  printf '%-36s %8s s %8s s %8.1f MiB\n' "$1" "$2" "$3" "$(echo "$4 / 1024" | bc -l)"
}
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/')"
echo "file: $GPT2 ($(stat -c %s "$GPT2") bytes), page cache warm; wall (best of $RUNS), CPU (least), peak RSS (largest)"
printf '%-36s %10s %10s %12s\n' "command" "wall" "CPU" "peak RSS"
for bin in ${OLD:+"$OLD"} "$CKPT"; do
  tag=""
  [ "$bin" = "$OLD" ] && tag=" (old)"
  check=$(measure "$bin" check "$GPT2")
  verify=$(measure "$bin" check --verify "$GPT2")
  values=$(measure "$bin" check --values "$GPT2")
  diffv=$(measure "$bin" diff --values "$GPT2" "$GPT2")
  row "ckpt check$tag" "$check"
  row "ckpt check --verify$tag" "$verify"
  row "ckpt check --values$tag" "$values"
  row "ckpt diff --values FILE FILE$tag" "$diffv"
done
zipt=$(measure python3 -m zipfile -t "$GPT2")
catt=$(measure cat "$GPT2")
row "python3 -m zipfile -t (peer)" "$zipt"
row "cat FILE >/dev/null" "$catt"
read -r _ vcpu _ <<<"$verify"
read -r _ zcpu _ <<<"$zipt"
printf 'CPU time --verify / zipfile -t: %.2f (goal <= 0.25)\n' "$(echo "$vcpu / $zcpu" | bc -l)"
verdict() {  # label, "wall cpu rss_kib", goal MiB
  local rss
  read -r _ _ rss <<<"$2"
  printf 'peak RSS %-22s %7.1f MiB (goal <= %d MiB: %s)\n' "$1" "$(echo "$rss / 1024" | bc -l)" "$3" \
    "$([ "$rss" -le $(($3 * 1024)) ] && echo PASS || echo FAIL)"
}
verdict "check" "$check" 20
verdict "check --verify" "$verify" 64
verdict "check --values" "$values" 64
verdict "diff --values" "$diffv" 64
