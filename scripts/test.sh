#!/usr/bin/env bash
# One command from a fresh Debian 12 checkout: install dependencies, build, run the whole test suite.
#   scripts/test.sh               release build in build/, every test (ctest arguments may follow)
#   scripts/test.sh --sanitize    the same suite built with AddressSanitizer + UBSan in build-asan/
#                                 (the >4 GiB zip64 test and the tests labelled slow, such as the
#                                 README-order test, are left out there: they are the same code paths;
#                                 ckpt-torch is not built there: LibTorch is not instrumented)
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
scripts/deps.sh
echo "ckpt: deps.sh: $((SECONDS - t0)) s" >&2
# ccache (installed by deps.sh) compiles through a cache; paths under the checkout are hashed relative to it,
# so the clone the readme_order test builds reuses this build's objects instead of compiling them again.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ "${1:-}" = "--sanitize" ]; then
  shift
  cmake -S . -B build-asan "${launcher[@]}" -DCKPT_BUILD_TESTS=ON -DCKPT_SANITIZE=ON -DCKPT_WITH_TORCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  t0=$SECONDS
  cmake --build build-asan -j"$(nproc)"
  echo "ckpt: build (sanitizers): $((SECONDS - t0)) s" >&2
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -E zip64_large_file -LE slow "$@"
else
  # LibTorch is installed (deps.sh): ask for ckpt-torch whatever build/ holds, so a build/ that
  # scripts/example.sh configured without LibTorch still gets the load and forward tests.
  cmake -S . -B build "${launcher[@]}" -DCKPT_BUILD_TESTS=ON -DCKPT_WITH_TORCH=ON >/dev/null
  t0=$SECONDS
  cmake --build build -j"$(nproc)"
  echo "ckpt: build: $((SECONDS - t0)) s" >&2
  ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
fi
