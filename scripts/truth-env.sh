#!/usr/bin/env bash
# The pinned truth environment: today's PyTorch stack from PyPI (torch, transformers, accelerate, lightning,
# safetensors, huggingface_hub) and the public pickle scanners bench/security.py compares ckpt with
# (picklescan, modelscan, fickling, modelaudit), in the virtual environment build-venv/truth/ (ignored),
# made with Debian's python3. Used by the fixture generators (testdata/gen_*.py under
# build-venv/truth/bin/python), bench/ and the ctest cuda_build; never by the build, and never by the
# README's commands. Every package is pinned in scripts/truth-requirements.txt (the top-level pins in
# scripts/truth-requirements.in, resolved by pip and frozen). About 6 GB (torch is a CUDA build from PyPI).
#   scripts/truth-env.sh            make or update build-venv/truth, print its python
#   scripts/truth-env.sh --print    print its python if it is complete (exit 1 if not), install nothing
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CKPT_TRUTH_ENV:-$root/build-venv/truth}"
req="$root/scripts/truth-requirements.txt"
if [ "${1:-}" = "--print" ]; then
  exec "$root/scripts/venv.sh" --print "$venv" "$req"
fi
"$root/scripts/deps.sh" python3 python3-venv
exec "$root/scripts/venv.sh" "$venv" "$req"
