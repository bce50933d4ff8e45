#include "torch/forward.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unordered_set>

#include "core/dtype.h"
#include "core/error.h"
#include "core/load_report.h"
#include "torch/materialize.h"

namespace ckpt::torchb {
namespace {

using J = nlohmann::ordered_json;
using torch::jit::Node;
using torch::jit::Stack;

// Lightning's parse_batch_shape, with dicts kept as objects.
J sizes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return "?";
    return J(t.sizes().vec());
  }
  if (v.isTuple()) {
    J a = J::array();
    for (const c10::IValue& e : v.toTupleRef().elements()) a.push_back(sizes(e));
    return a;
  }
  if (v.isList()) {
    J a = J::array();
    for (const c10::IValue& e : v.toListRef()) a.push_back(sizes(e));
    return a;
  }
  if (v.isGenericDict()) {
    J o = J::object();
    for (const auto& kv : v.toGenericDict()) {
      const c10::IValue& k = kv.key();
      const std::string key = k.isString() ? k.toStringRef() : k.isInt() ? std::to_string(k.toInt()) : "?";
      o[key] = sizes(kv.value());
    }
    return o;
  }
  return "?";
}

J sizes_of_args(c10::ArrayRef<c10::IValue> args) {
  if (args.size() == 1) return sizes(args[0]);
  J a = J::array();
  for (const c10::IValue& e : args) a.push_back(sizes(e));
  return a;
}

bool equals_default(const c10::IValue& v, const c10::optional<c10::IValue>& d) {
  if (!d) return false;
  if (v.isNone() || d->isNone()) return v.isNone() && d->isNone();
  if (v.isBool() && d->isBool()) return v.toBool() == d->toBool();
  if ((v.isInt() || v.isDouble()) && (d->isInt() || d->isDouble())) return v.toScalar().toDouble() == d->toScalar().toDouble();
  if (v.isString() && d->isString()) return v.toStringRef() == d->toStringRef();
  return false;
}

// One bracketed call site: the submodule attribute it calls through (for modules named_modules() does
// not list) and the callee's declared defaults, argument by argument after self.
struct Site {
  std::string attr;
  std::vector<c10::optional<c10::IValue>> defaults;
};

struct Recorder {
  std::vector<Site> sites;
  std::unordered_map<const void*, std::string> path_of;  // module object -> its first named_modules() path
  std::vector<std::string> stack;  // modules running, innermost last
  ForwardReport* report = nullptr;
  int counted_depth = 0;  // counted operators enclosing the current one

  void enter(c10::ArrayRef<c10::IValue> in) {  // (site id, module, args...)
    const Site& site = sites.at(static_cast<size_t>(in[0].toInt()));
    auto it = in[1].isObject() ? path_of.find(in[1].toObject().get()) : path_of.end();
    std::string path = it != path_of.end()                     ? it->second
                       : stack.empty() || stack.back().empty() ? site.attr
                                                               : stack.back() + "." + site.attr;
    c10::ArrayRef<c10::IValue> args = in.slice(2);
    size_t n = args.size();
    while (n > 0 && n <= site.defaults.size() && equals_default(args[n - 1], site.defaults[n - 1])) --n;
    ModuleForward& m = report->modules[path];
    m.in_sizes = sizes_of_args(args.slice(0, n));
    ++m.calls;
    stack.push_back(std::move(path));
  }

  void exit(c10::ArrayRef<c10::IValue> in) {  // (site id, module, result)
    if (stack.empty()) return;
    ModuleForward& m = report->modules[stack.back()];
    m.out_sizes = sizes_of_args(in.slice(2));
    report->completed.push_back(stack.back());
    stack.pop_back();
  }

  void add_flops(uint64_t f) {
    report->flops += f;
    std::unordered_set<std::string_view> done;  // recursion: count a module once per operator
    for (const std::string& p : stack)
      if (done.insert(p).second) report->modules[p].flops += f;
  }
};

