#include "core/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/hf_config.h"
#include "core/keys.h"
#include "core/lightning_details.h"
#include "core/mapped_file.h"
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
  std::vector<std::string> names_a, names_b;  // renamed, index-aligned with A.tensors / B.tensors
  const auto in_a = renamed_keys(A, "A", o.strip_prefix, o.add_prefix, names_a);
  const auto in_b = renamed_keys(B, "B", o.strip_prefix, "", names_b);
  size_t exact = 0;
  for (const auto& [name, k] : in_a) exact += in_b.count(name);
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
  auto partner = [&](const std::string& a_name) -> std::optional<size_t> {  // a_name renamed
    std::string b_name = a_name;
    if (r.prefix_op == "b_adds") b_name = r.prefix + a_name;
    if (r.prefix_op == "b_removes") {
      if (a_name.compare(0, r.prefix.size(), r.prefix) != 0) return std::nullopt;
      b_name = a_name.substr(r.prefix.size());
    }
    auto it = in_b.find(b_name);
    return it == in_b.end() ? std::nullopt : std::optional<size_t>(it->second);
  };

  const StorageIndex index_a(A), index_b(B);
  std::vector<bool> paired_a(A.tensors.size(), false), paired_b(B.tensors.size(), false);
  std::vector<TensorDiff> paired;  // in A's order
  std::vector<ValuePair> jobs;
  std::vector<size_t> job_of;  // index in `paired` of each job
  for (size_t ka = 0; ka < A.tensors.size(); ++ka) {
    const Tensor& ta = A.tensors[ka];
    const std::optional<size_t> kb = partner(names_a[ka]);
    if (!kb) continue;
    const Tensor* tb = &B.tensors[*kb];
    paired_a[ka] = paired_b[*kb] = true;
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
    TensorDiff& d = paired[job_of[j]];
    d.max_abs = values[j].max_abs;
    d.max_rel = values[j].max_rel;
    d.values_equal = values[j].equal;
    d.within = values[j].within;
    r.max_abs = std::max(r.max_abs, d.max_abs);
  }
  for (TensorDiff& d : paired) {
    const bool dtype_changed = d.dtype_a != d.dtype_b;
    d.differs = d.shape_a != d.shape_b || d.state_changed || (dtype_changed && !o.ignore_dtype) || (d.compared && !d.within);
    if (dtype_changed && o.ignore_dtype) ++r.dtype_ignored;
    if (d.differs) ++r.differ;
    else if (d.compared && !d.values_equal) ++r.within;
    else ++r.same_pairs;
    if (dtype_changed || d.shape_a != d.shape_b || d.state_changed || !d.values_equal) r.changed.push_back(std::move(d));
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
