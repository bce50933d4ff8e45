// Hugging Face model folders: a transformers `config.json` beside the weights (a single
// model.safetensors / pytorch_model.bin, or a sharded set's *.index.json). The folder, the index or a
// safetensors file with such a config beside it is one model: the reader attaches the config's facts
// to the Checkpoint (Checkpoint::hf), summary shows them (`Model:`, JSON metadata.hf) and `check`
// compares them with the weights (hf-config rule).
//
// config.json is read as transformers writes it, never executed: the facts below are taken from the
// top-level object, or from its `text_config` when the top level lacks them (multimodal models), under
// the names transformers' attribute_map aliases (GPT-2's n_layer / n_embd / n_head / n_positions, T5's
// num_layers / d_model / num_heads, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ckpt {

struct Checkpoint;
struct Tensor;
struct Limits;

struct HfConfig {
  std::string path;  // the config.json read
  std::string text;  // its bytes as read (diff compares every key in the file's order without reading it again)
  std::string error;  // set when it is not a JSON object: the weights are still read, `check` reports it
  std::vector<std::string> architectures;  // "GPT2LMHeadModel"
  std::string model_type;  // "gpt2"
  std::string dtype;  // `dtype` (transformers 5) or `torch_dtype` (4.x): "float32", "bfloat16", ...
  std::optional<int64_t> num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, vocab_size, head_dim,
      max_position_embeddings, intermediate_size;
  // The window of sliding-window attention; unset when the config has none or says use_sliding_window false
  // (Qwen2's __init__ drops it then).
  std::optional<int64_t> sliding_window;
  std::optional<bool> tie_word_embeddings;
  std::vector<std::string> layer_types;  // "full_attention" / "sliding_attention" per layer, when listed
  std::optional<int64_t> max_window_layers;  // Qwen2 / Qwen3: layers from this index on slide (default 28)
  std::optional<int64_t> sliding_window_pattern;  // Gemma 3: every Nth layer is full (default 6)
  double partial_rotary_factor = 1.0;  // the share of head_dim that rotary embeddings turn (rope_parameters,
                                       // partial_rotary_factor, GPT-NeoX's rotary_pct)
  // `transformers_version` as save_pretrained writes it ("5.17.0"): its major number, unset when absent or
  // not a version (the non-persistent buffers a model registers changed with 5.0).
  std::optional<int> transformers_major;
  int transformers_minor = 0;  // its minor number (0 when absent)
  bool from_text_config = false;  // the numeric facts came from text_config
  bool is_encoder_decoder = false;

  // Key/value heads: num_key_value_heads, else num_attention_heads (multi-head attention).
  std::optional<int64_t> kv_heads() const;
  // Per-head size: head_dim, else hidden_size / num_attention_heads.
  std::optional<int64_t> head_size() const;
  // How many of num_hidden_layers keep a sliding-window KV cache, as transformers' config __post_init__
  // and DynamicCache decide: the layer_types listed; else none without a window; Qwen2 / Qwen3 the layers
  // from max_window_layers on; Gemma 2 every other one (the first); Gemma 3 all but every sixth; else all.
  int64_t sliding_layers() const;
  // A decoder-only language model whose forward returns a key/value cache: an architecture ending in
  // ForCausalLM or LMHeadModel (not an encoder-decoder).
  bool is_causal_lm() const;
};

// config.json in `dir` when it is a transformers config (an object with model_type or architectures),
// else nullopt. A config.json that is not JSON gives an HfConfig with `error` set.
std::optional<HfConfig> read_hf_config(const std::string& dir, const Limits& limits);

// The single weights file of a model folder without an index: model.safetensors, else
// pytorch_model.bin (transformers' preference), when `dir` holds a config.json; "" otherwise.
std::string hf_single_weights(const std::string& dir);

// Summary JSON's metadata.hf: {"config", "architectures", "model_type", "dtype", ...}, the facts present.
nlohmann::ordered_json hf_json(const HfConfig& c);
// The `Model:` line of summary's text: "GPT2LMHeadModel (gpt2), float32, 2 layers, hidden 64, ...".
// `weights_tied`: whether the weights hold the output embedding as the input one's tensor (nullopt: no
// separate lm_head to tell, e.g. safetensors keeps a tied one once); where it contradicts
// tie_word_embeddings the line says both.
std::string hf_line(const HfConfig& c, std::optional<bool> weights_tied = std::nullopt);

// What the weights say about the facts a config states, for the hf-config rule and --memory.
struct HfWeights {
  std::string embedding;  // the input embedding's name ("model.embed_tokens.weight"), "" when none is found
  int64_t embedding_rows = 0;
  std::string lm_head;  // "lm_head.weight" when the file has one
  int64_t lm_head_rows = 0;
  size_t embedding_index = SIZE_MAX, lm_head_index = SIZE_MAX;  // their places in Checkpoint::tensors
  std::string layers_prefix;  // "model.layers." : the one list of numbered blocks, "" when none or several
  int64_t layers = 0;  // its highest index + 1
  std::string dtype;  // the floating dtype holding most parameter bytes, "" when none
  // The first layer's separate query and key projections (Llama's layout, "<layers>0.self_attn.q_proj.weight"
  // [heads x head_dim, hidden]): rows and columns, 0 when the file has no such pair.
  // BERT's attention.self.query / key (the same layout) count as well.
  int64_t q_rows = 0, q_cols = 0, k_rows = 0;
  std::string q_proj, k_proj;  // their names
  // Or the first layer's fused projection of queries, keys and values: Phi-3's self_attn.qkv_proj and
  // GPT-NeoX's attention.query_key_value ([(heads + 2 x key/value heads) x head_dim, hidden]), GPT-2's
  // attn.c_attn (a Conv1D: [hidden, 3 x hidden]): its outputs and inputs, 0 when the file has none.
  int64_t qkv_out = 0, qkv_in = 0;
  std::string qkv;  // its name
};
HfWeights hf_weights(const Checkpoint& ck);

// A list of numbered blocks by its name: "layers", "h", "layer", "blocks", "block" (transformers' decoder and
// encoder stacks).
bool is_block_list(std::string_view segment);
// The floating dtype holding most bytes among the tensors `keep(k)` accepts ("" when none; the first by
// name of equal ones).
std::string most_bytes_float_dtype(const std::vector<Tensor>& tensors, const std::function<bool(size_t)>& keep);

}  // namespace ckpt
