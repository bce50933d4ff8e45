// The torch.compile rules on a TorchScript archive: what dynamo graph-breaks on, found by compile_flow
// (ts_flow.h), each finding with dynamo's own reason, the torch versions it breaks on and the
// torch._dynamo.config flags that remove it there, as testdata/gen_compile.py measured them on
// torch 2.6 and 2.14; and what the archive cannot show (traced code, @torch.jit.unused stubs).
#pragma once

#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

// The torch versions the compile rules' facts were measured on, oldest first.
const std::vector<std::string>& compile_rule_versions();

// data-dependent-control-flow, tensor-item, dynamic-shape-op, print-call, warn-call, rnn-module,
// python-op, traced-archive, ignored-code.
void compile_rules(const Checkpoint& ck, std::vector<Finding>& out);

}  // namespace ckpt
