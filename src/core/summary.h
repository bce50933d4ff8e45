// Counting, as users expect it (DESIGN.md section 4): real dtype sizes, tied entries once, buffers by
// name when the file does not say, lazy and meta entries named. Builds the module rows that renderers
// turn into Lightning's ModelSummary look, and lists the entries findings.cc reports on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <functional>
#include <vector>

#include "core/checkpoint.h"
#include "core/memory.h"

namespace ckpt {

struct Totals {
  uint64_t tensors = 0;  // tensor entries, any state
  uint64_t elements = 0;  // sum of numel, materialized + meta
  uint64_t unique_elements = 0;  // each distinct (storage, offset, shape, stride) once
  uint64_t storage_bytes = 0;  // distinct storages the model's entries use
  uint64_t file_storage_bytes = 0;  // every storage in the file (optimizer state included)
  uint64_t bytes = 0;  // numel * itemsize over the unique tensors
  uint64_t parameters = 0;  // unique parameter elements
  uint64_t trainable = 0;
  uint64_t non_trainable = 0;
  uint64_t buffers = 0;  // unique buffer elements
  uint64_t attributes = 0;  // unique elements of TensorKind::Attribute tensors (neither of the above)
  uint64_t parameter_bytes = 0;  // unique parameter bytes (Lightning's "model params size")
  uint64_t uninitialized = 0;  // entries
  uint64_t meta = 0;  // entries
  // Parameters outside Embedding modules (known or inferred): transformers' num_parameters(exclude_embeddings=True),
  // which leaves out the weight of every nn.Embedding (a tied lm_head with it, being the same parameter).
  uint64_t parameters_without_embeddings = 0;
  struct ByDtype {
    std::string dtype;
    uint64_t tensors = 0, parameters = 0, buffers = 0, attributes = 0, bytes = 0;  // unique tensors of that dtype
  };
  std::vector<ByDtype> by_dtype;  // in first-seen order
};

// The distinct dtypes of a row's tensors, in first-seen order: two inline, any more on the heap (a
// million-row summary makes no allocation for them).
class DtypeNames {
 public:
  DtypeNames() = default;
  DtypeNames(const DtypeNames& o) : more_(o.more_ ? std::make_unique<std::vector<const DType*>>(*o.more_) : nullptr) {
    inline_[0] = o.inline_[0];
    inline_[1] = o.inline_[1];
  }
  DtypeNames& operator=(const DtypeNames& o) {
    if (this != &o) *this = DtypeNames(o);
    return *this;
  }
  DtypeNames(DtypeNames&&) noexcept = default;
  DtypeNames& operator=(DtypeNames&&) noexcept = default;
  void add(const DType* d) {
    if (inline_[0] == d) return;  // the common case: a row of one dtype, the same table entry
    for (size_t k = 0; k < size(); ++k)
      if ((*this)[k] == d->name) return;
    if (!inline_[0]) inline_[0] = d;
    else if (!inline_[1]) inline_[1] = d;
    else {
      if (!more_) more_ = std::make_unique<std::vector<const DType*>>();
      more_->push_back(d);
    }
  }
  size_t size() const { return (inline_[0] != nullptr) + (inline_[1] != nullptr) + (more_ ? more_->size() : 0); }
  bool empty() const { return inline_[0] == nullptr; }
  std::string_view operator[](size_t k) const { return k < 2 ? inline_[k]->name : (*more_)[k - 2]->name; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (size_t k = 0; k < size(); ++k) out.emplace_back((*this)[k]);
    return out;
  }

 private:
  const DType* inline_[2] = {};
  std::unique_ptr<std::vector<const DType*>> more_;
};

// One row of the module table (112 bytes: a million-entry file has about as many rows). Its strings view
// the checkpoint's (a module's or a prefix of a tensor's name, a module's types), which outlives the
// summary, or names interned for the process (inferred types).
struct ModuleRow {
  std::string_view name;  // "" for the root
  std::string_view inferred_type;  // state dicts: the class its tensors imply (layer_types.h), "" when unknown
  const Module* module = nullptr;  // the file's module at this path, when it has a module tree
  uint64_t parameters = 0;
  uint64_t trainable = 0;
  uint64_t buffers = 0;
  uint64_t bytes = 0;
  uint32_t tensors = 0;  // a reader holds at most 2^32 entries
  uint32_t uninitialized = 0;
  DtypeNames dtypes;
  int depth = 0;  // 0 for the root, 1 for its children, ...

