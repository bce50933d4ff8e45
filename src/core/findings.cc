#include "core/hf_weights.h"
#include "core/findings.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "core/compile_rules.h"
#include "core/reader.h"
#include "core/sharded.h"
#include "core/text.h"
#include "core/vfs.h"

namespace ckpt {

const std::vector<RuleInfo>& rule_catalogue() {
  static const std::vector<RuleInfo> k{
      {"compiled-prefix", Severity::Warning, "keys with an _orig_mod segment (saved from a torch.compile'd module)",
       "strip the '_orig_mod.' segment from the keys, or save model._orig_mod.state_dict()"},
      {"ddp-prefix", Severity::Warning, "every key starts with module. (DataParallel / DDP / DeepSpeed)",
       "strip the 'module.' prefix, or save model.module.state_dict()"},
      {"fabric-prefix", Severity::Warning, "keys under _forward_module. / _original_module. (Fabric wrappers)",
       "strip the wrapper segment, or save through fabric.save, which unwraps the module"},
      {"activation-checkpoint-prefix", Severity::Warning, "keys with a _checkpoint_wrapped_module segment",
       "strip the '_checkpoint_wrapped_module.' segment to load into the unwrapped module"},
      {"fsdp-sharded", Severity::Error, "FSDP flat parameters (_fsdp_wrapped_module, _flat_param)",
       "re-save with a full state dict (FullStateDictConfig / StateDictType.FULL_STATE_DICT)"},
      {"lightning-prefix", Severity::Info, "Lightning checkpoint whose keys share a LightningModule attribute prefix",
       "strip the attribute prefix to load the weights into the bare module (or use LightningModule.load_from_checkpoint)"},
      {"meta-tensors", Severity::Error, "tensors on the meta device (no data)",
       "materialize before saving (module.to_empty(device=...) then initialize, or load real weights)"},
      {"uninitialized-parameters", Severity::Warning, "UninitializedParameter / UninitializedBuffer entries",
       "run one forward pass with a real input before saving, so lazy modules infer their shapes"},
      {"empty-init-compile", Severity::Warning, "Lightning checkpoint with compiled-submodule keys",
       "don't run compiled submodules inside init_module(empty_init=...): load first, compile after, or strip '_orig_mod.' and "
       "load into the uncompiled module"},
      {"data-dependent-control-flow", Severity::Warning,
       "TorchScript code where a tensor's value decides a branch or a loop (bool(t), torch.is_nonzero, torch.equal)",
       "select with torch.where, or branch with torch.cond; no torch._dynamo.config flag removes this break"},
      {"tensor-item", Severity::Warning, "TorchScript code that makes a tensor a Python number (.item(), int(t), float(t), .tolist())",
       "keep the value a tensor, or set torch._dynamo.config.capture_scalar_outputs = True where the finding says it is enough"},
      {"dynamic-shape-op", Severity::Warning,
       "TorchScript ops with data-dependent output shapes (nonzero, x[mask], one-argument where, unique, masked_select, bincount, "
       "repeat_interleave with a tensor count)",
       "set torch._dynamo.config.capture_dynamic_output_shape_ops = True where the finding says it is enough, or use a "
       "fixed-shape alternative (torch.where)"},
      {"extra-entry-methods", Severity::Warning, "TorchScript methods callable besides forward",
       "Fabric: fabric_module.mark_forward_method(\"<name>\"); torch.compile: compile each method separately"},
      {"python-op", Severity::Error, "TorchScript calls into Python (prim::PythonOp)",
       "script the function, or remove @torch.jit.ignore from what forward calls"},
      {"print-call", Severity::Warning, "TorchScript print() calls (graph breaks under torch.compile)",
       "remove the print, or guard it with `if not torch.compiler.is_compiling():`"},
      {"warn-call", Severity::Warning, "TorchScript warnings.warn calls (graph breaks under torch.compile)",
       "guard it with `if not torch.compiler.is_compiling():`, or warn outside forward"},
      {"rnn-module", Severity::Warning, "RNN / LSTM / GRU modules, which dynamo graph-breaks on by design",
       "set torch._dynamo.config.allow_rnn = True"},
      {"traced-archive", Severity::Info, "TorchScript code made by torch.jit.trace: data-dependent behaviour was frozen",
       "check the original Python module with torch._dynamo.explain, or script it"},
      {"ignored-code", Severity::Info, "stubs of @torch.jit.unused / ignore(drop=True) functions: their code is not in the archive",
       "check the original Python with torch._dynamo.explain, or script the function"},
      {"dangerous-global", Severity::Error, "pickle globals the pickle calls, builds or changes that are not on the allowlist",
       "do not load this file with Python's pickle or torch.load(weights_only=False); take the weights from a trusted source or "
       "re-save them as safetensors"},
      {"unknown-global", Severity::Warning, "pickle globals outside the allowlist that the pickle only names",
       "inspect these names before loading with weights_only=False, or allow them with torch.serialization.add_safe_globals"},
      {"pickle-parse-divergence", Severity::Error,
       "a pickle that names other globals read from a file object (torch.load) than parsed from bytes (pickle.loads, most "
       "scanners): a read crosses a FRAME's end",
       "do not load this file: no pickle writer splits an opcode across a FRAME's end; re-create it from a trusted source"},
      {"scan-incomplete", Severity::Warning, "a pickle that could not be scanned to its end", "treat the file as untrusted"},
      {"device-storages", Severity::Warning, "entries saved on cuda / mps / xpu: torch.load without map_location fails "
       "without that device",
       "load with torch.load(f, map_location=\"cpu\"), or re-save after .cpu()"},
      {"tensor-mutated", Severity::Error, "a pickle that writes into a rebuilt tensor (SETITEM(S) / APPEND(S) on it)",
       "do not load this file; re-create it from a trusted source"},
      {"zip-name-mismatch", Severity::Warning, "a zip member whose local header name differs from the central directory's",
       "re-create the archive from a trusted source"},
      {"native-code", Severity::Error, "a .pt2 package that ships native code (AOTInductor .so, .cpp, kernel binaries)",
       "load only packages you compiled yourself or whose source you trust; to share weights, ship the exported program "
       "(torch.export.save) or safetensors instead"},
      {"hf-config", Severity::Error,
       "a Hugging Face config.json that disagrees with the weights beside it (dtype, vocabulary rows, layer count, attention "
       "heads and hidden size) or cannot be read",
       "fix config.json (or re-save with save_pretrained) so that from_pretrained builds the model the weights fit"},
      {"frozen-module", Severity::Info, "torch.jit.freeze'd module: parameters became constants",
       "none needed for inference; keep the unfrozen module to train or load a state dict"},
      {"tied-weights", Severity::Info, "entries sharing one tensor", "none needed; this is how tied weights are saved"},
      {"storage-views", Severity::Info, "storages viewed by several different entries",
       "none needed; each distinct view is counted, the storage once in storage_bytes"},
      {"zip-crc-mismatch", Severity::Error,
       "check --verify: zip members whose bytes disagree with the CRC-32 the archive records",
       "copy or download the file again from its source and compare checksums"},
      {"nonfinite-values", Severity::Error, "check --values: tensors holding NaN or Inf, with the counts per tensor",
       "go back to a checkpoint from before training diverged (lower the learning rate, check the loss scale)"},
      {"unreadable", Severity::Error,
       "a file ckpt could not read, or read only in part (SARIF: a result, besides the tool notification)",
       "see the error: a truncated or corrupt file, an unsupported format, or a path that does not exist"},
  };
  return k;
}

namespace {


std::vector<std::string> entry_names(const Checkpoint& ck, const std::vector<size_t>& entries) {
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (size_t k : entries) out.push_back(ck.tensors[k].name);
  return out;
}

void reader_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  for (const FrozenConstants& f : ck.frozen)
    out.push_back(
        {"frozen-module",
         Severity::Info,
         fmt::format("frozen TorchScript module (torch.jit.freeze): its parameters became {} constant tensors ({} elements, "
                     "{} bytes) in {} and are not counted as parameters",
                     f.tensors, f.elements, f.bytes, ck.torchscript.mobile ? "constants.pkl and bytecode.pkl" : "constants.pkl"),
         "none needed for inference; keep the unfrozen module to train or load a state dict",
         {}});
}

void counting_rules(const Checkpoint& ck, const Summary& s, std::vector<Finding>& out) {
  if (!s.uninitialized_entries.empty()) {
    std::vector<std::string> lazy = entry_names(ck, s.uninitialized_entries);
    out.push_back(
        {"uninitialized-parameters", Severity::Warning,
         fmt::format("{} {} UninitializedParameter/UninitializedBuffer (lazy module before its first forward); their "
                     "sizes are unknown and not counted: {}",
                     lazy.size(), lazy.size() == 1 ? "entry is an" : "entries are", join(lazy, ", ", 8, ", and {} more")),
         "run one forward pass with a real input before saving, so lazy modules infer their shapes", std::move(lazy)});
  }
  if (!s.meta_entries.empty()) {
    std::vector<std::string> meta = entry_names(ck, s.meta_entries);
    out.push_back({"meta-tensors", Severity::Error,
                   fmt::format("{} on the meta device and {} no data; loading fails with \"Cannot copy out of meta tensor; "
                               "no data!\": {}",
                               meta.size() == 1 ? "1 entry is" : fmt::format("{} entries are", meta.size()),
                               meta.size() == 1 ? "holds" : "hold", join(meta, ", ", 8, ", and {} more")),
                   "materialize before saving (module.to_empty(device=...) then initialize, or load real weights)",
                   std::move(meta)});
  }
  std::vector<std::string> tied, views;
  for (const auto& g : s.tied_groups) tied.push_back(join(entry_names(ck, g), ", ", 4, ", and {} more"));
  for (const auto& g : s.view_groups)
    views.push_back(
        fmt::format("storage {}: {}", ck.tensors[g.front()].storage, join(entry_names(ck, g), ", ", 4, ", and {} more")));
  if (!tied.empty())
    out.push_back({"tied-weights", Severity::Info,
                   fmt::format("{} group(s) of entries share one tensor and are counted once: {}", tied.size(),
                               join(tied, ", ", 4, ", and {} more")),
                   "none needed; this is how tied weights are saved", tied});
  if (!views.empty())
    out.push_back(
        {"storage-views", Severity::Info,
         fmt::format("{} storage(s) hold several different views: {}", views.size(), join(views, ", ", 4, ", and {} more")),
         "none needed; each distinct view is counted, the storage once in storage_bytes", views});
}

// Storages saved on an accelerator: torch.load restores each on the device it was saved on unless
// map_location says otherwise, and fails where that device is missing (serialization.py's
// validate_cuda_device and friends: "Attempting to deserialize object on a CUDA device but
// torch.cuda.is_available() is False").
void device_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  std::map<std::string, std::vector<std::string>> by_device;  // "cuda:0" -> entries
  for (const Tensor& t : ck.tensors)
    if (!t.device.empty() && t.device != "cpu" && t.device != "meta") by_device[t.device].push_back(t.name);
  if (by_device.empty()) return;
  std::vector<std::string> where, devices;
  std::set<std::string> kinds;
  for (auto& [device, names] : by_device) {
    devices.push_back(fmt::format("{} ({})", device, names.size()));
    kinds.insert(device.substr(0, device.find(':')));
    for (std::string& n : names) where.push_back(fmt::format("{} ({})", n, device));
  }
  std::string kind_list;
  for (const std::string& k : kinds) kind_list += (kind_list.empty() ? "" : "/") + k;
  out.push_back({"device-storages", Severity::Warning,
                 fmt::format("{} entries were saved on a device other than the CPU: {}; torch.load without map_location "
                             "restores them there and fails on a machine without {} (\"Attempting to deserialize object "
                             "on a {} device but ... is_available() is False\")",
                             where.size(), join(devices, ", ", 8, ", and {} more"), kind_list, kind_list),
                 "load with torch.load(f, map_location=\"cpu\") (or the device you have), or re-save after .cpu(); "
                 "ckpt load --device chooses the device itself",
                 std::move(where)});
}

