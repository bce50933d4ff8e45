#!/usr/bin/env bash
# Builds this checkout against another Debian's LibTorch and runs the whole suite there, so a new LibTorch
# (Debian sid today) is one command away. Runs as root: it makes a chroot when DIR has none, installs the
# build dependencies into it, bind-mounts this checkout at DIR/ckpt-src and builds in
# build-libtorch-<version>/ (git-ignored; kept, so a rerun builds only what changed).
#   scripts/check-libtorch.sh DIR [SUITE] [-- CTEST-ARGS...]
#     DIR     a Debian chroot; created with debootstrap (SUITE, default sid) when it has no /usr/bin/apt-get
#     SUITE   sid (LibTorch 2.14 in 2026-11), trixie (2.6), bookworm (1.13: what CI and scripts/test.sh use)
#   JOBS=N    parallel compile jobs (default: nproc); MIRROR=URL (default http://deb.debian.org/debian)
#   CTEST-ARGS default to `-E zip64_large_file` (the >4 GiB test; same code path, minutes and 4.5 GiB of disk)
set -euo pipefail
usage() { sed -n '5,10p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
dir=$(realpath -m "$1")
shift
suite=sid
if [ $# -ge 1 ] && [ "$1" != "--" ]; then suite=$1; shift; fi
[ "${1:-}" = "--" ] && shift
ctest_args=("$@")
((${#ctest_args[@]})) || ctest_args=(-E zip64_large_file)
[ "$(id -u)" -eq 0 ] || { echo "check-libtorch: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(g++ cmake ninja-build pkg-config zlib1g-dev libdeflate-dev libcli11-dev libfmt-dev nlohmann-json3-dev libsimdjson-dev doctest-dev
      python3 python3-numpy python3-torch libtorch-dev)

if [ ! -x "$dir/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || { echo "check-libtorch: apt-get install debootstrap first" >&2; exit 2; }
  echo "check-libtorch: debootstrap $suite into $dir (several minutes, ~3 GB)" >&2
  debootstrap --variant=minbase --include="$(IFS=,; echo "${pkgs[*]}")" "$suite" "$dir" \
    "${MIRROR:-http://deb.debian.org/debian}"
fi

# Mount what this run mounts, and only that; undo it on every exit.
mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done; }
trap cleanup EXIT
if ! mountpoint -q "$dir/proc"; then mount -t proc proc "$dir/proc"; mounted+=("$dir/proc"); fi
mkdir -p "$dir/ckpt-src"
if ! mountpoint -q "$dir/ckpt-src"; then mount --bind "$src" "$dir/ckpt-src"; mounted+=("$dir/ckpt-src"); fi

have=$(chroot "$dir" dpkg-query -W -f='${Status}\n' "${pkgs[@]}" 2>/dev/null | grep -c "install ok installed" || true)
if [ "$have" -ne ${#pkgs[@]} ]; then
  echo "check-libtorch: installing the build dependencies in $dir" >&2
  # A stale snapshot's Release file is past its Valid-Until; it still names the packages it holds.
  chroot "$dir" apt-get -qq -o Acquire::Check-Valid-Until=false update
  chroot "$dir" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

ver=$(chroot "$dir" dpkg-query -W -f='${Version}' libtorch-dev | sed 's/[+~-].*//')
build=build-libtorch-$ver
echo "check-libtorch: LibTorch $ver ($suite), $(chroot "$dir" g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /'), in $build/" >&2
chroot "$dir" env -C /ckpt-src cmake -S . -B "$build" -G Ninja -DCKPT_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
chroot "$dir" env -C /ckpt-src ninja -C "$build" -j"${JOBS:-$(nproc)}"
chroot "$dir" env -C /ckpt-src ctest --test-dir "$build" --output-on-failure -j"${JOBS:-$(nproc)}" "${ctest_args[@]}"
