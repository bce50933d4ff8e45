#!/usr/bin/env python3
"""The generated bash, zsh and fish completions offer what `ckpt --cli-spec` and `ckpt --help` say.

The spec (ckpt.cli/1, read here with its own code, not completions/generate.py's) is first checked
against the help: each command's long and short options are exactly those `ckpt CMD --help` lists
(`-f, --format FORMAT` and `-f,--format` styles both read), `check --only` offers the rule ids of
docs/rules.md, `load --device` cpu, cuda and meta, every --format text and json, `summary --depth`
-1 to 3. Then each shell is asked through the shell itself, in a folder holding two files:
bash (COMP_LINE through _ckpt), fish (`complete -C`) and zsh (an interactive zsh in a zpty, its
compadd recorded; `zsh -n` where zpty is missing). For every command: `--` completes to exactly its
long options, the commands where one is expected, after each option that takes a value exactly its
choices (bash also `--opt=` with and without `=` in COMP_WORDBREAKS; no space after a nospace
choice), file names where the spec says file, nothing where it says none, file names for operands;
and every description zsh and fish show is the start of the spec's, cut at a word boundary (an
ellipsis when cut), at most ~80 characters.

  completions_test.py --ckpt build/ckpt --dir build/completions     (ctest completions_match_help)
  completions_test.py --spec completions/cli-spec.sample.json       (generates into a temporary folder)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ["model.pt", "weights.safetensors"]  # the folder the shells complete in
MAX_DESC = 81  # 80 and the ellipsis
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, file=sys.stderr)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw).stdout


def check_set(what, got, want):
    got, want = list(got), list(want)
    if sorted(set(got)) != sorted(set(want)) or len(got) != len(set(got)):
        fail(f"{what}: missing {sorted(set(want) - set(got))}, not expected {sorted(set(got) - set(want))}"
             + (" (duplicates)" if len(got) != len(set(got)) else ""))


# --- the spec and the help -------------------------------------------------------------------------

def load_spec(text):
    spec = json.loads(text)
    assert spec["schema"] == "ckpt.cli/1", spec.get("schema")
    cmds = {}
    for c in spec["commands"]:
        cmds[c["name"]] = c
        for o in c["options"]:
            o["names"] = [f"--{n}" for n in o["long"]] + [f"-{n}" for n in o["short"]]
    return cmds


def read_help(ckpt, *args):
    """The option names (long, short) and the commands one --help lists."""
    text = run([ckpt, *args, "--help"])
    long, short, subs, section = set(), set(), [], ""
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1].lower()
            continue
        if not line.strip():
            continue
        m = re.match(r"^ {1,8}(\S.*)$", line)
        if not m:
            continue
        head = re.split(r"\s{2,}", m.group(1))[0]
        if "command" in section:
            subs.append(head.split()[0])
        elif head.startswith("-"):
            for tok in re.split(r"[,\s]+", head):
                if re.fullmatch(r"--?[A-Za-z0-9][\w-]*(=.*)?", tok):
                    name = tok.split("=")[0]
                    (long if name.startswith("--") else short).add(name)
    return long, short, subs


def rule_ids():
    text = (ROOT / "docs" / "rules.md").read_text()
    start = text.index("| id |")
    table = text[start:text.find("\n\n", start)]
    return re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.M)


def check_spec(cmds, ckpt):
    subs = [n for n in cmds if n]
    if ckpt:
        long, short, help_subs = read_help(ckpt)
        check_set("spec vs ckpt --help: commands", subs, help_subs)
        for name, c in cmds.items():
            if name:
                long, short, _ = read_help(ckpt, name)
            names = [w for o in c["options"] for w in o["names"]]
            check_set(f"spec vs ckpt {name + ' ' if name else ''}--help: long options",
                      [w for w in names if w.startswith("--")], long)
            check_set(f"spec vs ckpt {name + ' ' if name else ''}--help: short options",
                      [w for w in names if not w.startswith("--")], short)

    def option(cmd, name):
        for o in cmds.get(cmd, {}).get("options", []):
            if name in o["names"]:
                return o
        return None

    def expect(cmd, name, want, exact=False):
        o = option(cmd, name)
        if o is None:
            fail(f"spec: {cmd} has no {name}")
        elif (set(o["choices"]) != set(want)) if exact else not set(want) <= set(o["choices"]):
            fail(f"spec: {cmd} {name} offers {o['choices']}, expected {'exactly ' if exact else ''}{sorted(want)}")
        elif o.get("complete") != "choices":
            fail(f"spec: {cmd} {name}: complete is {o.get('complete')!r}, not choices")

    expect("check", "--only", rule_ids(), exact=True)
    expect("check", "--skip", rule_ids(), exact=True)
    expect("load", "--device", ["cpu", "cuda", "meta"])
    expect("summary", "--depth", ["-1", "0", "1", "2", "3"])
    expect("load", "--dtype", ["float32", "float16", "bfloat16"])
    expect("summary", "--dtype", ["float32", "float16", "bfloat16"])
    for cmd in subs:
        expect(cmd, "--format", ["text", "json"])
        o = option(cmd, "--limit")
        if o and (not o["nospace"] or not o["choices"] or not all(v.endswith("=") for v in o["choices"])):
            fail(f"spec: {cmd} --limit: expected NAME= choices with nospace, got {o['choices'][:3]} nospace={o['nospace']}")
        if o := option(cmd, "--color"):
            expect(cmd, "--color", ["auto", "always", "never"], exact=True)


def expected_values(o):
    """What a shell should offer for an option's value: ('choices', [...]), ('file', FILES) or ('none', [])."""
    kind = o.get("complete") or ("choices" if o["choices"] else "none")
    if kind == "choices" and o["choices"]:
        return "choices", o["choices"]
    if kind == "file":
        return "file", FILES
    return "none", []


