#!/usr/bin/env python3
"""Lightning training state in `summary` (issue 28, point 6) against torch's own reading of the files.

Files: testdata/lightning/state_t<ver>.ckpt, written by testdata/gen_lightning_state.py under torch 1.13,
2.6 and 2.14 (a real optimizer of every torch.optim class and a real scheduler of every lr_scheduler class,
each after one step, in Lightning's checkpoint layout), testdata/t211/lightning_fit.ckpt, written by
Lightning 2.6.6's Trainer.fit, and testdata/t211/fabric_state.ckpt, written by its fabric.save. Their truth
(state_t<ver>.json, t211/<name>.state.json) is what torch.load gives back.

`summary --json`'s `training` must give:
- per optimizer: every param-group key and value (params counted), the per-parameter state keys and the
  number of parameters with state; its inferred class equal to the torch.optim class that made it, or
  null where the keys cannot tell (Adam and AdamW before torch saves decoupled_weight_decay);
- per scheduler: its whole state_dict, and its class (or null);
- each callback's state with its tensors' values (ModelCheckpoint's best_model_score, EarlyStopping's
  best_score), the grad scaler's state, the loops dict, and the progress counters read from it.
The text's Optim / Sched / Callback / Scaler / Progress lines name the same classes and values.
"""

import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402

fails = []
compared = 0


def eq(what, got, want):
    global compared
    compared += 1
    if got != want:
        fails.append(f"{what}: ckpt {got!r}, torch {want!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    schemas = json_schemas.Schemas(a.root)
    td = os.path.join(a.root, "testdata")
    cases = [(p[:-5] + ".ckpt", p) for p in sorted(glob.glob(os.path.join(td, "lightning", "state_t*.json")))]
    for real in ("lightning_fit", "fabric_state"):
        cases.append((os.path.join(td, "t211", real + ".ckpt"), os.path.join(td, "t211", real + ".state.json")))
    classes = {"right": 0, "unsure": 0}
    for path, truth_path in cases:
        truth = json.load(open(truth_path))
        name = os.path.relpath(path, td)
        p = subprocess.run([a.ckpt, "summary", "--json", path], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fails.append(f"{name}: exit {p.returncode}: {p.stderr.strip()}")
            continue
        for problem in schemas.output_problems(p.stdout):
            fails.append(f"{name}: schema: {problem}")
        tr = json.loads(p.stdout).get("training") or {}
        text = subprocess.run([a.ckpt, "summary", path], capture_output=True, text=True, timeout=120).stdout

        def klass(what, got, want):
            if want is None:
                return
            if got is None:
                classes["unsure"] += 1
            else:
                classes["right"] += 1
                eq(f"{what} class", got, want)
                if f"~{want} " not in text and f"~{want}:" not in text:
                    fails.append(f"{name}: text does not show ~{want}")

        opts = tr.get("optimizers", [])
        eq(f"{name} optimizers", len(opts), len(truth["optimizers"]))
        for k, (o, t) in enumerate(zip(opts, truth["optimizers"])):
            eq(f"{name} optimizer {k} param_groups", o["param_groups"], t["param_groups"])
            eq(f"{name} optimizer {k} state", o["state"], t["state"])
            klass(f"{name} optimizer {k}", o["class"], t["class"])
        scheds = tr.get("lr_schedulers", [])
        eq(f"{name} lr_schedulers", len(scheds), len(truth["lr_schedulers"]))
        for k, (s, t) in enumerate(zip(scheds, truth["lr_schedulers"])):
            eq(f"{name} scheduler {k} state", s["state"], t["state"])
            klass(f"{name} scheduler {k}", s["class"], t["class"])
        eq(f"{name} callbacks", {c["key"]: c["state"] for c in tr.get("callbacks", [])}, truth["callbacks"])
        for c in tr.get("callbacks", []):
            eq(f"{name} callback class", c["class"], c["key"].split("{")[0])
            score = c["state"].get("best_model_score", c["state"].get("best_score"))
            if score is not None and f"{score:g}" not in text:
                fails.append(f"{name}: text does not show the score {score:g}")
        eq(f"{name} precision", tr.get("precision"), truth.get("precision"))
        eq(f"{name} loops", tr.get("loops"), truth["loops"])
        fit = (truth["loops"] or {}).get("fit_loop")
        if fit is None:
            eq(f"{name} progress (no loops)", tr.get("progress"), None)
            continue
        want = {
            "epochs_completed": fit["epoch_progress"]["total"]["completed"],
            "batches_completed": fit["epoch_loop.batch_progress"]["total"]["completed"],
            "optimizer_steps": fit["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]["total"]["completed"],
            "scheduler_steps": fit["epoch_loop.scheduler_progress"]["total"]["completed"],
        }
        eq(f"{name} progress", {k: (tr.get("progress") or {}).get(k) for k in want}, want)
        line = next((l for l in text.splitlines() if l.startswith("Progress:")), "")
        eq(f"{name} Progress line", f"{want['epochs_completed']} epochs completed, {want['batches_completed']} batches" in line, True)
    for f in fails:
        print("FAIL", f)
    print(f"classes: {classes['right']} inferred, {classes['unsure']} left unknown (keys that fit several)")
    print(f"{len(cases)} files, {compared} values compared, {len(fails)} mismatches")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
