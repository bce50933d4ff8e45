#include "core/summary.h"

#include "core/hf_types.h"
#include "core/layer_types.h"
#include "core/name_index.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <future>
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
    // (the same node of the same pickle: a sharded set's shards had heaps of their own, gone since)
    if (!by_storage(x)) return x.identity == y.identity && x.shard == y.shard;
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

// Entries by view, in a flat table of (entry, hash) pairs: no node per entry.
std::vector<size_t> same_tensor_ids(const Checkpoint& ck) {
  const SameView same{&ck.tensors};
  const size_t n = ck.tensors.size();
  std::vector<size_t> id_of(n);
  struct Slot {
    uint32_t entry = UINT32_MAX;
    uint32_t hash = 0;
  };
  const size_t size = std::bit_ceil(std::max<size_t>(16, n + n / 2 + 1));
  const int shift = 64 - std::countr_zero(size);
  std::vector<Slot> slots(size);
  for (size_t k = 0; k < n; ++k) {
    if (ck.own_storages && SameView::by_storage(ck.tensors[k])) {  // the only entry viewing its storage
      id_of[k] = k;
      continue;
    }
    const uint64_t h = static_cast<uint64_t>(same(k)) * 0x9E3779B97F4A7C15ull;  // spread: pointer hashes are multiples of 8
    const uint32_t h32 = static_cast<uint32_t>(h);
    for (size_t at = h >> shift;; at = (at + 1) & (size - 1)) {
      Slot& sl = slots[at];
      if (sl.entry == UINT32_MAX) {
        sl = {static_cast<uint32_t>(k), h32};
        id_of[k] = k;
        break;
      }
      if (sl.hash == h32 && same(sl.entry, k)) {
        id_of[k] = sl.entry;
        break;
      }
    }
  }
  return id_of;
}

