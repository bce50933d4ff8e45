#!/usr/bin/env python3
"""Writes testdata/module_types/: one tiny Hugging Face model folder per model type (config.json +
model.safetensors, written by transformers' save_pretrained) and truth.json, the class transformers gives
each module, so that naming module types from config.json and the state dict's key structure can be
checked against transformers itself (never against ckpt).

Run with the truth environment's python (scripts/truth-env.sh prints it; torch 2.15, transformers 5.23):

    "$(scripts/truth-env.sh --print)" testdata/gen_module_types.py               # rewrites testdata/module_types (~5 s)
    "$(scripts/truth-env.sh --print)" testdata/gen_module_types.py --out /tmp/mt  # or somewhere else
    "$(scripts/truth-env.sh --print)" testdata/gen_module_types.py \\
        --other 5.17.0=/tmp/tf-5.17.0:/tmp/tfdeps --other 4.57.1=/tmp/tf-4.57.1:/tmp/tfdeps4
                                        # and compare with other transformers versions (see _other_versions)

It runs on the CPU and offline (CUDA_VISIBLE_DEVICES="" and HF_HUB_OFFLINE=1 are set here): each model is
built from a tiny config (hidden 16, 2 layers, vocab 64, 2 attention heads, one key/value head where the
type has grouped-query attention (Falcon: its default multi-query attention), MoE types with 4 experts,
top-2, expert width 8 and Qwen2-MoE's shared expert; float32), seeded, saved with
save_pretrained(safe_serialization=True) (generation_config.json removed) and loaded back with
AutoModelForCausalLM / AutoModel.from_pretrained, checked to have the same state dict and to save the
same keys again; a rerun writes byte-identical folders and truth.json.

truth.json, per model type (the folder's name):
- transformers_version, architecture (the class of the root module, config.json's architectures[0]);
- keys: the tensor names in model.safetensors, sorted;
- module_types: type(module).__name__ of every module of the loaded model's named_modules(), the root as "";
- modules_in_keys: the names of those modules that are a dotted prefix of at least one saved key (the
  root "" included), sorted;
- num_parameters, num_parameters_exclude_embeddings: the loaded model's num_parameters() and
  num_parameters(exclude_embeddings=True) (every nn.Embedding's weight left out);
- state_dict_keys, only where they differ from keys: the loaded model's state_dict() keys, sorted (a tied
  lm_head.weight, which the file leaves out; MoE experts, which save_pretrained converts back to one 2-D
  weight per expert and per projection, Mixtral's under block_sparse_moe.experts.<i>.w1/w2/w3, while the
  model holds them as 3-D experts.gate_up_proj / experts.down_proj).
And "_other_versions": per other transformers version, per model type, the modules whose class that
version names differently: for every module of 5.23's modules_in_keys, and every module of that version
that is a dotted prefix of 5.23's saved keys, name -> that version's class (null where that version has no
such module); a type without differences is left out ({} for a version without any), a string stands
where that version cannot import or build the type (or for the whole version where it cannot run). They
come from this script run with --names under that version (PYTHONPATH = the unpacked wheel and its
dependencies, as --other gives them: VERSION=PATH[:PATH...]), which builds the same configs and saves
nothing. Without --other, _other_versions is carried over from the truth.json already there.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

DEC = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
           max_position_embeddings=32, bos_token_id=1, eos_token_id=2, pad_token_id=0)
GQA = dict(DEC, num_key_value_heads=1)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=8)

# model type: (config class name, config kwargs, model class name); every class looked up in transformers,
# so that an older version without one reports it instead of failing here.
MODELS = {
    "llama": ("LlamaConfig", GQA, "LlamaForCausalLM"),
    "mistral": ("MistralConfig", dict(GQA, sliding_window=16), "MistralForCausalLM"),
    "mixtral": ("MixtralConfig", dict(GQA, intermediate_size=8, num_local_experts=4, num_experts_per_tok=2),
                "MixtralForCausalLM"),
    "qwen2": ("Qwen2Config", GQA, "Qwen2ForCausalLM"),
    "qwen2_moe": ("Qwen2MoeConfig", dict(GQA, **MOE, shared_expert_intermediate_size=16), "Qwen2MoeForCausalLM"),
    "qwen3": ("Qwen3Config", dict(GQA, head_dim=8), "Qwen3ForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", dict(GQA, **MOE, head_dim=8), "Qwen3MoeForCausalLM"),
    "phi3": ("Phi3Config", dict(GQA, original_max_position_embeddings=32), "Phi3ForCausalLM"),
    "gemma": ("GemmaConfig", dict(GQA, head_dim=8), "GemmaForCausalLM"),
    "gemma2": ("Gemma2Config", dict(GQA, head_dim=8, sliding_window=16, query_pre_attn_scalar=8),
               "Gemma2ForCausalLM"),
    "gpt_neox": ("GPTNeoXConfig", DEC, "GPTNeoXForCausalLM"),
    "falcon": ("FalconConfig", dict(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                    max_position_embeddings=32, bos_token_id=1, eos_token_id=2, pad_token_id=0),
               "FalconForCausalLM"),
    "gpt2": ("GPT2Config", dict(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_inner=32, n_positions=32,
                                bos_token_id=63, eos_token_id=63), "GPT2LMHeadModel"),
    "bert": ("BertConfig", dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                num_attention_heads=2, max_position_embeddings=32, type_vocab_size=2,
                                pad_token_id=0), "BertModel"),
    "roberta": ("RobertaConfig", dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, max_position_embeddings=34, type_vocab_size=1,
                                      pad_token_id=1, bos_token_id=0, eos_token_id=2), "RobertaModel"),
}
ENCODERS = {"bert", "roberta"}


def build(model_type, dtype=None):
    config_name, kwargs, model_name = MODELS[model_type]
    kwargs = dict(kwargs)
    if dtype is not None:
        kwargs["dtype"] = dtype
    cfg = getattr(transformers, config_name)(**kwargs)
    assert cfg.model_type == model_type, (cfg.model_type, model_type)
    torch.manual_seed(0)
    return getattr(transformers, model_name)(cfg).eval()


def prefixes(keys):
    """Every dotted prefix of the keys, the root "" included."""
    out = {""}
    for k in keys:
        parts = k.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return out


def saved_keys(folder):
    from safetensors import safe_open
    with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
        return sorted(f.keys())


def write_model(root, model_type):
    folder = os.path.join(root, model_type)
    shutil.rmtree(folder, ignore_errors=True)
    model = build(model_type, dtype="float32")
    model.save_pretrained(folder, safe_serialization=True)
    gen_cfg = os.path.join(folder, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    files = sorted(os.listdir(folder))
    assert files == ["config.json", "model.safetensors"], files
    keys = saved_keys(folder)

    auto = transformers.AutoModel if model_type in ENCODERS else transformers.AutoModelForCausalLM
    loaded = auto.from_pretrained(folder).eval()
    assert type(loaded) is type(model), (type(loaded), type(model))
    sd, saved_sd = loaded.state_dict(), model.state_dict()
    assert sd.keys() == saved_sd.keys(), set(sd) ^ set(saved_sd)
    for k, v in sd.items():
        assert v.dtype == saved_sd[k].dtype and torch.equal(v, saved_sd[k]), k
    with tempfile.TemporaryDirectory() as tmp:  # the loaded model saves the same keys again
        loaded.save_pretrained(tmp, safe_serialization=True)
        assert saved_keys(tmp) == keys, model_type

    module_types = {n: type(m).__name__ for n, m in loaded.named_modules()}
    config = json.load(open(os.path.join(folder, "config.json")))
    assert config["architectures"] == [type(loaded).__name__], config["architectures"]
    assert config["model_type"] == model_type
    out = {
        "transformers_version": transformers.__version__,
        "architecture": type(loaded).__name__,
        "keys": keys,
        "module_types": module_types,
        "modules_in_keys": sorted(n for n in module_types if n in prefixes(keys)),
        "num_parameters": loaded.num_parameters(),
        "num_parameters_exclude_embeddings": loaded.num_parameters(exclude_embeddings=True),
    }
    if sorted(sd) != keys:  # a tied head left out of the file, MoE experts saved per expert
        out["state_dict_keys"] = sorted(sd)
    return out


def names_main():
    """--names: every model type's {module name: class} under the running transformers, as json on stdout."""
    out = {"transformers_version": transformers.__version__, "models": {}}
    for model_type in MODELS:
        try:
            model = build(model_type)
            out["models"][model_type] = {n: type(m).__name__ for n, m in model.named_modules()}
        except Exception as e:  # noqa: BLE001 (an older version without the type, or a failing build)
            out["models"][model_type] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    json.dump(out, sys.stdout)


