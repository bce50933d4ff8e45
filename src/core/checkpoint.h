// What readers produce: a Checkpoint of tensor records, storages, an optional module tree, typed
// metadata (training state, TorchScript archive facts, shard lists) and the facts findings.cc turns
// into findings (readers record, they do not judge). Nothing here holds tensor bytes; storages stay
// references into the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dims.h"
#include "core/severity.h"
#include "core/dtype.h"
#include "core/hf_config.h"
#include "core/mapped_file.h"
#include "core/pickle.h"

namespace ckpt {

class ZipReader;  // core/zip.h

enum class TensorState : uint8_t { Materialized, Uninitialized, Meta };
// Attribute: a TorchScript tensor that is neither (an attribute outside __parameters__ / __buffers__, or
// one inside a torch.classes object or a __getstate__ state, such as quantized packed weights).
enum class TensorKind : uint8_t { Parameter, Buffer, Attribute };

// What the file is, as summary's JSON `format` names it. None: nothing read yet.
enum class Format : uint8_t { None, TorchZip, TorchLegacy, Pickle, Lightning, TorchScript, Safetensors, Dcp, Sharded, Pt2 };
// How its bytes are held. Shards: a sharded checkpoint, whose JSON `container` is its shards' format
// (see container_text).
enum class Container : uint8_t { None, Zip, Legacy, Pickle, Safetensors, Dcp, Shards };
// What the unpickled root is: a state dict, a whole nn.Module, a Lightning checkpoint, another
// training dict holding the model under Checkpoint::model_key, or any other object.
// Tensors: a mapping or sequence of plain tensors that is no model's (no module path in any name: a
// saved example input, embeddings), told by mark_plain_tensors (keys.h).
enum class Content : uint8_t { None, StateDict, Module, Lightning, Checkpoint, Object, Tensors };
// torch.layout of an entry, plus what ckpt tells apart: Sparse (a sparse rebuild that names no
// layout), Quantized, Nested, Opaque (a rebuild function ckpt does not interpret). A sparse rebuild
// may name any layout: Other keeps the name in Tensor::layout_name.
enum class Layout : uint8_t {
  Strided,
  Sparse,
  SparseCoo,
  SparseCsr,
  SparseCsc,
  SparseBsr,
  SparseBsc,
  Quantized,
  Nested,
  Opaque,
  Other
};

// What few entries have: a layout named only by the file, quantization, a subclass (Tensor::x).
struct TensorExtra {
  std::string layout_name;  // Layout::Other: the layout as the file names it
  std::string qscheme;  // quantized: per_tensor_affine, ...
  double q_scale = 0.0;  // quantized per_tensor_affine: scale and zero point
  int64_t q_zero_point = 0;
  std::string subclass;  // tensor subclass / unusual rebuild function, if any
};

// One entry. Lean (a million-entry file holds a million of these): sizes and strides inline up to four
// dimensions, the rare fields boxed.
struct Tensor {
  std::string name;  // dotted path ("encoder.0.weight")
  const DType* dtype = nullptr;  // nullptr only for uninitialized entries saved without a dtype
  Dims shape;  // empty for 0-dim; unset for uninitialized
  Dims stride;
  int64_t numel = 0;
  int64_t offset = 0;  // storage offset in elements
  uint64_t bytes = 0;  // numel * itemsize (sparse: stored component bytes)
  SharedString storage;  // storage key ("0"), "" for none (shared with its Storage's key where it was copied from it)
  Interned device = "cpu";  // saved location: "cpu", "cuda:0", "meta"
  const Value* identity = nullptr;  // the pickle node (same node = same Python object)
  Boxed<TensorExtra> x;  // read as x->qscheme, written as x.mut().qscheme
  // Sharded checkpoints: 1 + the index in Checkpoint::sharded.shards of the shard holding it (0: none).
  uint32_t shard = 0;
  bool requires_grad = false;
  bool is_parameter_object = false;  // saved as torch.nn.Parameter (kind is then exact)
  TensorState state = TensorState::Materialized;
  bool resolved = false;  // uninitialized, but sized from `summary --model ARCH` (counted)
  TensorKind kind = TensorKind::Parameter;
  bool kind_inferred = true;  // true when kind was guessed from the name / dtype
  Layout layout = Layout::Strided;
  std::string layout_text() const;  // as JSON and messages name it ("strided", "sparse_coo", ...)
};

// torch.distributed.checkpoint: one piece of a tensor, stored as a torch.save blob of that piece in a
// region of a .distcp file.
struct Chunk {
  std::vector<int64_t> offsets, sizes;  // where the piece sits in the whole tensor
  const MappedFile* file = nullptr;  // the .distcp file (kept alive by Checkpoint::keep_alive)
  uint64_t offset = 0, length = 0;  // the region holding the blob
};

struct Storage {
  SharedString key;
  const DType* dtype = nullptr;
  uint64_t numel = 0;  // in elements of dtype (UntypedStorage: bytes)
  uint64_t nbytes = 0;
  Interned device;
  std::string_view member;  // zip entry holding the bytes, viewing the mapped file ("" for legacy streams)
  uint64_t file_offset = 0;  // legacy / safetensors: where the bytes begin (0 = not located)
  uint64_t local_header = UINT64_MAX;  // zip archives: the member's local header (data follows it)
  const MappedFile* source = nullptr;  // the file holding the bytes when not the checkpoint's own (shards)
  bool present = false;  // the bytes are in the file
  bool in_model = false;  // referenced by the model (not only by optimizer state)
  struct Pieces {  // DCP: the bytes are assembled from these (contiguous, of `shape`)
    std::vector<Chunk> chunks;
    std::vector<int64_t> shape;  // the whole tensor's size
  };
  Boxed<Pieces> dcp;  // read as dcp->chunks, written as dcp.mut().chunks
};

struct Module {
  std::string name;  // "" for the root
  std::string type;  // short class name ("Linear"), "" when unknown
  std::string qualified_type;  // "torch.nn.modules.linear.Linear"
  std::optional<bool> training;
  std::string shared_with;  // set when this is a second path to a module listed earlier
  nlohmann::ordered_json attributes = nlohmann::ordered_json::object();  // TorchScript: non-tensor attributes
};

// TorchScript classes as declared in an archive's code/ (see torchscript.h).
struct TsLine {
  uint32_t line = 0;  // 1-based line in its file
  std::string text;  // without its indent
  uint32_t indent = 0;  // spaces before text
};

struct TsMethod {
  std::string name;
  std::vector<std::string> self_calls;  // methods of the same object it calls: (self).name( / self.name(
  std::vector<TsLine> body;  // the statements, after the signature
  std::string signature;  // "(self: __torch__.M,\n    x: Tensor) -> Tensor" (every line of it, the name left out)
};

struct TsClass {
  std::string qualified;  // "__torch__.torch.nn.modules.conv.Conv2d"
  std::string base;  // "Module", "object", ...
  std::vector<std::string> parameters;  // __parameters__
  std::vector<std::string> buffers;  // __buffers__
  std::vector<std::pair<std::string, std::string>> attributes;  // name -> declared type
  std::vector<TsMethod> methods;
  std::string file;  // "code/__torch__/torch/nn/modules/conv.py"
  bool functions = false;  // not a class: the file's free functions (top-level defs); qualified is the file's module
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

// A model folder's file beside the files its reader read as the model, that a user or a framework would
// load with pickle: by its name (*.bin, *.pt, *.pth, *.ckpt, *.pkl, *.pickle, *.pt2, *.ptl: a Trainer's
// optimizer.pt, training_args.bin) or, locally, by its first bytes (a pickle, a zip). `check` and
// `summary` scan each as `check FILE` would (reader.h: folder_side_files).
enum class SideKind : uint8_t { Pickle, Zip, Tar, Other };  // Other: named so, but none of those: not scanned
struct SideFile {
  std::string path;  // as vfs opens it
  std::string label;  // its name in the folder
  uint64_t size = 0;
  SideKind kind = SideKind::Other;
  std::shared_ptr<MappedFile> file;  // null for Other
  std::string error;  // a file named so that could not be opened: not scanned
};
struct FolderFiles {
  bool folder = false;  // the input is a model folder (a directory or a remote one)
  std::vector<SideFile> files;  // in name order
  uint64_t left_out = 0;  // files past kMaxFolderFiles, not looked at
};
constexpr uint64_t kMaxFolderFiles = 10'000;

// One `where` of a finding as fields, taken from the scan that made it (never parsed back from the
// text), so that JSON and SARIF consumers need no regex. Empty / nullopt: does not apply.
struct Location {
  std::string file;  // the shard / DCP file it is in when that is not the file checked (its label)
  std::string member;  // archive member or nested label: "archive/data.pkl", "" = the file itself
  std::optional<uint64_t> offset;  // byte offset in the member's (or, member "", the file's) pickle bytes
  std::string opcode;  // the pickle opcode naming the global: GLOBAL, STACK_GLOBAL, INST, ...
  std::string global;  // "posix.system"
  std::optional<uint32_t> line = std::nullopt;  // TorchScript code: the 1-based line in member
  std::string function = {};  // TorchScript code: the function or method holding that line
};

// What dynamo (torch.compile) does at a finding's sites, for the compile rules: measured on the torch
// versions named, by testdata/gen_compile.py.
struct CompileFacts {
  std::vector<std::string> breaks_on;  // the torch versions whose dynamo graph-breaks there ("2.6", "2.14")
  std::vector<std::pair<std::string, std::vector<std::string>>> fixed_by;  // version -> torch._dynamo.config flags,
                                                                          // each one alone removing the break there
  std::vector<std::string> entries;  // the root's methods reaching the sites, forward first
};

// Made by findings.cc; here because Summary carries them to the renderers.
struct Finding {
  std::string id;
  Severity severity = Severity::Warning;
  std::string message;
  std::string fix;
  std::vector<std::string> where;  // for humans
  std::vector<Location> locations = {};  // index-aligned with where; shorter (or empty) where none apply
  std::optional<CompileFacts> compile = std::nullopt;  // the compile rules' measured dynamo facts
};

// ---- metadata: typed here, written to summary's JSON `metadata` by metadata_json alone ----

struct TensorCount {
  uint64_t tensors = 0, bytes = 0;
};

// A Lightning checkpoint or another training dict: every top-level key but the model's. The keys are
// the user's, so the JSON keeps the file's order (a key saved twice keeps its first place and its last
// value, as a dict would), and values ckpt does not interpret stay plain JSON.
struct TrainingInfo {
  struct State {  // optimizer_states, lr_schedulers, optimizer(s), scheduler(s)
    uint64_t count = 0;  // the list's length, 1 for anything else
    TensorCount held;
  };
  struct Data {  // any other key: the tensors it holds, or else its plain value (epoch, hyper_parameters, ...)
    std::optional<TensorCount> held;
    nlohmann::ordered_json value;
  };
  std::optional<std::vector<std::string>> callbacks;  // the callbacks dict's keys
  std::optional<TensorCount> callback_tensors;  // tensors in callback states, when there are any
  std::optional<std::vector<std::string>> loops;  // the loops dict's keys
  std::vector<std::pair<std::string, State>> states;
  std::vector<std::pair<std::string, Data>> data;
  std::vector<std::string> order;  // every key above, as the JSON lists them
  // lightning_details.h: optimizers ({key, index, param_groups, state: {params, keys}}), lr_schedulers and
  // callbacks ({key, [index,] state}), precision ({key, state}) and loops, as plain JSON in which each
  // 1-element tensor is {"__tensor__": "float32[]", "__scalar__": k}, k indexing `scalars`.
  nlohmann::ordered_json details = nlohmann::ordered_json::object();
  std::vector<Tensor> scalars;
  std::vector<std::optional<double>> scalar_values;  // read_training_scalars: each scalar's value, if readable

