#!/usr/bin/env python3
"""Writes ckpt's bash, zsh and fish completions from `ckpt --help` and `ckpt CMD --help`.

Run by the build after ckpt links (cmake/Packaging.cmake), so the completions always list the
subcommands and options of the binary they are installed with; tests/completions_test.py checks
each shell's result against --help with its own, simpler reading of it.
"""
import argparse
import os
import re
import subprocess
import sys

OPTION = re.compile(r"^  (-\S+)(.*)$")
CHOICES = re.compile(r":\{([^}]*)\}")


def help_text(ckpt, *args):
    out = subprocess.run([ckpt, *args, "--help"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"generate.py: {ckpt} {' '.join(args)} --help exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def sections(text):
    """Maps each 'Name:' heading of CLI11's help to its lines."""
    result, current = {}, None
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Za-z ]*:$", line):
            current = line[:-1]
            result[current] = []
        elif current is not None:
            if not line.strip():
                current = None
            else:
                result[current].append(line)
    return result


def parse_options(lines):
    """Each option: its names, whether it takes a value, its choices, a one-line description."""
    options = []
    for line in lines:
        m = OPTION.match(line)
        if m:
            names = m.group(1).split(",")
            rest = m.group(2)
            head, _, desc = rest.partition("  ")
            head = head.split(" Excludes:")[0].split(" Needs:")[0].strip()
            choices = CHOICES.search(head)
            options.append({
                "long": [n[2:] for n in names if n.startswith("--")],
                "short": [n[1:] for n in names if re.fullmatch(r"-[^-]", n)],
                "value": bool(head),
                "choices": choices.group(1).split(",") if choices else [],
                "desc": desc.strip(),
            })
        elif options and line.startswith("   ") and not options[-1]["desc"]:
            options[-1]["desc"] = line.strip()
    for o in options:
        o["desc"] = o["desc"].split(". ")[0][:100]
    return options


def parse_commands(lines):
    cmds = []
    for line in lines:
        name, _, desc = line.strip().partition(" ")
        cmds.append((name, desc.strip()))
    return cmds


def read_cli(ckpt):
    top = sections(help_text(ckpt))
    cli = {"": parse_options(top.get("Options", []))}
    commands = parse_commands(top.get("Subcommands", []))
    for name, _ in commands:
        cli[name] = parse_options(sections(help_text(ckpt, name)).get("Options", []))
    return commands, cli


def words(option):
    return [f"--{n}" for n in option["long"]] + [f"-{n}" for n in option["short"]]


def bash(commands, cli):
    names = " ".join(c for c, _ in commands)
    out = [
        "# bash completion for ckpt, generated from `ckpt --help` by completions/generate.py",
        "_ckpt() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i',
        "  for ((i = 1; i < COMP_CWORD; i++)); do",
        f'    case "${{COMP_WORDS[i]}}" in {"|".join(c for c, _ in commands)}) cmd="${{COMP_WORDS[i]}}"; break ;; esac',
        "  done",
        '  local opts="" valued=""',
        '  case "$cmd" in',
    ]
    for cmd, options in cli.items():
        opts = " ".join(w for o in options for w in words(o))
        valued = "|".join(w for o in options if o["value"] for w in words(o))
        out.append(f'    "{cmd}") opts="{opts}"; valued="{valued}" ;;')
    out.append("  esac")
    out.append('  case "$cmd $prev" in')
    for cmd, options in cli.items():
        for o in options:
            if o["choices"]:
                pats = "|".join(f'"{cmd} {w}"' for w in words(o))
                out.append(f'    {pats}) COMPREPLY=($(compgen -W "{" ".join(o["choices"])}" -- "$cur")); return ;;')
    out += [
        "  esac",
        '  if [[ -n $valued && "|$valued|" == *"|$prev|"* ]]; then',
        '    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return',
        "  fi",
        '  if [[ $cur == -* ]]; then',
        '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        '  elif [[ -z $cmd ]]; then',
        f'    COMPREPLY=($(compgen -W "{names}" -- "$cur"))',
        "  else",
        '    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))',
        "  fi",
        "}",
        "complete -F _ckpt ckpt ckpt-torch",
    ]
    return "\n".join(out) + "\n"


def zsh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def zsh_desc(text):
    """Brackets end an _arguments description and colons separate fields: keep neither raw."""
    return text.replace("[", "(").replace("]", ")").replace(":", "\\:")


def zsh_specs(options):
    specs = []
    for o in options:
        action = ""
        if o["value"]:
            action = ":value:(" + " ".join(o["choices"]) + ")" if o["choices"] else ":value:_files"
        for w in words(o):
            eq = "=" if w.startswith("--") and o["value"] else ""
            repeat = "*" if w.startswith("--") else ""
            specs.append(zsh_quote(f"{repeat}{w}{eq}[{zsh_desc(o['desc'])}]{action}"))
    return specs


def zsh(commands, cli):
    out = [
        "#compdef ckpt ckpt-torch",
        "# zsh completion for ckpt, generated from `ckpt --help` by completions/generate.py",
        "_ckpt() {",
        '  local curcontext="$curcontext" state line',
        "  typeset -A opt_args",
        "  _arguments -C \\",
    ]
    out += [f"    {s} \\" for s in zsh_specs(cli[""])]
    out += [
        "    '1:command:->command' \\",
        "    '*::argument:->argument'",
        "  case $state in",
        "    command)",
        "      local -a commands",
        "      commands=(" + " ".join(zsh_quote(f"{c}:{zsh_desc(d)}") for c, d in commands) + ")",
        "      _describe -t commands 'ckpt command' commands ;;",
        "    argument)",
        "      case $line[1] in",
    ]
    for cmd, _ in commands:
        out.append(f"        {cmd})")
        out.append("          _arguments \\")
        out += [f"            {s} \\" for s in zsh_specs(cli[cmd])]
        out.append("            '*:file:_files' ;;")
    out += ["      esac ;;", "  esac", "}", '_ckpt "$@"']
    return "\n".join(out) + "\n"


def fish_quote(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(commands, cli):
    names = " ".join(c for c, _ in commands)
    out = ["# fish completion for ckpt, generated from `ckpt --help` by completions/generate.py"]
    for prog in ("ckpt", "ckpt-torch"):
        out.append(f"complete -c {prog} -f")
        for cmd, desc in commands:
            out.append(f"complete -c {prog} -n '__fish_use_subcommand' -a {cmd} -d {fish_quote(desc[:100])}")
        for cmd, options in cli.items():
            cond = "__fish_use_subcommand" if not cmd else f"__fish_seen_subcommand_from {cmd}"
            for o in options:
                flags = "".join(f" -l {n}" for n in o["long"]) + "".join(f" -s {n}" for n in o["short"])
                if o["choices"]:
                    flags += f" -x -a {fish_quote(' '.join(o['choices']))}"
                elif o["value"]:
                    flags += " -r -F"
                out.append(f"complete -c {prog} -n '{cond}'{flags} -d {fish_quote(o['desc'])}")
            if cmd:
                out.append(f"complete -c {prog} -n '__fish_seen_subcommand_from {cmd}' -F")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", required=True, help="the ckpt binary whose --help to read")
    ap.add_argument("--out", required=True, help="directory for ckpt (bash), _ckpt (zsh), ckpt.fish")
    args = ap.parse_args()
    commands, cli = read_cli(args.ckpt)
    if not commands:
        sys.exit(f"generate.py: no subcommands in {args.ckpt} --help")
    os.makedirs(args.out, exist_ok=True)
    for name, text in (("ckpt", bash(commands, cli)), ("_ckpt", zsh(commands, cli)), ("ckpt.fish", fish(commands, cli))):
        with open(os.path.join(args.out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
