#!/usr/bin/python3
"""Many inputs (not part of CI): `ckpt check DIR` and `ckpt summary --jsonl DIR` on a directory of a few
hundred real checkpoints, against what a CI script does without them.

  /usr/bin/python3 bench/many_files.py [--ckpt build/ckpt] [--count 300] [--runs 3] [--dir /tmp/ckpt-bench/many]

The directory is made once (reused if it holds --count files): copies of the torch.save zip fixtures in
testdata/ that the Python baseline can read (written by real PyTorch through testdata's generators),
under varied names in ten subdirectories. Rows, each timed spawn to reap, best of --runs (median):

  python loop       one /usr/bin/python3 process that opens each file's zip and unpickles its data.pkl
                    with py_unpickler.py's stub unpickler (no storage read, nothing executed): the
                    cheapest Python loop over the files, and far less than `check` does
  ckpt per file     `ckpt check FILE` (or `summary --jsonl FILE`) spawned once per file, as
                    `find | xargs -n1` would
  ckpt DIR          one ckpt over the directory, default threads (one per core) and -j1

Ratios are the row's time over the Python loop's. Standard library only.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import py_unpickler  # noqa: E402

PY_LOOP = r"""
import sys, zipfile
sys.path.insert(0, sys.argv[1])
import py_unpickler
tensors = 0
for path in sys.argv[2:]:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1)
        with z.open(name) as f:
            obj = py_unpickler.StubUnpickler(f).load()
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]
    if isinstance(obj, dict):
        tensors += sum(py_unpickler.tensor_of(v) is not None for v in obj.values())
print(len(sys.argv) - 2, "files", tensors, "tensors")
"""


def readable(path):
    """Whether the Python baseline reads this file: a torch.save zip whose data.pkl unpickles with stubs."""
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if not names or any(n.startswith("code/") or "/code/" in n for n in z.namelist()):
                return False  # TorchScript archives: not what the loop models
            with z.open(names[0]) as f:
                py_unpickler.StubUnpickler(f).load()
        return True
    except Exception:  # noqa: BLE001 - anything the baseline cannot read is left out
        return False


def make_dir(target, count):
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(target) for f in fs) if os.path.isdir(target) else []
    if len(files) == count:
        return files
    shutil.rmtree(target, ignore_errors=True)
    sources = []
    for sub in ("t113", "t26", "t214", "check", "load"):  # not permissive/: files built to be odd
        for dp, _, fs in os.walk(os.path.join(ROOT, "testdata", sub)):
            for f in sorted(fs):
                p = os.path.join(dp, f)
                if f.endswith((".pt", ".pth", ".ckpt")) and os.path.getsize(p) < (64 << 20) and readable(p):
                    sources.append(p)
    sources.sort()
    if not sources:
        sys.exit("many_files: no readable torch.save zip in testdata/")
    os.makedirs(target)
    files = []
    for k in range(count):
        src = sources[k % len(sources)]
        stem, ext = os.path.splitext(os.path.basename(src))
        d = os.path.join(target, "run%02d" % (k % 10))
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, "%04d_%s%s" % (k, stem, ext))
        shutil.copyfile(src, dst)
        files.append(dst)
    print("many_files: %d copies of %d fixtures in %s (%.1f MB)" % (count, len(sources), target,
                                                                     sum(os.path.getsize(f) for f in files) / 1e6), file=sys.stderr)
    return sorted(files)


def timed(cmds, runs):
    """Best and median wall seconds of running the commands one after another, stdout discarded."""
    times = []
    for r in range(runs + 1):  # the first run warms the page cache, untimed
        t0 = time.perf_counter()
        for cmd in cmds:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r:
            times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", default=os.path.join(ROOT, "build", "ckpt"))
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("BENCH_DIR", "/tmp/ckpt-bench"), "many"))
    a = ap.parse_args()
    files = make_dir(a.dir, a.count)
    ckpt = a.ckpt
    rows = [("python loop: unpickle each data.pkl (1 process, /usr/bin/python3)",
             [["/usr/bin/python3", "-c", PY_LOOP, HERE] + files])]
    rc = subprocess.run([ckpt, "check", a.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    for what, args in (("check", ["check"]), ("summary --jsonl", ["summary", "--jsonl"])):
        rows.append(("`ckpt %s DIR` (threads: one per core)" % what, [[ckpt] + args + [a.dir]]))
        rows.append(("`ckpt %s -j1 DIR`" % what, [[ckpt] + args + ["-j1", a.dir]]))
        rows.append(("`ckpt %s FILE` once per file" % what, [[ckpt] + args + [f] for f in files]))
    results = []
    for label, cmds in rows:
        best, median = timed(cmds, a.runs)
        results.append((label, best, median))
        print("many_files: %-60s %.3f s" % (label, best), file=sys.stderr)
    base = results[0][1]
    print("%d files, %.1f MB, in %s; %d core(s); ckpt check DIR exit %d; best of %d (median)\n" % (
        len(files), sum(os.path.getsize(f) for f in files) / 1e6, a.dir, os.cpu_count() or 1, rc, a.runs))
    print("| command | best s (median) | per file ms | vs python loop |")
    print("|---|---|---|---|")
    for label, best, median in results:
        print("| %s | %.3f (%.3f) | %.2f | %.2fx |" % (label, best, median, 1e3 * best / len(files), best / base))


if __name__ == "__main__":
    main()