void key_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  if (ck.tensors.empty()) return;
  // One pass over the keys, splitting each into segments once (100,000-entry files stay cheap).
  std::vector<std::string> compiled, fabric, ac, fsdp;
  bool all_module = true;
  for (const Tensor& t : ck.tensors) {
    const std::string& k = t.name;
    all_module &= k.rfind("module.", 0) == 0;
    // Each segment looked for below holds "_mod" or "flat_param": most names are passed over whole.
    if (k.find("_mod") == std::string::npos && k.find("flat_param") == std::string::npos) continue;
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
                   "strip the '_orig_mod.' segment from the keys, or save model._orig_mod.state_dict()", compiled});
  if (all_module) {
    std::vector<std::string> keys;
    keys.reserve(nkeys);
    for (const Tensor& t : ck.tensors) keys.push_back(t.name);
    out.push_back(
        {"ddp-prefix", Severity::Warning,
         fmt::format("all {} keys start with 'module.' (saved from DataParallel / DistributedDataParallel / DeepSpeed)", nkeys),
         "strip the 'module.' prefix, or save model.module.state_dict()", std::move(keys)});
  }
  if (!fabric.empty())
    out.push_back({"fabric-prefix", Severity::Warning,
                   fmt::format("{} keys carry Fabric's wrapper segment _forward_module / _original_module ({})", fabric.size(),
                               join(fabric, ", ", 3, " and {} more")),
                   "strip the wrapper segment, or save through fabric.save, which unwraps the module", fabric});
  if (!ac.empty())
    out.push_back({"activation-checkpoint-prefix", Severity::Warning,
                   fmt::format("{} keys carry the _checkpoint_wrapped_module segment of checkpoint_wrapper ({}); note that "
                               "torch.compile rejects checkpoint(context_fn=...) unless an experimental flag is set",
                               ac.size(), join(ac, ", ", 3, " and {} more")),
                   "strip the '_checkpoint_wrapped_module.' segment to load into the unwrapped module", ac});
  if (!fsdp.empty())
    out.push_back({"fsdp-sharded", Severity::Error,
                   fmt::format("{} keys are FSDP flat parameters or wrapped names ({}): this is a sharded / flattened state dict",
                               fsdp.size(), join(fsdp, ", ", 3, " and {} more")),
                   "re-save with a full state dict (FullStateDictConfig / StateDictType.FULL_STATE_DICT)", fsdp});
  if (ck.content == Content::Lightning) {
    const std::string& k0 = ck.tensors.front().name;
    const std::string head = k0.substr(0, k0.find('.'));
    const bool shared = head != k0 && std::all_of(ck.tensors.begin(), ck.tensors.end(), [&](const Tensor& t) {
                          return t.name.size() > head.size() && t.name.compare(0, head.size(), head) == 0 &&
                                 t.name[head.size()] == '.';
                        });
    if (shared)
      out.push_back(
          {"lightning-prefix",
           Severity::Info,
           fmt::format("every state_dict key starts with '{}.', the LightningModule attribute holding the model", head),
           fmt::format("strip '{}.' to load the weights into the bare module (or use LightningModule.load_from_checkpoint)",
                       head),
           {head + "."}});
    if (!compiled.empty())
      out.push_back({"empty-init-compile", Severity::Warning,
                     "Lightning checkpoint of a model with torch.compile'd submodules: loading it inside "
                     "trainer.init_module(empty_init=True) / fabric.init_module(empty_init=True) runs compiled code under "
                     "_EmptyInit and dynamo raises \"Dynamic control flow is not supported\" (Lightning #20524)",
                     "don't run compiled submodules inside init_module(empty_init=...): load first, compile after, or strip "
                     "'_orig_mod.' and load into the uncompiled module",
                     compiled});
  }
}

