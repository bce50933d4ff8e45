// Counting, as users expect it (DESIGN.md section 4): real dtype sizes, tied entries once, buffers by
// name when the file does not say, lazy and meta entries named. Builds the module rows that renderers
// turn into Lightning's ModelSummary look.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

struct Totals {
  uint64_t tensors = 0;          // tensor entries, any state
  uint64_t elements = 0;         // sum of numel, materialized + meta
  uint64_t unique_elements = 0;  // each distinct (storage, offset, shape, stride) once
  uint64_t storage_bytes = 0;    // distinct storages the model's entries use
  uint64_t file_storage_bytes = 0;  // every storage in the file (optimizer state included)
  uint64_t bytes = 0;            // numel * itemsize over the unique tensors
  uint64_t parameters = 0;       // unique parameter elements
  uint64_t trainable = 0;
  uint64_t non_trainable = 0;
  uint64_t buffers = 0;          // unique buffer elements
  uint64_t parameter_bytes = 0;  // unique parameter bytes (Lightning's "model params size")
  uint64_t uninitialized = 0;    // entries
  uint64_t meta = 0;             // entries
};

struct ModuleRow {
  std::string name;              // "" for the root
  std::string type;              // short class name or "" when unknown
  std::string qualified_type;
  int depth = 0;                 // 0 for the root, 1 for its children, ...
  uint64_t parameters = 0;
  uint64_t trainable = 0;
  uint64_t buffers = 0;
  uint64_t bytes = 0;
  uint64_t tensors = 0;
  uint64_t uninitialized = 0;
  std::vector<std::string> dtypes;  // distinct dtype names, in first-seen order
  std::optional<bool> training;
  std::string shared_with;          // a second path to the module named here (counted once)
  const nlohmann::ordered_json* attributes = nullptr;  // TorchScript: non-tensor attributes
};

struct Summary {
  const Checkpoint* ck = nullptr;
  Totals totals;
  std::vector<ModuleRow> modules;  // pre-order, root first
  std::vector<Finding> findings;   // warnings shown after the totals
};

Summary summarize(const Checkpoint& ck);

}  // namespace ckpt
