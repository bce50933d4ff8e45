#!/usr/bin/python3
"""Write testdata/formats/diff_values/: a pair of state dicts for `ckpt diff --values` with every dtype
it converts, the ones it compares byte for byte, views (transposed, sliced, stepped, expanded with
stride 0, a storage offset), 0-dim and empty tensors, NaN / Inf / -0.0 / subnormals / integers beyond
2^53, and expected.json with what PyTorch computes for each pair at several tolerances.

    /usr/bin/python3 testdata/gen_diff_values.py [OUTDIR]   # default testdata/formats/diff_values

expected.json (numbers from torch, in float64, never from ckpt):
  tolerances: [[atol, rtol], ...]
  tensors: {name: {dtype_a, dtype_b, shape, contiguous_a, contiguous_b, numeric,
                   results: [one per tolerance: {equal, within, max_abs_diff, max_rel_diff}]}}
Definitions (README "ckpt diff"), with a = A's tensor and b = B's, both .to(torch.float64):
  same         (a == b) | (a.isnan() & b.isnan())   (NaN equals NaN, -0.0 equals 0.0)
  equal        same everywhere (numeric); torch.equal of the raw bytes' view otherwise
  max_abs_diff max of |a - b| over the elements not `same`, NaN counted as +inf (null in JSON when
               infinite); 0 when every element is the same
  max_rel_diff max of |a - b| / |b| over the elements not `same` with b != 0, NaN quotients skipped; 0
               when there are none (null when infinite)
  within       torch.isclose(a, b, rtol, atol, equal_nan=True).all(): `same`, or a finite |a - b| <=
               atol + rtol * |b| (a finite value against an Inf is never within)
For dtypes without a float64 view (complex) `numeric` is false: equal = within = bytes equal, and
the maxima are 0. A pair whose dtypes differ and are not both numeric is not equal and not within.
"""
import collections
import json
import math
import os
import sys

import torch

from genlib import dtype_name  # testdata/genlib.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCES = [[0.0, 0.0], [1e-2, 0.0], [1e-3, 1e-2], [0.0, 0.5]]
NUMERIC = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.bool,
           torch.int16, torch.int32, torch.int64}


def tensors():
    g = torch.Generator().manual_seed(7)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    a, b = collections.OrderedDict(), collections.OrderedDict()

    def nudge(t, scale, count):
        """A copy of t with `count` elements (spread over it) moved by `scale` times a random number."""
        out = t.clone().contiguous()
        flat = out.view(-1)
        idx = torch.randperm(flat.numel(), generator=g)[:count]
        flat[idx] = (flat[idx].to(torch.float64) + scale * torch.randn(count, generator=g, dtype=torch.float64)).to(t.dtype)
        return out

    # float32 with every special case: NaN on both sides, on one side, Inf equal and opposite, -0.0 vs
    # 0.0, b == 0 where a is not (no relative difference), and subnormals.
    x = randn(64, 33)
    y = nudge(x, 1e-3, 300)
    x[0, 0], y[0, 0] = math.nan, math.nan
    x[1, 1] = math.nan
    y[2, 2] = math.nan
    x[3, 3], y[3, 3] = math.inf, math.inf
    x[4, 4], y[4, 4] = -math.inf, -math.inf
    x[5, 5], y[5, 5] = -0.0, 0.0
    x[6, 6], y[6, 6] = 0.25, 0.0
    x[7, 7], y[7, 7] = 1e-45, 2e-45
    a["f32.specials"], b["f32.specials"] = x, y
    # Inf against a finite value (max_abs_diff inf), Inf against -Inf (NaN difference)
    x, y = randn(50), None
    y = nudge(x, 1e-2, 10)
    x[0], y[1] = math.inf, -math.inf
    x[1] = 3.0
    x[2], y[2] = math.inf, -math.inf
    a["f32.inf"], b["f32.inf"] = x, y
    # close values only (the tolerance decides), exactly equal, and a large one split into pieces
    x = randn(40, 40)
    a["f32.close"], b["f32.close"] = x, nudge(x, 1e-4, 1600)
    x = randn(100)
    a["f32.equal"], b["f32.equal"] = x, x.clone()
    x = randn(96, 128)
    a["f32.large"], b["f32.large"] = x, nudge(x, 0.1, 50)

    x = randn(17, 5, dtype=torch.float64)
    y = nudge(x, 1e-9, 20)
    y[0, 0] = math.nan
    a["f64"], b["f64"] = x, y
    # float16 / bfloat16: every exponent incl. subnormals, Inf, NaN
    for dt, key in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        bits = torch.arange(0, 65536, 97, dtype=torch.int32).to(torch.int16)
        x = bits.view(dt).clone()
        y = torch.flip(x, [0]).clone()
        y[:40] = x[:40]
        a[key], b[key] = x, y
    a["f16.close"], b["f16.close"] = randn(64, dtype=torch.float16), None
    b["f16.close"] = nudge(a["f16.close"], 1e-2, 30)

    ints = [(torch.int8, -128, 128), (torch.uint8, 0, 256), (torch.int16, -2**15, 2**15),
            (torch.int32, -2**31, 2**31 - 1)]
    for dt, lo, hi in ints:
        x = torch.randint(lo, hi, (30,), generator=g, dtype=dt)
        y = x.clone()
        y[::4] = torch.randint(lo, hi, (8,), generator=g, dtype=dt)
        a[dtype_name(dt)], b[dtype_name(dt)] = x, y
    x = torch.tensor([2**53 + 1, 2**62, -2**63, 5, 0, 7, 2**53, -(2**60) - 3], dtype=torch.int64)
    y = torch.tensor([2**53, 2**62 + 1, -2**63 + 1024, 5, 3, -7, 2**53 + 2, -(2**60)], dtype=torch.int64)
    a["int64"], b["int64"] = x, y
    x = torch.rand(40, generator=g) > 0.5
    y = x.clone()
    y[3] = ~y[3]
    a["bool"], b["bool"] = x, y
    a["bool.equal"], b["bool.equal"] = x, x.clone()

    # byte for byte: complex equal and not, and complex64 against complex128 (no common view)
    x = torch.randn(12, generator=g, dtype=torch.complex64)
    a["c64.equal"], b["c64.equal"] = x, x.clone()
    y = x.clone()
    y[5] += 1
    a["c64"], b["c64"] = x, y
    a["c64_vs_c128"], b["c64_vs_c128"] = x, x.to(torch.complex128)
    # dtype changes with a float64 view on both sides
    x = randn(8, 8)
    a["f32_vs_f16"], b["f32_vs_f16"] = x, x.half()
    a["i64_vs_f32"], b["i64_vs_f32"] = torch.arange(-10, 10, dtype=torch.int64), torch.arange(-10, 10).float() * 1.5
    a["bf16_vs_f64"], b["bf16_vs_f64"] = randn(20, dtype=torch.bfloat16), randn(20, dtype=torch.float64)

    # views: A transposed against B contiguous, slices with offsets and steps on both sides, a column
    # (last stride != 1), and a stride-0 expansion
    base = randn(33, 64)
    a["view.t"], b["view.t"] = base.t(), nudge(base.t().contiguous(), 1e-3, 40)
    big = randn(20, 30)
    other = nudge(big, 1e-2, 100)
    a["view.slice"], b["view.slice"] = big[3:15, 2:20:3], other[5:17, 1:19:3]
    a["view.column"], b["view.column"] = big[:, 7], other[:, 7]
    a["view.offset"], b["view.offset"] = big.view(-1)[17:137].view(12, 10), other.view(-1)[17:137].view(12, 10)
    row = randn(1, 9)
    a["view.expand"], b["view.expand"] = row.expand(6, 9), nudge(row.expand(6, 9).contiguous(), 1e-1, 5)
    a["view.bf16.t"], b["view.bf16.t"] = randn(24, 10, dtype=torch.bfloat16).t(), None
    b["view.bf16.t"] = nudge(a["view.bf16.t"].contiguous(), 1e-2, 30).t().contiguous().t()
    # 0-dim and empty
    a["scalar"], b["scalar"] = torch.tensor(1.5), torch.tensor(1.25)
    a["empty"], b["empty"] = torch.zeros(0, 4), torch.zeros(0, 4)
    # a finite value against an Inf, everything else close: within only by |a - b| <= atol + rtol * |b|
    # as written (inf <= inf when rtol > 0); torch.isclose says not close
    x = randn(16, dtype=torch.float64)
    y = x.clone()
    y[3] = math.inf
    y[9] = -math.inf
    a["f64.finite_vs_inf"], b["f64.finite_vs_inf"] = x, y
    return a, b


