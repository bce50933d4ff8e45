#!/usr/bin/env python3
"""Golden CLI cases as data (tests/cli/cases.json), in the manner of zstd's tests/cli-tests:
each case gives the arguments, the exit code, and what stdout / stderr must hold. Paths in args are
relative to the repository root. `stdout_golden` names a file under tests/cli/golden/ compared exactly;
`stdout_json` lists [json-pointer, value] pairs checked on stdout parsed as JSON.
Run with --update to rewrite golden files (then review the diff by hand)."""
import argparse
import json
import os
import re
import subprocess
import sys


def pointer(doc, ptr):
    for part in ptr.strip("/").split("/"):
        if part == "":
            continue
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--update", action="store_true")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    cases = json.load(open(os.path.join(here, "cases.json")))
    failed = 0
    for case in cases:
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        env.update(case.get("env", {}))
        cmd = [args.ckpt] + case["args"]
        p = subprocess.run(cmd, cwd=args.root, env=env, capture_output=True, timeout=60)
        out, err = p.stdout.decode(), p.stderr.decode()
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
        for s in case.get("stdout_lacks", []):
            if s in out:
                problems.append("stdout has %r" % s)
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
        status = "ok" if not problems else "FAIL"
        print("%-4s %s: ckpt %s" % (status, case["name"], " ".join(case["args"])))
        for pr in problems:
            print("     " + pr)
        failed += bool(problems)
    print("%d passed, %d failed" % (len(cases) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
