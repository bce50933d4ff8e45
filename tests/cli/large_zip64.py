#!/usr/bin/env python3
"""zip64: writes a >4 GiB torch.save file with real PyTorch (testdata/gen_large.py under /usr/bin/python3),
then checks `ckpt summary --json` against the numbers PyTorch wrote beside it. Deletes the file after."""
import argparse
import json
import os
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", required=True)
ap.add_argument("--root", required=True)
ap.add_argument("--workdir", required=True)
a = ap.parse_args()
os.makedirs(a.workdir, exist_ok=True)
try:
    subprocess.run(["/usr/bin/python3", os.path.join(a.root, "testdata", "gen_large.py"), a.workdir], check=True)
    exp_path = [f for f in os.listdir(a.workdir) if f.endswith(".expected.json")][0]
    exp = json.load(open(os.path.join(a.workdir, exp_path)))
    path = os.path.join(a.workdir, exp["fixture"])
    p = subprocess.run([a.ckpt, "summary", "--json", path], capture_output=True, text=True)
    problems = []
    if p.returncode != 0:
        problems.append("exit %d: %s" % (p.returncode, p.stderr))
    else:
        got = json.loads(p.stdout)
        for k, v in exp["totals"].items():
            if got["totals"][k] != v:
                problems.append("totals.%s = %r, expected %r" % (k, got["totals"][k], v))
        byname = {t["name"]: t for t in got["tensors"]}
        for t in exp["tensors"]:
            for f in ("dtype", "shape", "stride", "numel", "bytes", "offset"):
                if byname.get(t["name"], {}).get(f) != t[f]:
                    problems.append("%s.%s differs" % (t["name"], f))
    for pr in problems:
        print(pr)
    print("%d passed, %d failed" % (0 if problems else 1, 1 if problems else 0))
    sys.exit(1 if problems else 0)
finally:
    shutil.rmtree(a.workdir, ignore_errors=True)
