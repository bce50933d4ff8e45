#!/usr/bin/env python3
"""Detection and false-positive rates of `ckpt check` on the security corpus (testdata/security/).

    bench/security.py [--ckpt build/ckpt] [--runs 3] [--markdown] [--misses]

Runs `ckpt check --json FILE` (default --fail-on error) on every file of
testdata/security/expected.json, whose verdicts come from Python itself (gen_security.py's oracle:
what torch.load(weights_only=False) / pickle.load would call), and prints:

- detection rate: malicious files (a non-allowlisted global is called or built), dangerous-reference
  files (a denylisted global handed to the loader uncalled) and tampered files (the pickle writes into a
  tensor) with exit status 1, over all of them; how many of those also name every expected global (`must_name`) in a
  dangerous-global finding; and the rate over attack files alone (the malicious verdict also covers
  real torch.save outputs of a user-defined nn.Module class, which the rule counts as dangerous);
- false-positive rate: benign files (verdict clean or referenced-only) with exit status 1, over all
  benign files; beside it, how many of them ckpt could not read (exit 3);
- apart, because the rule allows either answer: extras-only files (only vetted-extra candidates such
  as argparse.Namespace or torch.nn.modules.* are called) and dormant files (a payload in a pickle
  torch never unpickles) flagged; and refused files (torch.load refuses them) by exit status;
- the same detection rate per family (generated files) and per source (public / re-created);
- the time: the sum over files of the best of --runs wall times, and the median and slowest file.

`--misses` lists the malicious files not caught and the benign files flagged.
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def group_of(rel, e):
    if e["made_as"] == "benign":  # a real torch.save of a user class: the rule calls it dangerous
        return e["source"] + " (benign save, user class built)"
    if rel.startswith("gen/"):
        return "generated: " + e["family"].split(":")[0]
    return e["source"]


def pct(a, b):
    return "%d/%d (%.1f %%)" % (a, b, 100.0 * a / b) if b else "0/0"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", default=os.environ.get("CKPT", os.path.join(here, "..", "build", "ckpt")))
    ap.add_argument("--root", default=os.path.join(here, ".."))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--misses", action="store_true")
    a = ap.parse_args()
    ckpt = os.path.abspath(a.ckpt)
    if not os.access(ckpt, os.X_OK):
        sys.exit("bench/security.py: no ckpt binary at %s (build it, or pass --ckpt / set CKPT)" % ckpt)
    sec = os.path.join(os.path.abspath(a.root), "testdata", "security")
    with open(os.path.join(sec, "expected.json")) as f:
        files = json.load(f)["files"]

    rows = []
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-security-") as tmp:
        env = dict(os.environ, CKPT_SENTINEL=os.path.join(tmp, "sentinel"), NO_COLOR="1")
        for rel, e in files.items():
            best, rc, doc = None, None, None
            for _ in range(max(1, a.runs)):
                t0 = time.perf_counter()
                p = subprocess.run([ckpt, "check", "--json", os.path.join(sec, rel)], cwd=tmp, env=env,
                                   capture_output=True, timeout=60)
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
                rc = p.returncode
                try:
                    doc = json.loads(p.stdout)
                except ValueError:
                    doc = None
            where = [w for f in (doc or {}).get("findings", []) if f.get("id") == "dangerous-global"
                     for w in f.get("where", [])]
            named = all(any(alt in w for w in where for alt in alts) for alts in e.get("must_name", []))
            rows.append((rel, e, rc, best, named))
        if os.path.exists(os.path.join(tmp, "sentinel")):
            sys.exit("bench/security.py: THE SENTINEL WAS CREATED")

    by = collections.defaultdict(list)
    for r in rows:
        by[r[1]["verdict"]].append(r)
    # To be flagged (exit 1): a call or build (malicious), a denylisted object handed over uncalled
    # (dangerous-reference), a tensor written into by the pickle (tampered).
    mal = by["malicious"] + by["dangerous-reference"] + by["tampered"]
    caught = [r for r in mal if r[2] == 1]
    caught_named = [r for r in caught if r[4]]
    attacks = [r for r in mal if r[1]["made_as"] != "benign"]
    benign = by["clean"] + by["referenced-only"]
    fp = [r for r in benign if r[2] == 1]
    unread = [r for r in benign if r[2] == 3]
    extras = by["extras-only"]
    dormant = by["dormant"]
    refused = by["refused"]
    times = [r[3] for r in rows]

    def table(head, body):
        if a.markdown:
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for b in body:
                print("| " + " | ".join(b) + " |")
        else:
            w = [max(len(x) for x in col) for col in zip(head, *body)]
            for line in [head] + body:
                print("  ".join(x.ljust(n) for x, n in zip(line, w)))
        print()

    print("ckpt: %s (%s)" % (ckpt, subprocess.run([ckpt, "--version"], capture_output=True, text=True).stdout.strip()))
    print("corpus: %d files (%s)\n" % (len(rows), ", ".join("%s %d" % (k, len(v)) for k, v in sorted(by.items()))))
    table(["measure", "value"], [
        ["detection (malicious + dangerous-reference + tampered, exit 1)", pct(len(caught), len(mal))],
        ["  of which every expected global named", pct(len(caught_named), len(mal))],
        ["  attack files only (not benign saves of user classes)", pct(sum(r[2] == 1 for r in attacks), len(attacks))],
        ["false positives (clean + referenced-only, exit 1)", pct(len(fp), len(benign))],
        ["  benign not read (exit 3)", pct(len(unread), len(benign))],
        ["extras-only flagged (either answer allowed)", pct(sum(r[2] == 1 for r in extras), len(extras))],
        ["dormant flagged (either answer allowed)", pct(sum(r[2] == 1 for r in dormant), len(dormant))],
        ["refused by torch: exit 0 / 1 / 3 / other", "%d / %d / %d / %d" % tuple(
            [sum(r[2] == c for r in refused) for c in (0, 1, 3)] + [sum(r[2] not in (0, 1, 3) for r in refused)])],
        ["time: sum of best-of-%d per file" % a.runs, "%.2f s" % sum(times)],
        ["time: median / slowest file", "%.1f ms / %.1f ms" % (1000 * statistics.median(times), 1000 * max(times))],
    ])
    groups = collections.OrderedDict()
    for r in sorted(mal, key=lambda r: group_of(r[0], r[1])):
        groups.setdefault(group_of(r[0], r[1]), []).append(r)
    table(["family / source", "malicious caught", "named"],
          [[g, pct(sum(r[2] == 1 for r in rs), len(rs)), "%d" % sum(r[2] == 1 and r[4] for r in rs)]
           for g, rs in groups.items()])
    bgroups = collections.OrderedDict()
    for r in sorted(benign + extras, key=lambda r: r[1]["source"]):
        bgroups.setdefault(r[1]["source"] + (" (extras-only)" if r[1]["verdict"] == "extras-only" else ""), []).append(r)
    table(["benign source", "flagged (exit 1)", "not read (exit 3)"],
          [[g, pct(sum(r[2] == 1 for r in rs), len(rs)), "%d" % sum(r[2] == 3 for r in rs)]
           for g, rs in bgroups.items()])
    if a.misses:
        for r in mal:
            if r[2] != 1:
                print("missed (exit %s): %s  [%s]" % (r[2], r[0], ", ".join(c["global"] for c in r[1]["called"])))
        for r in fp:
            print("false positive: %s" % r[0])


if __name__ == "__main__":
    main()