def compare(ta, tb, atol, rtol):
    if ta.dtype not in NUMERIC or tb.dtype not in NUMERIC:
        same = ta.dtype == tb.dtype and ta.contiguous().numpy().tobytes() == tb.contiguous().numpy().tobytes()
        return collections.OrderedDict(equal=same, within=same, max_abs_diff=0.0, max_rel_diff=0.0)
    da, db = ta.to(torch.float64), tb.to(torch.float64)
    same = (da == db) | (da.isnan() & db.isnan())
    ne = ~same
    diff = (da - db).abs()
    d = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)[ne]
    max_abs = d.max().item() if d.numel() else 0.0
    m = ne & (db != 0)
    rel = diff[m] / db[m].abs()
    rel = rel[~rel.isnan()]
    max_rel = rel.max().item() if rel.numel() else 0.0
    within = bool(torch.isclose(da, db, rtol=rtol, atol=atol, equal_nan=True).all())
    return collections.OrderedDict(equal=bool(not ne.any()), within=within,
                                   max_abs_diff=None if math.isinf(max_abs) else max_abs,
                                   max_rel_diff=None if math.isinf(max_rel) else max_rel)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "formats", "diff_values")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    a, b = tensors()
    torch.save(a, os.path.join(out, "a.pt"))
    torch.save(b, os.path.join(out, "b.pt"))
    # what was saved is what is compared
    a, b = torch.load(os.path.join(out, "a.pt")), torch.load(os.path.join(out, "b.pt"))
    doc = collections.OrderedDict(torch_version=torch.__version__, a="a.pt", b="b.pt", tolerances=TOLERANCES,
                                  definitions=__doc__.split("Definitions")[1].strip(), tensors=collections.OrderedDict())
    for k in a:
        ta, tb = a[k], b[k]
        assert ta.shape == tb.shape, k
        doc["tensors"][k] = collections.OrderedDict(
            dtype_a=dtype_name(ta.dtype), dtype_b=dtype_name(tb.dtype), shape=list(ta.shape),
            contiguous_a=ta.is_contiguous(), contiguous_b=tb.is_contiguous(),
            numeric=ta.dtype in NUMERIC and tb.dtype in NUMERIC,
            results=[compare(ta, tb, atol, rtol) for atol, rtol in TOLERANCES])
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for name in ("a.pt", "b.pt", "expected.json"):
        print("%-40s %7d bytes" % (os.path.join(out, name), os.path.getsize(os.path.join(out, name))))


if __name__ == "__main__":
    main()