void code_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  compile_rules(ck, out);
  std::vector<std::string> entries;
  for (const TsMethodInfo& m : ck.torchscript.methods)
    if (m.entry_point) entries.push_back(m.name);
  if (!entries.empty())
    out.push_back({"extra-entry-methods", Severity::Warning,
                   fmt::format("the root module exports {} method(s) besides forward that forward does not call: {}. Wrappers "
                               "(Fabric, DDP, torch.compile) only route forward",
                               entries.size(), join(entries, ", ", 8, " and {} more")),
                   "Fabric: fabric_module.mark_forward_method(\"<name>\"); torch.compile: compile each method separately",
                   entries});
}

// Pickle globals grouped by global: each one's first 16 locations, in the order met.
class GlobalGroups {
 public:
  void add(const std::vector<GlobalRef>& globals, const std::string& member) {
    for (const GlobalRef& g : globals) {
      if ((g.use & kUseWrittenResult) && writes_seen_.insert(member + g.module + g.name).second) {
        writes_.push_back(fmt::format("{}.{} result at {}+0x{:x} ({} at +0x{:x})", g.module, g.name,
                                      member.empty() ? "pickle" : member, g.offset, g.write_opcode, g.write_offset));
        write_locations_.push_back({"", member, g.write_offset, g.write_opcode, g.module + "." + g.name});
      }
      const GlobalVerdict v = judge_global(g);
      if (v.cls == GlobalClass::Safe) continue;
      const std::string global = g.computed ? "<computed global>" : g.module + "." + g.name;
      Group& grp = (v.cls == GlobalClass::Dangerous ? dangerous_ : unknown_)[global];
      if (grp.where.empty()) {
        grp.how = v.how;
        grp.category = v.category;
        grp.mutated = (g.use & kUseMutated) != 0;
        grp.named_only = v.named_only;
      }
      std::string w = fmt::format("{} at {}+0x{:x} ({}{}{})", global, member.empty() ? "pickle" : member, g.offset, g.opcode,
                                  v.how.empty() ? "" : ", ", v.how);
      // A pickle scanned twice (from bytes and as a file) names most globals twice: once is enough.
      if (grp.seen.insert(w).second) {
        grp.where.push_back(std::move(w));
        grp.locations.push_back({"", member, g.offset, g.opcode, g.computed ? "" : global});
      }
    }
  }

