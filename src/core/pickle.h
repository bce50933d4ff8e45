// A pickle virtual machine that never calls anything. It implements every opcode of protocols 0-5 and
// builds an inert object graph: GLOBAL / STACK_GLOBAL give Global nodes (module, name) that are never
// imported; REDUCE, NEWOBJ, NEWOBJ_EX, OBJ and INST give Object nodes recording the callable and its
// arguments; BUILD records state; SETITEM(S) / APPEND(S) on an Object record items. Interpretation
// (what a torch._utils._rebuild_tensor_v2 call means) happens later, in the format readers.
//
// Limits (see Limits in error.h): opcode count, memo entries, one payload's length, nesting depth of
// values, size of the stack. Each violation is an InputError naming the member and the opcode offset.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"

namespace ckpt {

enum class PKind : uint8_t {
  None,
  Bool,
  Int,
  BigInt,
  Float,
  Str,
  Bytes,
  Tuple,
  List,
  Dict,
  Set,
  FrozenSet,
  Global,
  Object,
  PersId
};

// How an Object came to be (for messages and for the security scan).
enum class ObjHow : uint8_t { Reduce, NewObj, NewObjEx, Obj, Inst };

class Heap;
struct Value;
struct PackedTensor;

// A growable array of children living in a Heap (trivial, so freeing a Heap of millions of values is
// freeing a few blocks, and a Value can hold one in a union). Zeroed is empty.
class Kids {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Value* operator[](size_t k) const { return p_[k]; }
  Value* const* begin() const { return p_; }
  Value* const* end() const { return p_ + n_; }
  Value* front() const { return p_[0]; }
  void push(Heap& h, Value* v);
  void reserve(Heap& h, size_t n);  // room for n: exactly n when there is none yet
  void assign(Heap& h, std::span<Value* const> vs);

 private:
  Value** p_;
  uint32_t n_;
  uint32_t cap_;
};

// Fields only objects, globals and persistent ids have.
struct ObjExt {
  Value* callable = nullptr;  // Object: the Global (or other value) that would have been called
  Value* args = nullptr;  // Object: the argument tuple; PersId: the persistent id
  Value* kwargs = nullptr;  // Object from NEWOBJ_EX
  std::string_view name;  // Global: the name inside the module
  size_t global = 0;  // Global: its GlobalRef in Unpickled::globals
  Kids dict{};  // Object: SETITEM(S) pairs (OrderedDict and friends)
  Value* state = nullptr;  // BUILD argument (any kind may receive one)
  PackedTensor* packed = nullptr;  // Object: its arguments, packed (args is null until unpacked)
};

// The argument tuple of a packed call, built into its heap (Value::args()).
Value* unpack_args(ObjExt* ext);

// One node of the graph: 40 bytes (a million-entry state dict makes several million). A node holds one
// payload, by kind: an int or a float, a string (str() of Str / Bytes / BigInt, a Global's module), or
// children (kids() of Tuple / List / Dict / Set / FrozenSet / Object); asking a node for the payload of
// another kind gives an empty one.
struct Value {
  PKind kind = PKind::None;
  ObjHow how = ObjHow::Reduce;
  bool b = false;
  uint32_t depth = 1;  // nesting depth when built (containers: 1 + deepest child)
  uint64_t offset = 0;  // pickle offset of the opcode that made it
  union {
    struct {
      uint64_t lo, hi;
    } raw_ = {0, 0};  // all payloads start empty
    int64_t i;
    double f;
    struct {
      const char* p;
      size_t n;
    } s_;  // Str / Bytes payload; Global: module; BigInt: decimal text or 2's-complement LE bytes
    Kids items_;  // Tuple/List/Set elements; Dict: key, value, key, value...; Object: APPENDs
  };
  ObjExt* ext = nullptr;  // Object / Global / PersId, or any value that received BUILD

