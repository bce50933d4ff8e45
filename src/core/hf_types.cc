#include "core/hf_types.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "core/dims.h"

namespace ckpt {
namespace {

enum class Family { kDecoder, kGpt2, kGptNeox, kFalcon, kBert };

struct TypeInfo {
  const char* model_type;
  const char* prefix;  // the classes' prefix: LlamaModel, LlamaDecoderLayer, ...
  Family family;
  const char* base;  // the base model's attribute in a head model
};

constexpr TypeInfo kTypes[] = {
    {"llama", "Llama", Family::kDecoder, "model"},         {"mistral", "Mistral", Family::kDecoder, "model"},
    {"mixtral", "Mixtral", Family::kDecoder, "model"},     {"qwen2", "Qwen2", Family::kDecoder, "model"},
    {"qwen2_moe", "Qwen2Moe", Family::kDecoder, "model"},  {"qwen3", "Qwen3", Family::kDecoder, "model"},
    {"qwen3_moe", "Qwen3Moe", Family::kDecoder, "model"},  {"phi3", "Phi3", Family::kDecoder, "model"},
    {"gemma", "Gemma", Family::kDecoder, "model"},         {"gemma2", "Gemma2", Family::kDecoder, "model"},
    {"gpt_neox", "GPTNeoX", Family::kGptNeox, "gpt_neox"}, {"falcon", "Falcon", Family::kFalcon, "transformer"},
    {"gpt2", "GPT2", Family::kGpt2, "transformer"},        {"bert", "Bert", Family::kBert, "bert"},
    {"roberta", "Roberta", Family::kBert, "roberta"},
};

bool starts_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.compare(0, p.size(), p) == 0; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0; }

// `name` with each all-digit segment replaced by '#': "layers.12.mlp" -> "layers.#.mlp".
std::string pattern_of(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  size_t i = 0;
  while (i <= name.size()) {
    const size_t dot = std::min(name.find('.', i), name.size());
    const std::string_view seg = name.substr(i, dot - i);
    const bool digits = !seg.empty() && std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (i > 0) out += '.';
    if (digits) out += '#';
    else out += seg;
    i = dot + 1;
  }
  return out;
}

// The classes by name pattern under the base model ("layers.#.self_attn" -> LlamaAttention), one family each.
struct Patterns {
  std::unordered_map<std::string, std::string_view>& out;
  void add(std::initializer_list<const char*> patterns, const std::string& type) const {
    if (type.empty()) return;  // not named (a class chosen at load time)
    const std::string_view t = Interned(type).str();
    for (const char* p : patterns) out.emplace(p, t);
  }
};

const std::string kLinear = "Linear", kLayerNorm = "LayerNorm", kList = "ModuleList", kEmbedding = "Embedding";

// Llama and the models written after it: P + Model / DecoderLayer / Attention / MLP / RMSNorm.
void decoder_patterns(const Patterns& x, const std::string& P, const std::string& mt, bool v4, bool scaled_embedding) {
  const std::string rms = P + "RMSNorm";
  const bool gemma = mt == "gemma" || mt == "gemma2";
  x.add({"embed_tokens"}, gemma && scaled_embedding ? P + "TextScaledWordEmbedding" : kEmbedding);
  x.add({"layers"}, kList);
  x.add({"layers.#"}, P + "DecoderLayer");
  x.add({"norm", "layers.#.input_layernorm", "layers.#.post_attention_layernorm"}, rms);
  if (mt == "gemma2") x.add({"layers.#.pre_feedforward_layernorm", "layers.#.post_feedforward_layernorm"}, rms);
  // 4.57's Qwen2-MoE picks its attention class by attn_implementation (Qwen2MoeSdpaAttention, ...).
  x.add({"layers.#.self_attn"}, v4 && mt == "qwen2_moe" ? std::string() : P + "Attention");
  x.add({"layers.#.self_attn.q_proj", "layers.#.self_attn.k_proj", "layers.#.self_attn.v_proj", "layers.#.self_attn.o_proj",
         "layers.#.self_attn.qkv_proj"},
        kLinear);
  if (mt == "qwen3" || mt == "qwen3_moe") x.add({"layers.#.self_attn.q_norm", "layers.#.self_attn.k_norm"}, rms);
  if (mt == "mixtral") {
    if (!v4) return;  // 5.x loads block_sparse_moe.* into mlp.* (a router and 3-D experts): no module of these names
    x.add({"layers.#.block_sparse_moe"}, P + "SparseMoeBlock");
    x.add({"layers.#.block_sparse_moe.gate", "layers.#.block_sparse_moe.experts.#.w1", "layers.#.block_sparse_moe.experts.#.w2",
           "layers.#.block_sparse_moe.experts.#.w3"},
          kLinear);
    x.add({"layers.#.block_sparse_moe.experts"}, kList);
    x.add({"layers.#.block_sparse_moe.experts.#"}, P + "BlockSparseTop2MLP");
  } else if (mt == "qwen2_moe" || mt == "qwen3_moe") {
    x.add({"layers.#.mlp"}, P + "SparseMoeBlock");
    x.add({"layers.#.mlp.gate"}, v4 ? kLinear : P + "TopKRouter");
    x.add({"layers.#.mlp.experts"}, v4 ? kList : P + "Experts");
    if (v4) {
      x.add({"layers.#.mlp.experts.#"}, P + "MLP");
      x.add({"layers.#.mlp.experts.#.gate_proj", "layers.#.mlp.experts.#.up_proj", "layers.#.mlp.experts.#.down_proj"}, kLinear);
    }
    if (mt == "qwen2_moe") {
      x.add({"layers.#.mlp.shared_expert"}, P + "MLP");
      x.add({"layers.#.mlp.shared_expert.gate_proj", "layers.#.mlp.shared_expert.up_proj", "layers.#.mlp.shared_expert.down_proj",
             "layers.#.mlp.shared_expert_gate"},
            kLinear);
    }
  } else {
    x.add({"layers.#.mlp"}, P + "MLP");
    x.add({"layers.#.mlp.gate_proj", "layers.#.mlp.up_proj", "layers.#.mlp.down_proj", "layers.#.mlp.gate_up_proj"}, kLinear);
  }
}

void gpt2_patterns(const Patterns& x) {
  x.add({"wte", "wpe"}, kEmbedding);
  x.add({"h"}, kList);
  x.add({"h.#"}, "GPT2Block");
  x.add({"h.#.ln_1", "h.#.ln_2", "ln_f"}, kLayerNorm);
  x.add({"h.#.attn"}, "GPT2Attention");
  x.add({"h.#.mlp"}, "GPT2MLP");
  x.add({"h.#.attn.c_attn", "h.#.attn.c_proj", "h.#.mlp.c_fc", "h.#.mlp.c_proj"}, "Conv1D");
}

void gpt_neox_patterns(const Patterns& x) {
  x.add({"embed_in"}, kEmbedding);
  x.add({"layers"}, kList);
  x.add({"layers.#"}, "GPTNeoXLayer");
  x.add({"layers.#.input_layernorm", "layers.#.post_attention_layernorm", "final_layer_norm"}, kLayerNorm);
  x.add({"layers.#.attention"}, "GPTNeoXAttention");
  x.add({"layers.#.mlp"}, "GPTNeoXMLP");
  x.add({"layers.#.attention.query_key_value", "layers.#.attention.dense", "layers.#.mlp.dense_h_to_4h", "layers.#.mlp.dense_4h_to_h"},
        kLinear);
}

void falcon_patterns(const Patterns& x) {
  x.add({"word_embeddings"}, kEmbedding);
  x.add({"h"}, kList);
  x.add({"h.#"}, "FalconDecoderLayer");
  x.add({"h.#.input_layernorm", "h.#.post_attention_layernorm", "h.#.ln_attn", "h.#.ln_mlp", "ln_f"}, kLayerNorm);
  x.add({"h.#.self_attention"}, "FalconAttention");  // (FalconFlashAttention2 when loaded with flash attention)
  x.add({"h.#.mlp"}, "FalconMLP");
  x.add({"h.#.self_attention.query_key_value", "h.#.self_attention.dense", "h.#.mlp.dense_h_to_4h", "h.#.mlp.dense_4h_to_h"},
        "FalconLinear");
}

void bert_patterns(const Patterns& x, const std::string& P, bool v4) {
  x.add({"embeddings"}, P + "Embeddings");
  x.add({"embeddings.word_embeddings", "embeddings.position_embeddings", "embeddings.token_type_embeddings"}, kEmbedding);
  x.add({"embeddings.LayerNorm", "encoder.layer.#.attention.output.LayerNorm", "encoder.layer.#.output.LayerNorm"}, kLayerNorm);
  x.add({"encoder"}, P + "Encoder");
  x.add({"encoder.layer"}, kList);
  x.add({"encoder.layer.#"}, P + "Layer");
  x.add({"encoder.layer.#.attention"}, P + "Attention");
  x.add({"encoder.layer.#.attention.self"}, v4 ? std::string() : P + "SelfAttention");  // 4.x: BertSdpaSelfAttention, ...
  x.add({"encoder.layer.#.attention.output"}, P + "SelfOutput");
  x.add({"encoder.layer.#.intermediate"}, P + "Intermediate");
  x.add({"encoder.layer.#.output"}, P + "Output");
  x.add({"pooler"}, P + "Pooler");
  x.add({"encoder.layer.#.attention.self.query", "encoder.layer.#.attention.self.key", "encoder.layer.#.attention.self.value",
         "encoder.layer.#.attention.output.dense", "encoder.layer.#.intermediate.dense", "encoder.layer.#.output.dense", "pooler.dense"},
        kLinear);
}

}  // namespace

