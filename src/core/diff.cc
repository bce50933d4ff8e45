#include "core/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <ranges>
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/hf_config.h"
#include "core/keys.h"
#include "core/lightning_details.h"
#include "core/mapped_file.h"
#include "core/name_index.h"
#include "core/storage.h"
#include "core/summary.h"
#include "core/text.h"
#include "core/value_diff.h"
#include "core/values.h"
#include "core/vfs.h"

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

// Each key under its renamed name (renamed_key, as load does), refusing two keys that become one. The
// names view the tensors' own where nothing renames them (a diff of two million-entry files holds no
// copy of a name), and the index is 8 bytes a slot over them.
struct RenamedKeys {
  std::vector<std::string_view> names;  // index-aligned with the tensors
  std::deque<std::string> renamed;  // what renamed names view
  PosIndex index;  // name -> its first tensor
  std::string_view operator()(uint32_t k) const { return names[k]; }
  const uint32_t* find(std::string_view name) const { return index.find(name, *this); }
  size_t size() const { return index.size(); }
};

void renamed_keys(const Checkpoint& c, const char* side, const std::string& strip, const std::string& add, RenamedKeys& out) {
  const bool renames = !strip.empty() || !add.empty();
  out.names.reserve(c.tensors.size());
  out.index.reserve(c.tensors.size());
  for (size_t k = 0; k < c.tensors.size(); ++k) {
    const std::string& name = c.tensors[k].name;
    out.names.push_back(renames ? std::string_view(out.renamed.emplace_back(renamed_key(name, strip, add))) : std::string_view(name));
    const auto [first, fresh] = out.index.try_emplace(out.names.back(), static_cast<uint32_t>(k), out);
    if (!fresh && renames)
      throw UsageError(fmt::format("renaming gives keys '{}' and '{}' of {} the same name '{}'", visible(c.tensors[first].name),
                                   visible(name), side, visible(out.names.back())));
  }
}

using J = nlohmann::ordered_json;

bool is_optimizer_key(const std::string& k) { return k == "optimizer_states" || k == "optimizer" || k == "optimizers"; }
bool is_scheduler_key(const std::string& k) { return k == "lr_schedulers" || k == "scheduler" || k == "schedulers"; }

const char* section_of(const std::string& top) {
  if (top == "hyper_parameters" || top == "hparams" || top == "datamodule_hyper_parameters") return "hyper_parameters";
  if (is_optimizer_key(top)) return "optimizer";
  if (is_scheduler_key(top)) return "lr_scheduler";
  if (top == "callbacks") return "callbacks";
  if (top == "loops") return "loops";
  if (top == "config.json") return "config";
  return "training";
}

// config.json as the file has it (every key, in its order, from the bytes read_hf_config read); the
// facts it took when that is no object, {"error": ...} when it could not be read at all.
J config_doc(const HfConfig& c) {
  if (!c.error.empty()) return J{{"error", c.error}};
  J j = J::parse(c.text.begin(), c.text.end(), nullptr, false, false);
  return j.is_object() ? j : hf_json(c);
}

// What the readers kept beside the tensors, as one JSON object per file: each training-dict key in the
// file's order (Lightning's param groups, schedulers and callback states as summary shows them, with
// the 1-element tensors' values), and a Hugging Face folder's config.json. The optimizer's per-parameter
// state is tensors: compared apart (state_tensors).
J metadata_doc(const Checkpoint& ck) {
  J md = J::object();
  const TrainingInfo& tr = ck.training;
  const J tj = training_json(tr);  // null when the reader kept no details
  for (const std::string& key : tr.order) {
    if (key == "callback_tensors") continue;  // the callbacks' states carry their values
    if (key == "callbacks" && tr.callbacks) {
      J cbs = J::object();
      if (tj.is_object())
        for (const J& c : tj["callbacks"]) cbs[c["key"].get<std::string>()] = c["state"];
      else
        for (const std::string& k : *tr.callbacks) cbs[k] = nullptr;
      md[key] = std::move(cbs);
    } else if (key == "loops" && tr.loops) {
      md[key] = tj.is_object() && tj["loops"].is_object() ? tj["loops"] : J(*tr.loops);
    } else if (const TrainingInfo::State* st = tr.state(key)) {
      J list = J::array();
      if (tj.is_object() && is_optimizer_key(key)) {
        for (const J& o : tj["optimizers"])
          if (o["key"] == key) list.push_back(J{{"class", o["class"]}, {"param_groups", o["param_groups"]}, {"state", o["state"]}});
      } else if (tj.is_object() && is_scheduler_key(key)) {
        for (const J& s : tj["lr_schedulers"])
          if (s["key"] == key) list.push_back(J{{"class", s["class"]}, {"state", s["state"]}});
      }
      md[key] = list.empty() ? state_json(*st) : std::move(list);
    } else if (const TrainingInfo::Data* d = tr.entry(key)) {
      md[key] = data_json(*d);
    }
  }
  if (ck.hf) md["config.json"] = config_doc(*ck.hf);
  return md;
}

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

