#include "core/rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/reader.h"
#include "core/security.h"
#include "core/sharded.h"

#include <filesystem>
#include "core/summary.h"
#include "core/text.h"

namespace ckpt {

const std::vector<RuleInfo>& rule_catalogue() {
  static const std::vector<RuleInfo> k{
      {"compiled-prefix", Severity::Warning, "keys with an _orig_mod segment (saved from a torch.compile'd module)"},
      {"ddp-prefix", Severity::Warning, "every key starts with module. (DataParallel / DDP / DeepSpeed)"},
      {"fabric-prefix", Severity::Warning, "keys under _forward_module. / _original_module. (Fabric wrappers)"},
      {"activation-checkpoint-prefix", Severity::Warning, "keys with a _checkpoint_wrapped_module segment"},
      {"fsdp-sharded", Severity::Error, "FSDP flat parameters (_fsdp_wrapped_module, _flat_param)"},
      {"lightning-prefix", Severity::Info, "Lightning checkpoint whose keys share a LightningModule attribute prefix"},
      {"meta-tensors", Severity::Error, "tensors on the meta device (no data)"},
      {"uninitialized-parameters", Severity::Warning, "UninitializedParameter / UninitializedBuffer entries"},
      {"empty-init-compile", Severity::Warning, "Lightning checkpoint with compiled-submodule keys"},
      {"data-dependent-control-flow", Severity::Warning, "TorchScript branches on a tensor value"},
      {"tensor-item", Severity::Warning, "TorchScript aten::item / prim::tolist"},
      {"dynamic-shape-op", Severity::Warning, "TorchScript ops with data-dependent output shapes"},
      {"extra-entry-methods", Severity::Warning, "TorchScript methods callable besides forward"},
      {"python-op", Severity::Error, "TorchScript calls into Python (prim::PythonOp)"},
      {"print-call", Severity::Info, "TorchScript print() calls (graph breaks under torch.compile)"},
      {"dangerous-global", Severity::Error, "pickle globals that execute code or touch the system"},
      {"unknown-global", Severity::Warning, "pickle globals outside torch's weights_only allowlist"},
      {"scan-incomplete", Severity::Warning, "a pickle that could not be scanned to its end"},
      {"frozen-module", Severity::Info, "torch.jit.freeze'd module: parameters became constants"},
      {"tied-weights", Severity::Info, "entries sharing one tensor"},
      {"storage-views", Severity::Info, "storages viewed by several different entries"},
  };
  return k;
}

namespace {

std::vector<std::string> first(const std::vector<std::string>& v, size_t n = 8) {
  return std::vector<std::string>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
}


void key_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  if (ck.tensors.empty()) return;
  // One pass over the keys, splitting each into segments once (100,000-entry files stay cheap).
  std::vector<std::string> compiled, fabric, ac, fsdp, keys3;
  bool all_module = true;
  for (const Tensor& t : ck.tensors) {
    const std::string& k = t.name;
    if (keys3.size() < 3) keys3.push_back(k);
    all_module &= k.rfind("module.", 0) == 0;
    bool c = false, f = false, a = false, s = false;
    size_t pos = 0;
    while (pos <= k.size()) {
      size_t dot = k.find('.', pos);
      if (dot == std::string::npos) dot = k.size();
      const std::string_view seg(k.data() + pos, dot - pos);
      c |= seg == "_orig_mod";
      f |= seg == "_forward_module" || seg == "_original_module";
      a |= seg == "_checkpoint_wrapped_module";
      s |= seg == "_fsdp_wrapped_module" || seg == "_flat_param" || seg == "flat_param";
      pos = dot + 1;
    }
    if (c) compiled.push_back(k);
    if (f) fabric.push_back(k);
    if (a) ac.push_back(k);
    if (s) fsdp.push_back(k);
  }
  const size_t nkeys = ck.tensors.size();
  if (!compiled.empty())
    out.push_back({"compiled-prefix", Severity::Warning,
                   fmt::format("{} of {} keys contain the _orig_mod segment of a torch.compile'd module ({}); "
                               "load_state_dict on the plain module reports them as unexpected",
                               compiled.size(), nkeys, join(compiled, ", ", 3, " and {} more")),
                   "strip the '_orig_mod.' segment from the keys, or save model._orig_mod.state_dict()", first(compiled)});
  if (all_module)
    out.push_back({"ddp-prefix", Severity::Warning,
                   fmt::format("all {} keys start with 'module.' (saved from DataParallel / DistributedDataParallel / DeepSpeed)",
                               nkeys),
                   "strip the 'module.' prefix, or save model.module.state_dict()", keys3});
  if (!fabric.empty())
    out.push_back({"fabric-prefix", Severity::Warning,
                   fmt::format("{} keys carry Fabric's wrapper segment _forward_module / _original_module ({})", fabric.size(),
                               join(fabric, ", ", 3, " and {} more")),
                   "strip the wrapper segment, or save through fabric.save, which unwraps the module", first(fabric)});
  if (!ac.empty())
    out.push_back({"activation-checkpoint-prefix", Severity::Warning,
                   fmt::format("{} keys carry the _checkpoint_wrapped_module segment of checkpoint_wrapper ({}); note that "
                               "torch.compile rejects checkpoint(context_fn=...) unless an experimental flag is set",
                               ac.size(), join(ac, ", ", 3, " and {} more")),
                   "strip the '_checkpoint_wrapped_module.' segment to load into the unwrapped module", first(ac)});
  if (!fsdp.empty())
    out.push_back({"fsdp-sharded", Severity::Error,
                   fmt::format("{} keys are FSDP flat parameters or wrapped names ({}): this is a sharded / flattened state dict",
                               fsdp.size(), join(fsdp, ", ", 3, " and {} more")),
                   "re-save with a full state dict (FullStateDictConfig / StateDictType.FULL_STATE_DICT)", first(fsdp)});
  if (ck.content == "lightning") {
    const std::string& k0 = ck.tensors.front().name;
    const std::string head = k0.substr(0, k0.find('.'));
    const bool shared = head != k0 && std::all_of(ck.tensors.begin(), ck.tensors.end(), [&](const Tensor& t) {
                          return t.name.size() > head.size() && t.name.compare(0, head.size(), head) == 0 && t.name[head.size()] == '.';
                        });
    if (shared)
      out.push_back({"lightning-prefix", Severity::Info,
                     fmt::format("every state_dict key starts with '{}.', the LightningModule attribute holding the model", head),
                     fmt::format("strip '{}.' to load the weights into the bare module (or use LightningModule.load_from_checkpoint)", head),
                     {head + "."}});
    if (!compiled.empty())
      out.push_back({"empty-init-compile", Severity::Warning,
                     "Lightning checkpoint of a model with torch.compile'd submodules: loading it inside "
                     "trainer.init_module(empty_init=True) / fabric.init_module(empty_init=True) runs compiled code under "
                     "_EmptyInit and dynamo raises \"Dynamic control flow is not supported\" (Lightning #20524)",
                     "don't run compiled submodules inside init_module(empty_init=...): load first, compile after, or strip "
                     "'_orig_mod.' and load into the uncompiled module",
                     first(compiled)});
  }
}

struct CodeRule {
  const char* id;
  Severity sev;
  std::vector<std::string_view> needles;  // any of these in a line fires
  const char* what;
  const char* fix;
};

bool is_if(std::string_view line) {
  return line.rfind("if ", 0) == 0 || line.rfind("elif ", 0) == 0 || line.rfind("while ", 0) == 0;
}

void code_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  static const std::vector<CodeRule> rules{
      {"tensor-item", Severity::Warning, {"torch.item(", ".item(", "ops.prim.tolist(", ".tolist("},
       "converts a tensor to a Python number (aten::item / prim::tolist): a graph break or a data-dependent value",
       "avoid .item() / .tolist() in forward, or set torch._dynamo.config.capture_scalar_outputs = True"},
      {"dynamic-shape-op", Severity::Warning,
       {"torch.nonzero(", "torch.unique(", "torch._unique2(", "torch.unique_consecutive(", "torch.masked_select(",
        "torch.argwhere(", "torch.repeat_interleave(", "torch.bincount(", "torch.histc("},
       "calls an operator whose output shape depends on the data",
       "set torch._dynamo.config.capture_dynamic_output_shape_ops = True, or use a fixed-shape alternative (torch.where)"},
      {"python-op", Severity::Error, {"PythonOp", "ops.prim.PythonOp"},
       "calls back into Python (prim::PythonOp / an ignored function): not runnable outside Python",
       "script the function, or remove @torch.jit.ignore from what forward calls"},
      {"print-call", Severity::Info, {"print("}, "prints (prim::Print): a graph break under torch.compile",
       "remove the print, or guard it with torch.compiler.is_compiling()"},
  };
  std::map<std::string, std::vector<std::string>> where_by_id;
  std::map<std::string, std::string> sample;
  for (const TsClass& c : ck.ts_classes) {
    for (const TsMethod& m : c.methods) {
      for (const auto& [lineno, text] : m.body) {
        const std::string w = fmt::format("{}.{} ({}:{}: {})", c.qualified, m.name, c.file, lineno, text.substr(0, 120));
        // Tensor-valued conditions are printed as bool(<tensor expr>) (aten::Bool) in serialized code.
        if (is_if(text) && (text.find("bool(") != std::string::npos || text.find("torch.is_nonzero(") != std::string::npos)) {
          where_by_id["data-dependent-control-flow"].push_back(w);
        }
        for (const CodeRule& r : rules)
          for (std::string_view n : r.needles)
            if (text.find(n) != std::string::npos) {
              where_by_id[r.id].push_back(w);
              break;
            }
      }
    }
  }
  auto emit = [&](const char* id, Severity sev, const char* what, const char* fix) {
    auto it = where_by_id.find(id);
    if (it == where_by_id.end()) return;
    const auto& w = it->second;
    out.push_back({id, sev,
                   fmt::format("{} line(s) {} (read from the serialized code/ source, not the LibTorch IR): {}", w.size(), what,
                               w.front()),
                   fix, first(w, 16)});
  };
  emit("data-dependent-control-flow", Severity::Warning,
       "branch on a tensor value, which torch.compile graph-breaks on and torch.export rejects",
       "use torch.cond or torch.where instead of Python control flow on tensor values");
  for (const CodeRule& r : rules) emit(r.id, r.sev, r.what, r.fix);

