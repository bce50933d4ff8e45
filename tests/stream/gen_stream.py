"""Fixtures for the streaming load's tests (tests/test_stream.cc), written at test time by real PyTorch
(/usr/bin/python3, Debian's torch) into OUT_DIR, with PyTorch's own values beside them:
  many.pt   100,000 one-element storages (the ring packs many storages into one chunk), some NaN / Inf;
  big.pt    a 6 MiB float32 storage spanning many chunks, a transposed view and a tied alias of it,
            a slice starting mid-storage, float16 / float64 / int64 tensors;
  legacy.pt the legacy (non-zip) format: storages back to back at unaligned offsets, NaN / Inf planted;
  truth.json  {file: {name: {crc32, nan, inf, dtype, shape}}}: zlib.crc32 of t.contiguous() bytes,
            torch.isnan / torch.isinf counts.
  /usr/bin/python3 gen_stream.py OUT_DIR
"""
import json, os, sys, zlib
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(0)


def truth(sd):
    res = {}
    for k, t in sd.items():
        c = t.contiguous()
        raw = c.view(torch.uint8) if c.dtype != torch.bool else c
        fl = t.is_floating_point()
        res[k] = {"crc32": zlib.crc32(raw.numpy().tobytes()) & 0xFFFFFFFF,
                  "nan": int(torch.isnan(t).sum()) if fl else 0, "inf": int(torch.isinf(t).sum()) if fl else 0,
                  "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
    return res


many = {}
for i in range(100_000):
    v = float(i) if i % 997 else (float("nan") if i % 2 else float("inf"))
    many[f"t{i}"] = torch.tensor([v], dtype=torch.float32)
big = torch.randn(1536, 1024, generator=g)
big.view(-1)[::4099] = float("nan")
big.view(-1)[7::65537] = float("-inf")
sd = {"big": big, "big_t": big.t(), "tied": big, "slice": big.view(-1)[12345:12345 + 300000],
      "h": torch.randn(70000, generator=g).half(), "d": torch.randn(50000, generator=g).double(),
      "i": torch.arange(90000, dtype=torch.int64)}
sd["h"][5] = float("inf")
# legacy (torch < 1.6) layout: storages one after another, unaligned, so a 1 MiB read boundary falls inside
# an element of a storage that starts mid-chunk
leg = {"a": torch.randn(100003, generator=g), "b": torch.randn(77777, generator=g).double(),
       "c": torch.randn(150001, generator=g).half(), "e": torch.randn(333333, generator=g), "f": torch.randn(250007, generator=g).double()}
for k, t in leg.items():
    t.view(-1)[::1009] = float("nan")
    t.view(-1)[3::2003] = float("inf")
files = {"many.pt": many, "big.pt": sd, "legacy.pt": leg}
res = {}
for name, d in files.items():
    # truth.json, written last, says the set is complete
    torch.save(d, os.path.join(out, name), _use_new_zipfile_serialization=name != "legacy.pt")
    res[name] = truth(d)
json.dump({"torch_version": torch.__version__, "files": res}, open(os.path.join(out, "truth.json.tmp"), "w"))
os.replace(os.path.join(out, "truth.json.tmp"), os.path.join(out, "truth.json"))