  void emit(std::vector<Finding>& out) const {  // dangerous first
    if (!writes_.empty())
      out.push_back({"tensor-mutated", Severity::Error,
                     fmt::format("the pickle writes into {} rebuilt tensor(s) with SETITEM(S) / APPEND(S) ({}): "
                                 "torch.load calls the tensor's __setitem__, so the values it returns differ from the "
                                 "stored bytes that every scanner and ckpt read",
                                 writes_.size(), writes_.front()),
                     "do not load this file; re-create it from a trusted source (torch.save never writes into a tensor)",
                     writes_, write_locations_});
    for (const auto& [global, g] : dangerous_) {
      const std::string also = g.category ? fmt::format(" and {}", g.category) : "";
      out.push_back({"dangerous-global", Severity::Error,
                     g.named_only
                         ? fmt::format("pickle global {} is {}{}: loading this file with torch.load(weights_only=False) or "
                                       "pickle hands that object to the code that loads it; a checkpoint has no reason to "
                                       "carry it",
                                       global, g.how, also)
                     : g.mutated ? fmt::format("pickle global {} is {}{}: loading this file with torch.load(weights_only=False) or "
                                             "pickle alters the imported object",
                                             global, g.how, also)
                               : fmt::format("pickle global {} is {}{}; it is not on ckpt's allowlist of known-safe callables: "
                                             "loading this file with torch.load(weights_only=False) or pickle runs it",
                                             global, g.how, also),
                     "do not load this file with Python's pickle or torch.load(weights_only=False); take the weights from a "
                     "trusted source or re-save them as safetensors",
                     g.where, g.locations});
    }
    if (std::any_of(unknown_.begin(), unknown_.end(), [&](const auto& kv) { return !dangerous_.count(kv.first); })) {
      std::string names;
      std::vector<std::string> where;
      std::vector<Location> locations;
      size_t n = 0;
      for (const auto& [global, g] : unknown_) {
        if (dangerous_.count(global)) continue;  // named here and called elsewhere: reported as dangerous
        names += (names.empty() ? "" : ", ") + global;
        where.push_back(g.where.front());
        locations.push_back(g.locations.front());
        ++n;
      }
      out.push_back({"unknown-global", Severity::Warning,
                     fmt::format("pickle names {} global(s) outside ckpt's allowlist but never calls them: {}; Python "
                                 "imports them when loading (an import runs the module's top-level code), and "
                                 "torch.load(weights_only=True) refuses the file",
                                 n, names),
                     "inspect these names before loading with weights_only=False, or allow them with "
                     "torch.serialization.add_safe_globals",
                     where, locations});
    }
  }

