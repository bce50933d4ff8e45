#!/usr/bin/env python3
"""Writes testdata/hf523/: Hugging Face model folders written by transformers' save_pretrained, and their
truth.json, every value read from transformers, accelerate and torch (never from ckpt).

Run with the truth environment's python (scripts/truth-env.sh prints it; torch 2.15, transformers 5.23,
accelerate 1.15, safetensors 0.8):

    "$(scripts/truth-env.sh --print)" testdata/gen_hf.py            # rewrites testdata/hf523 (~25 s)
    "$(scripts/truth-env.sh --print)" testdata/gen_hf.py /tmp/hf    # or somewhere else

It runs on the CPU and offline (CUDA_VISIBLE_DEVICES="" and HF_HUB_OFFLINE=1 are set here): no model comes
from the network, each is built from a tiny config (hidden 64, vocab 1000, two or three layers), seeded,
and saved with save_pretrained; a rerun writes byte-identical folders and truth.json (on the same CPU
kind: the KV-cache bytes do not depend on values anyway).

The models: a Llama with grouped-query attention and a head_dim other than hidden / heads, in bfloat16,
sharded (max_shard_size, so the index is written); a Mistral in bfloat16 with a sliding window (every
layer slides); a Qwen2 in bfloat16 with tied embeddings and a sliding window from max_window_layers on;
a Gemma 2 (tied, every other layer slides); a Phi-3 in float16 with partial rotary; a GPT-2 with tied embeddings,
sharded; a BERT encoder (BertModel).

truth.json, per model (the fields of testdata/hf211/truth.json, from the folder loaded back with
AutoModelFor*.from_pretrained(folder, dtype="auto"), checked equal to the model that was saved):
- files, config (config.json as written), num_parameters and num_parameters_exclude_embeddings
  (transformers' num_parameters), module_types (every named module's class, the root left out),
  param_bytes and buffer_bytes (each parameter and buffer once, non-persistent buffers included);
- accelerate_calculate_maximum_sizes: accelerate.utils.calculate_maximum_sizes(the loaded model):
  total_size and largest_layer [bytes, names];
- accelerate_estimate_training_usage: accelerate.commands.estimate.estimate_training_usage(total_size,
  precision) for float32, float16, bfloat16 (hf211's field: the function applied to the loaded model's
  own total, which for a half-precision file is not what the command prints; see the next field);
- accelerate_float32_total_size and accelerate_estimate_training_usage_float32 (every row's training as the
  command derives it, from the float32 size) are added afterwards by testdata/add_training_truth.py, which
  adds them to hf211's copied truth as well: run it after this script;
- accelerate_estimate_memory: what `accelerate estimate-memory <folder> --library_name transformers`
  computes, by running the command's own functions (accelerate.commands.estimate.gather_data and
  estimate_command, with their create_empty_model: AutoConfig.from_pretrained(folder), AutoModel.from_config
  in float32 under init_empty_weights, calculate_maximum_sizes, estimate_training_usage per --dtypes row).
  The one thing replaced is verify_on_hub, the Hub lookup (huggingface_hub.model_info) that the command
  does before anything else and that cannot answer for a local folder offline: a stand-in returns what
  the Hub would (`config`: the folder's config.json, `library_name`: "transformers"). Recorded: args
  (the command's arguments, its default --dtypes), model_class (the class create_empty_model built:
  AutoModel's, i.e. the base model without a language-model head), total_size / largest_layer of that
  model, rows (gather_data's rows as numbers: dtype, largest layer, total size, the training dict, -1 for
  "N/A"), printed_rows (the rows as estimate_command prints them, convert_bytes applied, the training
  column max() of the dict) and stdout (all that estimate_command printed: its loading line and table);
- kv_cache: for the decoders, per (batch, seq_len): the bytes of every key and value tensor held by
  past_key_values after model(input_ids [batch, seq_len], use_cache=True) on the CPU, its dtype, the
  cache's class and the tokens each layer keeps (layer_tokens: a sliding layer keeps sliding_window - 1).
"""

import contextlib
import io
import json
import os
import shutil
import sys
import types