  std::vector<std::string> entries;
  for (const auto& m : ck.methods)
    if (m.value("entry_point", false)) entries.push_back(m["name"].get<std::string>());
  if (!entries.empty())
    out.push_back({"extra-entry-methods", Severity::Warning,
                   fmt::format("the root module exports {} method(s) besides forward that forward does not call: {}. Wrappers "
                               "(Fabric, DDP, torch.compile) only route forward",
                               entries.size(), join(entries, ", ", 8, " and {} more")),
                   "Fabric: fabric_module.mark_forward_method(\"<name>\"); torch.compile: compile each method separately",
                   entries});
}

// The reader's and summary's findings plus the model rules, for a checkpoint that was read.
void model_checks(const Checkpoint& ck, CheckResult& r) {
  r.format = ck.format;
  r.findings = summarize(ck).findings;
  auto m = model_findings(ck);
  r.findings.insert(r.findings.end(), m.begin(), m.end());
}

}  // namespace

CheckResult run_checks(const std::shared_ptr<MappedFile>& file, const Limits& limits) {
  CheckResult r;
  try {
    model_checks(read_checkpoint(file, limits), r);
  } catch (const InputError& e) {
    r.read_error = e.render();
  }
  try {
    auto sec = security_findings(*file, limits);
    r.findings.insert(r.findings.end(), sec.begin(), sec.end());
  } catch (const InputError& e) {  // the container itself is broken (no zip directory, ...)
    if (r.read_error.empty()) r.read_error = e.render();
  }
  return r;
}

