#!/usr/bin/env python3
"""Writes ckpt's bash, zsh and fish completions from `ckpt --cli-spec`.

Run by the build after ckpt links (cmake/Packaging.cmake), so the completions offer the commands,
options and values of the binary they are installed with. `ckpt --cli-spec` (hidden) prints one JSON
document, schema ckpt.cli/1:

  {"schema": "ckpt.cli/1",
   "commands": [{"name": "" (the top level) | "summary" | ..., "description": "...",
                 "operands": [{"name": "FILE...", "complete": "file" | "none"}],
                 "options": [{"long": ["format"], "short": ["f"], "value": "FORMAT" | null,
                              "choices": [...], "nospace": bool, "complete": "choices" | "file" | "none",
                              "repeatable": bool, "description": "..."}]}]}

Each shell offers: the commands with their descriptions, each command's options, an option's
choices after it (bash also after `--opt=`; with `nospace`, no space after the choice, for
`NAME=` values the user goes on typing), file names where `complete` is "file" and for operands,
nothing where it is "none". zsh and fish show the first sentence of each description, cut at a
word boundary with an ellipsis when longer than about 80 characters.
tests/install/completions_test.py asks the shells themselves and compares with the spec and --help.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

SCHEMA = "ckpt.cli/1"
WIDTH = 80  # longest description shown by zsh and fish, the ellipsis included


# --- the spec --------------------------------------------------------------------------------------

def read_spec(ckpt=None, path=None):
    if path:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        where = path
    else:
        out = subprocess.run([ckpt, "--cli-spec"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"generate.py: {ckpt} --cli-spec exited {out.returncode}: {out.stderr.strip()}")
        text, where = out.stdout, f"{ckpt} --cli-spec"
    try:
        spec = json.loads(text)
    except ValueError as e:
        sys.exit(f"generate.py: {where} is not JSON: {e}")
    return normalize(spec, where)


def normalize(spec, where="the spec"):
    """The spec with every field present and checked: a missing field takes its documented default."""
    if not isinstance(spec, dict) or spec.get("schema") != SCHEMA:
        sys.exit(f"generate.py: {where}: schema is not {SCHEMA}")
    commands = []
    for c in spec.get("commands", []):
        options = []
        for o in c.get("options", []):
            if o.get("hidden"):
                continue
            value = o.get("value") or None
            choices = [str(v) for v in (o.get("choices") or [])]
            complete = o.get("complete") or ("choices" if choices else "none")
            if value is None:
                complete = "none"
            if complete not in ("choices", "file", "none"):
                sys.exit(f"generate.py: {where}: option {o.get('long')}: complete {complete!r}")
            option = {
                "long": list(o.get("long") or []),
                "short": list(o.get("short") or []),
                "value": value,
                "choices": choices if complete == "choices" else [],
                "nospace": bool(o.get("nospace")),
                "complete": complete,
                "repeatable": bool(o.get("repeatable")),
                "description": o.get("description") or "",
            }
            if not option["long"] and not option["short"]:
                sys.exit(f"generate.py: {where}: an option of {c.get('name')!r} has no name")
            for n in option["long"] + option["short"]:
                if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", n):
                    sys.exit(f"generate.py: {where}: option name {n!r}")
            options.append(option)
        operands = [{"name": p.get("name", "FILE"), "complete": p.get("complete") or "file"}
                    for p in c.get("operands", [])]
        name = c.get("name") or ""
        if name and not re.fullmatch(r"[a-z][a-z0-9-]*", name):
            sys.exit(f"generate.py: {where}: command name {name!r}")
        commands.append({"name": name, "description": c.get("description") or "",
                         "operands": operands, "options": options})
    if not any(c["name"] == "" for c in commands):
        commands.insert(0, {"name": "", "description": "", "operands": [], "options": []})
    if not any(c["name"] for c in commands):
        sys.exit(f"generate.py: {where}: no commands")
    return commands


def words(option):
    return [f"--{n}" for n in option["long"]] + [f"-{n}" for n in option["short"]]


def short_desc(text, width=WIDTH):
    """The first sentence of text on one line, cut at a word boundary with an ellipsis past width."""
    text = " ".join(text.split())
    # A sentence ends at . ! or ? before a space and a capital (not at "e.g. x" or "_orig_mod., module.").
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)[.!?](?=\s+[A-Z(`'\"])", text)
    if m:
        text = text[:m.start()]
    text = text.rstrip(" .")
    if len(text) <= width:
        return text
    cut = text[:width]  # room for the ellipsis: the character at width is a space or is dropped
    if text[width] != " ":
        cut = cut[:cut.rfind(" ")] if " " in cut else cut
    # A parenthesis opened just before the cut says too little to keep: "ones (3.0…".
    paren = cut.rfind("(")
    if cut.count("(") > cut.count(")") and paren > 0 and cut[paren - 1] == " " and len(cut) - paren <= 12:
        cut = cut[:paren]
    cut = cut.rstrip(" ,;:-(/")
    # One word longer than width: keep it whole rather than cut it.
    if not cut:
        cut = text.split(" ")[0]
    return cut + "…"


# --- bash ------------------------------------------------------------------------------------------

def bash_array(values):
    return "(" + " ".join(shlex.quote(v) for v in values) + ")"


def bash_case_pattern(values):
    return "|".join(shlex.quote(v) for v in values)


def bash(commands):
    subs = [c["name"] for c in commands if c["name"]]
    out = [
        "# bash completion for ckpt, generated from `ckpt --cli-spec` by completions/generate.py",
        "",
        "# _ckpt_option CMD OPT: what OPT of CMD takes. Sets _ckpt_kind (flag, choices, file, none),",
        "# _ckpt_values (the choices) and _ckpt_nospace (1: no space after a choice, the user types on).",
        "_ckpt_option() {",
        "  _ckpt_kind=flag _ckpt_values=() _ckpt_nospace=",
        '  case "$1 $2" in',
    ]
    for c in commands:
        for o in c["options"]:
            if o["value"] is None:
                continue
            pats = "|".join(shlex.quote(f"{c['name']} {w}") for w in words(o))
            body = f"_ckpt_kind={o['complete']}"
            if o["complete"] == "choices":
                body += f"; _ckpt_values={bash_array(o['choices'])}"
            if o["nospace"]:
                body += "; _ckpt_nospace=1"
            out.append(f"    {pats}) {body} ;;")
    out += [
        "  esac",
        "}",
        "",
        "# _ckpt_reply WORD CANDIDATE...: the candidates starting with WORD, less the part of WORD up to its",
        "# last COMP_WORDBREAKS character (readline replaces only what follows it: `--format=j`, `cuda:`).",
        "_ckpt_reply() {",
        '  local word=$1 pre="" c i',
        "  shift",
        "  for ((i = ${#word}; i > 0; i--)); do",
        '    if [[ $COMP_WORDBREAKS == *"${word:i-1:1}"* ]]; then pre=${word:0:i}; break; fi',
        "  done",
        '  for c in "$@"; do',
        '    [[ $c == "$word"* ]] && COMPREPLY+=("${c#"$pre"}")',
        "  done",
        "}",
        "",
        "# _ckpt_files PREFIX VALUE: file names completing VALUE, each after PREFIX (`--model=`, or nothing).",
        "_ckpt_files() {",
        "  local f",
        "  local -a files=()",
        '  while IFS= read -r f; do files+=("$1$f"); done < <(compgen -f -- "$2")',
        "  compopt -o filenames 2>/dev/null",
        '  _ckpt_reply "$1$2" "${files[@]}"',
        "}",
        "",
        "_ckpt() {",
        "  COMPREPLY=()",
        "  # The words up to the cursor, split at blanks only (COMP_WORDS also splits at = and :).",
        '  local line=${COMP_LINE:0:COMP_POINT}',
        "  local -a w",
        '  read -ra w <<< "$line"',
        '  if [[ ${#w[@]} -eq 0 || $line == *[[:blank:]] ]]; then w+=(""); fi',
        '  local n=${#w[@]} cur=${w[${#w[@]}-1]} cmd="" want="" ended="" i word',
        "  local _ckpt_kind _ckpt_values _ckpt_nospace",
        "  for ((i = 1; i < n - 1; i++)); do",
        "    word=${w[i]}",
        '    if [[ -n $want ]]; then want=""; continue; fi',
        '    if [[ -z $ended && $word == -- ]]; then ended=1; continue; fi',
        '    if [[ -z $ended && $word == -?* ]]; then',
        '      if [[ $word != *=* ]]; then',
        '        _ckpt_option "$cmd" "$word"',
        '        [[ $_ckpt_kind != flag ]] && want=$word',
        "      fi",
        "      continue",
        "    fi",
        '    if [[ -z $cmd ]]; then',
        f'      case $word in {bash_case_pattern(subs)}) cmd=$word; ended="" ;; *) return ;; esac',
        "    fi",
        "  done",
        '  local prefix="" value=$cur opt=""',
        '  if [[ -n $want ]]; then',
        "    opt=$want",
        '  elif [[ -z $ended && $cur == --*=* ]]; then',
        '    opt=${cur%%=*} prefix=${cur%%=*}= value=${cur#*=}',
        "  fi",
        '  if [[ -n $opt ]]; then',
        '    _ckpt_option "$cmd" "$opt"',
        "    case $_ckpt_kind in",
        "      choices)",
        '        local -a full=()',
        '        for i in "${_ckpt_values[@]}"; do full+=("$prefix$i"); done',
        '        _ckpt_reply "$cur" "${full[@]}"',
        '        [[ -n $_ckpt_nospace ]] && compopt -o nospace 2>/dev/null ;;',
        '      file) _ckpt_files "$prefix" "$value" ;;',
        "    esac",
        "    return",
        "  fi",
        '  if [[ -z $ended && $cur == -* ]]; then',
        "    local -a opts",
        '    case $cmd in',
    ]
    for c in commands:
        pattern = shlex.quote(c["name"]) if c["name"] else '""'
        out.append(f"      {pattern}) opts={bash_array([w for o in c['options'] for w in words(o)])} ;;")
    out += [
        "    esac",
        '    _ckpt_reply "$cur" "${opts[@]}"',
        '  elif [[ -z $cmd ]]; then',
        f'    _ckpt_reply "$cur" {" ".join(shlex.quote(s) for s in subs)}',
        "  else",
        "    case $cmd in",
    ]
    for c in commands:
        if c["name"] and any(p["complete"] == "file" for p in c["operands"]):
            out.append(f"      {shlex.quote(c['name'])}) _ckpt_files \"\" \"$cur\" ;;")
    out += [
        "    esac",
        "  fi",
        "}",
        "complete -F _ckpt ckpt ckpt-torch",
    ]
    return "\n".join(out) + "\n"


# --- zsh -------------------------------------------------------------------------------------------

def zsh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def zsh_bracket(text):
    """An _arguments explanation, inside [...]: backslash, brackets and colons backslash-quoted."""
    return re.sub(r"([\\\[\]:])", r"\\\1", text)


def zsh_word(text):
    """One word of an _arguments action: every character but a plain one backslash-quoted (the
    action is split at colons, then eval'd)."""
    return re.sub(r"([^A-Za-z0-9_.+/@%=-])", r"\\\1", text)


def zsh_message(text):
    return re.sub(r"[\\:\[\]]", "", text or "value") or "value"


def zsh_action(o):
    msg = zsh_message(o["value"])
    if o["complete"] == "file":
        return f":{msg}:_files"
    if o["complete"] == "choices" and o["choices"]:
        values = " ".join(zsh_word(v) for v in o["choices"])
        if o["nospace"]:
            return f":{msg}:{{compadd -S '' -- {values}}}"
        return f":{msg}:({values})"
    return f":{msg}: "


def zsh_specs(options):
    specs = []
    for o in options:
        names = words(o)
        desc = zsh_bracket(short_desc(o["description"]))
        action = "" if o["value"] is None else zsh_action(o)
        # Names of one option exclude each other (one is enough), unless it may be given again.
        rep = "*" if o["repeatable"] and o["value"] is not None else ""  # a flag twice says nothing more
        excl = "" if rep or len(names) < 2 else "(" + " ".join(names) + ")"
        for w in names:
            form = w
            if o["value"] is not None:
                form += "=" if w.startswith("--") else "+"
            specs.append(zsh_quote(f"{excl}{rep}{form}[{desc}]{action}"))
    return specs


def zsh_operands(operands):
    specs = []
    for i, p in enumerate(operands):
        action = "_files" if p["complete"] == "file" else " "
        msg = zsh_message(p["name"]).rstrip(".") or "operand"
        if p["name"].endswith("..."):
            specs.append(zsh_quote(f"*:{msg}:{action}"))
        else:
            specs.append(zsh_quote(f"{i + 1}:{msg}:{action}"))
    return specs


def zsh(commands):
    top = next(c for c in commands if not c["name"])
    subs = [c for c in commands if c["name"]]
    out = [
        "#compdef ckpt ckpt-torch",
        "# zsh completion for ckpt, generated from `ckpt --cli-spec` by completions/generate.py",
        "_ckpt() {",
        '  local curcontext="$curcontext" state line ret=1',
        "  typeset -A opt_args",
        "  _arguments -C \\",
    ]
    out += [f"    {s} \\" for s in zsh_specs(top["options"])]
    out += [
        "    '1:command:->command' \\",
        "    '*::argument:->argument' && ret=0",
        "  case $state in",
        "    command)",
        "      local -a commands",
        "      commands=(",
    ]
    out += [f"        {zsh_quote(c['name'] + ':' + short_desc(c['description']))}" for c in subs]
    out += [
        "      )",
        "      _describe -t commands 'ckpt command' commands && ret=0 ;;",
        "    argument)",
        '      curcontext="${curcontext%:*:*}:ckpt-$line[1]:"',
        "      case $line[1] in",
    ]
    for c in subs:
        out.append(f"        {c['name']})")
        out.append("          _arguments -S \\")
        specs = zsh_specs(c["options"]) + zsh_operands(c["operands"])
        out += [f"            {s} \\" for s in specs[:-1]]
        out.append(f"            {specs[-1]} && ret=0 ;;" if specs else "            && ret=0 ;;")
    out += ["      esac ;;", "  esac", "  return ret", "}", "", '_ckpt "$@"']
    return "\n".join(out) + "\n"


# --- fish ------------------------------------------------------------------------------------------

def fish_quote(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(commands):
    top = next(c for c in commands if not c["name"])
    subs = [c for c in commands if c["name"]]
    top_valued = [w for o in top["options"] if o["value"] is not None for w in words(o) if not w.startswith("--")]
    top_valued += [w for o in top["options"] if o["value"] is not None for w in words(o) if w.startswith("--")]
    out = [
        "# fish completion for ckpt, generated from `ckpt --cli-spec` by completions/generate.py",
        "",
        "# The command on the line (summary, check, ...), if one was given.",
        "function __ckpt_command",
        "    set -l tokens (commandline -opc)",
        "    set -e tokens[1]",
        "    set -l skip 0",
        "    for t in $tokens",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $t",
    ]
    if top_valued:
        out += [f"            case {' '.join(fish_quote(w) for w in top_valued)}", "                set skip 1"]
    out += [
        "            case '-*'",
        "            case '*'",
        "                echo $t",
        "                return 0",
        "        end",
        "    end",
        "    return 1",
        "end",
        "",
        "function __ckpt_no_command",
        "    not __ckpt_command >/dev/null",
        "end",
        "",
        "function __ckpt_using",
        "    set -l c (__ckpt_command)",
        '    test "$c" = "$argv[1]"',
        "end",
    ]
    for prog in ("ckpt", "ckpt-torch"):
        out += ["", f"complete -c {prog} -f"]
        for c in subs:
            out.append(f"complete -c {prog} -n __ckpt_no_command -a {c['name']} -d {fish_quote(short_desc(c['description']))}")
        for c in commands:
            cond = "__ckpt_no_command" if not c["name"] else fish_quote(f"__ckpt_using {c['name']}")
            for o in c["options"]:
                flags = "".join(f" -l {n}" for n in o["long"]) + "".join(f" -s {n}" for n in o["short"])
                if o["value"] is not None:
                    if o["complete"] == "file":
                        flags += " -r -F"
                    elif o["complete"] == "choices" and o["choices"]:
                        flags += " -x -a " + fish_quote(" ".join(fish_escape_word(v) for v in o["choices"]))
                    else:
                        flags += " -x"
                out.append(f"complete -c {prog} -n {cond}{flags} -d {fish_quote(short_desc(o['description']))}")
            if c["name"] and any(p["complete"] == "file" for p in c["operands"]):
                out.append(f"complete -c {prog} -n {cond} -F")
    return "\n".join(out) + "\n"


def fish_escape_word(word):
    """One word of a `complete -a` list, which fish splits and expands: specials backslash-quoted."""
    return re.sub(r"([^A-Za-z0-9_.+/@%=:,-])", r"\\\1", word)


# --- main ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", help="the ckpt binary whose --cli-spec to read")
    ap.add_argument("--spec", help="read this ckpt.cli/1 JSON file instead of running `ckpt --cli-spec` (tests)")
    ap.add_argument("--out", required=True, help="directory for ckpt (bash), _ckpt (zsh), ckpt.fish")
    args = ap.parse_args()
    if not args.ckpt and not args.spec:
        ap.error("give --ckpt or --spec")
    commands = read_spec(args.ckpt, args.spec)
    os.makedirs(args.out, exist_ok=True)
    for name, text in (("ckpt", bash(commands)), ("_ckpt", zsh(commands)), ("ckpt.fish", fish(commands))):
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
