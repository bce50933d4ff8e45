#include "core/keys.h"

#include "core/name_index.h"

#include <algorithm>
#include <functional>
#include <array>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace ckpt {

namespace {

// Leading dotted components of a key, up to three: "a.b.c.w" -> "a.", "a.b.", "a.b.c.".
std::vector<std::string> leading(const std::string& key) {
  std::vector<std::string> out;
  for (size_t dot = key.find('.'); dot != std::string::npos && out.size() < 3; dot = key.find('.', dot + 1))
    out.push_back(key.substr(0, dot + 1));
  return out;
}

std::string dtype_name(const Tensor* t) { return t->dtype ? std::string(t->dtype->name) : std::string("?"); }

}  // namespace

PrefixRename best_prefix_rename(const std::vector<std::string>& from, const std::unordered_set<std::string>& to) {
  const std::unordered_set<std::string> from_set(from.begin(), from.end());
  std::map<std::pair<PrefixRename::Op, std::string>, size_t> votes;
  for (const std::string& k : from)
    for (const std::string& p : leading(k))
      if (to.count(k.substr(p.size()))) ++votes[{PrefixRename::Strip, p}];
  for (const std::string& k : to)
    for (const std::string& p : leading(k))
      if (from_set.count(k.substr(p.size()))) ++votes[{PrefixRename::Add, p}];
  PrefixRename best;
  for (const auto& [key, n] : votes)
    if (n > best.paired) best = {key.first, key.second, n};
  return best;
}

std::string renamed_key(const std::string& key, const std::string& strip, const std::string& add) {
  std::string k = key;
  if (!strip.empty() && k.compare(0, strip.size(), strip) == 0) k = k.substr(strip.size());
  return add + k;
}

KeyMatch match_keys(const std::vector<const Tensor*>& file, const std::vector<const Tensor*>& model, const std::string& strip,
                    const std::string& add) {
  KeyMatch m;
  std::map<std::string, const Tensor*> by_model;
  for (const Tensor* t : model) by_model.emplace(t->name, t);
  std::set<std::string> seen;
  std::vector<std::string> renamed;
  for (const Tensor* t : file) {
    std::string k = renamed_key(t->name, strip, add);
    renamed.push_back(k);
    auto it = by_model.find(k);
    if (it == by_model.end()) {
      m.unexpected.push_back(k);
      continue;
    }
    seen.insert(k);
    const Tensor* mt = it->second;
    // lazy entries have no shape: an UninitializedParameter takes any shape, as load_state_dict does
    const bool lazy = t->state == TensorState::Uninitialized || mt->state == TensorState::Uninitialized;
    if (!lazy && (t->shape != mt->shape || t->dtype != mt->dtype))
      m.mismatched.push_back({k, dtype_name(t), dtype_name(mt), t->shape, mt->shape});
    else ++m.matched;
  }
  for (const auto& [k, t] : by_model)
    if (!seen.count(k)) m.missing.push_back(k);
  std::sort(m.unexpected.begin(), m.unexpected.end());
  std::sort(m.mismatched.begin(), m.mismatched.end(), [](const KeyMismatch& a, const KeyMismatch& b) { return a.key < b.key; });
  if (m.missing.empty() && m.unexpected.empty()) return m;

  // One prefix, stripped from or added to FILE's keys, that pairs more keys than now and at least half
  // of the model's.
  std::unordered_set<std::string> model_keys;
  for (const auto& [k, t] : by_model) model_keys.insert(k);
  const PrefixRename best = best_prefix_rename(renamed, model_keys);
  if (best.op != PrefixRename::None && best.paired > m.matched + m.mismatched.size() && best.paired * 2 >= by_model.size()) {
    if (best.op == PrefixRename::Strip) m.suggested_strip_prefix = best.prefix;
    else m.suggested_add_prefix = best.prefix;
  }
  return m;
}

