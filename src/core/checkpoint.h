// What readers produce: a Checkpoint of tensor records, storages, an optional module tree, metadata
// and the facts findings.cc turns into findings (readers record, they do not judge). Nothing here
// holds tensor bytes; storages stay references into the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/pickle.h"

namespace ckpt {

enum class TensorState : uint8_t { Materialized, Uninitialized, Meta };
enum class TensorKind : uint8_t { Parameter, Buffer };
enum class Severity : uint8_t { Info, Warning, Error };

struct Tensor {
  std::string name;                   // dotted path ("encoder.0.weight")
  const DType* dtype = nullptr;       // nullptr only for uninitialized entries saved without a dtype
  std::vector<int64_t> shape;         // empty for 0-dim; unset for uninitialized
  std::vector<int64_t> stride;
  int64_t numel = 0;
  int64_t offset = 0;                 // storage offset in elements
  uint64_t bytes = 0;                 // numel * itemsize (sparse: stored component bytes)
  std::string storage;                // storage key ("0"), "" for none
  std::string device = "cpu";         // saved location: "cpu", "cuda:0", "meta"
  bool requires_grad = false;
  bool is_parameter_object = false;   // saved as torch.nn.Parameter (kind is then exact)
  TensorState state = TensorState::Materialized;
  bool resolved = false;              // uninitialized, but sized from `summary --model ARCH` (counted)
  TensorKind kind = TensorKind::Parameter;
  bool kind_inferred = true;          // true when kind was guessed from the name / dtype
  std::string layout = "strided";     // strided | sparse_coo | sparse_csr | quantized | nested | ...
  std::string qscheme;                // quantized: per_tensor_affine, ...
  double q_scale = 0.0;               // quantized per_tensor_affine: scale and zero point
  int64_t q_zero_point = 0;
  std::string subclass;               // tensor subclass / unusual rebuild function, if any
  const Value* identity = nullptr;    // the pickle node (same node = same Python object)
  std::string shard;                  // sharded checkpoints: the shard file holding it
};

// torch.distributed.checkpoint: one piece of a tensor, stored as a torch.save blob of that piece in a
// region of a .distcp file.
struct Chunk {
  std::vector<int64_t> offsets, sizes;  // where the piece sits in the whole tensor
  const MappedFile* file = nullptr;     // the .distcp file (kept alive by Checkpoint::keep_alive)
  uint64_t offset = 0, length = 0;      // the region holding the blob
};

struct Storage {
  std::string key;
  const DType* dtype = nullptr;
  uint64_t numel = 0;                 // in elements of dtype (UntypedStorage: bytes)
  uint64_t nbytes = 0;
  std::string device;
  std::string_view member;            // zip entry holding the bytes, viewing the mapped file ("" for legacy streams)
  uint64_t file_offset = 0;           // legacy / safetensors: where the bytes begin (0 = not located)
  uint64_t local_header = UINT64_MAX; // zip archives: the member's local header (data follows it)
  const MappedFile* source = nullptr; // the file holding the bytes when not the checkpoint's own (shards)
  bool present = false;               // the bytes are in the file
  bool in_model = false;              // referenced by the model (not only by optimizer state)
  std::vector<Chunk> chunks;          // DCP: the bytes are assembled from these (contiguous, of `shape`)
  std::vector<int64_t> shape;         // DCP: the whole tensor's size
};

struct Module {
  std::string name;                   // "" for the root
  std::string type;                   // short class name ("Linear"), "" when unknown
  std::string qualified_type;         // "torch.nn.modules.linear.Linear"
  std::optional<bool> training;
  std::string shared_with;            // set when this is a second path to a module listed earlier
  nlohmann::ordered_json attributes = nlohmann::ordered_json::object();  // TorchScript: non-tensor attributes
};

// TorchScript classes as declared in an archive's code/ (see torchscript.h).
struct TsMethod {
  std::string name;
  std::vector<std::string> self_calls;  // methods of the same object it calls: (self).name( / self.name(
  std::vector<std::pair<uint32_t, std::string>> body;  // (1-based line in its file, text without indent)
};

struct TsClass {
  std::string qualified;                // "__torch__.torch.nn.modules.conv.Conv2d"
  std::string base;                     // "Module", "object", ...
  std::vector<std::string> parameters;  // __parameters__
  std::vector<std::string> buffers;     // __buffers__
  std::vector<std::pair<std::string, std::string>> attributes;  // name -> declared type
  std::vector<TsMethod> methods;
  std::string file;                     // "code/__torch__/torch/nn/modules/conv.py"
  bool is_module() const { return base == "Module"; }
};

// A TorchScript archive saved after torch.jit.freeze: its parameters became these constants.
struct FrozenConstants {
  uint64_t tensors = 0, elements = 0, bytes = 0;
};

// A file besides the checkpoint's own whose pickles `check`'s security scan reads (a shard, DCP's
// .metadata); the scan's locations in it read "<label>:<where>".
struct ScanFile {
  std::string path;
  std::string label;
};

// Made by findings.cc; here because Summary carries them to the renderers.
struct Finding {
  std::string id;
  Severity severity = Severity::Warning;
  std::string message;
  std::string fix;
  std::vector<std::string> where;
};

struct Checkpoint {
  std::shared_ptr<MappedFile> file;
  std::string path;
  uint64_t file_size = 0;
  std::string format;                 // torch-zip | torch-legacy | pickle | lightning | torchscript
  std::string container;              // zip | legacy | pickle
  std::string prefix;                 // zip folder prefix ("archive")
  std::string model_key;              // where the model came from inside the object ("state_dict", "" = root)
  std::string content;                // state_dict | module | lightning | object
  int pickle_protocol = 0;
  std::vector<std::pair<std::string, std::string>> records;  // version, byteorder, ...
  std::vector<Tensor> tensors;
  std::vector<Storage> storages;
  std::vector<Module> modules;        // known module tree (whole pickled modules); empty = derive from keys
  bool split_inferred = true;         // parameter/buffer split guessed from names
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  nlohmann::ordered_json methods = nlohmann::ordered_json::array();  // TorchScript: compiled methods of the root
  std::vector<FrozenConstants> frozen;  // one per frozen archive read (a sharded checkpoint's: its shards')
  std::vector<ScanFile> scan_files;   // sharded / DCP: what `check` scans instead of `file`
  std::vector<GlobalRef> globals;     // every global the pickles named
  std::vector<TsClass> ts_classes;    // TorchScript: the classes declared in code/
  std::shared_ptr<Heap> heap;         // keeps pickle values (identities) alive
  std::vector<std::shared_ptr<void>> keep_alive;  // shards' files and heaps
};

const char* to_string(TensorState s);
const char* to_string(TensorKind k);
const char* to_string(Severity s);

}  // namespace ckpt
