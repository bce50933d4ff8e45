// Layer types of a state dict's modules, inferred from what each module holds directly: its tensors'
// names (the attribute a torch.nn class gives them: weight, bias, running_mean, in_proj_weight,
// weight_ih_l0, ...) and ranks, the bias's length against the weight's dimensions, the next sibling
// (a BatchNorm's channels after a convolution) and the module's own name where torch's classes and
// transformers' name them (embeddings, norms, GPT-2's Conv1D). A type is given only when those say it
// alone; anything ambiguous (a square weight that could be either way, a container, a norm of unknown
// kind) stays unknown (`?` in the table). Shown as inferred (`~Conv2d`), never as a known class.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"
#include "core/name_index.h"

namespace ckpt {

// Module name ("features.0", "" for the root) -> inferred class name, for the modules the tensors
// imply (every dotted prefix of a tensor's name); modules with no inference are absent. The names view
// the tensors' names: the result is valid while `tensors` is. The types live as long as the process.
class LayerTypes {
 public:
  // The inferred class of `module`, or nullptr (the first one added, for a module added twice).
  const std::string_view* find(std::string_view module) const;
  size_t size() const { return types_.size(); }
  bool empty() const { return types_.empty(); }
  // `type` is kept for the process (the view returned); `tensor`: the entry of one of the module's own
  // tensors, when known.
  std::string_view add(std::string_view module, std::string_view type, uint32_t tensor = kNoTensor);
  void reserve(size_t n);  // room for n modules
  // The k-th module added, its class, and the entry of one of its own tensors (or kNoTensor).
  std::string_view module(size_t k) const { return modules_[k]; }
  std::string_view type(size_t k) const { return types_[k]; }
  uint32_t tensor(size_t k) const { return tensors_[k]; }
  static constexpr uint32_t kNoTensor = UINT32_MAX;

 private:
  std::vector<std::string_view> modules_;
  std::vector<std::string_view> types_;  // each class name kept once for the process
  std::vector<uint32_t> tensors_;
  mutable NameIndex index_;  // built by the first find()
  mutable size_t indexed_ = 0;  // modules_[0, indexed_) are in index_
};
LayerTypes infer_layer_types(const std::vector<Tensor>& tensors);

// Whether an inferred type agrees with a known class: equal, or the known class is a model's own
// spelling of it (transformers' LlamaRMSNorm is an RMSNorm).
bool layer_type_matches(std::string_view inferred, std::string_view known);

}  // namespace ckpt
