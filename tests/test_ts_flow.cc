// compile_flow on code/ text: what it follows (values, calls, branches that cannot run) and that
// hostile code never crashes it. The corpus of real archives against dynamo is tests/cli/compile_truth.py.
#include <doctest/doctest.h>

#include <string>

#include "core/torchscript.h"
#include "core/ts_flow.h"

using namespace ckpt;

namespace {
Checkpoint code(const std::string& src, std::vector<std::string> exported = {}) {
  Checkpoint ck;
  for (TsClass& c : parse_torchscript_code("__torch__.m", src)) {
    c.file = "code/__torch__/m.py";
    ck.ts_classes.push_back(std::move(c));
  }
  ck.torchscript.root_class = "__torch__.m.Net";
  for (std::string& e : exported) ck.torchscript.methods.push_back(TsMethodInfo{std::move(e), false, true, {}});
  return ck;
}

const char* kNet = R"(class Net(Module):
  __parameters__ = ["w", ]
  __buffers__ = []
  w : Tensor
  training : bool
  def forward(self: __torch__.m.Net,
    x: Tensor,
    mask: Optional[Tensor]=None) -> Tensor:
    _0 = __torch__.m.helper
    _1 = __torch__.torch.compiler.is_compiling
    if torch.__isnot__(mask, None):
      torch.warn("never: mask is None")
    else:
      pass
    if torch.__not__(_1()):
      print(x)
    else:
      pass
    _2 = torch.all(torch.gt(x, 0))
    if bool(_2):
      pass
    else:
      ops.prim.RaiseException("AssertionError: ")
    if bool(torch.gt(torch.sum(self.w), 0)):
      y = _0(x, )
    else:
      y = x
    return y
  def step(self: __torch__.m.Net,
    x: Tensor) -> Tensor:
    n = int(torch.item(torch.sum(x)))
    return torch.slice(x, 0, None, n)
def helper(x: Tensor) -> Tensor:
  v = torch.item(torch.sum(x))
  if torch.gt(v, 0):
    _3 = torch.add(x, v)
  else:
    _3 = x
  return _3
)";
}  // namespace

TEST_CASE("ts_flow: values followed through calls, unreachable branches left unread") {
  const Checkpoint ck = code(kNet, {"step"});
  const std::vector<FlowHit> hits = compile_flow(ck);
  std::string got;
  for (const FlowHit& h : hits) got += h.function + ":" + std::to_string(h.line) + ":" + h.op + " ";
  CAPTURE(got);
  REQUIRE(hits.size() == 3);
  // the truth test of forward (the assert on _2 is not one; the warn under `mask is not None` (mask
  // takes its default, None) and the print under `not is_compiling()` do not run under dynamo)
  CHECK(hits[0].kind == FlowKind::TruthTest);
  CHECK(hits[0].function == "__torch__.m.Net.forward");
  CHECK(hits[0].line == 24);
  CHECK(hits[0].entries == std::vector<std::string>{"forward"});
  // helper's item() decides its `if`
  CHECK(hits[1].kind == FlowKind::Scalar);
  CHECK(hits[1].function == "__torch__.m.helper");
  CHECK(hits[1].to_condition);
  CHECK_FALSE(hits[1].to_size);
  // step's item() sets a slice bound (through int()); only step reaches it
  CHECK(hits[2].kind == FlowKind::Scalar);
  CHECK(hits[2].op == "item()");
  CHECK(hits[2].to_size);
  CHECK_FALSE(hits[2].to_condition);
  CHECK(hits[2].entries == std::vector<std::string>{"step"});
}

TEST_CASE("ts_flow: hostile code never crashes or hangs") {
  const std::string head = "class Net(Module):\n  def forward(self: __torch__.m.Net,\n    x: Tensor) -> Tensor:\n";
  std::vector<std::string> bodies{
      "    y = " + std::string(100000, '(') + "x" + std::string(100000, ')') + "\n",
      "    y = x" + std::string(0, ' ') + [] {
        std::string s;
        for (int k = 0; k < 50000; ++k) s += ".a";
        return s;
      }() + "\n",
      "    y = " + [] {
        std::string s = "x";
        for (int k = 0; k < 50000; ++k) s += " + x";
        return s;
      }() + "\n",
      "    y = " + [] {
        std::string s = "x";
        for (int k = 0; k < 50000; ++k) s += " ** x";
        return s;
      }() + "\n",
      "    y = " + [] {
        std::string s;
        for (int k = 0; k < 50000; ++k) s += "not ";
        return s + "x";
      }() + "\n",
      [] {
        std::string s;
        for (int k = 0; k < 5000; ++k) s += std::string(4 + 2 * k, ' ') + "if bool(x):\n";
        return s;
      }(),
      "    return (self).forward(x, )\n",  // recursion
      "    y = f\"\\\n    (((\n    return ]]]]\n",
  };
  for (const std::string& b : bodies) {
    CAPTURE(b.substr(0, 60));
    const Checkpoint ck = code(head + b);
    const std::vector<FlowHit> hits = compile_flow(ck);
    CHECK(hits.size() <= 201);  // at most one per nesting level read (200)
  }
}
