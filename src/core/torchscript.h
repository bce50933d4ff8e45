// TorchScript archives without LibTorch: the module tree comes from data.pkl (each module a
// `__torch__.<qualified>` object whose BUILD dict holds every attribute), and which attributes are
// parameters, buffers or submodules comes from the class declarations in code/:
//
//   code/__torch__/torch/nn/modules/conv.py  declares  __torch__.torch.nn.modules.conv.Conv2d
//     class Conv2d(Module):
//       __parameters__ = ["weight", "bias", ]
//       __buffers__ = []
//       weight : Tensor
//       training : bool
//       __annotations__["0"] = __torch__.torch.nn.modules.linear.Linear
//       def forward(self: __torch__.torch.nn.modules.conv.Conv2d,
//         input: Tensor) -> Tensor:
//         _0 = (self)._conv_forward(input, weight, bias, )
//
// Tensors that are neither parameters nor buffers (tensor attributes outside __parameters__ /
// __buffers__, tensors inside torch.classes objects such as quantized packed params and xnnpack
// contexts, tensors of a __getstate__ state) are listed as TensorKind::Attribute; tensors of
// constants.pkl and bytecode.pkl (lite-interpreter archives) count in the archive's constants.
//
// Archives from any torch version summarize, including ones whose operators LibTorch 1.13 lacks.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"
#include "core/zip.h"

namespace ckpt {

// Parses the class declarations of one code/ file. `module` is the file's qualified module
// ("__torch__.torch.nn.modules.conv" for code/__torch__/torch/nn/modules/conv.py).
std::vector<TsClass> parse_torchscript_code(std::string_view module, std::string_view source);

// A class with __getstate__ pickles what it returns instead of its attribute dict. The names of the n
// elements of that tuple, read from the method's code: `self.x` (or a local read from it) is "x", any
// other local keeps its name ("w" of `w, b, = (self)._weight_bias()`), anything else its index.
std::vector<std::string> getstate_names(const TsClass& cls, size_t n);

// Fills ck (tensors, modules, frozen constants, ck.torchscript: methods, constants, extra files) from an archive
// whose data.pkl has already been located. Called by the zip reader when constants.pkl is present.
void read_torchscript(Checkpoint& ck, const ZipReader& zip, const std::string& prefix, const Limits& limits);

}  // namespace ckpt
