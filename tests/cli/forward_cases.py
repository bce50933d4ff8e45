#!/usr/bin/env python3
"""`ckpt summary --example-input` against PyTorch's own records (testdata/forward/expected.json, written by
testdata/gen_forward.py with torch 1.13): per module the input and output sizes of its last call, its call
count and its FLOPs (recorded with forward wrappers and a TorchDispatchMode using torch.utils.flop_counter's
formulas, before scripting), the forward's output sizes and total FLOPs; lazy entries sized from --model
with exact totals; failing forwards (exit 3, the module, the modules that returned, PyTorch's message).
Also: usage errors, the text table's columns, and `--device cuda` without CUDA (exit 4).

The suite `forward` of torch_cases.py, which runs it (run(t), t its harness):

    torch_cases.py --ckpt build/ckpt --root . forward
"""
import json
import math
import os
import sys


def summary(t, *args):
    return t.run("summary", *args)


def human_count(n):
    """Lightning's get_human_readable_count."""
    labels = [" ", "K", "M", "B", "T"]
    digits = int(math.floor(math.log10(n)) + 1 if n > 0 else 1)
    groups = min(int(math.ceil(digits / 3)), len(labels))
    n = n * (10 ** (-3 * (groups - 1)))
    if groups - 1 < 1 or n >= 100:
        return f"{int(n):,d} {labels[groups - 1]}"
    return f"{n:,.1f} {labels[groups - 1]}"


def case_args(fd, case):
    args = [os.path.join(fd, case["file"])]
    if case.get("model"):
        args += ["--model", os.path.join(fd, case["model"])]
    for spec in case.get("inputs") or []:
        args += ["--example-input", spec]
    if case.get("input_file"):
        args += ["--example-input-file", os.path.join(fd, case["input_file"])]
    return args + ["--depth", "-1"]