thread_local Recorder* t_recorder = nullptr;

// Created per node (OperationCreator), so the input count is known here; the interpreter pushes the
// inputs only.
torch::jit::Operation recording_op(const Node* node, bool enter) {
  const size_t n = node->inputs().size();
  return [enter, n](Stack& stack) {
    if (Recorder* r = t_recorder) {
      auto in = torch::jit::last(stack, n);
      enter ? r->enter(in) : r->exit(in);
    }
    torch::jit::drop(stack, n);
  };
}

// CONSERVATIVE: the nodes have side effects, so no pass removes or reorders them.
torch::jit::RegisterOperators register_recorders({
    torch::jit::Operator(
        c10::Symbol::fromQualString("ckpt::enter"), [](const Node* n) { return recording_op(n, true); },
        c10::AliasAnalysisKind::CONSERVATIVE),
    torch::jit::Operator(
        c10::Symbol::fromQualString("ckpt::exit"), [](const Node* n) { return recording_op(n, false); },
        c10::AliasAnalysisKind::CONSERVATIVE),
});

void bracket_calls(torch::jit::Block* block, Recorder& rec) {
  std::vector<Node*> calls;
  for (Node* n : block->nodes()) {
    for (torch::jit::Block* b : n->blocks()) bracket_calls(b, rec);
    if (n->kind() == c10::prim::CallMethod && n->s(c10::attr::name) == "forward") calls.push_back(n);
  }
  for (Node* n : calls) {
    auto cls = n->input(0)->type()->cast<c10::ClassType>();
    if (!cls || !cls->is_module()) continue;
    Site site;
    if (n->input(0)->node()->kind() == c10::prim::GetAttr) site.attr = n->input(0)->node()->s(c10::attr::name);
    if (torch::jit::Function* callee = cls->findMethod("forward")) {
      const auto& args = callee->getSchema().arguments();
      for (size_t k = 1; k < args.size(); ++k) site.defaults.push_back(args[k].default_value());
    }
    torch::jit::Graph* g = n->owningGraph();
    torch::jit::Value* id;
    {
      torch::jit::WithInsertPoint here(n);
      id = g->insertConstant(static_cast<int64_t>(rec.sites.size()));
    }
    rec.sites.push_back(std::move(site));
    std::vector<torch::jit::Value*> in{id};
    for (torch::jit::Value* v : n->inputs()) in.push_back(v);
    g->create(c10::Symbol::fromQualString("ckpt::enter"), in, 0)->insertBefore(n);
    std::vector<torch::jit::Value*> out{id, n->input(0)};
    for (torch::jit::Value* v : n->outputs()) out.push_back(v);
    g->create(c10::Symbol::fromQualString("ckpt::exit"), out, 0)->insertAfter(n);
  }
}

// ---- FLOPs ----

using OpInputs = c10::ArrayRef<const c10::IValue>;  // RecordFunction::inputs()

enum class Flop { None, Mm, Addmm, Bmm, Baddbmm, Conv, Attention };

Flop classify(const char* name) {
  if (std::strncmp(name, "aten::", 6) != 0) return Flop::None;
  const char* op = name + 6;
  if (!std::strcmp(op, "mm")) return Flop::Mm;
  if (!std::strcmp(op, "addmm") || !std::strcmp(op, "_addmm_activation"))
    return Flop::Addmm;  // the latter: fused linear + ReLU/GELU
  if (!std::strcmp(op, "bmm")) return Flop::Bmm;
  if (!std::strcmp(op, "baddbmm")) return Flop::Baddbmm;
  if (!std::strcmp(op, "convolution") || !std::strcmp(op, "_convolution")) return Flop::Conv;
  if (!std::strcmp(op, "scaled_dot_product_attention") || !std::strcmp(op, "_scaled_dot_product_flash_attention") ||
      !std::strcmp(op, "_scaled_dot_product_efficient_attention") || !std::strcmp(op, "_scaled_dot_product_cudnn_attention") ||
      !std::strcmp(op, "_scaled_dot_product_flash_attention_for_cpu"))
    return Flop::Attention;
  return Flop::None;
}

