#!/usr/bin/env bash
# Proves a refactor changed no output: builds REF (default HEAD) in a worktree under build-ref/ and the
# working tree in build/, runs tests/cli/outputs.py with both over the whole fixture set (summary text,
# markdown and JSON at several depths, check, diff, load, summary --model and the example-input forward;
# timings masked) and compares the two directories byte for byte.
#   scripts/same-output.sh [REF] [--no-torch]
set -euo pipefail
cd "$(dirname "$0")/.."
ref=HEAD
torch=()
for a in "$@"; do
  case "$a" in
    --no-torch) torch=(--no-torch) ;;
    *) ref="$a" ;;
  esac
done
scripts/deps.sh
jobs=$(nproc)
targets=(--target ckpt)
[ ${#torch[@]} -eq 0 ] && targets+=(--target ckpt-torch)
rm -rf build-ref/src
git worktree prune
git worktree add --detach build-ref/src "$ref" >/dev/null
cmake -S build-ref/src -B build-ref/build -DCKPT_BUILD_TESTS=OFF >/dev/null
cmake --build build-ref/build -j"$jobs" "${targets[@]}" >/dev/null
cmake -S . -B build -DCKPT_BUILD_TESTS=ON >/dev/null
cmake --build build -j"$jobs" "${targets[@]}" >/dev/null
rm -rf build-ref/out-ref build-ref/out-new
python3 tests/cli/outputs.py --ckpt "$PWD/build-ref/build/ckpt" --root . --out build-ref/out-ref "${torch[@]}"
python3 tests/cli/outputs.py --ckpt "$PWD/build/ckpt" --root . --out build-ref/out-new "${torch[@]}"
git worktree remove --force build-ref/src
if diff -r build-ref/out-ref build-ref/out-new >build-ref/outputs.diff; then
  echo "same output: $(ls build-ref/out-new | wc -l) commands, $ref and the working tree agree byte for byte"
else
  echo "outputs differ from $ref: see build-ref/outputs.diff ($(grep -c '^diff' build-ref/outputs.diff) commands)" >&2
  exit 1
fi
