// `summary --memory`: how much memory a model takes, as the peers compute it, from the file alone.
//
// - Total and largest layer per dtype as accelerate computes them (`accelerate estimate-memory`:
//   calculate_maximum_sizes / compute_module_sizes / get_max_layer_size): every parameter once (tied
//   weights once, under their first name), every buffer, and the non-persistent buffers a transformers
//   model registers without saving them (known per model type from its config: rotary inv_freq, BERT's
//   position_ids / token_type_ids); the largest "layer" is the largest leaf module or no-split block
//   (transformers' _no_split_modules: the decoder / encoder layers, and where the model lists it, its
//   embeddings), a module's own tensors beside children left out as accelerate leaves them.
// - Adam training's memory as accelerate's estimate_training_usage gives it for a mixed-precision mode.
// - For a decoder language model with a config.json, the KV cache of B sequences of L tokens:
//   layers x 2 (key, value) x B x key/value heads x tokens x head_dim x bytes, a sliding-window layer
//   keeping the last window-1 tokens as transformers' DynamicSlidingWindowLayer does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ckpt {

struct Checkpoint;
// By entry: the first entry viewing the same tensor (summary.h's Summary::same_tensor; entries past its end
// are their own).
using SameTensor = std::vector<size_t>;

struct MemoryOptions {
  std::vector<std::string> dtypes;  // empty: the file's own, float32, float16, bfloat16, int8, int4
  int64_t batch = 1;
  std::optional<int64_t> seq_len;  // default: the config's max_position_embeddings
};

// accelerate's estimate_training_usage(bytes, mixed_precision): -1 where it gives none (int8, int4).
struct TrainingUsage {
  int64_t model = -1, gradients = -1, optimizer = -1, step = -1;
};
TrainingUsage estimate_training_usage(uint64_t bytes, const std::string& precision);
// The dtypes accelerate's estimate takes, in its order: float32, float16, bfloat16, int8, int4.
std::vector<std::string> memory_dtypes();

struct MemoryRow {
  std::string dtype;
  bool own = false;  // the file's own dtype: the exact bytes, not a conversion
  double total = 0, largest = 0;  // bytes (accelerate divides the float32 size: may be fractional)
  TrainingUsage training;
};

struct KvCache {
  int64_t batch = 0, seq_len = 0;
  std::string dtype;
  int64_t layers = 0, sliding_layers = 0, window = 0, kv_heads = 0, head_dim = 0;
  uint64_t bytes = 0;
  // The key projection's rows disagree with the config's key/value heads x head_dim: kv_heads and head_dim are
  // the weights' (k_proj's rows over the config's head size, else one head of all its rows), and this is what
  // config.json says.
  std::optional<int64_t> config_kv_heads;
};

struct ExtraBuffer {  // a non-persistent buffer the model registers but the file does not hold
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

// What `accelerate estimate-memory` sizes where that differs from the file: the model its create_empty_model
// builds, AutoModel.from_config, is the base model without the head (LlamaModel, not LlamaForCausalLM): the
// tensors under its attribute, named without it; every row derived from that float32 size.
struct CommandEstimate {
  std::string model_class;  // "LlamaModel"
  std::vector<std::string> left_out;  // the top-level modules it has not ("lm_head")
  uint64_t float32_total = 0, largest = 0;  // float32
  std::vector<std::string> largest_layers;
  std::vector<MemoryRow> rows;
};

struct MemoryReport {
  std::string own_dtype;  // the floating dtype holding most bytes ("" when none)
  uint64_t total = 0;  // as stored: parameters once, buffers, extra buffers
  uint64_t float32_total = 0;  // the same with every floating tensor as float32 (what accelerate's CLI sizes)
  uint64_t largest = 0;
  std::vector<std::string> largest_layers;
  std::vector<std::string> no_split;  // the units never split, as patterns ("model.layers.*")
  std::vector<ExtraBuffer> extra_buffers;
  std::vector<MemoryRow> rows;
  std::optional<KvCache> kv_cache;
  std::string kv_cache_none;  // why there is none
  std::optional<CommandEstimate> command;  // a head model of a supported type (hf_types.h)
};

// Throws std::invalid_argument for a dtype accelerate's estimate does not take (the command line offers
// only those: summary's --dtype); batch and seq_len are validated there too (validate_summary: 1 to 2^40).
MemoryReport estimate_memory(const Checkpoint& ck, const SameTensor& same_tensor, const MemoryOptions& o);


}  // namespace ckpt