os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import accelerate  # noqa: E402
import huggingface_hub  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from accelerate.commands import estimate  # noqa: E402
from accelerate.utils import calculate_maximum_sizes  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

COMMON = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, max_position_embeddings=128)

# name: (config class, config kwargs, model class, dtype, max_shard_size or None)
MODELS = {
    "llama_gqa_bf16": (transformers.LlamaConfig,
                       dict(COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32),
                       transformers.LlamaForCausalLM, torch.bfloat16, "200KB"),
    "mistral_sw_bf16": (transformers.MistralConfig,
                        dict(COMMON, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, sliding_window=8),
                        transformers.MistralForCausalLM, torch.bfloat16, None),
    "qwen2_sw_bf16": (transformers.Qwen2Config,
                      dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           use_sliding_window=True, sliding_window=8, max_window_layers=1, tie_word_embeddings=True),
                      transformers.Qwen2ForCausalLM, torch.bfloat16, None),
    "gemma2_sw": (transformers.Gemma2Config,
                  dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       sliding_window=8),
                  transformers.Gemma2ForCausalLM, torch.float32, None),
    "phi3_partial_fp16": (transformers.Phi3Config,
                     dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          partial_rotary_factor=0.5, bos_token_id=1, eos_token_id=2, pad_token_id=0),
                     transformers.Phi3ForCausalLM, torch.float16, None),
    "gpt2_tied": (transformers.GPT2Config,
                  dict(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_inner=128, n_positions=64,
                       bos_token_id=999, eos_token_id=999, tie_word_embeddings=True),
                  transformers.GPT2LMHeadModel, torch.float32, "250KB"),
    "bert_enc": (transformers.BertConfig,
                 dict(COMMON, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64),
                 transformers.BertModel, torch.float32, None),
}

KV_SHAPES = [(1, 16), (2, 40)]


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def nbytes(t):
    return t.numel() * t.element_size()


def unique(tensors):
    seen, out = set(), []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def estimate_memory(root, name):
    """accelerate estimate-memory's own code path on the folder root/name (see the docstring)."""
    config = json.load(open(os.path.join(root, name, "config.json")))

    def verify_on_hub(repo, token=None):  # what huggingface_hub.model_info says of a Hub repo, from the folder
        assert repo == name
        return types.SimpleNamespace(config=config, library_name="transformers")

    args = estimate.estimate_command_parser().parse_args([name, "--library_name", "transformers"])
    saved, cwd = estimate.verify_on_hub, os.getcwd()
    estimate.verify_on_hub = verify_on_hub
    os.chdir(root)  # the command's model_name is the folder's name, as the table's title shows it
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            model = estimate.create_empty_model(args.model_name, library_name=args.library_name,
                                                trust_remote_code=args.trust_remote_code)
            rows = estimate.gather_data(args)
        total, largest = calculate_maximum_sizes(model)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            estimate.estimate_command(args)
    finally:
        estimate.verify_on_hub = saved
        os.chdir(cwd)
    stdout = printed.getvalue()
    printed_rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│").split("│")]
        if len(cells) == 4 and cells[0] in args.dtypes:
            printed_rows.append(cells)
    assert [r[0] for r in printed_rows] == args.dtypes, stdout
    return {
        "args": {k: v for k, v in vars(args).items() if k not in ("func", "nondefault")},
        "verify_on_hub": "replaced by a stand-in returning config=config.json, library_name='transformers' (offline)",
        "model_class": type(model).__name__,
        "total_size": total,
        "largest_layer": [largest[0], list(largest[1])],
        "rows": [{"dtype": d, "largest_layer": ll, "total_size": ts, "training": tr} for d, ll, ts, tr in rows],
        "printed_rows": printed_rows,
        "stdout": stdout,
    }