  // Before `key` is written: drops what it held and gives it its place in `order`.
  void claim(const std::string& key);
  const State* state(std::string_view key) const;
  const Data* entry(std::string_view key) const;
};

// One constant of a TorchScript archive's constants.pkl, named c<k> as code/ refers to it (CONSTANTS.c0).
struct TsConstant {
  std::string name;
  bool is_tensor = false;
  std::string dtype;  // tensors: dtype ("?" when unknown), shape and numel
  std::vector<int64_t> shape;
  int64_t numel = 0;
  nlohmann::ordered_json value;  // anything else: its plain value
};

struct TsConstants {
  uint64_t count = 0, tensors = 0, elements = 0, bytes = 0;
  std::vector<TsConstant> items;
};

// A compiled method of the root module, and how forward relates to it.
struct TsMethodInfo {
  std::string name;
  bool reachable_from_forward = false;
  bool entry_point = false;  // no other method calls it (@torch.jit.export and the like)
  std::vector<std::string> calls;  // methods of the root it calls
};

struct TsExtraFile {
  std::string name;  // without extra/
  uint64_t bytes = 0;
};

struct TorchScriptInfo {
  std::optional<TsConstants> constants;  // when the archive has constants.pkl
  bool frozen = false;  // torch.jit.freeze: tensor constants and no parameters (listed with constants)
  std::vector<TsExtraFile> extra_files;
  bool mobile = false;  // bytecode.pkl: a lite-interpreter archive
  std::vector<TsMethodInfo> methods;  // summary's JSON `methods`
  std::string root_class;  // "__torch__.model.Net": the class of data.pkl's root object
};

struct ShardInfo {
  std::string file;
  Format format = Format::None;
  uint64_t tensors = 0, bytes = 0;
};

struct ShardedInfo {
  std::optional<nlohmann::ordered_json> index_metadata;  // the index's own `metadata`, as saved
  std::vector<ShardInfo> shards;  // in file-name order
};

struct Checkpoint;
struct Limits;

struct DcpInfo {
  // Reads a chunk's torch.save blob (reader.h's read_checkpoint of a file in memory): StorageIndex assembles
  // a DCP tensor with it.
  Checkpoint (*read_blob)(std::shared_ptr<MappedFile> blob, const Limits& limits) = nullptr;
  std::vector<std::string> bytes_entries;  // BytesStorageMetadata entries
  std::vector<std::pair<std::string, uint64_t>> files;  // every file of the directory and its size, by name
  std::vector<std::string> data_files;  // the files storage_data names (regions of torch.save zips)
};

// torch.export archives (.pt2, see pt2.h). Sizes of symbolic dimensions are their text ("s77", "2*s0").
struct Pt2Spec {
  std::string kind;  // user_input, parameter, buffer, tensor_constant, custom_obj, user_output, ...
  std::string name;  // the graph value's name
  std::string target;  // parameter / buffer / constant name, "" for user inputs and outputs
  std::string dtype;  // tensors only, "" otherwise
  std::vector<std::string> shape;  // tensors: each dimension, an int or a symbol expression
  std::string value;  // non-tensor arguments: what the serializer wrote ("as_int", a constant, ...)
};

struct Pt2Range {
  std::string symbol;
  std::optional<int64_t> min, max;  // nullopt: unbounded (the file says inf / -inf or leaves it out)
};

struct Pt2Constant {  // an ExportedProgram constant (tensor constant, non-persistent buffer, custom object)
  std::string name, kind, dtype;
  std::vector<std::string> shape;
  uint64_t bytes = 0;  // numel * itemsize when the shape is static
  std::string path;  // archive member holding it ("" when the archive keeps it in one blob)
};

struct Pt2Tensor {  // a sample input tensor
  std::string name, dtype;
  std::vector<int64_t> shape;
};

struct Pt2Model {
  std::string name;  // "model" for torch.export.save
  std::string member;  // its JSON
  std::string torch_version, schema_version;
  uint64_t nodes = 0;
  std::vector<std::pair<std::string, uint64_t>> ops;  // operator census: call_function targets by count (most first)
  std::vector<Pt2Spec> inputs, outputs;
  std::vector<Pt2Range> ranges;
  uint64_t flops = 0;  // matmul family, convolutions, attention at the sizes flops_basis names
  std::string flops_basis;  // "static": no symbolic sizes; "hints": symbols at the export's example sizes
  uint64_t parameters = 0, buffers = 0, tensors = 0, bytes = 0;  // its state dict
  std::vector<Pt2Constant> constants;
  std::string sample_inputs;  // member, "" when absent
  std::vector<Pt2Tensor> sample_tensors;
};

struct Pt2Artifact {  // an AOTInductor file under data/aotinductor/
  std::string path;
  std::string kind;  // shared_library, cpp, kernel, weights, json, other
  uint64_t bytes = 0;
};

struct Pt2Info {
  std::string layout;  // "pt2-archive" (torch >= 2.7 archives), "export-zip" (torch 2.6's torch.export.save)
  std::string archive_format, archive_version;
  std::string main_model;  // the model whose tensors ck.tensors holds
  std::vector<Pt2Model> models;  // by name
  std::vector<Pt2Artifact> aoti;
};

struct Checkpoint {
  std::shared_ptr<MappedFile> file;
  std::string path;
  uint64_t file_size = 0;
  Format format = Format::None;
  Container container = Container::None;
  std::string prefix;  // zip folder prefix ("archive")
  std::string model_key;  // where the model came from inside the object ("state_dict", "" = root)
  Content content = Content::None;
  int pickle_protocol = 0;
  std::vector<std::pair<std::string, std::string>> records;  // version, byteorder, ...
  std::vector<Tensor> tensors;
  std::vector<Storage> storages;
  std::vector<Module> modules;  // known module tree (whole pickled modules); empty = derive from keys
  bool split_inferred = true;  // parameter/buffer split guessed from names
  // Every entry with a storage key names a storage no other entry names (safetensors, and sharded sets of
  // them, say so): tied weights and shared storages need no search.
  bool own_storages = false;
  TrainingInfo training;  // content lightning / checkpoint: everything beside the model
  TorchScriptInfo torchscript;  // format torchscript
  std::optional<std::vector<std::pair<std::string, std::string>>> safetensors_metadata;  // the header's __metadata__
  ShardedInfo sharded;  // format sharded
  DcpInfo dcp;  // format dcp
  Pt2Info pt2;  // format pt2
  std::optional<HfConfig> hf;  // a Hugging Face model's config.json (hf_config.h)
  std::vector<FrozenConstants> frozen;  // one per frozen archive read (a sharded checkpoint's: its shards')
  std::vector<ScanFile> scan_files;  // sharded / DCP: what `check` scans instead of `file`
  FolderFiles side;  // a model folder's other files that pickle would load: scanned too
  std::vector<GlobalRef> globals;  // every global the pickles named
  // The stored zip member whose pickle gave the first `globals_main` of `globals` (data.pkl): the security
  // scan of `file` takes them from here instead of running that pickle again.
  const uint8_t* globals_from = nullptr;
  size_t globals_main = 0;
  std::vector<TsClass> ts_classes;  // TorchScript: the classes declared in code/
  std::shared_ptr<Heap> heap;  // keeps pickle values (identities) alive
  std::shared_ptr<const ZipReader> zip;  // a torch.save zip's directory, for the security scan
  std::vector<std::shared_ptr<void>> keep_alive;  // shards' files and heaps
};

// The names output uses (JSON, text, messages); None is "".
const char* to_string(TensorState s);
const char* to_string(TensorKind k);
const char* to_string(Severity s);
const char* to_string(Format f);
const char* to_string(Container c);
const char* to_string(SideKind k);
const char* to_string(Content c);
const char* to_string(Layout l);  // Other: "other" (Tensor::layout_text gives the saved name)
// The layout a name denotes: every to_string name maps back, anything else is Other.
Layout layout_from_name(std::string_view name);

// Summary JSON's `container`: to_string(ck.container), except that a sharded checkpoint names its
// shards' format (the last shard's; "" for none).
std::string container_text(const Checkpoint& ck);
// Summary JSON's `metadata` object and (TorchScript) `methods` array.
nlohmann::ordered_json metadata_json(const Checkpoint& ck);
nlohmann::ordered_json methods_json(const TorchScriptInfo& ts);
// Summary JSON's metadata.pt2 (format pt2).
nlohmann::ordered_json pt2_json(const Pt2Info& p);
// One Lightning / training entry as the JSON shows it.
nlohmann::ordered_json state_json(const TrainingInfo::State& s);
nlohmann::ordered_json data_json(const TrainingInfo::Data& d);

// The format's name in headers: "torch.save zip", "safetensors", ...
const char* format_title(const Checkpoint& ck);

}  // namespace ckpt
