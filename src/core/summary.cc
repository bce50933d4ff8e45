#include "core/summary.h"

#include "core/layer_types.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace ckpt {
namespace {

// Two entries are the same tensor when they view the same bytes the same way (entries without a
// storage: when they are the same pickled object). Hashes and compares entries in place, by index.
struct SameView {
  const std::vector<Tensor>* ts;
  static bool by_storage(const Tensor& t) { return !t.storage.empty() && t.layout == Layout::Strided; }
  size_t operator()(size_t k) const {
    const Tensor& t = (*ts)[k];
    if (!by_storage(t)) return std::hash<const void*>()(t.identity);
    size_t h = std::hash<std::string>()(t.storage) ^ (std::hash<int64_t>()(t.offset) * 31) ^ std::hash<const void*>()(t.dtype);
    for (int64_t x : t.shape) h = h * 1000003u ^ std::hash<int64_t>()(x);
    for (int64_t x : t.stride) h = h * 998244353u ^ std::hash<int64_t>()(x);
    return h;
  }
  bool operator()(size_t a, size_t b) const {
    const Tensor& x = (*ts)[a];
    const Tensor& y = (*ts)[b];
    if (by_storage(x) != by_storage(y)) return false;
    if (!by_storage(x)) return x.identity == y.identity;
    return x.storage == y.storage && x.offset == y.offset && x.dtype == y.dtype && x.shape == y.shape && x.stride == y.stride;
  }
};

// The totals of the entries `keep` selects (all when null); `id_of` tells repeated views of one tensor.
void add_totals(const Checkpoint& ck, const std::vector<size_t>& id_of, const std::function<bool(const Tensor&)>* keep,
                Totals& T, Summary* s) {
  std::vector<bool> seen(ck.tensors.size(), false);
  for (size_t k = 0; k < ck.tensors.size(); ++k) {
    const Tensor& t = ck.tensors[k];
    if (keep && !(*keep)(t)) continue;
    ++T.tensors;
    if (t.state == TensorState::Uninitialized && !t.resolved) {
      ++T.uninitialized;
      if (s) s->uninitialized_entries.push_back(k);
      continue;
    }
    if (t.state == TensorState::Meta) {
      ++T.meta;
      if (s) s->meta_entries.push_back(k);
    }
    const uint64_t n = static_cast<uint64_t>(t.numel);
    T.elements += n;
    if (seen[id_of[k]]) continue;
    seen[id_of[k]] = true;
    T.unique_elements += n;
    T.bytes += t.bytes;
    if (t.dtype) {
      const std::string_view dt = t.dtype->name;
      auto d = std::find_if(T.by_dtype.begin(), T.by_dtype.end(), [&](const Totals::ByDtype& b) { return b.dtype == dt; });
      if (d == T.by_dtype.end()) d = T.by_dtype.insert(T.by_dtype.end(), Totals::ByDtype{std::string(dt)});
      ++d->tensors;
      d->bytes += t.bytes;
      if (t.kind == TensorKind::Buffer) d->buffers += n;
      else if (t.kind == TensorKind::Attribute) d->attributes += n;
      else d->parameters += n;
    }
    if (t.kind == TensorKind::Buffer) {
      T.buffers += n;
    } else if (t.kind == TensorKind::Attribute) {
      T.attributes += n;
    } else {
      T.parameters += n;
      T.parameter_bytes += t.bytes;
      (trainable(t) ? T.trainable : T.non_trainable) += n;
    }
  }
}

std::vector<size_t> same_tensor_ids(const Checkpoint& ck) {
  const SameView same{&ck.tensors};
  std::unordered_map<size_t, size_t, SameView, SameView> first(ck.tensors.size() * 2, same, same);
  std::vector<size_t> id_of(ck.tensors.size());
  for (size_t k = 0; k < ck.tensors.size(); ++k) id_of[k] = first.emplace(k, k).first->second;
  return id_of;
}

}  // namespace

Totals totals_of(const Checkpoint& ck, const std::function<bool(const Tensor&)>& keep) {
  Totals T;
  add_totals(ck, same_tensor_ids(ck), &keep, T, nullptr);
  T.parameters_without_embeddings = T.parameters;  // not told apart for a subset
  return T;
}