def kv_cache(model, cfg):
    out = []
    gen = torch.Generator().manual_seed(1)
    for batch, seq_len in KV_SHAPES:
        ids = torch.randint(0, cfg.vocab_size, (batch, seq_len), generator=gen)
        with torch.no_grad():
            res = model(input_ids=ids, use_cache=True)
        pkv = res.past_key_values
        layers = [(layer.keys, layer.values) for layer in pkv.layers]
        total = sum(nbytes(k) + nbytes(v) for k, v in layers)
        dtypes = {dtype_name(t.dtype) for kv in layers for t in kv}
        assert len(dtypes) == 1, dtypes
        out.append({"batch": batch, "seq_len": seq_len, "dtype": dtypes.pop(), "kv_cache_bytes": total,
                    "cache_class": type(pkv).__name__,
                    "layer_tokens": [k.shape[-2] for k, _ in layers],
                    "layer_classes": [type(layer).__name__ for layer in pkv.layers]})
    return out


def write_model(root, name, spec):
    config_cls, kwargs, model_cls, dtype, shard = spec
    folder = os.path.join(root, name)
    shutil.rmtree(folder, ignore_errors=True)
    torch.manual_seed(0)
    cfg = config_cls(**kwargs)
    model = model_cls(cfg).to(dtype).eval()
    model.config.dtype = dtype
    if shard:
        model.save_pretrained(folder, max_shard_size=shard)
    else:
        model.save_pretrained(folder)
    saved_sd = model.state_dict()

    loaded = model_cls.from_pretrained(folder, dtype="auto").eval()
    sd = loaded.state_dict()
    assert sd.keys() == saved_sd.keys()
    for k, v in sd.items():
        assert v.dtype == saved_sd[k].dtype and torch.equal(v, saved_sd[k]), k
    files = sorted(os.listdir(folder))
    assert ("model.safetensors.index.json" in files) == bool(shard), files
    total, largest = calculate_maximum_sizes(loaded)
    truth = {
        "files": files,
        "config": json.load(open(os.path.join(folder, "config.json"))),
        "num_parameters": loaded.num_parameters(),
        "num_parameters_exclude_embeddings": loaded.num_parameters(exclude_embeddings=True),
        "module_types": {n: type(m).__name__ for n, m in loaded.named_modules() if n},
        "param_bytes": sum(nbytes(p) for p in unique(loaded.parameters())),
        "buffer_bytes": sum(nbytes(b) for b in unique(loaded.buffers())),
        "accelerate_calculate_maximum_sizes": {"total_size": total, "largest_layer": [largest[0], list(largest[1])]},
        "accelerate_estimate_training_usage": {p: estimate.estimate_training_usage(total, p)
                                               for p in ("float32", "float16", "bfloat16")},
        "accelerate_estimate_memory": estimate_memory(root, name),
        "kv_cache": kv_cache(loaded, loaded.config) if name != "bert_enc" else [],
    }
    return truth


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(here, "hf523")
    os.makedirs(root, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    doc = {
        "_producer": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "accelerate": accelerate.__version__, "safetensors": safetensors.__version__,
                      "huggingface_hub": huggingface_hub.__version__},
        "_how": ("testdata/gen_hf.py on the CPU, offline: each model built from its config by transformers "
                 f"{transformers.__version__} (torch {torch.__version__}), seeded, saved with save_pretrained "
                 "(max_shard_size where files has an index) and loaded back with from_pretrained(dtype=\"auto\"); "
                 "num_parameters from transformers; accelerate "
                 f"{accelerate.__version__} calculate_maximum_sizes(loaded model) and estimate_training_usage(its "
                 "total, precision); accelerate_estimate_memory: the estimate-memory command's own functions "
                 "(gather_data, estimate_command, create_empty_model: AutoModel.from_config in float32 on the meta "
                 "device) on the folder with --library_name transformers, its Hub lookup verify_on_hub replaced by "
                 "a stand-in returning config.json; kv_cache: bytes of every key/value tensor in past_key_values "
                 "after model(input_ids of shape [batch, seq_len], use_cache=True)"),
    }
    for name, spec in MODELS.items():
        doc[name] = write_model(root, name, spec)
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    sys.path.insert(0, here)
    try:
        from genlib import one_line_lists
        text = one_line_lists(text)
    except ImportError:
        pass
    open(os.path.join(root, "truth.json"), "w").write(text)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    print(f"wrote {root}: {len(MODELS)} models, {size} bytes")


if __name__ == "__main__":
    main()
