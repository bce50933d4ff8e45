// What a Hugging Face model's weights say about the facts its config.json states (the input embedding, the
// lm_head, the numbered blocks, the first layer's attention projections, the dtype), for check's hf-config
// rule, summary's Model: line and --memory; and the two heuristics they share.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

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
