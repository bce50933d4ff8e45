#!/usr/bin/env python3
"""Module types from config.json (issue 41): `ckpt summary --json` of a Hugging Face model folder names each
module with transformers' class (`inferred_type`), as the transformers that wrote config.json builds it.

Truth: testdata/module_types/truth.json (testdata/gen_module_types.py: transformers 5.23 built a tiny model of
each supported model type, saved it, loaded it back; `module_types` is type(m).__name__ of every named module,
`modules_in_keys` those a saved key lies under; `_other_versions` how 4.57.1 and 5.0 to 5.17 name them where
they differ, null where the module does not exist there), and the module_types of testdata/hf523/ and
testdata/hf211/ (transformers 5.23 and 5.17).

For each model type, and again with config.json's transformers_version set to each other version, every module
of the file's key structure (the root too) must be named as that version's tree names it or left unnamed (0
wrong), at least 90% of them named; a module that version has no class for is not counted; and the totals'
parameters, with and without embeddings, transformers' num_parameters() and num_parameters(exclude_embeddings=True).

Usage: module_types.py --ckpt build/ckpt --root .   Exit 0 when all hold, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile


def summary(ckpt, folder):
    r = subprocess.run([ckpt, "summary", "--json", folder], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"summary --json {folder}: exit {r.returncode}: {r.stderr.strip()[:300]}")
    return json.loads(r.stdout)


def module_table(doc):
    return {m["name"]: m.get("type") or m.get("inferred_type") for m in doc["modules"]}


def compare(label, got, want):
    """want: module -> class (None: no such module in that version). Returns (counted, named, problems)."""
    counted = named = 0
    problems = []
    for name, cls in sorted(want.items()):
        if cls is None:
            continue
        counted += 1
        if name not in got:
            problems.append(f"{label}: module '{name}' ({cls}) is not in the summary")
        elif got[name] is None:
            continue
        elif got[name] == cls:
            named += 1
        else:
            problems.append(f"{label}: '{name}' named {got[name]}, transformers says {cls}")
    if counted and named < 0.9 * counted:
        problems.append(f"{label}: {named} of {counted} modules named, want >= 90%")
    return counted, named, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    td = os.path.join(a.root, "testdata")
    truth = json.load(open(os.path.join(td, "module_types", "truth.json")))
    others = truth.get("_other_versions", {})
    problems, counted, named, runs = [], 0, 0, 0
    tmp = tempfile.mkdtemp(prefix="ckpt-module-types-")
    try:
        for mt, t in sorted(truth.items()):
            if mt.startswith("_"):
                continue
            folder = os.path.join(td, "module_types", mt)
            base = {m: t["module_types"][m] for m in t["modules_in_keys"]}
            base[""] = t["architecture"]
            versions = [(t["transformers_version"], {})] + [(v, d.get(mt, {})) for v, d in sorted(others.items())
                                                          if isinstance(d.get(mt, {}), dict)]
            for version, diff in versions:
                want = {**base, **diff}
                if version == t["transformers_version"]:
                    where = folder
                else:  # the same files, config.json saying another version wrote them
                    where = os.path.join(tmp, f"{mt}-{version}")
                    shutil.copytree(folder, where)
                    cfg_path = os.path.join(where, "config.json")
                    cfg = json.load(open(cfg_path))
                    cfg["transformers_version"] = version
                    json.dump(cfg, open(cfg_path, "w"), indent=2)
                doc = summary(a.ckpt, where)
                c, n, p = compare(f"{mt} (transformers {version})", module_table(doc), want)
                # transformers' num_parameters, with and without every Embedding's weight (named from the config)
                for key, field in (("num_parameters", "parameters"), ("num_parameters_exclude_embeddings", "parameters_without_embeddings")):
                    if doc["totals"][field] != t[key]:
                        p.append(f"{mt} (transformers {version}): totals.{field} {doc['totals'][field]}, transformers' {key} {t[key]}")
                counted, named, runs = counted + c, named + n, runs + 1
                problems += p
        for tf in ("hf523", "hf211"):
            for name, t in sorted(json.load(open(os.path.join(td, tf, "truth.json"))).items()):
                if not isinstance(t, dict) or "module_types" not in t:
                    continue
                folder = os.path.join(td, tf, name)
                got = module_table(summary(a.ckpt, folder))
                # the modules of the file's keys: the summary's rows (each a prefix of a key) that transformers has
                want = {m: t["module_types"][m] for m in got if m in t["module_types"]}
                want[""] = t["config"]["architectures"][0]
                c, n, p = compare(f"{tf}/{name}", got, want)
                counted, named, runs = counted + c, named + n, runs + 1
                problems += p
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for p in problems:
        print("FAIL " + p)
    print(f"{runs} folders and versions, {named} of {counted} modules named ({100.0 * named / max(counted, 1):.1f}%), "
          f"{len(problems)} failures")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
