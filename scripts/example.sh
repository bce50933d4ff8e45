#!/usr/bin/env bash
# One command from a fresh Debian 12 checkout: install what the LibTorch-free `ckpt` build needs (only
# the missing packages), build the ckpt target, summarize a bundled checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh g++ cmake make zlib1g-dev libdeflate-dev libcurl4-openssl-dev libcli11-dev libfmt-dev nlohmann-json3-dev libsimdjson-dev
flags=(-DCKPT_BUILD_TESTS=OFF)
# ccache where it is installed (scripts/test.sh's dependencies bring it): the same objects as test.sh's build.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# A fresh build directory is configured without LibTorch; an existing one keeps its choice.
[ -f build/CMakeCache.txt ] || flags+=(-DCKPT_WITH_TORCH=OFF)
cmake -S . -B build "${flags[@]}" >/dev/null
cmake --build build -j"$(nproc)" --target ckpt >/dev/null
build/ckpt summary testdata/t113/lightning.ckpt --depth 2 "$@"
