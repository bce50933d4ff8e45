#!/usr/bin/env bash
# ckpt load benchmark (not part of CI): `ckpt load --device cpu|meta` against torch.load on the
# GPT-2-large-shaped file of bench/run.sh (3.1 GB). Prints a table and the goals of issue C:
#   --device cpu (every byte read and checked) at least 4x faster than torch.load(map_location='cpu'),
#   peak RSS <= file size + 100 MiB; --device meta at most 1/3 of torch.load(map_location='meta').
# Wall times are whole processes, spawn to reap (what a user or CI waits for), as in bench/run.sh;
# the torch.load call alone (import excluded) is printed too, as the stricter reference.
#
# Environment: CKPT=build/ckpt  BENCH_DIR=/tmp/ckpt-bench  RUNS=3  TORCH_PY=/usr/bin/python3
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CKPT=${CKPT:-build/ckpt}
BENCH_DIR=${BENCH_DIR:-/tmp/ckpt-bench}
RUNS=${RUNS:-3}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
GPT2=$BENCH_DIR/gpt2-large.pt
mkdir -p "$BENCH_DIR" || exit 1
if [ ! -s "$GPT2" ]; then
  echo "bench: writing $GPT2 (about 3.1 GB)..." >&2
  "$TORCH_PY" bench/make_gpt2_large.py "$GPT2" >&2 || exit 1
fi
TSV=$(mktemp "${TMPDIR:-/tmp}/ckpt-load-bench.XXXXXX.tsv") || exit 1
trap 'rm -f "$TSV"' EXIT
M=(/usr/bin/python3 bench/measure.py run "$TSV" gpt2-large)
CKPT_TORCH_BIN=$(dirname "$CKPT")/ckpt-torch

"${M[@]}" "LibTorch start-up (ckpt-torch --version)" "$RUNS" 0 -- "$CKPT_TORCH_BIN" --version
"${M[@]}" "import torch (alone)" "$RUNS" 0 -- "$TORCH_PY" -c 'import torch'
"${M[@]}" "ckpt load --device cpu --json" "$RUNS" 0 -- "$CKPT" load --device cpu --json "$GPT2"
"${M[@]}" "ckpt load --device meta --json" "$RUNS" 0 -- "$CKPT" load --device meta --json "$GPT2"
"${M[@]}" "torch.load(map_location='cpu')" "$RUNS" 0 -- "$TORCH_PY" -c 'import sys, torch; torch.load(sys.argv[1], map_location="cpu")' "$GPT2"
"${M[@]}" "torch.load(map_location='meta')" "$RUNS" 0 -- "$TORCH_PY" -c 'import sys, torch; torch.load(sys.argv[1], map_location="meta")' "$GPT2"

# The calls alone, inside one Python process (best of RUNS), and ckpt's own breakdown.
CALLS=$("$TORCH_PY" - "$GPT2" "$RUNS" <<'PY'
import sys, time, torch
path, runs = sys.argv[1], int(sys.argv[2])
for loc in ("cpu", "meta"):
    best = min((lambda t0: (torch.load(path, map_location=loc), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(runs))
    print(f"{loc}\t{best:.4f}")
PY
)
BREAKDOWN=$("$CKPT" load --device cpu --json "$GPT2" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); t=j["time"]; print("check (in ckpt, overlapping LibTorch start-up) %.3f s, start-up to the command %.3f s, structure %.3f s, load %.3f s (%.2f GB/s), ckpt-torch peak RSS %.0f MiB" % (t["check_seconds"], t["startup_seconds"], t["read_seconds"], t["load_seconds"], t["gb_per_s"], j["memory"]["peak_rss_bytes"]/2**20))')

/usr/bin/python3 - "$TSV" "$(stat -c %s "$GPT2")" "$CALLS" "$BREAKDOWN" <<'PY'
import sys
rows = {r[1]: r for r in (l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip())}
size = int(sys.argv[2])
calls = dict(l.split("\t") for l in sys.argv[3].splitlines())
print("%-44s %8s %8s %10s" % ("command (whole process)", "best s", "median s", "peak MiB"))
for name, r in rows.items():
    if r[2] != "ok":
        print("%-44s %s" % (name, r[6])); continue
    print("%-44s %8.3f %8.3f %10.1f" % (name, float(r[3]), float(r[4]), int(r[5]) / 1024))
print("torch.load call alone: cpu %s s, meta %s s (import torch excluded)" % (calls.get("cpu"), calls.get("meta")))
print("ckpt load --device cpu breakdown: " + sys.argv[4])
def best(n): r = rows.get(n); return float(r[3]) if r and r[2] == "ok" else None
def goal(label, a, b, limit):
    if a is None or b is None: print("  %s: not measured" % label); return
    print("  %s: %.3f (goal <= %.3f) %s" % (label, a / b, limit, "PASS" if a / b <= limit else "FAIL"))
print("\nGoals (issue C):")
cpu, meta = best("ckpt load --device cpu --json"), best("ckpt load --device meta --json")
goal("cpu: ckpt / torch.load(cpu) process", cpu, best("torch.load(map_location='cpu')"), 0.25)
goal("cpu: ckpt / torch.load(cpu) call alone", cpu, float(calls["cpu"]) if "cpu" in calls else None, 0.25)
r = rows.get("ckpt load --device cpu --json")
if r and r[2] == "ok":
    mib, lim = int(r[5]) / 1024, size / 2**20 + 100
    print("  cpu: peak RSS %.0f MiB (goal <= file + 100 MiB = %.0f MiB) %s" % (mib, lim, "PASS" if mib <= lim else "FAIL"))
goal("meta: ckpt / torch.load(meta) process", meta, best("torch.load(map_location='meta')"), 1 / 3)
goal("meta: ckpt / torch.load(meta) call alone", meta, float(calls["meta"]) if "meta" in calls else None, 1 / 3)
PY
