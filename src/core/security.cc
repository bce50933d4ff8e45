#include "core/security.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <unordered_set>

#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/torch_pickle.h"
#include "core/zip.h"

namespace ckpt {
namespace {

constexpr std::array<std::string_view, 38> kDangerousModules{
    "os",       "posix",    "nt",        "posixpath", "ntpath",   "subprocess", "sys",      "socket",
    "runpy",    "pty",      "pickle",    "_pickle",   "cPickle",  "shutil",     "bdb",      "pdb",
    "asyncio",  "webbrowser", "httplib", "http",      "requests", "aiohttp",    "urllib",   "urllib2",
    "importlib", "ctypes",  "code",      "codeop",    "commands", "multiprocessing", "marshal", "timeit",
    "pip",      "setuptools", "platform", "signal",   "tempfile", "dill"};

constexpr std::array<std::string_view, 17> kDangerousBuiltins{
    "eval", "exec", "compile", "getattr", "setattr", "delattr", "open", "__import__", "breakpoint",
    "input", "globals", "locals", "vars", "execfile", "apply", "file", "reload"};

constexpr std::array<std::string_view, 8> kDangerousQualified{
    "torch.storage._load_from_bytes", "torch.load", "torch.serialization.load", "torch.jit.load",
    "numpy.load", "operator.attrgetter", "operator.methodcaller", "copyreg._extension_registry"};

// torch.serialization's weights_only allowlist (torch/_weights_only_unpickler.py), by name.
constexpr std::array<std::string_view, 16> kSafeQualified{
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter", "torch.serialization._get_layout",
    "torch.Size", "torch.Tensor", "torch.device", "_codecs.encode", "builtins.bytearray", "builtins.set",
    "builtins.frozenset", "builtins.complex", "torch._tensor._rebuild_from_type_v2", "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage", "torch.UntypedStorage"};

constexpr std::array<std::string_view, 11> kTorchEnums{
    "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
    "per_channel_affine_float_qparams", "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc"};

template <typename A>
bool in(const A& arr, std::string_view v) {
  return std::find(arr.begin(), arr.end(), v) != arr.end();
}

}  // namespace

GlobalClass classify_global(std::string_view module, std::string_view name) {
  const std::string q = std::string(module) + "." + std::string(name);
  const std::string_view top = module.substr(0, module.find('.'));
  if (name.find('.') != std::string_view::npos) return GlobalClass::Dangerous;  // dotted-name bypass
  if (in(kDangerousModules, module) || in(kDangerousModules, top)) return GlobalClass::Dangerous;
  if (module == "builtins" && in(kDangerousBuiltins, name)) return GlobalClass::Dangerous;
  if (in(kDangerousQualified, q)) return GlobalClass::Dangerous;
  if (in(kSafeQualified, q)) return GlobalClass::Safe;
  if (module == "torch._utils" && name.substr(0, 9) == "_rebuild_") return GlobalClass::Safe;
  if (module == "torch" || module == "torch.cuda") {
    if (dtype_by_name(name) || dtype_by_storage_class(name) || in(kTorchEnums, name)) return GlobalClass::Safe;
  }
  // TorchScript archives: module classes and the JIT's own list builders are data, never imported.
  if (module == "__torch__" || module.substr(0, 10) == "__torch__.") return GlobalClass::Safe;
  if (module == "torch.jit._pickle") return GlobalClass::Safe;
  // Lazy modules' placeholders: torch's own inert types (torch.load in 2.x accepts them for lazy modules).
  if (module == "torch.nn.parameter" && (name == "UninitializedParameter" || name == "UninitializedBuffer"))
    return GlobalClass::Safe;
  // torch.distributed.checkpoint's .metadata: torch's own dataclasses, and the path of the checkpoint.
  if (module == "torch.distributed.checkpoint" || module.substr(0, 29) == "torch.distributed.checkpoint.") return GlobalClass::Safe;
  if ((module == "pathlib" || module == "pathlib._local") &&
      (name == "PosixPath" || name == "WindowsPath" || name == "PurePosixPath" || name == "PureWindowsPath" || name == "Path"))
    return GlobalClass::Safe;
  // Lightning's hyper-parameter container is a dict.
  if (name == "AttributeDict" && (top == "lightning" || top == "pytorch_lightning" || top == "lightning_fabric"))
    return GlobalClass::Safe;
  return GlobalClass::Unknown;
}

namespace {

struct Hit {
  std::string where;   // "archive/data.pkl+0x1a3 (STACK_GLOBAL)"
};

class Scanner {
 public:
  Scanner(const Limits& lim) : lim_(lim) {}

