#!/usr/bin/env bash
# Installs ckpt's build and test dependencies from Debian 12 packages, only when missing; with
# arguments, only those packages (scripts/example.sh names what the LibTorch-free build needs).
set -euo pipefail
pkgs=(g++ cmake make ccache pkg-config zlib1g-dev libdeflate-dev libcurl4-openssl-dev libcli11-dev libfmt-dev nlohmann-json3-dev libsimdjson-dev doctest-dev
      python3 python3-torch python3-jsonschema libtorch-dev
      dpkg-dev file git pre-commit python3-yaml zsh fish man-db groff-base jq
      nginx-light openssl curl ca-certificates python3-venv)
if (($#)); then pkgs=("$@"); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ckpt: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The S3-compatible server of the remote-input tests: moto's server mode from PyPI, pinned with hashes in
# tests/remote/requirements-s3.txt, in a virtual environment of Debian's python3 inside the ignored build
# area (build-venv/s3/; never Debian's externally managed system Python). A stamp holding the requirements'
# hash makes a changed pin reinstall it.
root="$(cd "$(dirname "$0")/.." && pwd)"
if ((! $#)); then
  "$root/scripts/venv.sh" "$root/build-venv/s3" "$root/tests/remote/requirements-s3.txt" --require-hashes >/dev/null
fi
