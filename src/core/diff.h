// `ckpt diff A B`: which keys only one side has, dtype and shape changes, a prefix that explains renames
// (B is A with `_orig_mod.` added), keys missing on one side only because that side saved a tied copy
// once (lm_head.weight tied to the embedding, dropped by safetensors conversions), and with values the
// largest absolute / relative difference per tensor, read straight from both mapped files (neither is
// loaded whole) on every core (value_diff.h). Apart from the tensors, the metadata a reader kept is
// compared as plain JSON: a training checkpoint's state (epoch, global_step, loops, hyper_parameters,
// optimizer param groups, LR schedulers, callbacks), the tensors outside the model (optimizer state) and
// a Hugging Face folder's config.json.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"

namespace ckpt {

struct DiffOptions {
  // Renaming before keys pair (README, "ckpt diff"): --strip-prefix removes the prefix from the keys of
  // BOTH files that start with it (so `_orig_mod.` pairs in either order); --add-prefix then prepends to
  // every key of A, as `load --add-prefix` does to FILE's keys.
  std::string strip_prefix, add_prefix;
  bool values = false;
  double atol = 0.0;
  double rtol = 0.0;
  // torch.testing.assert_close(check_dtype=False): a dtype change alone is no difference, and values of
  // two dtypes are compared after both are cast to torch.promote_types of the pair (value_diff.h).
  bool ignore_dtype = false;
  // Leave the metadata out: not compared, not reported, no part of the verdict (tensors alone).
  bool ignore_metadata = false;
  // Text: list the tensors within tolerance and every metadata change (not only the differences).
  bool verbose = false;
  bool color = false;  // text: the verdict in colour (different: red, within tolerance: yellow)
  // Values are compared on this many threads (0: one per core), in work items of about piece_bytes
  // of A and B, so one big tensor is split over them.
  unsigned threads = 0;
  uint64_t piece_bytes = 8ull << 20;
  uint64_t window_bytes = 0;  // value_diff.h (0: the default)
  bool wide_simd = true;  // value_diff.h
  // (bytes of A and B compared, bytes to compare), called from the calling thread only.
  std::function<void(uint64_t, uint64_t)> progress;
};

struct TensorDiff {
  std::string a, b;  // names on each side
  std::string dtype_a, dtype_b;
  std::vector<int64_t> shape_a, shape_b;
  bool compared = false;  // values were compared
  bool comparable = true;  // dtypes convertible to float64 (else bytes compared)
  double max_abs = 0.0, max_rel = 0.0;  // float64, B is the reference for max_rel (b != 0 only)
  bool values_equal = true;  // bitwise / exactly equal
  bool within = true;  // torch.isclose everywhere: equal (NaN too), or finite |a - b| <= atol + rtol * |b|
  bool state_changed = false;  // materialized / meta / uninitialized differ
  // Tied weights: the earlier entry of the same file that is the same tensor (torch.save writes a tied weight
  // under each name, on one storage), "" when none; a tie added or removed makes the pair differ.
  std::string tied_a, tied_b;
  bool tie_changed = false;
  // The verdict on this pair: a shape or state change, a dtype change (without ignore_dtype), or values
  // outside tolerance (bytes that differ for dtypes without a float64 view).
  bool differs = false;
};

// A key that only one side has, whose tensor on that side is the same tensor (one storage, one view:
// Summary::same_tensor) as a key both sides have: the other side saved the tied pair once.
struct TiedDrop {
  std::string name;  // the key (original name) on the side that has it
  char side = 'a';  // 'a': only A has it, 'b': only B
  std::string tied_to;  // the key on that side it is tied to, present on both sides
};

// One metadata difference: `path` names the value ("epoch", "optimizer_states[0].param_groups[0].lr",
// "config.json.n_layer"); a / b are the values as JSON, null when that side has none (`in_a` / `in_b`).
struct MetaChange {
  std::string section;  // training | hyper_parameters | optimizer | optimizer_state | lr_scheduler | callbacks | loops | config
  std::string path;
  nlohmann::ordered_json a, b;
  bool in_a = true, in_b = true;
  // section optimizer_state with values compared: how many of its tensors' values changed, the largest
  // |a - b|, and whether every change is within tolerance (then no difference: the verdict is at most
  // "within tolerance").
  size_t values_changed = 0;
  double max_abs = 0.0;
  bool within = false;
};

enum class DiffVerdict { Same, WithinTolerance, Different };
const char* to_string(DiffVerdict v);  // "same" | "within tolerance" | "different"
struct DiffResult {
  std::vector<std::string> only_in_a, only_in_b;
  std::string prefix_op;  // "" | "b_adds" | "b_removes"
  std::string prefix;  // e.g. "_orig_mod."
  // The --strip-prefix that would pair the keys the detected prefix pairs ("" when none is needed or
  // the user already gave one): the output names the flag.
  std::string hint_strip_prefix;
  bool keys_equal = true;  // same names after --strip-prefix / --add-prefix, without any detected pairing
  std::vector<TiedDrop> tied;  // keys missing on one side that are tied copies (not in only_in_a / only_in_b)
  std::vector<TensorDiff> changed;  // dtype / shape / state / value changes (differs or not)
  size_t paired = 0, compared = 0;
  size_t differ = 0, within = 0, same_pairs = 0;  // paired tensors by verdict (within: values not equal, within tolerance)
  size_t dtype_ignored = 0;  // pairs whose dtype changed, not counted as a difference (ignore_dtype)
  double max_abs = 0.0;
  // The tensors alone (metadata apart; tied drops are no difference): equal when no pair changed and
  // the keys match, within_tolerance when at most values changed, within tolerance.
  bool equal = true;
  bool within_tolerance = true;
  // Metadata (DiffOptions::ignore_metadata: not compared, empty): each difference, in A's order.
  bool metadata_compared = false;
  bool metadata_present = false;  // A or B has any metadata to compare
  std::vector<MetaChange> metadata;
  // Said on stderr, not part of the report: a --strip-prefix / --add-prefix that renames no key.
  std::vector<std::string> warnings;

  // same (exit 0): nothing differs; within tolerance (exit 0): only values moved, within tolerance;
  // different (exit 1): anything else, a metadata change included.
  DiffVerdict verdict(const DiffOptions& o) const;
  bool same(const DiffOptions& o) const { return verdict(o) != DiffVerdict::Different; }
};

// Throws UsageError when renaming gives two keys of one file the same name.
DiffResult diff_checkpoints(const Checkpoint& a, const Checkpoint& b, const DiffOptions& o);

}  // namespace ckpt
