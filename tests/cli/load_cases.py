#!/usr/bin/env python3
"""`ckpt load` against PyTorch's own numbers (testdata/load/expected.json, written by testdata/gen_load.py
with torch 1.13, and testdata/t26/, t214/ and t215/load_expected.json, written by the same generator
with torch 2.6, 2.14 and 2.15 for their fixture sets and the DCP directories): every tensor's dtype,
shape, CRC-32 of its values and NaN/Inf counts on CPU (t215's files through one `ckpt load --jsonl` per
device, with the same checks: one LibTorch start-up, not one a file); the same tensors on meta without
a byte read; key matching against a TorchScript --model; empty init; the CUDA-unavailable path; TorchScript archives whose operators the linked LibTorch lacks; the weights of
torch.export archives (testdata/pt2/*/load_expected.json, from testdata/gen_pt2_load.py).

The torch 2 loads may differ from torch's values in two known ways, both accepted (and nothing else): a
tensor whose dtype the linked LibTorch predates (DTYPE_SINCE) is "skipped" with a reason containing "is
unknown to LibTorch" (the exit code is then 1), and with LibTorch 1.x a torch 2 TorchScript archive calling
an operator it lacks (transformer.ts.pt: aten::scaled_dot_product_attention) is refused with exit 3 naming
it. Every other value must be exact.

The suite `load` of torch_cases.py, which runs it (run(t), t its harness):

    torch_cases.py --ckpt build/ckpt --root . load
"""
import json
import os
import subprocess
import sys


def load(t, *args):
    return t.run("load", *args)


def load_json(t, *args):
    return t.run_json("load", "--json", *args)


# The first LibTorch with each dtype (its ScalarType), from PyTorch's release notes: float8_e5m2 /
# float8_e4m3fn 2.1, the fnuz float8 types 2.2, uint16/32/64 2.3, float8_e8m0fnu 2.7, float4_e2m1fn_x2
# 2.8 (torch 2.6 has neither of the last two: testdata/t26/dtypes.expected.json "unsaveable").
DTYPE_SINCE = {"float8_e5m2": (2, 1), "float8_e4m3fn": (2, 1), "float8_e5m2fnuz": (2, 2), "float8_e4m3fnuz": (2, 2),
               "uint16": (2, 3), "uint32": (2, 3), "uint64": (2, 3), "float8_e8m0fnu": (2, 7),
               "float4_e2m1fn_x2": (2, 8)}


def load_batch(t, files, *args):
    """{file: (exit code, report or None, error)} of one `ckpt load --jsonl ARGS FILES` (one ckpt-torch for all),
    as separate `ckpt load --json` runs would give them: a loaded file's exit is 0 when its report is
    complete, else 1; an unreadable one's is its ckpt.error/1 record's, with the record's message as error."""
    p = subprocess.run([t.ckpt, "load", "--jsonl", *args, *[os.path.join(t.td, f) for f in files]],
                       capture_output=True, text=True, timeout=300)
    problems = t.schemas.output_problems(p.stdout)
    t.check(not problems, f"load --jsonl {' '.join(args)} ({len(files)} files): JSON Lines against schemas/: {problems}")
    docs = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    t.check(len(docs) == len(files), f"load --jsonl {' '.join(args)}: {len(docs)} lines for {len(files)} files (rc {p.returncode})")
    out = {}
    for f, d in zip(files, docs):
        if d.get("schema") == "ckpt.error/1":
            out[f] = (d["exit"], None, d["error"])
        else:
            out[f] = (0 if d.get("complete") else 1, d, "")
    worst = max((v[0] for v in out.values()), default=0)
    t.check(p.returncode == worst, f"load --jsonl {' '.join(args)}: exit {p.returncode}, the worst file's is {worst}")
    return out


# Fixture sets whose files load_cases checks in one batch per device (load_batch): the same checks, less time.
BATCHED = ("t215",)


def libtorch_version(t):
    """(major, minor) of the LibTorch ckpt links against, from a report's "libtorch" field ("1.13.0")."""
    rc, rep, err = load_json(t, "--device", "meta", os.path.join(t.td, "load", "nan_inf.pt"))
    v = (rep or {}).get("libtorch") or ""
    t.check(v[:1].isdigit(), f"libtorch version: rc {rc} {v!r} {err.strip()}")
    return tuple(int(x) for x in v.split(".")[:2]) if v[:1].isdigit() else None


