// `ckpt summary --example-input` in ckpt-torch: build the module with LibTorch (FILE's own code, or ARCH
// holding FILE's tensors), run one recorded forward, and name what it recorded as the summary does.
#include <fmt/format.h>

#include <map>
#include <set>

#include "cli/commands.h"
#include "core/keys.h"
#include "core/load_report.h"
#include "core/model.h"
#include "core/reader.h"
#include "torch/forward.h"
#include "torch/materialize.h"
#include "torch/script.h"

namespace ckpt::cli {

ForwardReport run_summary_forward(const SummaryOptions& o, const Checkpoint& file, const Checkpoint* arch,
                                  const ModelReport* model) {
  const c10::Device device = torchb::parse_device(parse_device_option(o.device), o.device);
  torchb::ExampleInputs inputs;
  if (o.example_input_file.empty()) {
    inputs = torchb::parse_example_inputs(o.example_inputs, device);
  } else {
    const Checkpoint in = read_checkpoint(o.example_input_file, o.resolve());
    inputs = torchb::load_example_inputs(in, device);
  }

  // On meta nothing is read: the code is compiled with every payload served as zeros.
  torch::jit::Module module = device.is_meta() ? torchb::load_structure(arch ? *arch : file)
                                               : torchb::load_plain(arch ? *arch : file, device);
  if (arch) {
    // FILE's tensors replace ARCH's (shapes included: a FILE that does not fit fails in the forward,
    // naming the module). Lazy entries of FILE have no values: ARCH's stay.
    std::vector<torchb::Target> targets;
    for (const Tensor& t : file.tensors) targets.push_back({renamed_key(t.name, model->strip_prefix, model->add_prefix), &t});
    LoadReport rep;
    torchb::MaterializeOptions mo;
    mo.device = device;
    std::set<std::string> have;
    for (const auto& [name, t] : torchb::module_state(module)) have.insert(name);
    for (auto& [name, t] : torchb::materialize(file, targets, mo, rep))
      if (have.count(name)) torchb::assign(module, name, device.is_cpu() ? t.clone() : t);  // CPU: views of the read-only mapping
  }

  ForwardReport r = torchb::run_forward(module, inputs);
  r.device = device.str();
  r.libtorch = torchb::libtorch_version();
  r.input_file = o.example_input_file;
  if (model) {
    // ARCH's module paths under FILE's names, as the summary rows are named
    auto rename = [&](const std::string& p) { return file_module_path(p, *model).value_or(p); };
    decltype(r.modules) by_file;
    for (auto& [p, m] : r.modules) by_file.emplace(rename(p), std::move(m));
    r.modules = std::move(by_file);
    if (!r.error.empty()) r.error_module = rename(r.error_module);
    for (std::string& p : r.completed) p = rename(p);
  }
  return r;
}

}  // namespace ckpt::cli
