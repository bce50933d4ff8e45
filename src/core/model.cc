#include "core/model.h"

#include <unordered_map>
#include <unordered_set>

#include "core/keys.h"
#include "core/storage.h"

namespace ckpt {

namespace {
std::string without_dot(const std::string& prefix) {
  return !prefix.empty() && prefix.back() == '.' ? prefix.substr(0, prefix.size() - 1) : prefix;
}
}  // namespace

std::optional<std::string> file_module_path(const std::string& arch_path, const ModelReport& m) {
  // ARCH key = add + (FILE key without strip): only paths under `add` have a FILE name.
  std::string rest = arch_path;
  if (!m.add_prefix.empty()) {
    if (rest == without_dot(m.add_prefix)) rest.clear();
    else if (rest.compare(0, m.add_prefix.size(), m.add_prefix) == 0) rest = rest.substr(m.add_prefix.size());
    else return std::nullopt;
  }
  if (m.strip_prefix.empty()) return rest;
  return rest.empty() ? without_dot(m.strip_prefix) : m.strip_prefix + rest;
}

ModelReport apply_model(Checkpoint& file, const Checkpoint& arch, const std::string& strip, const std::string& add) {
  ModelReport r;
  r.path = arch.path;
  r.strip_prefix = strip;
  r.add_prefix = add;
  std::vector<const Tensor*> file_keys, model_keys;
  for (const Tensor& t : file.tensors) file_keys.push_back(&t);
  for (const Tensor& t : arch.tensors) model_keys.push_back(&t);
  KeyMatch km = match_keys(file_keys, model_keys, strip, add);
  if (!km.ok() && strip.empty() && add.empty() && (km.suggested_strip_prefix || km.suggested_add_prefix)) {
    r.strip_prefix = km.suggested_strip_prefix.value_or("");
    r.add_prefix = km.suggested_add_prefix.value_or("");
    r.prefix_guessed = true;
    km = match_keys(file_keys, model_keys, r.strip_prefix, r.add_prefix);
  }
  r.matched = km.matched;
  r.missing = km.missing.size();
  r.unexpected = km.unexpected.size();
  r.mismatched = km.mismatched.size();

  std::unordered_map<std::string, const Tensor*> by_name;
  for (const Tensor& t : arch.tensors) by_name.emplace(t.name, &t);
  for (Tensor& t : file.tensors) {
    if (t.state != TensorState::Uninitialized) continue;
    auto it = by_name.find(renamed_key(t.name, r.strip_prefix, r.add_prefix));
    if (it == by_name.end() || it->second->state == TensorState::Uninitialized || !it->second->dtype) continue;
    const Tensor& a = *it->second;
    if (!t.dtype) t.dtype = a.dtype;
    t.shape = a.shape;
    t.stride = contiguous_strides(a.shape);
    t.numel = a.numel;
    t.bytes = dtype_bytes(*t.dtype, static_cast<uint64_t>(a.numel));
    t.resolved = true;
    r.resolved.emplace_back(t.name, t.shape);
  }

  if (file.modules.empty() && !arch.modules.empty()) {
    for (const Module& m : arch.modules) {
      auto p = file_module_path(m.name, r);
      if (!p) continue;
      Module copy = m;
      copy.name = *p;
      if (!copy.shared_with.empty()) copy.shared_with = file_module_path(copy.shared_with, r).value_or("");
      file.modules.push_back(std::move(copy));
    }
    // Modules of FILE's own key tree that ARCH does not name (the 'model.' level of a Lightning state
    // dict, say) are rows too, as they would be without --model.
    std::unordered_set<std::string> known;
    for (const Module& m : file.modules) known.insert(m.name);
    std::vector<Module> outer;
    for (const Module& m : file.modules) {
      for (size_t dot = m.name.find('.'); dot != std::string::npos; dot = m.name.find('.', dot + 1)) {
        std::string parent = m.name.substr(0, dot);
        if (known.insert(parent).second) outer.push_back(Module{parent, "", "", std::nullopt, "", {}});
      }
    }
    // pre-order: the outer rows come before ARCH's
    for (auto it = outer.rbegin(); it != outer.rend(); ++it) file.modules.insert(file.modules.begin(), *it);
  }
  return r;
}

}  // namespace ckpt
