#!/usr/bin/env bash
# One command from a fresh Debian 12 checkout: install dependencies, build, summarize a bundled checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCKPT_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target ckpt >/dev/null
build/ckpt summary testdata/t113/lightning.ckpt --depth 2 "$@"
