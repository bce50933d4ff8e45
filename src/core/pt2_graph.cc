// The graph of a serialized ExportedProgram (torch/_export/serde/schema.py's GraphModule): input and
// output specs with symbolic sizes, range constraints, the operator census, FLOPs and the module tree
// from nn_module_stack. Nothing runs: FLOPs come from tensor_values' sizes, with the counting rules of
// the example-input forward (src/torch/forward.cc, torch.utils.flop_counter's formulas).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/pt2.h"

namespace ckpt::pt2 {
namespace {

using J = nlohmann::json;

const J* child(const J& v, const char* key) {
  if (!v.is_object()) return nullptr;
  auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

std::string str_of(const J* v) { return v && v->is_string() ? v->get<std::string>() : std::string(); }

// The name of a tensor argument ({"as_tensor": {"name": x}}), "" for anything else.
std::string tensor_name(const J& arg) {
  const J* t = child(arg, "as_tensor");
  return t ? str_of(child(*t, "name")) : std::string();
}

// Concrete sizes of a graph value: static ints, symbols at their hint; nullopt if one has neither.
struct Shapes {
  const J* values = nullptr;  // graph.tensor_values
  bool symbolic = false;  // some size used so far was a symbol (at its hint)
  const J* meta(const std::string& name) const { return values && !name.empty() ? child(*values, name.c_str()) : nullptr; }
  std::optional<std::vector<int64_t>> of(const std::string& name) {
    const J* m = meta(name);
    const J* sizes = m ? child(*m, "sizes") : nullptr;
    if (!sizes || !sizes->is_array() || sizes->size() > 1024) return std::nullopt;
    std::vector<int64_t> out;
    for (const J& s : *sizes) {
      auto v = symint_value(s);
      if (!v || *v < 0) return std::nullopt;
      if (!child(s, "as_int")) symbolic = true;
      out.push_back(*v);
    }
    return out;
  }
};

uint64_t prod(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  uint64_t p = 1;
  for (size_t k = from; k < v.size() && k < to; ++k) p *= static_cast<uint64_t>(v[k]);
  return p;
}

// FLOPs of one call_function node; 0 for operators the forward does not count.
uint64_t node_flops(const J& node, const std::string& target, Shapes& sh) {
  static const std::string kAten = "torch.ops.aten.";
  if (target.compare(0, kAten.size(), kAten) != 0) return 0;
  const std::string op = target.substr(kAten.size(), target.find('.', kAten.size()) - kAten.size());
  const J* inputs = child(node, "inputs");
  if (!inputs || !inputs->is_array()) return 0;
  auto in = [&](size_t k) -> std::optional<std::vector<int64_t>> {
    if (k >= inputs->size()) return std::nullopt;
    const J* arg = child((*inputs)[k], "arg");
    return arg ? sh.of(tensor_name(*arg)) : std::nullopt;
  };
  auto named_bool = [&](const char* name) {
    for (const J& i : *inputs)
      if (str_of(child(i, "name")) == name)
        if (const J* arg = child(i, "arg"); arg)
          if (const J* b = child(*arg, "as_bool"); b && b->is_boolean()) return b->get<bool>();
    return false;
  };
  auto mm = [](const auto& a, const auto& b) -> uint64_t {
    if (!a || !b || a->size() != 2 || b->size() != 2) return 0;
    return 2 * static_cast<uint64_t>((*a)[0]) * static_cast<uint64_t>((*b)[1]) * static_cast<uint64_t>((*a)[1]);
  };
  auto bmm = [](const auto& a, const auto& b) -> uint64_t {
    if (!a || !b || a->size() != 3 || b->size() != 3) return 0;
    return 2 * static_cast<uint64_t>((*a)[0]) * static_cast<uint64_t>((*a)[1]) * static_cast<uint64_t>((*b)[2]) *
           static_cast<uint64_t>((*a)[2]);
  };
  if (op == "mm") return mm(in(0), in(1));
  if (op == "addmm" || op == "_addmm_activation") return mm(in(1), in(2));
  if (op == "bmm") return bmm(in(0), in(1));
  if (op == "baddbmm") return bmm(in(1), in(2));
  if (op == "linear") {  // runs as addmm / mm on the input flattened to 2-D
    const auto x = in(0), w = in(1);
    if (!x || !w || x->size() < 2 || w->size() != 2) return 0;
    return 2 * prod(*x, 0, x->size() - 1) * static_cast<uint64_t>(x->back()) * static_cast<uint64_t>((*w)[0]);
  }
  if (op == "matmul") {  // mm / bmm over the broadcast batch: 2 * output elements * inner size
    const auto a = in(0), b = in(1);
    const J* outs = child(node, "outputs");
    if (!a || !b || a->size() < 2 || b->size() < 2 || !outs || !outs->is_array() || outs->empty()) return 0;
    const auto o = sh.of(tensor_name((*outs)[0]));
    return o ? 2 * prod(*o) * static_cast<uint64_t>(a->back()) : 0;
  }
  const bool conv = op == "convolution" || op == "_convolution" || op == "conv1d" || op == "conv2d" || op == "conv3d";
  const bool tconv = op == "conv_transpose1d" || op == "conv_transpose2d" || op == "conv_transpose3d";
  if (conv || tconv) {
    const auto x = in(0), w = in(1);
    const J* outs = child(node, "outputs");
    if (!x || !w || w->size() < 3 || !outs || !outs->is_array() || outs->empty()) return 0;
    const auto o = sh.of(tensor_name((*outs)[0]));
    const bool transposed = tconv || (conv && named_bool("transposed"));
    // An unbatched input runs as a batch of one (conv2d unsqueezes it before convolution).
    const size_t lead = x->size() == w->size() ? 2 : x->size() + 1 == w->size() ? 1 : 0;
    if (!lead || !o || o->size() != x->size()) return 0;
    const uint64_t batch = lead == 2 ? static_cast<uint64_t>((*x)[0]) : 1;
    const uint64_t spatial = transposed ? prod(*x, lead) : prod(*o, lead);
    return 2 * batch * prod(*w) * spatial;
  }
  if (op == "scaled_dot_product_attention" || op == "_scaled_dot_product_flash_attention" ||
      op == "_scaled_dot_product_efficient_attention" || op == "_scaled_dot_product_cudnn_attention" ||
      op == "_scaled_dot_product_flash_attention_for_cpu") {
    // torch.utils.flop_counter counts the CUDA kernels these dispatch to; on CPU they run as
    // _scaled_dot_product_flash_attention_for_cpu, which it does not count (torch 2.6 - 2.14).
    const J* q0 = inputs->empty() ? nullptr : child((*inputs)[0], "arg");
    const J* qm = q0 ? sh.meta(tensor_name(*q0)) : nullptr;
    const J* dev = qm ? child(*qm, "device") : nullptr;
    if (!dev || str_of(child(*dev, "type")) == "cpu") return 0;
    const auto q = in(0), k = in(1), v = in(2);
    if (!q || !k || !v || q->size() < 2 || k->size() < 2 || v->size() < 2) return 0;
    const uint64_t batch = prod(*q, 0, q->size() - 2);
    const uint64_t sq = static_cast<uint64_t>((*q)[q->size() - 2]), d = static_cast<uint64_t>(q->back());
    const uint64_t sk = static_cast<uint64_t>((*k)[k->size() - 2]), dv = static_cast<uint64_t>(v->back());
    return 2 * batch * sq * sk * d + 2 * batch * sq * sk * dv;
  }
  return 0;
}

// torch's metadata_split: a "key,path,type" item split at commas outside brackets.
std::vector<std::string> split3(std::string_view item) {
  std::vector<std::string> out;
  size_t start = 0;
  int depth = 0;
  for (size_t k = 0; k < item.size(); ++k) {
    const char c = item[k];
    if (c == '[' || c == '(') ++depth;
    else if (c == ']' || c == ')') --depth;
    else if (c == ',' && depth == 0) {
      out.emplace_back(item.substr(start, k - start));
      start = k + 1;
    }
  }
  out.emplace_back(item.substr(start));
  return out;
}

// A module path as nn_module_stack records it ("conv" in torch >= 2.7; dynamo's source text such as
// "L['self'].layers[0]" or "L['self']._modules['conv']" before) as the dotted name named_modules() uses.
std::string fqn_of(std::string_view p) {
  size_t k = 0;
  if (p.compare(0, 2, "L[") == 0) {
    k = p.find(']');
    if (k == std::string_view::npos) return std::string(p);
    ++k;
  } else if (p.compare(0, 9, "L__self__") == 0) {
    return std::string(p.substr(p.size() > 9 && p[9] == '.' ? 10 : 9));
  } else {
    return std::string(p);
  }
  std::vector<std::string> parts;
  while (k < p.size()) {
    if (p[k] == '.') {
      const size_t end = p.find_first_of(".[", k + 1);
      parts.emplace_back(p.substr(k + 1, end == std::string_view::npos ? std::string_view::npos : end - k - 1));
      k = end == std::string_view::npos ? p.size() : end;
    } else if (p[k] == '[') {
      const size_t end = p.find(']', k);
      if (end == std::string_view::npos) return std::string(p);
      std::string_view in = p.substr(k + 1, end - k - 1);
      if (in.size() >= 2 && (in.front() == '\'' || in.front() == '"')) in = in.substr(1, in.size() - 2);
      parts.emplace_back(in);
      k = end + 1;
    } else {
      return std::string(p);  // getattr(...) and other source forms: kept as written
    }
  }
  std::string out;
  for (const std::string& s : parts) {
    if (s == "_modules") continue;
    out += out.empty() ? s : "." + s;
  }
  return out;
}

std::string short_type(const std::string& q) {
  const auto dot = q.rfind('.');
  return dot == std::string::npos ? q : q.substr(dot + 1);
}

// A spec's argument: the graph value it names, and for tensors their dtype and sizes.
void fill_arg(const J& arg, const J* values, Pt2Spec& s) {
  if (const J* t = child(arg, "as_tensor")) s.name = str_of(child(*t, "name"));
  else if (const J* n = child(arg, "name"); n && n->is_string()) s.name = n->get<std::string>();  // TensorArgument
  else if (arg.is_object() && !arg.empty()) {
    const auto it = arg.begin();
    const J* nm = child(it.value(), "as_name");
    s.name = nm ? str_of(nm) : str_of(child(it.value(), "name"));
    if (s.name.empty()) {
      s.value = it.value().dump();
      if (s.value.size() > 80) s.value = s.value.substr(0, 77) + "...";
    }
    return;
  }
  const J* m = values && !s.name.empty() ? child(*values, s.name.c_str()) : nullptr;
  if (!m) return;
  if (const J* dt = child(*m, "dtype"); dt && dt->is_number_integer())
    if (const DType* d = dtype_of(dt->get<int64_t>())) s.dtype = d->name;
  if (const J* sizes = child(*m, "sizes"); sizes && sizes->is_array() && sizes->size() <= 1024)
    for (const J& x : *sizes) s.shape.push_back(symint_text(x));
}

void read_specs(const Doc<J>& d, const J& list, const std::string& ptr, const J* values, std::vector<Pt2Spec>& out,
                const Limits& lim) {
  if (!list.is_array()) d.fail(ptr, "not an array");
  if (list.size() > lim.tensors) d.fail(ptr, fmt::format("{} specs (at most {})", list.size(), lim.tensors));
  for (size_t k = 0; k < list.size(); ++k) {
    const J& spec = list[k];
    if (!spec.is_object() || spec.size() != 1) d.fail(fmt::format("{}/{}", ptr, k), "not a one-member spec object");
    Pt2Spec s;
    s.kind = spec.begin().key();
    const J& body = spec.begin().value();
    if (const J* arg = child(body, "arg")) fill_arg(*arg, values, s);
    for (const char* t :
         {"parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "user_input_name", "target"})
      if (const J* v = child(body, t); v && v->is_string()) s.target = v->get<std::string>();
    if (s.kind == "buffer")
      if (const J* p = child(body, "persistent"); p && p->is_boolean() && !p->get<bool>()) s.kind = "buffer_non_persistent";
    out.push_back(std::move(s));
  }
}

std::optional<int64_t> bound(const Doc<J>& d, const J* v, const std::string& ptr) {
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX)) return v->get<int64_t>();
  if (v->is_number_float()) return std::nullopt;  // inf as some writers put it
  d.fail(ptr, "not an integer, null or inf");
}

}  // namespace

void read_graph(const Doc<J>& d, Pt2Model& m, std::vector<Module>* modules, const Limits& lim) {
  const J& root = d.j;
  const J* gm = child(root, "graph_module");
  if (!gm || !gm->is_object()) d.fail("/graph_module", "missing or not an object");
  m.torch_version = str_of(child(root, "torch_version"));
  if (const J* sv = child(root, "schema_version"); sv && sv->is_object())
    m.schema_version = fmt::format("{}.{}", child(*sv, "major") ? child(*sv, "major")->dump() : "?",
                                   child(*sv, "minor") ? child(*sv, "minor")->dump() : "?");
  const J* graph = child(*gm, "graph");
  if (!graph || !graph->is_object()) d.fail("/graph_module/graph", "missing or not an object");
  const J* values = child(*graph, "tensor_values");
  if (values && !values->is_object()) d.fail("/graph_module/graph/tensor_values", "not an object");
  const J* sig = child(*gm, "signature");
  if (!sig || !sig->is_object()) d.fail("/graph_module/signature", "missing or not an object");
  const J* ins = child(*sig, "input_specs");
  const J* outs = child(*sig, "output_specs");
  if (!ins) d.fail("/graph_module/signature/input_specs", "missing");
  if (!outs) d.fail("/graph_module/signature/output_specs", "missing");
  read_specs(d, *ins, "/graph_module/signature/input_specs", values, m.inputs, lim);
  read_specs(d, *outs, "/graph_module/signature/output_specs", values, m.outputs, lim);

  if (const J* rc = child(root, "range_constraints")) {
    if (!rc->is_object()) d.fail("/range_constraints", "not an object");
    for (auto it = rc->begin(); it != rc->end(); ++it) {
      const std::string ptr = "/range_constraints/" + it.key();
      if (!it->is_object()) d.fail(ptr, "not an object");
      m.ranges.push_back(
          {it.key(), bound(d, child(*it, "min_val"), ptr + "/min_val"), bound(d, child(*it, "max_val"), ptr + "/max_val")});
    }
  }

  const J* nodes = child(*graph, "nodes");
  if (!nodes || !nodes->is_array()) d.fail("/graph_module/graph/nodes", "missing or not an array");
  if (nodes->size() > lim.walk_nodes)
    d.fail("/graph_module/graph/nodes", fmt::format("{} nodes (at most {})", nodes->size(), lim.walk_nodes));
  m.nodes = nodes->size();
  std::unordered_map<std::string, uint64_t> census;
  Shapes sh{values};
  std::map<std::string, std::string> types;  // module name -> qualified type, first seen
  std::vector<std::string> order;
  auto note = [&](const std::string& name, const std::string& type) {
    auto [it, fresh] = types.emplace(name, type);
    if (fresh) order.push_back(name);
    else if (it->second.empty()) it->second = type;
  };
  if (modules) {
    note("", "");
    if (const J* calls = child(*gm, "module_call_graph"); calls && calls->is_array())
      for (const J& c : *calls)
        if (const J* f = child(c, "fqn"); f && f->is_string()) note(f->get<std::string>(), "");
  }
  for (size_t k = 0; k < nodes->size(); ++k) {
    const J& node = (*nodes)[k];
    const std::string target = str_of(child(node, "target"));
    if (target.empty()) d.fail(fmt::format("/graph_module/graph/nodes/{}/target", k), "missing or not a string");
    ++census[target];
    m.flops += node_flops(node, target, sh);
    if (!modules) continue;
    const J* md = child(node, "metadata");
    const std::string stack = md ? str_of(child(*md, "nn_module_stack")) : std::string();
    for (size_t start = 0; start < stack.size();) {
      size_t end = stack.find(';', start);
      if (end == std::string::npos) end = stack.size();
      const auto parts = split3(std::string_view(stack).substr(start, end - start));
      // torch 2.6 marks nodes whose stack a metadata hook emptied with this pseudo entry: no module
      if (parts.size() == 3 && parts[1] != "_empty_nn_module_stack_from_metadata_hook") note(fqn_of(parts[1]), parts[2]);
      start = end + 1;
    }
  }
  m.flops_basis = sh.symbolic ? "hints" : "static";
  for (const auto& [op, n] : census) m.ops.emplace_back(op, n);
  std::sort(m.ops.begin(), m.ops.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (modules)
    for (const std::string& name : order) {
      Module mod;
      mod.name = name;
      mod.qualified_type = types[name];
      mod.type = short_type(mod.qualified_type);
      modules->push_back(std::move(mod));
    }
}

}  // namespace ckpt::pt2
