#!/usr/bin/env python3
"""A day of use (issue 30): command-line conventions, JSON shapes, CI gates and summary totals, each
checked against what the tools users know say: torch (numel, isnan/isinf) and Python's zipfile
(CRC-32 of each member), never against ckpt's own output.

  daily_use.py --ckpt build/ckpt --root . [--torch build/ckpt-torch]

Files: real torch-written fixtures of the repository (testdata/load, tests/cli/data), and files this
script writes with /usr/bin/python3's torch at run time (an empty state dict, a saved example input);
a corrupted copy is a torch-written file with one byte flipped (hostile input)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

failures = []


def expect(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:2000])


def run(cmd, env=None, stdin=None):
    e = dict(os.environ)
    for k in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, env=e, stdin=stdin)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def torch_python(code):
    """Runs `code` under /usr/bin/python3 (Debian's torch); its stdout parsed as JSON."""
    p = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("torch script failed: " + p.stderr)
    return json.loads(p.stdout) if p.stdout.strip() else None


def bad_members(path):
    """Members whose bytes disagree with their recorded CRC-32, as Python's zipfile finds them."""
    bad = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            try:
                z.read(info.filename)
            except zipfile.BadZipFile:
                bad.append(info.filename)
    return bad


def test_conventions(ckpt, root):
    clean = os.path.join(root, "tests/cli/data/multi/a_clean.pt")
    multi = os.path.join(root, "tests/cli/data/multi")
    # --help: GNU layout, no parser internals, 80 columns.
    for cmd in ([], ["summary"], ["check"], ["diff"], ["load"]):
        rc, out, err = run([ckpt, *cmd, "--help"])
        internals = [w for w in ("REQUIRED", "Excludes:", "Needs:", ":{", "TEXT:", ":UINT", ":INT", "[Option Group")
                     if w in out]
        expect(f"ckpt {' '.join(cmd)} --help: exit 0, no parser internals", rc == 0 and not internals, internals)
        wide = [line for line in out.splitlines() if len(line) > 80]
        expect(f"ckpt {' '.join(cmd)} --help: no line over 80 columns", not wide, wide[:3])
    rc, out, _ = run([ckpt, "diff", "--help"])
    expect("diff --help says nothing of --fail-on, which diff lacks", "--fail-on" not in out, out[-400:])
    # Short options: -f is --format on every command that has --format.
    for cmd in ("summary", "check", "diff", "load"):
        rc, out, _ = run([ckpt, cmd, "--help"])
        expect(f"{cmd}: -f, --format", re.search(r"^\s+-f, --format", out, re.M) is not None)
    # Last repeated option wins (GNU); the result equals giving the last one alone.
    rc1, once, _ = run([ckpt, "summary", "--depth", "-1", clean])
    rc2, twice, err = run([ckpt, "summary", "--depth", "0", "--depth", "-1", clean])
    expect("--depth 0 --depth -1 is --depth -1", rc1 == rc2 == 0 and once == twice, err)
    rc, out, err = run([ckpt, "summary", "--format", "markdown", "--format", "json", clean])
    expect("--format markdown --format json is JSON", rc == 0 and json.loads(out)["schema"] == "ckpt.summary/1", err)
    # Errors in ckpt's words.
    for args, want in ((["summary", "--depth", "abc", clean], "--depth: 'abc' is not a whole number"),
                       (["summary", "--depth"], "--depth needs a value"),
                       (["diff", clean, clean, clean], "unexpected operand(s): "),
                       (["diff", clean], "missing operand B"),
                       (["summary"], "missing operand FILE"),
                       (["check", "-f", "yaml", clean], "--format: 'yaml' is not one of text, json, jsonl or sarif"),
                       (["diff", "--atol", "x", clean, clean], "--atol: 'x' is not a number"),
                       (["check", "-j", "0", clean], "--jobs: 0 is out of range (1 to 1024)"),
                       (["load", "--ring", "1Q", clean], "--ring: '1Q' is not a size"),
                       ([], "no command given")):
        rc, out, err = run([ckpt, *args])
        cli11 = [w for w in ("Could not convert", "At Most", "The following argument", "is required", "not in {",
                             "Value 0 not in range", "unit not recognized", "A subcommand") if w in err]
        expect(f"ckpt {' '.join(a if a != clean else 'F' for a in args)}: exit 2, '{want}'",
               rc == 2 and want in err and err.startswith("ckpt: error: ") and not cli11, err)
    # --color=WHEN and the environment: a file with findings has a coloured severity when asked.
    evil = os.path.join(root, "tests/cli/data/multi/a_clean.pt")
    compiled = os.path.join(root, "testdata/load/sd_orig_mod.pt")
    cases = [([], {}, False), ([], {"FORCE_COLOR": "1"}, True), ([], {"CLICOLOR_FORCE": "1"}, True),
             ([], {"FORCE_COLOR": "0"}, False), ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
             (["--color=always"], {"NO_COLOR": "1"}, True), (["--color"], {}, True),
             (["--color=never"], {"FORCE_COLOR": "1"}, False), (["--color", "never"], {}, None)]
    for flags, env, want in cases:
        rc, out, err = run([ckpt, "check", *flags, compiled], env)
        label = f"check {' '.join(flags)} with {env or 'no colour variable'}"
        if want is None:  # --color never: `never` is a FILE (GNU's optional argument), not the WHEN
            expect(label + ": 'never' read as a FILE", rc == 3 and "never" in err, err)
        else:
            expect(label + (": colour" if want else ": no colour"), ("\x1b[" in out) == want, repr(out[:200]))
    del evil
    # One JSON shape per flag: --json one document for one checkpoint, refused for several; --jsonl lines.
    rc, out, err = run([ckpt, "summary", "--json", multi])
    expect("summary --json DIR: exit 2 naming --jsonl", rc == 2 and "--jsonl" in err and out == "", err)
    rc, out, err = run([ckpt, "check", "--json", clean, clean])
    expect("check --json F F: exit 2 naming --jsonl", rc == 2 and "--jsonl" in err, err)
    for cmd in ("summary", "check"):
        rc, out, err = run([ckpt, cmd, "--jsonl", clean])
        lines = out.splitlines()
        expect(f"{cmd} --jsonl FILE: one line, one document", len(lines) == 1 and json.loads(lines[0])["file"] == clean, out)
        rc, out, err = run([ckpt, cmd, "--format", "jsonl", multi])
        docs = [json.loads(x) for x in out.splitlines()]
        expect(f"{cmd} --format jsonl DIR: one document per line", len(docs) >= 3 and all("schema" in d for d in docs), out[:300])
        rc, out, err = run([ckpt, cmd, "--json", clean])
        expect(f"{cmd} --json FILE: one indented document", json.loads(out)["file"] == clean and out.count("\n") > 3, err)
    rc, out, err = run([ckpt, "summary", "--json", "--jsonl", clean])
    expect("--json --jsonl: exit 2", rc == 2 and "--jsonl" in err, err)


def test_summary(ckpt, root, tmp):
    # A saved example input (torch.save of plain tensors) is no model: no parameters or buffers.
    path = os.path.join(tmp, "example_input.pt")
    truth = torch_python(f"""
import json, torch
x = {{'input_ids': torch.arange(12).view(2, 6), 'attention_mask': torch.ones(2, 6, dtype=torch.long),
      'pixel_values': torch.randn(2, 3, 4, 4)}}
torch.save(x, {path!r})
print(json.dumps({{'elements': sum(t.numel() for t in x.values()), 'bytes': sum(t.numel() * t.element_size() for t in x.values())}}))
""")
    rc, out, err = run([ckpt, "summary", "--json", path])
    doc = json.loads(out) if rc == 0 else {}
    t = doc.get("totals", {})
    expect("plain tensors: content 'tensors', no parameters or buffers, every element counted",
           doc.get("content") == "tensors" and t.get("parameters") == 0 and t.get("buffers") == 0
           and t.get("attributes") == truth["elements"] and t.get("bytes") == truth["bytes"], (doc.get("content"), t))
    rc, out, err = run([ckpt, "summary", path])
    expect("plain tensors: the text counts no params", "Trainable params" not in out and "plain tensors" in out, out)
    # --match: the totals of the matched subset, said to be partial (truth: torch's numel of those names).
    sd = os.path.join(root, "testdata/load/sd_exact.pt")
    truth = torch_python(f"""
import json, torch, fnmatch
sd = torch.load({sd!r})
keep = [k for k in sd if fnmatch.fnmatchcase(k, '*.weight')]
print(json.dumps({{'tensors': len(keep), 'elements': sum(sd[k].numel() for k in keep if sd[k].is_floating_point())}}))
""")
    rc, out, err = run([ckpt, "summary", "--match", "*.weight", "--exact", sd])
    m = re.search(r"^([\d,]+)\s+Total params$", out, re.M)
    expect("--match: totals of the matched tensors, said to be partial",
           rc == 0 and f"Totals of the {truth['tensors']} tensor" in out and m
           and int(m.group(1).replace(",", "")) == truth["elements"], out[-900:])
    # A sharded set: the index and its shards, the size of all of them.
    shard_dir = os.path.join(root, "tests/cli/data/multi/shards")
    files = sorted(os.listdir(shard_dir))
    shards = [f for f in files if f.endswith(".safetensors")]
    rc, out, err = run([ckpt, "summary", "--exact", shard_dir])
    first = out.splitlines()[0] if out else ""
    total = sum(os.path.getsize(os.path.join(shard_dir, f)) for f in files if f.endswith((".safetensors", ".json")))
    expect("sharded File: names the index, the shard count and the size of all",
           f"+ {len(shards)} shards (" in first and "in all)" in first, first)
    rc, out, err = run([ckpt, "summary", "--json", shard_dir])
    expect("sharded JSON file_size is index + shards", json.loads(out)["file_size"] == total, out[:200])
    # A short Format: line; the zip's records with --verbose (and always in JSON).
    for tag in ("t214", "t215"):
        fixture = os.path.join(root, "testdata", tag)
        f2 = next((os.path.join(fixture, f) for f in sorted(os.listdir(fixture)) if f.endswith(".pt")), None) \
            if os.path.isdir(fixture) else None
        if not f2:
            continue
        rc, out, _ = run([ckpt, "summary", f2])
        fmt_line = next((x for x in out.splitlines() if x.startswith("Format:")), "")
        rc, vout, _ = run([ckpt, "summary", "--verbose", f2])
        vline = next((x for x in vout.splitlines() if x.startswith("Format:")), "")
        with zipfile.ZipFile(f2) as z:
            records = [n.split("/", 1)[1] for n in z.namelist() if n.split("/", 1)[1].startswith(".")]
        expect(f"{tag}: Format: leaves the zip's internal records to --verbose",
               records and not any(r in fmt_line for r in records) and all(r in vline for r in records),
               (fmt_line, vline, records))


def test_gates(ckpt, torch_bin, root, tmp):
    expected = json.load(open(os.path.join(root, "testdata/load/expected.json")))
    by_file = {x["file"]: x for x in expected["loads"]}
    # check --values: NaN / Inf per tensor as torch.isnan / torch.isinf count them.
    for name in ("load/nan_inf.pt", "load/garbage_data.pt", "load/sd_exact.pt"):
        path = os.path.join(root, "testdata", name)
        want = {k: (v["nan"], v["inf"]) for k, v in by_file[name]["tensors"].items() if v["nan"] or v["inf"]}
        rc, out, err = run([ckpt, "check", "--values", "--only", "nonfinite-values", "--json", path])
        doc = json.loads(out)
        got = {}
        for f in doc["findings"]:
            for w in f["where"]:
                m = re.match(r"^(.*) \((\d+) NaN, (\d+) Inf of \d+\)$", w)
                got[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        expect(f"check --values {name}: the NaN / Inf counts of torch, exit {1 if want else 0}",
               got == want and rc == (1 if want else 0), (got, want, rc, err))
    rc, out, err = run([ckpt, "check", os.path.join(root, "testdata/load/nan_inf.pt")])
    expect("check without --values reads no value", rc == 0 and "nonfinite" not in out, out)
    # check --verify: each member's CRC-32, as Python's zipfile checks it.
    for name in ("load/garbage_data.pt", "load/nan_inf.pt"):
        path = os.path.join(root, "testdata", name)
        bad = bad_members(path)
        rc, out, err = run([ckpt, "check", "--verify", "--only", "zip-crc-mismatch", "--json", path])
        doc = json.loads(out)
        named = [loc["member"] for f in doc["findings"] for loc in f["locations"]]
        with zipfile.ZipFile(path) as z:
            n = len(z.infolist())
        expect(f"check --verify {name}: the members zipfile finds bad ({len(bad)}), exit {1 if bad else 0}",
               sorted(named) == sorted(bad) and rc == (1 if bad else 0)
               and (bad or any(f"CRC-32 of {n} zip members" in v for v in doc["verified"])), (named, bad, doc["verified"]))
    # One byte of one tensor flipped in a clean torch.save file.
    src = os.path.join(root, "tests/cli/data/multi/a_clean.pt")
    flipped = os.path.join(tmp, "flipped.pt")
    shutil.copy(src, flipped)
    with zipfile.ZipFile(src) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 64)
    with open(src, "rb") as f:  # the local header's own name and extra lengths (torch pads the extra)
        f.seek(info.header_offset + 26)
        n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    data_at = info.header_offset + 30 + n + m
    with open(flipped, "r+b") as f:
        f.seek(data_at + 5)
        b = f.read(1)
        f.seek(data_at + 5)
        f.write(bytes([b[0] ^ 0x01]))
    expect("the flipped file: zipfile names the member", bad_members(flipped) == [info.filename], bad_members(flipped))
    rc, out, err = run([ckpt, "check", flipped])
    expect("check of the flipped file without --verify: passes (nothing reads the bytes)", rc == 0, out)
    rc, out, err = run([ckpt, "check", "--verify", flipped])
    expect("check --verify of the flipped file: exit 1 naming the member and its offset",
           rc == 1 and "zip-crc-mismatch" in out and info.filename in out and f"at offset {data_at}" in out, out)
    rc, out, err = run([ckpt, "check", "--format", "sarif", "--verify", flipped])
    sarif = json.loads(out)
    rules = [r["ruleId"] for r in sarif["runs"][0]["results"]]
    expect("SARIF: the mismatch is a result", rules == ["zip-crc-mismatch"], rules)
    # An unreadable file is a SARIF result too (code scanning shows results, not notifications).
    rc, out, err = run([ckpt, "check", "--format", "sarif", os.path.join(root, "tests/cli/data/truncated.pt"), src])
    sarif = json.loads(out)
    results = sarif["runs"][0]["results"]
    unread = [r for r in results if r["ruleId"] == "unreadable"]
    expect("SARIF: an unreadable file is a result with rule id 'unreadable' and a notification",
           rc == 3 and len(unread) == 1 and unread[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
           .endswith("truncated.pt") and sarif["runs"][0]["invocations"][0].get("toolExecutionNotifications"), out[:500])
    if not torch_bin:
        return
    # load --fail-on nonfinite: exit 1 with the counts; nothing loaded: exit 1 saying why.
    nan_inf = os.path.join(root, "testdata/load/nan_inf.pt")
    rc, out, err = run([ckpt, "load", nan_inf], {"CKPT_TORCH": torch_bin})
    expect("load of NaN / Inf without --fail-on: exit 0", rc == 0, err)
    rc, out, err = run([ckpt, "load", "--fail-on", "nonfinite", nan_inf], {"CKPT_TORCH": torch_bin})
    n = sum(1 for v in by_file["load/nan_inf.pt"]["tensors"].values() if v["nan"] or v["inf"])
    expect(f"load --fail-on nonfinite: exit 1, {n} tensor(s) named", rc == 1 and f"{n} tensor(s) hold NaN or Inf" in out,
           out[-600:] + err)
    rc, out, err = run([ckpt, "load", "--fail-on", "nonfinite", "--device", "meta", nan_inf], {"CKPT_TORCH": torch_bin})
    expect("load --fail-on nonfinite --device meta: a usage error", rc == 2, err)
    empty = os.path.join(tmp, "empty.pt")
    torch_python(f"import torch; torch.save({{}}, {empty!r})")
    rc, out, err = run([ckpt, "load", empty], {"CKPT_TORCH": torch_bin})
    expect("load of a file without tensors: exit 1, saying nothing was loaded", rc == 1 and "nothing loaded" in out, out + err)
    rc, out, err = run([ckpt, "load", "--json", empty], {"CKPT_TORCH": torch_bin})
    expect("load --json of it: exit 1, the note in the report", rc == 1 and any("nothing loaded" in x for x in json.loads(out)["notes"]), out)
    # The load table: summary's look, `?` for an unknown shape.
    lazy = os.path.join(root, "testdata/load/sd_module.pt")
    rc, out, err = run([ckpt, "load", "--tensors", lazy], {"CKPT_TORCH": torch_bin})
    expect("load text: File: / Device: labels and a Lightning-style table",
           out.startswith("File:") and "\nDevice:" in out and re.search(r"^ +\| Name +\| dtype +\| Shape", out, re.M), out[:600])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--torch", default="", help="ckpt-torch, for the load cases")
    a = ap.parse_args()
    ckpt = os.path.abspath(a.ckpt)
    with tempfile.TemporaryDirectory() as tmp:
        test_conventions(ckpt, a.root)
        test_summary(ckpt, a.root, tmp)
        test_gates(ckpt, os.path.abspath(a.torch) if a.torch else "", a.root, tmp)
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