// A strict order of name segments in which ModuleList indices increase as numbers: digits before other
// segments, digits by length, then by bytes.
bool segment_less(std::string_view a, std::string_view b) {
  auto digits = [](std::string_view x) {
    return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const bool da = digits(a), db = digits(b);
  if (da != db) return da;
  if (da && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

// The module rows being made: each row's name and parent, found by name through views of names that
// outlive the summary (the module tree's, or a prefix of a tensor's). Row indices are 32-bit (a reader
// holds at most 2^32 entries).
struct RowTree {
  struct NameOf {  // a row's name, for row_of
    const std::vector<std::string_view>* names;
    std::string_view operator()(uint32_t k) const { return (*names)[k]; }
  };
  const bool derived;
  // A derived tree's rows are fewer than 1.5 per tensor in every layout seen (an MoE's experts: 1.35):
  // room for that at once, no regrowth.
  const size_t expect;
  std::vector<std::string_view> names{std::string_view()};
  std::vector<uint32_t> parent_of{0};
  // name -> row: every row of a known tree; a derived tree's in parents out of order (DerivedNames)
  IndexBy<NameOf> row_of;
  std::vector<uint32_t> leaf;  // derived: each tensor's deepest row
  std::vector<uint32_t> pos;  // each row's place in Summary::modules

  explicit RowTree(const Checkpoint& ck)
      : derived(ck.modules.empty()),
        expect(derived ? ck.tensors.size() + ck.tensors.size() / 2 + 1 : ck.modules.size() + 1),
        row_of(derived ? 0 : expect, NameOf{&names}) {
    names.reserve(expect);
    parent_of.reserve(expect);
    if (!derived) row_of.try_emplace(std::string_view(), 0);
    for (const Module& m : ck.modules) {
      auto [row, fresh] = row_of.try_emplace(m.name, static_cast<uint32_t>(names.size()));
      if (fresh) {
        names.push_back(m.name);
        parent_of.push_back(0);
      }
    }
  }
  RowTree(const RowTree&) = delete;  // row_of views `names`
  RowTree& operator=(const RowTree&) = delete;
};

// A derived tree's first pass: names the rows and each tensor's deepest one (RowTree::leaf). A new prefix
// needs no search while its parent's rows come in increasing order, by bytes (sorted names, as safetensors
// headers hold them) or with numbers as numbers (torch's module order: ModuleList indices): one after the
// last in either order is new. A parent whose rows come in neither order has them put in row_of, and each
// new one is looked up there: row_of holds only those. What only the naming needs goes with it.
class DerivedNames {
 public:
  explicit DerivedNames(RowTree& tree) : tree_(tree) {
    last_child_.reserve(tree.expect);
    prev_sibling_.reserve(tree.expect);
    order_.reserve(tree.expect);
    last_child_.push_back(kNoRow);
    prev_sibling_.push_back(kNoRow);
    order_.push_back(kBytes | kNumbers);
  }

  void name_all(const std::vector<Tensor>& tensors) {
    std::vector<uint32_t>& leaf = tree_.leaf;
    leaf.resize(tensors.size());
    std::string_view last_parent, last_name;
    uint32_t last_leaf = 0;
    // The rows of the previous name's prefixes: (where the prefix ends, its row). A name that shares the
    // first segments with the previous one (model.layers.3.mlp.experts.7.w1 after ...experts.7.w3) looks up
    // only the prefixes after them.
    std::vector<std::pair<size_t, uint32_t>> chain;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const std::string_view name = tensors[k].name;
      const auto last_dot = name.rfind('.');
      const std::string_view parent = last_dot == std::string_view::npos ? std::string_view() : name.substr(0, last_dot);
      if (k == 0 || parent != last_parent) {  // consecutive entries of one module share its row
        const size_t common = static_cast<size_t>(
            std::mismatch(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(std::min(name.size(), last_name.size())),
                          last_name.begin())
                .first -
            name.begin());
        while (!chain.empty() && chain.back().first >= common) chain.pop_back();  // a dot before `common` is in both
        last_leaf = chain.empty() ? 0 : chain.back().second;
        for (size_t seg = chain.empty() ? 0 : chain.back().first + 1, dot = name.find('.', seg); dot != std::string_view::npos;
             seg = dot + 1, dot = name.find('.', seg)) {
          last_leaf = child_row(name.substr(0, dot), seg, last_leaf);
          chain.emplace_back(dot, last_leaf);
        }
        last_parent = parent;
        last_name = name;
      }
      leaf[k] = last_leaf;
    }
  }

 private:
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr uint8_t kBytes = 1, kNumbers = 2, kIndexed = 4;  // by row: how its rows came so far

  // `name`'s last segment starts at `seg`; `parent` is the row of what comes before it.
  uint32_t child_row(std::string_view name, size_t seg, uint32_t parent) {
    std::vector<std::string_view>& names = tree_.names;
    const uint32_t last = last_child_[parent];
    const auto row = static_cast<uint32_t>(names.size());
    if (last != kNoRow && !(order_[parent] & kIndexed)) {
      const std::string_view a = names[last].substr(seg), b = name.substr(seg);
      const uint8_t still = static_cast<uint8_t>(((order_[parent] & kBytes) && a < b ? kBytes : 0) |
                                                 ((order_[parent] & kNumbers) && segment_less(a, b) ? kNumbers : 0));
      if (still) {
        order_[parent] = still;
      } else {  // out of both orders: this parent's rows go into row_of
        order_[parent] = kIndexed;
        for (uint32_t c = last; c != kNoRow; c = prev_sibling_[c]) tree_.row_of.try_emplace(names[c], c);
      }
    }
    if (order_[parent] & kIndexed) {
      if (const auto [found, fresh] = tree_.row_of.try_emplace(name, row); !fresh) return found;
    }
    names.push_back(name);
    tree_.parent_of.push_back(parent);
    prev_sibling_.push_back(last);
    last_child_[parent] = row;
    last_child_.push_back(kNoRow);
    order_.push_back(kBytes | kNumbers);
    return row;
  }

  RowTree& tree_;
  std::vector<uint32_t> last_child_, prev_sibling_;  // by row
  std::vector<uint8_t> order_;
};

// Where each row goes: the tree's order as given; a derived tree in pre-order by name segments, keeping
// first-seen order among siblings (children listed by a counting sort on the parent, then a walk).
void place_rows(RowTree& tree) {
  const std::vector<uint32_t>& parent_of = tree.parent_of;
  const size_t n = tree.names.size();
  std::vector<uint32_t>& pos = tree.pos;
  pos.resize(n);
  if (!tree.derived) {
    for (size_t r = 0; r < n; ++r) pos[r] = static_cast<uint32_t>(r);
    return;
  }
  std::vector<uint32_t> first_child(n + 1, 0), child(n - 1);
  for (size_t r = 1; r < n; ++r) ++first_child[parent_of[r] + 1];
  for (size_t r = 0; r < n; ++r) first_child[r + 1] += first_child[r];
  std::vector<uint32_t> fill(first_child.begin(), first_child.end() - 1);
  for (size_t r = 1; r < n; ++r) child[fill[parent_of[r]]++] = static_cast<uint32_t>(r);
  std::vector<size_t> stack{0};
  for (size_t at = 0; !stack.empty(); ++at) {
    const size_t r = stack.back();
    stack.pop_back();
    pos[r] = static_cast<uint32_t>(at);
    for (size_t c = first_child[r + 1]; c-- > first_child[r];) stack.push_back(child[c]);
  }
}

// The rows in their places, each with its name, depth and the file's module, not yet counted.
void make_rows(const Checkpoint& ck, const RowTree& tree, Summary& s) {
  const std::vector<std::string_view>& names = tree.names;
  const std::vector<uint32_t>& pos = tree.pos;
  const size_t n = names.size();
  s.modules.resize(n);
  for (size_t r = 0; r < n; ++r) {
    ModuleRow& row = s.modules[pos[r]];
    row.name = names[r];
    // A derived row's parent is made before it (its depth is known); a known tree's are counted.
    row.depth = names[r].empty() ? 0
                : tree.derived ? s.modules[pos[tree.parent_of[r]]].depth + 1
                               : static_cast<int>(std::count(names[r].begin(), names[r].end(), '.')) + 1;
  }
  for (const Module& m : ck.modules) {
    s.modules[pos[*tree.row_of.find(m.name)]].module = &m;
  }
}

// The second pass: every tensor added to its row and that row's ancestors.
void count_rows(const Checkpoint& ck, const std::vector<size_t>& id_of, const std::vector<bool>& repeated, const RowTree& tree,
                Summary& s) {
  const std::vector<uint32_t>& pos = tree.pos;
  std::unordered_set<uint64_t> counted;  // (row, unique id) pairs already added, for repeated tensors only
  std::vector<size_t> rows;
  std::string_view last_parent;
  for (size_t k = 0; k < ck.tensors.size(); ++k) {
    const Tensor& t = ck.tensors[k];
    const std::string_view name = t.name;
    const auto last_dot = name.rfind('.');
    const std::string_view parent = last_dot == std::string_view::npos ? std::string_view() : name.substr(0, last_dot);
    if (k > 0 && parent == last_parent) {
      // consecutive entries of one module share its chain of rows
    } else if (tree.derived) {
      rows.clear();
      for (size_t r = tree.leaf[k];; r = tree.parent_of[r]) {
        rows.push_back(pos[r]);
        if (r == 0) break;
      }
    } else {
      rows.assign(1, 0);
      for (size_t dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.', dot + 1)) {
        if (const uint32_t* row = tree.row_of.find(name.substr(0, dot))) rows.push_back(pos[*row]);
      }
    }
    last_parent = parent;
    for (size_t r : rows) {
      ModuleRow& row = s.modules[r];
      ++row.tensors;
      if (t.dtype) row.dtypes.add(t.dtype);
      if (t.state == TensorState::Uninitialized && !t.resolved) {
        ++row.uninitialized;
        continue;
      }
      // Only tensors saved under several names can be counted twice in one row.
      if (repeated[id_of[k]] && !counted.insert((static_cast<uint64_t>(r) << 32) ^ id_of[k]).second) continue;
      const uint64_t n_el = static_cast<uint64_t>(t.numel);
      row.bytes += t.bytes;
      if (t.kind == TensorKind::Buffer) row.buffers += n_el;
      else if (t.kind == TensorKind::Parameter) {
        row.parameters += n_el;
        if (trainable(t)) row.trainable += n_el;
      }
    }
  }
}

// A module shared at two paths shows the same counts at both; totals count it once (add_totals).
void share_counts(const RowTree& tree, Summary& s) {
  for (ModuleRow& r : s.modules) {
    if (r.shared_with().empty()) continue;
    const uint32_t* row = tree.row_of.find(r.shared_with());
    if (!row) continue;
    const ModuleRow& first = s.modules[tree.pos[*row]];
    r.parameters = first.parameters;
    r.trainable = first.trainable;
    r.buffers = first.buffers;
    r.bytes = first.bytes;
    r.dtypes = first.dtypes;
  }
}

// No module tree in the file: what each module's tensors imply (shown as inferred).
void infer_row_types(const Checkpoint& ck, const RowTree& tree, Summary& s, std::future<LayerTypes>& types) {
  const std::vector<uint32_t>& leaf = tree.leaf;
  const std::vector<uint32_t>& pos = tree.pos;
  const LayerTypes inferred = types.valid() ? types.get() : infer_layer_types(ck.tensors);
  for (size_t k = 0; k < inferred.size(); ++k) {  // each module once; every one is a row
    // A module's own tensor's deepest row is the module's: no lookup by name.
    const uint32_t t = inferred.tensor(k);
    const uint32_t* found = t < leaf.size() ? &leaf[t] : tree.row_of.find(inferred.module(k));
    if (found && s.modules[pos[*found]].type().empty()) s.modules[pos[*found]].inferred_type = inferred.type(k);
  }
  // A Hugging Face model's config.json names the classes: transformers' own, where its layout says.
  if (ck.hf)
    if (const auto hf = HfModuleTypes::of(*ck.hf, ck.tensors))
      for (ModuleRow& r : s.modules)
        if (const std::string_view t = hf->type(r.name); !t.empty()) r.inferred_type = t;
}

// The module rows: the known tree, or one derived from the dotted keys, with each row's counts. A derived
// tree is built in two passes: the first names the rows and each tensor's deepest one, the second adds
// every tensor to its row and that row's ancestors, into rows already in pre-order (each created once, in
// place: a million-entry file has about as many rows).
// `types`: infer_layer_types(ck.tensors) when already under way (derived trees only).
void add_module_rows(const Checkpoint& ck, const std::vector<size_t>& id_of, const std::vector<bool>& repeated, Summary& s,
                     std::future<LayerTypes>& types) {
  RowTree tree(ck);
  if (tree.derived) DerivedNames(tree).name_all(ck.tensors);
  place_rows(tree);
  make_rows(ck, tree, s);
  count_rows(ck, id_of, repeated, tree, s);
  share_counts(tree, s);
  if (tree.derived) infer_row_types(ck, tree, s, types);
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

  // The layer types a derived tree's rows show, on a second thread meanwhile: they read only the names.
  std::future<LayerTypes> types;
  if (ck.modules.empty() && ck.tensors.size() >= 4096)
    types = std::async(std::launch::async, [&ck] { return infer_layer_types(ck.tensors); });

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

  add_module_rows(ck, id_of, repeated, s, types);

  // Storages shared by several entries: tied weights (same view) and distinct views. Entries sorted by
  // storage key (then entry order): the groups come out in key order, as a sorted map would give them.
  // Only keys with two entries or more are sorted (a state dict has mostly one entry per storage).
  std::vector<size_t> on_storage;
  if (!ck.own_storages) {
    BasicKeyIndex first_on(IndexBy(0, [&ck](uint32_t k) -> std::string_view { return ck.tensors[k].storage; }));  // key -> its first entry
    std::vector<uint8_t> many(ck.tensors.size(), 0);  // by the key's first entry: 1 = it has more than one
    std::vector<uint32_t> first_of(ck.tensors.size(), UINT32_MAX);  // each entry's key's first entry
    for (size_t k = 0; k < ck.tensors.size(); ++k) {
      const std::string& key = ck.tensors[k].storage;
      if (key.empty()) continue;
      auto [first, fresh] = first_on.try_emplace(key, static_cast<uint32_t>(k));
      first_of[k] = first;
      if (!fresh) many[first] = 1;
    }
    for (size_t k = 0; k < ck.tensors.size(); ++k)
      if (first_of[k] != UINT32_MAX && many[first_of[k]]) on_storage.push_back(k);
  }
  std::stable_sort(on_storage.begin(), on_storage.end(),
                   [&](size_t a, size_t b) { return ck.tensors[a].storage < ck.tensors[b].storage; });
  std::vector<size_t> idx;
  for (size_t i = 0; i < on_storage.size();) {
    size_t j = i + 1;
    while (j < on_storage.size() && ck.tensors[on_storage[j]].storage == ck.tensors[on_storage[i]].storage) ++j;
    if (j - i >= 2) {
      idx.assign(on_storage.begin() + static_cast<std::ptrdiff_t>(i), on_storage.begin() + static_cast<std::ptrdiff_t>(j));
      std::unordered_map<size_t, std::vector<size_t>> groups;
      for (size_t k : idx) groups[id_of[k]].push_back(k);
      for (size_t k : idx) {
        const auto& g = groups[id_of[k]];
        if (g.size() > 1 && ck.tensors[g.front()].name == ck.tensors[k].name) s.tied_groups.push_back(g);
      }
      if (groups.size() > 1) s.view_groups.push_back(idx);
    }
    i = j;
  }
  // transformers' num_parameters(exclude_embeddings=True): every Embedding module's weight left out, once.
  T.parameters_without_embeddings = T.parameters;
  NameIndex tensor_of;  // built at the first Embedding row
  std::unordered_set<size_t> left_out;
  for (const ModuleRow& r : s.modules) {
    const std::string_view type = r.type().empty() ? r.inferred_type : r.type();
    if (!layer_type_matches("Embedding", type)) continue;  // nn.Embedding or a model's own subclass name
    if (tensor_of.size() == 0) {
      tensor_of.reserve(ck.tensors.size());
      for (size_t k = 0; k < ck.tensors.size(); ++k) tensor_of.try_emplace(ck.tensors[k].name, static_cast<uint32_t>(k));
    }
    const uint32_t* at = tensor_of.find(r.name.empty() ? "weight" : std::string(r.name) + ".weight");
    if (!at) continue;
    const Tensor& w = ck.tensors[*at];
    if (w.kind != TensorKind::Parameter || (w.state == TensorState::Uninitialized && !w.resolved)) continue;
    if (left_out.insert(id_of[*at]).second) T.parameters_without_embeddings -= static_cast<uint64_t>(w.numel);
  }
  s.same_tensor = std::move(id_of);
  return s;
}

std::vector<size_t> same_tensor_of(const Checkpoint& ck) { return same_tensor_ids(ck); }

}  // namespace ckpt
