#include "core/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/keys.h"
#include "core/storage.h"
#include "core/values.h"

namespace ckpt {
namespace {

// Where a tensor's storage bytes are in its file (nullptr when it has none: meta, lazy, missing).
const uint8_t* storage_bytes(const Tensor& t, const StorageIndex& index) {
  if (t.state != TensorState::Materialized || t.storage.empty() || t.layout != "strided") return nullptr;
  const Storage* s = index.find(t.storage);
  if (!s || !s->present) return nullptr;
  return index.bytes(*s).data();
}

}  // namespace

DiffResult diff_checkpoints(const Checkpoint& A, const Checkpoint& B, const DiffOptions& o) {
  DiffResult r;
  std::unordered_map<std::string, size_t> in_a, in_b;
  for (size_t k = 0; k < A.tensors.size(); ++k) in_a.emplace(A.tensors[k].name, k);
  for (size_t k = 0; k < B.tensors.size(); ++k) in_b.emplace(B.tensors[k].name, k);
  size_t exact = 0;
  for (const auto& [name, k] : in_a) exact += in_b.count(name);
  r.keys_equal = exact == in_a.size() && exact == in_b.size();

  // A prefix that explains renames: B = P + A ("b_adds") or A = P + B ("b_removes").
  if (!r.keys_equal) {
    std::vector<std::string> names_a;
    std::unordered_set<std::string> names_b;
    for (const Tensor& t : A.tensors) names_a.push_back(t.name);
    for (const Tensor& t : B.tensors) names_b.insert(t.name);
    const PrefixRename best = best_prefix_rename(names_a, names_b);
    // A rename explains the files only when it pairs more keys than names do, and at least half of them.
    if (best.op != PrefixRename::None && best.paired > exact && best.paired * 2 >= std::min(in_a.size(), in_b.size())) {
      r.prefix_op = best.op == PrefixRename::Add ? "b_adds" : "b_removes";
      r.prefix = best.prefix;
    }
  }
  auto partner = [&](const std::string& a_name) -> const Tensor* {
    std::string b_name = a_name;
    if (r.prefix_op == "b_adds") b_name = r.prefix + a_name;
    if (r.prefix_op == "b_removes") {
      if (a_name.compare(0, r.prefix.size(), r.prefix) != 0) return nullptr;
      b_name = a_name.substr(r.prefix.size());
    }
    auto it = in_b.find(b_name);
    return it == in_b.end() ? nullptr : &B.tensors[it->second];
  };

  const StorageIndex index_a(A), index_b(B);
  std::unordered_map<const Tensor*, bool> matched_b;
  for (const Tensor& ta : A.tensors) {
    const Tensor* tb = partner(ta.name);
    if (!tb) {
      r.only_in_a.push_back(ta.name);
      continue;
    }
    matched_b[tb] = true;
    ++r.paired;
    TensorDiff d;
    d.a = ta.name;
    d.b = tb->name;
    d.dtype_a = ta.dtype ? std::string(ta.dtype->name) : "?";
    d.dtype_b = tb->dtype ? std::string(tb->dtype->name) : "?";
    d.shape_a = ta.shape;
    d.shape_b = tb->shape;
    d.state_changed = ta.state != tb->state;
    const bool same_meta = d.dtype_a == d.dtype_b && d.shape_a == d.shape_b && !d.state_changed;
    if (o.values && ta.shape == tb->shape && ta.state == tb->state) {
      const uint8_t* pa = storage_bytes(ta, index_a);
      const uint8_t* pb = storage_bytes(*tb, index_b);
      if (pa && pb) {
        d.compared = true;
        ++r.compared;
        d.comparable = numeric(ta.dtype) && numeric(tb->dtype);
        if (!d.comparable && ta.dtype != tb->dtype) {  // no common view: different by definition
          d.values_equal = d.within = false;
          r.changed.push_back(std::move(d));
          continue;
        }
        std::vector<uint64_t> offs_b;
        offs_b.reserve(static_cast<size_t>(tb->numel));
        for_each_element(*tb, [&](uint64_t off) { offs_b.push_back(off); });
        size_t k = 0;
        for_each_element(ta, [&](uint64_t off) {
          const uint64_t ob = offs_b[k++];
          if (!d.comparable) {
            if (std::memcmp(pa + off, pb + ob, ta.dtype->itemsize) != 0) d.values_equal = d.within = false;
            return;
          }
          const double x = *element_value(*ta.dtype, pa + off), y = *element_value(*tb->dtype, pb + ob);
          if (x == y || (std::isnan(x) && std::isnan(y))) return;
          d.values_equal = false;
          const double diff = std::fabs(x - y);
          if (!(diff <= o.atol + o.rtol * std::fabs(y))) d.within = false;
          if (std::isnan(diff) || diff > d.max_abs) d.max_abs = std::isnan(diff) ? INFINITY : diff;
          if (y != 0 && diff / std::fabs(y) > d.max_rel) d.max_rel = diff / std::fabs(y);
        });
        r.max_abs = std::max(r.max_abs, d.max_abs);
      }
    }
    if (!same_meta || !d.values_equal) r.changed.push_back(std::move(d));
  }
  for (const Tensor& tb : B.tensors)
    if (!matched_b.count(&tb)) r.only_in_b.push_back(tb.name);

  const bool structure = r.keys_equal && r.only_in_a.empty() && r.only_in_b.empty() &&
                         std::all_of(r.changed.begin(), r.changed.end(), [](const TensorDiff& d) {
                           return d.dtype_a == d.dtype_b && d.shape_a == d.shape_b && !d.state_changed;
                         });
  r.equal = structure && std::all_of(r.changed.begin(), r.changed.end(), [](const TensorDiff& d) { return d.values_equal; });
  r.within_tolerance = structure && std::all_of(r.changed.begin(), r.changed.end(), [](const TensorDiff& d) { return d.within; });
  return r;
}

}  // namespace ckpt
