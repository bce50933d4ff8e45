#!/usr/bin/env python3
"""The malicious pickles in testdata/check/ try to create the file named by $CKPT_SENTINEL when Python
unpickles them (gen_check.py proved they do). Run every ckpt command on each of them and prove the
sentinel is never created: ckpt executes nothing a pickle asks for. The --json documents must also be
valid against schemas/ (json_schemas.py)."""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", required=True)
ap.add_argument("--root", required=True)
a = ap.parse_args()
files = sorted(glob.glob(os.path.join(a.root, "testdata", "check", "evil_*")) +
               glob.glob(os.path.join(a.root, "testdata", "check", "*hidden*")) +
               glob.glob(os.path.join(a.root, "testdata", "check", "nested_*")) +
               glob.glob(os.path.join(a.root, "testdata", "check", "stack_global_*")))
failed = 0
schemas = json_schemas.Schemas(a.root)
with tempfile.TemporaryDirectory() as tmp:
    sentinel = os.path.join(tmp, "pwned")
    env = dict(os.environ, CKPT_SENTINEL=sentinel)
    for f in files:
        for cmd in (["summary"], ["summary", "--json"], ["check"], ["check", "--json"]):
            p = subprocess.run([a.ckpt] + cmd + [f], env=env, capture_output=True, timeout=60)
            bad = os.path.exists(sentinel) or p.returncode not in (0, 1, 3)
            if bad:
                failed += 1
                print("FAIL", os.path.basename(f), cmd, p.returncode)
            problems = schemas.output_problems(p.stdout.decode("utf-8", "replace")) if "--json" in cmd and p.stdout.strip() else []
            if problems:
                failed += 1
                print("FAIL", os.path.basename(f), cmd, "; ".join(problems))
        if cmd and "check" in cmd:
            p = subprocess.run([a.ckpt, "check", f], env=env, capture_output=True, text=True)
            if "dangerous-global" not in p.stdout:
                failed += 1
                print("FAIL", os.path.basename(f), "no dangerous-global finding")
print("%d files, sentinel never created" % len(files) if not failed else "")
print("%d passed, %d failed" % (len(files) - min(failed, len(files)), min(failed, len(files))))
sys.exit(1 if failed else 0)