def run(t):
    td = t.td
    exp = json.load(open(os.path.join(td, "load", "expected.json")))
    loads = list(exp["loads"])
    # torch 2 fixture sets (t26/ and formats/dcp* from torch 2.6, t214/ from torch 2.14, t215/ from torch
    # 2.15 (PyPI)): values from testdata/gen_load.py under the torch that wrote each set.
    new_dtypes, t2_files = set(), set()
    for tag in ("t26", "t214", "t215"):
        p = os.path.join(td, tag, "load_expected.json")
        t.check(os.path.exists(p), f"{p} is missing")
        if os.path.exists(p):
            exp2 = json.load(open(p))
            new_dtypes |= set(exp2["dtypes_new_in_torch2"])
            t2_files |= {c["file"] for c in exp2["loads"]}
            loads += exp2["loads"]
    # torch.export archives (.pt2): values from testdata/gen_pt2_load.py under the torch that wrote each folder.
    pt2_dir = os.path.join(td, "pt2")
    for tag in sorted(os.listdir(pt2_dir)) if os.path.isdir(pt2_dir) else []:
        p = os.path.join(pt2_dir, tag, "load_expected.json")
        if os.path.exists(p):
            loads += json.load(open(p))["loads"]
    version = libtorch_version(t) if t2_files else None
    major = version[0] if version else None
    accepted = {"skipped": 0, "refused": 0}
    batch = [c["file"] for c in loads if c["file"].startswith(tuple(s + "/" for s in BATCHED))
             and (c["tensors"] or c.get("not_materialized"))]
    batch_cpu = load_batch(t, batch, "--checksum", "--device", "cpu") if batch else {}
    batch_meta = load_batch(t, batch, "--device", "meta") if batch else {}

    # 1. CPU: every value bit-exact (CRC-32), NaN/Inf as torch.isnan / torch.isinf count them.
    for case in loads:
        path = os.path.join(td, case["file"])
        want, skipped = case["tensors"], case.get("not_materialized", {})
        if not want and not skipped:
            continue  # bare.pkl, t26/frozen.ts.pt: no tensors
        in_batch = case["file"] in batch_cpu
        rc, rep, err = batch_cpu.get(case["file"]) or load_json(t, "--checksum", "--device", "cpu", path)
        if rep is None and case["file"] in t2_files and major is not None and major < 2 \
                and rc == 3 and f"LibTorch {major}." in err and "aten::" in err:
            accepted["refused"] += 1   # a torch 2 operator in the TorchScript code: refused, nothing to compare
            if in_batch:
                rc, meta, err2 = batch_meta.get(case["file"], (None, None, None))
                t.check(rc == 3 and err2 == err and meta is None, f"{case['file']} meta: rc {rc} {err2!r}")
                continue
            rc, out, err2 = load(t, "--device", "meta", path)
            t.check(rc == 3 and err2 == err and out == "", f"{case['file']} meta: rc {rc} {err2!r}")
            continue
        if rep is None:
            t.check(False, f"{case['file']}: no JSON (rc {rc}): {err.strip()}")
            continue
        t.check(rep["schema"] == "ckpt.load/1", f"{case['file']}: schema")
        rows = {x["name"]: x for x in rep["tensors"]}
        # A dtype newer than the linked LibTorch: such a tensor may be skipped, saying so; nothing else may.
        older = {d for d in new_dtypes if version and version < DTYPE_SINCE.get(d, (99, 0))}
        unknown = {n for n, w in want.items() if w["dtype"] in older and rows.get(n, {}).get("state") == "skipped"
                   and "is unknown to LibTorch" in rows[n].get("reason", "")}
        accepted["skipped"] += len(unknown)
        want_rc = 1 if skipped or unknown else 0
        t.check(rc == want_rc, f"{case['file']}: exit {rc}, expected {want_rc}")
        t.check(set(rows) == set(want) | set(skipped), f"{case['file']}: names {sorted(set(rows) ^ (set(want) | set(skipped)))}")
        for name, w in want.items():
            r = rows.get(name)
            if not r:
                continue
            ctx = f"{case['file']}:{name}"
            if name in unknown:
                t.check(r["dtype"] == w["dtype"] and r["shape"] == w["shape"], f"{ctx}: skipped {r}")
                continue
            t.check(r["state"] == "loaded", f"{ctx}: state {r['state']} {r.get('reason', '')}")
            t.check(r["dtype"] == w["dtype"], f"{ctx}: dtype {r['dtype']} != {w['dtype']}")
            t.check(r["shape"] == w["shape"], f"{ctx}: shape {r['shape']} != {w['shape']}")
            t.check(r.get("crc32") == w["crc32"], f"{ctx}: crc32 {r.get('crc32')} != {w['crc32']}")
            t.check(r.get("nan") == w["nan"] and r.get("inf") == w["inf"],
                    f"{ctx}: nan/inf {r.get('nan')}/{r.get('inf')} != {w['nan']}/{w['inf']}")
        for name, why in skipped.items():
            r = rows.get(name)
            if r:
                t.check(r["state"] in ("skipped", "meta"), f"{case['file']}:{name}: {why} entry loaded as {r['state']}")
        total_nan = sum(w["nan"] for n, w in want.items() if n not in unknown)
        t.check(rep["totals"]["nan"] == total_nan, f"{case['file']}: totals.nan {rep['totals']['nan']} != {total_nan}")

        # 2. meta: same names, dtypes and shapes, no byte of the file read.
        rc, rep, err = batch_meta.get(case["file"]) or load_json(t, "--device", "meta", path)
        if rep is None:
            t.check(False, f"{case['file']} meta: no JSON (rc {rc}): {err.strip()}")
            continue
        t.check(rep["totals"]["bytes_read"] == 0, f"{case['file']} meta: read {rep['totals']['bytes_read']} bytes")
        rows = {x["name"]: x for x in rep["tensors"]}
        for name, w in want.items():
            r = rows.get(name, {})
            t.check(r.get("shape") == w["shape"] and r.get("dtype") == w["dtype"], f"{case['file']}:{name} meta: {r}")

    # 3. Key matching against the TorchScript architecture, like load_state_dict(strict=True).
    for m in exp["matches"]:
        args = ["--device", "meta", "--model", os.path.join(td, m["model"])]
        if m.get("strip_prefix"):
            args += ["--strip-prefix", m["strip_prefix"]]
        rc, rep, err = load_json(t, *args, os.path.join(td, m["file"]))
        ctx = f"match {m['file']} {m.get('strip_prefix', '')}"
        if rep is None:
            t.check(False, f"{ctx}: no JSON (rc {rc}): {err.strip()}")
            continue
        got = rep["model"]
        ok = not (m["missing"] or m["unexpected"] or m["mismatched"])
        t.check(rc == (0 if ok else 1), f"{ctx}: exit {rc}")
        t.check(got["missing_keys"] == sorted(m["missing"]), f"{ctx}: missing {got['missing_keys']}")
        t.check(got["unexpected_keys"] == sorted(m["unexpected"]), f"{ctx}: unexpected {got['unexpected_keys']}")
        t.check([x["key"] for x in got["mismatched_keys"]] == sorted(m["mismatched"]), f"{ctx}: mismatched {got['mismatched_keys']}")
        for x in got["mismatched_keys"]:
            d = m.get("mismatched_detail", {}).get(x["key"])
            if d:
                t.check((x["file_shape"], x["file_dtype"], x["model_shape"], x["model_dtype"]) ==
                        (d["file"]["shape"], d["file"]["dtype"], d["model"]["shape"], d["model"]["dtype"]), f"{ctx}: {x}")
        t.check(got["suggested_strip_prefix"] == m["suggested_strip_prefix"], f"{ctx}: strip {got['suggested_strip_prefix']}")
        t.check(got["suggested_add_prefix"] == m["suggested_add_prefix"], f"{ctx}: add {got['suggested_add_prefix']}")

    # 4. Empty init into the architecture on CPU: FILE's values, ARCH's weights never read; a plain load reads them.
    arch = os.path.join(td, "load", "arch.pt")
    sd = os.path.join(td, "load", "sd_orig_mod.pt")
    want = next(c for c in exp["loads"] if c["file"] == "load/sd_orig_mod.pt")["tensors"]
    for empty in (True, False):
        args = ["--checksum", "--model", arch, "--strip-prefix", "_orig_mod.", sd] + (["--empty-init"] if empty else [])
        rc, rep, err = load_json(t, *args)
        ctx = f"model load empty_init={empty}"
        if rep is None:
            t.check(False, f"{ctx}: no JSON (rc {rc}): {err.strip()}")
            continue
        t.check(rc == 0, f"{ctx}: exit {rc} {err}")
        rows = {x["name"]: x for x in rep["tensors"]}
        for name, w in want.items():
            t.check(rows.get(name[len("_orig_mod."):], {}).get("crc32") == w["crc32"], f"{ctx}: {name} crc32")
        if empty:
            t.check(rep["model"]["arch_bytes_read"] == 0 and rep["model"]["arch_bytes_skipped"] > 0, f"{ctx}: {rep['model']}")
            t.check(rep["model"]["bytes_written_twice"] == 0, f"{ctx}: written twice")
        else:
            t.check(rep["model"]["arch_bytes_read"] > 0 and rep["model"]["bytes_written_twice"] > 0, f"{ctx}: {rep['model']}")

    # 5. A file whose data region is garbage still loads on meta (no byte read) and on CPU shows the NaNs.
    rc, rep, err = load_json(t, "--device", "meta", os.path.join(td, "load", "garbage_data.pt"))
    t.check(rc == 0 and rep and rep["totals"]["bytes_read"] == 0, f"garbage meta: rc {rc} {err}")

    # 6. A tensor reaching past its storage: refused on every device, exit 3 naming file, member and offset.
    bad = os.path.join(td, "bad", "storage_overrun.pt")
    for dev in ("meta", "cpu"):
        rc, out, err = load(t, "--device", dev, bad)
        t.check(rc == 3 and "storage_overrun.pt: plain_state_dict/data.pkl+0x" in err and out == "",
                f"storage overrun {dev}: rc {rc} {err!r}")

    # 7. CUDA with a CPU-only LibTorch (or no GPU): exit 4 naming CUDA.
    rc, out, err = load(t, "--device", "cuda", os.path.join(td, "load", "nan_inf.pt"))
    if rc != 0:
        t.check(rc == 4 and "CUDA" in err and err.count("\n") == 1, f"cuda unavailable: rc {rc} {err!r}")
    rc, out, err = load(t, "--device", "tpu", os.path.join(td, "load", "nan_inf.pt"))
    t.check(rc == 2, f"bad device: rc {rc}")
    # The streaming load's options are for cuda and cpu --stream only; --staging is gone (issue 40); a chunk
    # below 64k or a ring below one chunk is refused; --stream is for cpu.
    nan_inf = os.path.join(td, "load", "nan_inf.pt")
    for args in (["--ring", "64M"], ["--chunk", "1M"]):
        rc, out, err = load(t, "--device", "cpu", *args, nan_inf)
        t.check(rc == 2 and "--device cuda or --stream" in err and out == "", f"{args} on cpu: rc {rc} {err!r}")
    for args in (["--chunk", "1k"], ["--ring", "1M", "--chunk", "2M"], ["--ring", "2M"], ["--staging", "pinned"]):
        rc, out, err = load(t, "--device", "cuda", *args, nan_inf)
        t.check(rc == 2 and out == "", f"{args}: rc {rc} {err!r}")
    for device in ("cuda", "meta"):
        rc, out, err = load(t, "--device", device, "--stream", nan_inf)
        t.check(rc == 2 and "--stream is for --device cpu" in err and out == "", f"--stream on {device}: rc {rc} {err!r}")
    rc, rep, err = load_json(t, "--device", "cpu", "--stream", "--ring", "128k", "--chunk", "64k", nan_inf)
    st = rep and rep["stream"]
    t.check(rc == 0 and st and st["staging"] == "host" and st["slots"] == 2 and st["chunk_bytes"] == 65536,
            f"cpu --stream --ring 128k --chunk 64k: rc {rc} {st} {err!r}")

    # 7b. Peak RSS is ckpt-torch's own (VmHWM), not the parent's: run from a process holding 1 GiB, a load on
    #     meta reports what it used (getrusage's ru_maxrss would carry the parent's peak across fork and exec).
    fat = b"\x01" * (1 << 30)
    rc, rep, err = load_json(t, "--device", "meta", nan_inf)
    t.check(rc == 0 and rep and 0 < rep["memory"]["peak_rss_bytes"] < (768 << 20),
            f"peak RSS from a 1 GiB parent: rc {rc} {rep and rep['memory']}")
    del fat
    rc, rep, err = load_json(t, "--device", "cpu", nan_inf)
    t.check(rc == 0 and rep and rep["stream"] is None, f"cpu: no stream object: {rep and rep.get('stream')}")

    # 7c. A report that cannot be written (a full disk): exit 4 naming the reason, on meta and on cpu
    #     (ckpt forks ckpt-torch there), never exit 0 with a truncated report.
    for device in ("meta", "cpu"):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([t.ckpt, "load", "--device", device, nan_inf], stdout=full, stderr=subprocess.PIPE,
                               timeout=120)
        err = p.stderr.decode(errors="replace")
        t.check(p.returncode == 4 and "cannot write to standard output: No space left on device" in err,
                f"load --device {device} > /dev/full: rc {p.returncode} {err!r}")

    # 8. TorchScript that the linked LibTorch cannot compile: exit 3 naming the missing operator and the version.
    rc, out, err = load(t, "--device", "meta", os.path.join(td, "ts113", "edited_sdpa.pt"))
    t.check(rc == 3 and "aten::scaled_dot_product_attention" in err and "LibTorch" in err and "code/" in err,
            f"edited_sdpa: rc {rc} {err!r}")

    # 9. safetensors on CPU are zero-copy views of the mapping; DCP directories load every tensor
    #    (their values, from torch 2.6 / 2.14 / 2.15, are in t26/, t214/ and t215/load_expected.json: torch 1.13
    #    cannot read DCP).
    for name in ("model.safetensors", "dtypes.safetensors", "real_st.safetensors"):
        rc, rep, err = load_json(t, os.path.join(td, "formats", name))
        t.check(rc == 0 and rep and rep["totals"]["copied_bytes"] == 0 and rep["totals"]["zero_copy_bytes"] > 0,
                f"{name}: zero-copy: rc {rc} {rep and rep['totals']}")
    # .pt2 of torch >= 2.7: raw weight members, 64-byte aligned, are zero-copy (torch 2.6's blob sits unaligned in its zip)
    for name in ("t214/convbn.pt2", "t214/multi.pt2"):
        rc, rep, err = load_json(t, os.path.join(td, "pt2", name))
        t.check(rc == 0 and rep and rep["totals"]["copied_bytes"] == 0 and rep["totals"]["zero_copy_bytes"] > 0,
                f"pt2/{name}: zero-copy: rc {rc} {rep and rep['totals']} {err.strip()}")
    for name in ("dcp", "dcp_2rank"):
        want = json.load(open(os.path.join(td, "formats", name + ".expected.json")))["totals"]
        rc, rep, err = load_json(t, os.path.join(td, "formats", name))
        t.check(rc == 0 and rep and rep["totals"]["loaded"] == want["tensors"] and rep["totals"]["bytes"] == want["bytes"],
                f"{name}: rc {rc} {rep and rep['totals']} want {want}")

    # 9a. diff --values across torch versions: the same fixture written by torch 2.6 and by torch 2.14, and by
    #     2.14 and 2.15 (.pt2 exports, state dicts, TorchScript, DCP) holds equal values exactly when torch
    #     reads equal CRC-32s from both (gen_pt2_load.py, gen_load.py).
    by_file = {c["file"]: c["tensors"] for c in loads if c["tensors"] and not c.get("not_materialized")}
    for old, new in (("t26/", "t214/"), ("t214/", "t215/")):
        for fa in sorted(f for f in by_file if f.startswith(("pt2/" + old, old))):
            fb = fa.replace(old, new, 1)
            if fb not in by_file:
                continue
            a, b = by_file[fa], by_file[fb]
            same = set(a) == set(b) and all(a[n]["crc32"] == b[n]["crc32"] and a[n]["shape"] == b[n]["shape"] for n in a)
            rc, rep, err = t.run_json("diff", "--json", "--values", os.path.join(td, fa), os.path.join(td, fb))
            t.check(rep is not None and rc == (0 if same else 1) and rep["equal"] == same and rep["paired"] == len(a)
                    and rep["a"]["format"] == rep["b"]["format"], f"diff --values {fa} {fb}: rc {rc} {err.strip()}")
    # 9b. ckpt checks every byte itself while ckpt-torch starts LibTorch, and hands the results over;
    #     ckpt-torch run directly checks by itself. Both give the same rows.
    torch_bin = os.path.join(os.path.dirname(os.path.abspath(t.ckpt)), "ckpt-torch")
    f = os.path.join(td, "load", "nan_inf.pt")
    rc1, rep1, _ = load_json(t, "--checksum", f)
    rc2, rep2, _ = t.run_json("load", "--json", "--checksum", f, exe=torch_bin)
    rep2 = rep2 if rc2 == 0 else None
    t.check(rep1 and rep2 and rep1["tensors"] == rep2["tensors"], "overlapped and direct loads differ")
    t.check(rep1 and rep1["time"]["check_seconds"] > 0 and rep2 and rep2["time"]["check_seconds"] == 0,
            f"check_seconds: {rep1 and rep1['time']} / {rep2 and rep2['time']}")

    # 9c. Several inputs, one ckpt-torch: JSON Lines in input order, each file's values PyTorch's (CRC-32s,
    #     NaN/Inf counts), each checked by the parent ckpt ahead of the child (check_seconds > 0: the
    #     per-file blocks of the pipe stay in step across a file that fails), a missing file as a
    #     ckpt.error/1 line in its place, stdin (`-`) among them, and exit 3, the worst.
    many = ["load/nan_inf.pt", "load/does-not-exist.pt", "-", "load/sd_orig_mod.pt"]
    stdin_src = os.path.join(td, "load", "lightning_model.ckpt")
    with open(stdin_src, "rb") as src:
        p = subprocess.run([t.ckpt, "load", "--jsonl", "--checksum"] + [m if m == "-" else os.path.join(td, m) for m in many],
                           stdin=src, capture_output=True, text=True, timeout=300)
    problems = t.schemas.output_problems(p.stdout)
    t.check(not problems, f"several files: JSON Lines against schemas/: {problems}")
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    t.check(p.returncode == 3 and len(lines) == 4, f"several files: rc {p.returncode}, {len(lines)} lines: {p.stderr.strip()}")
    if len(lines) == 4:
        t.check(lines[1]["schema"] == "ckpt.error/1" and lines[1]["command"] == "load" and lines[1]["exit"] == 3
                and "does-not-exist.pt" in lines[1]["file"], f"several files: error record {lines[1]}")
        t.check(lines[2]["file"] == "-", f"several files: stdin named {lines[2]['file']!r}")
        for rep, name in ((lines[0], "load/nan_inf.pt"), (lines[2], "load/lightning_model.ckpt"), (lines[3], "load/sd_orig_mod.pt")):
            want = next(c for c in exp["loads"] if c["file"] == name)["tensors"]
            rows = {x["name"]: x for x in rep.get("tensors", [])}
            t.check(rep.get("schema") == "ckpt.load/1" and want and all(
                rows.get(n, {}).get("crc32") == w["crc32"] and rows[n].get("nan") == w["nan"] and rows[n].get("inf") == w["inf"]
                for n, w in want.items()), f"several files: {name}: values differ from PyTorch's")
            t.check(rep.get("time", {}).get("check_seconds", 0) > 0, f"several files: {name}: not checked by the parent ckpt")
    t.check(p.stderr.count("ckpt: error:") == 1 and "does-not-exist.pt" in p.stderr, f"several files: stderr {p.stderr!r}")

    # 10. Text output: the table and totals, nothing on stderr when piped.
    rc, out, err = load(t, os.path.join(td, "load", "nan_inf.pt"))
    t.check(rc == 0 and "NaN" in out and "f32_t" in out and err == "", f"text: rc {rc} {err!r}")

    if t2_files:
        print(f"torch 2 loads: {len(t2_files)} files, LibTorch {'.'.join(map(str, version or ()))}; accepted as unsupported by it: "
              f"{accepted['skipped']} tensors of a new dtype skipped, {accepted['refused']} file(s) refused")


if __name__ == "__main__":
    import torch_cases
    sys.exit(torch_cases.main(sys.argv[1:] + ["load"]))
