#!/usr/bin/env python3
"""Every output ckpt gives on the whole fixture set, written to one directory (a file per command).

    outputs.py --ckpt build/ckpt --root . --out DIR [--no-torch]

Each file holds the command line, the exit code, stdout and stderr. Timings, memory figures and the
LibTorch version are masked, so two builds of the same behaviour write identical directories.
scripts/same-output.sh runs this for a reference commit and for the working tree and compares them:
the proof that a refactor changed no byte of text, markdown or JSON.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

SKIP_SUFFIXES = {".py", ".md", ".txt", ".sh"}

# load / forward figures that change from run to run
MASKS = [
    (re.compile(r'"(seconds|startup_seconds|read_seconds|check_seconds|load_seconds|arch_seconds|peak_rss|peak_rss_bytes|gbps|bandwidth_gbps)": [0-9.e+-]+'),
     r'"\1": X'),
    (re.compile(r'\d+\.\d+ (s|ms|GB/s)\b'), r'X \1'),
    (re.compile(r'peak RSS [0-9.]+ [kMGTP]?B'), 'peak RSS X'),
    (re.compile(r'"libtorch": "[^"]*"'), '"libtorch": X'),
    (re.compile(r'LibTorch [0-9][0-9A-Za-z.+]*'), 'LibTorch X'),
    (re.compile(r'^([WEI])\d{8} [0-9:.]+ +\d+ ', re.M), r'\1X '),  # glog prefix of LibTorch warnings
]


def inputs(root: Path):
    """Fixture files and the directories that are checkpoints themselves (DCP, sharded)."""
    out = []
    for p in sorted((root / "testdata").rglob("*")):
        rel = p.relative_to(root)
        if p.is_dir():
            if any(c.suffix == ".distcp" or c.name.endswith(".index.json") for c in p.iterdir()):
                out.append(rel)
            continue
        if p.suffix in SKIP_SUFFIXES or p.name.endswith("_expected.json") or p.name == "expected.json":
            continue
        out.append(rel)
    return out


def commands(root: Path, torch: bool):
    files = inputs(root)
    for sub in ([], ["summary"], ["check"], ["diff"], ["load"]):
        yield ["--help"] if not sub else sub + ["--help"]
    yield ["--version"]
    for f in files:
        f = str(f)
        yield ["summary", f]
        yield ["summary", f, "--depth", "-1"]
        yield ["summary", f, "--format", "markdown", "--depth", "2"]
        yield ["summary", f, "--json"]
        yield ["check", f]
        yield ["check", f, "--json", "--fail-on", "info"]
        if torch and not f.startswith("testdata/bad/"):
            yield ["load", f, "--device", "meta", "--json"]
            yield ["load", f, "--device", "cpu", "--tensors"]
    # diff: every pair of neighbours in a folder, with and without values
    by_dir = {}
    for f in files:
        by_dir.setdefault(str(f.parent), []).append(str(f))
    for d, fs in sorted(by_dir.items()):
        for a, b in zip(fs, fs[1:]):
            yield ["diff", a, b]
            yield ["diff", a, b, "--values", "--json"]
    for a in ("testdata/formats/diff",):
        fs = sorted(str(p.relative_to(root)) for p in (root / a).glob("*") if p.suffix not in SKIP_SUFFIXES)
        for x in fs:
            for y in fs:
                if x < y:
                    yield ["diff", x, y, "--values", "--atol", "1e-3"]
    # summary --model and the example-input forward
    fwd = root / "testdata" / "forward"
    if fwd.is_dir():
        archs = sorted(str(p.relative_to(root)) for p in fwd.glob("*arch*.pt"))
        sds = sorted(str(p.relative_to(root)) for p in fwd.glob("*_sd.pt"))
        for a in archs:
            for s in sds:
                yield ["summary", s, "--model", a]
                yield ["summary", s, "--model", a, "--json"]
        if torch:
            for a in archs:
                yield ["summary", a, "--example-input", "2x8"]
            for s in sds:
                for a in archs:
                    yield ["summary", s, "--model", a, "--example-input", "2x8", "--json"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-torch", action="store_true", help="leave out load and the forward (no ckpt-torch)")
    a = ap.parse_args()
    root = Path(a.root).resolve()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NO_COLOR="1")
    n = 0
    for cmd in commands(root, not a.no_torch):
        r = subprocess.run([a.ckpt] + cmd, cwd=root, env=env, capture_output=True, timeout=600)
        text = f"$ ckpt {' '.join(cmd)}\nexit {r.returncode}\n--- stdout\n"
        text += r.stdout.decode("utf-8", "backslashreplace") + "\n--- stderr\n" + r.stderr.decode("utf-8", "backslashreplace")
        for pat, rep in MASKS:
            text = pat.sub(rep, text)
        name = hashlib.sha1(" ".join(cmd).encode()).hexdigest()[:16] + ".txt"
        (out / name).write_text(text)
        n += 1
    print(f"{n} outputs in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
