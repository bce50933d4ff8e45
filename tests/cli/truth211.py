#!/usr/bin/env python3
"""ckpt against the truth of files written by today's stack (issue 28): testdata/t211/ and testdata/hf211/,
copied from ../shared/fixtures/ (written on a GPU machine by torch 2.11.0+cu130, Lightning 2.6.6,
transformers 5.17.0 and accelerate 1.15.0), and testdata/hf523/ (issue 39: written by testdata/gen_hf.py
under torch 2.15, transformers 5.23.0 and accelerate 1.15.0 of scripts/truth-env.sh); every value in their
truth.json was read back by those libraries, never by ckpt.

For every file or folder of t211/truth.json, `ckpt summary --json` must give:
- transformers' num_parameters(exclude_embeddings=True) as totals.parameters_without_embeddings, and
  the elements of each dtype (totals.by_dtype) as the truth's tensors sum them;
- each truth tensor by name with its dtype, shape and numel; `n_tensors`, `total_numel` and
  `unique_numel` as totals.tensors / elements / unique_elements;
- the parameter and buffer counts the libraries give: Lightning's ModelSummary (total and trainable
  parameters, its model size in MB as parameter bytes / 1e6, every layer's parameter count as the
  module table's), Fabric's `n_params` / `n_buffers`, transformers' `num_parameters`, the export's
  `n_params` and `n_buffers` (the export's buffers include its non-persistent one, which ckpt lists as a
  constant: buffers + the constants' elements), its constants, operators and range constraints;
- Lightning's epoch, global_step, version, callbacks, hyper-parameters and the optimizer / scheduler
  counts; a DCP folder's files;
every inferred layer type (`inferred_type`) equal to the class ModelSummary or transformers' module_types
report (or `?`; the hit rate is printed); and, with --load, `ckpt load --json --checksum` (ckpt-torch, on the CPU) each tensor's CRC-32 as torch
computed it.
For hf211/truth.json and hf523/truth.json (HF_FOLDERS; hf523: transformers 5.23, accelerate 1.15, written by
testdata/gen_hf.py): num_parameters as totals.parameters and every tensor of each model folder; and
`summary --memory` byte for byte against accelerate's calculate_maximum_sizes (total, largest layer and its
names), every row's estimate_training_usage of the float32 size, as the estimate-memory command derives each
row (accelerate_estimate_training_usage_float32, testdata/add_training_truth.py), and the KV cache bytes of the real
past_key_values for each (batch, seq_len) of the truth (and, for hf523, how many layers transformers' cache
made sliding-window ones); the parameter and buffer bytes of the loaded model (non-persistent buffers
included); and, for hf523, every row of `accelerate estimate-memory` as the command's own functions computed
it (largest layer, total size, Adam's training usage per --dtypes row).
Mismatches listed in KNOWN_TABLE (model, field, issue, cause) are printed as KNOWN and do not fail.

Prints a FAIL line per mismatch and the number of values compared; exit status 1 on any mismatch not in
KNOWN_TABLE, or on an entry of KNOWN_TABLE that was never compared.
"""

import argparse
import json
import os
import subprocess
import sys


# The HF folders with a truth.json: transformers 5.17's (copied) and 5.23's (testdata/gen_hf.py).
HF_FOLDERS = ("hf211", "hf523")

# Mismatches known and left to another issue, per model: the fields (as the FAIL line would name them), the
# issue, the cause. Each is printed as "KNOWN ... known (issue N)" and does not fail the test; any other
# mismatch does, and so does an entry here that is never compared. One that starts agreeing is printed as a
# NOTE (remove it from the table then).
KNOWN_TABLE = (
    # model                       fields       issue       cause
)
KNOWN = {f"{model} {field}": issue for model, fields, issue, _ in KNOWN_TABLE for field in fields}


