#include "core/security.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_set>

#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/torch_pickle.h"
#include "core/zip.h"

namespace ckpt {
namespace {

constexpr std::array<std::string_view, 38> kDangerousModules{
    "os",        "posix",  "nt",       "posixpath",  "ntpath",   "subprocess",
    "sys",       "socket", "runpy",    "pty",        "pickle",   "_pickle",
    "cPickle",   "shutil", "bdb",      "pdb",        "asyncio",  "webbrowser",
    "httplib",   "http",   "requests", "aiohttp",    "urllib",   "urllib2",
    "importlib", "ctypes", "code",     "codeop",     "commands", "multiprocessing",
    "marshal",   "timeit", "pip",      "setuptools", "platform", "signal",
    "tempfile",  "dill"};

constexpr std::array<std::string_view, 17> kDangerousBuiltins{"eval", "exec",       "compile",    "getattr", "setattr", "delattr",
                                                              "open", "__import__", "breakpoint", "input",   "globals", "locals",
                                                              "vars", "execfile",   "apply",      "file",    "reload"};

constexpr std::array<std::string_view, 8> kDangerousQualified{"torch.storage._load_from_bytes",
                                                              "torch.load",
                                                              "torch.serialization.load",
                                                              "torch.jit.load",
                                                              "numpy.load",
                                                              "operator.attrgetter",
                                                              "operator.methodcaller",
                                                              "copyreg._extension_registry"};

// torch.serialization's weights_only allowlist (torch/_weights_only_unpickler.py), by name.
constexpr std::array<std::string_view, 16> kSafeQualified{"collections.OrderedDict",
                                                          "collections.Counter",
                                                          "torch.nn.parameter.Parameter",
                                                          "torch.serialization._get_layout",
                                                          "torch.Size",
                                                          "torch.Tensor",
                                                          "torch.device",
                                                          "_codecs.encode",
                                                          "builtins.bytearray",
                                                          "builtins.set",
                                                          "builtins.frozenset",
                                                          "builtins.complex",
                                                          "torch._tensor._rebuild_from_type_v2",
                                                          "torch.storage.UntypedStorage",
                                                          "torch.storage.TypedStorage",
                                                          "torch.UntypedStorage"};

constexpr std::array<std::string_view, 11> kTorchEnums{"per_tensor_affine",
                                                       "per_channel_affine",
                                                       "per_tensor_symmetric",
                                                       "per_channel_symmetric",
                                                       "per_channel_affine_float_qparams",
                                                       "strided",
                                                       "sparse_coo",
                                                       "sparse_csr",
                                                       "sparse_csc",
                                                       "sparse_bsr",
                                                       "sparse_bsc"};

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
  if (module == "torch.distributed.checkpoint" || module.substr(0, 29) == "torch.distributed.checkpoint.")
    return GlobalClass::Safe;
  if ((module == "pathlib" || module == "pathlib._local") &&
      (name == "PosixPath" || name == "WindowsPath" || name == "PurePosixPath" || name == "PureWindowsPath" || name == "Path"))
    return GlobalClass::Safe;
  // Lightning's hyper-parameter container is a dict.
  if (name == "AttributeDict" && (top == "lightning" || top == "pytorch_lightning" || top == "lightning_fabric"))
    return GlobalClass::Safe;
  return GlobalClass::Unknown;
}

GlobalClass classify_use(const GlobalRef& g) {
  const GlobalClass c = classify_global(g.module, g.name);
  if (c != GlobalClass::Unknown) return c;
  const std::string_view op = g.opcode;
  if ((op == "OBJ" || op == "INST") && g.module != "__main__") return GlobalClass::Dangerous;
  if (op.substr(0, 3) == "EXT") return GlobalClass::Dangerous;
  return c;
}

namespace {

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

  PickleScan take() { return std::move(scan_); }

 private:
  void zip(const ByteView& v, const std::string& label, int depth) {
    ZipReader z(v, lim_);
    for (const ZipEntry& e : z.entries()) {
      // Scanners that read local headers see another name than loaders that read the directory.
      const uint64_t h = e.local_header_offset;
      const uint16_t n = v.le<uint16_t>(h + 26);
      if (v.str(h + 30, n) != e.name) {
        scan_.problems.push_back({ScanProblem::Kind::RenamedMember, prefixed(label, std::string(e.name)), std::string(e.name),
                                  std::string(v.str(h + 30, n))});
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
      scan_.pickles.push_back({member, std::move(seen)});
      scan_.problems.push_back({ScanProblem::Kind::Malformed, fmt::format("{}+0x{:x}", member, e.offset()), member, e.what()});
      return 0;
    }
    scan_.pickles.push_back({member, std::move(seen)});
    if (start == 0 && is_legacy_magic(u.root)) legacy_ = true;
    nested(u.root, member, depth);
    return u.end;
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
  PickleScan scan_;
};

}  // namespace

PickleScan scan_pickles(const MappedFile& file, const Limits& limits) {
  Scanner s(limits);
  s.file(file.view(), "", 0);
  return s.take();
}

}  // namespace ckpt