  bool has_str() const { return kind == PKind::Str || kind == PKind::Bytes || kind == PKind::BigInt || kind == PKind::Global; }
  bool has_kids() const {
    return kind == PKind::Tuple || kind == PKind::List || kind == PKind::Dict || kind == PKind::Set || kind == PKind::FrozenSet ||
           kind == PKind::Object;
  }
  std::string_view str() const { return has_str() ? std::string_view(s_.p, s_.n) : std::string_view(); }
  const Kids& kids() const { return has_kids() ? items_ : no_kids(); }
  // For the machine that builds the graph: the node's kind is set first.
  void set_str(std::string_view v) { s_ = {v.data(), v.size()}; }
  Kids& mut_kids() { return items_; }
  static const Kids& no_kids() {
    static const Kids none{};
    return none;
  }

  Value* callable() const { return ext ? ext->callable : nullptr; }
  // The argument tuple (a packed call's is unpacked into the heap on first use: see PackedTensor).
  Value* args() const { return ext ? ext->args ? ext->args : ext->packed ? unpack_args(ext) : nullptr : nullptr; }
  const PackedTensor* packed() const { return ext ? ext->packed : nullptr; }
  Value* kwargs() const { return ext ? ext->kwargs : nullptr; }
  std::string_view name() const { return ext ? ext->name : std::string_view(); }
  Value* state() const { return ext ? ext->state : nullptr; }
  bool is(PKind k) const { return kind == k; }
  bool is_str() const { return kind == PKind::Str; }
  bool is_int() const { return kind == PKind::Int; }
  // "module.name" of a Global, or of an Object's callable when that is a Global; "" otherwise.
  std::string qualified() const;
  // Dict-like lookup by string key over a Dict's pairs or an Object's SETITEMs (last one wins).
  Value* get(std::string_view key) const;
  const Kids& pairs() const { return kind == PKind::Dict ? items_ : ext ? ext->dict : no_kids(); }
};
static_assert(sizeof(Value) == 40, "a Value is 40 bytes");

// A torch._utils._rebuild_tensor_v2 call exactly as torch.save writes one, held as its fields instead of
// the ten-odd values of its argument tuple (unpickle's `pack`):
//   _rebuild_tensor_v2(PersId(('storage', <storage class>, key, location, numel)), storage_offset,
//                      (sizes...), (strides...), requires_grad, OrderedDict() or {})
// with a string key and location, ints everywhere else, as many sizes as strides, and the hooks empty. Only
// the call's Object value remains in the graph; Value::args() rebuilds the argument values (kinds, values,
// the containers' offsets and depths as the pickle made them) the first time anything asks for them.
// TorchInterpreter reads the fields directly.
struct PackedTensor {
  Heap* heap = nullptr;  // where args() builds the values
  uint64_t reduce_at = 0;  // the REDUCE's offset
  Value* storage_word = nullptr;  // the 'storage' string
  Value* cls = nullptr;  // the storage class (a Global)
  Value* key = nullptr;  // the storage key (a Str)
  Value* location = nullptr;  // the location (a Str)
  Value* hooks_fn = nullptr;  // the backward hooks: OrderedDict's Global, or null for an empty dict
  int64_t numel = 0, offset = 0;
  // Offsets of the argument tuple, the persistent id tuple, the PersId, the sizes, the strides and the
  // hooks, back from the REDUCE's.
  uint32_t back[6] = {};
  uint8_t ndim = 0;
  bool requires_grad = false;
  const int64_t* sizes() const { return dims; }
  const int64_t* strides() const { return dims + ndim; }
  int64_t dims[1];  // sizes then strides: 2 * ndim (allocated with the struct)
};
// How a pickle used a global, as bits: Python's unpickler would call it (REDUCE, NEWOBJ, NEWOBJ_EX,
// OBJ, INST), set state on an instance of it (BUILD, which calls the class's __setstate__), or change
// the imported object itself (BUILD, APPEND(S), SETITEM(S) on the global). Without any bit it was only
// named (imported, never called).
// kUseWrittenResult: what the global returned (a tensor from torch._utils._rebuild_tensor_v2) was then
// written into by SETITEM(S) / APPEND(S): Python calls the tensor's __setitem__, changing its values.
// kUseMemberLookup: builtins.getattr called by REDUCE on exactly an allowed Enum member lookup
// (allowed_member_lookup: getattr(EnumClass, 'MEMBER'), as Python pickles Enum members).
enum GlobalUse : uint8_t { kUseCalled = 1, kUseBuilt = 2, kUseMutated = 4, kUseWrittenResult = 8, kUseMemberLookup = 16 };

// A global reference seen while unpickling, with where it was seen and how it was used (for the
// security verdict).
struct GlobalRef {
  std::string module;
  std::string name;
  uint64_t offset = 0;
  bool stack_global = false;
  const char* opcode = "GLOBAL";  // GLOBAL, STACK_GLOBAL, INST, EXT1/2/4
  uint8_t use = 0;  // GlobalUse bits
  const char* use_opcode = nullptr;  // the first use: REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST, BUILD, APPEND, ...
  uint64_t use_offset = 0;
  bool computed = false;  // STACK_GLOBAL on values that are not strings (results of calls)
  // Seen only by the scan's second parse, as Python's C unpickler reads a file object without peek()
  // (pickle.cc's FrameCursor), which a real loader may not do: a name there that nothing calls is not
  // graded on the denylist.
  bool file_parse = false;
  const char* write_opcode = nullptr;  // kUseWrittenResult: the first SETITEM(S) / APPEND(S) on a result
  uint64_t write_offset = 0;
  // Calls that received this global as an argument: (the callee's "module.name", "" when the callee is
  // not a global; argument position). A callee such as _rebuild_from_type_v2 calls its argument.
  std::vector<std::pair<std::string, uint8_t>> passed_to;
};

// Owns all values of one or more pickles: a bump allocator of trivially destructible nodes, plus the
// few strings that had to be decoded (protocol-0 escapes); other strings view the pickle bytes, which
// the caller keeps alive.
class Heap {
 public:
  Heap() = default;
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;
  Value* make(PKind k, uint64_t offset) {
    Value* v = new (alloc(sizeof(Value), alignof(Value))) Value();
    v->kind = k;
    v->offset = offset;
    ++count_;
    return v;
  }
  ObjExt* ext(Value* v) {
    if (!v->ext) v->ext = new (alloc(sizeof(ObjExt), alignof(ObjExt))) ObjExt();
    return v->ext;
  }
  void* alloc(size_t bytes, size_t align);
  std::string_view keep(std::string s) {
    owned_.push_back(std::move(s));
    return owned_.back();
  }
  size_t size() const { return count_; }

