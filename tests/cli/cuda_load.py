#!/usr/bin/env python3
"""ctest `load_stream_cpu` (no label) and `load_cuda` (label cuda): the streaming load against PyTorch's values.

The same script, arguments and report parsing on both devices (issue 40): `--device cuda` loads through the
pinned ring onto the GPU; `--device cpu` runs `ckpt load --device cpu --stream`, the same streaming load (plan,
reader threads, ring, watchdog, NaN/Inf counted by LibTorch's reductions where the tensors land, readback
through the ring) into CPU allocations, so that every CI run proves what only a GPU run proved before.

Every fixture with torch's CRC-32s and NaN/Inf counts (testdata/load/expected.json, */load_expected.json) and
the stream fixtures (tests/stream/gen_stream.py: 100,000 one-element storages, a storage spanning many chunks
with views and a tied alias, a legacy file with unaligned storages; written at test time by a Python with
torch) are loaded in one ckpt-torch process per ring configuration with --jsonl --checksum: the default ring,
one 64 KiB buffer, eight 64 KiB buffers. Every tensor's dtype, shape, NaN/Inf and CRC-32 must equal torch's,
the CRC-32s read back from the destination (stream.checksums == "device"), the ring made once for the run
(stream.ring_reused after the first input), the report valid against schemas/ckpt.load-1.schema.json.
With --device cuda it exits 77 (ctest SKIP_RETURN_CODE) where ckpt-torch has no CUDA or no CUDA device is
visible, saying which. As in load_cases.py, two limits of an older linked LibTorch are accepted and nothing
else: a tensor whose dtype it predates is skipped saying "is unknown to LibTorch", and LibTorch 1.x refuses a
torch 2 TorchScript archive that calls an operator it lacks (exit 3, naming it).

    cuda_load.py --ckpt build/ckpt --root . --device cpu|cuda [--work build/cuda_load]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402
from load_cases import DTYPE_SINCE  # noqa: E402

SKIP = 77
CONFIGS = (("default ring", []), ("one 64k buffer", ["--ring", "64k", "--chunk", "64k"]),
           ("eight 64k buffers", ["--ring", "512k", "--chunk", "64k"]))


def torch_python():
    for py in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def stream_cases(root, work):
    """gen_stream.py's files with their truth, written once into WORK/stream."""
    out = os.path.join(work, "stream")
    if not os.path.exists(os.path.join(out, "truth.json")):
        py = torch_python()
        if not py:
            print("note: no Python with torch here: the stream fixtures are left out")
            return []
        tmp = f"{out}.tmp{os.getpid()}"
        subprocess.run([py, os.path.join(root, "tests", "stream", "gen_stream.py"), tmp], check=True, timeout=600)
        os.makedirs(work, exist_ok=True)
        if not os.path.exists(os.path.join(out, "truth.json")):
            os.replace(tmp, out)
    files = json.load(open(os.path.join(out, "truth.json")))["files"]
    return [{"path": os.path.join(out, name), "file": f"stream/{name}", "tensors": t} for name, t in sorted(files.items())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    td = os.path.join(a.root, "testdata")
    schemas = json_schemas.Schemas(a.root)
    stream = ["--stream"] if a.device == "cpu" else []

    if a.device == "cuda":
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
        cases += [dict(c, path=os.path.join(td, c["file"])) for c in json.load(open(p))["loads"] if c["tensors"]]
    if a.work:
        cases += stream_cases(a.root, a.work)
    paths = [c["path"] for c in cases]
    failures, checked, accepted = [], 0, 0
    for label, extra in CONFIGS:
        p = subprocess.run([a.ckpt, "load", "--jsonl", "--checksum", "--device", a.device, *stream, *extra, *paths],
                           capture_output=True, text=True, timeout=600)
        if p.returncode not in (0, 1, 3):  # 1: a file with skipped (quantized, lazy) tensors; 3: refused below
            failures.append(f"{label}: rc {p.returncode}: {p.stderr.strip()[-500:]}")
        reports = []
        for line in p.stdout.splitlines():
            j = json.loads(line)
            # The schema check of 100,000 tensor rows takes jsonschema a minute: 200 rows stand for the rest
            # (whose fields are compared with torch's below).
            problems = schemas.problems(dict(j, tensors=j.get("tensors", [])[:200]))
            if problems:
                failures.append(f"{label}: schema: {problems}")
            reports.append(j)
        loads = [j for j in reports if j.get("schema") == "ckpt.load/1"]
        version = tuple(int(x) for x in loads[0]["libtorch"].split(".")[:2]) if loads else (0, 0)
        for i, j in enumerate(loads):
            st = j.get("stream") or {}
            if st.get("ring_reused") != (i > 0):
                failures.append(f"{label}: {j.get('file')}: ring_reused {st.get('ring_reused')} for load {i}")
            if st.get("staging") != ("host" if a.device == "cpu" else "pinned"):
                failures.append(f"{label}: {j.get('file')}: staging {st.get('staging')}")
        by_file = {os.path.normpath(j.get("file", "")): j for j in reports}
        for c in cases:
            rep = by_file.get(os.path.normpath(c["path"]))
            if rep and rep.get("schema") == "ckpt.error/1" and version < (2, 0) and rep.get("exit") == 3 \
                    and f"LibTorch {version[0]}." in rep.get("error", "") and "lacks operators" in rep["error"]:
                accepted += 1  # a torch 2 operator in the TorchScript code: refused, nothing to compare
                continue
            if not rep or rep.get("schema") != "ckpt.load/1":
                failures.append(f"{label}: {c['file']}: no report ({rep})")
                continue
            st = rep.get("stream") or {}
            if st.get("checksums") != "device":
                failures.append(f"{label}: {c['file']}: checksums not from the device: {st}")
            rows = {x["name"]: x for x in rep["tensors"]}
            for name, w in c["tensors"].items():
                x = rows.get(name)
                if x and x.get("state") == "skipped" and version < DTYPE_SINCE.get(w["dtype"], (0, 0)) \
                        and "is unknown to LibTorch" in x.get("reason", ""):
                    accepted += 1
                    continue
                if not x or x.get("state") != "loaded":
                    if not (x and "quantized" in x.get("reason", "")):  # quantized: not streamed
                        failures.append(f"{label}: {c['file']}:{name}: {x}")
                    continue
                checked += 1
                got = (x.get("crc32"), x["dtype"], x["shape"], x.get("nan"), x.get("inf"))
                want = (w["crc32"], w["dtype"], w["shape"], w["nan"], w["inf"])
                if got != want:
                    failures.append(f"{label}: {c['file']}:{name}: {got} != torch's {want}")
    for f in failures[:50]:
        print("FAIL:", f)
    print(f"{checked} tensors checked on {a.device} ({len(cases)} files x {len(CONFIGS)} rings), {accepted} left to an "
          f"older LibTorch's known limits, {len(failures)} failure(s)")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