 private:
  struct Group {
    std::string how;
    const char* category = nullptr;
    bool mutated = false;
    bool named_only = false;
    std::unordered_set<std::string> seen;
    std::vector<std::string> where;
    std::vector<Location> locations;  // aligned with where
  };
  std::map<std::string, Group> dangerous_, unknown_;
  std::unordered_set<std::string> writes_seen_;
  std::vector<std::string> writes_;
  std::vector<Location> write_locations_;
};

void problem_rules(const std::vector<ScanProblem>& problems, std::vector<Finding>& out) {
  for (const ScanProblem& p : problems) {
    if (p.kind == ScanProblem::Kind::RenamedMember)
      out.push_back({"zip-name-mismatch",
                     Severity::Warning,
                     fmt::format("zip member '{}' has local header name '{}': torch reads the data past the local header "
                                 "whatever its name (ckpt scanned it), but tools that read the local headers see "
                                 "another file than torch loads",
                                 p.member, p.detail),
                     "re-create the archive from a trusted source (torch.save writes equal names)",
                     {p.where},
                     {{"", p.where, {}, "", ""}}});
    else if (p.kind == ScanProblem::Kind::NotScanned)
      out.push_back({"scan-incomplete",
                     Severity::Warning,
                     fmt::format("{} was not scanned: {}", p.member, p.detail),
                     "treat the file as untrusted",
                     {p.where},
                     {{"", p.member, {}, "", ""}}});
    else
      out.push_back({"scan-incomplete",
                     Severity::Warning,
                     fmt::format("pickle in {} is malformed ({}); the globals before that point were scanned",
                                 p.member.empty() ? "the file" : p.member, p.detail),
                     "treat the file as untrusted",
                     {p.where},
                     {{"", p.member, p.offset, "", ""}}});
  }
}