std::vector<int64_t> shape_at(OpInputs in, size_t k) {
  if (k >= in.size() || !in[k].isTensor()) return {};
  return in[k].toTensor().sizes().vec();
}

std::vector<int64_t> ints_at(OpInputs in, size_t k) {
  if (k >= in.size() || !in[k].isIntList()) return {};
  return in[k].toIntVector();
}

uint64_t prod(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  uint64_t p = 1;
  for (size_t k = from; k < v.size() && k < to; ++k) p *= static_cast<uint64_t>(v[k]);
  return p;
}

uint64_t mm_flops(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != 2 || b.size() != 2) return 0;
  return 2 * static_cast<uint64_t>(a[0]) * static_cast<uint64_t>(b[1]) * static_cast<uint64_t>(a[1]);
}

uint64_t bmm_flops(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != 3 || b.size() != 3) return 0;
  return 2 * static_cast<uint64_t>(a[0]) * static_cast<uint64_t>(a[1]) * static_cast<uint64_t>(b[2]) *
         static_cast<uint64_t>(a[2]);
}

uint64_t conv_flops(OpInputs in) {
  // convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
  const auto x = shape_at(in, 0), w = shape_at(in, 1);
  if (x.size() < 3 || w.size() != x.size()) return 0;
  const bool transposed = in.size() > 6 && in[6].isBool() && in[6].toBool();
  std::vector<int64_t> spatial(x.begin() + 2, x.end());
  if (!transposed) {
    const auto stride = ints_at(in, 3), padding = ints_at(in, 4), dilation = ints_at(in, 5);
    auto at = [](const std::vector<int64_t>& v, size_t k, int64_t dflt) {
      return v.empty() ? dflt : v[std::min(k, v.size() - 1)];
    };
    for (size_t k = 0; k < spatial.size(); ++k) {
      const int64_t s = at(stride, k, 1), p = at(padding, k, 0), d = at(dilation, k, 1);
      spatial[k] = (x[k + 2] + 2 * p - d * (w[k + 2] - 1) - 1) / s + 1;
    }
  }
  return prod(spatial) * prod(w, 2) * static_cast<uint64_t>(x[0]) * static_cast<uint64_t>(w[0]) * static_cast<uint64_t>(w[1]) * 2;
}

uint64_t attention_flops(OpInputs in) {
  const auto q = shape_at(in, 0), k = shape_at(in, 1), v = shape_at(in, 2);
  if (q.size() < 2 || k.size() < 2 || v.size() < 2) return 0;
  const uint64_t batch = prod(q, 0, q.size() - 2);
  const uint64_t sq = static_cast<uint64_t>(q[q.size() - 2]), d = static_cast<uint64_t>(q.back());
  const uint64_t sk = static_cast<uint64_t>(k[k.size() - 2]), dv = static_cast<uint64_t>(v.back());
  return 2 * batch * sq * sk * d + 2 * batch * sq * sk * dv;
}

uint64_t flops_of(Flop f, OpInputs in) {
  switch (f) {
    case Flop::Mm: return mm_flops(shape_at(in, 0), shape_at(in, 1));
    case Flop::Addmm: return mm_flops(shape_at(in, 1), shape_at(in, 2));
    case Flop::Bmm: return bmm_flops(shape_at(in, 0), shape_at(in, 1));
    case Flop::Baddbmm: return bmm_flops(shape_at(in, 1), shape_at(in, 2));
    case Flop::Conv: return conv_flops(in);
    case Flop::Attention: return attention_flops(in);
    case Flop::None: break;
  }
  return 0;
}

