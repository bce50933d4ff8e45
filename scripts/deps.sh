#!/usr/bin/env bash
# Installs ckpt's build and test dependencies from Debian 12 packages, only when missing; with
# arguments, only those packages (scripts/example.sh names what the LibTorch-free build needs).
set -euo pipefail
pkgs=(g++ cmake make pkg-config zlib1g-dev libcurl4-openssl-dev libcli11-dev libfmt-dev nlohmann-json3-dev doctest-dev
      python3 python3-torch python3-jsonschema libtorch-dev
      dpkg-dev file git pre-commit python3-yaml zsh fish man-db groff-base jq
      nginx-light openssl curl ca-certificates)
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
# The S3-compatible server of the remote-input tests (s3rver, pinned in tests/remote/s3/package-lock.json).
# Node.js and npm by command, not by package: a machine may have them from elsewhere (NodeSource's nodejs
# provides npm and conflicts with Debian's).
s3dir="$(dirname "$0")/../tests/remote/s3"
if ((! $#)) && [ ! -d "$s3dir/node_modules/s3rver" ]; then
  if ! command -v npm >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  echo "ckpt: installing the test S3 server (npm ci in tests/remote/s3)" >&2
  npm ci --prefix "$s3dir" --no-audit --no-fund --loglevel=error >/dev/null
fi
