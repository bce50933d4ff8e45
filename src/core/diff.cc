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

// A rename asked for that renames nothing is most likely a typo: said on stderr.
void rename_warnings(const Checkpoint& A, const Checkpoint& B, const DiffOptions& o, size_t exact, DiffResult& r) {
  if (!o.strip_prefix.empty()) {
    auto starts = [&](const Tensor& t) { return t.name.compare(0, o.strip_prefix.size(), o.strip_prefix) == 0; };
    if (std::none_of(A.tensors.begin(), A.tensors.end(), starts) && std::none_of(B.tensors.begin(), B.tensors.end(), starts))
      r.warnings.push_back(fmt::format("--strip-prefix '{}' matches no key in A or B", visible(o.strip_prefix)));
  }
  if (!o.add_prefix.empty() && exact == 0 && !A.tensors.empty())
    r.warnings.push_back(fmt::format("--add-prefix '{}' gives no key of A a partner in B", visible(o.add_prefix)));
}

// A prefix that explains renames: B = P + A ("b_adds") or A = P + B ("b_removes"). `exact`: the keys that pair by name.
void detect_prefix(const RenamedKeys& in_a, const RenamedKeys& in_b, size_t exact, const DiffOptions& o, DiffResult& r) {
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

// The entry of B that A's (renamed) key pairs with, through the detected prefix rename if any.
struct Partner {
  const RenamedKeys& in_b;
  const DiffResult& r;
  std::string b_name;  // what a "b_adds" name is built in, reused from key to key
  std::optional<size_t> operator()(std::string_view a_name) {  // a_name renamed
    std::string_view name = a_name;
    if (r.prefix_op == "b_adds") name = b_name.assign(r.prefix).append(a_name);
    if (r.prefix_op == "b_removes") {
      if (a_name.substr(0, r.prefix.size()) != r.prefix) return std::nullopt;
      name = a_name.substr(r.prefix.size());
    }
    const uint32_t* k = in_b.find(name);
    return k ? std::optional<size_t>(*k) : std::nullopt;
  }
};

// Paired keys: the pair and its values' comparison, the rest read from the records at the end; only the
// pairs that changed become TensorDiffs.
struct Pair {
  size_t a = 0, b = 0;
  bool compared = false, comparable = true, values_equal = true, within = true;
  double max_abs = 0.0, max_rel = 0.0;
};

// What pairing found: the pairs (in A's order), the entries of each side that have a partner, and the
// value comparisons to run, the pairs' first (job_of: the pair of each), then the state tensors'.
struct Pairing {
  std::vector<bool> paired_a, paired_b;
  std::vector<Pair> pairs;
  std::vector<ValuePair> jobs;
  std::vector<size_t> job_of;  // index in `pairs` of each job
  Pairing(const Checkpoint& A, const Checkpoint& B) : paired_a(A.tensors.size(), false), paired_b(B.tensors.size(), false) {
    pairs.reserve(std::min(A.tensors.size(), B.tensors.size()));
  }
};

bool same_shape(const Tensor& a, const Tensor& b) {
  auto shape_of = [](const Tensor& t) { return std::span<const int64_t>(t.shape.begin(), t.shape.end()); };
  return std::ranges::equal(shape_of(a), shape_of(b));
}

std::string_view dtype_name(const Tensor& t) { return t.dtype ? std::string_view(t.dtype->name) : std::string_view("?"); }

// Each key of A with its partner in B, and with --values the pairs whose bytes are compared.
void pair_keys(const Checkpoint& A, const Checkpoint& B, const RenamedKeys& in_a, Partner& partner, const DiffOptions& o,
               const StorageIndex& index_a, const StorageIndex& index_b, Pairing& p, DiffResult& r) {
  for (size_t ka = 0; ka < A.tensors.size(); ++ka) {
    const Tensor& ta = A.tensors[ka];
    const std::optional<size_t> kb = partner(in_a.names[ka]);
    if (!kb) continue;
    const Tensor* tb = &B.tensors[*kb];
    p.paired_a[ka] = p.paired_b[*kb] = true;
    ++r.paired;
    Pair& d = p.pairs.emplace_back();
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
        p.jobs.push_back({&ta, tb, va.bytes, vb.bytes, va.file, vb.file});
        p.job_of.push_back(p.pairs.size() - 1);
      }
    }
  }
}