std::optional<HfBaseModel> hf_base_model(const HfConfig& c) {
  for (const TypeInfo& t : kTypes)
    if (c.model_type == t.model_type) return HfBaseModel{std::string(t.prefix) + "Model", t.base};
  return std::nullopt;
}

std::optional<HfModuleTypes> HfModuleTypes::of(const HfConfig& c, const std::vector<Tensor>& tensors) {
  const TypeInfo* info = nullptr;
  for (const TypeInfo& t : kTypes)
    if (c.model_type == t.model_type) info = &t;
  if (!info || !c.error.empty()) return std::nullopt;
  const std::string P = info->prefix;
  const std::string arch = c.architectures.empty() ? std::string() : c.architectures.front();
  if (!arch.empty() && !starts_with(arch, P)) return std::nullopt;  // a config of another model's classes

  HfModuleTypes m;
  const std::string base = info->base;
  const bool has_base = std::any_of(tensors.begin(), tensors.end(), [&](const Tensor& t) {
    return t.name.size() > base.size() && starts_with(t.name, base) && t.name[base.size()] == '.';
  });
  const auto kept = [](const std::string& s) -> std::string_view { return Interned(s).str(); };
  m.base_type_ = kept(P + "Model");
  if (has_base) {
    m.base_ = base;
    if (!arch.empty()) m.root_ = kept(arch);
    // A language model's head; GPT-NeoX saves it as embed_out (4.x's attribute, 5.x's lm_head under its old name).
    if (ends_with(arch, "ForCausalLM") || ends_with(arch, "LMHeadModel"))
      m.heads_.emplace(info->family == Family::kGptNeox ? "embed_out" : "lm_head", kept(kLinear));
  } else if (arch == P + "Model") {
    m.root_ = m.base_type_;
  }
  // Today's classes without a version; older ones' where they differ (each version's tree read in
  // testdata/module_types/truth.json: 4.57.1, 5.0.0, 5.3.0, 5.4.0, 5.13.1, 5.14.0, 5.17.0, 5.23.0).
  const int major = c.transformers_major.value_or(99);
  const bool v4 = major < 5;
  const bool scaled_embedding = major > 5 || (major == 5 && c.transformers_minor >= 4);  // Gemma's, from 5.4.0
  const Patterns x{m.by_pattern_};
  switch (info->family) {
    case Family::kDecoder: decoder_patterns(x, P, c.model_type, v4, scaled_embedding); break;
    case Family::kGpt2: gpt2_patterns(x); break;
    case Family::kGptNeox: gpt_neox_patterns(x); break;
    case Family::kFalcon: falcon_patterns(x); break;
    case Family::kBert: bert_patterns(x, P, v4); break;
  }
  return m;
}

std::string_view HfModuleTypes::type(std::string_view module) const {
  if (module.empty()) return root_;
  std::string_view rel = module;
  if (!base_.empty()) {
    if (module == base_) return base_type_;
    if (!starts_with(module, base_) || module.size() == base_.size() || module[base_.size()] != '.') {
      auto it = heads_.find(std::string(module));
      return it == heads_.end() ? std::string_view() : it->second;
    }
    rel = module.substr(base_.size() + 1);
  }
  auto it = by_pattern_.find(pattern_of(rel));
  return it == by_pattern_.end() ? std::string_view() : it->second;
}

}  // namespace ckpt
