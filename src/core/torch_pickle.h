// Interprets an inert pickle graph the way torch.load would, without calling anything: recognizes the
// torch._utils._rebuild_* family, Parameters, meta and uninitialized tensors, storages behind persistent
// ids, whole pickled nn.Modules and Lightning checkpoints, and fills a Checkpoint.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/checkpoint.h"
#include "core/keys.h"  // infer_kinds
#include "core/name_index.h"
#include "core/zip.h"

namespace ckpt {

// Called once per storage key, on first sight, to say where its bytes live (each container format
// knows); it fills `member` / `present` / `file_offset` or throws. `at` is the tensor that named it.
using StorageLocator = std::function<void(Storage& s, const Value* at)>;

// Storages of a zip archive (torch.save or TorchScript): `<dir><key>` under `prefix/`, stored (never
// deflated) and at least as large as the persistent id says. Errors name the pickle offset of the tensor.
StorageLocator zip_storage_locator(const ZipReader& zip, std::string dir, const ByteView& pkl);

class TorchInterpreter {
 public:
  // `pkl` is the view the pickle was read from; errors about a value name its opcode offset in it.
  TorchInterpreter(Checkpoint& ck, const ByteView& pkl, const Limits& limits, StorageLocator locate);

  // Fills ck.tensors / ck.modules / ck.training / ck.content / ck.model_key from the unpickled root.
  void interpret(const Value* root);

  // Parses a storage persistent id tuple ('storage', cls, key, location, numel[, view]).
  struct StorageId {
    std::string key;
    const DType* dtype = nullptr;
    uint64_t numel = 0;
    std::string location;
    const Value* view = nullptr;  // legacy view metadata or nullptr
  };
  StorageId storage_id(const Value* pid, const Value* at) const;
  // The same from the tuple's fields (numel: nullopt when not an int).
  StorageId storage_id(const Value* cls, const Value* key, const Value* location, std::optional<int64_t> numel,
                       const Value* at) const;

  // A torch._utils._rebuild_* call (or lazy parameter) and what it describes.
  bool is_tensor(const Value* v) const;
  Tensor tensor(const Value* v, const std::string& name);
  // Storages met from now on belong to the model (true) or to something beside it (optimizer state,
  // TorchScript constants).
  void set_in_model(bool in_model) { in_model_ = in_model; }
  // Told now and then, while a big mapping is walked, a pickle offset that the walk has passed (as
  // unpickle's `read_past`: values before it are still read when something refers back to them).
  void set_read_past(const std::function<void(uint64_t)>* f) { read_past_ = f; }

 private:
  size_t storage(const Value* pid, const Value* at);
  size_t storage(StorageId id, const Value* at);
  // tensor()'s pieces: the checks every rebuild shares (sizes and strides, bytes, the storage it views),
  // then one member per rebuild family, each filling the Rebuild's tensor.
  struct Rebuild;
  void need(const Rebuild& r, size_t lo, size_t hi) const;  // lo to hi arguments, as Python takes them
  void dims(const Rebuild& r, std::span<const int64_t> sz, std::span<const int64_t> st) const;
  void shape_stride(const Rebuild& r, const Value* size, const Value* stride) const;
  void bytes_of(const Rebuild& r) const;
  // Binds the tensor to storage `idx` at element `offset` (checked non-negative) and checks that every
  // element lies inside it.
  void bind(const Rebuild& r, size_t idx, std::optional<int64_t> offset, const Value* pid, const DType* explicit_dtype);
  void with_storage(const Rebuild& r, const Value* pidv, const Value* offset, const DType* explicit_dtype);
  void uninitialized(const Rebuild& r) const;
  void from_type(const Rebuild& r);
  void parameter(const Rebuild& r);
  void strided(const Rebuild& r, bool v3);
  void storageless(const Rebuild& r, size_t at, std::string_view what) const;
  void meta(const Rebuild& r) const;
  void quantized(const Rebuild& r);
  void sparse(const Rebuild& r);
  void nested(const Rebuild& r);
  void device_copy(const Rebuild& r);
  void wrapper_subclass(const Rebuild& r) const;
  bool is_module(const Value* v) const;
  void walk_module(const Value* v, const std::string& path, int depth);
  void collect(const Value* v, const std::string& path, int depth);
  // torch_lightning.cc: a Lightning checkpoint's top level, read in two passes (key_details, then
  // claim_key) over what the walks below count and describe.
  void lightning(const Value* root);
  void key_details(const std::string& key, const Value* val);
  void claim_key(const std::string& key, const Value* val);
  TensorCount held_tensors(const Value* v);
  nlohmann::ordered_json state_details(const Value* v);
  void optimizer_details(const std::string& key, size_t index, const Value* o);
  nlohmann::ordered_json plain(const Value* v, int depth);
  nlohmann::ordered_json tensor_summary(const Value* v);
  [[noreturn]] void fail(const Value* at, const std::string& msg) const;
  void budget();