// Keys only one side has: a tied copy of a key both have (the other side saved the pair once), or
// only in that side. Summary's same_tensor tells which entries are one tensor.
void unpaired(const Checkpoint& ck, const std::vector<bool>& is_paired, char side, std::vector<std::string>& only,
              std::vector<TiedDrop>& tied) {
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
    if (it != paired_of_group.end()) tied.push_back({t.name, side, ck.tensors[it->second].name});
    else only.push_back(t.name);
  }
}

ValueCompareOptions value_options(const DiffOptions& o) {
  ValueCompareOptions vo;
  vo.atol = o.atol;
  vo.rtol = o.rtol;
  vo.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  vo.piece_bytes = o.piece_bytes;
  vo.window_bytes = o.window_bytes;
  vo.wide_simd = o.wide_simd;
  vo.promote = o.ignore_dtype;
  vo.progress = o.progress;
  return vo;
}

// The tensors outside the model (optimizer state): the same dtypes and sizes in the same order, and
// with --values the same values (their pages are compared with the model's, in one pass).
struct StateTensors {
  std::vector<Tensor> a, b;
  size_t jobs = 0;
  bool layout_equal = true;
};

void add_state_jobs(const Checkpoint& A, const Checkpoint& B, const DiffOptions& o, const StorageIndex& index_a,
                    const StorageIndex& index_b, StateTensors& st, std::vector<ValuePair>& jobs) {
  st.a = state_tensors(A);
  st.b = state_tensors(B);
  st.layout_equal = st.a.size() == st.b.size();
  for (size_t k = 0; st.layout_equal && k < st.a.size(); ++k)
    st.layout_equal = st.a[k].dtype == st.b[k].dtype && st.a[k].numel == st.b[k].numel;
  if (o.values && st.layout_equal)
    for (size_t k = 0; k < st.a.size(); ++k) {
      const View va = storage_view(A, st.a[k], index_a), vb = storage_view(B, st.b[k], index_b);
      if (!va.bytes || !vb.bytes || !numeric(st.a[k].dtype)) continue;
      jobs.push_back({&st.a[k], &st.b[k], va.bytes, vb.bytes, va.file, vb.file});
      ++st.jobs;
    }
}

// Each compared pair's result, from its job.
void take_values(const std::vector<ValueDiff>& values, Pairing& p, DiffResult& r) {
  for (size_t j = 0; j < p.job_of.size(); ++j) {
    Pair& d = p.pairs[p.job_of[j]];
    d.max_abs = values[j].max_abs;
    d.max_rel = values[j].max_rel;
    d.values_equal = values[j].equal;
    d.within = values[j].within;
    r.max_abs = std::max(r.max_abs, d.max_abs);
  }
}

// Ties: per entry, the first entry that is the same tensor (Summary::same_tensor), looked for only in a
// file with fewer storages than entries (no entry shares one otherwise). A pair whose entry is tied to an
// earlier one on one side must be tied to that one's pair on the other; a tied partner that only one side
// has (a copy safetensors dropped) says nothing.
struct Ties {
  std::vector<size_t> first_a, first_b;
  std::vector<size_t> a_of_b;  // B's entry -> A's, for the ties B has
  Ties(const Checkpoint& A, const Checkpoint& B, const std::vector<Pair>& pairs) : first_a(firsts(A)), first_b(firsts(B)) {
    if (!first_b.empty()) {
      a_of_b.assign(B.tensors.size(), SIZE_MAX);
      for (const Pair& p : pairs) a_of_b[p.b] = p.a;
    }
  }
  static std::vector<size_t> firsts(const Checkpoint& ck) {
    return ck.storages.size() < ck.tensors.size() ? same_tensor_of(ck) : std::vector<size_t>();
  }
};

