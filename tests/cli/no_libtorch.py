#!/usr/bin/env python3
"""Proves `ckpt summary` does not load LibTorch: the binary needs no libtorch/libc10 (ldd), and a real
run maps none (LD_DEBUG=libs lists every library the dynamic loader opens, dlopen included)."""
import argparse
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", required=True)
ap.add_argument("--fixture", required=True)
ap.add_argument("extra", nargs="*", help="more summary arguments (e.g. --model ARCH)")
a = ap.parse_args()

bad = ("libtorch", "libc10", "libcaffe2")
ldd = subprocess.run(["ldd", a.ckpt], capture_output=True, text=True).stdout
linked = [l for l in ldd.splitlines() if any(b in l for b in bad)]
env = dict(os.environ, LD_DEBUG="libs")
run = subprocess.run([a.ckpt, "summary", "--json", a.fixture, *a.extra], capture_output=True, text=True, env=env)
opened = [l for l in run.stderr.splitlines() if "calling init" in l]
loaded = [l for l in opened if any(b in l for b in bad)]
ok = run.returncode == 0 and not linked and not loaded and len(opened) > 0
print("linked:", linked or "none")
print("loaded at run time:", loaded or "none", "(of %d libraries)" % len(opened))
print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
sys.exit(0 if ok else 1)
