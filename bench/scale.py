#!/usr/bin/python3
"""Scale (issue 43): ckpt's time and memory against entry count, 1k to 1M entries, beside the
pure-Python readers (not part of CI).

  /usr/bin/python3 bench/scale.py                       # everything: 1k, 10k, 100k, 1M (files made once)
  bench/scale.py --sizes 1k,10k --runs 5                # some sizes, more runs
  bench/scale.py --only torch,shards                    # groups: torch, shards, optim (default all three)
  bench/scale.py --ckpt /tmp/b/ckpt --dir /data/scale   # another binary, another scratch dir

Inputs, written once into --dir (default $CKPT_SCALE_DIR or /tmp/ckpt-scale) and reused; each is written
under a temporary name beside it and renamed into place only when complete, so a reused file is never a
torn one:

  torch    sd-SIZE.pt: a torch.save state dict (Debian's torch 1.13, run as --torch-python, default
           /usr/bin/python3) of SIZE float32 [2, 2] zeros, one storage each (the zip has SIZE + 2
           members), keys model.layers.L.mlp.experts.E.wK.weight (64 experts of w1..w3 per layer) and
           `_metadata` (one {"version": 1} per module prefix) as nn.Module.state_dict() attaches it.
           sd-SIZE-b.pt: the same names, one changed shape (the middle entry [2, 2] -> [3, 2]), written
           by the same process right after: the second operand of `ckpt diff`. 1M entries take about
           80 s per file here.
  shards   shards-SIZE/: model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}, as
           transformers writes it: indent 2, sorted keys) and model-0000K-of-0000N.safetensors shards
           holding the same SIZE names in order, 1k in 1 shard, 10k in 2, 100k in 8, 1M in 40 (other
           sizes: one shard per 25k tensors). Written with safetensors' save_file when the running Python
           has it, else with struct + json byte for byte as safetensors 0.8's save_file writes them
           (8-byte little-endian header length, compact JSON header, __metadata__ {"format": "pt"} first,
           tensors sorted by name, header padded with spaces to 8 bytes, then the data).
  optim    optim-100k.pt: {"model": state_dict, "optimizer": Adam.state_dict()} of an nn.Module with
           100,000 [2, 2] parameters (--optim-params) after one Adam step: 400,000 tensors (the
           parameters, then exp_avg, exp_avg_sq and the step tensor of torch 1.13 per parameter).

Rows, each a whole process (spawn to reap) with stdout to /dev/null and the page cache warm:

  torch    ckpt summary F, ckpt check F, ckpt diff F F-b, ckpt load --device meta F (n/a when ckpt has
           no ckpt-torch: exit 4), and py_unpickler (bench/py_unpickler.py F under --python, default
           /usr/bin/python3: the zip's data.pkl unpickled with stubs, no storage read)
  shards   ckpt summary DIR, ckpt check DIR, and py safetensors headers (--python -c: the index's
           weight_map, then each shard's 8-byte length and JSON header, tensors and parameters counted;
           standard library only)
  optim    ckpt summary F, ckpt check F, py_unpickler F

Each command runs once untimed under /usr/bin/time (the warm-up, and GNU time's %M is the peak RSS:
bench/measure.py says why not wait4), then --runs (default 3) timed runs, interleaved: round after round,
every row of a group once per round, so ckpt and its peer see the same machine. Exit status 0 or 1 is
success (check: findings; diff: differences); 2 or more is a failed row with stderr's last line.
`--limit NAME=VALUE` (repeatable) is passed to every ckpt command, e.g. `--limit memo-entries=100M` for a
state dict larger than these: the 1M state dict's data.pkl memoizes about 10.7M objects (8 per tensor, 2 per
`_metadata` module), within ckpt's default memo-entries limit of 50M.

Printed (markdown): per group a table of entries, command, median ms, ms per 1k entries, peak RSS MiB,
KiB per entry (peak RSS / entries read: diff reads both files, twice the entries), KiB per entry over the 1k
baseline ((RSS - the same command's RSS at 1k) / (entries read - those at 1k): the process's fixed ~8 MiB
left out), the peer's median ms and ckpt / peer (of the medians; diff reads two files against the peer's
one). Then the goals, met or not met with the numbers:

  1. ckpt summary and check <= 0.3x py_unpickler at every state dict size (the optimizer file beside it)
  2. ckpt summary and check <= 0.5x the header reader on the 100k (8 shards) and 1M (40 shards) sets
  3. ms per 1k entries flat within 1.5x (slowest / fastest) from 10k to 1M, per ckpt command and group
     (load --device meta printed aside: its fixed LibTorch start-up, ~0.9 s here, rules at 10k)
  4. <= 1 KiB of peak RSS per entry: over the 1k baseline at every size above 1k, and plain RSS / entries
     at 100k and up, per ckpt command and group (load --device meta printed aside: it holds a LibTorch
     tensor per entry, ~360 bytes of TensorImpl and StorageImpl on meta in LibTorch 1.13, besides the records)

Standard library only (torch only in the --torch-python child that writes the .pt files).
"""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

