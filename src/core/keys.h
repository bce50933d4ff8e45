// Matching one set of tensor keys against another: the prefix that best explains renamed keys (shared by
// `ckpt diff` and `ckpt load --model`), --strip-prefix / --add-prefix renaming, and the key check that
// load_state_dict(strict=True) makes (missing, unexpected, shape or dtype mismatched), and the
// parameter / buffer split of state dicts that only have names.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

// State dicts that do not say which entries are buffers: a well-known buffer name (running_mean, ...),
// a torch.nn buffer told by its place in the key (spectral_norm's _u / _v, parametrizations, quantization
// observers) or an integer / bool / bits dtype makes a buffer, anything else a parameter (documented in
// README).
void infer_kinds(std::span<Tensor> tensors);

// A state dict or object whose tensors are no module's (no name has a dot, none is a module's leaf such
// as weight*, bias*, running_mean): its content becomes Content::Tensors and its entries neither
// parameters nor buffers (TensorKind::Attribute). Returns whether it did. Applies to names-only
// contents (StateDict, Object) with no module tree.
bool mark_plain_tensors(Checkpoint& ck);
// Whether these tensors' names are such a content's (some tensor, and no name with a dot or a module's leaf).
bool plain_tensor_names(std::span<const Tensor> tensors);

// The prefix that best explains renamed keys: stripping it from keys of `from` (Strip) or adding it to
// them (Add) pairs `paired` of them with keys of `to`. Candidates are the leading dotted components, up to
// three levels, of the side that carries the prefix (`_orig_mod.`, `module.`, `model.`, ... without a fixed
// list). Callers decide whether `paired` is evidence enough.
struct PrefixRename {
  enum Op { None, Strip, Add } op = None;
  std::string prefix;
  size_t paired = 0;
};
PrefixRename best_prefix_rename(const std::vector<std::string>& from, const std::unordered_set<std::string>& to);

struct KeyMismatch {
  std::string key;
  std::string file_dtype, model_dtype;
  std::vector<int64_t> file_shape, model_shape;
};
struct KeyMatch {
  std::vector<std::string> missing;  // model keys FILE does not provide
  std::vector<std::string> unexpected;  // FILE keys the model does not have
  std::vector<KeyMismatch> mismatched;  // both have it, shape or dtype differ
  std::optional<std::string> suggested_strip_prefix, suggested_add_prefix;
  size_t matched = 0;  // keys present in both with equal shape and dtype
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};
// FILE's key after --strip-prefix (only where the key starts with it) and --add-prefix.
std::string renamed_key(const std::string& key, const std::string& strip, const std::string& add);
// `file` are FILE's tensors under their original names; renaming is applied here. Suggestions are made
// when keys do not match and one prefix, stripped from or added to every FILE key, makes them match.
KeyMatch match_keys(const std::vector<const Tensor*>& file, const std::vector<const Tensor*>& model, const std::string& strip,
                    const std::string& add);

}  // namespace ckpt
