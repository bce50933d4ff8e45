// transformers' class names for the modules of a Hugging Face model whose config.json names its type: what
// transformers' own module tree calls each module (the model class, the decoder or encoder layer, its
// attention, MLP and norms, the embeddings, ModuleList, Linear / Conv1D / FalconLinear), found from the
// config's model_type and architectures and the module's place in the key structure (its name with the
// layer numbers left out). Summary shows them as inferred (`~LlamaDecoderLayer`): the file holds no classes.
//
// Named as the transformers that wrote config.json (`transformers_version`; today's when absent) builds the
// model with its default attention, where versions differ:
//  - 5.x holds an MoE layer's experts as one module of 3-D parameters (Qwen2MoeExperts) and routes with a
//    TopKRouter; 4.x has a ModuleList of MLPs and a Linear gate. A 5.x tree has no module for the file's
//    per-expert keys (nor for Mixtral's block_sparse_moe.*, which it loads into mlp.*): those stay as the
//    tensors imply;
//  - Gemma's input embedding is a GemmaTextScaledWordEmbedding from 5.4.0 on, an Embedding before;
//  - 4.x picks Qwen2-MoE's attention and BERT's self-attention classes by the attn_implementation chosen at
//    load time (Qwen2MoeSdpaAttention, BertSdpaSelfAttention): those stay unnamed for a 4.x config.
//    Falcon's is FalconAttention but with flash attention (FalconFlashAttention2) in every version.
// The supported model types: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, phi3, gemma,
// gemma2, gpt_neox, falcon, gpt2, bert, roberta (tests/cli/module_types.py checks every module of each
// against transformers: testdata/module_types/).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/checkpoint.h"
#include "core/hf_config.h"

namespace ckpt {

// The base model transformers' AutoModel builds for a supported model type: its class (LlamaModel) and the
// attribute a head model keeps it under ("model"), nullopt for another type.
struct HfBaseModel {
  std::string model_class, attribute;
};
std::optional<HfBaseModel> hf_base_model(const HfConfig& c);

class HfModuleTypes {
 public:
  // For a config of a supported model type whose weights `tensors` are laid out as its classes keep them;
  // nullopt otherwise.
  static std::optional<HfModuleTypes> of(const HfConfig& c, const std::vector<Tensor>& tensors);
  // The class of the module named `module` ("" the root), "" when the layout does not say. The view lives
  // as long as the process.
  std::string_view type(std::string_view module) const;

 private:
  std::string base_;  // the base model's module ("model", "transformer", "bert"), "" when the file is the base model
  std::string_view root_;  // the root's class, "" when not known
  std::unordered_map<std::string, std::string_view> heads_;  // the head model's own modules: "lm_head" -> Linear
  std::string_view base_type_;  // the base model's class
  std::unordered_map<std::string, std::string_view> by_pattern_;  // under the base: "layers.#.self_attn" -> class
};

}  // namespace ckpt
