#!/usr/bin/env python3
"""Golden CLI cases as data (tests/cli/cases.json), in the manner of zstd's tests/cli-tests:
each case gives the arguments, the exit code, and what stdout / stderr must hold. Paths in args are
relative to the repository root. `stdout_golden` names a file under tests/cli/golden/ compared exactly;
`stdout_json` lists [json-pointer, value] pairs checked on stdout parsed as JSON; `stdout_jsonl` lists
[line, json-pointer, value] for JSON Lines (several inputs): every line must be one whole document.
`stdout_lines` is the number of lines stdout must have (one JSON Lines document per input).
`stdout_order` lists strings that must appear in stdout in that order.
`stdin_file` (a path relative to the root) is piped to ckpt's stdin (a pipe, not a file: `-` must spool it).
Every case that prints JSON (or asks for it) is also validated against schemas/ (json_schemas.py).
`stdout_terminal_safe` / `stderr_terminal_safe` (true) check the raw bytes: valid UTF-8, no control
character but LF, no DEL, no C1 (U+0080-U+009F) or bidi control (U+061C, U+200E, U+200F,
U+202A-U+202E, U+2066-U+2069): what a name from a hostile file must never put on a terminal.
Run with --update to rewrite golden files (then review the diff by hand)."""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402


def pointer(doc, ptr):
    for part in ptr.strip("/").split("/"):
        if part == "":
            continue
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


HIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_unsafe(raw):
    """Why the bytes `raw` are not safe to print, or None."""
    try:
        text = raw.decode("utf-8")  # strict: no invalid bytes, overlong forms or surrogates
    except UnicodeDecodeError as e:
        return "not UTF-8: %s" % e
    m = HIDDEN.search(text)
    return None if m is None else "raw U+%04X at %d: %r" % (ord(m.group()), m.start(), text[max(0, m.start() - 20): m.end() + 20])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--update", action="store_true")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    cases = json.load(open(os.path.join(here, "cases.json")))
    schemas = json_schemas.Schemas(args.root)
    failed = validated = 0
    for case in cases:
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        env.update(case.get("env", {}))
        cmd = [args.ckpt] + case["args"]
        stdin = None
        if "stdin_file" in case:
            with open(os.path.join(args.root, case["stdin_file"]), "rb") as f:
                stdin = f.read()
        sink = case.get("stdout_to")  # "/dev/full" or "closed-pipe": stdout that cannot be written
        if sink:
            if sink == "closed-pipe":
                r, w = os.pipe()
                os.close(r)
                target = os.fdopen(w, "wb")
            else:
                target = open(sink, "wb")
            with target:
                p = subprocess.run(cmd, cwd=args.root, env=env, stdout=target, stderr=subprocess.PIPE, timeout=60,
                                   input=stdin)
            p.stdout = b""
        else:
            p = subprocess.run(cmd, cwd=args.root, env=env, capture_output=True, timeout=60, input=stdin)
        # Not UTF-8 would be a finding of its own (the *_terminal_safe checks), not a crash of the runner.
        out, err = p.stdout.decode(errors="surrogateescape"), p.stderr.decode(errors="surrogateescape")
        problems = []
        if p.returncode != case.get("exit", 0):
            problems.append("exit %d, expected %d" % (p.returncode, case.get("exit", 0)))
        if "stdout_golden" in case:
            path = os.path.join(here, "golden", case["stdout_golden"])
            if args.update:
                open(path, "w").write(out)
            elif open(path).read() != out:
                problems.append("stdout differs from golden/%s:\n%s" % (case["stdout_golden"], out))
        for s in case.get("stdout_contains", []):
            if s not in out:
                problems.append("stdout lacks %r" % s)
        at = 0
        for s in case.get("stdout_order", []):  # these, one after another in this order
            found = out.find(s, at)
            if found < 0:
                problems.append("stdout lacks %r after offset %d" % (s, at))
            else:
                at = found + len(s)
        if "stdout_lines" in case and len(out.splitlines()) != case["stdout_lines"]:
            problems.append("stdout has %d lines, expected %d" % (len(out.splitlines()), case["stdout_lines"]))
        for s in case.get("stdout_lacks", []):
            if s in out:
                problems.append("stdout has %r" % s)
        for stream, raw in (("stdout", p.stdout), ("stderr", p.stderr)):
            if case.get(stream + "_terminal_safe") and terminal_unsafe(raw):
                problems.append("%s not terminal-safe: %s" % (stream, terminal_unsafe(raw)))
        if "stderr_regex" in case and not re.search(case["stderr_regex"], err):
            problems.append("stderr %r does not match %r" % (err, case["stderr_regex"]))
        if case.get("stderr_empty") and err:
            problems.append("stderr not empty: %r" % err)
        if case.get("stdout_empty") and out:
            problems.append("stdout not empty: %r" % out)
        if "stdout_json" in case:
            try:
                doc = json.loads(out)
                for ptr, want in case["stdout_json"]:
                    got = pointer(doc, ptr)
                    if got != want:
                        problems.append("%s = %r, expected %r" % (ptr, got, want))
            except Exception as e:  # noqa: BLE001 - report any parse / lookup failure
                problems.append("stdout is not the expected JSON: %s" % e)
        if "stdout_jsonl" in case:
            lines = out.splitlines()
            for n, line in enumerate(lines):
                try:
                    json.loads(line)
                except ValueError as e:
                    problems.append("stdout line %d is not one JSON document: %s: %r" % (n + 1, e, line[:200]))
            for n, ptr, want in case["stdout_jsonl"]:
                try:
                    got = pointer(json.loads(lines[n]), ptr)
                    if got != want:
                        problems.append("line %d %s = %r, expected %r" % (n, ptr, got, want))
                except Exception as e:  # noqa: BLE001 - report any parse / lookup failure
                    problems.append("line %d %s: %s" % (n, ptr, e))
        if out.strip() and (out.lstrip()[0] in "{[" or json_schemas.wants_json(case["args"])):
            validated += 1
            problems += ["schema: " + pr for pr in schemas.output_problems(out)]
        status = "ok" if not problems else "FAIL"
        print("%-4s %s: ckpt %s" % (status, case["name"], " ".join(case["args"])))
        for pr in problems:
            print("     " + pr)
        failed += bool(problems)
    print("%d passed, %d failed; %d JSON outputs validated against schemas/" % (len(cases) - failed, failed, validated))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
