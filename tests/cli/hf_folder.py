#!/usr/bin/env python3
"""Hugging Face model folders as one model (issue 28, point 2), on the folders transformers 5.17 wrote
(testdata/t211/hf_bert_bf16: config.json + model.safetensors; testdata/hf211/*: sharded with an index) and
those transformers 5.23 wrote (testdata/hf523/*, testdata/gen_hf.py: Llama, Mistral, Qwen2, Gemma 2, Phi-3,
GPT-2, BERT; single files and sharded).

- a folder, its index or its safetensors file beside config.json is one input: `summary --json` gives one
  document (not JSON Lines) whose metadata.hf holds config.json's facts as transformers reads them
  (GPT-2's n_layer / n_embd / n_head are num_hidden_layers / hidden_size / num_attention_heads: its
  config's attribute_map); the text has a `Model:` line;
- `diff` takes the folder on either side (folder vs its own file: same);
- `check` reports a config.json that disagrees with the weights (hf-config): vocab_size against the
  embedding's rows, num_hidden_layers against the numbered blocks, dtype against the weights, a config
  that is not JSON; the unmodified folders have no hf-config finding;
- `check` and `summary` of a model folder scan the pickles beside its weights (side_files below).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402

ALIASES = {"num_hidden_layers": ("num_hidden_layers", "n_layer"), "hidden_size": ("hidden_size", "n_embd"),
           "num_attention_heads": ("num_attention_heads", "n_head"), "vocab_size": ("vocab_size",),
           "num_key_value_heads": ("num_key_value_heads",), "max_position_embeddings": ("max_position_embeddings", "n_positions"),
           "tie_word_embeddings": ("tie_word_embeddings",)}

fails = []
schemas = None


def run(*cmd):
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=120)
    if "--json" in cmd and p.stdout.strip():
        for problem in schemas.output_problems(p.stdout):
            fails.append(f"{' '.join(cmd)}: schema: {problem}")
    return p


def expect(what, cond):
    if not cond:
        fails.append(what)


EVIL_P0 = b"cos\nsystem\n(S'echo pwned'\ntR."
EVIL_P2 = b"\x80\x02cposix\nsystem\nX\x0a\x00\x00\x00echo pwned\x85R."


def side_files(ckpt, td):
    """A model folder's other pickles (issue 44 point 1): each layout is a copy of a real fixture with a
    hand-written malicious pickle put in (an HF folder with pytorch_model.bin beside model.safetensors; the
    Trainer folder testdata/trainer/checkpoint-2 with training_args.bin, rng_state.pth, rng_state_3.pth,
    optimizer.pt or scheduler.pt; a sharded and a DCP folder with extra_weights.pt). Each exits 1 (0 with
    --fail-on never) naming the file in `at:` lines, locations[].file and SARIF; the clean Trainer folder
    gives what `check training_args.bin` gives (TrainingArguments is outside the allowlist), and summary
    lists its four side files. Returns how many layouts ran."""
    trainer = os.path.join(td, "trainer", "checkpoint-2")
    layouts = [("hf", os.path.join(td, "t211", "hf_bert_bf16"), "pytorch_model.bin", EVIL_P2)]
    layouts += [("trainer", trainer, n, EVIL_P0) for n in ("training_args.bin", "rng_state.pth", "rng_state_3.pth", "optimizer.pt",
                                                             "scheduler.pt")]
    layouts += [(k, os.path.join(td, "formats", k), "extra_weights.pt", EVIL_P0) for k in ("sharded_st", "dcp")]
    with tempfile.TemporaryDirectory() as tmp:
        for k, (kind, src, name, evil) in enumerate(layouts):
            dst = os.path.join(tmp, f"{k}_{kind}")
            shutil.copytree(src, dst)
            with open(os.path.join(dst, name), "wb") as f:
                f.write(evil)
            what = f"{kind} + malicious {name}"
            p = run(ckpt, "check", dst)
            expect(f"{what}: check exit {p.returncode}, want 1: {p.stderr}", p.returncode == 1)
            expect(f"{what}: no 'at: {name}:' line", f"  at: {name}:" in p.stdout)
            expect(f"{what}: last line {p.stdout.splitlines()[-1:]}", p.stdout.rstrip().endswith("--fail-on error: FAIL"))
            p = run(ckpt, "check", "--fail-on", "never", dst)
            expect(f"{what}: check --fail-on never exit {p.returncode}", p.returncode == 0)
            p = run(ckpt, "check", "--json", dst)
            doc = json.loads(p.stdout)
            bad = [f for f in doc["findings"] if f["id"] == "dangerous-global" and any(l["file"] == name for l in f["locations"])]
            expect(f"{what}: no dangerous-global located in {name}", bad and doc["status"] == "fail")
            p = run(ckpt, "check", "--format", "sarif", dst)
            uris = {l["physicalLocation"]["artifactLocation"]["uri"] for r in json.loads(p.stdout)["runs"][0]["results"]
                    for l in r.get("locations", [])}
            expect(f"{what}: SARIF locations {uris}", name in uris)
            p = run(ckpt, "summary", "--json", dst)
            side = {f["path"]: f["kind"] for f in json.loads(p.stdout).get("side_files", [])}
            expect(f"{what}: summary side_files {side}", side.get(name) == "pickle")

    # The clean Trainer folder: what `check training_args.bin` says, labelled; nothing in the others.
    alone = json.loads(run(ckpt, "check", "--json", os.path.join(trainer, "training_args.bin")).stdout)
    p = run(ckpt, "check", "--json", trainer)
    doc = json.loads(p.stdout)
    files = {l["file"] for f in doc["findings"] for l in f["locations"]}
    expect(f"clean trainer: findings in {files}", files == {"training_args.bin"})
    expect(f"clean trainer: {len(doc['findings'])} findings, training_args.bin alone {len(alone['findings'])}",
           [f["id"] for f in doc["findings"]] == [f["id"] for f in alone["findings"]])
    expect(f"clean trainer: exit {p.returncode}, want 1 (as training_args.bin alone)", p.returncode == 1)
    p = run(ckpt, "summary", trainer)
    beside = [l for l in p.stdout.splitlines() if l.startswith("Beside:")]
    expect(f"clean trainer: summary Beside: {beside}",
           beside == ["Beside:   optimizer.pt (54.1 kB, zip), rng_state.pth (14.3 kB, zip), scheduler.pt (1.5 kB, zip), "
                      "training_args.bin (5.3 kB, zip)"])
    p = run(ckpt, "summary", "--json", trainer)
    side = json.loads(p.stdout)["side_files"]
    want = [{"path": n, "size": os.path.getsize(os.path.join(trainer, n)), "kind": "zip"}
            for n in ("optimizer.pt", "rng_state.pth", "scheduler.pt", "training_args.bin")]
    expect(f"clean trainer: side_files {side}", side == want)

    return len(layouts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    global schemas
    schemas = json_schemas.Schemas(a.root)
    td = os.path.join(a.root, "testdata")
    folders = [os.path.join(td, "t211", "hf_bert_bf16")]
    for hf in ("hf211", "hf523"):  # every model folder of their truth.json
        folders += [os.path.join(td, hf, n) for n in json.load(open(os.path.join(td, hf, "truth.json"))) if not n.startswith("_")]
    for folder in folders:
        config = json.load(open(os.path.join(folder, "config.json")))
        index = [f for f in os.listdir(folder) if f.endswith(".index.json")]
        inputs = [folder] + [os.path.join(folder, f) for f in index + (["model.safetensors"] if not index else [])]
        for inp in inputs:
            p = run(a.ckpt, "summary", "--json", "--memory", inp)
            expect(f"{inp}: summary exit {p.returncode}: {p.stderr}", p.returncode == 0)
            doc = json.loads(p.stdout)  # one document, not JSON Lines
            hf = doc["metadata"].get("hf")
            expect(f"{inp}: no metadata.hf", hf is not None)
            if not hf:
                continue
            expect(f"{inp}: architectures {hf['architectures']}", hf["architectures"] == config["architectures"])
            expect(f"{inp}: model_type {hf['model_type']}", hf["model_type"] == config["model_type"])
            expect(f"{inp}: dtype {hf['dtype']}", hf["dtype"] == config.get("dtype", config.get("torch_dtype")))
            for key, names in ALIASES.items():
                want = next((config[n] for n in names if n in config), None)
                expect(f"{inp}: {key} {hf[key]!r}, config {want!r}", hf[key] == want)
            text = run(a.ckpt, "summary", inp).stdout
            model = [l for l in text.splitlines() if l.startswith("Model:")]
            expect(f"{inp}: Model: line {model}", len(model) == 1 and config["architectures"][0] in model[0])
            c = run(a.ckpt, "check", "--json", inp)
            expect(f"{inp}: check exit {c.returncode}", c.returncode == 0)
            expect(f"{inp}: hf-config finding on a consistent folder",
                   not any(f["id"] == "hf-config" for f in json.loads(c.stdout)["findings"]))
        for args in ((folder, inputs[-1]), (inputs[-1], folder)):
            d = run(a.ckpt, "diff", *args)
            expect(f"diff {args}: exit {d.returncode} {d.stderr}", d.returncode == 0 and "same:" in d.stdout)

    # A config that disagrees with the weights: each edit gives its finding.
    src = os.path.join(td, "hf211", "llama_gqa_bf16")
    cases = [({"vocab_size": 1024}, "error", "vocab_size 1024 but model.embed_tokens.weight has 1000 rows"),
             ({"num_hidden_layers": 4}, "error", "num_hidden_layers 4 but the weights hold 3"),
             ({"num_hidden_layers": 2}, "warning", "num_hidden_layers 2 but the weights hold 3"),
             ({"dtype": "float32"}, "warning", "dtype float32 but the weights are bfloat16"),
             # the attention's shapes: q_proj [8 heads x head_dim 8, hidden 64], k_proj [2 x 8, 64]
             ({"num_key_value_heads": 3}, "error", "3 key/value heads of 8 but model.layers.0.self_attn.k_proj.weight has 16 rows (2 heads of 8)"),
             ({"hidden_size": 96, "head_dim": 8}, "error", "hidden_size 96 but model.layers.0.self_attn.q_proj.weight takes 64 inputs"),
             ({"num_attention_heads": 4}, "error", "4 attention heads of 8 but model.layers.0.self_attn.q_proj.weight has 64 rows (8 heads of 8)"),
             (None, "error", "not valid JSON at byte"),
             # GPT-2's fused c_attn (Conv1D [64, 3 x 64]), BERT's query / key ([64, 64]), Phi-3's qkv_proj
             ("hf523/gpt2_tied", {"n_embd": 96}, "error", "hidden_size 96 but transformer.h.0.attn.c_attn.weight takes 64 inputs"),
             ("hf523/gpt2_tied", {"n_head": 5}, "error",
              "5 attention heads and 5 key/value heads of 12 (180 query, key and value outputs) but transformer.h.0.attn.c_attn.weight has 192"),
             ("hf523/bert_enc", {"hidden_size": 96}, "error", "hidden_size 96 but encoder.layer.0.attention.self.query.weight takes 64 inputs"),
             ("hf523/bert_enc", {"num_attention_heads": 3}, "error",
              "3 attention heads of 21 but encoder.layer.0.attention.self.query.weight has 64 rows (not whole heads of 21)"),
             ("hf523/phi3_partial_fp16", {"num_key_value_heads": 1}, "error",
              "4 attention heads and 1 key/value heads of 16 (96 query, key and value outputs) but model.layers.0.self_attn.qkv_proj.weight has 128")]
    with tempfile.TemporaryDirectory() as tmp:
        for k, case in enumerate(cases):
            folder, (edit, severity, text) = (os.path.join(td, case[0]), case[1:]) if len(case) == 4 else (src, case)
            dst = os.path.join(tmp, f"m{k}")
            shutil.copytree(folder, dst)
            cfg = os.path.join(dst, "config.json")
            if edit is None:
                open(cfg, "w").write('{"model_type": "llama", ')
            else:
                c = json.load(open(cfg))
                c.update(edit)
                json.dump(c, open(cfg, "w"))
            p = run(a.ckpt, "check", "--json", dst)
            got = [f for f in json.loads(p.stdout)["findings"] if f["id"] == "hf-config"]
            expect(f"{edit}: findings {[f['message'] for f in got]}",
                   any(text in f["message"] and f["severity"] == severity for f in got))
            expect(f"{edit}: exit {p.returncode}", p.returncode == (1 if severity == "error" else 0))
        # Sliding-window attention (Mistral's config: every layer; layer_types: those marked
        # sliding_attention; Qwen2: from max_window_layers on; Gemma 2: every other one) keeps the last sliding_window - 1 tokens per layer, as transformers'
        # DynamicSlidingWindowLayer does; full layers keep all L.
        for k, (edit, sliding) in enumerate([({"sliding_window": 8}, 3),
                                             ({"sliding_window": 8, "layer_types": ["sliding_attention", "full_attention",
                                                                                    "sliding_attention"]}, 2),
                                             ({"sliding_window": 8, "use_sliding_window": False}, 0),
                                             ({"sliding_window": 64}, 3),
                                             # Qwen2's __post_init__: layers from max_window_layers on slide
                                             ({"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 8,
                                               "max_window_layers": 1}, 2),
                                             ({"model_type": "gemma2", "sliding_window": 8}, 2)]):
            dst = os.path.join(tmp, f"sw{k}")
            shutil.copytree(src, dst)
            cfg = os.path.join(dst, "config.json")
            c = json.load(open(cfg))
            c.update(edit)
            json.dump(c, open(cfg, "w"))
            kv = json.loads(run(a.ckpt, "summary", "--json", "--memory", "--batch", "2", "--seq-len", "40", dst).stdout)["memory"]["kv_cache"]
            per_token = 2 * 2 * c["num_key_value_heads"] * c["head_dim"] * 2  # k and v, batch 2, bfloat16
            kept = min(40, c["sliding_window"] - 1) if sliding else 40
            want = per_token * ((3 - sliding) * 40 + sliding * kept)
            expect(f"sliding {edit}: kv {kv}, want {want} ({sliding} sliding layers)",
                   kv and kv["bytes"] == want and kv["sliding_layers"] == sliding)
        # The non-persistent rotary buffers by the config's transformers_version: transformers 4.x registers
        # inv_freq alone (its original_inv_freq is a plain attribute), 5.x (5.0 to 5.24 read, and 5.17 / 5.23
        # measured in testdata/hf211 and hf523's truth) inv_freq and original_inv_freq; no version: today's.
        for k, (version, names) in enumerate([("4.57.6", ["inv_freq"]), ("5.0.0", ["inv_freq", "original_inv_freq"]),
                                              ("5.17.0", ["inv_freq", "original_inv_freq"]),
                                              (None, ["inv_freq", "original_inv_freq"])]):
            dst = os.path.join(tmp, f"tv{k}")
            shutil.copytree(src, dst)
            cfg = os.path.join(dst, "config.json")
            c = json.load(open(cfg))
            c.pop("transformers_version", None)
            if version:
                c["transformers_version"] = version
            json.dump(c, open(cfg, "w"))
            m = json.loads(run(a.ckpt, "summary", "--json", "--memory", dst).stdout)["memory"]
            got = [b["name"].split(".")[-1] for b in m["non_persistent_buffers"]]
            expect(f"transformers_version {version}: non-persistent buffers {got}, want {names}", got == names)
        # The KV cache where config.json's key/value heads disagree with k_proj: the weights' (2 heads of 8), said so
        dst = os.path.join(tmp, "kvw")
        shutil.copytree(src, dst)
        cfg = os.path.join(dst, "config.json")
        c = json.load(open(cfg))
        c["num_key_value_heads"] = 3
        json.dump(c, open(cfg, "w"))
        kv = json.loads(run(a.ckpt, "summary", "--json", "--memory", "--seq-len", "10", dst).stdout)["memory"]["kv_cache"]
        expect(f"kv cache from the weights: {kv}", kv and kv["kv_heads"] == 2 and kv["head_dim"] == 8 and kv.get("config_kv_heads") == 3
               and kv["bytes"] == 3 * 2 * 1 * 10 * 2 * 8 * 2)
        # a config.json that is not a transformers config (no model_type / architectures) is not the model's
        dst = os.path.join(tmp, "other")
        shutil.copytree(os.path.join(td, "t211", "hf_bert_bf16"), dst)
        json.dump({"_class_name": "UNet2DModel"}, open(os.path.join(dst, "config.json"), "w"))
        p = run(a.ckpt, "summary", "--json", dst)
        expect(f"foreign config.json: {p.returncode} {p.stderr}", p.returncode == 0 and "hf" not in json.loads(p.stdout)["metadata"])

    # --memory's options: refused without it, and a dtype accelerate does not estimate or a batch of 0 (exit 2)
    for args in (["--batch", "2"], ["--memory", "--dtype", "float64"], ["--memory", "--batch", "0"], ["--memory", "--seq-len", "0"]):
        p = run(a.ckpt, "summary", *args, folders[0])
        expect(f"summary {args}: exit {p.returncode}, {p.stderr.strip()}", p.returncode == 2 and p.stderr.startswith("ckpt: error:"))
    layouts = side_files(a.ckpt, td)
    for f in fails:
        print("FAIL", f)
    print(f"{len(folders)} folders, {len(cases)} disagreeing configs, {layouts} folders with a malicious pickle beside the weights; "
          f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
