#!/usr/bin/env python3
"""`ckpt summary --example-input` against PyTorch's own records (testdata/forward/expected.json, written by
testdata/gen_forward.py with torch 1.13): per module the input and output sizes of its last call, its call
count and its FLOPs (recorded with forward wrappers and a TorchDispatchMode using torch.utils.flop_counter's
formulas, before scripting), the forward's output sizes and total FLOPs; lazy entries sized from --model
with exact totals; failing forwards (exit 3, the module, the modules that returned, PyTorch's message).
Also: usage errors, the text table's columns, and `--device cuda` without CUDA (exit 4).

    forward_cases.py --ckpt build/ckpt --root .
"""
import argparse
import json
import math
import os
import subprocess
import sys

failures = []
checks = [0]


def check(cond, what):
    checks[0] += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(ckpt, *args):
    p = subprocess.run([ckpt, "summary", *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


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


def check_case(ckpt, fd, case):
    name = case["name"]
    rc, out, err = run(ckpt, *case_args(fd, case), "--json")
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        check(False, f"{name}: stdout is not JSON (rc {rc}): {err.strip()[:300]}")
        return
    fw = doc.get("forward") or {}
    # FILE's names for ARCH's module paths (a Lightning state dict's 'model.')
    strip = (doc.get("model") or {}).get("strip_prefix", "")
    rows = {r["name"]: r for r in doc["modules"]}

    if "error" in case:
        e = case["error"]
        check(rc == 3, f"{name}: exit {rc}, expected 3")
        got = fw.get("error") or {}
        check(got.get("module") == strip + e["module"], f"{name}: failed in {got.get('module')!r}, PyTorch: {e['module']!r}")
        check(got.get("completed") == [strip + p for p in e["completed"]],
              f"{name}: completed {got.get('completed')}, PyTorch: {e['completed']}")
        check(e["message"] in (got.get("message") or ""), f"{name}: message {got.get('message')!r} lacks PyTorch's {e['message']!r}")
        line = [ln for ln in err.splitlines() if ln.strip()]
        check(len(line) == 1 and f"module '{strip + e['module']}'" in line[0] and e["message"] in line[0],
              f"{name}: stderr is not one line naming the module and the message: {err!r}")
        for p in e["completed"]:  # the shapes recorded so far are on stdout
            check(rows.get(strip + p, {}).get("out_sizes") not in (None, "?"), f"{name}: {p} returned but has no out_sizes")
        return

    check(rc == 0, f"{name}: exit {rc}: {err.strip()[:300]}")
    check(fw.get("error") is None, f"{name}: forward error {fw.get('error')}")
    check(fw.get("flops") == case["forward"]["flops"], f"{name}: forward.flops {fw.get('flops')}, PyTorch {case['forward']['flops']}")
    check(fw.get("out_sizes") == case["forward"]["out_sizes"],
          f"{name}: forward.out_sizes {fw.get('out_sizes')}, PyTorch {case['forward']['out_sizes']}")
    check(fw.get("per_module") is True, f"{name}: per_module {fw.get('per_module')}")
    check(isinstance(fw.get("seconds"), float) and fw["seconds"] > 0, f"{name}: seconds {fw.get('seconds')}")
    for path, m in case["modules"].items():
        r = rows.get(strip + path)
        if r is None:
            check(False, f"{name}: no row {strip + path}")
            continue
        for k in ("in_sizes", "out_sizes", "flops", "calls"):
            check(r.get(k) == m[k], f"{name}: {path}.{k} = {r.get(k)!r}, PyTorch {m[k]!r}")
    named = {strip + p for p in case["modules"]}
    extra = [r["name"] for r in doc["modules"] if r["depth"] > 0 and r["name"] not in named and not (strip and strip.startswith(r["name"] + "."))]
    check(not extra, f"{name}: rows PyTorch's named_modules() does not have: {extra}")
    if strip:
        root = rows.get(strip.rstrip("."), {})
        check(root.get("flops") == case["forward"]["flops"] and root.get("out_sizes") == case["forward"]["out_sizes"],
              f"{name}: row {strip.rstrip('.')} (ARCH's root) has {root.get('flops')} / {root.get('out_sizes')}")

    if "resolved" in case:
        got = {r["name"]: r["shape"] for r in doc["model"]["resolved"]}
        check(got == case["resolved"], f"{name}: resolved {got}, PyTorch {case['resolved']}")
        for k, v in case["totals"].items():
            check(doc["totals"].get(k) == v, f"{name}: totals.{k} = {doc['totals'].get(k)}, PyTorch {v}")
        check(doc["totals"]["uninitialized"] == 0, f"{name}: {doc['totals']['uninitialized']} entries still uninitialized")
        check(not any(w["id"] == "uninitialized-parameters" for w in doc["warnings"]), f"{name}: still warns about lazy entries")
        lazy = {t["name"]: t for t in doc["tensors"] if t.get("resolved")}
        check(set(lazy) == set(case["resolved"]), f"{name}: tensors marked resolved: {sorted(lazy)}")
        for t in lazy.values():
            check(t["shape"] == case["resolved"][t["name"]] and t["state"] == "uninitialized",
                  f"{name}: tensor {t['name']} shape {t['shape']} state {t['state']}")

    # The text table: Lightning's columns and total.
    rc, text, err = run(ckpt, *case_args(fd, case))
    head = next((ln for ln in text.splitlines() if ln.lstrip().startswith("|")), "")
    cols = [c.strip() for c in head.split("|")]
    check(cols[-3:] == ["FLOPs", "In sizes", "Out sizes"] and "Mode" in cols, f"{name}: text columns {cols}")
    check(f"{human_count(case['forward']['flops']):<10}Total Flops" in text, f"{name}: no 'Total Flops' line for {case['forward']['flops']}")


def check_t26(ckpt, fd):
    """testdata/t26/forward (gen_forward_t2.py, torch 2.6): scaled_dot_product_attention and the
    TransformerEncoderLayer fast path. With LibTorch 2.x every value must match; the fused layer's FLOPs
    are the unfused forward's (ckpt counts the products inside fused kernels; flop_counter counts 0).
    LibTorch 1.x cannot compile these archives: exit 3."""
    exp = json.load(open(os.path.join(fd, "expected.json")))
    for case in exp["cases"]:
        name = "t26/" + case["name"]
        rc, out, err = run(ckpt, *case_args(fd, case), "--json")
        doc = json.loads(out) if out.strip() else {}
        major = None
        if rc == 3 and not doc:
            check("LibTorch 1." in err and "lacks operators" in err, f"{name}: exit 3, not LibTorch 1.x's missing operators: {err.strip()[:300]}")
            print(f"{name}: not compiled by this LibTorch (expected for 1.x): {err.strip()[:160]}")
            continue
        v = (doc.get("forward") or {}).get("libtorch", "")
        major = int(v.split(".")[0]) if v[:1].isdigit() else None
        check(major is not None and major >= 2, f"{name}: compiled by LibTorch {v!r}: expected 2.x")
        check(rc == 0, f"{name}: exit {rc}: {err.strip()[:300]}")
        fw = doc.get("forward") or {}
        total = case.get("unfused_flops", case["forward"]["flops"])
        check(fw.get("flops") == total, f"{name}: forward.flops {fw.get('flops')}, PyTorch {total}")
        check(fw.get("out_sizes") == case["forward"]["out_sizes"], f"{name}: out_sizes {fw.get('out_sizes')}")
        rows = {r["name"]: r for r in doc.get("modules", [])}
        for path, m in case["modules"].items():
            r = rows.get(path, {})
            for k in ("in_sizes", "out_sizes", "calls"):
                check(r.get(k) == m[k], f"{name}: {path}.{k} = {r.get(k)!r}, PyTorch {m[k]!r}")
            want = m["flops"] if "unfused_flops" not in case else (total if m["calls"] else 0)
            check(r.get("flops") == want, f"{name}: {path}.flops = {r.get('flops')}, expected {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    fd = os.path.join(a.root, "testdata", "forward")
    exp = json.load(open(os.path.join(fd, "expected.json")))
    for case in exp["cases"]:
        check_case(a.ckpt, fd, case)

    # Lazy entries sized from --model need no forward, and no LibTorch (ckpt itself; checked by no_libtorch.py).
    lazy = next(c for c in exp["cases"] if c["name"] == "lazy")
    rc, out, err = run(a.ckpt, os.path.join(fd, "lazy_sd.pt"), "--model", os.path.join(fd, "lazy_arch.pt"), "--json")
    doc = json.loads(out) if rc == 0 else {}
    check(rc == 0 and "forward" not in doc and doc["totals"]["parameters"] == lazy["totals"]["parameters"],
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
        ([conv, "--example-input", "2x3", "--example-input-file", os.path.join(fd, "convnet_input.pt")], "excludes"),
        ([conv, "--strip-prefix", "model."], "need --model"),
        ([conv, "--model", os.path.join(fd, "lazy_sd.pt")], "expected a TorchScript archive"),
    ]
    for args, needle in usage:
        rc, out, err = run(a.ckpt, *args)
        check(rc == 2 and needle in err, f"usage {args[1:]}: exit {rc}, stderr {err.strip()[:200]!r}")
    rc, out, err = run(a.ckpt, conv, "--example-input-file", os.path.join(fd, "lazy_sd.pt"))
    check(rc == 3 and "lazy_sd.pt" in err, f"lazy entries as inputs: exit {rc} {err.strip()[:200]}")
    rc, out, err = run(a.ckpt, conv, "--example-input", "2x3x32x32", "--device", "cuda")
    libtorch_cuda = "built without CUDA" not in err and "is not available" not in err
    check(rc == 4 or (rc == 0 and libtorch_cuda), f"--device cuda without CUDA: exit {rc} {err.strip()[:200]}")

    check_t26(a.ckpt, os.path.join(a.root, "testdata", "t26", "forward"))

    print(f"forward_cases: {checks[0] - len(failures)}/{checks[0]} checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
