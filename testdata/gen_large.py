#!/usr/bin/python3
"""Write a torch.save zip larger than 4 GiB (so it needs zip64) and its expected json.

    /usr/bin/python3 testdata/gen_large.py OUTDIR

Writes OUTDIR/large_zip64.pt (~4.3 GB) and OUTDIR/large_zip64.expected.json (format:
testdata/EXPECTED.md, same generator code as gen_fixtures.py). The file holds a 4.3e9-byte uint8
tensor (storage "0"), a view of it whose storage offset is past 2**32 (pickled as a LONG1), and two
small float tensors whose data/ records lie beyond 4 GiB in the zip. For a slow test; never commit
the output. Peak memory is about one copy of the big tensor (~4.3 GB): the live tensor is freed
before torch.load reads it back, and the check against the fill pattern goes chunk by chunk.
"""

import argparse
import collections
import os
import resource
import struct
import sys
import time
import zipfile

import torch

sys.dont_write_bytecode = True  # keep testdata/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_fixtures as G  # noqa: E402

N = 4_300_000_000          # > 2**32 = 4_294_967_296
TAIL_OFFSET = 2 ** 32 + 100
CHUNK = 16 * 1024 * 1024
NAME = "large_zip64.pt"


def pattern(n):
    return (torch.arange(n, dtype=torch.int64) % 251).to(torch.uint8)


def fill(t):
    pat = pattern(CHUNK)
    for i in range(0, t.numel(), CHUNK):
        n = min(CHUNK, t.numel() - i)
        t[i:i + n].copy_(pat[:n])


def verify(t):
    pat = pattern(CHUNK)
    for i in range(0, t.numel(), CHUNK):
        n = min(CHUNK, t.numel() - i)
        assert torch.equal(t[i:i + n], pat[:n]), i


def zip_entries(path):
    out = []
    with open(path, "rb") as f, zipfile.ZipFile(path) as z:
        for info in z.infolist():
            f.seek(info.header_offset)
            hdr = f.read(30)
            assert hdr[:4] == b"PK\x03\x04"
            name_len, extra_len = struct.unpack("<HH", hdr[26:30])
            out.append(collections.OrderedDict(
                name=info.filename, header_offset=info.header_offset,
                data_offset=info.header_offset + 30 + name_len + extra_len, size=info.file_size))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    t0 = time.time()
    torch.manual_seed(0)
    big = torch.empty(N, dtype=torch.uint8)
    fill(big)
    live = collections.OrderedDict()
    live["big"] = big                              # storage "0": written first, 4.3e9 bytes
    live["big_tail"] = big[TAIL_OFFSET:]           # same storage, offset > 2**32
    live["small_a"] = torch.randn(3, 4)            # storage "1": data/1 lies past 4 GiB
    live["small_b"] = torch.randn(5, dtype=torch.float64)
    small = {k: v.clone() for k, v in live.items() if k.startswith("small")}
    path = os.path.join(args.outdir, NAME)
    t1 = time.time()
    torch.save(live, path)
    t2 = time.time()
    del live, big
    loaded = torch.load(path)
    t3 = time.time()
    assert list(loaded) == ["big", "big_tail", "small_a", "small_b"]
    verify(loaded["big"])
    assert loaded["big_tail"].storage_offset() == TAIL_OFFSET
    assert loaded["big_tail"].storage().data_ptr() == loaded["big"].storage().data_ptr()
    for k, v in small.items():
        assert torch.equal(v, loaded[k]), k
    items = [(k, v, G.kind_by_name(k, v)) for k, v in loaded.items()]
    tensors, totals = G.summarize(items, None)
    entries = zip_entries(path)
    beyond = [e["name"] for e in entries if e["data_offset"] >= 2 ** 32]
    assert any(n.endswith("/data/1") for n in beyond) and any(n.endswith("/data/2") for n in beyond), entries
    w = G.Writer(args.outdir)
    w.emit(NAME, "torch-zip", tensors, totals,
           extra={"zip64": True, "zip_entries": entries},
           notes="Over 4 GiB: needs zip64 (sizes/offsets in zip64 extra fields). data/0 is the 4.3e9-byte "
                 "uint8 storage; data/1, data/2 and the version record start past 2**32 "
                 "(zip_entries has each local header offset and data offset). 'big_tail' is a view of "
                 "storage 0 at element offset 2**32+100. Bytes of 'big' are (i %% %d %% 251) for chunk "
                 "position i. No model: kinds by ckpt's documented rule (name, or integer dtype = buffer)." % CHUNK)
    t4 = time.time()
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print("wrote %s (%d bytes): fill %.1fs, torch.save %.1fs, torch.load %.1fs, verify+json %.1fs, "
          "total %.1fs, peak RSS %.2f GiB" % (path, os.path.getsize(path), t1 - t0, t2 - t1, t3 - t2,
                                               t4 - t3, t4 - t0, peak_gib))


if __name__ == "__main__":
    main()
