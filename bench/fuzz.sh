#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/: clang, -DCKPT_FUZZ=ON, ASan + UBSan) and runs each for
# SECONDS, starting from its committed corpus fuzz/corpus/<target> (and, for the file parsers, the
# fixtures of testdata/). New inputs go to build-fuzz/corpus/<target>/, never into the checkout; any crash,
# leak, timeout or out-of-memory input to build-fuzz/artifacts/. Prints per target the executions, the
# coverage of libFuzzer's last status line (cov: edges, ft: features), the corpus size and the crashes,
# and exits 1 naming each crash file when there is one.
#   bench/fuzz.sh SECONDS [TARGET...]      (default: every target of fuzz/CMakeLists.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:?usage: bench/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
if ((${#targets[@]} == 0)); then
  read -r -a targets <<<"$(sed -n 's/^set(CKPT_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt)"
fi
scripts/deps.sh clang libclang-rt-14-dev
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz "${launcher[@]}" -DCKPT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
t0=$SECONDS
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
echo "fuzz: build: $((SECONDS - t0)) s" >&2

# Seeds beyond the committed corpus: the fixtures each parser reads.
seeds() {
  case $1 in
    zip | reader | security) echo testdata/t113 testdata/t215 testdata/ts113 testdata/bad testdata/security/gen testdata/formats ;;
    pickle) echo testdata/pickles testdata/bad testdata/security/recreated ;;
    pt2) echo testdata/pt2 ;;
  esac
}

export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p build-fuzz/artifacts build-fuzz/logs
rows=() crashes=()
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  log=build-fuzz/logs/$t.log
  mapfile -t before < <(find build-fuzz/artifacts -name "$t-*" -type f)
  # shellcheck disable=SC2046
  build-fuzz/fuzz/fuzz_"$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/artifacts/"$t"- "$work" $(ls -d fuzz/corpus/"$t" 2>/dev/null) $(seeds "$t") >"$log" 2>&1 || true
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  mapfile -t found < <(comm -13 <(printf '%s\n' "${before[@]}" | sort) <(find build-fuzz/artifacts -name "$t-*" -type f | sort))
  crashes+=("${found[@]}")
  rows+=("$(printf '%-10s %12s %8s %8s %12s %s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${#found[@]}")")
  echo "fuzz: $t: ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, ${#found[@]} crash(es) ($log)" >&2
done
printf '%-10s %12s %8s %8s %12s %s\n' target executions cov ft corpus crashes
printf '%s\n' "${rows[@]}"
if ((${#crashes[@]})); then
  printf 'fuzz: crash: %s\n' "${crashes[@]}" >&2
  exit 1
fi