Summary summarize(const Checkpoint& ck) {
  Summary s;
  s.ck = &ck;
  Totals& T = s.totals;

  // Unique tensor ids: id_of[k] is the index of the first entry viewing the same tensor as entry k.
  const std::vector<size_t> id_of = same_tensor_ids(ck);

  std::vector<bool> repeated(ck.tensors.size(), false);
  for (size_t k = 0; k < ck.tensors.size(); ++k)
    if (id_of[k] != k) repeated[id_of[k]] = true;
  add_totals(ck, id_of, nullptr, T, &s);
  for (const Storage& st : ck.storages) {
    if (st.present && st.in_model) T.storage_bytes += st.nbytes;
    if (st.present) T.file_storage_bytes += st.nbytes;
  }

  // Modules: the known tree, or one derived from the dotted keys.
  std::unordered_map<std::string, size_t> row_of;
  auto add_row = [&](const std::string& name) -> size_t {
    auto it = row_of.find(name);
    if (it != row_of.end()) return it->second;
    ModuleRow r;
    r.name = name;
    r.depth = name.empty() ? 0 : static_cast<int>(std::count(name.begin(), name.end(), '.')) + 1;
    s.modules.push_back(std::move(r));
    row_of.emplace(name, s.modules.size() - 1);
    return s.modules.size() - 1;
  };
  add_row("");
  for (const Module& m : ck.modules) {
    ModuleRow& r = s.modules[add_row(m.name)];
    r.type = m.type;
    r.qualified_type = m.qualified_type;
    r.training = m.training;
    r.shared_with = m.shared_with;
    if (!m.attributes.empty()) r.attributes = &m.attributes;
  }
  std::unordered_set<uint64_t> counted;  // (row, unique id) pairs already added, for repeated tensors only
  std::vector<size_t> rows;
  std::string_view last_parent;
  for (size_t k = 0; k < ck.tensors.size(); ++k) {
    const Tensor& t = ck.tensors[k];
    std::string_view name = t.name;
    const auto last_dot = name.rfind('.');
    const std::string_view parent = last_dot == std::string_view::npos ? std::string_view() : name.substr(0, last_dot);
    if (k > 0 && parent == last_parent) {
      // consecutive entries of one module share its chain of rows
    } else if (ck.modules.empty()) {
      rows.assign(1, 0);
      for (size_t dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.', dot + 1))
        rows.push_back(add_row(std::string(name.substr(0, dot))));
    } else {
      rows.assign(1, 0);
      for (size_t dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.', dot + 1)) {
        auto it = row_of.find(std::string(name.substr(0, dot)));
        if (it != row_of.end()) rows.push_back(it->second);
      }
    }
    last_parent = parent;
    for (size_t r : rows) {
      ModuleRow& row = s.modules[r];
      ++row.tensors;
      if (t.dtype && std::find(row.dtypes.begin(), row.dtypes.end(), t.dtype->name) == row.dtypes.end())
        row.dtypes.emplace_back(t.dtype->name);
      if (t.state == TensorState::Uninitialized && !t.resolved) {
        ++row.uninitialized;
        continue;
      }
      // Only tensors saved under several names can be counted twice in one row.
      if (repeated[id_of[k]] && !counted.insert((static_cast<uint64_t>(r) << 32) ^ id_of[k]).second) continue;
      const uint64_t n = static_cast<uint64_t>(t.numel);
      row.bytes += t.bytes;
      if (t.kind == TensorKind::Buffer) row.buffers += n;
      else if (t.kind == TensorKind::Parameter) {
        row.parameters += n;
        if (trainable(t)) row.trainable += n;
      }
    }
  }
  // A module shared at two paths shows the same counts at both; totals count it once (above).
  for (ModuleRow& r : s.modules) {
    if (r.shared_with.empty()) continue;
    auto it = row_of.find(r.shared_with);
    if (it == row_of.end()) continue;
    const ModuleRow& first = s.modules[it->second];
    r.parameters = first.parameters;
    r.trainable = first.trainable;
    r.buffers = first.buffers;
    r.bytes = first.bytes;
    r.dtypes = first.dtypes;
  }
  if (ck.modules.empty()) {
    // Pre-order by name segments, keeping first-seen order among siblings.
    std::vector<ModuleRow> sorted;
    std::map<std::string, std::vector<size_t>> children;
    for (size_t k = 1; k < s.modules.size(); ++k) {
      const std::string& n = s.modules[k].name;
      auto dot = n.rfind('.');
      children[dot == std::string::npos ? "" : n.substr(0, dot)].push_back(k);
    }
    std::vector<size_t> stack{0};
    while (!stack.empty()) {
      size_t k = stack.back();
      stack.pop_back();
      sorted.push_back(s.modules[k]);
      auto it = children.find(s.modules[k].name);
      if (it != children.end())
        for (auto c = it->second.rbegin(); c != it->second.rend(); ++c) stack.push_back(*c);
    }
    s.modules = std::move(sorted);
    // No module tree in the file: what each module's tensors imply (shown as inferred).
    const std::unordered_map<std::string, std::string> inferred = infer_layer_types(ck.tensors);
    for (ModuleRow& r : s.modules)
      if (auto it = inferred.find(r.name); it != inferred.end() && r.type.empty()) r.inferred_type = it->second;
  }

  // Storages shared by several entries: tied weights (same view) and distinct views.
  std::map<std::string, std::vector<size_t>> by_storage;
  for (size_t k = 0; k < ck.tensors.size(); ++k)
    if (!ck.tensors[k].storage.empty()) by_storage[ck.tensors[k].storage].push_back(k);
  for (const auto& [key, idx] : by_storage) {
    if (idx.size() < 2) continue;
    std::unordered_map<size_t, std::vector<size_t>> groups;
    for (size_t k : idx) groups[id_of[k]].push_back(k);
    for (size_t k : idx) {
      const auto& g = groups[id_of[k]];
      if (g.size() > 1 && ck.tensors[g.front()].name == ck.tensors[k].name) s.tied_groups.push_back(g);
    }
    if (groups.size() > 1) s.view_groups.push_back(idx);
  }
  // transformers' num_parameters(exclude_embeddings=True): every Embedding module's weight left out, once.
  T.parameters_without_embeddings = T.parameters;
  std::unordered_map<std::string_view, size_t> tensor_of;
  for (size_t k = 0; k < ck.tensors.size(); ++k) tensor_of.emplace(ck.tensors[k].name, k);
  std::unordered_set<size_t> left_out;
  for (const ModuleRow& r : s.modules) {
    const std::string& type = r.type.empty() ? r.inferred_type : r.type;
    if (!layer_type_matches("Embedding", type)) continue;  // nn.Embedding or a model's own subclass name
    auto it = tensor_of.find(r.name.empty() ? "weight" : r.name + ".weight");
    if (it == tensor_of.end()) continue;
    const Tensor& w = ck.tensors[it->second];
    if (w.kind != TensorKind::Parameter || (w.state == TensorState::Uninitialized && !w.resolved)) continue;
    if (left_out.insert(id_of[it->second]).second) T.parameters_without_embeddings -= static_cast<uint64_t>(w.numel);
  }
  s.same_tensor = std::move(id_of);
  return s;
}

}  // namespace ckpt