namespace {

// Names that are buffers in every torch.nn module that has them (and in common model zoos).
bool buffer_name(std::string_view leaf) {
  static constexpr std::array<std::string_view, 10> kNames{
      "running_mean", "running_var", "num_batches_tracked", "position_ids", "token_type_ids",
      "inv_freq",     "masked_bias", "_float_tensor",       "causal_mask",  "attention_mask"};
  return std::find(kNames.begin(), kNames.end(), leaf) != kNames.end();
}

// Buffers a torch.nn module registers under names that say nothing alone, told by their place in the
// key: spectral_norm's power-iteration vectors (old-style hook: <w>_u / <w>_v beside <w>_orig, where
// weight_norm's <w>_v beside <w>_g is a parameter; parametrization: parametrizations.<w>.<k>._u / ._v),
// orthogonal's parametrizations.<w>.<k>.base, and every tensor of a torch.ao.quantization observer or
// fake-quantizer (activation_post_process*, weight_fake_quant: scale, zero_point, min_val, eps, ...);
// torch.nn.utils.prune's <w>_mask beside <w>_orig.
// `names`: every tensor name, built at the first name that needs it (a <w>_u / _v / _mask leaf).
bool positional_buffer(std::string_view name, const std::function<const NameIndex&()>& names) {
  thread_local std::vector<std::string_view> seg;  // one buffer for every name, not one per name
  seg.clear();
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    seg.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  const std::string_view leaf = seg.back();
  for (size_t k = 0; k + 1 < seg.size(); ++k) {
    const std::string_view s = seg[k];
    if (s == "weight_fake_quant" || s.substr(0, 23) == "activation_post_process") return true;
  }
  const size_t n = seg.size();
  if (n >= 4 && seg[n - 4] == "parametrizations" && !seg[n - 2].empty() &&
      std::all_of(seg[n - 2].begin(), seg[n - 2].end(), [](char c) { return c >= '0' && c <= '9'; }))
    return leaf == "_u" || leaf == "_v" || leaf == "base";
  // beside <w>_orig: spectral_norm's <w>_u / <w>_v, torch.nn.utils.prune's <w>_mask
  for (std::string_view suffix : {std::string_view("_u"), std::string_view("_v"), std::string_view("_mask")})
    if (leaf.size() > suffix.size() && leaf.substr(leaf.size() - suffix.size()) == suffix)
      return names().contains(std::string(name.substr(0, name.size() - suffix.size())) + "_orig");
  return false;
}

}  // namespace

void infer_kinds(std::span<Tensor> tensors) {
  NameIndex index;
  bool built = false;
  const std::function<const NameIndex&()> names = [&]() -> const NameIndex& {
    if (!built) {
      index.reserve(tensors.size());
      for (size_t k = 0; k < tensors.size(); ++k) index.try_emplace(tensors[k].name, static_cast<uint32_t>(k));
      built = true;
    }
    return index;
  };
  for (Tensor& t : tensors) {
    if (!t.kind_inferred) continue;
    std::string_view leaf = t.name;
    if (auto dot = leaf.rfind('.'); dot != std::string_view::npos) leaf.remove_prefix(dot + 1);
    const bool int_like = t.dtype && (t.dtype->cls == DTypeClass::Int || t.dtype->cls == DTypeClass::Bool ||
                                      t.dtype->cls == DTypeClass::Bits);
    t.kind = buffer_name(leaf) || int_like || positional_buffer(t.name, names) ? TensorKind::Buffer : TensorKind::Parameter;
  }
}

bool plain_tensor_names(std::span<const Tensor> tensors) {
  if (tensors.empty()) return false;
  for (const Tensor& t : tensors) {
    const std::string_view n = t.name;
    // An input's attention_mask / position_ids are no module's buffers at the root of a file.
    if (n.find('.') != std::string_view::npos || n.rfind("weight", 0) == 0 || n.rfind("bias", 0) == 0 ||
        n == "running_mean" || n == "running_var" || n == "num_batches_tracked" || !t.kind_inferred)
      return false;
  }
  return true;
}

bool mark_plain_tensors(Checkpoint& ck) {
  if (!ck.modules.empty() || (ck.content != Content::StateDict && ck.content != Content::Object)) return false;
  if (!plain_tensor_names(ck.tensors)) return false;
  for (Tensor& t : ck.tensors) t.kind = TensorKind::Attribute;
  ck.content = Content::Tensors;
  return true;
}

}  // namespace ckpt