  void file(const ByteView& v, const std::string& label, int depth) {
    if (depth > 4) return;
    if (looks_like_zip(v)) return zip(v, label, depth);
    if (looks_like_safetensors(v)) return;  // JSON and raw bytes: no pickle, nothing to import
    // Legacy streams are several pickles back to back; a bare pickle is one. Scan while pickles parse.
    uint64_t pos = 0;
    for (int k = 0; k < 5 && pos < v.size(); ++k) {
      const uint64_t next = pickle(v, pos, label.empty() ? "" : label, depth);
      if (next == 0) break;
      pos = next;
      if (k == 0 && !legacy_) break;
    }
  }

  void note_globals(const std::vector<GlobalRef>& globals, const std::string& member) { note(globals, member); }

  std::vector<Finding> findings() const {  // grouped by global, dangerous first
    std::vector<Finding> out;
    for (const auto& [global, where] : dangerous_) {
      out.push_back({"dangerous-global", Severity::Error,
                     fmt::format("pickle names {}, which Python's unpickler would import and may call: loading this file with "
                                 "torch.load(weights_only=False) or pickle can run code",
                                 global),
                     "do not load this file with Python's pickle or torch.load(weights_only=False); take the weights from a "
                     "trusted source or re-save them as safetensors",
                     where});
    }
    if (std::any_of(unknown_.begin(), unknown_.end(), [&](const auto& kv) { return !dangerous_.count(kv.first); })) {
      std::string names;
      std::vector<std::string> where;
      for (const auto& [global, w] : unknown_) {
        if (dangerous_.count(global)) continue;  // named and then called through OBJ / INST: reported as dangerous
        names += (names.empty() ? "" : ", ") + global;
        where.push_back(w.front());
      }
      out.push_back({"unknown-global", Severity::Warning,
                     fmt::format("pickle names {} global(s) outside torch's weights_only allowlist: {}; torch.load(weights_only=True) "
                                 "refuses the file, and weights_only=False would import them",
                                 unknown_.size(), names),
                     "inspect these classes before loading with weights_only=False, or allow them with "
                     "torch.serialization.add_safe_globals",
                     where});
    }
    for (const Finding& f : extra_) out.push_back(f);
    return out;
  }

 private:
  void zip(const ByteView& v, const std::string& label, int depth) {
    ZipReader z(v, lim_);
    for (const ZipEntry& e : z.entries()) {
      // Scanners that read local headers see another name than loaders that read the directory.
      const uint64_t h = e.local_header_offset;
      const uint16_t n = v.le<uint16_t>(h + 26);
      if (v.str(h + 30, n) != e.name) {
        Finding f;
        f.id = "dangerous-global";
        f.severity = Severity::Error;
        f.message = fmt::format("zip member '{}' has local header name '{}': the names differ, a trick that hides a pickle "
                                "from scanners reading one of the two",
                                std::string(e.name), std::string(v.str(h + 30, n)));
        f.fix = "do not load this file; re-create it from a trusted source";
        f.where = {prefixed(label, std::string(e.name))};
        extra_.push_back(std::move(f));
      }
      std::string_view name = e.name;
      if (name.size() < 4 || name.substr(name.size() - 4) != ".pkl") continue;
      // Read where the local header says the data is, whatever name it carries: that is what torch loads.
      const uint64_t data = h + 30 + n + v.le<uint16_t>(h + 28);
      ByteView raw = v.sub(data, e.compressed_size, "zip member data");
      std::string storage;
      ByteView content = raw;
      if (e.method != 0) {
        ZipEntry copy = e;
        content = z.content(copy, &storage, std::min(lim_.pickle_bytes, lim_.inflate_bytes));
      }
      pickle(content.as_member(std::string(e.name)), 0, prefixed(label, std::string(e.name)), depth);
    }
  }