  // A point in the allocation sequence, to give back what was allocated since (rewind), while no block
  // was added in between.
  struct Pos {
    size_t blocks = 0;
    unsigned char* cur = nullptr;
  };
  Pos pos() const { return {blocks_.size(), cur_}; }
  bool since(const Pos& p, const void* v) const {
    const auto* b = static_cast<const unsigned char*>(v);
    return p.blocks == blocks_.size() && p.cur != nullptr && b >= p.cur && b < cur_;
  }
  bool can_rewind(const Pos& p) const { return p.blocks == blocks_.size() && p.cur != nullptr; }
  // Gives the pages of the last block that nothing was allocated in back to the system (blocks are mapped
  // populated, up to 4 MiB): a later allocation there maps them in again.
  void trim();
  void rewind(const Pos& p) {
    left_ += static_cast<size_t>(cur_ - p.cur);
    cur_ = p.cur;
  }

 private:
  // The first block comes from malloc; later ones are mapped with their pages populated up front: one
  // system call instead of a page fault per 4 KiB touched (~10 us each in a paravirtualized VM).
  struct Unmap {
    size_t size;  // 0: a new[] block
    void operator()(unsigned char* p) const;
  };
  std::vector<std::unique_ptr<unsigned char[], Unmap>> blocks_;
  unsigned char* cur_ = nullptr;
  size_t left_ = 0;
  size_t count_ = 0;
  std::deque<std::string> owned_;
};

// A read that left bytes of a FRAME unread (file parse): the FRAME opcode's offset and where the read was.
struct FrameDrop {
  uint64_t frame = 0;
  uint64_t read = 0;
};

struct Unpickled {
  Value* root = nullptr;
  uint64_t end = 0;  // offset just past STOP
  int protocol = 0;  // highest PROTO seen (0 if none)
  // The end of the last FRAME, when it lies past STOP. Python's unpickler reading a file consumes the
  // whole frame, so the next pickle.load(f) of a stream starts there rather than after STOP.
  uint64_t frame_end = 0;
  bool framed = false;  // a FRAME was seen: the pickle may parse differently read from a file
  // Parsed as a file: the first read that crossed a FRAME's end with bytes of the frame left unread, so
  // that from there on this parse reads other opcodes than a parse of the bytes would.
  std::optional<FrameDrop> dropped;
  // Every torch.storage._load_from_bytes(...) call, reachable from the root or not (a POP drops it):
  // each holds a whole torch.save blob that the security scan reads too.
  std::vector<const Value*> nested_loads;
  std::vector<GlobalRef> globals;
};

// The value as plain JSON: containers as arrays / objects, bytes as "<N bytes>", ints past 64 bits as
// decimal strings, instances as {"__class__": "module.Name", **state}. `hook` may claim a node first
// (tensors). Bounded: at most `max_depth` deep, `budget` nodes in all, cycles shown as "<cycle>".
using PlainHook = std::function<std::optional<nlohmann::ordered_json>(const Value*)>;
nlohmann::ordered_json plain_json(const Value* v, const PlainHook& hook = nullptr, int max_depth = 64,
                                  uint64_t budget = 1'000'000);
// Decimal text of a BigInt value.
std::string bigint_decimal(const Value* v);

// Runs one pickle starting at `start` in `data`, allocating values in `heap`. When it throws and
// `seen` is given, the globals met before the error are left there: Python's unpickler would already
// have imported (and maybe called) them, so a security scan reports them.
// `as_file` parses as Python's C unpickler reads a file object (torch.load's io.BytesIO of data.pkl)
// rather than bytes: the two differ only when a read crosses the end of a FRAME (FrameCursor). When it
// throws, `dropped` (if given) receives what Unpickled::dropped would have held.
// `pack` packs torch.save's tensor rebuilds (PackedTensor): the same graph as far as anything reading it
// through Value's accessors can tell, in a third of the memory. When a later opcode fetches a packed
// argument back from the memo (no torch.save output does), the pickle is run again unpacked. It also skims
// a state dict's module versions (the `_metadata` dict torch.save writes as the BUILD state of an OrderedDict
// of tensors, more than a third of its graph, which nothing reads): their values are not made, and the
// BUILD records an empty dict of the same depth. Anything unusual there reads them as usual.
// `read_past`, when given, is called every few MiB with an offset that the machine has read past: it
// reads no byte before it again itself (values made from those bytes may still view them), so a caller can
// let a mapping's pages go behind it.
Unpickled unpickle(const ByteView& data, uint64_t start, Heap& heap, const Limits& limits, std::vector<GlobalRef>* seen = nullptr,
                   bool as_file = false, std::optional<FrameDrop>* dropped = nullptr, bool pack = false,
                   const std::function<void(uint64_t)>* read_past = nullptr);

// Maps a Python 2 global to the Python 3 one the unpickler imports (`__builtin__.xrange` ->
// `builtins.range`, `copy_reg._reconstructor` -> `copyreg._reconstructor`).
std::pair<std::string_view, std::string_view> python3_global(std::string_view module, std::string_view name);

// Python's dict holds one entry per key: where the key came first, with the value set last. Python's
// pickler never writes a key twice; a crafted pickle can (SETITEM on a key already set), and torch.load
// then sees the last value. For each pair of a dict: the pair whose value its entry takes, kRepeatedKey for a
// key an earlier pair has; empty when no key repeats (str and int keys; others never match). A million-key
// state dict is checked without a hash table: its keys' 32-bit hashes, radix-sorted with their positions,
// and only keys whose hashes agree compared.
inline constexpr uint32_t kRepeatedKey = UINT32_MAX;
std::vector<uint32_t> dict_entries(const Kids& pairs);

// Calls f(key, value) for each entry of a dict's pairs, as Python's dict has them (dict_entries).
template <class F>
void each_entry(const Kids& p, F&& f) {
  const std::vector<uint32_t> take = dict_entries(p);
  const size_t n = p.size() / 2;
  for (size_t k = 0; k < n; ++k) {
    if (take.empty()) f(p[2 * k], p[2 * k + 1]);
    else if (take[k] != kRepeatedKey) f(p[2 * k], p[2 * take[k] + 1]);
  }
}


}  // namespace ckpt
