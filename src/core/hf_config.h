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
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ckpt {

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

}  // namespace ckpt
