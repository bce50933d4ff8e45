#include "core/allowlist.h"

#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace ckpt {
namespace {

constexpr uint8_t kArg0 = 1, kArg1 = 2;
// Builtins that compute a value from their arguments and call nothing the file chooses (the arguments'
// own classes are judged where they are made).
constexpr const char* kPure = "a pure builtin: a value computed from its arguments";

// torch 1.13 and 2.6: torch._weights_only_unpickler._get_allowed_globals() (printed by both versions),
// then ckpt's extras. Keep each extra's reason to one line: it is what a reviewer checks.
constexpr AllowEntry kAllow[] = {
    {"collections.OrderedDict", 0, true, "torch weights_only: state dicts"},
    {"collections.Counter", 0, true, "torch weights_only (2.x)"},
    {"torch.nn.parameter.Parameter", 0, true, "torch weights_only"},
    {"torch.serialization._get_layout", 0, true, "torch weights_only: looks a layout up by name"},
    {"torch.Size", 0, true, "torch weights_only"},
    {"torch.Tensor", 0, true, "torch weights_only"},
    {"torch.device", 0, true, "torch weights_only (2.x)"},
    {"_codecs.encode", 0, true, "torch weights_only (2.x): how protocol 2 writes bytes"},
    {"builtins.bytearray", 0, true, "torch weights_only (2.x)"},
    {"builtins.set", 0, true, "torch weights_only (2.x)"},
    {"builtins.complex", 0, true, "torch weights_only (2.x)"},
    {"torch._tensor._rebuild_from_type_v2", kArg0 | kArg1, true,
     "torch weights_only (2.x): calls its func and sets state on its type, both judged where passed"},
    {"torch._utils._rebuild_tensor", 0, true, "torch weights_only: tensor rebuild"},
    {"torch._utils._rebuild_tensor_v2", 0, true, "torch weights_only: tensor rebuild"},
    {"torch._utils._rebuild_tensor_v3", 0, true, "torch weights_only (2.x): tensor rebuild"},
    {"torch._utils._rebuild_parameter", 0, true, "torch weights_only: tensor rebuild"},
    {"torch._utils._rebuild_parameter_with_state", 0, true, "torch weights_only (2.x): tensor rebuild"},
    {"torch._utils._rebuild_qtensor", 0, true, "torch weights_only (2.x): tensor rebuild"},
    {"torch._utils._rebuild_sparse_tensor", 0, true, "torch weights_only: tensor rebuild"},
    {"torch._utils._rebuild_sparse_csr_tensor", 0, true, "torch weights_only (1.13): tensor rebuild"},
    {"torch._utils._rebuild_nested_tensor", 0, true, "torch weights_only (2.x): tensor rebuild"},
    {"torch._utils._rebuild_meta_tensor_no_storage", 0, true, "torch weights_only: tensor rebuild"},
    {"torch._utils._rebuild_device_tensor_from_cpu_tensor", 0, true, "torch weights_only (2.x): tensor rebuild"},
    {"torch._utils._rebuild_device_tensor_from_numpy", 0, true, "torch weights_only (2.x): tensor rebuild"},
    {"torch._utils._rebuild_wrapper_subclass", kArg0, true,
     "torch weights_only (2.x): makes an instance of its class, judged where passed"},
    {"torch.storage.TypedStorage", 0, true, "torch weights_only"},
    {"torch.storage.UntypedStorage", 0, true, "torch weights_only"},
    {"torch.<dtype>", 0, true, "torch weights_only: dtypes"},
    {"torch.<Storage>", 0, true, "torch weights_only: storage and legacy tensor types"},
    {"torch.per_tensor_affine", 0, true, "torch weights_only (2.x): qscheme"},
    {"torch.per_channel_affine", 0, true, "torch weights_only (2.x): qscheme"},
    {"torch.per_tensor_symmetric", 0, true, "torch weights_only (2.x): qscheme"},
    {"torch.per_channel_symmetric", 0, true, "torch weights_only (2.x): qscheme"},
    {"torch.per_channel_affine_float_qparams", 0, true, "torch weights_only (2.x): qscheme"},
    {"torch.nested._internal.nested_tensor.NestedTensor", 0, true, "torch weights_only (2.x): jagged nested tensors"},
    {"torch.nested._internal.nested_tensor._rebuild_njt", 0, true, "torch weights_only (2.x): jagged nested tensors"},
    {"torch._dynamo.decorators._DimRange", 0, true, "torch weights_only (2.x)"},
    {"torch.distributed.device_mesh.DeviceMesh", 0, true, "torch weights_only (2.x): DTensor"},
    {"torch.distributed.tensor._dtensor_spec.DTensorSpec", 0, true, "torch weights_only (2.x): DTensor"},
    {"torch.distributed.tensor._dtensor_spec.TensorMeta", 0, true, "torch weights_only (2.x): DTensor"},
    {"torch.distributed.tensor.DTensor", 0, true, "torch weights_only (2.x): DTensor"},
    {"torch.distributed.tensor.placement_types.Partial", 0, true, "torch weights_only (2.x): DTensor"},
    {"torch.distributed.tensor.placement_types.Replicate", 0, true, "torch weights_only (2.x): DTensor"},
    {"torch.distributed.tensor.placement_types.Shard", 0, true, "torch weights_only (2.x): DTensor"},
    // ckpt's extras.
    {"torch.UntypedStorage", 0, false, "the untyped storage class under the name torch 2.x writes in persistent ids"},
    {"torch.strided", 0, false, "layout constant, pickled by name"},
    {"torch.sparse_coo", 0, false, "layout constant, pickled by name"},
    {"torch.sparse_csr", 0, false, "layout constant, pickled by name"},
    {"torch.sparse_csc", 0, false, "layout constant, pickled by name"},
    {"torch.sparse_bsr", 0, false, "layout constant, pickled by name"},
    {"torch.sparse_bsc", 0, false, "layout constant, pickled by name"},
    {"torch.contiguous_format", 0, false, "memory-format constant, pickled by name"},
    {"torch.channels_last", 0, false, "memory-format constant, pickled by name"},
    {"torch.channels_last_3d", 0, false, "memory-format constant, pickled by name"},
    {"torch.preserve_format", 0, false, "memory-format constant, pickled by name"},
    {"builtins.frozenset", 0, false, "an immutable set of the values given"},
    {"builtins.bytes", 0, false, "bytes of the values given (protocol 2 writes empty bytes so)"},
    {"builtins.dict", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.list", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.tuple", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.int", 0, false, "a builtin value type (legacy streams may compute their magic number so)"},
    {"builtins.float", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.str", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.bool", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.slice", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.range", 0, false, "a builtin value type: building one from values runs no code of the file's choosing"},
    {"builtins.len", 0, false, kPure},
    {"builtins.abs", 0, false, kPure},
    {"builtins.round", 0, false, kPure},
    {"builtins.divmod", 0, false, kPure},
    {"builtins.pow", 0, false, kPure},
    {"builtins.min", 0, false, kPure},
    {"builtins.max", 0, false, kPure},
    {"builtins.sum", 0, false, kPure},
    {"builtins.ord", 0, false, kPure},
    {"builtins.chr", 0, false, kPure},
    {"builtins.bin", 0, false, kPure},
    {"builtins.oct", 0, false, kPure},
    {"builtins.hex", 0, false, kPure},
    {"builtins.object", 0, false, "object.__new__ makes an empty instance of the class it is given, judged where passed"},
    {"copyreg._reconstructor", kArg0 | kArg1, false,
     "pickle's protocol 0/1 helper: instantiates the classes it is given, judged there"},
    {"copyreg.__newobj__", kArg0, false, "pickle's helper: cls.__new__(cls, ...), the class judged where passed"},
    {"copyreg.__newobj_ex__", kArg0, false, "pickle's helper: cls.__new__(cls, ...), the class judged where passed"},
    {"__torch__*", 0, false, "TorchScript class names: resolved by TorchScript's type table, never imported by Python"},
    {"torch.jit._pickle.*", 0, false, "TorchScript's list builders and type tags"},
    {"torch.nn.parameter.UninitializedParameter", 0, false,
     "lazy modules' placeholder: REDUCE(cls, (requires_grad,)) makes an empty tensor"},
    {"torch.nn.parameter.UninitializedBuffer", 0, false,
     "lazy modules' placeholder: REDUCE(cls, (requires_grad,)) makes an empty tensor"},
    {"torch.nn.modules.<Class>", 0, false,
     "torch.save(model): NEWOBJ makes an empty torch.nn module, BUILD fills its __dict__ (Module.__setstate__)"},
    {"torch.distributed.checkpoint.metadata.*", 0, false, "DCP .metadata: dataclasses and one enum, no functions"},
    {"torch.distributed.checkpoint.filesystem._StorageInfo", 0, false, "DCP .metadata: a dataclass"},
    {"pathlib.Path", 0, false, "a path object; constructing it touches no file"},
    {"pathlib.PosixPath", 0, false, "a path object; constructing it touches no file"},
    {"pathlib.WindowsPath", 0, false, "a path object; constructing it touches no file"},
    {"pathlib.PurePosixPath", 0, false, "a path object; constructing it touches no file"},
    {"pathlib.PureWindowsPath", 0, false, "a path object; constructing it touches no file"},
    {"pathlib._local.Path", 0, false, "a path object (Python 3.13's module name)"},
    {"pathlib._local.PosixPath", 0, false, "a path object (Python 3.13's module name)"},
    {"pathlib._local.WindowsPath", 0, false, "a path object (Python 3.13's module name)"},
    {"pathlib._local.PurePosixPath", 0, false, "a path object (Python 3.13's module name)"},
    {"pathlib._local.PureWindowsPath", 0, false, "a path object (Python 3.13's module name)"},
    {"argparse.Namespace", 0, false, "hyper-parameters: an attribute bag, NEWOBJ + BUILD only set attributes"},
    {"pytorch_lightning.utilities.parsing.AttributeDict", 0, false, "Lightning hyper-parameters: a dict"},
    {"lightning.pytorch.utilities.parsing.AttributeDict", 0, false, "Lightning hyper-parameters: a dict"},
    {"lightning_fabric.utilities.data.AttributeDict", 0, false, "Lightning hyper-parameters: a dict"},
    {"lightning.fabric.utilities.data.AttributeDict", 0, false, "Lightning hyper-parameters: a dict"},
    {"numpy.core.multiarray._reconstruct", 0, false, "numpy array from its shape, dtype and bytes (torch's docs allow it)"},
    {"numpy._core.multiarray._reconstruct", 0, false, "numpy array from its shape, dtype and bytes (numpy 2 name)"},
    {"numpy.core.multiarray.scalar", 0, false, "numpy scalar from its dtype and bytes"},
    {"numpy._core.multiarray.scalar", 0, false, "numpy scalar from its dtype and bytes (numpy 2 name)"},
    {"numpy.ndarray", 0, false, "numpy array type"},
    {"numpy.dtype", 0, false, "numpy dtype"},
    {"numpy.dtypes.*", 0, false, "numpy 2 dtype classes"},
};

bool is_torch_module_class(std::string_view module, std::string_view name) {
  return module.rfind("torch.nn.modules.", 0) == 0 && !name.empty() && name[0] >= 'A' && name[0] <= 'Z' &&
         name.find('.') == std::string_view::npos;
}

bool is_torch_type(std::string_view module, std::string_view name, bool storage) {
  if (module != "torch" && module != "torch.cuda" && module != "torch.sparse" && module != "torch.cuda.sparse") return false;
  if (!storage) return module == "torch" && dtype_by_name(name) != nullptr;
  if (dtype_by_storage_class(name)) return true;
  // Legacy tensor types (torch.FloatTensor, torch.cuda.sparse.LongTensor) of the storage dtypes.
  constexpr std::string_view kTensor = "Tensor";
  if (name.size() > kTensor.size() && name.substr(name.size() - kTensor.size()) == kTensor)
    return dtype_by_storage_class(std::string(name.substr(0, name.size() - kTensor.size())) + "Storage") != nullptr;
  return false;
}

bool matches(const AllowEntry& e, std::string_view module, std::string_view name, const std::string& q) {
  const std::string_view p = e.pattern;
  if (p == "torch.<dtype>") return is_torch_type(module, name, false);
  if (p == "torch.<Storage>") return is_torch_type(module, name, true);
  if (p == "torch.nn.modules.<Class>") return is_torch_module_class(module, name);
  if (!p.empty() && p.back() == '*') return q.compare(0, p.size() - 1, p.substr(0, p.size() - 1)) == 0;
  return q == p;
}

struct DenyEntry {
  const char* prefix;  // "module" (and its submodules), "module.name", or "module.name*" (a name prefix)
  const char* what;
};

constexpr const char* kShell = "runs a shell command or another program";
constexpr const char* kCode = "compiles or runs Python code";
constexpr const char* kLoader = "loads another pickle, which can run code";
constexpr const char* kNet = "opens a network connection";
constexpr const char* kFile = "opens, writes or deletes files";
constexpr const char* kNative = "loads native code";
constexpr const char* kAttr = "reaches any attribute of any object (a gadget for calling anything)";
constexpr const char* kInterp = "changes the running interpreter";
constexpr const char* kOs = "reaches the operating system (files, processes, the environment)";

// The union of picklescan's, modelscan's, fickling's and modelaudit's categories, most specific first.
constexpr DenyEntry kDeny[] = {
    {"os.system", kShell},
    {"os.popen", kShell},
    {"os.exec*", kShell},
    {"os.spawn*", kShell},
    {"os.posix_spawn*", kShell},
    {"os.fork*", kShell},
    {"os", kOs},
    {"posix.system", kShell},
    {"posix.popen", kShell},
    {"posix.exec*", kShell},
    {"posix.spawn*", kShell},
    {"posix.posix_spawn*", kShell},
    {"posix.fork*", kShell},
    {"posix", kOs},
    {"nt.system", kShell},
    {"nt", kOs},
    {"subprocess", kShell},
    {"pty", kShell},
    {"commands", kShell},
    {"platform.popen", kShell},
    {"platform", kShell},
    {"uuid._get_command_stdout", kShell},
    {"pydoc.pipepager", kShell},
    {"pydoc.tempfilepager", kShell},
    {"pydoc.pager", kShell},
    {"torch.utils.collect_env.run", kShell},
    {"torch.utils.collect_env", kShell},
    {"ensurepip", kShell},
    {"venv", kShell},
    {"pip", kShell},
    {"setuptools", kShell},
    {"distutils", kShell},
    {"asyncio.create_subprocess*", kShell},
    {"asyncio.subprocess", kShell},
    {"multiprocessing", kShell},
    {"webbrowser", "opens a web browser"},
    {"builtins.eval", kCode},
    {"builtins.exec", kCode},
    {"builtins.execfile", kCode},
    {"builtins.compile", kCode},
    {"builtins.__import__", kCode},
    {"builtins.breakpoint", kCode},
    {"builtins.input", kCode},
    {"builtins.getattr", kAttr},
    {"builtins.setattr", kAttr},
    {"builtins.delattr", kAttr},
    {"builtins.globals", kAttr},
    {"builtins.locals", kAttr},
    {"builtins.vars", kAttr},
    {"builtins.open", kFile},
    {"builtins.file", kFile},
    {"builtins.exit", kInterp},
    {"builtins.quit", kInterp},
    {"operator.attrgetter", kAttr},
    {"operator.methodcaller", kAttr},
    {"operator.itemgetter", kAttr},
    {"functools.partial", "calls what it wraps"},
    {"functools.reduce", "calls what it is given"},
    {"code", kCode},
    {"codeop", kCode},
    {"runpy", kCode},
    {"cProfile", kCode},
    {"profile", kCode},
    {"timeit", kCode},
    {"trace", kCode},
    {"pdb", kCode},
    {"bdb", kCode},
    {"types.CodeType", kCode},
    {"types.FunctionType", kCode},
    {"types", kCode},
    {"marshal", kCode},
    {"importlib", kCode},
    {"pkgutil", kCode},
    {"imp", kCode},
    {"numpy.testing._private.utils.runstring", kCode},
    {"numpy.load", kLoader},
    {"torch._inductor.codecache", kCode},
    {"torch.utils.cpp_extension", kNative},
    {"torch.ops.load_library", kNative},
    {"torch.classes.load_library", kNative},
    {"torch.jit", kCode},
    {"torch.hub.download_url_to_file", kNet},
    {"torch.hub.load_state_dict_from_url", kNet},
    {"torch.hub", kCode},
    {"torch.load", kLoader},
    {"torch.serialization.load", kLoader},
    {"torch.storage._load_from_bytes", kLoader},
    {"cloudpickle", kCode},
    {"dill", kCode},
    {"joblib", kLoader},
    {"pickle", kLoader},
    {"_pickle", kLoader},
    {"cPickle", kLoader},
    {"copyreg._extension_registry", "an extension code: names whatever the loading process registered"},
    {"ctypes", kNative},
    {"_ctypes", kNative},
    {"cffi", kNative},
    {"socket", kNet},
    {"_socket", kNet},
    {"ssl", kNet},
    {"smtplib", kNet},
    {"ftplib", kNet},
    {"imaplib", kNet},
    {"poplib", kNet},
    {"nntplib", kNet},
    {"telnetlib", kNet},
    {"http", kNet},
    {"httplib", kNet},
    {"urllib", kNet},
    {"urllib2", kNet},
    {"urllib3", kNet},
    {"requests", kNet},
    {"aiohttp", kNet},
    {"xmlrpc", kNet},
    {"asyncio", kNet},
    {"io.open", kFile},
    {"io.FileIO", kFile},
    {"_io", kFile},
    {"shutil", kFile},
    {"tempfile", kFile},
    {"logging.FileHandler", kFile},
    {"logging.handlers", kFile},
    {"zipfile", kFile},
    {"tarfile", kFile},
    {"glob", kFile},
    {"fileinput", kFile},
    {"sys", kInterp},
    {"signal", kInterp},
    {"atexit", kInterp},
    {"gc", kInterp},
    {"threading", kInterp},
    {"_thread", kInterp},
};

bool deny_matches(std::string_view prefix, const std::string& q) {
  if (prefix.back() == '*') return q.compare(0, prefix.size() - 1, prefix.substr(0, prefix.size() - 1)) == 0;
  return q.size() >= prefix.size() && q.compare(0, prefix.size(), prefix) == 0 &&
         (q.size() == prefix.size() || q[prefix.size()] == '.');
}

}  // namespace

const AllowEntry* allowed_global(std::string_view module, std::string_view name) {
  const std::string q = std::string(module) + "." + std::string(name);
  for (const AllowEntry& e : kAllow)
    if (matches(e, module, name, q)) return &e;
  return nullptr;
}

// Enum members, which Python (3.11 and later) pickles as getattr(EnumClass, 'MEMBER'): the class and
// every member it has, exactly. No other getattr call is allowed.
struct MemberLookup {
  const char* module;
  const char* cls;
  std::initializer_list<std::string_view> members;
  const char* reason;
};
const MemberLookup kLookups[] = {
    {"torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING",
     {"TORCH_CONTIGUOUS_FORMAT", "TORCH_CHANNELS_LAST", "TORCH_PRESERVE_FORMAT"},
     "DCP .metadata: TensorProperties.memory_format, an Enum member (torch 2.15, Python 3.11+)"},
};

const char* allowed_member_lookup(std::string_view module, std::string_view cls, std::string_view member) {
  for (const MemberLookup& l : kLookups)
    if (module == l.module && cls == l.cls)
      for (std::string_view m : l.members)
        if (m == member) return l.reason;
  return nullptr;
}

const char* deny_category(std::string_view module, std::string_view name) {
  const std::string q = std::string(module) + "." + std::string(name);
  for (const DenyEntry& e : kDeny)
    if (deny_matches(e.prefix, q)) return e.what;
  return nullptr;
}

}  // namespace ckpt