  std::string_view type() const { return module ? std::string_view(module->type) : std::string_view(); }  // short class name, "" when unknown
  std::string_view qualified_type() const { return module ? std::string_view(module->qualified_type) : std::string_view(); }
  std::optional<bool> training() const { return module ? module->training : std::nullopt; }
  // A second path to the module named here (counted once), "" for none.
  std::string_view shared_with() const { return module ? std::string_view(module->shared_with) : std::string_view(); }
  // TorchScript: non-tensor attributes, nullptr for none.
  const nlohmann::ordered_json* attributes() const { return module && !module->attributes.empty() ? &module->attributes : nullptr; }
};

// One example-input forward (`summary --example-input`, run by ckpt-torch): sizes as Lightning's
// parse_batch_shape writes them (a tensor's shape, nested lists for tuples / lists, objects for dicts,
// "?" for anything else and for modules that did not run).
struct ModuleForward {
  nlohmann::ordered_json in_sizes = "?";
  nlohmann::ordered_json out_sizes = "?";
  uint64_t flops = 0;  // matmul family, convolutions, attention: this module and everything it called
  uint64_t calls = 0;
};

struct ForwardInput {
  std::string name;  // keyword ("" for positional)
  std::vector<int64_t> shape;
  std::string dtype;
  std::optional<std::pair<int64_t, int64_t>> range;  // integer inputs: [low, high)
};

struct ForwardReport {
  std::vector<ForwardInput> inputs;
  std::string input_file;  // --example-input-file, "" for SPECs
  std::string device;
  std::string libtorch;
  nlohmann::ordered_json out_sizes = "?";
  uint64_t flops = 0;
  double seconds = 0.0;
  std::map<std::string, ModuleForward, std::less<>> modules;  // by path as the summary names it
  bool per_module = true;  // false when the archive has no submodule calls left (frozen)
  std::string error_module;  // set when the forward failed: where ("" = the root's own code)
  std::string error;  // LibTorch's message
  std::vector<std::string> completed;  // on failure: modules whose forward returned, in order
};

// `--model ARCH` for summary: what ARCH told about FILE.
struct ModelReport {
  std::string path;
  std::string strip_prefix, add_prefix;  // applied to FILE's keys to get ARCH's
  bool prefix_guessed = false;  // found by vote, not given
  std::vector<std::pair<std::string, std::vector<int64_t>>> resolved;  // lazy entries now sized
  size_t matched = 0, missing = 0, unexpected = 0, mismatched = 0;
};

struct Summary {
  const Checkpoint* ck = nullptr;
  Totals totals;
  std::vector<ModuleRow> modules;  // pre-order, root first
  // What the counting findings name, as indices into ck->tensors: lazy entries not sized by --model
  // and entries on the meta device (in entry order); by storage key, each group of entries that are one
  // tensor (tied weights), and for each storage holding several different views, every entry on it.
  std::vector<size_t> uninitialized_entries, meta_entries;
  std::vector<std::vector<size_t>> tied_groups, view_groups;
  // Per entry: the index of the first entry that is the same tensor (same view of one storage, or the same
  // pickled object when there is no storage, as meta tensors); its own index when it is the first.
  std::vector<size_t> same_tensor;
  std::vector<Finding> findings;  // warnings shown after the totals; summarize() leaves it empty (findings.h)
  std::optional<ModelReport> model;
  std::optional<ForwardReport> forward;
  std::optional<MemoryReport> memory;  // summary --memory
  // A remote input (https://, hf://, s3://): what reading it cost, listings included.
  struct Fetched {
    std::string url;  // the input as given (secrets redacted)
    uint64_t requests = 0, bytes = 0, files = 0;
    uint64_t unverified = 0;  // files whose server gives no validator (vfs::Transfer::unverified)
  };
  std::optional<Fetched> fetched;
  // The input as given (secrets redacted), when the command names it: JSON's `file`, as check's and diff's;
  // the file read for it (a folder's index or weights) is then `resolved`.
  std::string operand;
};

Summary summarize(const Checkpoint& ck);
// Summary::same_tensor alone: per entry, the index of the first entry that is the same tensor.
std::vector<size_t> same_tensor_of(const Checkpoint& ck);
// The totals of the entries `keep` selects, counted as summarize counts them (summary --match);
// parameters_without_embeddings is the parameter count (not told apart for a subset).
Totals totals_of(const Checkpoint& ck, const std::function<bool(const Tensor&)>& keep);

// Trainable as Lightning counts it (requires_grad), for a parameter entry. State dicts drop
// requires_grad, so a parameter not saved as an nn.Parameter object counts as trainable.
inline bool trainable(const Tensor& t) { return t.kind == TensorKind::Parameter && (!t.is_parameter_object || t.requires_grad); }

}  // namespace ckpt
