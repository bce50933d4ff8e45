#!/usr/bin/env python3
"""`ckpt check` on the torch.compile corpus (testdata/compile/t26, t214; issue 31) against dynamo itself.

Each folder's truth.json (gen_compile.py) says, for every archive, what torch._dynamo.explain and
torch.compile(fullgraph=True) said of the original Python module on that torch, with the default
config and with each flag. This runs one `ckpt check --jsonl` over all of a folder's archives and, per
archive, reads ckpt's compile claims for that torch version: the findings whose `compile.breaks_on`
names it, split by entry (`compile.entries`: forward, or the exported method `step`). Then, case by case:

- an archive that shows its construct (`shows`): ckpt claims a break for the entry dynamo compiled
  (forward, or step for the `method` placement) exactly when dynamo broke there; a `method` case
  claims nothing for forward (dynamo compiled forward clean: `forward_breaks` false), and its
  finding's message says compiling forward alone is clean;
- on a true break: the flags ckpt says remove it on that version (every claiming finding's
  `compile.fixed_by`, intersected) are exactly the flags that made dynamo compile it, and some claiming
  finding's message quotes dynamo's own reason (its first line, and the aten operator it names);
- an archive that cannot show it (a traced branch or .item(), an `unused` stub) claims nothing and
  has the info finding that says so (traced-archive, ignored-code); every traced archive has
  traced-archive, also one whose trace still shows its construct (the nonzero of a one-argument where);
- the output validates against schemas/ckpt.check-1.schema.json.

Prints the confusion table per torch version and every miss; exit status 1 when any case is wrong
or precision / recall (over the archives that show their construct) is below 0.95.
"""

import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402

FLAGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops", "allow_rnn")
HIDDEN = {"traced": "traced-archive", "unused": "ignored-code"}


def reason_keys(d):
    """What a message must quote of dynamo's reason: its first line (cut before the hint), and the aten
    operator it names."""
    text = d["reasons"][0] if d["reasons"] else (d["fullgraph"] or "")
    text = re.sub(r"^(Unsupported|UserError|TorchRuntimeError): ", "", text.strip())
    first = text.split("\n")[0]
    for cut in ("; ", " [<class", ". Please", " (unhinted"):
        first = first.split(cut)[0]
    keys = [first.replace(".default", "").strip()]
    m = re.search(r"`(aten\.[A-Za-z0-9_.]+)`", text)
    if m:
        keys.append(m.group(1).replace(".default", ""))
    return keys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("sets", nargs="*", default=["t26", "t214"])
    a = ap.parse_args()
    schemas = json_schemas.Schemas(a.root)
    failed = False
    for name in a.sets:
        folder = os.path.join(a.root, "testdata", "compile", name)
        truth = json.load(open(os.path.join(folder, "truth.json")))
        version = ".".join(truth["torch"].split("+")[0].split(".")[:2])
        files = sorted(truth["cases"])
        p = subprocess.run([a.ckpt, "check", "--jsonl", "--fail-on", "never"] + [os.path.join(folder, f) for f in files],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(f"FAIL {name}: ckpt check exited {p.returncode}: {p.stderr.strip()}")
            failed = True
            continue
        docs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        for problem in schemas.output_problems(p.stdout):
            print(f"FAIL {name}: schema: {problem}")
            failed = True
        by_file = {os.path.basename(d["file"]): d for d in docs}
        table = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
        wrong = []
        for f in files:
            case, doc = truth["cases"][f], by_file.get(f)
            if doc is None:
                wrong.append(f"{f}: no report")
                continue
            claims = [x for x in doc["findings"] if x.get("compile") and version in x["compile"]["breaks_on"]]

            def claiming(entry):
                return [x for x in claims if entry in x["compile"]["entries"]]

            dyn = case["dynamo"]["default"]
            if not case["shows"]:
                info = HIDDEN[case["placement"]]
                if claims:
                    wrong.append(f"{f}: claims {[x['id'] for x in claims]} on code the archive does not show")
                if not any(x["id"] == info for x in doc["findings"]):
                    wrong.append(f"{f}: no {info} finding")
                continue
            if case["placement"] == "traced" and not any(x["id"] == "traced-archive" for x in doc["findings"]):
                wrong.append(f"{f}: no traced-archive finding")
            entry = case["entry"]
            mine = claiming(entry)
            if case["placement"] == "method":
                fwd = claiming("forward")
                if bool(fwd) != case["forward_breaks"]:
                    wrong.append(f"{f}: forward alone: ckpt {'breaks' if fwd else 'clean'}, dynamo "
                                 f"{'breaks' if case['forward_breaks'] else 'clean'}")
                if mine and not any("compiling forward alone is clean" in x["message"] for x in mine):
                    wrong.append(f"{f}: the message does not say forward alone compiles clean")
            key = ("tp" if dyn["breaks"] else "fp") if mine else ("fn" if dyn["breaks"] else "tn")
            table[key] += 1
            if key in ("fp", "fn"):
                why = "; ".join(reason_keys(dyn)) if dyn["breaks"] else ", ".join(x["id"] for x in mine)
                wrong.append(f"{f}: {key.upper()} ({case['family']}, {case['placement']}): {why}")
                continue
            if key != "tp":
                continue
            fixes = {flag for flag in FLAGS if flag in case["dynamo"] and not case["dynamo"][flag]["breaks"]}
            said = None
            for x in mine:
                flags = set(x["compile"]["fixed_by"].get(version, []))
                said = flags if said is None else said & flags
            if said != fixes:
                wrong.append(f"{f}: fixed by: ckpt {sorted(said)}, dynamo {sorted(fixes)}")
            keys = reason_keys(dyn)
            if not any(all(k in x["message"] for k in keys) for x in mine):
                wrong.append(f"{f}: no message quotes dynamo's reason {keys}")
        shows = table["tp"] + table["fp"] + table["fn"] + table["tn"]
        precision = table["tp"] / (table["tp"] + table["fp"]) if table["tp"] + table["fp"] else 1.0
        recall = table["tp"] / (table["tp"] + table["fn"]) if table["tp"] + table["fn"] else 1.0
        print(f"torch {truth['torch']} ({name}): {len(files)} archives, {shows} show their construct: "
              f"TP {table['tp']} FP {table['fp']} FN {table['fn']} TN {table['tn']}; "
              f"precision {precision:.3f} recall {recall:.3f}")
        for w in wrong:
            print(f"FAIL {name}: {w}")
        if wrong or precision < 0.95 or recall < 0.95:
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
