#!/usr/bin/env bash
# Runs `ckpt check` on checkpoint files: the ones named, or those a git range changed. Shared by the
# GitHub Action (action.yml) and the pre-commit hook (.pre-commit-hooks.yaml), which passes the
# staged files as arguments.
#
#   scripts/action-check.sh [--ckpt PATH] [--fail-on LEVEL] [--format text|json|sarif]
#                           [--base REF] [--output FILE] [--] [FILE...]
#
# Without FILEs it checks the checkpoint files (*.pt *.pth *.bin *.ckpt *.safetensors *.pt2 *.ptl)
# added or modified between --base and HEAD, or every tracked one when --base is empty or all zeros
# (a new branch). Exit status: 1 when any file failed --fail-on, otherwise the highest status of any
# file (3: unreadable, 2: usage), 0 when all passed or there was nothing to check.
set -uo pipefail

ckpt="${CKPT:-ckpt}" fail_on="" format="text" base="" output=""
pattern='\.(pt|pth|bin|ckpt|safetensors|pt2|ptl)$'
usage() { echo "usage: $0 [--ckpt PATH] [--fail-on LEVEL] [--format FMT] [--base REF] [--output FILE] [--] [FILE...]" >&2; exit 2; }
need() { [ $# -ge 2 ] || usage; }
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ckpt) need "$@"; ckpt="$2"; shift 2 ;;
    --fail-on) need "$@"; fail_on="$2"; shift 2 ;;
    --format) need "$@"; format="$2"; shift 2 ;;
    --base) need "$@"; base="$2"; shift 2 ;;
    --output) need "$@"; output="$2"; shift 2 ;;
    --) shift; files+=("$@"); break ;;
    -*) echo "action-check.sh: unknown option $1" >&2; usage ;;
    *) files+=("$1"); shift ;;
  esac
done

if ! command -v "$ckpt" >/dev/null 2>&1; then
  echo "action-check.sh: cannot run ckpt ($ckpt): install it, or pass --ckpt PATH" >&2
  exit 4
fi

if [ ${#files[@]} -eq 0 ]; then
  if [ -n "$base" ] && [ -z "${base//0/}" ]; then base=""; fi
  if [ -n "$base" ]; then
    list=$(git diff --name-only --diff-filter=ACMR "$base" HEAD) || { echo "action-check.sh: git diff $base HEAD failed" >&2; exit 2; }
  else
    list=$(git ls-files) || { echo "action-check.sh: not in a git repository: name the files" >&2; exit 2; }
  fi
  while IFS= read -r f; do
    [ -n "$f" ] && [ -f "$f" ] && files+=("$f")
  done < <(printf '%s\n' "$list" | grep -E "$pattern")
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "ckpt check: no checkpoint files to check"
  exit 0
fi

# `--format` where this ckpt has it; an older one has only --json.
args=(check)
[ -n "$fail_on" ] && args+=(--fail-on "$fail_on")
case "$format" in
  text) ;;
  *) if "$ckpt" check --help 2>/dev/null | grep -q -- '--format'; then args+=(--format "$format")
     elif [ "$format" = json ]; then args+=(--json)
     else echo "action-check.sh: this ckpt has no --format $format" >&2; exit 2; fi ;;
esac
[ -n "$output" ] && : >"$output"

worst=0 failed=0
for f in "${files[@]}"; do
  if [ -n "$output" ]; then "$ckpt" "${args[@]}" -- "$f" >>"$output"; else "$ckpt" "${args[@]}" -- "$f"; fi
  rc=$?
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    if [ $rc -eq 1 ] || { [ $worst -ne 1 ] && [ $rc -gt $worst ]; }; then worst=$rc; fi
    # A GitHub Actions annotation on the file, shown in the pull request.
    [ "${GITHUB_ACTIONS:-}" = true ] && echo "::error file=$f::ckpt check exited $rc"
  fi
done
summary="ckpt check: ${#files[@]} file(s), $failed failed"
echo "$summary" >&2
[ -n "${GITHUB_STEP_SUMMARY:-}" ] && echo "$summary" >>"$GITHUB_STEP_SUMMARY"
exit $worst
