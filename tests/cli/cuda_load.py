#!/usr/bin/env python3
"""ctest `load_cuda` (label cuda): `ckpt load --device cuda` on a GPU against PyTorch's values.

Every fixture with torch's CRC-32s and NaN/Inf counts (testdata/load/expected.json, */load_expected.json) is
loaded in one ckpt-torch process with --json --checksum, through the pinned ring (--staging pinned), with the
default staging (auto: page-cache chunks registered in place where the GPU can), and through a ring of one
64 KiB buffer; every tensor's dtype, shape, NaN/Inf and CRC-32 must equal torch's, and the CRC-32s must come
from the device (stream.checksums == "device"). Exits 77 (ctest SKIP_RETURN_CODE) where ckpt-torch has no CUDA
or no CUDA device is visible, saying which.

    cuda_load.py --ckpt build/ckpt --root .
"""
import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402

SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    td = os.path.join(a.root, "testdata")
    schemas = json_schemas.Schemas(a.root)

    probe = subprocess.run([a.ckpt, "load", "--device", "cuda", os.path.join(td, "load", "nan_inf.pt")],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode == 4 and "CUDA" in probe.stderr:
        print("skipped: " + probe.stderr.strip())
        return SKIP
    if probe.returncode != 0:
        print(f"FAIL: probe: rc {probe.returncode} {probe.stderr.strip()}")
        return 1

    cases = []
    for p in [os.path.join(td, "load", "expected.json")] + sorted(glob.glob(os.path.join(td, "*", "load_expected.json"))) \
            + sorted(glob.glob(os.path.join(td, "pt2", "*", "load_expected.json"))):
        cases += [c for c in json.load(open(p))["loads"] if c["tensors"]]
    paths = [os.path.join(td, c["file"]) for c in cases]
    failures, checked = [], 0
    for label, extra in (("pinned", ["--staging", "pinned"]), ("auto", []),
                         ("one 64k buffer", ["--ring", "64k", "--chunk", "64k"])):
        p = subprocess.run([a.ckpt, "load", "--json", "--checksum", "--device", "cuda", *extra, *paths],
                           capture_output=True, text=True, timeout=600)
        reports = {}
        for line in p.stdout.splitlines():
            problems = schemas.output_problems(line)
            if problems:
                failures.append(f"{label}: schema: {problems}")
            j = json.loads(line)
            reports[os.path.normpath(j.get("file", ""))] = j
        for c, path in zip(cases, paths):
            rep = reports.get(os.path.normpath(path))
            if not rep or rep.get("schema") != "ckpt.load/1":
                failures.append(f"{label}: {c['file']}: no report ({rep})")
                continue
            st = rep.get("stream") or {}
            if st.get("checksums") != "device":
                failures.append(f"{label}: {c['file']}: checksums not from the device: {st}")
            rows = {x["name"]: x for x in rep["tensors"]}
            for name, w in c["tensors"].items():
                x = rows.get(name)
                if not x or x.get("state") != "loaded":
                    if not (x and "quantized" in x.get("reason", "")):  # quantized: cpu and meta only
                        failures.append(f"{label}: {c['file']}:{name}: {x}")
                    continue
                checked += 1
                got = (x.get("crc32"), x["dtype"], x["shape"], x.get("nan"), x.get("inf"))
                want = (w["crc32"], w["dtype"], w["shape"], w["nan"], w["inf"])
                if got != want:
                    failures.append(f"{label}: {c['file']}:{name}: {got} != torch's {want}")
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} tensors checked on cuda, {len(failures)} failure(s)")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
