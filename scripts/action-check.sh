#!/usr/bin/env bash
# Runs `ckpt check` on checkpoint files: the ones named, or those a git range changed. Shared by the
# GitHub Action (action.yml) and the pre-commit hook (.pre-commit-hooks.yaml), which passes the
# staged files as arguments.
#
#   scripts/action-check.sh [--ckpt PATH] [--fail-on LEVEL] [--format text|json|sarif]
#                           [--base REF] [--output FILE] [--] [FILE...]
#
# Without FILEs it checks the checkpoint files (*.pt *.pth *.bin *.ckpt *.safetensors *.pt2 *.ptl *.pkl *.tar *.zip, as a directory walk)
# added or modified between --base and HEAD, or every tracked one when --base is empty or all zeros
# (a new branch). All the files go to one `ckpt check` call, so the report (stdout, or --output) is
# ckpt's own for several inputs: text, JSON Lines (one ckpt.check/1 document per line; a single file
# gives one document) or one SARIF log. Exit status: 1 when any file failed --fail-on, otherwise the
# highest status of any file (3: unreadable or not fully scanned, 2: usage), 0 when all passed or
# there was nothing to check; 4 when ckpt cannot be run. Under GitHub Actions, each file that did not
# pass gets an `::error file=…` annotation, read from the report.
set -uo pipefail

ckpt="${CKPT:-ckpt}" fail_on="" format="text" base="" output=""
# The extensions a directory walk reads (src/cli/inputs.cc kCheckpointExtensions), case-blind as there.
pattern='\.(pt|pth|bin|ckpt|safetensors|pt2|ptl|pkl|tar|zip)$'
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
  done < <(printf '%s\n' "$list" | grep -Ei "$pattern")
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "ckpt check: no checkpoint files to check"
  exit 0
fi

# What this ckpt can do: `--format` (an older one has only --json) and several FILEs in one call (an
# older one checks one file per call).
help=$("$ckpt" check --help 2>/dev/null)
has_format=0 several=0 jsonl=0
[[ $help == *--format* ]] && has_format=1
[[ $help == *jsonl* ]] && jsonl=1
[[ $help == *FILE...* ]] && several=1
args=(check)
[ -n "$fail_on" ] && args+=(--fail-on "$fail_on")
case "$format" in
  text) ;;
  # JSON Lines whatever the number of files (a ckpt with --jsonl refuses --json for several)
  json) if [ $jsonl = 1 ]; then args+=(--format jsonl)
        elif [ $has_format = 1 ]; then args+=(--format json)
        else args+=(--json); fi ;;
  *) if [ $has_format = 1 ]; then args+=(--format "$format")
     elif [ "$format" = json ]; then args+=(--json)
     else echo "action-check.sh: this ckpt has no --format $format" >&2; exit 2; fi ;;
esac