  static std::string prefixed(const std::string& label, const std::string& member) {
    return label.empty() ? member : label + ":" + member;
  }

  // Returns the offset after the pickle, 0 when it did not parse to the end.
  uint64_t pickle(const ByteView& v, uint64_t start, const std::string& member, int depth) {
    Heap heap;
    std::vector<GlobalRef> seen;
    Unpickled u;
    try {
      u = unpickle(v, start, heap, lim_, &seen);
      seen = u.globals;
    } catch (const InputError& e) {
      note(seen, member);
      Finding f;
      f.id = "scan-incomplete";
      f.severity = Severity::Warning;
      f.message = fmt::format("pickle in {} is malformed ({}); the globals before that point were scanned", member.empty() ? "the file" : member,
                              e.what());
      f.fix = "treat the file as untrusted";
      f.where = {fmt::format("{}+0x{:x}", member, e.offset())};
      extra_.push_back(std::move(f));
      return 0;
    }
    note(seen, member);
    if (start == 0 && is_legacy_magic(u.root)) legacy_ = true;
    nested(u.root, member, depth);
    return u.end;
  }

  void note(const std::vector<GlobalRef>& globals, const std::string& member) {
    for (const GlobalRef& g : globals) {
      GlobalClass c = classify_global(g.module, g.name);
      const std::string op = g.opcode;
      // A class called through OBJ / INST is a call like REDUCE; anything not known-safe there is hidden code.
      if (c == GlobalClass::Unknown && (op == "OBJ" || op == "INST") && g.module != "__main__") c = GlobalClass::Dangerous;
      if (c == GlobalClass::Unknown && op.substr(0, 3) == "EXT") c = GlobalClass::Dangerous;
      if (c == GlobalClass::Safe) continue;
      auto& bucket = c == GlobalClass::Dangerous ? dangerous_ : unknown_;
      const std::string global = g.module + "." + g.name;
      auto& where = bucket[global];
      if (where.size() < 16) where.push_back(fmt::format("{} at {}+0x{:x} ({})", global, member.empty() ? "pickle" : member, g.offset, op));
    }
  }

  // torch.storage._load_from_bytes(b"...") holds a whole torch.save blob: scan it too.
  void nested(const Value* root, const std::string& member, int depth) {
    std::vector<const Value*> todo{root};
    std::unordered_set<const Value*> visited;
    uint64_t budget = lim_.walk_nodes;
    while (!todo.empty() && budget-- > 0) {
      const Value* v = todo.back();
      todo.pop_back();
      if (!v || !visited.insert(v).second) continue;
      if (v->kind == PKind::Object && v->qualified() == "torch.storage._load_from_bytes") {
        const Value* a = v->args();
        if (a && a->kind == PKind::Tuple && !a->items.empty() && a->items[0]->kind == PKind::Bytes) {
          auto blob = MappedFile::from_memory(std::string(a->items[0]->s), "");
          file(blob->view(), fmt::format("{}+0x{:x}", member, v->offset), depth + 1);
        }
      }
      for (const Value* c : v->items) todo.push_back(c);
      if (v->ext) {
        for (const Value* c : v->ext->dict) todo.push_back(c);
        todo.push_back(v->ext->callable);
        todo.push_back(v->ext->args);
        todo.push_back(v->ext->kwargs);
        todo.push_back(v->ext->state);
      }
    }
  }

  const Limits& lim_;
  bool legacy_ = false;
  std::map<std::string, std::vector<std::string>> dangerous_, unknown_;
  std::vector<Finding> extra_;
};

}  // namespace

std::vector<Finding> security_findings(const MappedFile& file, const Limits& limits) {
  Scanner s(limits);
  s.file(file.view(), "", 0);
  return s.findings();
}

std::vector<Finding> global_findings(const std::vector<GlobalRef>& globals, const std::string& member) {
  Limits lim;
  Scanner s(lim);
  s.note_globals(globals, member);
  return s.findings();
}

}  // namespace ckpt