def check_case(t, fd, case):
    name = case["name"]
    rc, doc, err = t.run_json("summary", *case_args(fd, case), "--json")
    if doc is None:
        t.check(False, f"{name}: stdout is not JSON (rc {rc}): {err.strip()[:300]}")
        return
    fw = doc.get("forward") or {}
    # FILE's names for ARCH's module paths (a Lightning state dict's 'model.')
    strip = (doc.get("model") or {}).get("strip_prefix", "")
    rows = {r["name"]: r for r in doc["modules"]}

    if "error" in case:
        e = case["error"]
        t.check(rc == 3, f"{name}: exit {rc}, expected 3")
        got = fw.get("error") or {}
        t.check(got.get("module") == strip + e["module"], f"{name}: failed in {got.get('module')!r}, PyTorch: {e['module']!r}")
        t.check(got.get("completed") == [strip + p for p in e["completed"]],
                f"{name}: completed {got.get('completed')}, PyTorch: {e['completed']}")
        t.check(e["message"] in (got.get("message") or ""), f"{name}: message {got.get('message')!r} lacks PyTorch's {e['message']!r}")
        line = [ln for ln in err.splitlines() if ln.strip()]
        t.check(len(line) == 1 and f"module '{strip + e['module']}'" in line[0] and e["message"] in line[0],
                f"{name}: stderr is not one line naming the module and the message: {err!r}")
        for p in e["completed"]:  # the shapes recorded so far are on stdout
            t.check(rows.get(strip + p, {}).get("out_sizes") not in (None, "?"), f"{name}: {p} returned but has no out_sizes")
        return

    t.check(rc == 0, f"{name}: exit {rc}: {err.strip()[:300]}")
    t.check(fw.get("error") is None, f"{name}: forward error {fw.get('error')}")
    t.check(fw.get("flops") == case["forward"]["flops"], f"{name}: forward.flops {fw.get('flops')}, PyTorch {case['forward']['flops']}")
    t.check(fw.get("out_sizes") == case["forward"]["out_sizes"],
            f"{name}: forward.out_sizes {fw.get('out_sizes')}, PyTorch {case['forward']['out_sizes']}")
    t.check(fw.get("per_module") is True, f"{name}: per_module {fw.get('per_module')}")
    t.check(isinstance(fw.get("seconds"), float) and fw["seconds"] > 0, f"{name}: seconds {fw.get('seconds')}")
    for path, m in case["modules"].items():
        r = rows.get(strip + path)
        if r is None:
            t.check(False, f"{name}: no row {strip + path}")
            continue
        for k in ("in_sizes", "out_sizes", "flops", "calls"):
            t.check(r.get(k) == m[k], f"{name}: {path}.{k} = {r.get(k)!r}, PyTorch {m[k]!r}")
    named = {strip + p for p in case["modules"]}
    extra = [r["name"] for r in doc["modules"] if r["depth"] > 0 and r["name"] not in named and not (strip and strip.startswith(r["name"] + "."))]
    t.check(not extra, f"{name}: rows PyTorch's named_modules() does not have: {extra}")
    if strip:
        root = rows.get(strip.rstrip("."), {})
        t.check(root.get("flops") == case["forward"]["flops"] and root.get("out_sizes") == case["forward"]["out_sizes"],
                f"{name}: row {strip.rstrip('.')} (ARCH's root) has {root.get('flops')} / {root.get('out_sizes')}")

    if "resolved" in case:
        got = {r["name"]: r["shape"] for r in doc["model"]["resolved"]}
        t.check(got == case["resolved"], f"{name}: resolved {got}, PyTorch {case['resolved']}")
        for k, v in case["totals"].items():
            t.check(doc["totals"].get(k) == v, f"{name}: totals.{k} = {doc['totals'].get(k)}, PyTorch {v}")
        t.check(doc["totals"]["uninitialized"] == 0, f"{name}: {doc['totals']['uninitialized']} entries still uninitialized")
        t.check(not any(w["id"] == "uninitialized-parameters" for w in doc["warnings"]), f"{name}: still warns about lazy entries")
        lazy = {x["name"]: x for x in doc["tensors"] if x.get("resolved")}
        t.check(set(lazy) == set(case["resolved"]), f"{name}: tensors marked resolved: {sorted(lazy)}")
        for x in lazy.values():
            t.check(x["shape"] == case["resolved"][x["name"]] and x["state"] == "uninitialized",
                    f"{name}: tensor {x['name']} shape {x['shape']} state {x['state']}")

    # The text table: Lightning's columns and total.
    rc, text, err = summary(t, *case_args(fd, case))
    head = next((ln for ln in text.splitlines() if ln.lstrip().startswith("|")), "")
    cols = [c.strip() for c in head.split("|")]
    t.check(cols[-3:] == ["FLOPs", "In sizes", "Out sizes"] and "Mode" in cols, f"{name}: text columns {cols}")
    t.check(f"{human_count(case['forward']['flops']):<10}Total Flops" in text, f"{name}: no 'Total Flops' line for {case['forward']['flops']}")