// A pickle whose two parses (bytes, file object) name other globals: one finding per pickle, where
// the parses part first, then what only one of them names.
void divergence_rules(const std::vector<ParseDivergence>& divergences, std::vector<Finding>& out) {
  for (const ParseDivergence& d : divergences) {
    const std::string in = d.member.empty() ? "pickle" : d.member;
    std::vector<std::string> where{
        fmt::format("{}+0x{:x} (FRAME, whose end the read at +0x{:x} crosses)", in, d.frame_at, d.dropped_at)};
    std::vector<Location> locations{{"", d.member, d.frame_at, "FRAME", ""}};
    const auto list = [&](const std::vector<GlobalRef>& gs, const char* parse) {
      std::string names;
      for (const GlobalRef& g : gs) {
        const std::string global = g.computed ? "<computed global>" : g.module + "." + g.name;
        const GlobalVerdict v = judge_global(g);
        const std::string what = fmt::format("{} at {}+0x{:x} ({}{}{}; {} only)", global, in, g.offset, g.opcode,
                                             v.how.empty() ? "" : ", ", v.how, parse);
        if (where.size() < 17) {
          where.push_back(what);
          locations.push_back({"", d.member, g.offset, g.opcode, g.computed ? "" : global});
        }
        if (names.find(global) == std::string::npos) names += (names.empty() ? "" : ", ") + global;
      }
      return names.empty() ? std::string("none") : names;
    };
    const std::string file = list(d.file_only, "read as a file");
    const std::string bytes = list(d.bytes_only, "parsed from bytes");
    out.push_back({"pickle-parse-divergence", Severity::Error,
                   fmt::format("pickle in {} parses differently read from a file object, as torch.load reads it, than "
                               "parsed from bytes, as pickle.loads and most scanners read it: the read at +0x{:x} crosses "
                               "the end of a FRAME, which Python's unpickler reading a file skips to; globals only read "
                               "as a file: {}; only parsed from bytes: {}",
                               d.member.empty() ? "the file" : d.member, d.dropped_at, file, bytes),
                   "do not load this file: no pickle writer splits an opcode across a FRAME's end, so the file was made "
                   "to show scanners other code than torch.load runs; re-create it from a trusted source",
                   where, locations});
  }
}

// One finding for all the native code an export archive ships: loading an AOTInductor package
// (torch._inductor.aoti_load_package) dlopens its .so, so the file runs code no scanner can judge.
void native_rules(const std::vector<NativeCode>& native, std::vector<Finding>& out) {
  if (native.empty()) return;
  std::vector<std::string> kinds, where;
  std::vector<Location> locations;
  std::string kind_list;
  for (const NativeCode& n : native) {
    if (std::find(kinds.begin(), kinds.end(), n.kind) == kinds.end()) {
      kind_list += (kinds.empty() ? "" : ", ") + n.kind;
      kinds.push_back(n.kind);
    }
    where.push_back(n.member);
    locations.push_back({"", n.member, {}, "", ""});
  }
  out.push_back({"native-code", Severity::Error,
                 fmt::format("archive ships {} file(s) of native code ({}): loading it as an AOTInductor package runs "
                             "that code, which ckpt cannot inspect",
                             native.size(), kind_list),
                 "load only packages you compiled yourself or whose source you trust; to share weights, ship the "
                 "exported program (torch.export.save) or safetensors instead",
                 where, locations});
}