struct Counted : at::ObserverContext {};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  Recorder* r = t_recorder;
  if (!r) return nullptr;
  const Flop f = classify(fn.name());
  if (f == Flop::None) return nullptr;
  if (r->counted_depth++ == 0) {
    // A boxed call (the TorchScript interpreter's) hands the whole interpreter stack as inputs: the
    // operator's own are the last ones.
    OpInputs in = fn.inputs();
    if (auto schema = fn.operator_schema(); schema && in.size() > schema->arguments().size())
      in = in.slice(in.size() - schema->arguments().size());
    r->add_flops(flops_of(f, in));
  }
  return std::make_unique<Counted>();
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx && t_recorder) --t_recorder->counted_depth;
}

// LibTorch's message without its TorchScript traceback: the last "...Error: " line of an interpreter
// error, else the first line.
std::string libtorch_message(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  std::string msg = c10e ? c10e->what_without_backtrace() : e.what();
  size_t best = std::string::npos;
  for (size_t pos = 0; pos < msg.size();) {
    const size_t end = std::min(msg.find('\n', pos), msg.size());
    const std::string_view line(msg.data() + pos, end - pos);
    const size_t colon = line.find("Error: ");
    if (colon != std::string_view::npos && line.find(' ') > colon) best = pos + colon + 7;
    pos = end + 1;
  }
  const size_t from = best == std::string::npos ? 0 : best;
  std::string line = msg.substr(from, msg.find('\n', from) - from);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

// The whole of `text` as a decimal integer.
std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

ExampleInputs parse_example_inputs(const std::vector<std::string>& specs, c10::Device device) {
  ExampleInputs out;
  at::manual_seed(0);
  for (const std::string& spec : specs) {
    auto bad = [&](const std::string& why) {
      return UsageError(
          fmt::format("--example-input {}: {} (expected DIMS[:DTYPE[:LOW..HIGH]], e.g. 2x3x224x224 or "
                      "1x128:int64:0..50257)",
                      spec, why));
    };
    std::vector<std::string> parts;
    for (size_t pos = 0;;) {
      const size_t c = spec.find(':', pos);
      parts.push_back(spec.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
      if (c == std::string::npos) break;
      pos = c + 1;
    }
    if (parts.size() > 3) throw bad("too many ':'");
    ForwardInput d;
    for (size_t pos = 0;;) {
      const size_t x = parts[0].find('x', pos);
      const std::string dim = parts[0].substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      const auto n = parse_int(dim);
      if (!n || *n < 0) throw bad(fmt::format("'{}' is not a dimension", dim));
      d.shape.push_back(*n);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    const DType* dt = dtype_by_name(parts.size() > 1 ? parts[1] : "float32");
    const auto st = dt ? scalar_type(*dt) : std::nullopt;
    if (!st) throw bad(fmt::format("unknown dtype '{}'", parts.size() > 1 ? parts[1] : ""));
    d.dtype = dtype_name(*st);
    const bool integral = at::isIntegralType(*st, /*includeBool=*/true);
    if (parts.size() > 2) {
      if (!integral) throw bad("a value range is for integer and bool inputs");
      const std::string& r = parts[2];
      const size_t dots = r.find("..");
      const auto lo = dots == std::string::npos ? std::nullopt : parse_int(r.substr(0, dots));
      const auto hi = dots == std::string::npos ? std::nullopt : parse_int(r.substr(dots + 2));
      if (!lo || !hi) throw bad("expected LOW..HIGH with integers");
      if (*hi <= *lo) throw bad("HIGH must be greater than LOW");
      d.range = std::make_pair(*lo, *hi);
    } else if (integral) {
      d.range = std::make_pair(int64_t{0}, int64_t{2});
    }
    at::Tensor t = integral ? at::randint(d.range->first, d.range->second, d.shape, at::TensorOptions().dtype(at::kLong)).to(*st)
                            : at::randn(d.shape, at::TensorOptions().dtype(*st));
    out.args.emplace_back(t.to(device));
    out.described.push_back(std::move(d));
  }
  return out;
}

ExampleInputs load_example_inputs(const Checkpoint& ck, c10::Device device) {
  ExampleInputs out;
  if (ck.tensors.empty())
    throw InputError(ck.path, "expected a tensor, or a tuple, list or dict of tensors (torch.save); found no tensor");
  std::vector<Target> targets;
  for (const Tensor& t : ck.tensors) targets.push_back({t.name, &t});
  LoadReport rep;
  MaterializeOptions mo;
  auto loaded = materialize(ck, targets, mo, rep);
  if (loaded.size() != ck.tensors.size())
    throw InputError(ck.path, "cannot use every tensor of it as an input (lazy, meta, sparse or a dtype this LibTorch lacks)");
  // Positional when the names are the indices of a tuple / list ("" for a bare tensor), else keywords.
  bool positional = true;
  for (size_t k = 0; k < loaded.size(); ++k)
    positional &= loaded[k].first == std::to_string(k) || (loaded.size() == 1 && loaded[k].first.empty());
  for (auto& [name, t] : loaded) {
    if (!positional && (name.empty() || name.find('.') != std::string::npos))
      throw InputError(ck.path,
                       fmt::format("'{}': expected a tensor, a tuple or list of tensors, or a dict of name -> tensor", name));
    at::Tensor copy = t.to(device, /*non_blocking=*/false, /*copy=*/true);  // writable: the model may work in place
    ForwardInput d;
    d.name = positional ? "" : name;
    d.shape = copy.sizes().vec();
    d.dtype = dtype_name(copy.scalar_type());
    out.described.push_back(d);
    if (positional) out.args.emplace_back(copy);
    else out.kwargs.emplace(name, copy);
  }
  return out;
}

ForwardReport run_forward(torch::jit::Module& module, const ExampleInputs& in) {
  ForwardReport report;
  report.inputs = in.described;
  Recorder rec;
  rec.report = &report;
  std::unordered_set<const torch::jit::Function*> done;
  size_t submodules = 0;
  for (const auto& nm : module.named_modules()) {
    rec.path_of.emplace(nm.value._ivalue().get(), nm.name);
    if (!nm.name.empty()) {
      ++submodules;
      report.modules.emplace(nm.name, ModuleForward{});  // "?" until it runs
    }
    for (torch::jit::Function* fn : nm.value.type()->methods()) {
      if (!done.insert(fn).second || !fn->isGraphFunction()) continue;
      bracket_calls(torch::jit::toGraphFunction(*fn).graph()->block(), rec);
    }
  }
  report.per_module = submodules == 0 || !rec.sites.empty();

  module.eval();
  // The optimizing executor would specialize and fuse on later runs; one plain interpreted run is what
  // is measured and recorded.
  torch::jit::GraphOptimizerEnabledGuard no_opt(false);
  at::NoGradGuard no_grad;
  t_recorder = &rec;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_op_start, on_op_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    std::vector<c10::IValue> args = in.args;
    c10::IValue out = module.get_method("forward")(std::move(args), in.kwargs);
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.out_sizes = sizes(out);
    ModuleForward& root = report.modules[""];  // the root's row (a Lightning state dict's 'model.')
    std::vector<c10::IValue> all = in.args;
    for (const auto& kv : in.kwargs) all.push_back(kv.second);
    root.in_sizes = sizes_of_args(all);
    root.out_sizes = report.out_sizes;
    root.flops = report.flops;
    root.calls = 1;
  } catch (const std::exception& e) {
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.error = libtorch_message(e);
    if (report.error.empty()) report.error = "forward failed";
    report.error_module = rec.stack.empty() ? "" : rec.stack.back();
  }
  at::removeCallback(handle);
  t_recorder = nullptr;
  return report;
}

}  // namespace ckpt::torchb
