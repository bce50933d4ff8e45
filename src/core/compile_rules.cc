#include "core/compile_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/text.h"
#include "core/ts_flow.h"
#include "core/zip.h"

namespace ckpt {

const std::vector<std::string>& compile_rule_versions() {
  static const std::vector<std::string> k{"2.6", "2.14"};
  return k;
}

namespace {

constexpr const char* kScalarFlag = "capture_scalar_outputs";
constexpr const char* kShapeFlag = "capture_dynamic_output_shape_ops";
constexpr const char* kRnnFlag = "allow_rnn";
constexpr const char* kNoGuard = "\"Could not guard on data-dependent expression\"";

// One site's construct and what dynamo does with it, per measured version (index-aligned with
// compile_rule_versions(); an empty reason: that version compiles it).
struct Verdict {
  const char* rule;
  Severity severity;
  std::string what;
  std::string reason[2];
  std::vector<std::string> flags[2];
  std::string fix;
};

// An operator whose output shape depends on the data (aten.nonzero, aten.bincount, ...).
Verdict dynamic_shape_verdict(const FlowHit& h) {
  const bool bincount = h.op == "aten.bincount";
  Verdict v{"dynamic-shape-op", Severity::Warning,
            fmt::format("{}{}: its output shape depends on the data", h.op,
                        h.text.find("torch.index(") != std::string::npos && h.op == "aten.nonzero" ? " (x[mask], boolean-mask indexing)"
                        : h.text.find("torch.where(") != std::string::npos && h.op == "aten.nonzero" ? " (one-argument torch.where)"
                                                                                                 : ""),
            {fmt::format("dynamic shape operator: {}", h.op), fmt::format("Dynamic shape operator ({})", h.op)},
            {},
            bincount ? fmt::format("on torch 2.14 set torch._dynamo.config.{} = True; on 2.6 no flag helps (\"Operator does "
                                   "not have a meta kernel that supports dynamic output shapes\"): count into a tensor of "
                                   "known size (torch.zeros(n).scatter_add_)",
                                   kShapeFlag)
                     : fmt::format("set torch._dynamo.config.{} = True, or use a fixed-shape alternative "
                                   "(torch.where(mask, x, 0), masked_fill)",
                                   kShapeFlag)};
  v.flags[1] = {kShapeFlag};
  if (!bincount) v.flags[0] = {kShapeFlag};
  return v;
}

Verdict verdict(const FlowHit& h) {
  const bool decides = h.to_condition, sizes = h.to_size && !h.to_condition;
  const std::string keep_tensor_cond = fmt::format(
      "keep the value a tensor and select with torch.where (or branch with torch.cond): {} is not enough, the value "
      "decides a condition and dynamo then fails with {}",
      kScalarFlag, kNoGuard);
  switch (h.kind) {
    case FlowKind::TruthTest:
      // TorchScript prints `if t:` and `if bool(t):` alike; dynamo names them differently.
      return {"data-dependent-control-flow", Severity::Warning, "a tensor's truth value decides an if / while (aten::Bool)",
              {"generic_jump TensorVariable() (fullgraph: \"Dynamic control flow is not supported at the moment\"), or "
               "\"builtin: bool [TensorVariable]\" where the Python called bool()",
               "Data-dependent branching, or \"Unsupported Tensor.item() call with capture_scalar_outputs=False\" where the "
               "Python called bool()"},
              {},
              "compute both sides and select with torch.where, or branch with torch.cond; no torch._dynamo.config flag "
              "removes this break"};
    case FlowKind::TruthValue: {
      Verdict v{"data-dependent-control-flow", Severity::Warning, "bool() of a tensor (aten::Bool)",
                {"builtin: bool [TensorVariable]", "Unsupported Tensor.item() call with capture_scalar_outputs=False"},
                {},
                decides ? keep_tensor_cond
                        : fmt::format("keep it a tensor; on torch 2.14 torch._dynamo.config.{} = True also removes this "
                                      "break (not on 2.6, whose dynamo has no bool() of a tensor)",
                                      kScalarFlag)};
      if (!decides && !sizes) v.flags[1] = {kScalarFlag};
      return v;
    }
    case FlowKind::IsNonzero:
    case FlowKind::Equal: {
      const bool eq = h.kind == FlowKind::Equal;
      Verdict v{decides ? "data-dependent-control-flow" : "tensor-item", Severity::Warning,
                eq ? fmt::format("torch.{} of tensors (a Python bool from tensor data)", h.op.substr(5))
                   : "torch.is_nonzero of a tensor (a Python bool from tensor data)",
                {fmt::format("data dependent operator: {}", h.op), fmt::format("Data dependent operator ({})", h.op)},
                {},
                eq ? fmt::format("compare in the graph: torch.all(a == b) or torch.isclose(a, b).all() stays a tensor "
                                 "(select with torch.where, or branch with torch.cond); {} does not make dynamo trace {}",
                                 kScalarFlag, h.op)
                   : decides ? keep_tensor_cond
                             : fmt::format("set torch._dynamo.config.{} = True, or keep the value a tensor", kScalarFlag)};
      if (!eq && !decides && !sizes) v.flags[0] = v.flags[1] = {kScalarFlag};
      return v;
    }
    case FlowKind::Scalar: {
      Verdict v{"tensor-item", Severity::Warning,
                fmt::format("{} makes a tensor a Python number (aten::{})", h.op,
                            h.op == "int()" ? "Int" : h.op == "float()" ? "Float" : "item"),
                {"Tensor.item", "Unsupported Tensor.item() call with capture_scalar_outputs=False"},
                {},
                ""};
      if (decides) {
        v.fix = keep_tensor_cond;
      } else if (sizes) {
        v.flags[1] = {kScalarFlag};
        v.fix = fmt::format("on torch 2.14 set torch._dynamo.config.{} = True; on 2.6 that is not enough, the number sets a "
                            "size or a slice bound and dynamo fails with {} (add torch._check on it, or keep shapes static)",
                            kScalarFlag, kNoGuard);
      } else {
        v.flags[0] = v.flags[1] = {kScalarFlag};
        v.fix = fmt::format("set torch._dynamo.config.{} = True (removes this break on torch 2.6 and 2.14), or keep the value "
                            "a tensor",
                            kScalarFlag);
      }
      return v;
    }
    case FlowKind::TolistFloat:
      return {"tensor-item", Severity::Warning, ".tolist() of a tensor not known to hold integers (prim::tolist)",
              {"Input tensor for tolist must be an integer tensor", "Tensor.tolist() with non-integer tensor"},
              {},
              "keep the values in a tensor: dynamo traces tolist() only on integer tensors, whatever the config"};
    case FlowKind::TolistInt: {
      Verdict v{"tensor-item", Severity::Warning, ".tolist() of an integer tensor (prim::tolist)",
                {"", "Data dependent operator (aten._local_scalar_dense)"},
                {},
                fmt::format("on torch 2.14 set torch._dynamo.config.{} = True, or keep the values in a tensor", kScalarFlag)};
      v.flags[1] = {kScalarFlag};
      return v;
    }
    case FlowKind::DynamicShape: return dynamic_shape_verdict(h);
    case FlowKind::Print:
      return {"print-call", Severity::Warning, "print() (prim::Print)",
              {"builtin: print", "Failed to trace builtin operator (print)"},
              {},
              "remove it, or guard it with `if not torch.compiler.is_compiling():` (dynamo leaves that branch out)"};
    case FlowKind::Warn:
      return {"warn-call", Severity::Warning, "warnings.warn (aten::warn)",
              {"Graph break due to unsupported Python builtin _warnings.warn",
               "Attempted to call function marked as skipped (_warnings.warn)"},
              {},
              "guard it with `if not torch.compiler.is_compiling():` (dynamo leaves that branch out), or warn outside forward"};
    case FlowKind::Rnn: {
      Verdict v{"rnn-module", Severity::Warning, fmt::format("an {} module (torch.lstm / torch.gru / torch.rnn_*)", h.op),
                {"TorchDynamo purposely graph breaks on RNN, GRU, LSTMs", "Attempted to wrap RNN, GRU, or LSTM"},
                {},
                fmt::format("set torch._dynamo.config.{} = True: dynamo then traces through the module (removes this break "
                            "on torch 2.6 and 2.14)",
                            kRnnFlag)};
      v.flags[0] = v.flags[1] = {kRnnFlag};
      return v;
    }
    case FlowKind::PythonOp:
      return {"python-op", Severity::Error, "calls back into Python (prim::PythonOp / an ignored function)",
              {"", ""},
              {},
              "script the function, or remove @torch.jit.ignore from what forward calls"};
    case FlowKind::IgnoredStub: break;
  }
  return {};
}

// torch.jit.trace records each traced op's Python stack in the code's debug records (code/*.debug_pkl,
// torch deflates some), torch.jit.trace's own frames included. Read here, for the finding only, so that
// the reader (and so load) never touches these members; one over 64 MiB is not read.
bool traced_code(const Checkpoint& ck) {
  if (!ck.zip || ck.ts_classes.empty()) return false;
  const std::string code = ck.prefix + "/code/";
  for (const ZipEntry& e : ck.zip->entries()) {
    const std::string_view name = e.name;
    constexpr uint64_t kMaxDebug = 64ull << 20;
    if (name.substr(0, code.size()) != code || name.size() < 10 || name.substr(name.size() - 10) != ".debug_pkl" ||
        e.uncompressed_size > kMaxDebug)
      continue;
    std::string storage;
    ByteView raw;
    try {
      raw = ck.zip->content(e, &storage, kMaxDebug);
    } catch (const InputError&) {
      continue;  // a broken debug record says nothing about tracing; torch.jit.load reads the code without it
    }
    const std::string_view dbg = raw.str(0, raw.size());
    if (dbg.find("torch/jit/_trace.py(") != std::string_view::npos || dbg.find("torch\\jit\\_trace.py(") != std::string_view::npos)
      return true;
  }
  return false;
}

Location code_location(const FlowHit& h) {
  Location loc;
  loc.member = h.file;
  loc.line = h.line;
  loc.function = h.function;
  return loc;
}

}  // namespace

void compile_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  const std::vector<std::string>& versions = compile_rule_versions();
  const std::vector<FlowHit> hits = compile_flow(ck);
  struct Group {
    Verdict v;
    Finding f;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> by_key;
  std::vector<const FlowHit*> stubs;
  for (const FlowHit& h : hits) {
    if (h.kind == FlowKind::IgnoredStub) {
      stubs.push_back(&h);
      continue;
    }
    Verdict v = verdict(h);
    std::string key = fmt::format("{}|{}|{}|{}|{}|{}", v.rule, v.reason[0], v.reason[1], join(v.flags[0]), join(v.flags[1]), v.fix);
    auto [it, fresh] = by_key.emplace(key, groups.size());
    if (fresh) groups.push_back({std::move(v), Finding{}});
    Group& g = groups[it->second];
    const std::string entries = join(h.entries, ", ");
    g.f.where.push_back(fmt::format("{}: {} ({}:{}: {})", entries, h.function, h.file, h.line, visible_prefix(h.text, 120)));
    g.f.locations.push_back(code_location(h));
    if (!g.f.compile) g.f.compile = CompileFacts{};
    for (const std::string& e : h.entries)
      if (std::find(g.f.compile->entries.begin(), g.f.compile->entries.end(), e) == g.f.compile->entries.end())
        g.f.compile->entries.push_back(e);
  }
  for (Group& g : groups) {
    const Verdict& v = g.v;
    Finding& f = g.f;
    CompileFacts& c = *f.compile;
    std::stable_sort(c.entries.begin(), c.entries.end(), [](const std::string& a, const std::string& b) {
      return (a == "forward") > (b == "forward");
    });
    std::vector<std::string> said, clean;
    for (size_t k = 0; k < versions.size(); ++k) {
      if (v.reason[k].empty()) {
        if (std::string(v.rule) != "python-op") clean.push_back(versions[k]);
        continue;
      }
      c.breaks_on.push_back(versions[k]);
      c.fixed_by.emplace_back(versions[k], v.flags[k]);
      said.push_back(fmt::format("torch {}: {}", versions[k], v.reason[k]));
    }
    if (std::string(v.rule) == "python-op") {
      c.breaks_on = versions;
      for (const std::string& ver : versions) c.fixed_by.emplace_back(ver, std::vector<std::string>{});
    }
    std::string entry_note;
    if (std::find(c.entries.begin(), c.entries.end(), "forward") == c.entries.end()) {
      std::vector<std::string> calls;
      for (const std::string& e : c.entries) calls.push_back("torch.compile(model." + e + ")");
      entry_note = fmt::format("; compiling forward alone is clean, {} breaks", join(calls, " and "));
    }
    f.id = v.rule;
    f.severity = v.severity;
    f.message = fmt::format("{} site(s): {}; torch.compile graph-breaks {}{}{}: {}", f.where.size(), v.what,
                            said.empty() ? "(not measured: no torch this project runs can save such an archive)"
                                         : "(dynamo: " + join(said, "; ") + ")",
                            clean.empty() ? "" : fmt::format(" and torch {} compiles it", join(clean, ", ")), entry_note,
                            f.where.front());
    f.fix = v.fix;
    out.push_back(std::move(f));
  }
  if (!stubs.empty()) {
    Finding f{"ignored-code", Severity::Info, "", "", {}, {}};
    for (const FlowHit* h : stubs) {
      f.where.push_back(fmt::format("{}: {} ({}:{})", join(h->entries, ", "), h->function, h->file, h->line));
      f.locations.push_back(code_location(*h));
    }
    f.message = fmt::format("{} place(s) run a stub of a @torch.jit.unused / @torch.jit.ignore(drop=True) function, which "
                            "raises: its code is not in the archive, so what torch.compile makes of it cannot be read here: {}",
                            f.where.size(), f.where.front());
    f.fix = "check the original Python with torch._dynamo.explain(model)(*inputs), or script the function instead of marking it "
            "unused";
    out.push_back(std::move(f));
  }
  if (traced_code(ck))
    out.push_back({"traced-archive", Severity::Info,
                   "this TorchScript code was made by torch.jit.trace (its debug records name torch.jit.trace's frames): it is "
                   "the path one example input took, so branches on tensor values, .item() calls and data-dependent shapes of "
                   "the original Python were frozen and cannot be checked here; torch.compile of the original module may "
                   "still break",
                   "check the original Python module with torch._dynamo.explain(model)(*inputs), or script it "
                   "(torch.jit.script) so that its control flow is kept",
                   {},
                   {}});
}

}  // namespace ckpt
