// What torch.compile (dynamo) cannot trace in a TorchScript archive, found by following values
// through its serialized code/ rather than by matching lines.
//
// The code is TorchScript's printed Python: every operator a call (`torch.gt(x, 0)`), a tensor's
// truth value an explicit `bool(t)` (aten::Bool), `int(t)` / `float(t)` aten::Int / aten::Float,
// typed signatures, submodules typed attributes, free functions (helpers, torch/functional.py,
// torch/nn/functional.py) top-level defs. compile_flow interprets it abstractly from the root
// module's forward and from each exported method: which values are tensors (and of which dtype
// family), None, constant booleans, data-dependent numbers (and where those go: a condition, a
// size), following calls into submodules, methods and free functions with what each call site
// passes, so `if torch.__isnot__(mask, None)` with mask None, or `if not torch.compiler.is_compiling()`
// (True under dynamo), leaves its branch unread, as dynamo does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

enum class FlowKind : uint8_t {
  TruthTest,  // bool(tensor) as an if / while condition (TorchScript's own hoisted `_N = bool(...)` too)
  TruthValue,  // bool(tensor) kept in a named variable (the Python had bool(t))
  IsNonzero,  // torch.is_nonzero(tensor)
  Equal,  // torch.equal(a, b), torch.allclose(a, b): a Python bool from tensor data
  Scalar,  // tensor.item(), int(tensor), float(tensor)
  TolistFloat,  // .tolist() of a tensor not known to hold integers
  TolistInt,  // .tolist() of an integer tensor
  DynamicShape,  // an operator whose output shape depends on the data
  Print,  // print(...)
  Warn,  // warnings.warn (aten::warn)
  Rnn,  // an RNN / LSTM / GRU module (torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu)
  PythonOp,  // prim::PythonOp: a call back into Python
  IgnoredStub,  // the body of a @torch.jit.unused / ignore(drop=True) function: not in the archive
};

struct FlowHit {
  FlowKind kind = FlowKind::TruthTest;
  std::string file;  // "code/__torch__/model.py"
  uint32_t line = 0;
  std::string function;  // "__torch__.model.Net.forward", "__torch__.model.helper"
  std::string text;  // the statement
  std::string op;  // what dynamo names: "aten.nonzero", "aten.equal", "int()", "LSTM", ...
  bool to_condition = false;  // a Scalar / IsNonzero / Equal value reaches a condition or a loop count
  bool to_size = false;  // ... or a size, a view's shape, a slice bound
  std::vector<std::string> entries;  // the root's methods it is reached from, forward first
};

// Every site reached from the root's forward and its exported methods, in the order first reached.
std::vector<FlowHit> compile_flow(const Checkpoint& ck);

}  // namespace ckpt
