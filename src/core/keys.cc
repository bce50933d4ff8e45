#include "core/keys.h"

#include <algorithm>
#include <map>
#include <set>
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

}  // namespace ckpt
