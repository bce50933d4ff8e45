#include "core/layer_types.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>

namespace ckpt {
namespace {

struct Held {
  std::map<std::string, const std::vector<int64_t>*> leaves;  // attribute -> shape
  const std::vector<int64_t>* get(const char* leaf) const {
    auto it = leaves.find(leaf);
    return it == leaves.end() ? nullptr : it->second;
  }
};

std::string lower_last(const std::string& module) {
  std::string s = module.substr(module.rfind('.') == std::string::npos ? 0 : module.rfind('.') + 1);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// transformers' GPT-2 family keeps its projections in Conv1D (weight [in, out]) under these names.
bool gpt2_conv1d_name(const std::string& last) {
  return last == "c_attn" || last == "c_proj" || last == "c_fc" || last == "q_attn";
}

bool embedding_name(const std::string& last) {
  return last.rfind("emb", 0) == 0 || has(last, "embed") || last == "wte" || last == "wpe" || last == "shared";
}

// A bias-free 2-D weight is an Embedding or a Linear(bias=False) alike: only the name tells.
bool linear_name(const std::string& last) {
  for (std::string_view part : {"proj", "fc", "linear", "head", "dense", "query", "key", "value", "gate", "up", "down",
                                "classifier", "out", "lin", "w1", "w2", "w3", "wq", "wk", "wv", "wo"})
    if (has(last, part)) return true;
  return false;
}

// The channels a normalization right after a convolution works on (its first 1-D tensor), or -1.
int64_t norm_channels(const Held* h) {
  if (!h) return -1;
  for (const char* leaf : {"running_mean", "weight", "bias"})
    if (const auto* s = h->get(leaf); s && s->size() == 1) return (*s)[0];
  return -1;
}

// Convolution or transposed convolution of weight w (rank 3-5): out channels are w[0] for a Conv, w[1]
// (times groups) for a ConvTranspose; `out` is the evidence (the bias's length or the next norm's
// channels). A square weight, or no evidence, leaves it open.
std::string conv_type(const std::vector<int64_t>& w, int64_t out) {
  const std::string n = std::to_string(w.size() - 2) + "d";
  if (out < 0 || w[0] == w[1]) return "";
  if (out == w[0]) return "Conv" + n;
  if (out == w[1]) return "ConvTranspose" + n;
  return "";
}

std::string infer_one(const std::string& module, const Held& h, const Held* next, const std::string& prev_type,
                      const Held* prev) {
  const std::string last = lower_last(module);
  if (h.get("in_proj_weight")) return "MultiheadAttention";
  const auto* ih = h.get("weight_ih_l0");
  const auto* hh = h.get("weight_hh_l0");
  const bool cell = !ih && h.get("weight_ih") && h.get("weight_hh");
  if (cell) {
    ih = h.get("weight_ih");
    hh = h.get("weight_hh");
  }
  if (ih && hh && ih->size() == 2 && hh->size() == 2 && (*hh)[1] > 0 && (*ih)[0] % (*hh)[1] == 0) {
    const int64_t gates = (*ih)[0] / (*hh)[1];
    const char* base = gates == 4 ? "LSTM" : gates == 3 ? "GRU" : gates == 1 ? "RNN" : "";
    if (!*base) return "";
    return std::string(base) + (cell ? "Cell" : "");
  }
  const auto* w = h.get("weight");
  const auto* b = h.get("bias");
  const auto* rm = h.get("running_mean");
  if (rm && h.get("running_var") && rm->size() == 1) {  // BatchNorm: its dimension from the layer before it
    const int64_t c = (*rm)[0];
    const auto* pw = prev ? prev->get("weight") : nullptr;
    if (pw && pw->size() >= 3 && prev_type.rfind("Conv", 0) == 0) {
      const bool transposed = prev_type.rfind("ConvTranspose", 0) == 0;
      if ((transposed ? (*pw)[1] : (*pw)[0]) == c) return "BatchNorm" + std::to_string(pw->size() - 2) + "d";
    }
    if (pw && pw->size() == 2 && prev_type == "Linear" && (*pw)[0] == c) return "BatchNorm1d";
    return "";
  }
  if (!w) return "";
  if (w->size() >= 3 && w->size() <= 5) return conv_type(*w, b && b->size() == 1 ? (*b)[0] : norm_channels(next));
  if (w->size() == 2) {
    if (b && b->size() == 1) {
      const int64_t n = (*b)[0];
      if (gpt2_conv1d_name(last) && n == (*w)[1]) return "Conv1D";
      if (n == (*w)[0] && ((*w)[0] != (*w)[1] || !gpt2_conv1d_name(last))) return "Linear";
      return "";
    }
    if (b) return "";
    if (embedding_name(last)) return "Embedding";
    return linear_name(last) && !gpt2_conv1d_name(last) ? "Linear" : "";
  }
  if (w->size() == 1) {
    const bool norm = has(last, "norm") || last.rfind("ln", 0) == 0;
    if (b && b->size() == 1 && (*b)[0] == (*w)[0]) {
      if (has(last, "group") || last == "gn") return "GroupNorm";
      if (has(last, "batch") || last.rfind("bn", 0) == 0) return "";
      return norm ? "LayerNorm" : "";
    }
    if (!b && (has(last, "rms") || (norm && has(last, "layernorm")))) return "RMSNorm";
  }
  return "";
}

}  // namespace

std::unordered_map<std::string, std::string> infer_layer_types(const std::vector<Tensor>& tensors) {
  std::vector<std::string> order;  // modules holding tensors, first-seen order
  std::unordered_map<std::string, Held> held;
  std::unordered_map<std::string, std::vector<std::string>> children;  // parent -> its tensor-holding children
  std::unordered_map<std::string, size_t> position;  // a module's place among its parent's children
  for (const Tensor& t : tensors) {
    const size_t dot = t.name.rfind('.');
    const std::string module = dot == std::string::npos ? "" : t.name.substr(0, dot);
    auto [it, fresh] = held.try_emplace(module);
    if (fresh) {
      order.push_back(module);
      const size_t pdot = module.rfind('.');
      auto& sib = children[pdot == std::string::npos ? "" : module.substr(0, pdot)];
      position[module] = sib.size();
      sib.push_back(module);
    }
    it->second.leaves.emplace(t.name.substr(dot == std::string::npos ? 0 : dot + 1), &t.shape);
  }
  std::unordered_map<std::string, std::string> out;
  for (const std::string& m : order) {
    if (m.empty()) continue;  // tensors at the top level: no module to name
    const size_t pdot = m.rfind('.');
    const auto& sib = children[pdot == std::string::npos ? "" : m.substr(0, pdot)];
    const size_t at = position[m];  // no scan of the siblings: a flat model stays linear
    const Held* next = at + 1 < sib.size() ? &held[sib[at + 1]] : nullptr;
    const Held* prev = at > 0 ? &held[sib[at - 1]] : nullptr;
    const std::string prev_type = at > 0 && out.count(sib[at - 1]) ? out[sib[at - 1]] : "";
    std::string type = infer_one(m, held[m], next, prev_type, prev);
    if (!type.empty()) out.emplace(m, std::move(type));
  }
  return out;
}

bool layer_type_matches(const std::string& inferred, const std::string& known) {
  if (inferred == known) return true;
  return known.size() > inferred.size() && known.compare(known.size() - inferred.size(), inferred.size(), inferred) == 0;
}

}  // namespace ckpt