def check_desc(what, shown, full):
    """shown: a description a shell displays for full (the spec's): its start, cut between words."""
    full = " ".join(full.split())
    if len(shown) > MAX_DESC:
        fail(f"{what}: description of {len(shown)} characters: {shown!r}")
    text = shown[:-1] if shown.endswith("…") else shown
    if not full.startswith(text):
        fail(f"{what}: description {shown!r} is not the start of {full[:100]!r}")
        return
    after = full[len(text):len(text) + 1]
    if after and (after.isalnum() or after in "_") and text and text[-1].isalnum():
        fail(f"{what}: description cut mid-word: {shown!r}")


# --- bash ------------------------------------------------------------------------------------------

WORDBREAKS = " \t\n\"'><=;|&(:"


def bash_queries(path, queries, cwd):
    """queries: (line, COMP_WORDBREAKS); returns (replies, compopt calls) per query."""
    script = [
        'compopt() { _calls+=("$*"); }',
        f"source {shquote(path)}",
    ]
    for line, breaks in queries:
        script += [
            f"COMP_WORDBREAKS={shquote(breaks)}; COMP_LINE={shquote(line)}; COMP_POINT=${{#COMP_LINE}}",
            'read -ra COMP_WORDS <<< "$COMP_LINE"; COMP_CWORD=${#COMP_WORDS[@]}',
            "_calls=(); COMPREPLY=(); _ckpt",
            'printf "\\x1e%s\\n" "${COMPREPLY[@]}"; printf "\\x1f%s\\n" "${_calls[@]}"; echo "\x1d"',
        ]
    out = run(["bash", "--norc", "--noprofile", "-c", "\n".join(script)], cwd=cwd)
    results = []
    for block in out.split("\x1d\n")[:-1]:
        rows = block.split("\n")  # not splitlines(), which also splits at \x1e and \x1f
        replies = [l[1:] for l in rows if l.startswith("\x1e") and l != "\x1e"]
        calls = [l[1:] for l in rows if l.startswith("\x1f") and l != "\x1f"]
        results.append((replies, calls))
    assert len(results) == len(queries), (len(results), len(queries))
    return results


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def check_bash(path, cmds, cwd):
    subs = [n for n in cmds if n]
    queries, checks = [], []

    def ask(line, check, breaks=WORDBREAKS):
        queries.append((line, breaks))
        checks.append((line, breaks, check))

    ask("ckpt ", lambda r, c: check_set("bash: ckpt <TAB>", r, subs))
    for name, c in cmds.items():
        pre = "ckpt " + (name + " " if name else "")
        longs = [w for o in c["options"] for w in o["names"] if w.startswith("--")]
        alls = [w for o in c["options"] for w in o["names"]]
        ask(pre + "--", lambda r, c, pre=pre, longs=longs: check_set(f"bash: {pre}--", r, longs))
        ask(pre + "-", lambda r, c, pre=pre, alls=alls: check_set(f"bash: {pre}-", r, alls))
        if name:
            want = FILES if any(p.get("complete", "file") == "file" for p in c["operands"]) else []
            ask(pre, lambda r, c, pre=pre, want=want: check_set(f"bash: {pre}<TAB> (operands)", r, want))
        for o in c["options"]:
            if o["value"] is None:
                continue
            kind, values = expected_values(o)
            for w in o["names"]:
                forms = [(f"{pre}{w} ", WORDBREAKS, "")]
                if w.startswith("--"):
                    forms += [(f"{pre}{w}=", WORDBREAKS, ""), (f"{pre}{w}=", " \t\n", f"{w}=")]
                for line, breaks, prefix in forms:
                    def check(r, calls, line=line, breaks=breaks, prefix=prefix, kind=kind, values=values, o=o):
                        what = f"bash: {line}<TAB>" + ("" if "=" in breaks else " (no = in COMP_WORDBREAKS)")
                        check_set(what, r, [prefix + v for v in values])
                        if o["nospace"] and kind == "choices" and "-o nospace" not in calls:
                            fail(f"{what}: no compopt -o nospace")
                        if not o["nospace"] and "-o nospace" in calls:
                            fail(f"{what}: compopt -o nospace")
                    ask(line, check, breaks)
    # A choice with a colon, as readline completes it: only the part after the last break.
    for o in cmds.get("load", {}).get("options", []):
        if "--device" in o["names"] and "cuda:0" in o["choices"]:
            ask("ckpt load --device cuda:", lambda r, c: check_set("bash: ckpt load --device cuda:<TAB>", r, ["0"]))
    for (line, breaks, check), (replies, calls) in zip(checks, bash_queries(path, queries, cwd)):
        check(replies, calls)
    return len(queries)