// Each pair's verdict, counted, and a TensorDiff for each pair that changed.
void compare_pairs(const Checkpoint& A, const Checkpoint& B, const RenamedKeys& in_a, Partner& partner, const DiffOptions& o,
                   const std::vector<Pair>& pairs, DiffResult& r) {
  const Ties ties(A, B, pairs);
  auto first = [](const std::vector<size_t>& f, size_t k) { return f.empty() ? k : f[k]; };
  for (const Pair& p : pairs) {
    const Tensor& ta = A.tensors[p.a];
    const Tensor& tb = B.tensors[p.b];
    const bool dtype_changed = dtype_name(ta) != dtype_name(tb);
    const bool shape_changed = !same_shape(ta, tb);
    const bool state_changed = ta.state != tb.state;
    // A tie removed (A's entry is an earlier one's tensor, B's is not that one's pair's) or added (the other way).
    const size_t fa = first(ties.first_a, p.a), fb = first(ties.first_b, p.b);
    bool tie_changed = false;
    if (fa != p.a)
      if (const std::optional<size_t> other = partner(in_a.names[fa])) tie_changed |= first(ties.first_b, *other) != fb;
    if (fb != p.b && ties.a_of_b[fb] != SIZE_MAX) tie_changed |= first(ties.first_a, ties.a_of_b[fb]) != fa;
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
}

// The metadata, each difference in A's order, then the state tensors': their layout, or with values
// compared (the jobs after the pairs') how many changed.
void compare_metadata(const Checkpoint& A, const Checkpoint& B, const StateTensors& st, const Pairing& p,
                      const std::vector<ValueDiff>& values, DiffResult& r) {
  r.metadata_compared = true;
  const J ma = metadata_doc(A), mb = metadata_doc(B);
  r.metadata_present = !ma.empty() || !mb.empty() || !st.a.empty() || !st.b.empty();
  for (auto it = ma.begin(); it != ma.end(); ++it) {
    auto jt = mb.find(it.key());
    compare_json(*it, jt == mb.end() ? J() : *jt, true, jt != mb.end(), section_of(it.key()), it.key(), r.metadata);
  }
  for (auto jt = mb.begin(); jt != mb.end(); ++jt)
    if (!ma.contains(jt.key())) compare_json(J(), *jt, false, true, section_of(jt.key()), jt.key(), r.metadata);
  if (!st.layout_equal) {
    r.metadata.push_back(MetaChange{"optimizer_state", "tensors outside the model", state_side(st.a), state_side(st.b),
                                    !st.a.empty(), !st.b.empty()});
  } else if (st.jobs > 0) {
    MetaChange m{"optimizer_state", "tensors outside the model", state_side(st.a), state_side(st.b)};
    m.within = true;
    for (size_t j = p.job_of.size(); j < p.jobs.size(); ++j) {
      if (values[j].equal) continue;
      ++m.values_changed;
      m.max_abs = std::max(m.max_abs, values[j].max_abs);
      m.within = m.within && values[j].within;
    }
    if (m.values_changed > 0) r.metadata.push_back(std::move(m));
  }
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
  rename_warnings(A, B, o, exact, r);
  if (!r.keys_equal) detect_prefix(in_a, in_b, exact, o, r);

  Partner partner{in_b, r, {}};
  const StorageIndex index_a(A), index_b(B);
  Pairing p(A, B);
  pair_keys(A, B, in_a, partner, o, index_a, index_b, p, r);
  unpaired(A, p.paired_a, 'a', r.only_in_a, r.tied);
  unpaired(B, p.paired_b, 'b', r.only_in_b, r.tied);

  const ValueCompareOptions vo = value_options(o);
  StateTensors st;
  if (!o.ignore_metadata) add_state_jobs(A, B, o, index_a, index_b, st, p.jobs);
  const std::vector<ValueDiff> values = compare_values(p.jobs, vo);
  take_values(values, p, r);
  compare_pairs(A, B, in_a, partner, o, p.pairs, r);
  const bool keys_ok = r.keys_equal || r.prefix_op.empty();  // a detected rename is a difference
  r.equal = keys_ok && r.only_in_a.empty() && r.only_in_b.empty() && r.differ == 0 && r.within == 0;
  r.within_tolerance = keys_ok && r.only_in_a.empty() && r.only_in_b.empty() && r.differ == 0;

  if (!o.ignore_metadata) compare_metadata(A, B, st, p, values, r);
  return r;
}

}  // namespace ckpt