def check_t2(t, fd, tag):
    """testdata/t26/forward, t214/forward and t215/forward (gen_forward.py under torch 2.6, 2.14 and 2.15):
    scaled_dot_product_attention and the TransformerEncoderLayer fast path. With LibTorch 2.x every value must match; the fused layer's FLOPs
    are the unfused forward's (ckpt counts the products inside fused kernels; flop_counter counts 0).
    LibTorch 1.x cannot compile these archives: exit 3."""
    exp = json.load(open(os.path.join(fd, "expected.json")))
    for case in exp["cases"]:
        name = tag + "/" + case["name"]
        rc, out, err = summary(t, *case_args(fd, case), "--json")
        doc = json.loads(out) if out.strip() else {}
        major = None
        if rc == 3 and not doc:
            t.check("LibTorch 1." in err and "lacks operators" in err, f"{name}: exit 3, not LibTorch 1.x's missing operators: {err.strip()[:300]}")
            print(f"{name}: not compiled by this LibTorch (expected for 1.x): {err.strip()[:160]}")
            continue
        v = (doc.get("forward") or {}).get("libtorch", "")
        major = int(v.split(".")[0]) if v[:1].isdigit() else None
        t.check(major is not None and major >= 2, f"{name}: compiled by LibTorch {v!r}: expected 2.x")
        t.check(rc == 0, f"{name}: exit {rc}: {err.strip()[:300]}")
        fw = doc.get("forward") or {}
        total = case.get("unfused_flops", case["forward"]["flops"])
        t.check(fw.get("flops") == total, f"{name}: forward.flops {fw.get('flops')}, PyTorch {total}")
        t.check(fw.get("out_sizes") == case["forward"]["out_sizes"], f"{name}: out_sizes {fw.get('out_sizes')}")
        rows = {r["name"]: r for r in doc.get("modules", [])}
        for path, m in case["modules"].items():
            r = rows.get(path, {})
            for k in ("in_sizes", "out_sizes", "calls"):
                t.check(r.get(k) == m[k], f"{name}: {path}.{k} = {r.get(k)!r}, PyTorch {m[k]!r}")
            want = m["flops"] if "unfused_flops" not in case else (total if m["calls"] else 0)
            t.check(r.get("flops") == want, f"{name}: {path}.flops = {r.get('flops')}, expected {want}")


def run(t):
    fd = os.path.join(t.td, "forward")
    exp = json.load(open(os.path.join(fd, "expected.json")))
    for case in exp["cases"]:
        check_case(t, fd, case)

    # Lazy entries sized from --model need no forward, and no LibTorch (ckpt itself; checked by no_libtorch.py).
    lazy = next(c for c in exp["cases"] if c["name"] == "lazy")
    rc, doc, err = t.run_json("summary", os.path.join(fd, "lazy_sd.pt"), "--model", os.path.join(fd, "lazy_arch.pt"), "--json")
    t.check(rc == 0 and doc is not None and "forward" not in doc and doc["totals"]["parameters"] == lazy["totals"]["parameters"],
            f"summary --model without a forward: rc {rc} {err.strip()}")

    conv = os.path.join(fd, "convnet.pt")
    usage = [
        ([os.path.join(fd, "lazy_sd.pt"), "--example-input", "2x3x8x8"], "without code"),
        ([conv, "--example-input", "2xax3"], "is not a dimension"),
        ([conv, "--example-input", "2x3:float32:0..4"], "value range"),
        ([conv, "--example-input", "2x3:int64:5..1"], "HIGH must be greater"),
        ([conv, "--example-input", "2x3:nosuchtype"], "unknown dtype"),
        ([conv, "--device", "cpu:1"], ""),
        ([conv, "--device", "meta"], "--device needs"),
        ([conv, "--example-input", "2x3", "--example-input-file", os.path.join(fd, "convnet_input.pt")], "cannot be used together"),
        ([conv, "--strip-prefix", "model."], "need --model"),
        ([conv, "--model", os.path.join(fd, "lazy_sd.pt")], "expected a TorchScript archive"),
    ]
    for args, needle in usage:
        rc, out, err = summary(t, *args)
        t.check(rc == 2 and needle in err, f"usage {args[1:]}: exit {rc}, stderr {err.strip()[:200]!r}")
    rc, out, err = summary(t, conv, "--example-input-file", os.path.join(fd, "lazy_sd.pt"))
    t.check(rc == 3 and "lazy_sd.pt" in err, f"lazy entries as inputs: exit {rc} {err.strip()[:200]}")
    rc, out, err = summary(t, conv, "--example-input", "2x3x32x32", "--device", "cuda")
    libtorch_cuda = "built without CUDA" not in err and "is not available" not in err
    t.check(rc == 4 or (rc == 0 and libtorch_cuda), f"--device cuda without CUDA: exit {rc} {err.strip()[:200]}")

    for tag in ("t26", "t214", "t215"):
        check_t2(t, os.path.join(t.td, tag, "forward"), tag)


if __name__ == "__main__":
    import torch_cases
    sys.exit(torch_cases.main(sys.argv[1:] + ["forward"]))