// Every value that differs between a and b, as deep as both are objects (or arrays of one length).
void compare_json(const J& a, const J& b, bool in_a, bool in_b, const std::string& section, const std::string& path,
                  std::vector<MetaChange>& out) {
  if (in_a && in_b && a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto jt = b.find(it.key());
      compare_json(*it, jt == b.end() ? J() : *jt, true, jt != b.end(), section, child(path, it.key()), out);
    }
    for (auto jt = b.begin(); jt != b.end(); ++jt)
      if (!a.contains(jt.key())) compare_json(J(), *jt, false, true, section, child(path, jt.key()), out);
    return;
  }
  if (in_a && in_b && a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t k = 0; k < a.size(); ++k) compare_json(a[k], b[k], true, true, section, fmt::format("{}[{}]", path, k), out);
    return;
  }
  if (in_a && in_b && a == b) return;
  out.push_back(MetaChange{section, path, in_a ? a : J(), in_b ? b : J(), in_a, in_b});
}

// The tensors a file holds outside the model (an optimizer's per-parameter state, a callback's score):
// each present storage that no model entry uses, as one flat tensor of its dtype, in the file's order.
// Only training checkpoints (Lightning, a training dict) hold such state: elsewhere a storage outside the
// model is something else (an exported program's constants, a TorchScript archive's).
std::vector<Tensor> state_tensors(const Checkpoint& ck) {
  std::vector<Tensor> out;
  if (ck.content != Content::Lightning && ck.content != Content::Checkpoint) return out;
  for (const Storage& s : ck.storages) {
    if (s.in_model || !s.present || !s.dtype || !s.dcp->chunks.empty()) continue;
    Tensor t;
    t.name = "storage " + s.key;
    t.dtype = s.dtype;
    t.numel = static_cast<int64_t>(s.numel);
    t.shape = {t.numel};
    t.stride = {1};
    t.bytes = s.nbytes;
    t.storage = s.key;
    out.push_back(std::move(t));
  }
  return out;
}

J state_side(const std::vector<Tensor>& ts) {
  uint64_t bytes = 0;
  for (const Tensor& t : ts) bytes += t.bytes;
  return J{{"storages", ts.size()}, {"bytes", bytes}};
}

}  // namespace

const char* to_string(DiffVerdict v) {
  switch (v) {
    case DiffVerdict::Same: return "same";
    case DiffVerdict::WithinTolerance: return "within tolerance";
    case DiffVerdict::Different: return "different";
  }
  return "different";
}

DiffVerdict DiffResult::verdict(const DiffOptions& o) const {
  bool meta_differs = false, meta_within = false;
  for (const MetaChange& m : metadata) (m.within ? meta_within : meta_differs) = true;
  if (!(o.values ? within_tolerance : equal) || meta_differs) return DiffVerdict::Different;
  if (!equal || meta_within) return DiffVerdict::WithinTolerance;
  return DiffVerdict::Same;
}

