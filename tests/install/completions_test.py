#!/usr/bin/env python3
"""The generated bash, zsh and fish completions offer exactly what `ckpt --help` lists.

For the top level and every subcommand in `ckpt --help`: each shell completes `--` to every long
option of that command's --help and nothing else, `-` also to the short ones, the subcommands
where a command is expected, and an option's {choices} after it. bash and fish are asked through
the shells themselves; zsh's file is syntax-checked and read (zsh completes only in a terminal).
Help is read here with its own, simpler parser than completions/generate.py's.
"""
import argparse
import re
import shutil
import subprocess
import sys

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, file=sys.stderr)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def read_help(ckpt, *args):
    """{'long': set, 'short': set, 'choices': {name: [...]}} of one command, and its subcommands."""
    text = run([ckpt, *args, "--help"])
    long, short, choices, subs = set(), set(), {}, []
    section = None
    for line in text.splitlines():
        if not line.strip():
            section = None
            continue
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^\s+(-\S+)(.*)", line)
        if section == "Options" and m:
            names = m.group(1).split(",")
            long |= {n for n in names if n.startswith("--")}
            short |= {n for n in names if re.fullmatch(r"-[^-]", n)}
            c = re.match(r"^ \S*:\{([^}]*)\}", m.group(2))
            if c:
                for n in names:
                    choices[n] = c.group(1).split(",")
        elif section == "Subcommands" and line.strip():
            subs.append(line.split()[0])
    return {"long": long, "short": short, "choices": choices}, subs


def check_set(what, got, want):
    if set(got) != set(want):
        fail(f"{what}: missing {sorted(set(want) - set(got))}, not options {sorted(set(got) - set(want))}")


def bash_complete(path, words):
    script = (f'source "{path}"; COMP_WORDS=({" ".join(repr(w) for w in words)}); '
              f'COMP_CWORD={len(words) - 1}; _ckpt; printf "%s\\n" "${{COMPREPLY[@]}}"')
    return [w for w in run(["bash", "-c", script]).splitlines() if w]


def fish_complete(path, line):
    out = run(["fish", "--no-config", "-c", f"source {path}; complete -C {line!r}"])
    return [row.split("\t")[0] for row in out.splitlines() if row]


def zsh_blocks(text):
    """Option names per command in the generated _ckpt: the top level, then each `CMD)` branch."""
    blocks = {"": text[text.index("_arguments -C"):text.index("'1:command")]}
    for m in re.finditer(r"^        ([a-z][a-z0-9-]*)\)\n(.*?);;", text, re.S | re.M):
        blocks[m.group(1)] = m.group(2)
    return {cmd: set(re.findall(r"'\*?(--?[A-Za-z0-9][A-Za-z0-9-]*)=?\[", body)) for cmd, body in blocks.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--dir", required=True, help="directory with the generated ckpt, _ckpt, ckpt.fish")
    args = ap.parse_args()

    top, subs = read_help(args.ckpt)
    if not subs:
        sys.exit("no subcommands in ckpt --help")
    helps = {"": top} | {s: read_help(args.ckpt, s)[0] for s in subs}
    bash_file, zsh_file, fish_file = (f"{args.dir}/{n}" for n in ("ckpt", "_ckpt", "ckpt.fish"))

    # bash
    check_set("bash: ckpt <TAB>", bash_complete(bash_file, ["ckpt", ""]), subs)
    for cmd, h in helps.items():
        prefix = ["ckpt"] + ([cmd] if cmd else [])
        check_set(f"bash: {' '.join(prefix)} --", bash_complete(bash_file, prefix + ["--"]), h["long"])
        check_set(f"bash: {' '.join(prefix)} -", bash_complete(bash_file, prefix + ["-"]), h["long"] | h["short"])
        for opt, values in h["choices"].items():
            check_set(f"bash: {' '.join(prefix)} {opt}", bash_complete(bash_file, prefix + [opt, ""]), values)

    # fish
    if shutil.which("fish"):
        run(["fish", "--no-execute", fish_file])
        got = fish_complete(fish_file, "ckpt ")
        check_set("fish: ckpt <TAB>", [w for w in got if not w.startswith("-")], subs)
        for cmd, h in helps.items():
            line = "ckpt " + (cmd + " " if cmd else "")
            check_set(f"fish: {line}--", fish_complete(fish_file, line + "--"), h["long"])
            for opt, values in h["choices"].items():
                if opt.startswith("--"):
                    check_set(f"fish: {line}{opt}=", [w.split("=", 1)[1] for w in fish_complete(fish_file, f"{line}{opt}=")], values)
    else:
        fail("fish is not installed (scripts/deps.sh installs it)")

    # zsh
    if shutil.which("zsh"):
        run(["zsh", "-n", zsh_file])
        text = open(zsh_file).read()
        blocks = zsh_blocks(text)
        names = re.search(r"commands=\((.*)\)", text).group(1)
        check_set("zsh: commands", re.findall(r"'([a-z][a-z0-9-]*):", names), subs)
        for cmd, h in helps.items():
            check_set(f"zsh: {cmd or 'top level'} options", blocks.get(cmd, set()), h["long"] | h["short"])
    else:
        fail("zsh is not installed (scripts/deps.sh installs it)")

    if failures:
        sys.exit(f"{len(failures)} completion(s) differ from --help")
    print(f"completions match --help: {len(subs)} subcommands, "
          f"{sum(len(h['long']) for h in helps.values())} long options in bash, zsh and fish")


if __name__ == "__main__":
    main()