# GitHub Actions annotation on a file, shown in the pull request (the file property's %, CR, LF, :
# and , escaped as the workflow-command syntax wants).
annotate() {
  [ "${GITHUB_ACTIONS:-}" = true ] || return 0
  local f=$1 msg=$2
  f=${f//%/%25} f=${f//$'\r'/%0D} f=${f//$'\n'/%0A} f=${f//:/%3A} f=${f//,/%2C}
  msg=${msg//%/%25} msg=${msg//$'\r'/%0D} msg=${msg//$'\n'/%0A}
  echo "::error file=$f::$msg"
}

summary() {
  local s="ckpt check: $1"
  echo "$s" >&2
  [ -n "${GITHUB_STEP_SUMMARY:-}" ] && echo "$s" >>"$GITHUB_STEP_SUMMARY"
  return 0
}

if [ $several = 0 ]; then
  # An older ckpt: one call per file. Its reports are appended: text, or a stream of JSON documents
  # (jq reads it); SARIF logs appended to one another are no SARIF, so that takes one file.
  if [ "$format" = sarif ] && [ ${#files[@]} -gt 1 ]; then
    echo "action-check.sh: this ckpt checks one file per call, and ${#files[@]} SARIF logs make no single log: check one file, or use a ckpt that takes several" >&2
    exit 2
  fi
  [ -n "$output" ] && : >"$output"
  worst=0 failed=0
  for f in "${files[@]}"; do
    if [ -n "$output" ]; then "$ckpt" "${args[@]}" -- "$f" >>"$output"; else "$ckpt" "${args[@]}" -- "$f"; fi
    rc=$?
    if [ $rc -ne 0 ]; then
      failed=$((failed + 1))
      if [ $rc -eq 1 ] || { [ $worst -ne 1 ] && [ $rc -gt $worst ]; }; then worst=$rc; fi
      annotate "$f" "ckpt check exited $rc"
    fi
  done
  summary "${#files[@]} file(s), $failed failed"
  exit $worst
fi

# One call for all the files. Its exit status is the worst file's, ranked 0 < 1 < 3 < 4, where this
# script puts 1 (a file failed --fail-on) first: so when ckpt exits 3 or 4, the report says whether a
# file failed too.
report=$output
if [ -n "$output" ] && ! : >"$output"; then
  echo "action-check.sh: cannot write --output $output" >&2
  exit 2
fi
if [ -z "$report" ]; then
  report=$(mktemp) || exit 2
  trap 'rm -f "$report"' EXIT
  "$ckpt" "${args[@]}" -- "${files[@]}" | tee "$report"
  rc=${PIPESTATUS[0]}
else
  "$ckpt" "${args[@]}" -- "${files[@]}" >"$output"
  rc=$?
fi
[ "$rc" -eq 2 ] && exit 2

# Each file's status from the report, as lines "STATUS<TAB>FILE" (pass, fail, incomplete or
# unscanned): the text's closing line of each file, the JSON's `file` and `status` (one document per
# line, or one indented document for a single file), the SARIF's `artifacts` (one per file; for a
# single file, its invocation's status).
statuses() {
  local line f="" s
  local t_counts='^(.+): [0-9]+ error\(s\), [0-9]+ warning\(s\), [0-9]+ info; --fail-on [a-z]+: (pass|FAIL|INCOMPLETE)'
  local t_unscanned='^(.+): NOT SCANNED: .*; --fail-on [a-z]+: (FAIL|not failed)$'
  local j_line='^\{"schema": "ckpt\.check/1", "file": "(([^"\\]|\\.)*)", .*"status": "([a-z]+)"\}$'
  local j_file='^  "file": "(([^"\\]|\\.)*)",$' j_status='^  "status": "([a-z]+)"$'
  local s_uri='^            "uri": "([^"]*)"$' s_status='^            "status": "([a-z]+)",?$'
  while IFS= read -r line; do
    case "$format" in
      text)
        if [[ $line =~ $t_counts ]]; then
          s=${BASH_REMATCH[2]}
          case "$s" in pass) ;; FAIL) s=fail ;; *) s=incomplete ;; esac
          printf '%s\t%s\n' "$s" "${BASH_REMATCH[1]}"
        elif [[ $line =~ $t_unscanned ]]; then
          printf 'unscanned\t%s\n' "${BASH_REMATCH[1]}"
        fi ;;
      json)
        if [[ $line =~ $j_line ]]; then
          printf '%s\t%s\n' "${BASH_REMATCH[3]}" "$(json_unescape "${BASH_REMATCH[1]}")"
        elif [[ $line =~ $j_file ]]; then
          f=$(json_unescape "${BASH_REMATCH[1]}")
        elif [[ $line =~ $j_status ]]; then
          printf '%s\t%s\n' "${BASH_REMATCH[1]}" "$f"
        fi ;;
      sarif)
        if [[ $line =~ $s_uri ]]; then
          s=${BASH_REMATCH[1]}
          printf -v f '%b' "${s//%/\\x}"
        elif [[ $line =~ $s_status ]]; then
          printf '%s\t%s\n' "${BASH_REMATCH[1]}" "${f:-${files[0]}}"
        fi ;;
    esac
  done <"$report"
}
json_unescape() {
  local s=${1//\\\\/$'\x01'}
  s=${s//\\\"/\"} s=${s//\\\//\/}
  printf '%s' "${s//$'\x01'/\\}"
}

n=0 failed=0 any_fail=0
while IFS=$'\t' read -r s f; do
  n=$((n + 1))
  # A file's own exit status: 1 for fail, 3 when not fully scanned (0 with --fail-on never).
  case "$s" in
    pass) continue ;;
    fail) any_fail=1 ;;
    *) [ "$fail_on" = never ] && continue ;;
  esac
  failed=$((failed + 1))
  annotate "$f" "ckpt check: $s (--fail-on ${fail_on:-error})"
done < <(statuses)
if [ $n -eq 0 ] && [ "$rc" -ne 0 ]; then
  # No status could be read back (a report this script does not know): name ckpt's status only.
  [ "${GITHUB_ACTIONS:-}" = true ] && echo "::error::ckpt check exited $rc"
  summary "${#files[@]} file(s), exit status $rc"
  exit "$rc"
fi
summary "$((n > 0 ? n : ${#files[@]})) file(s), $failed failed"
if [ "$rc" -gt 1 ] && [ $any_fail = 1 ]; then exit 1; fi
exit "$rc"
