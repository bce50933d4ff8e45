#!/usr/bin/env python3
"""What the streaming load's readers need (issue 40): page-cache read bandwidth by chunk size and reader count.

The CUDA load's reader threads only pread chunks of a file into the pinned ring and queue the copies; the
copy engines then need the ring to hold enough chunks in flight. This measures, on any machine, the first
half: pread from a warm page cache into page-aligned buffers (each thread its own two buffers, as in the
ring), for chunk sizes 256 KiB to 64 MiB and 1 .. N readers, and the CPU twin's whole load phase
(`ckpt load --device cpu --stream --chunk C`, which adds the sink's memcpy) for the same chunk sizes.

    python3 bench/ring_reads.py [--ckpt build/ckpt] [--size 1G] [--workdir /tmp/ckpt-ring] [--runs 3]

docs/load.md ("The ring's size") quotes its figures; bench/RESULTS.md keeps them with the machine named.
"""
import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", default="")
ap.add_argument("--size", default="1G")
ap.add_argument("--workdir", default="/tmp/ckpt-ring")
ap.add_argument("--runs", type=int, default=3)
a = ap.parse_args()
size = int(a.size[:-1]) << {"k": 10, "M": 20, "G": 30}[a.size[-1]] if a.size[-1] in "kMG" else int(a.size)
os.makedirs(a.workdir, exist_ok=True)
raw = os.path.join(a.workdir, "raw.bin")
if not os.path.exists(raw) or os.path.getsize(raw) != size:
    with open(raw, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
with open(raw, "rb") as f:  # warm
    while f.read(64 << 20):
        pass

cores = os.cpu_count() or 1
print(f"{cores} cores, file {size >> 20} MiB in the page cache; GB/s = 1e9 bytes/s, median of {a.runs}")


def pread_all(chunk, readers):
    fd = os.open(raw, os.O_RDONLY)
    n = size // chunk
    nxt = [0]
    lock = threading.Lock()

    def work():
        bufs = [mmap.mmap(-1, chunk), mmap.mmap(-1, chunk)]  # page-aligned, two per reader as in the ring
        i = 0
        while True:
            with lock:
                c = nxt[0]
                nxt[0] += 1
            if c >= n:
                return
            os.preadv(fd, [bufs[i % 2]], c * chunk)
            i += 1

    t0 = time.perf_counter()
    ts = [threading.Thread(target=work) for _ in range(readers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    os.close(fd)
    return n * chunk / dt / 1e9


chunks = [256 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 64 << 20]
readers = sorted({1, 2, 4, 8, cores} & set(range(1, cores + 1)) | {1})
res = {"cores": cores, "size": size, "pread": {}, "ckpt": {}}
print("pread GB/s by chunk (rows) and readers (columns)")
print("chunk     " + "".join(f"{r:>8}" for r in readers))
for c in chunks:
    row = []
    for r in readers:
        row.append(statistics.median(pread_all(c, r) for _ in range(a.runs)))
        res["pread"][f"{c}/{r}"] = row[-1]
    print(f"{c >> 10:>6} KiB" + "".join(f"{x:8.2f}" for x in row))

if a.ckpt:
    # A real state dict of the same size for the CPU twin: float32 tensors of 16 MiB.
    pt = os.path.join(a.workdir, "sd.pt")
    if not os.path.exists(pt):
        code = ("import torch,sys; n=int(sys.argv[2]); "
                "torch.save({f'w{i}': torch.ones(4 << 20) for i in range(n)}, sys.argv[1])")
        for py in (sys.executable, "/usr/bin/python3"):
            if subprocess.run([py, "-c", code, pt, str(max(1, size >> 24))], stderr=subprocess.DEVNULL).returncode == 0:
                break
    print("ckpt load --device cpu --stream: load phase GB/s (reads + the CPU sink's memcpy) by chunk")
    for c in chunks:
        got = []
        for _ in range(a.runs):
            p = subprocess.run([a.ckpt, "load", "--device", "cpu", "--stream", "--json", "--chunk", f"{c >> 10}k", pt],
                               capture_output=True, text=True, timeout=300)
            j = json.loads(p.stdout)
            got.append(j["totals"]["bytes_read"] / j["stream"]["seconds"] / 1e9)
        res["ckpt"][str(c)] = statistics.median(got)
        print(f"{c >> 10:>6} KiB {res['ckpt'][str(c)]:8.2f}  ({j['stream']['threads']} readers, {j['stream']['slots']} slots)")
json.dump(res, open(os.path.join(a.workdir, "ring_reads.json"), "w"), indent=1)