EXPERTS = 64   # experts per layer
WEIGHTS = 3    # w1, w2, w3 per expert
SHARDS = {1000: 1, 10000: 2, 100000: 8, 1000000: 40}
GOAL_UNPICKLER = 0.3
GOAL_HEADERS = 0.5
GOAL_FLAT = 1.5
GOAL_KIB = 1.0
NA_EXIT = 4  # ckpt: "the environment cannot do it" (load without ckpt-torch)

# The sharded sets' Python peer, run as `python -c PEER_HEADERS DIR`: only what it needs is imported.
PEER_HEADERS = r"""
import json, os, struct, sys
d = sys.argv[1]
with open(os.path.join(d, "model.safetensors.index.json"), "rb") as f:
    weight_map = json.load(f)["weight_map"]
tensors = params = 0
for shard in sorted(set(weight_map.values())):
    with open(os.path.join(d, shard), "rb") as f:
        n, = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    tensors += len(header)
    for t in header.values():
        p = 1
        for x in t["shape"]:
            p *= x
        params += p
print("index %d tensors %d params %d" % (len(weight_map), tensors, params))
"""


def name_of(i):
    layer, r = divmod(i, EXPERTS * WEIGHTS)
    e, w = divmod(r, WEIGHTS)
    return "model.layers.%d.mlp.experts.%d.w%d.weight" % (layer, e, w + 1)


