// One example-input forward of a TorchScript module (`ckpt summary --example-input`), recording per
// module what Lightning's ModelSummary hooks record (input and output sizes, the last call's) and
// FLOPs counted as torch.utils.flop_counter counts them:
//   mm, addmm, bmm, baddbmm   2*M*N*K per matrix product (addmm / baddbmm: the product only;
//                             _addmm_activation, the fused linear + activation, as addmm)
//   convolution               2 * batch * prod(out spatial) * prod(kernel) * c_out * c_in/groups
//                             (transposed: input spatial instead of output)
//   scaled_dot_product_attention and its kernels: the two batched products, 2*B*Sq*Sk*(Dq + Dv)
// An operator counts only when no counted operator encloses it (convolution -> _convolution once,
// linear -> addmm once, attention -> its math kernels' bmm not again). Unlike flop_counter, which sees
// a fused kernel (the TransformerEncoderLayer fast path) as one unknown operator and counts 0, the
// products that a fused kernel runs are counted. A module's FLOPs include everything it called.
//
// Module boundaries: LibTorch has no forward hooks, so every `prim::CallMethod[name="forward"]` on a
// submodule in the graphs of the module's methods is bracketed with two recording operators
// (ckpt::enter / ckpt::exit) before the first run; they see the call's arguments and result. A module
// called twice keeps the sizes of its last call. Arguments: as the callee's forward received them,
// trailing ones equal to their declared default dropped (TorchScript passes defaults explicitly).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "core/checkpoint.h"
#include "core/summary.h"

namespace ckpt::torchb {

struct ExampleInputs {
  std::vector<c10::IValue> args;
  std::unordered_map<std::string, c10::IValue> kwargs;
  std::vector<ForwardInput> described;
};

// SPEC: DIMS[:DTYPE[:LOW..HIGH]], e.g. "2x3x224x224", "1x128:int64", "1x128:int64:0..50257". Values are
// seeded: normal for floating and complex dtypes, uniform integers in [LOW, HIGH) (default [0, 2)) for
// integer and bool dtypes. Throws UsageError naming the bad SPEC.
ExampleInputs parse_example_inputs(const std::vector<std::string>& specs, c10::Device device);

// A torch.save'd tensor (one argument), tuple or list of tensors (positional arguments) or dict of
// tensors (keyword arguments), as ckpt's own reader read it. Throws InputError for anything else.
ExampleInputs load_example_inputs(const Checkpoint& ck, c10::Device device);

// Puts `module` in eval mode and runs forward once without gradients. Module paths in the report are
// the module's own (named_modules()). A failing forward does not throw: the report's error,
// error_module (innermost module running) and completed are set, with the sizes recorded so far.
ForwardReport run_forward(torch::jit::Module& module, const ExampleInputs& in);

}  // namespace ckpt::torchb