# --- fish ------------------------------------------------------------------------------------------

def fish_quote(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_queries(path, lines, cwd):
    script = [f"source {fish_quote(path)}"]
    for line in lines:
        script += [f"complete -C {fish_quote(line)}", "echo \\x1d"]
    out = run(["fish", "--no-config", "-c", "\n".join(script)], cwd=cwd)
    blocks = out.split("\x1d\n")[:-1]
    assert len(blocks) == len(lines), (len(blocks), len(lines))
    return [[tuple((row.split("\t", 1) + [""])[:2]) for row in b.split("\n") if row] for b in blocks]


def check_fish(path, cmds, cwd):
    run(["fish", "--no-execute", path])
    subs = [n for n in cmds if n]
    lines, checks = [], []

    def ask(line, check):
        lines.append(line)
        checks.append(check)

    def descs(what, rows, by_name):
        for word, desc in rows:
            full = by_name.get(word.split("=")[0])
            if full is not None and desc:
                check_desc(f"{what} {word}", desc, full)

    ask("ckpt ", lambda r: (check_set("fish: ckpt <TAB>", [w for w, _ in r if not w.startswith("-")], subs),
                            descs("fish: ckpt", r, {n: cmds[n].get("description", "") for n in subs})))
    for name, c in cmds.items():
        pre = "ckpt " + (name + " " if name else "")
        by_name = {w: o.get("description", "") for o in c["options"] for w in o["names"]}
        longs = [w for o in c["options"] for w in o["names"] if w.startswith("--")]
        ask(pre + "--", lambda r, pre=pre, longs=longs, by_name=by_name: (
            check_set(f"fish: {pre}--", [w for w, _ in r], longs), descs(f"fish: {pre}", r, by_name)))
        if name:
            want = FILES if any(p.get("complete", "file") == "file" for p in c["operands"]) else []
            ask(pre, lambda r, pre=pre, want=want: check_set(
                f"fish: {pre}<TAB> (operands)", [w for w, _ in r if not w.startswith("-")], want))
        for o in c["options"]:
            if o["value"] is None:
                continue
            kind, values = expected_values(o)
            for w in o["names"]:
                ask(f"{pre}{w} ", lambda r, line=f"{pre}{w} ", values=values: check_set(
                    f"fish: {line}<TAB>", [x for x, _ in r], values))
                if w.startswith("--"):
                    ask(f"{pre}{w}=", lambda r, line=f"{pre}{w}=", w=w, values=values: check_set(
                        f"fish: {line}<TAB>", [x for x, _ in r], [f"{w}={v}" for v in values]))
    for line, check, rows in zip(lines, checks, fish_queries(path, lines, cwd)):
        check(rows)
    return len(lines)


# --- zsh -------------------------------------------------------------------------------------------

# Runs an interactive zsh in a pseudo-terminal with the completions' folder in fpath, types each
# query line and TAB; a completion widget records every match compadd adds (with its display
# string and whether it takes no suffix) in a file, between START and END lines.
ZSH_DRIVER = r"""
zmodload zsh/zpty || exit 3
dir=$1 out=$2 queries=$3
zpty z zsh -f -i
zpty -w z "stty cols 1000 rows 1000; PS1='' PROMPT='' RPROMPT=''; unsetopt zle_bracketed_paste 2>/dev/null"
zpty -w z "fpath=(${(q)dir} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "zstyle ':completion:*' list-grouped false; zstyle ':completion:*' insert-tab false; _cap_out=${(q)out}"
zpty -w z 'compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
  local -a __hits __dscr __tmp; local i T=$'"'"'\t'"'"'
  if (( $@[(I)-d] )); then __tmp=${@[$[${@[(i)-d]}+1]]}; if [[ $__tmp == \(* ]]; then eval "__dscr=$__tmp"; else __dscr=( "${(@P)__tmp}" ); fi; fi
  builtin compadd -A __hits -D __dscr "$@"; (( $#__hits )) || return 0
  local -A o; zparseopts -E -A o S: P: p: s: 2>/dev/null
  local nosp=0; (( $@[(I)-S] )) && [[ -z ${o[-S]} ]] && nosp=1
  for i in {1..$#__hits}; do print -r -- "${o[-P]}${__hits[$i]}${T}${__dscr[$i]}${T}$nosp" >> $_cap_out; done
}'
zpty -w z '_cap_complete() { print -r -- START >> $_cap_out; _main_complete "$@"; compstate[insert]=""; compstate[list]=""; print -r -- END >> $_cap_out; }'
zpty -w z "zle -C _cap_complete .complete-word _cap_complete; bindkey '^I' _cap_complete"
n=0
while IFS= read -r line; do
  (( n++ ))
  zpty -n -w z "$line"$'\t'
  for i in {1..400}; do
    while zpty -rt z junk 2>/dev/null; do :; done
    [[ -f $out && $(grep -c '^END$' $out) -ge $n ]] && break
    sleep 0.025
  done
  zpty -n -w z $'\C-u'
done < $queries
zpty -d z
"""


def zsh_queries(dir, lines, cwd):
    with tempfile.TemporaryDirectory() as tmp:
        q, out, drv = (os.path.join(tmp, n) for n in ("queries", "out", "driver.zsh"))
        Path(q).write_text("".join(l + "\n" for l in lines))
        Path(drv).write_text(ZSH_DRIVER)
        r = subprocess.run(["zsh", "-f", drv, dir, out, q], cwd=cwd, capture_output=True, text=True, timeout=300)
        if r.returncode == 3:
            return None
        text = Path(out).read_text() if os.path.exists(out) else ""
    blocks = re.findall(r"^START\n(.*?)^END$", text, re.S | re.M)
    if len(blocks) != len(lines):
        fail(f"zsh: {len(blocks)} of {len(lines)} completions answered")
        blocks += [""] * (len(lines) - len(blocks))
    result = []
    for b in blocks:
        rows = []
        for row in b.splitlines():
            word, disp, nosp = (row.split("\t") + ["", ""])[:3]
            desc = disp.split(" -- ", 1)[1] if " -- " in disp else ""
            rows.append((word, desc, nosp == "1"))
        result.append(rows)
    return result


def check_zsh(dir, cmds, cwd):
    run(["zsh", "-n", os.path.join(dir, "_ckpt")])
    subs = [n for n in cmds if n]
    lines, checks = [], []

    def ask(line, check):
        lines.append(line)
        checks.append(check)

    def descs(what, rows, by_name):
        for word, desc, _ in rows:
            if word in by_name and desc:
                check_desc(f"{what} {word}", desc, by_name[word])

    ask("ckpt ", lambda r: (check_set("zsh: ckpt <TAB>", [w for w, _, _ in r], subs),
                            descs("zsh: ckpt", r, {n: cmds[n].get("description", "") for n in subs})))
    for name, c in cmds.items():
        pre = "ckpt " + (name + " " if name else "")
        by_name = {w: o.get("description", "") for o in c["options"] for w in o["names"]}
        longs = [w for o in c["options"] for w in o["names"] if w.startswith("--")]
        ask(pre + "--", lambda r, pre=pre, longs=longs, by_name=by_name: (
            check_set(f"zsh: {pre}--", [w for w, _, _ in r], longs), descs(f"zsh: {pre}", r, by_name)))
        if name:
            want = FILES if any(p.get("complete", "file") == "file" for p in c["operands"]) else []
            ask(pre, lambda r, pre=pre, want=want: check_set(f"zsh: {pre}<TAB> (operands)", [w for w, _, _ in r], want))
        for o in c["options"]:
            if o["value"] is None:
                continue
            kind, values = expected_values(o)
            forms = [f"{pre}{w} " for w in o["names"]] + [f"{pre}{w}=" for w in o["names"] if w.startswith("--")]
            for line in forms:
                def check(r, line=line, values=values, o=o, kind=kind):
                    check_set(f"zsh: {line}<TAB>", [w for w, _, _ in r], values)
                    if kind == "choices" and any(ns != o["nospace"] for _, _, ns in r):
                        fail(f"zsh: {line}<TAB>: a space {'added' if o['nospace'] else 'missing'} after the choice")
                ask(line, check)
    results = zsh_queries(dir, lines, cwd)
    if results is None:
        print("zsh: no zsh/zpty module, so _ckpt is only syntax-checked", file=sys.stderr)
        return 0
    for check, rows in zip(checks, results):
        check(rows)
    return len(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", help="the binary: its --cli-spec (unless --spec) and its --help")
    ap.add_argument("--dir", help="the generated ckpt, _ckpt, ckpt.fish (default: generate them from the spec)")
    ap.add_argument("--spec", help="a ckpt.cli/1 file to use instead of `ckpt --cli-spec`; --help is then not compared")
    args = ap.parse_args()
    if not args.ckpt and not args.spec:
        ap.error("give --ckpt or --spec")
    spec_text = Path(args.spec).read_text() if args.spec else run([args.ckpt, "--cli-spec"])
    cmds = load_spec(spec_text)
    check_spec(cmds, None if args.spec else args.ckpt)

    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.path.join(tmp, "cwd")
        os.makedirs(cwd)
        for f in FILES:
            Path(cwd, f).touch()
        dir = args.dir
        if not dir:
            dir = os.path.join(tmp, "completions")
            gen = [sys.executable, str(ROOT / "completions" / "generate.py"), "--out", dir]
            gen += ["--spec", args.spec] if args.spec else ["--ckpt", args.ckpt]
            run(gen)
        counts = {"bash": check_bash(os.path.join(dir, "ckpt"), cmds, cwd)}
        for shell, check, path in (("fish", check_fish, os.path.join(dir, "ckpt.fish")),
                                   ("zsh", check_zsh, dir)):
            if shutil.which(shell):
                counts[shell] = check(path, cmds, cwd)
            else:
                fail(f"{shell} is not installed (scripts/deps.sh installs it)")

    if failures:
        sys.exit(f"{len(failures)} completion(s) differ from the spec or --help")
    print(f"completions match the spec{'' if args.spec else ' and --help'}: {len(cmds) - 1} commands, "
          f"{sum(len(c['options']) for c in cmds.values())} options; "
          + ", ".join(f"{s}: {n} completions asked" for s, n in counts.items()))


if __name__ == "__main__":
    main()
