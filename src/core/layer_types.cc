#include "core/layer_types.h"

#include "core/name_index.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace ckpt {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

// What one module holds directly: its tensors as a list threaded through `next_leaf` (attribute ->
// shape, the first kept for a repeated attribute), and its neighbours among its parent's tensor-holding
// children. No container per module: a million-entry state dict has about as many modules (20 bytes
// each; its name is the start of its first tensor's).
struct Held {
  uint32_t first = kNone, last = kNone;  // its tensors
  uint32_t prev = kNone, next = kNone;  // its siblings
  uint32_t name_size = 0;  // its name's length
};

// The modules of a list of tensors, and one of them to ask about its tensors.
struct Modules {
  const std::vector<Tensor>& tensors;
  std::vector<uint32_t> next_leaf;  // by tensor: its module's next tensor
  std::vector<Held> held;  // in first-seen order
  std::string_view name(const Held& h) const { return std::string_view(tensors[h.first].name).substr(0, h.name_size); }
};

struct Mod {
  const Modules* all = nullptr;
  const Held* h = nullptr;
  explicit operator bool() const { return h != nullptr; }
  // The shape of the module's tensor `leaf` (its attribute: what follows the module's name and its dot,
  // the whole name at the top level), or nullptr.
  const Dims* get(std::string_view leaf) const {
    for (uint32_t k = h->first; k != kNone; k = all->next_leaf[k]) {
      const std::string_view name = all->tensors[k].name;
      const size_t at = h->name_size > 0 ? h->name_size + 1 : 0;
      if (name.size() - at == leaf.size() && name.compare(at, leaf.size(), leaf) == 0) return &all->tensors[k].shape;
    }
    return nullptr;
  }
};

std::string lower_last(std::string_view module) {
  std::string s(module.substr(module.rfind('.') == std::string_view::npos ? 0 : module.rfind('.') + 1));
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
int64_t norm_channels(Mod h) {
  if (!h) return -1;
  for (const char* leaf : {"running_mean", "weight", "bias"})
    if (const auto* s = h.get(leaf); s && s->size() == 1) return (*s)[0];
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

std::string infer_one(std::string_view module, Mod h, Mod next, std::string_view prev_type, Mod prev) {
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
    const auto* pw = prev ? prev.get("weight") : nullptr;
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

LayerTypes infer_layer_types(const std::vector<Tensor>& tensors) {
  // Modules in first-seen order, found by name; each parent's tensor-holding children linked in that
  // order. Names view the tensors' names (a module's is a prefix of its tensors').
  Modules mods{tensors, std::vector<uint32_t>(tensors.size(), kNone), {}};
  std::vector<Held>& held = mods.held;
  held.reserve(tensors.size());  // at most one module per tensor (pages not touched are not memory)
  PosIndex index(tensors.size() / 2);  // module -> held
  const auto module_of = [&mods](uint32_t k) { return mods.name(mods.held[k]); };
  NameIndex family;  // parent -> its last child so far (in `tail`)
  std::vector<uint32_t> tail;
  uint32_t last = kNone;  // the previous tensor's module: a module's tensors usually come together
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string_view name = tensors[k].name;
    const size_t dot = name.rfind('.');
    const std::string_view module = dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
    auto [at, fresh] = last != kNone && module_of(last) == module
                           ? std::pair<uint32_t, bool>{last, false}
                           : index.try_emplace(module, static_cast<uint32_t>(held.size()), module_of);
    last = at;
    if (fresh) {
      const size_t pdot = module.rfind('.');
      const std::string_view parent = pdot == std::string_view::npos ? std::string_view() : module.substr(0, pdot);
      auto [f, new_family] = family.try_emplace(parent, static_cast<uint32_t>(tail.size()));
      if (new_family) tail.push_back(kNone);
      Held h;
      h.first = static_cast<uint32_t>(k);
      h.name_size = static_cast<uint32_t>(module.size());
      h.prev = tail[f];
      if (h.prev != kNone) held[h.prev].next = at;
      tail[f] = at;
      held.push_back(h);
    }
    Held& h = held[at];
    if (h.last != kNone) mods.next_leaf[h.last] = static_cast<uint32_t>(k);
    h.last = static_cast<uint32_t>(k);
  }
  index = PosIndex();
  family = NameIndex();
  LayerTypes out;
  out.reserve(held.size());
  std::vector<uint32_t> type_of(held.size(), kNone);  // each held module's in `out`
  for (size_t k = 0; k < held.size(); ++k) {
    const Held& h = held[k];
    const std::string_view module = mods.name(h);
    if (module.empty()) continue;  // tensors at the top level: no module to name
    const Mod next{&mods, h.next != kNone ? &held[h.next] : nullptr};
    const Mod prev{&mods, h.prev != kNone ? &held[h.prev] : nullptr};
    const std::string_view prev_type = prev && type_of[h.prev] != kNone ? out.type(type_of[h.prev]) : std::string_view();
    const std::string t = infer_one(module, Mod{&mods, &h}, next, prev_type, prev);
    if (!t.empty()) {
      type_of[k] = static_cast<uint32_t>(out.size());
      out.add(module, t, h.first);
    }
  }
  return out;
}

void LayerTypes::reserve(size_t n) {
  modules_.reserve(n);
  types_.reserve(n);
  tensors_.reserve(n);
}

std::string_view LayerTypes::add(std::string_view module, std::string_view type, uint32_t tensor) {
  // The names of classes are few: each is kept once for the process, and rows view it (summary.h).
  const std::string_view kept = Interned(type).str();
  modules_.push_back(module);
  types_.push_back(kept);
  tensors_.push_back(tensor);
  return kept;
}

const std::string_view* LayerTypes::find(std::string_view module) const {
  for (; indexed_ < modules_.size(); ++indexed_) index_.try_emplace(modules_[indexed_], static_cast<uint32_t>(indexed_));
  const uint32_t* at = index_.find(module);
  return at ? &types_[*at] : nullptr;
}

bool layer_type_matches(std::string_view inferred, std::string_view known) {
  if (inferred == known) return true;
  return known.size() > inferred.size() && known.compare(known.size() - inferred.size(), inferred.size(), inferred) == 0;
}

}  // namespace ckpt