  Checkpoint& ck_;
  ByteView pkl_;
  const Limits& lim_;
  StorageLocator locate_;
  KeyIndex storage_index_;  // key -> index in ck_.storages
  std::deque<std::string> storage_keys_;  // the keys storage_index_ views
  uint64_t visited_ = 0;
  bool in_model_ = true;  // storages resolved now belong to the model (not optimizer state)
  // Containers and modules on the way from the root to the node being walked: a pickle may hold a
  // container inside itself (torch.load gives the cycle back), and walking into it again would never end.
  std::unordered_set<const Value*> on_path_;
  int rebuild_depth_ = 0;  // tensor rebuilds inside tensor rebuilds (parameters, subclasses, sparse parts)
  const std::function<void(uint64_t)>* read_past_ = nullptr;
  uint64_t told_ = 0;  // the last offset read_past_ was told
};

// Python's int(text, base) for base 0 or 10 (as the C unpickler parses INT / LONG text and as int()
// parses a string): surrounding whitespace, a sign, for base 0 the 0x / 0o / 0b prefixes and no leading
// zeros in decimal, single '_' between digits. The value as canonical decimal text ("-12"), or nullopt
// where Python raises ValueError (and for literals over 4096 digits, which no checkpoint needs).
std::optional<std::string> python_int_text(std::string_view text, int base);

// The Python int an unpickled value equals, as canonical decimal text: Int, Bool (0 / 1), and BigInt
// from LONG1 / LONG4 bytes or INT / LONG text. With the pickle's view the opcode at v->offset says which
// encoding a BigInt came from (INT text keeps a trailing 'L' and so is no int, as in Python); without
// it the text is tried first. nullopt for anything that is not an int.
std::optional<std::string> int_value_text(const Value* v, const ByteView* pkl = nullptr);

// The legacy torch.save stream's first pickle: torch.load compares its value with the magic number
// (magic_number != 0x1950a86a20f9469cfc6c), so every encoding of that int counts: LONG1 / LONG4 with or
// without sign padding, INT / LONG text in any base Python accepts, behind PROTO / FRAME / memo opcodes.
bool is_legacy_magic(const Value* v, const ByteView* pkl = nullptr);
// The second pickle: equal to 1001 as Python compares (an int of that value, or the float 1001.0).
bool is_legacy_protocol_version(const Value* v, const ByteView* pkl = nullptr);

// What the first pickle of a file says about a legacy stream. Computed: its value is made by a call
// (REDUCE / NEWOBJ / OBJ / INST, e.g. builtins.int('1950a86a20f9469cfc6c', 16)) and the next pickle is
// the protocol version 1001, so torch would run the call and compare; ckpt cannot know the value without
// running it. WrongNumber: a number other than the magic (or INT / LONG text Python does not read as an
// int), followed by 1001 (torch: "Invalid magic number", or the unpickler's ValueError). None: not a legacy stream (a bare
// pickle, or anything else).
enum class LegacyMagic : uint8_t { None, Magic, Computed, WrongNumber };
// `first` is the pickle that starts at offset 0 of `file`; the second one is read into `heap` when needed.
LegacyMagic classify_legacy_magic(const ByteView& file, const Unpickled& first, Heap& heap, const Limits& limits);

// Dotted path join: join("", "a") == "a", join("a", "b") == "a.b".
std::string join_path(const std::string& a, const std::string& b);

// A dict's (or object's) value for a string key, nullptr when absent; and whether a value reads as a dict
// (a dict, an object holding pairs, an OrderedDict): what the Lightning and top-level readings walk.
const Value* dict_value(const Value* dict, std::string_view k);
bool dict_like(const Value* v);

}  // namespace ckpt