def other_version(version, pythonpath, truth):
    """The differences of another transformers (see the docstring), from --names run under it."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--names"], env=env, capture_output=True,
                         text=True)
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return f"--names failed under PYTHONPATH={pythonpath}: {tail}"
    got = json.loads(res.stdout)
    if got["transformers_version"] != version:
        return f"PYTHONPATH={pythonpath} imports transformers {got['transformers_version']}, not {version}"
    diffs = {}
    for model_type, names in got["models"].items():
        if isinstance(names, str):
            diffs[model_type] = names
            continue
        ours = truth[model_type]["module_types"]
        in_keys = set(truth[model_type]["modules_in_keys"])
        theirs_in_keys = {n for n in names if n in prefixes(truth[model_type]["keys"])}
        diff = {n: names.get(n) for n in sorted(in_keys | theirs_in_keys) if names.get(n) != ours.get(n)}
        if diff:
            diffs[model_type] = diff
    return diffs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "module_types"))
    ap.add_argument("--other", action="append", default=[], metavar="VERSION=PYTHONPATH")
    ap.add_argument("--names", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.names:
        return names_main()
    root = os.path.abspath(args.out)
    os.makedirs(root, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    old = {}
    truth_path = os.path.join(root, "truth.json")
    if os.path.exists(truth_path):
        old = json.load(open(truth_path)).get("_other_versions", {})
    doc = {
        "_how": ("testdata/gen_module_types.py on the CPU, offline: each model built from a tiny config by "
                 f"transformers {transformers.__version__} (torch {torch.__version__}), seeded, float32, saved with "
                 "save_pretrained(safe_serialization=True), loaded back with AutoModelForCausalLM / "
                 "AutoModel.from_pretrained; keys: model.safetensors' tensor names; module_types: "
                 "type(m).__name__ of the loaded model's named_modules() (root \"\"); modules_in_keys: those "
                 "that are a dotted prefix of a saved key; _other_versions: per transformers version, the "
                 "modules of modules_in_keys (or of that version's modules prefixing a saved key) whose "
                 "class that version names differently (null: no such module there)"),
    }
    for model_type in MODELS:
        doc[model_type] = write_model(root, model_type)
    others = dict(old)
    for spec in args.other:
        version, _, pythonpath = spec.partition("=")
        others[version] = other_version(version, pythonpath, doc)
        print(f"{version}: {json.dumps(others[version])}")
    doc["_other_versions"] = dict(sorted(others.items()))
    open(truth_path, "w").write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    print(f"wrote {root}: {len(MODELS)} models, {size} bytes")


if __name__ == "__main__":
    main()
