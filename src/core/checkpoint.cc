// The names checkpoint.h's enums have in output, and the JSON that summary writes from the typed
// metadata: one place, so that every renderer prints the same words and the JSON keeps its key order.
#include "core/checkpoint.h"

#include <algorithm>
#include <array>

namespace ckpt {

const char* to_string(TensorState s) {
  switch (s) {
    case TensorState::Materialized: return "materialized";
    case TensorState::Uninitialized: return "uninitialized";
    case TensorState::Meta: return "meta";
  }
  return "?";
}
const char* to_string(TensorKind k) {
  return k == TensorKind::Parameter ? "parameter" : k == TensorKind::Buffer ? "buffer" : "attribute";
}
const char* to_string(Severity s) {
  switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "?";
}

const char* to_string(Format f) {
  switch (f) {
    case Format::None: return "";
    case Format::TorchZip: return "torch-zip";
    case Format::TorchLegacy: return "torch-legacy";
    case Format::Pickle: return "pickle";
    case Format::Lightning: return "lightning";
    case Format::TorchScript: return "torchscript";
    case Format::Safetensors: return "safetensors";
    case Format::Dcp: return "dcp";
    case Format::Sharded: return "sharded";
    case Format::Pt2: return "pt2";
  }
  return "?";
}

const char* to_string(SideKind k) {
  switch (k) {
    case SideKind::Pickle: return "pickle";
    case SideKind::Zip: return "zip";
    case SideKind::Tar: return "tar";
    case SideKind::Other: return "other";
  }
  return "?";
}

const char* to_string(Container c) {
  switch (c) {
    case Container::None: return "";
    case Container::Zip: return "zip";
    case Container::Legacy: return "legacy";
    case Container::Pickle: return "pickle";
    case Container::Safetensors: return "safetensors";
    case Container::Dcp: return "dcp";
    case Container::Shards: return "shards";
  }
  return "?";
}

const char* to_string(Content c) {
  switch (c) {
    case Content::None: return "";
    case Content::StateDict: return "state_dict";
    case Content::Module: return "module";
    case Content::Lightning: return "lightning";
    case Content::Checkpoint: return "checkpoint";
    case Content::Object: return "object";
    case Content::Tensors: return "tensors";
  }
  return "?";
}

namespace {
constexpr std::array<std::pair<Layout, const char*>, 11> kLayouts{{
    {Layout::Strided, "strided"},
    {Layout::Sparse, "sparse"},
    {Layout::SparseCoo, "sparse_coo"},
    {Layout::SparseCsr, "sparse_csr"},
    {Layout::SparseCsc, "sparse_csc"},
    {Layout::SparseBsr, "sparse_bsr"},
    {Layout::SparseBsc, "sparse_bsc"},
    {Layout::Quantized, "quantized"},
    {Layout::Nested, "nested"},
    {Layout::Opaque, "opaque"},
    {Layout::Other, "other"},
}};
}  // namespace

const char* to_string(Layout l) {
  for (const auto& [layout, name] : kLayouts)
    if (layout == l) return name;
  return "?";
}

Layout layout_from_name(std::string_view name) {
  for (const auto& [layout, text] : kLayouts)
    if (layout != Layout::Other && name == text) return layout;
  return Layout::Other;
}

std::string Tensor::layout_text() const { return layout == Layout::Other ? x->layout_name : to_string(layout); }

void TrainingInfo::claim(const std::string& key) {
  if (key == "callbacks") callbacks.reset();
  if (key == "callback_tensors") callback_tensors.reset();
  if (key == "loops") loops.reset();
  auto named = [&](const auto& kv) { return kv.first == key; };
  states.erase(std::remove_if(states.begin(), states.end(), named), states.end());
  data.erase(std::remove_if(data.begin(), data.end(), named), data.end());
  if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
}

const TrainingInfo::State* TrainingInfo::state(std::string_view key) const {
  for (const auto& [k, s] : states)
    if (k == key) return &s;
  return nullptr;
}

const TrainingInfo::Data* TrainingInfo::entry(std::string_view key) const {
  for (const auto& [k, d] : data)
    if (k == key) return &d;
  return nullptr;
}

std::string container_text(const Checkpoint& ck) {
  if (ck.container != Container::Shards) return to_string(ck.container);
  return ck.sharded.shards.empty() ? "" : to_string(ck.sharded.shards.back().format);
}

using J = nlohmann::ordered_json;

J state_json(const TrainingInfo::State& s) { return J{{"count", s.count}, {"tensors", s.held.tensors}, {"bytes", s.held.bytes}}; }

J data_json(const TrainingInfo::Data& d) { return d.held ? J{{"tensors", d.held->tensors}, {"bytes", d.held->bytes}} : d.value; }

J methods_json(const TorchScriptInfo& ts) {
  J out = J::array();
  for (const TsMethodInfo& m : ts.methods)
    out.push_back({{"name", m.name},
                   {"reachable_from_forward", m.reachable_from_forward},
                   {"entry_point", m.entry_point},
                   {"calls", m.calls}});
  return out;
}

namespace {

// A size as the file has it: an int, or a symbol expression as text.
J dim_json(const std::string& d) {
  const size_t digits = !d.empty() && d[0] == '-' ? 1 : 0;  // what symint_text writes for an int: [-]digits
  if (d.size() > digits && d.size() < 19 && d.find_first_not_of("0123456789", digits) == std::string::npos)
    return std::stoll(d);
  return d;
}

J specs_json(const std::vector<Pt2Spec>& specs) {
  J out = J::array();
  for (const Pt2Spec& s : specs) {
    J one{{"kind", s.kind}, {"name", s.name}, {"target", s.target.empty() ? J() : J(s.target)}};
    if (!s.dtype.empty()) {
      J shape = J::array();
      for (const std::string& d : s.shape) shape.push_back(dim_json(d));
      one["dtype"] = s.dtype;
      one["shape"] = std::move(shape);
    }
    if (!s.value.empty()) one["value"] = s.value;
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace

J pt2_json(const Pt2Info& p) {
  J models = J::array();
  for (const Pt2Model& m : p.models) {
    J ranges = J::array();
    for (const Pt2Range& r : m.ranges)
      ranges.push_back({{"symbol", r.symbol}, {"min", r.min ? J(*r.min) : J()}, {"max", r.max ? J(*r.max) : J()}});
    J ops = J::object();
    for (const auto& [op, n] : m.ops) ops[op] = n;
    J constants = J::array();
    for (const Pt2Constant& c : m.constants) {
      J shape = J::array();
      for (const std::string& d : c.shape) shape.push_back(dim_json(d));
      constants.push_back({{"name", c.name},
                           {"kind", c.kind},
                           {"dtype", c.dtype.empty() ? J() : J(c.dtype)},
                           {"shape", c.dtype.empty() ? J() : shape},
                           {"bytes", c.bytes},
                           {"path", c.path.empty() ? J() : J(c.path)}});
    }
    J samples = J::array();
    for (const Pt2Tensor& t : m.sample_tensors) samples.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
    models.push_back({{"name", m.name},
                      {"member", m.member},
                      {"torch_version", m.torch_version},
                      {"schema_version", m.schema_version},
                      {"nodes", m.nodes},
                      {"tensors", m.tensors},
                      {"parameters", m.parameters},
                      {"buffers", m.buffers},
                      {"bytes", m.bytes},
                      {"inputs", specs_json(m.inputs)},
                      {"outputs", specs_json(m.outputs)},
                      {"range_constraints", std::move(ranges)},
                      {"ops", std::move(ops)},
                      {"flops", m.flops},
                      {"flops_basis", m.flops_basis},
                      {"constants", std::move(constants)},
                      {"sample_inputs", m.sample_inputs.empty() ? J() : J{{"member", m.sample_inputs}, {"tensors", samples}}}});
  }
  J aoti = J::array();
  for (const Pt2Artifact& a : p.aoti) aoti.push_back({{"path", a.path}, {"kind", a.kind}, {"bytes", a.bytes}});
  return {{"layout", p.layout},
          {"archive_format", p.archive_format.empty() ? J() : J(p.archive_format)},
          {"archive_version", p.archive_version.empty() ? J() : J(p.archive_version)},
          {"main_model", p.main_model},
          {"models", std::move(models)},
          {"aotinductor", std::move(aoti)}};
}

J metadata_json(const Checkpoint& ck) {
  J md = J::object();
  const TrainingInfo& tr = ck.training;
  for (const std::string& key : tr.order) {
    if (key == "callbacks" && tr.callbacks) md[key] = *tr.callbacks;
    else if (key == "callback_tensors" && tr.callback_tensors)
      md[key] = J{{"tensors", tr.callback_tensors->tensors}, {"bytes", tr.callback_tensors->bytes}};
    else if (key == "loops" && tr.loops) md[key] = *tr.loops;
    else if (const TrainingInfo::State* s = tr.state(key)) md[key] = state_json(*s);
    else if (const TrainingInfo::Data* d = tr.entry(key)) md[key] = data_json(*d);
  }

  if (ck.format == Format::TorchScript) {
    const TorchScriptInfo& ts = ck.torchscript;
    if (ts.constants) {
      J items = J::array();
      for (const TsConstant& c : ts.constants->items)
        items.push_back(c.is_tensor ? J{{"name", c.name}, {"dtype", c.dtype}, {"shape", c.shape}, {"numel", c.numel}}
                                    : J{{"name", c.name}, {"value", c.value}});
      md["constants"] = {{"count", ts.constants->count},
                         {"tensors", ts.constants->tensors},
                         {"elements", ts.constants->elements},
                         {"bytes", ts.constants->bytes},
                         {"items", std::move(items)}};
      md["frozen"] = ts.frozen;
    }
    J files = J::array();
    for (const TsExtraFile& f : ts.extra_files) files.push_back({{"name", f.name}, {"bytes", f.bytes}});
    md["extra_files"] = std::move(files);
    md["mobile"] = ts.mobile;
  }

  if (ck.hf) md["hf"] = hf_json(*ck.hf);

  if (ck.safetensors_metadata) {
    J m = J::object();
    for (const auto& [k, v] : *ck.safetensors_metadata) m[k] = v;
    md["__metadata__"] = std::move(m);
  }

  if (ck.format == Format::Sharded) {
    if (ck.sharded.index_metadata) md["index_metadata"] = *ck.sharded.index_metadata;
    J shards = J::array();
    for (const ShardInfo& s : ck.sharded.shards)
      shards.push_back({{"file", s.file}, {"format", to_string(s.format)}, {"tensors", s.tensors}, {"bytes", s.bytes}});
    md["shards"] = std::move(shards);
  }

  if (ck.format == Format::Pt2) md["pt2"] = pt2_json(ck.pt2);

  if (ck.format == Format::Dcp) {
    md["bytes_entries"] = ck.dcp.bytes_entries;
    J files = J::object();
    for (const auto& [name, size] : ck.dcp.files) files[name] = size;
    md["files"] = std::move(files);
  }
  return md;
}

const char* format_title(const Checkpoint& ck) {
  switch (ck.format) {
    case Format::TorchZip: return "torch.save zip";
    case Format::TorchLegacy: return "torch.save legacy stream (pre-1.6)";
    case Format::Lightning:
      return ck.container == Container::Zip ? "PyTorch Lightning checkpoint (torch.save zip)" : "PyTorch Lightning checkpoint";
    case Format::TorchScript: return "TorchScript archive";
    case Format::Pickle: return "pickle";
    case Format::Safetensors: return "safetensors";
    case Format::Dcp: return "torch.distributed.checkpoint directory";
    case Format::Sharded: return "sharded checkpoint (index + shards)";
    case Format::Pt2: return "torch.export archive (.pt2)";
    case Format::None: break;
  }
  return "unknown";
}

}  // namespace ckpt
