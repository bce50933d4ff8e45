// `ckpt diff A B`: which keys only one side has, dtype and shape changes, a prefix that explains renames
// (B is A with `_orig_mod.` added), and with values the largest absolute / relative difference per
// tensor, read straight from both mapped files (neither is loaded whole) on every core (value_diff.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

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
  // Values are compared on this many threads (0: one per core), in work items of about piece_bytes
  // of A and B, so one big tensor is split over them.
  unsigned threads = 0;
  uint64_t piece_bytes = 8ull << 20;
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
};

struct DiffResult {
  std::vector<std::string> only_in_a, only_in_b;
  std::string prefix_op;  // "" | "b_adds" | "b_removes"
  std::string prefix;  // e.g. "_orig_mod."
  // The --strip-prefix that would pair the keys the detected prefix pairs ("" when none is needed or
  // the user already gave one): the output names the flag.
  std::string hint_strip_prefix;
  bool keys_equal = true;  // same names after --strip-prefix / --add-prefix, without any detected pairing
  std::vector<TensorDiff> changed;  // dtype / shape / value differences
  size_t paired = 0, compared = 0;
  double max_abs = 0.0;
  bool equal = true;  // keys, dtypes, shapes (and values when compared) identical
  bool within_tolerance = true;  // as equal, values within tolerance (when compared)
  // The verdict (exit code 0 and "same"): within tolerance when values were compared, else equal.
  bool same(const DiffOptions& o) const { return o.values ? within_tolerance : equal; }
};

// Throws UsageError when renaming gives two keys of one file the same name.
DiffResult diff_checkpoints(const Checkpoint& a, const Checkpoint& b, const DiffOptions& o);

}  // namespace ckpt
