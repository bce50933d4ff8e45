#!/usr/bin/env bash
# A virtual environment of Debian's python3 holding exactly a requirements file, made or remade only when the
# file changed (a stamp in DIR holds its sha256); prints DIR/bin/python. Used by scripts/deps.sh (the tests' S3
# server) and scripts/truth-env.sh (the truth environment); never installs into Debian's system Python.
#   scripts/venv.sh DIR REQUIREMENTS [PIP-ARGS...]   make or update DIR, print its python
#   scripts/venv.sh --print DIR REQUIREMENTS         print its python if DIR is up to date (exit 1 if not)
set -euo pipefail
only_print=0
if [ "${1:-}" = "--print" ]; then only_print=1; shift; fi
venv=$1 req=$2
shift 2
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ "$(cat "$venv/.ckpt-stamp" 2>/dev/null)" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "$venv/bin/python"
  exit 0
fi
((only_print)) && exit 1
echo "ckpt: making the virtual environment $venv from $req" >&2
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install -q --no-input "$@" -r "$req" >&2
echo "$want" > "$venv/.ckpt-stamp"
echo "$venv/bin/python"