def run_json(*cmd):
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--load", action="store_true", help="also compare CRC-32s through ckpt load (needs ckpt-torch)")
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    fails, compared = [], 0
    known, known_passing, seen_known = [], [], set()
    types = {"known": 0, "inferred": 0}

    def layer_types(label, doc, known):
        """Inferred layer types (`inferred_type`, shown ~Type) against the classes the library reports:
        equal, or the library's own spelling of it (LlamaRMSNorm is an RMSNorm); none where unsure."""
        nonlocal compared
        for m in doc["modules"]:
            k = known.get(m["name"])
            if k is None:
                continue
            types["known"] += 1
            got = m.get("inferred_type")
            if got is None:
                continue
            types["inferred"] += 1
            compared += 1
            if not (got == k or k.endswith(got)):
                fails.append(f"{label} {m['name']}: inferred type {got}, the library says {k}")

    def eq(what, got, want):
        nonlocal compared
        compared += 1
        issue = KNOWN.get(what)
        if issue is not None:
            seen_known.add(what)
            if got != want:
                known.append(f"{what}: ckpt {got!r}, truth {want!r}  known ({issue})")
            else:
                known_passing.append(f"{what}: listed as known ({issue}) but ckpt now agrees")
        elif got != want:
            fails.append(f"{what}: ckpt {got!r}, truth {want!r}")

    def tensors(label, doc, truth_tensors, loaded=None, prefix=""):
        by_name = {t["name"]: t for t in doc["tensors"]}
        crc = {t["name"]: t.get("crc32") for t in (loaded or {}).get("tensors", [])}
        if isinstance(truth_tensors, dict):  # the safetensors folders: name -> {file, dtype, shape, crc32}
            truth_tensors = [dict(v, name=k) for k, v in truth_tensors.items()]
        for t in truth_tensors:
            if "numel" not in t:
                n = 1
                for d in t["shape"]:
                    n *= d
                t = dict(t, numel=n)
            got = by_name.get(prefix + t["name"])
            if got is None:
                fails.append(f"{label}: no tensor {prefix + t['name']}")
                continue
            t = dict(t, name=prefix + t["name"])
            eq(f"{label} {t['name']} dtype", got["dtype"], t["dtype"])
            eq(f"{label} {t['name']} shape", got["shape"], t["shape"])
            eq(f"{label} {t['name']} numel", got["numel"], t["numel"])
            if loaded is not None and "crc32" in t:
                eq(f"{label} {t['name']} crc32", crc.get(t["name"]), t["crc32"])

    def memory(label, path, truth):
        """summary --memory against accelerate 1.15 (calculate_maximum_sizes of the loaded model, then
        estimate_training_usage of its total per mixed-precision mode; where the truth has them, the rows of
        `accelerate estimate-memory` and the parameter / buffer bytes of the loaded model) and against the bytes
        of the real past_key_values after a forward of [batch, seq_len] input ids. The sizes do not depend on
        batch and seq_len: they are compared once, from the first run."""
        mx = truth["accelerate_calculate_maximum_sizes"]
        for i, kv in enumerate(truth["kv_cache"] or [{"batch": 1, "seq_len": 16}]):
            doc = run_json(a.ckpt, "summary", "--json", "--memory", "--batch", str(kv["batch"]), "--seq-len",
                           str(kv["seq_len"]), path)
            m = doc["memory"]
            if "kv_cache_bytes" in kv:
                eq(f"{label} kv_cache {kv['batch']}x{kv['seq_len']}", (m["kv_cache"] or {}).get("bytes"), kv["kv_cache_bytes"])
                eq(f"{label} kv_cache dtype", (m["kv_cache"] or {}).get("dtype"), kv["dtype"])
                if "layer_classes" in kv:  # the layers transformers' DynamicCache made sliding-window ones
                    eq(f"{label} kv_cache {kv['batch']}x{kv['seq_len']} sliding_layers", (m["kv_cache"] or {}).get("sliding_layers"),
                       sum(1 for c in kv["layer_classes"] if "Sliding" in c))
            else:
                eq(f"{label} kv_cache (not a decoder)", m["kv_cache"], None)
            if i:
                continue
            eq(f"{label} memory total_size", m["total_bytes"], mx["total_size"])
            eq(f"{label} memory largest_layer", [m["largest_layer"]["bytes"], m["largest_layer"]["names"]], mx["largest_layer"])
            rows = {r["dtype"]: r for r in m["dtypes"]}
            own = rows[m["dtype"]]
            eq(f"{label} memory own row", [own["own"], own["total_bytes"], own["largest_layer_bytes"]],
               [True, mx["total_size"], mx["largest_layer"][0]])
            # every row's training, the file's own included, is accelerate's estimate_training_usage of the float32
            # size (the folder loaded in float32), as the estimate-memory command derives each row
            for precision, usage in truth["accelerate_estimate_training_usage_float32"].items():
                eq(f"{label} memory training {precision}", rows[precision]["training"], usage)
            # every parameter once and every buffer, the non-persistent ones transformers registers included
            if "param_bytes" in truth:
                tot = doc["totals"]
                eq(f"{label} param_bytes", tot["parameter_bytes"], truth["param_bytes"])
                # buffers: the file's (its bytes less the parameters') and the non-persistent ones ckpt adds
                eq(f"{label} buffer_bytes", tot["bytes"] - tot["parameter_bytes"]
                   + sum(b["bytes"] for b in m["non_persistent_buffers"]), truth["buffer_bytes"])
            # `accelerate estimate-memory`'s rows as the command's own functions computed them (gather_data): per
            # dtype the largest layer, the total and Adam's training usage (None for its N/A), all derived from the
            # float32 model its create_empty_model builds. ckpt's bytes against accelerate's numbers (a float where
            # it divided, e.g. int4's total / 8: equal within a byte).
            # Where the command's model (AutoModel: the base model) is not the file's, ckpt gives its figures apart.
            cmd = m.get("accelerate_command")
            if truth.get("accelerate_estimate_memory"):
                eq(f"{label} estimate-memory model_class", cmd["model_class"] if cmd else None,
                   None if truth["accelerate_estimate_memory"]["total_size"] == m["float32_total_bytes"]
                   else truth["accelerate_estimate_memory"]["model_class"])
            if cmd and truth.get("accelerate_estimate_memory"):
                eq(f"{label} estimate-memory largest_layer", [cmd["largest_layer"]["bytes"], cmd["largest_layer"]["names"]],
                   truth["accelerate_estimate_memory"]["largest_layer"])
            cmd_rows = {r["dtype"]: r for r in cmd["dtypes"]} if cmd else rows
            for row in (truth.get("accelerate_estimate_memory") or {}).get("rows", []):
                got = cmd_rows.get(row["dtype"])
                if got is None:
                    fails.append(f"{label} estimate-memory: no {row['dtype']} row")
                    continue
                for field, want in (("largest_layer_bytes", row["largest_layer"]), ("total_bytes", row["total_size"])):
                    g = got[field]
                    eq(f"{label} estimate-memory {row['dtype']} {field}", want if abs(g - want) < 1 else g, want)
                tr = row["training"]
                eq(f"{label} estimate-memory {row['dtype']} training", got["training"],
                   None if max(tr.values()) == -1 else tr)

    def cases(folder):
        """(name, truth, path, summary JSON) for every entry of testdata/FOLDER/truth.json."""
        for name, truth in json.load(open(os.path.join(a.root, "testdata", folder, "truth.json"))).items():
            if not name.startswith("_"):
                path = os.path.join(a.root, "testdata", folder, name)
                yield name, truth, path, run_json(a.ckpt, "summary", "--json", "--tensors", path)

    for name, truth, path, doc in cases("t211"):
        loaded = run_json(a.ckpt, "load", "--json", "--checksum", path) if a.load else None
        tot = doc["totals"]
        # DCP flattens the saved {"model": state_dict} into "model.<key>" names (its .metadata holds them so);
        # the truth lists the state dict torch.distributed.checkpoint loaded back into.
        tensors(name, doc, truth["tensors"], loaded, "model." if truth["kind"] == "dcp" else "")
        for field, key in (("n_tensors", "tensors"), ("total_numel", "elements"), ("unique_numel", "unique_elements")):
            if field in truth:
                eq(f"{name} {field}", tot[key], truth[field])
        if "num_parameters" in truth:
            eq(f"{name} num_parameters", tot["parameters"], truth["num_parameters"])
        if "num_parameters_exclude_embeddings" in truth:
            eq(f"{name} num_parameters(exclude_embeddings=True)", tot["parameters_without_embeddings"],
               truth["num_parameters_exclude_embeddings"])
        # per dtype: the elements of the truth's tensors of each dtype (each tensor once by name)
        want = {}
        for t in (truth["tensors"].values() if isinstance(truth["tensors"], dict) else truth["tensors"]):
            n = 1
            for d in t["shape"]:
                n *= d
            want[t["dtype"]] = want.get(t["dtype"], 0) + n
        if truth.get("unique_numel", truth.get("total_numel")) == truth.get("total_numel"):
            eq(f"{name} elements per dtype", {d["dtype"]: d["parameters"] + d["buffers"] for d in tot["by_dtype"]}, want)
        kind = truth["kind"]
        if kind == "lightning":
            s, md = truth["summary"], doc["metadata"]
            eq(f"{name} total_parameters", tot["parameters"], s["total_parameters"])
            eq(f"{name} trainable_parameters", tot["trainable"], s["trainable_parameters"])
            eq(f"{name} model_size_mb", round(tot["parameter_bytes"] / 1e6, 6), s["model_size_mb"])
            modules = {m["name"]: m for m in doc["modules"]}
            for layer, _type, params in s["layers"]:
                if params and layer in modules:
                    eq(f"{name} layer {layer} params", modules[layer]["parameters"], params)
                elif params:
                    fails.append(f"{name}: no module {layer} ({params} params)")
            layer_types(name, doc, {layer: typ for layer, typ, _ in s["layers"]})
            eq(f"{name} epoch", md.get("epoch"), truth["epoch"])
            eq(f"{name} global_step", md.get("global_step"), truth["global_step"])
            eq(f"{name} pl_version", md.get("pytorch-lightning_version"), truth["pl_version"])
            eq(f"{name} callbacks", md.get("callbacks"), truth["callbacks"])
            eq(f"{name} optimizer_states", md.get("optimizer_states", {}).get("count"), truth["n_optimizer_states"])
            eq(f"{name} lr_schedulers", md.get("lr_schedulers", {}).get("count"), truth["n_lr_schedulers"])
            hp = md.get("hyper_parameters", {})
            for k, v in truth["hparams"].items():  # the truth holds repr() of each value
                got = hp.get(k)
                rep = repr(tuple(got)) if isinstance(got, list) else repr(got)
                eq(f"{name} hparam {k}", rep, v)
        elif kind == "fabric":
            eq(f"{name} n_params", tot["parameters"], truth["n_params"])
            eq(f"{name} n_buffers", tot["buffers"], truth["n_buffers"])
        elif kind == "pt2":
            model = doc["metadata"]["pt2"]["models"][0]
            eq(f"{name} n_params", tot["parameters"], truth["n_params"])
            constants = [i for i in model["inputs"] if i["kind"] in ("constant_tensor", "buffer_non_persistent")]
            const_numel = 0
            for c in constants:
                n = 1
                for d in c["shape"]:
                    n *= d
                const_numel += n
            eq(f"{name} n_buffers (buffers + non-persistent)", tot["buffers"] + const_numel, truth["n_buffers"])
            eq(f"{name} constants", sorted(c["target"] for c in constants), sorted(truth["constants"]))
            eq(f"{name} ops", {k.removeprefix("torch.ops."): v for k, v in model["ops"].items()}, truth["ops"])
            eq(f"{name} range_constraints",
               {r["symbol"]: f"VR[{r['min']}, {r['max']}]" for r in model["range_constraints"]}, truth["range_constraints"])
        elif kind == "dcp":
            eq(f"{name} files", sorted(os.listdir(path)), sorted(truth["files"]))
        elif kind in ("hf_sharded", "hf_single"):
            eq(f"{name} files", sorted(os.listdir(path)), sorted(truth["files"]))
            if "metadata" in truth:
                eq(f"{name} metadata", doc["metadata"].get("__metadata__"), truth["metadata"])

    for folder in HF_FOLDERS:
        for name, truth, path, doc in cases(folder):
            label = f"{folder}/{name}"
            eq(f"{label} num_parameters", doc["totals"]["parameters"], truth["num_parameters"])
            eq(f"{label} num_parameters(exclude_embeddings=True)", doc["totals"]["parameters_without_embeddings"],
               truth["num_parameters_exclude_embeddings"])
            eq(f"{label} files", sorted(os.listdir(path)), sorted(truth["files"]))
            layer_types(label, doc, truth["module_types"])
            if "tensors" in truth:
                tensors(label, doc, truth["tensors"])
            memory(label, path, truth)

    for k in known:
        print("KNOWN", k)
    for k in known_passing:
        print("NOTE", k)
    for what in sorted(set(KNOWN) - seen_known):
        fails.append(f"{what}: listed in KNOWN but never compared (a stale entry)")
    for f in fails:
        print("FAIL", f)
    print(f"layer types: {types['inferred']} of {types['known']} modules with a known class inferred, the rest `?`")
    print(f"{compared} values compared, {len(fails)} mismatches, {len(known)} known mismatches (listed in KNOWN)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
