// `summary --model ARCH`: a state dict read together with the TorchScript architecture it belongs to.
// No LibTorch: both files are read by ckpt's own readers.
#pragma once

#include <optional>
#include <string>

#include "core/checkpoint.h"
#include "core/summary.h"

namespace ckpt {

// FILE's keys are matched to ARCH's as `load --model` does (load_state_dict(strict=True)), after
// `strip` / `add`; when neither is given and the keys do not match as they are, the prefix that
// `load` would suggest is applied (report.prefix_guessed). Then, in `file`:
//   - uninitialized (lazy) entries take ARCH's shape and dtype (Tensor::resolved), so totals are exact;
//   - when FILE has no module tree of its own (a state dict), ARCH's tree is taken under FILE's names,
//     so rows get types and modules without tensors (activations, pooling) get rows.
ModelReport apply_model(Checkpoint& file, const Checkpoint& arch, const std::string& strip, const std::string& add);

// ARCH's module path under FILE's naming (the inverse of renamed_key): nullopt when FILE has no name for it.
std::optional<std::string> file_module_path(const std::string& arch_path, const ModelReport& m);

}  // namespace ckpt
