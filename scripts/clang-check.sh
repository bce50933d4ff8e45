#!/usr/bin/env bash
# A syntax-only pass of ckpt's sources with clang (issue 44): the fuzz targets build with clang, whose C++
# differs from g++'s in places (clang before 16 refuses a lambda capturing a structured binding), and
# nothing else compiles with it. src/torch is left out (LibTorch's headers); everything else, the fuzz
# targets included, is checked, two files at a time. Exit 1 and the errors when a file does not compile.
#   scripts/clang-check.sh [CLANG++]      (default: clang++; deps.sh installs Debian's clang)
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-clang++}
command -v "$cxx" >/dev/null || { echo "clang-check: $cxx not found (apt-get install clang)" >&2; exit 1; }
t0=$SECONDS
ls src/core/*.cc src/remote/*.cc src/cli/*.cc fuzz/*.cc |
  xargs -P "$(nproc)" -I{} sh -c '"$0" -std=c++17 -fsyntax-only -Isrc -DCKPT_REMOTE=1 -DCKPT_VERSION="\"0\"" -DFMT_SHARED "$1" || echo "clang-check: FAILED $1" >&2' "$cxx" {} 2>&1 |
  tee /dev/stderr | grep -q "clang-check: FAILED" && { echo "clang-check: failed" >&2; exit 1; }
echo "clang-check: $(ls src/core/*.cc src/remote/*.cc src/cli/*.cc fuzz/*.cc | wc -l) files compile with $cxx ($((SECONDS - t0)) s)" >&2