// A Hugging Face config.json against the weights it describes: what from_pretrained would trip on.
void hf_rules(const Checkpoint& ck, std::vector<Finding>& out) {
  if (!ck.hf) return;
  const HfConfig& c = *ck.hf;
  const std::string fix = "fix config.json (or re-save with save_pretrained) so that from_pretrained builds the model the weights fit";
  auto add = [&](Severity sev, std::string key, std::string message) {
    Location at;
    at.file = "config.json";
    out.push_back({"hf-config", sev, std::move(message), fix, {key.empty() ? "config.json" : "config.json: " + key}, {at}});
  };
  if (!c.error.empty()) {
    add(Severity::Error, "", fmt::format("{}: transformers cannot read this model's config", c.error));
    return;
  }
  const HfWeights w = hf_weights(ck);
  const DType* said = dtype_by_name(c.dtype);
  if (said && !w.dtype.empty() && said->name != w.dtype)
    add(Severity::Warning, "dtype",
        fmt::format("config.json says dtype {} but the weights are {}: from_pretrained(dtype=\"auto\") casts them to {} "
                    "({} the memory of the file's own dtype)",
                    c.dtype, w.dtype, c.dtype, said->itemsize > dtype_by_name(w.dtype)->itemsize ? "more than" : "less than"));
  if (c.vocab_size) {
    for (const auto& [name, rows] : {std::pair{w.embedding, w.embedding_rows}, std::pair{w.lm_head, w.lm_head_rows}})
      if (!name.empty() && rows != *c.vocab_size)
        add(Severity::Error, "vocab_size",
            fmt::format("config.json says vocab_size {} but {} has {} rows: from_pretrained reports a size mismatch for it "
                        "(resize_token_embeddings updates both)",
                        *c.vocab_size, name, rows));
  }
  // The attention's shapes: q_proj [heads x head_dim, hidden], k_proj [key/value heads x head_dim, hidden].
  if (!w.q_proj.empty() && c.head_size() && c.num_attention_heads) {
    const int64_t hd = *c.head_size(), heads = *c.num_attention_heads, kv = c.kv_heads().value_or(heads);
    if (c.hidden_size && w.q_cols != *c.hidden_size)
      add(Severity::Error, "hidden_size",
          fmt::format("config.json says hidden_size {} but {} takes {} inputs: from_pretrained reports a size mismatch",
                      *c.hidden_size, w.q_proj, w.q_cols));
    if (w.q_rows != heads * hd)
      add(Severity::Error, c.head_dim ? "head_dim" : "num_attention_heads",
          fmt::format("config.json says {} attention heads of {} but {} has {} rows ({} heads of {}): from_pretrained "
                      "reports a size mismatch",
                      heads, hd, w.q_proj, w.q_rows, w.q_rows % hd == 0 ? std::to_string(w.q_rows / hd) : "not whole", hd));
    if (w.k_rows != kv * hd)
      add(Severity::Error, "num_key_value_heads",
          fmt::format("config.json says {} key/value heads of {} but {} has {} rows ({} heads of {}): from_pretrained "
                      "reports a size mismatch, and the KV cache is the weights' ({} values per token and layer)",
                      kv, hd, w.k_proj, w.k_rows, w.k_rows % hd == 0 ? std::to_string(w.k_rows / hd) : "not whole", hd,
                      2 * w.k_rows));
  }
  // A fused projection: [(heads + 2 x key/value heads) x head_dim, hidden].
  if (!w.qkv.empty() && c.head_size() && c.num_attention_heads) {
    const int64_t hd = *c.head_size(), heads = *c.num_attention_heads, kv = c.kv_heads().value_or(heads);
    if (c.hidden_size && w.qkv_in != *c.hidden_size)
      add(Severity::Error, "hidden_size",
          fmt::format("config.json says hidden_size {} but {} takes {} inputs: from_pretrained reports a size mismatch",
                      *c.hidden_size, w.qkv, w.qkv_in));
    else if (w.qkv_out != (heads + 2 * kv) * hd)
      add(Severity::Error, c.head_dim ? "head_dim" : "num_attention_heads",
          fmt::format("config.json says {} attention heads and {} key/value heads of {} ({} query, key and value outputs) but {} "
                      "has {}: from_pretrained reports a size mismatch",
                      heads, kv, hd, (heads + 2 * kv) * hd, w.qkv, w.qkv_out));
  }
  if (c.num_hidden_layers && !w.layers_prefix.empty() && w.layers != *c.num_hidden_layers) {
    if (w.layers < *c.num_hidden_layers)
      add(Severity::Error, "num_hidden_layers",
          fmt::format("config.json says num_hidden_layers {} but the weights hold {} ({}0 to {}{}): from_pretrained builds "
                      "{} layers and initializes the missing ones randomly",
                      *c.num_hidden_layers, w.layers, w.layers_prefix, w.layers_prefix, w.layers - 1, *c.num_hidden_layers));
    else
      add(Severity::Warning, "num_hidden_layers",
          fmt::format("config.json says num_hidden_layers {} but the weights hold {} ({}0 to {}{}): from_pretrained builds "
                      "{} layers and drops the others' weights as unexpected keys",
                      *c.num_hidden_layers, w.layers, w.layers_prefix, w.layers_prefix, w.layers - 1, *c.num_hidden_layers));
  }
}

// findings() of a checkpoint that was read.
void model_checks(const Checkpoint& ck, CheckResult& r) {
  r.format = to_string(ck.format);
  r.findings = findings(ck, summarize(ck));
}

}  // namespace

std::vector<Finding> findings(const Checkpoint& ck, const Summary& s) {
  std::vector<Finding> out;
  reader_rules(ck, out);
  counting_rules(ck, s, out);
  device_rules(ck, out);
  key_rules(ck, out);
  hf_rules(ck, out);
  code_rules(ck, out);
  return out;
}

std::vector<Finding> scan_findings(const PickleScan& scan) {
  GlobalGroups g;
  for (const ScannedPickle& p : scan.pickles) g.add(p.globals, p.member);
  std::vector<Finding> out;
  g.emit(out);
  divergence_rules(scan.divergences, out);
  problem_rules(scan.problems, out);
  native_rules(scan.native, out);
  return out;
}

