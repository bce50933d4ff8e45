#include "core/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/keys.h"
#include "core/storage.h"
#include "core/text.h"
#include "core/value_diff.h"
#include "core/values.h"

namespace ckpt {
namespace {

// Where a tensor's storage bytes are (nullptr when it has none to compare: meta, lazy, missing, not
// strided), bounds-checked as load checks them, and the mapped file they are in (nullptr: memory).
struct View {
  const uint8_t* bytes = nullptr;
  const MappedFile* file = nullptr;
};
View storage_view(const Checkpoint& ck, const Tensor& t, const StorageIndex& index) {
  View v;
  if (t.state != TensorState::Materialized || t.storage.empty() || t.layout != Layout::Strided || !t.dtype) return v;
  const Storage* s = index.find(t.storage);
  if (!s || !s->present) return v;
  if (t.dtype->pack == 1) checked_extent(ck, t, *s);
  else if (t.offset < 0 || static_cast<uint64_t>(t.offset) > s->nbytes / t.dtype->itemsize ||
           dtype_bytes(*t.dtype, static_cast<uint64_t>(t.numel)) >
               s->nbytes - static_cast<uint64_t>(t.offset) * t.dtype->itemsize)
    throw InputError((s->source ? s->source : ck.file.get())->path(), std::string(s->member), 0,
                     fmt::format("tensor '{}': {} elements at offset {} do not fit storage '{}' of {} bytes", t.name, t.numel,
                                 t.offset, s->key, s->nbytes));
  if (!StorageIndex::assembled(*s)) v.file = s->source ? s->source : ck.file.get();
  // A remote file's bytes are fetched where they are compared (value_diff prefetches each piece), not all now.
  const ByteView b = index.bytes(*s);
  v.bytes = v.file && v.file->remote() ? b.address() : b.data();
  return v;
}

// Each key under its renamed name (renamed_key, as load does), refusing two keys that become one.
std::unordered_map<std::string, size_t> renamed_keys(const Checkpoint& c, const char* side, const std::string& strip,
                                                     const std::string& add, std::vector<std::string>& names) {
  std::unordered_map<std::string, size_t> out;
  for (size_t k = 0; k < c.tensors.size(); ++k) {
    names.push_back(renamed_key(c.tensors[k].name, strip, add));
    const auto [it, fresh] = out.emplace(names.back(), k);
    if (!fresh && (!strip.empty() || !add.empty()))
      throw UsageError(fmt::format("renaming gives keys '{}' and '{}' of {} the same name '{}'",
                                   visible(c.tensors[it->second].name), visible(c.tensors[k].name), side, visible(names.back())));
  }
  return out;
}

}  // namespace

DiffResult diff_checkpoints(const Checkpoint& A, const Checkpoint& B, const DiffOptions& o) {
  DiffResult r;
  std::vector<std::string> names_a, names_b;  // renamed, index-aligned with A.tensors / B.tensors
  const auto in_a = renamed_keys(A, "A", o.strip_prefix, o.add_prefix, names_a);
  const auto in_b = renamed_keys(B, "B", o.strip_prefix, "", names_b);
  size_t exact = 0;
  for (const auto& [name, k] : in_a) exact += in_b.count(name);
  r.keys_equal = exact == in_a.size() && exact == in_b.size();

  // A prefix that explains renames: B = P + A ("b_adds") or A = P + B ("b_removes").
  if (!r.keys_equal) {
    const std::unordered_set<std::string> set_b(names_b.begin(), names_b.end());
    const PrefixRename best = best_prefix_rename(names_a, set_b);
    // A rename explains the files only when it pairs more keys than names do, and at least half of them.
    if (best.op != PrefixRename::None && best.paired > exact && best.paired * 2 >= std::min(in_a.size(), in_b.size())) {
      r.prefix_op = best.op == PrefixRename::Add ? "b_adds" : "b_removes";
      r.prefix = best.prefix;
      if (o.strip_prefix.empty() && o.add_prefix.empty()) {
        // Stripped from both sides, the prefix pairs keys in either direction: say so when it pairs as many.
        std::unordered_set<std::string> stripped_b;
        for (const std::string& n : names_b) stripped_b.insert(renamed_key(n, best.prefix, ""));
        size_t paired = 0;
        for (const std::string& n : names_a) paired += stripped_b.count(renamed_key(n, best.prefix, ""));
        if (paired >= best.paired) r.hint_strip_prefix = best.prefix;
      }
    }
  }
  auto partner = [&](const std::string& a_name) -> const Tensor* {  // a_name renamed
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
  std::vector<TensorDiff> paired;  // in A's order
  std::vector<ValuePair> jobs;
  std::vector<size_t> job_of;  // index in `paired` of each job
  for (size_t ka = 0; ka < A.tensors.size(); ++ka) {
    const Tensor& ta = A.tensors[ka];
    const Tensor* tb = partner(names_a[ka]);
    if (!tb) {
      r.only_in_a.push_back(ta.name);
      continue;
    }
    matched_b[tb] = true;
    ++r.paired;
    TensorDiff& d = paired.emplace_back();
    d.a = ta.name;
    d.b = tb->name;
    d.dtype_a = ta.dtype ? std::string(ta.dtype->name) : "?";
    d.dtype_b = tb->dtype ? std::string(tb->dtype->name) : "?";
    d.shape_a = ta.shape;
    d.shape_b = tb->shape;
    d.state_changed = ta.state != tb->state;
    if (o.values && ta.shape == tb->shape && ta.state == tb->state) {
      const View va = storage_view(A, ta, index_a), vb = storage_view(B, *tb, index_b);
      if (va.bytes && vb.bytes) {
        d.compared = true;
        ++r.compared;
        d.comparable = numeric(ta.dtype) && numeric(tb->dtype);
        if (!d.comparable && ta.dtype != tb->dtype) {  // no common view: different by definition
          d.values_equal = d.within = false;
          continue;
        }
        jobs.push_back({&ta, tb, va.bytes, vb.bytes, va.file, vb.file});
        job_of.push_back(paired.size() - 1);
      }
    }
  }
  ValueCompareOptions vo;
  vo.atol = o.atol;
  vo.rtol = o.rtol;
  vo.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  vo.piece_bytes = o.piece_bytes;
  vo.wide_simd = o.wide_simd;
  vo.progress = o.progress;
  const std::vector<ValueDiff> values = compare_values(jobs, vo);
  for (size_t j = 0; j < jobs.size(); ++j) {
    TensorDiff& d = paired[job_of[j]];
    d.max_abs = values[j].max_abs;
    d.max_rel = values[j].max_rel;
    d.values_equal = values[j].equal;
    d.within = values[j].within;
    r.max_abs = std::max(r.max_abs, d.max_abs);
  }
  for (TensorDiff& d : paired) {
    const bool same_meta = d.dtype_a == d.dtype_b && d.shape_a == d.shape_b && !d.state_changed;
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
