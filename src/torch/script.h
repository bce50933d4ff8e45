// TorchScript archives through LibTorch, for `ckpt load` (and the example-input forward after it).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt::torchb {

// The module of a TorchScript archive on the meta device, compiled by LibTorch WITHOUT reading its
// weights: the reader LibTorch gets serves every tensor payload of the model as zeros (LibTorch does not
// check zip CRCs), so only code/ and the pickles are read. Throws UnsupportedError when LibTorch cannot
// load the archive; when operators are missing the message names every one the code/ calls that this
// LibTorch lacks, with its file and line, and the LibTorch version.
torch::jit::Module load_structure(const Checkpoint& ck);

// torch::jit::load onto `device`, reading every weight (what a load without --empty-init does). Same errors.
torch::jit::Module load_plain(const Checkpoint& ck, c10::Device device);

// Parameters and buffers as state_dict() names them ("features.conv.weight").
std::vector<std::pair<std::string, at::Tensor>> module_state(const torch::jit::Module& m);

// Replaces the tensor at a state_dict path; a parameter stays a parameter, a buffer a buffer.
void assign(torch::jit::Module& m, const std::string& path, const at::Tensor& t);

}  // namespace ckpt::torchb
