#!/usr/bin/env python3
"""Checks that the docs name every option that `ckpt CMD --help` lists, so a new flag cannot go undocumented.

For each subcommand in `ckpt --help`, every long option of `ckpt CMD --help` must appear in docs/CMD.md
(as `--name` anywhere on the page) and in the synopsis block of docs/usage.md on that command's lines;
and every option of the synopsis must exist in --help, so a removed flag cannot stay documented.

  options_documented.py --ckpt build/ckpt [--root DIR]
"""
import argparse
import os
import re
import subprocess
import sys

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def help_text(ckpt, *args):
    r = subprocess.run([ckpt, *args, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{ckpt} {' '.join(args)} --help: exit {r.returncode}: {r.stderr}")
    return r.stdout


def synopsis(usage_md):
    """The lines of docs/usage.md's first code block, grouped by the command they continue."""
    text = open(usage_md, encoding="utf-8").read()
    m = re.search(r"^```\n(.*?)^```", text, re.S | re.M)
    if not m:
        raise SystemExit(f"{usage_md}: no synopsis block")
    groups = {}
    cmd = None
    for line in m.group(1).split("\n"):
        w = line.split()
        if w and w[0] == "ckpt":
            cmd = w[1] if len(w) > 1 and not w[1].startswith("-") else ""
        if cmd is not None:
            groups[cmd] = groups.get(cmd, "") + " " + line
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    top = help_text(args.ckpt)
    # GNU-style help: a "Commands:" section, each command two spaces in, its description wrapped
    # under a deeper indent.
    m = re.search(r"^(?:Commands|Subcommands):\s*$(.*?)(?:^\S|\Z)", top, re.S | re.M | re.I)
    if not m:
        raise SystemExit("ckpt --help lists no Commands")
    commands = re.findall(r"^  ([a-z][a-z0-9-]*)(?:\s|$)", m.group(1), re.M)
    syn = synopsis(os.path.join(root, "docs", "usage.md"))
    problems = []
    for cmd in commands:
        # Only the option definitions, not options named in other options' descriptions.
        # An option is defined at the start of its column ("  -f, --format FORMAT" or "      --json"),
        # never on a description's continuation line, which may begin with an option it names.
        defined = re.findall(r"^  (?:-\w, |    )(--[a-z][a-z0-9-]*)", help_text(args.ckpt, cmd), re.M)
        opts = set(defined) - {"--help", "--version"}
        page = os.path.join(root, "docs", f"{cmd}.md")
        if not os.path.exists(page):
            problems.append(f"ckpt {cmd}: no docs/{cmd}.md")
            continue
        on_page = set(OPTION.findall(open(page, encoding="utf-8").read()))
        in_syn = set(OPTION.findall(syn.get(cmd, "")))
        for o in sorted(opts - on_page):
            problems.append(f"docs/{cmd}.md does not mention {o} (in `ckpt {cmd} --help`)")
        for o in sorted(opts - in_syn):
            problems.append(f"docs/usage.md's synopsis of ckpt {cmd} lacks {o}")
        for o in sorted(in_syn - opts):
            problems.append(f"docs/usage.md's synopsis of ckpt {cmd} has {o}, which `ckpt {cmd} --help` does not list")
    for p in problems:
        print(p)
    print(f"{len(commands)} commands checked: {', '.join(commands)}; {len(problems)} problem(s)")
    return 1 if problems or not commands else 0


if __name__ == "__main__":
    sys.exit(main())
