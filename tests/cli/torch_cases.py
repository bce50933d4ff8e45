#!/usr/bin/env python3
"""Runner of the CLI cases that need LibTorch (ckpt execs ckpt-torch), against PyTorch's own numbers.
The cases live in two modules, each a suite with one entry point run(t):

  load      load_cases.py: `ckpt load`
  forward   forward_cases.py: `ckpt summary --example-input`

This file is their one harness: running ckpt, parsing its JSON and validating it against schemas/
(json_schemas.py: every JSON document a case prints is a check), counting checks, printing every failed
check as it happens and a tally per suite; the exit code is 1 when any check of any suite failed.
ctest runs each suite as its own test (load_cases, forward_cases), so each keeps its own timeout.

    torch_cases.py --ckpt build/ckpt --root . [load] [forward]      # no suite named: both
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward_cases  # noqa: E402
import json_schemas  # noqa: E402
import load_cases  # noqa: E402

SUITES = {"load": load_cases, "forward": forward_cases}


class Harness:
    """One suite's view of ckpt and its tally of checks."""

    def __init__(self, ckpt, root):
        self.ckpt = ckpt
        self.root = root
        self.td = os.path.join(root, "testdata")
        self.checks = 0
        self.failures = []
        self.schemas = json_schemas.Schemas(root)

    def check(self, cond, what):
        self.checks += 1
        if not cond:
            self.failures.append(what)
            print("FAIL:", what)

    def run(self, *args, exe=None):
        """(exit code, stdout, stderr) of `ckpt ARGS` (or another binary: exe)."""
        p = subprocess.run([exe or self.ckpt, *args], capture_output=True, text=True, timeout=300)
        if p.stdout.strip() and (p.stdout.lstrip()[0] in "{[" or json_schemas.wants_json(args)):
            problems = self.schemas.output_problems(p.stdout)
            self.check(not problems, "ckpt %s: JSON against schemas/: %s" % (" ".join(map(str, args)), "; ".join(problems)))
        return p.returncode, p.stdout, p.stderr

    def run_json(self, *args, exe=None):
        """Like run, with stdout parsed as JSON: None when it is not JSON."""
        rc, out, err = self.run(*args, exe=exe)
        try:
            return rc, json.loads(out), err
        except json.JSONDecodeError:
            return rc, None, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("suites", nargs="*", metavar="SUITE", help="load and/or forward (default: both)")
    a = ap.parse_args(argv)
    for name in a.suites:
        if name not in SUITES:
            ap.error(f"unknown suite {name!r} (choose from {', '.join(SUITES)})")
    failed = []
    for name in a.suites or list(SUITES):
        t = Harness(a.ckpt, a.root)
        SUITES[name].run(t)
        print(f"{name} cases: {t.checks - len(t.failures)}/{t.checks} checks passed")
        if t.failures:
            print(f"{name} cases: {len(t.failures)} failure(s)")
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