DiffResult diff_checkpoints(const Checkpoint& A, const Checkpoint& B, const DiffOptions& o) {
  DiffResult r;
  RenamedKeys in_a, in_b;  // renamed, index-aligned with A.tensors / B.tensors
  renamed_keys(A, "A", o.strip_prefix, o.add_prefix, in_a);
  renamed_keys(B, "B", o.strip_prefix, "", in_b);
  size_t exact = 0;
  for (size_t k = 0; k < in_a.names.size(); ++k)
    if (*in_a.find(in_a.names[k]) == k) exact += in_b.find(in_a.names[k]) != nullptr;  // each name once
  r.keys_equal = exact == in_a.size() && exact == in_b.size();

  // A rename asked for that renames nothing is most likely a typo: said on stderr.
  if (!o.strip_prefix.empty()) {
    auto starts = [&](const Tensor& t) { return t.name.compare(0, o.strip_prefix.size(), o.strip_prefix) == 0; };
    if (std::none_of(A.tensors.begin(), A.tensors.end(), starts) && std::none_of(B.tensors.begin(), B.tensors.end(), starts))
      r.warnings.push_back(fmt::format("--strip-prefix '{}' matches no key in A or B", visible(o.strip_prefix)));
  }
  if (!o.add_prefix.empty() && exact == 0 && !A.tensors.empty())
    r.warnings.push_back(fmt::format("--add-prefix '{}' gives no key of A a partner in B", visible(o.add_prefix)));

  // A prefix that explains renames: B = P + A ("b_adds") or A = P + B ("b_removes").
  if (!r.keys_equal) {
    const std::vector<std::string> names_a(in_a.names.begin(), in_a.names.end());
    std::unordered_set<std::string> set_b;
    for (const std::string_view n : in_b.names) set_b.emplace(n);
    const PrefixRename best = best_prefix_rename(names_a, set_b);
    // A rename explains the files only when it pairs more keys than names do, and at least half of them.
    if (best.op != PrefixRename::None && best.paired > exact && best.paired * 2 >= std::min(in_a.size(), in_b.size())) {
      r.prefix_op = best.op == PrefixRename::Add ? "b_adds" : "b_removes";
      r.prefix = best.prefix;
      if (o.strip_prefix.empty() && o.add_prefix.empty()) {
        // Stripped from both sides, the prefix pairs keys in either direction: say so when it pairs as many.
        std::unordered_set<std::string> stripped_b;
        for (const std::string_view n : in_b.names) stripped_b.insert(renamed_key(std::string(n), best.prefix, ""));
        size_t paired = 0;
        for (const std::string& n : names_a) paired += stripped_b.count(renamed_key(n, best.prefix, ""));
        if (paired >= best.paired) r.hint_strip_prefix = best.prefix;
      }
    }
  }
  std::string b_name;
  auto partner = [&](std::string_view a_name) -> std::optional<size_t> {  // a_name renamed
    std::string_view name = a_name;
    if (r.prefix_op == "b_adds") name = b_name.assign(r.prefix).append(a_name);
    if (r.prefix_op == "b_removes") {
      if (a_name.substr(0, r.prefix.size()) != r.prefix) return std::nullopt;
      name = a_name.substr(r.prefix.size());
    }
    const uint32_t* k = in_b.find(name);
    return k ? std::optional<size_t>(*k) : std::nullopt;
  };

  // Paired keys: the pair and its values' comparison, the rest read from the records at the end; only the
  // pairs that changed become TensorDiffs.
  struct Pair {
    size_t a = 0, b = 0;
    bool compared = false, comparable = true, values_equal = true, within = true;
    double max_abs = 0.0, max_rel = 0.0;
  };
  auto shape_of = [](const Tensor& t) { return std::span<const int64_t>(t.shape.begin(), t.shape.end()); };
  auto same_shape = [&](const Tensor& a, const Tensor& b) { return std::ranges::equal(shape_of(a), shape_of(b)); };
  const StorageIndex index_a(A), index_b(B);
  std::vector<bool> paired_a(A.tensors.size(), false), paired_b(B.tensors.size(), false);
  std::vector<Pair> paired;  // in A's order
  paired.reserve(std::min(A.tensors.size(), B.tensors.size()));
  std::vector<ValuePair> jobs;
  std::vector<size_t> job_of;  // index in `paired` of each job
  for (size_t ka = 0; ka < A.tensors.size(); ++ka) {
    const Tensor& ta = A.tensors[ka];
    const std::optional<size_t> kb = partner(in_a.names[ka]);
    if (!kb) continue;
    const Tensor* tb = &B.tensors[*kb];
    paired_a[ka] = paired_b[*kb] = true;
    ++r.paired;
    Pair& d = paired.emplace_back();
    d.a = ka;
    d.b = *kb;
    if (o.values && same_shape(ta, *tb) && ta.state == tb->state) {
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

  // Keys only one side has: a tied copy of a key both have (the other side saved the pair once), or
  // only in that side. Summary's same_tensor tells which entries are one tensor.
  auto unpaired = [&](const Checkpoint& ck, const std::vector<bool>& is_paired, char side, std::vector<std::string>& only) {
    if (std::all_of(is_paired.begin(), is_paired.end(), [](bool p) { return p; })) return;
    const Summary s = summarize(ck);
    std::unordered_map<size_t, size_t> paired_of_group;  // same_tensor -> the first paired entry of that tensor
    for (size_t k = 0; k < ck.tensors.size(); ++k)
      if (is_paired[k]) paired_of_group.emplace(s.same_tensor[k], k);
    for (size_t k = 0; k < ck.tensors.size(); ++k) {
      if (is_paired[k]) continue;
      const Tensor& t = ck.tensors[k];
      const bool lazy = t.state == TensorState::Uninitialized && !t.resolved;  // no view: never tied
      auto it = lazy ? paired_of_group.end() : paired_of_group.find(s.same_tensor[k]);
      if (it != paired_of_group.end()) r.tied.push_back({t.name, side, ck.tensors[it->second].name});
      else only.push_back(t.name);
    }
  };
  unpaired(A, paired_a, 'a', r.only_in_a);
  unpaired(B, paired_b, 'b', r.only_in_b);

  ValueCompareOptions vo;
  vo.atol = o.atol;
  vo.rtol = o.rtol;
  vo.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  vo.piece_bytes = o.piece_bytes;
  vo.window_bytes = o.window_bytes;
  vo.wide_simd = o.wide_simd;
  vo.promote = o.ignore_dtype;

  // The tensors outside the model (optimizer state): the same dtypes and sizes in the same order, and
  // with --values the same values (their pages are compared with the model's, in one pass).
  std::vector<Tensor> state_a, state_b;
  size_t state_jobs = 0;
  bool state_layout_equal = true;
  if (!o.ignore_metadata) {
    state_a = state_tensors(A);
    state_b = state_tensors(B);
    state_layout_equal = state_a.size() == state_b.size();
    for (size_t k = 0; state_layout_equal && k < state_a.size(); ++k)
      state_layout_equal = state_a[k].dtype == state_b[k].dtype && state_a[k].numel == state_b[k].numel;
    if (o.values && state_layout_equal)
      for (size_t k = 0; k < state_a.size(); ++k) {
        const View va = storage_view(A, state_a[k], index_a), vb = storage_view(B, state_b[k], index_b);
        if (!va.bytes || !vb.bytes || !numeric(state_a[k].dtype)) continue;
        jobs.push_back({&state_a[k], &state_b[k], va.bytes, vb.bytes, va.file, vb.file});
        ++state_jobs;
      }
  }
  vo.progress = o.progress;
  const std::vector<ValueDiff> values = compare_values(jobs, vo);
  for (size_t j = 0; j < job_of.size(); ++j) {
    Pair& d = paired[job_of[j]];
    d.max_abs = values[j].max_abs;
    d.max_rel = values[j].max_rel;
    d.values_equal = values[j].equal;
    d.within = values[j].within;
    r.max_abs = std::max(r.max_abs, d.max_abs);
  }
  auto dtype_name = [](const Tensor& t) { return t.dtype ? std::string_view(t.dtype->name) : std::string_view("?"); };
  // Ties: per entry, the first entry that is the same tensor (Summary::same_tensor), looked for only in a
  // file with fewer storages than entries (no entry shares one otherwise). A pair whose entry is tied to an
  // earlier one on one side must be tied to that one's pair on the other; a tied partner that only one side
  // has (a copy safetensors dropped) says nothing.
  auto firsts = [](const Checkpoint& ck) {
    return ck.storages.size() < ck.tensors.size() ? same_tensor_of(ck) : std::vector<size_t>();
  };
  const std::vector<size_t> first_a = firsts(A), first_b = firsts(B);
  auto first = [](const std::vector<size_t>& f, size_t k) { return f.empty() ? k : f[k]; };
  std::vector<size_t> a_of_b;  // B's entry -> A's, for the ties B has
  if (!first_b.empty()) {
    a_of_b.assign(B.tensors.size(), SIZE_MAX);
    for (const Pair& p : paired) a_of_b[p.b] = p.a;
  }
  for (const Pair& p : paired) {
    const Tensor& ta = A.tensors[p.a];
    const Tensor& tb = B.tensors[p.b];
    const bool dtype_changed = dtype_name(ta) != dtype_name(tb);
    const bool shape_changed = !same_shape(ta, tb);
    const bool state_changed = ta.state != tb.state;
    // A tie removed (A's entry is an earlier one's tensor, B's is not that one's pair's) or added (the other way).
    const size_t fa = first(first_a, p.a), fb = first(first_b, p.b);
    bool tie_changed = false;
    if (fa != p.a)
      if (const std::optional<size_t> other = partner(in_a.names[fa])) tie_changed |= first(first_b, *other) != fb;
    if (fb != p.b && a_of_b[fb] != SIZE_MAX) tie_changed |= first(first_a, a_of_b[fb]) != fa;
    const bool differs =
        shape_changed || state_changed || tie_changed || (dtype_changed && !o.ignore_dtype) || (p.compared && !p.within);
    if (dtype_changed && o.ignore_dtype) ++r.dtype_ignored;
    if (differs) ++r.differ;
    else if (p.compared && !p.values_equal) ++r.within;
    else ++r.same_pairs;
    if (!dtype_changed && !shape_changed && !state_changed && !tie_changed && p.values_equal) continue;
    TensorDiff& d = r.changed.emplace_back();
    d.a = ta.name;
    d.b = tb.name;
    d.dtype_a = dtype_name(ta);
    d.dtype_b = dtype_name(tb);
    d.shape_a.assign(ta.shape.begin(), ta.shape.end());
    d.shape_b.assign(tb.shape.begin(), tb.shape.end());
    d.compared = p.compared;
    d.comparable = p.comparable;
    d.max_abs = p.max_abs;
    d.max_rel = p.max_rel;
    d.values_equal = p.values_equal;
    d.within = p.within;
    d.state_changed = state_changed;
    if (fa != p.a) d.tied_a = A.tensors[fa].name;
    if (fb != p.b) d.tied_b = B.tensors[fb].name;
    d.tie_changed = tie_changed;
    d.differs = differs;
  }
  const bool keys_ok = r.keys_equal || r.prefix_op.empty();  // a detected rename is a difference
  r.equal = keys_ok && r.only_in_a.empty() && r.only_in_b.empty() && r.differ == 0 && r.within == 0;
  r.within_tolerance = keys_ok && r.only_in_a.empty() && r.only_in_b.empty() && r.differ == 0;

  if (!o.ignore_metadata) {
    r.metadata_compared = true;
    const J ma = metadata_doc(A), mb = metadata_doc(B);
    r.metadata_present = !ma.empty() || !mb.empty() || !state_a.empty() || !state_b.empty();
    for (auto it = ma.begin(); it != ma.end(); ++it) {
      auto jt = mb.find(it.key());
      compare_json(*it, jt == mb.end() ? J() : *jt, true, jt != mb.end(), section_of(it.key()), it.key(), r.metadata);
    }
    for (auto jt = mb.begin(); jt != mb.end(); ++jt)
      if (!ma.contains(jt.key())) compare_json(J(), *jt, false, true, section_of(jt.key()), jt.key(), r.metadata);
    if (!state_layout_equal) {
      r.metadata.push_back(MetaChange{"optimizer_state", "tensors outside the model", state_side(state_a), state_side(state_b),
                                      !state_a.empty(), !state_b.empty()});
    } else if (state_jobs > 0) {
      MetaChange m{"optimizer_state", "tensors outside the model", state_side(state_a), state_side(state_b)};
      m.within = true;
      for (size_t j = job_of.size(); j < jobs.size(); ++j) {
        if (values[j].equal) continue;
        ++m.values_changed;
        m.max_abs = std::max(m.max_abs, values[j].max_abs);
        m.within = m.within && values[j].within;
      }
      if (m.values_changed > 0) r.metadata.push_back(std::move(m));
    }
  }
  return r;
}

}  // namespace ckpt
