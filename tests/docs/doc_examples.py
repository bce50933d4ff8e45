#!/usr/bin/env python3
"""Runs every example in README.md and docs/*.md and compares its output, so that docs drift fails CI.

An example is a fenced block whose info string starts with `console` (docs/writing-docs.md has the
rules): `$ ` lines are commands, run with bash from the repository root with the built `ckpt` (and
`ckpt-torch`) first on PATH, and the lines after each command are its expected output, stdout and
stderr as one stream. Expected lines match exactly, after trailing spaces are dropped, except:
  - a line that is exactly `...` matches any number of lines (none included);
  - `[..]` inside a line matches any text within that line.
Markers after `console` in the info string: `ckpt-torch` (skipped, with the reason printed, when no
ckpt-torch was built) and `cuda` (skipped unless ckpt-torch reports a CUDA device).

  doc_examples.py --ckpt build/ckpt [--ckpt-torch build/ckpt-torch] [--root DIR] [FILE.md ...]
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(`{3,})(.*)$")
MARKERS = {"ckpt-torch", "cuda"}


def blocks(path):
    """Yields (line number, markers, lines) for each console block of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).split()
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i] != fence:
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise SystemExit(f"{path}:{start + 1}: unclosed code fence")
        i += 1
        if info and info[0] == "console":
            unknown = set(info[1:]) - MARKERS
            if unknown:
                raise SystemExit(f"{path}:{start + 1}: unknown console marker(s) {sorted(unknown)}")
            yield start + 1, set(info[1:]), body


def commands(path, lineno, body):
    """Splits a console block into (line number, command, expected lines)."""
    out = []
    i = 0
    if body and not body[0].startswith("$ "):
        raise SystemExit(f"{path}:{lineno + 1}: a console block starts with a `$ ` command line")
    while i < len(body):
        line_at = lineno + 1 + i
        cmd = body[i][2:]
        while cmd.endswith("\\") and i + 1 < len(body):
            i += 1
            cmd = cmd[:-1] + body[i].lstrip()
        i += 1
        expected = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        out.append((line_at, cmd, expected))
    return out


def line_regex(pattern):
    parts = pattern.split("[..]")
    return re.compile(".*".join(re.escape(p) for p in parts) + r"\Z", re.S)


def matches(expected, actual):
    """Whether actual lines fit the expected lines with `...` and `[..]` wildcards."""
    regs = [None if e == "..." else line_regex(e) for e in expected]
    # reach[j]: expected[:i] can match actual[:j]
    reach = [True] + [False] * len(actual)
    for r in regs:
        nxt = [False] * (len(actual) + 1)
        if r is None:
            seen = False
            for j in range(len(actual) + 1):
                seen = seen or reach[j]
                nxt[j] = seen
        else:
            for j in range(len(actual)):
                if reach[j] and r.match(actual[j]):
                    nxt[j + 1] = True
        reach = nxt
    return reach[len(actual)]


def trim(lines):
    lines = [l.rstrip() for l in lines]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def has_cuda(ckpt_torch):
    if not ckpt_torch:
        return False
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--ckpt-torch")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    files = args.files or ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    torch = args.ckpt_torch if args.ckpt_torch and os.access(args.ckpt_torch, os.X_OK) else None
    cuda = has_cuda(torch)

    with tempfile.TemporaryDirectory(prefix="ckpt-doc-examples-") as bindir:
        # Symlinks, so that `ckpt load` still finds ckpt-torch beside the real executable.
        os.symlink(os.path.abspath(args.ckpt), os.path.join(bindir, "ckpt"))
        if torch:
            os.symlink(os.path.abspath(torch), os.path.join(bindir, "ckpt-torch"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), LC_ALL="C.UTF-8")
        for k in ("NO_COLOR", "CKPT_TORCH", "CKPT_PRECHECK_FD"):
            env.pop(k, None)
        ran = failed = skipped = 0
        for rel in files:
            path = os.path.join(root, rel)
            for lineno, markers, body in blocks(path):
                reason = None
                if "ckpt-torch" in markers and not torch:
                    reason = "needs ckpt-torch, which this build does not have (-DCKPT_WITH_TORCH=OFF)"
                elif "cuda" in markers and not cuda:
                    reason = "needs ckpt-torch and a CUDA GPU"
                for at, cmd, expected in commands(rel, lineno, body):
                    if reason:
                        print(f"SKIP {rel}:{at}: {cmd}: {reason}")
                        skipped += 1
                        continue
                    ran += 1
                    try:
                        r = subprocess.run(["bash", "-c", cmd], cwd=root, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, timeout=300)
                        actual = r.stdout.decode("utf-8", "replace").split("\n")
                    except subprocess.TimeoutExpired:
                        actual = ["(timed out after 300 s)"]
                    want, got = trim(expected), trim(actual)
                    if matches(want, got):
                        continue
                    failed += 1
                    print(f"FAIL {rel}:{at}: $ {cmd}")
                    sys.stdout.writelines(
                        l + "\n" for l in difflib.unified_diff(want, got, "documented", "actual", lineterm=""))
        print(f"{ran} example command(s) run, {failed} failed, {skipped} skipped")
        if ran == 0:
            print("no example ran: the docs have no console blocks, or every one was skipped")
            return 1
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