CheckResult run_checks(const std::shared_ptr<MappedFile>& file, const Limits& limits) {
  CheckResult r;
  try {
    r.checkpoint = std::make_shared<const Checkpoint>(read_checkpoint(file, limits));
    model_checks(*r.checkpoint, r);
    r.scanned = true;
  } catch (const InputError& e) { r.read_error = e.render(); }
  try {
    auto sec = scan_findings(scan_pickles(*file, limits, r.checkpoint.get()));
    r.findings.insert(r.findings.end(), sec.begin(), sec.end());
    r.scanned = true;
  } catch (const InputError& e) {  // the container itself is broken (no zip directory, ...)
    if (r.read_error.empty()) r.read_error = e.render();
  }
  return r;
}

std::vector<Finding> security_findings(const MappedFile& file, const Limits& limits) {
  return scan_findings(scan_pickles(file, limits));
}

namespace {

// A scan of a file that is not the one checked: each place it names starts "<label>:", each location's
// file is the label; with `in_message`, the message starts "<label>: " too (summary's text shows no
// places).
void add_labeled(std::vector<Finding> found, const std::string& label, std::vector<Finding>& out, bool in_message = false) {
  for (Finding& x : found) {
    if (in_message) x.message = label + ": " + x.message;
    for (auto& w : x.where) w = label + ":" + w;
    for (Location& l : x.locations) l.file = label;
    out.push_back(std::move(x));
  }
}

// The security scan of a model folder's side files, each as `check FILE` scans a file; a side file that
// cannot be scanned (not opened, a broken container) is scan-incomplete, and so are the files past the
// bound. Returns how many were scanned.
size_t side_findings(const FolderFiles& side, const std::string& dir, const Limits& limits, ScanScope scope,
                     std::vector<Finding>& out) {
  size_t scanned = 0;
  for (const SideFile& f : side.files) {
    std::string why = f.error;
    if (f.file) {
      try {
        add_labeled(scan_findings(scan_pickles(*f.file, limits, nullptr, scope)), f.label, out, true);
        ++scanned;
        continue;
      } catch (const InputError& e) { why = e.render(); }
    }
    if (why.empty()) continue;
    problem_rules({{ScanProblem::Kind::NotScanned, f.label, f.label, why}}, out);
    out.back().locations = {Location{f.label, "", std::nullopt, "", ""}};  // the file, no member
  }
  if (side.left_out)
    out.push_back({"scan-incomplete", Severity::Warning,
                   fmt::format("the model folder holds {} more file(s) than the {} that ckpt looks at for pickles beside "
                               "the model (in name order): those were not scanned",
                               side.left_out, kMaxFolderFiles),
                   "check the other files by name (ckpt check FOLDER/FILE), or keep fewer files in a model folder",
                   {vfs::display(dir)},
                   {}});
  return scanned;
}

}  // namespace

std::vector<Finding> security_findings(const std::string& path, const Checkpoint* ck, const Limits& limits, ScanScope scope) {
  if (!is_index_path(path) && !vfs::is_dir(path)) {
    if (ck && ck->file) return scan_findings(scan_pickles(*ck->file, limits, ck, scope));  // the reader's mapping and globals
    return security_findings(*vfs::open(path), limits);
  }
  std::vector<Finding> out;
  // A folder whose reader failed: every file pickle would load, the weights too (Python would run what
  // comes before a bad byte).
  if (!ck) {
    if (is_model_folder(path)) side_findings(folder_side_files(path, nullptr, limits), path, limits, scope, out);
    return out;
  }
  // The files the reader named (shards, DCP's .metadata), then a folder's other pickles.
  for (const ScanFile& f : ck->scan_files) add_labeled(scan_findings(scan_pickles(*vfs::open(f.path), limits)), f.label, out);
  side_findings(ck->side, path, limits, scope, out);
  return out;
}

CheckResult run_checks(const std::string& path, const Limits& limits) {
  if (!is_index_path(path) && !vfs::is_dir(path)) return run_checks(vfs::open(path), limits);
  CheckResult r;
  try {
    r.checkpoint = std::make_shared<const Checkpoint>(read_checkpoint(path, limits));
    const Checkpoint& ck = *r.checkpoint;
    model_checks(ck, r);
    auto sec = security_findings(path, &ck, limits);
    r.findings.insert(r.findings.end(), sec.begin(), sec.end());
    r.scanned = true;
  } catch (const InputError& e) { r.read_error = e.render(); }
  if (r.scanned || !is_model_folder(path)) return r;
  // The folder's reader failed: its pickles still get the scan that `check FILE` gives a rejected file.
  try {
    std::vector<Finding> found;
    if (side_findings(folder_side_files(path, nullptr, limits), path, limits, ScanScope::Full, found) > 0) {
      r.findings = std::move(found);
      r.scanned = true;
    }
  } catch (const InputError&) {  // the folder cannot be listed: the reader's error says enough
  }
  return r;
}

}  // namespace ckpt