def label(n):
    if n >= 1000000 and n % 1000000 == 0:
        return "%dM" % (n // 1000000)
    if n >= 1000 and n % 1000 == 0:
        return "%dk" % (n // 1000)
    return str(n)


def parse_size(s):
    s = s.strip()
    mult = {"k": 1000, "K": 1000, "m": 1000000, "M": 1000000}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def shard_count(n):
    return SHARDS.get(n, max(1, n // 25000))


def log(msg):
    sys.stderr.write("scale: %s\n" % msg)
    sys.stderr.flush()


# ---------------------------------------------------------------- generation: torch (child process)

def child_torch(n, out_a, out_b):
    """Run under --torch-python: write sd-N.pt and its diff partner (temporary paths, the parent renames)."""
    import collections
    import torch
    sd = collections.OrderedDict()
    modules = collections.OrderedDict([("", None), ("model", None), ("model.layers", None)])
    for i in range(n):
        name = name_of(i)
        sd[name] = torch.zeros(2, 2)
        parts = name.split(".")[:-1]
        for k in range(3, len(parts) + 1):  # model.layers.L, .mlp, .experts, .E, .wK
            modules.setdefault(".".join(parts[:k]), None)
    sd._metadata = collections.OrderedDict((m, {"version": 1}) for m in modules)
    torch.save(sd, out_a)
    sd[name_of(n // 2)] = torch.zeros(3, 2)
    torch.save(sd, out_b)


def child_optim(n, out):
    """Run under --torch-python: a model of n [2, 2] parameters after one Adam step, with its optimizer."""
    import torch
    from torch import nn

    class W(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(2, 2))

    class Expert(nn.Module):
        def __init__(self, k):
            super().__init__()
            for j in range(k):
                setattr(self, "w%d" % (j + 1), W())

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Module()
            self.mlp.experts = nn.ModuleList()

    root = nn.Module()
    root.model = nn.Module()
    root.model.layers = nn.ModuleList()
    left = n
    while left > 0:
        block = Block()
        for _ in range(EXPERTS):
            if left <= 0:
                break
            block.mlp.experts.append(Expert(min(WEIGHTS, left)))
            left -= WEIGHTS
        root.model.layers.append(block)
    params = list(root.parameters())
    assert len(params) == n, (len(params), n)
    opt = torch.optim.Adam(params, lr=1e-3)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    torch.save({"model": root.state_dict(), "optimizer": opt.state_dict()}, out)


def in_tmp(target, write):
    """write(path) into .tmp-scale-PID/ beside target (same base name: torch.save's archive folder is the
    file's stem), then rename it into place."""
    tmpdir = os.path.join(os.path.dirname(target), ".tmp-scale-%d" % os.getpid())
    shutil.rmtree(tmpdir, ignore_errors=True)
    os.makedirs(tmpdir)
    try:
        return write(tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def gen_torch(a, n):
    fa = os.path.join(a.dir, "sd-%s.pt" % label(n))
    fb = os.path.join(a.dir, "sd-%s-b.pt" % label(n))
    if os.path.exists(fa) and os.path.exists(fb):
        return fa, fb, None
    log("writing %s and %s with %s (torch.save) ..." % (fa, fb, a.torch_python))
    t0 = time.perf_counter()

    def write(tmpdir):
        ta, tb = os.path.join(tmpdir, os.path.basename(fa)), os.path.join(tmpdir, os.path.basename(fb))
        subprocess.run([a.torch_python, os.path.abspath(__file__), "_gen-torch", str(n), ta, tb], check=True)
        os.replace(tb, fb)
        os.replace(ta, fa)  # last: its presence says both are complete
    in_tmp(fa, write)
    secs = time.perf_counter() - t0
    log("  %.1f s" % secs)
    return fa, fb, secs


def gen_optim(a, n):
    f = os.path.join(a.dir, "optim-%s.pt" % label(n))
    if os.path.exists(f):
        return f, None
    log("writing %s with %s (Adam, one step) ..." % (f, a.torch_python))
    t0 = time.perf_counter()

    def write(tmpdir):
        t = os.path.join(tmpdir, os.path.basename(f))
        subprocess.run([a.torch_python, os.path.abspath(__file__), "_gen-optim", str(n), t], check=True)
        os.replace(t, f)
    in_tmp(f, write)
    secs = time.perf_counter() - t0
    log("  %.1f s" % secs)
    return f, secs


# ---------------------------------------------------------------- generation: safetensors shards

def safetensors_bytes(names, metadata):
    """One shard as safetensors 0.8's save_file writes it: every tensor F32 [2, 2] zeros (same dtype, so
    its sort by (alignment, name) is by name), __metadata__ first, header padded with spaces to 8."""
    header = {"__metadata__": metadata}
    offset = 0
    for name in sorted(names):
        header[name] = {"dtype": "F32", "shape": [2, 2], "data_offsets": [offset, offset + 16]}
        offset += 16
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h, offset


def write_shard(path, names, metadata):
    try:
        import numpy
        from safetensors.numpy import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file({k: numpy.zeros((2, 2), numpy.float32) for k in names}, path, metadata=metadata)
        return
    head, size = safetensors_bytes(names, metadata)
    with open(path, "wb") as f:
        f.write(head)
        f.write(bytes(size))


def gen_shards(a, n):
    d = os.path.join(a.dir, "shards-%s" % label(n))
    if os.path.isfile(os.path.join(d, "model.safetensors.index.json")):
        return d, None
    k = shard_count(n)
    log("writing %s (%d shards) ..." % (d, k))
    t0 = time.perf_counter()
    tmp = os.path.join(a.dir, ".tmp-scale-shards-%d" % os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        weight_map = {}
        for s in range(k):
            shard = "model-%05d-of-%05d.safetensors" % (s + 1, k)
            names = [name_of(i) for i in range(n * s // k, n * (s + 1) // k)]
            write_shard(os.path.join(tmp, shard), names, {"format": "pt"})
            weight_map.update((name, shard) for name in names)
        index = {"metadata": {"total_size": 16 * n}, "weight_map": weight_map}
        with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(d, ignore_errors=True)
        os.replace(tmp, d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    secs = time.perf_counter() - t0
    log("  %.1f s" % secs)
    return d, secs


# ---------------------------------------------------------------- timing

class Row:
    def __init__(self, group, entries, name, cmd, peer=None, is_ckpt=True):
        self.group, self.entries, self.name, self.cmd = group, entries, name, cmd
        self.peer, self.is_ckpt = peer, is_ckpt  # peer: the name of the peer row in the same (group, entries)
        self.status, self.note, self.walls, self.rss_kib = "ok", "", [], None

    def median_ms(self):
        return statistics.median(self.walls) * 1000.0 if self.status == "ok" and self.walls else None


def last_line(err):
    return (err.strip().splitlines() or ["(no stderr)"])[-1]


def settle(row, rc, err):
    """False (and the row marked) when rc is not a success."""
    if rc in (0, 1):
        return True
    if rc == NA_EXIT and row.name.startswith("ckpt load"):
        row.status, row.note = "n/a", last_line(err)
    else:
        row.status, row.note = "failed", "exit %d: %s" % (rc, last_line(err))
    log("  %s (%s) %s: %s" % (row.name, label(row.entries), row.status, row.note))
    return False


def spawn_failed(row, e):
    row.status, row.note = "failed", "cannot run %s: %s" % (row.cmd[0], e)
    log("  %s (%s) %s: %s" % (row.name, label(row.entries), row.status, row.note))


def time_group(rows, runs):
    import measure
    for r in rows:  # warm-up, under /usr/bin/time for the peak RSS
        log("  warm-up %s %s" % (label(r.entries), r.name))
        if not os.access(r.cmd[0], os.X_OK):  # GNU time would report that as the command's failure
            spawn_failed(r, "not executable")
            continue
        try:
            got = measure.rss_once(r.cmd)
        except OSError as e:
            spawn_failed(r, e)
            continue
        if got is None:
            try:
                wall, maxrss, rc, err = measure.run_once(r.cmd)
            except OSError as e:
                spawn_failed(r, e)
                continue
            r.note = "peak RSS from wait4 (includes the spawner's)"
            if settle(r, rc, err):
                r.rss_kib = maxrss
        else:
            rc, rss, err = got
            if settle(r, rc, err):
                r.rss_kib = rss
    for i in range(runs):
        for r in rows:
            if r.status != "ok":
                continue
            try:
                wall, _, rc, err = measure.run_once(r.cmd)
            except OSError as e:  # e.g. the binary being rebuilt under the run
                spawn_failed(r, e)
                continue
            if settle(r, rc, err):
                r.walls.append(wall)
        log("  round %d/%d: %s" % (i + 1, runs, ", ".join(
            "%s %.0f ms" % (r.name, r.walls[-1] * 1000) for r in rows if r.status == "ok" and r.walls)))


# ---------------------------------------------------------------- report

def fmt(x, spec):
    return "" if x is None else spec % x


def find(rows, group, entries, name):
    return next((r for r in rows if r.group == group and r.entries == entries and r.name == name), None)


def read_entries(r):
    """Entries the command reads: diff reads both files (each of r.entries)."""
    return r.entries * (2 if r.name.startswith("ckpt diff") else 1)


def kib_per_entry(r, base):
    """Peak RSS per entry read (KiB), and over the 1k baseline when `base` is that row at 1k."""
    if r.rss_kib is None:
        return None, None
    over = None
    if base is not None and base.rss_kib is not None and r.entries > base.entries:
        over = (r.rss_kib - base.rss_kib) / (read_entries(r) - read_entries(base))
    return r.rss_kib / read_entries(r), over


def print_table(rows, group, title):
    mine = [r for r in rows if r.group == group]
    if not mine:
        return
    print("### %s\n" % title)
    print("| entries | command | median ms | ms / 1k entries | peak RSS MiB | KiB / entry | KiB / entry over 1k "
          "| peer ms | ckpt / peer |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in mine:
        ent = "{:,}".format(r.entries)
        if r.status != "ok":
            print("| %s | %s | %s: %s | | | | | | |" % (ent, r.name, r.status, r.note.replace("|", "\\|")))
            continue
        ms = r.median_ms()
        kib, over = kib_per_entry(r, find(rows, group, 1000, r.name))
        peer = find(rows, group, r.entries, r.peer) if r.peer else None
        pms = peer.median_ms() if peer else None
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            ent, r.name, fmt(ms, "%.1f"), fmt(ms / (r.entries / 1000.0), "%.3f"),
            fmt(r.rss_kib / 1024.0 if r.rss_kib is not None else None, "%.1f"), fmt(kib, "%.3f"), fmt(over, "%.3f"),
            fmt(pms, "%.1f"), fmt(ms / pms if pms else None, "%.3f")))
    print()


def verdict(ok):
    return "not measured (a row is missing)" if ok is None else "met" if ok else "NOT met"


def ratio_goal(rows, group, sizes, goal, peer_name, what):
    lines, all_ok, seen = [], True, False
    for n in sizes:
        for cmd in ("ckpt summary", "ckpt check"):
            r, p = find(rows, group, n, cmd), find(rows, group, n, peer_name)
            if r is None or p is None:
                continue
            if r.median_ms() is None or p.median_ms() is None:
                lines.append("%s %s: not measured (%s)" % (label(n), cmd, r.note or p.note))
                all_ok = False
                continue
            x = r.median_ms() / p.median_ms()
            seen = True
            all_ok &= x <= goal
            lines.append("%s %s: %.3fx (%.1f / %.1f ms)" % (what(n), cmd, x, r.median_ms(), p.median_ms()))
    if not seen and not lines:
        return None, lines
    return (all_ok and seen), lines


def goals(rows):
    print("### Goals\n")
    sd_sizes = sorted({r.entries for r in rows if r.group == "torch"})
    if sd_sizes:
        ok, lines = ratio_goal(rows, "torch", sd_sizes, GOAL_UNPICKLER, "py_unpickler", label)
        print("- summary and check <= %.1fx py_unpickler at every state dict size (%s): **%s**" % (
            GOAL_UNPICKLER, ", ".join(label(n) for n in sd_sizes), verdict(ok)))
        for line in lines:
            print("  - " + line)
    opt_sizes = sorted({r.entries for r in rows if r.group == "optim"})
    if opt_sizes:
        ok, lines = ratio_goal(rows, "optim", opt_sizes, GOAL_UNPICKLER, "py_unpickler",
                               lambda n: "optimizer (%s tensors)" % label(n))
        print("- the same on the optimizer file: **%s**" % verdict(ok))
        for line in lines:
            print("  - " + line)
    big = [n for n in sorted({r.entries for r in rows if r.group == "shards"}) if n >= 100000]
    if big:
        ok, lines = ratio_goal(rows, "shards", big, GOAL_HEADERS, "py safetensors headers",
                               lambda n: "%s in %d shards" % (label(n), shard_count(n)))
        print("- summary and check <= %.1fx the Python header reader on the sharded sets of 100k and more: **%s**"
              % (GOAL_HEADERS, verdict(ok)))
        for line in lines:
            print("  - " + line)
    elif any(r.group == "shards" for r in rows):
        print("- summary and check <= %.1fx the header reader on 100k / 1M shards: not measured (no size >= 100k)"
              % GOAL_HEADERS)

    flat_lines, flat_ok, flat_seen = [], True, False
    kib_lines, kib_ok, kib_seen = [], True, False
    for group in ("torch", "shards", "optim"):
        names = []
        for r in rows:
            if r.group == group and r.is_ckpt and r.name not in names:
                names.append(r.name)
        for name in names:
            mine = sorted((r for r in rows if r.group == group and r.name == name), key=lambda r: r.entries)
            span = [r for r in mine if 10000 <= r.entries <= 1000000 and r.median_ms() is not None]
            if group != "optim" and len(span) >= 2:
                per = [r.median_ms() / (r.entries / 1000.0) for r in span]
                x = max(per) / min(per)
                aside = name.startswith("ckpt load")  # LibTorch's fixed start-up (~0.9 s here) rules at 10k
                if not aside:
                    flat_seen = True
                    flat_ok &= x <= GOAL_FLAT
                flat_lines.append("%s %s: %.2fx (%s ms / 1k)%s" % (group, name, x, ", ".join(
                    "%s %.3f" % (label(r.entries), p) for r, p in zip(span, per)),
                    " (not in the verdict: includes LibTorch's fixed start-up)" if aside else ""))
            base = next((r for r in mine if r.entries == 1000 and r.rss_kib is not None), None)
            parts, ok = [], True
            for r in mine:
                kib, over = kib_per_entry(r, base)
                if kib is None:
                    continue
                if over is not None:
                    ok &= over <= GOAL_KIB
                    parts.append("%s %.3f over 1k" % (label(r.entries), over))
                if r.entries >= 100000:
                    ok &= kib <= GOAL_KIB
                    parts.append("%s %.3f plain" % (label(r.entries), kib))
            # load holds a LibTorch tensor per entry besides ckpt's records (a meta tensor's TensorImpl and
            # StorageImpl are ~360 bytes in LibTorch 1.13): printed, not in the verdict, which is the
            # readers' (summary, check, diff per entry of both files).
            aside = name.startswith("ckpt load")
            if parts:
                kib_seen = True
                if not aside:
                    kib_ok &= ok
                kib_lines.append("%s %s: %s KiB / entry%s" % (group, name, ", ".join(parts), (
                    " (not in the verdict: a LibTorch tensor per entry)" if aside else "")))
    if flat_seen:
        print("- ms per 1k entries flat within %.1fx (slowest / fastest) from 10k to 1M: **%s**"
              % (GOAL_FLAT, verdict(flat_ok)))
        for line in flat_lines:
            print("  - " + line)
    else:
        print("- ms per 1k entries flat within %.1fx from 10k to 1M: not measured (needs two sizes in 10k..1M)"
              % GOAL_FLAT)
    if kib_seen:
        print("- <= %.0f KiB peak RSS per entry (over the 1k baseline above 1k; plain RSS / entries at 100k and "
              "more): **%s**" % (GOAL_KIB, verdict(kib_ok)))
        for line in kib_lines:
            print("  - " + line)
    else:
        print("- <= %.0f KiB peak RSS per entry: not measured (needs 1k and a larger size, or 100k and more)"
              % GOAL_KIB)
    print()


# ---------------------------------------------------------------- main

def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "_gen-torch":
        return child_torch(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    if len(sys.argv) >= 2 and sys.argv[1] == "_gen-optim":
        return child_optim(int(sys.argv[2]), sys.argv[3])

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--sizes", default="1k,10k,100k,1M", help="entry counts of the state dicts and shard sets "
                    "(default 1k,10k,100k,1M)")
    ap.add_argument("--only", default="torch,shards,optim", help="groups to run: torch, shards, optim "
                    "(comma-separated; default all)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per row after the warm-up (default 3)")
    ap.add_argument("--dir", default=os.environ.get("CKPT_SCALE_DIR", "/tmp/ckpt-scale"),
                    help="scratch dir for the inputs, reused (default $CKPT_SCALE_DIR or /tmp/ckpt-scale)")
    ap.add_argument("--ckpt", default=os.environ.get("CKPT", os.path.join(ROOT, "build", "ckpt")),
                    help="the ckpt binary (default $CKPT or build/ckpt)")
    ap.add_argument("--python", default="/usr/bin/python3", help="the peers' Python (default /usr/bin/python3)")
    ap.add_argument("--torch-python", default="/usr/bin/python3",
                    help="the Python with torch that writes the .pt files (default /usr/bin/python3, torch 1.13)")
    ap.add_argument("--optim-params", type=int, default=100000,
                    help="parameters of the optimizer file's model (default 100000)")
    ap.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                    help="passed to every ckpt command as --limit NAME=VALUE (repeatable; default: ckpt's limits)")
    ap.add_argument("--generate-only", action="store_true", help="write the missing inputs and stop")
    a = ap.parse_args()

    groups = [g.strip() for g in a.only.split(",") if g.strip()]
    for g in groups:
        if g not in ("torch", "shards", "optim"):
            ap.error("--only: unknown group %r (torch, shards, optim)" % g)
    sizes = sorted({parse_size(s) for s in a.sizes.split(",") if s.strip()})
    if not sizes or min(sizes) < 1:
        ap.error("--sizes: nothing to run")
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    a.dir = os.path.abspath(a.dir)
    os.makedirs(a.dir, exist_ok=True)
    a.ckpt = os.path.abspath(a.ckpt)
    if not a.generate_only and not os.access(a.ckpt, os.X_OK):
        sys.exit("scale: %s is not an executable ckpt (--ckpt)" % a.ckpt)
    unpickler = os.path.join(HERE, "py_unpickler.py")
    lim = [x for v in a.limit for x in ("--limit", v)]

    def ck(sub, *rest):
        return [a.ckpt] + sub.split() + lim + list(rest)
    sys.path.insert(0, HERE)

    t_start = time.perf_counter()
    made = []
    plan = []  # (group, entries, rows)
    for n in sizes:
        if "torch" in groups:
            fa, fb, secs = gen_torch(a, n)
            if secs is not None:
                made.append((os.path.basename(fa) + " + " + os.path.basename(fb), secs))
            plan.append(("torch", n, [
                Row("torch", n, "ckpt summary", ck("summary", fa), "py_unpickler"),
                Row("torch", n, "ckpt check", ck("check", fa), "py_unpickler"),
                Row("torch", n, "ckpt diff", ck("diff", fa, fb), "py_unpickler"),
                Row("torch", n, "ckpt load --device meta", ck("load --device meta", fa), "py_unpickler"),
                Row("torch", n, "py_unpickler", [a.python, unpickler, fa], is_ckpt=False)]))
        if "shards" in groups:
            d, secs = gen_shards(a, n)
            if secs is not None:
                made.append((os.path.basename(d) + "/", secs))
            peer = "py safetensors headers"
            plan.append(("shards", n, [
                Row("shards", n, "ckpt summary", ck("summary", d), peer),
                Row("shards", n, "ckpt check", ck("check", d), peer),
                Row("shards", n, peer, [a.python, "-c", PEER_HEADERS, d], is_ckpt=False)]))
    if "optim" in groups:
        f, secs = gen_optim(a, a.optim_params)
        if secs is not None:
            made.append((os.path.basename(f), secs))
        n = 4 * a.optim_params  # tensors: the parameters, exp_avg, exp_avg_sq, step
        plan.append(("optim", n, [
            Row("optim", n, "ckpt summary", ck("summary", f), "py_unpickler"),
            Row("optim", n, "ckpt check", ck("check", f), "py_unpickler"),
            Row("optim", n, "py_unpickler", [a.python, unpickler, f], is_ckpt=False)]))
    t_gen = time.perf_counter() - t_start
    if a.generate_only:
        for what, secs in made:
            print("wrote %s in %.1f s" % (what, secs))
        return 0

    rows = []
    for group, n, group_rows in plan:
        log("timing %s %s (%d runs)" % (group, label(n), a.runs))
        time_group(group_rows, a.runs)
        rows += group_rows

    try:
        version = subprocess.run([a.ckpt, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        version = "?"
    print("## Scale: bench/scale.py\n")
    print("%s (%s), %d core(s), median of %d timed runs after one untimed warm-up, page cache warm; inputs in %s%s"
          % (version, a.ckpt, os.cpu_count() or 0, a.runs, a.dir,
             "; ckpt run with " + " ".join(lim) if lim else ""))
    for what, secs in made:
        print("- wrote %s in %.1f s" % (what, secs))
    print()
    print_table(rows, "torch", "torch.save state dicts (torch 1.13): ckpt against py_unpickler")
    print_table(rows, "shards", "safetensors sharded sets (index + shards): ckpt against the Python header reader")
    print_table(rows, "optim", "optimizer state ({model, optimizer}, Adam after one step, %s parameters): "
                "ckpt against py_unpickler" % "{:,}".format(a.optim_params))
    goals(rows)
    print("(generation %.1f s, timing %.1f s)" % (t_gen, time.perf_counter() - t_start - t_gen))
    return 1 if any(r.status == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