CheckResult run_checks(const std::string& path, const Limits& limits) {
  std::error_code ec;
  if (!is_index_path(path) && !std::filesystem::is_directory(path, ec)) return run_checks(MappedFile::open(path), limits);
  CheckResult r;
  try {
    const Checkpoint ck = read_checkpoint(path, limits);
    model_checks(ck, r);
    if (ck.format == "dcp") {  // the .metadata pickle (the regions are torch.save zips of single tensors)
      for (Finding f : security_findings(*MappedFile::open((std::filesystem::path(path) / ".metadata").string()), limits)) {
        for (auto& w : f.where) w = ".metadata:" + w;
        r.findings.push_back(std::move(f));
      }
      return r;
    }
    // The security scan of every shard; its locations name the shard.
    const std::filesystem::path dir = std::filesystem::path(is_index_path(path) ? path : find_index(path)).parent_path();
    for (const auto& s : ck.metadata.at("shards")) {
      const std::string shard = s["file"].get<std::string>();
      for (Finding f : security_findings(*MappedFile::open((dir / shard).string()), limits)) {
        for (auto& w : f.where) w = shard + ":" + w;
        r.findings.push_back(std::move(f));
      }
    }
  } catch (const InputError& e) {
    r.read_error = e.render();
  }
  return r;
}

std::vector<Finding> model_findings(const Checkpoint& ck) {
  std::vector<Finding> out;
  key_rules(ck, out);
  code_rules(ck, out);
  return out;
}

}  // namespace ckpt
