// The pickle machine of pickle.cc (internal to it and pickle_pack.cc): the frame-aware cursor, and Machine,
// the inert VM whose opcode loop is pickle_machine.cc's Machine::run and whose packing of torch.save's
// tensor calls and skimming of a state dict's _metadata are pickle_pack.cc's.
#pragma once

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>
#include <sys/mman.h>
#include <unistd.h>
#include "core/allowlist.h"
#include "core/pickle_text.h"
#include "core/pickle.h"

namespace ckpt::pickle_detail {

constexpr uint64_t kReadPastStep = uint64_t{4} << 20;  // how often unpickle tells `read_past`

// The cursor as Python's C unpickler moves over a file object without peek() (torch.load reads data.pkl
// through io.BytesIO): FRAME reads the whole frame into a buffer, and a read that does not fit in what
// is left of that buffer drops the rest and reads from the file position, the frame's end. Parsing
// bytes (pickle.loads), the frame is only a length check. `file` selects the first behaviour.
class FrameCursor : public Cursor {
 public:
  FrameCursor(ByteView v, uint64_t pos, bool file) : Cursor(std::move(v), pos), file_(file) {}
  uint8_t u8() {
    fit(1);
    return Cursor::u8();
  }
  template <typename T>
  T le() {
    fit(sizeof(T));
    return Cursor::le<T>();
  }
  std::string_view take_str(uint64_t n, const char* what) {
    fit(n);
    return Cursor::take_str(n, what);
  }
  // A payload read the C unpickler makes with _Unpickler_ReadInto (BINBYTES, SHORT_BINBYTES, BINBYTES8,
  // BYTEARRAY8): what is left of the frame's buffer, then the rest from the file, which goes on where
  // the buffer ends: the bytes are contiguous in either mode, and a read past the frame empties it.
  std::string_view take_into(uint64_t n, const char* what) {
    if (file_ && active_ && (pos() > end_ || n > end_ - pos())) active_ = false;
    return Cursor::take_str(n, what);
  }
  // Where a `n`-byte read starts: here, or (file mode) at the buffered frame's end.
  void fit(uint64_t n) {
    if (file_ && active_ && (pos() > end_ || n > end_ - pos())) {
      drop();
      seek(end_);
      active_ = false;
    }
  }
  // A FRAME (opcode at `op`) of `n` bytes starting here (after fit(n)): the buffer now ends at max(its
  // end, here + n).
  void frame(uint64_t n, uint64_t op) {
    if (!file_) return;
    if (!active_ || pos() + n > end_) {
      end_ = pos() + n;
      frame_op_ = op;
    }
    active_ = true;
  }
  // Where a line starts: file mode skips to the frame's end when the line does not end inside it.
  void fit_line() {
    if (!file_ || !active_) return;
    const auto& v = view();
    for (uint64_t k = pos(); k < end_ && k < v.size(); ++k)
      if (v.data()[k] == '\n') return;
    drop();
    seek(end_);
    active_ = false;
  }
  // Where a file read resumes after STOP: the end of a frame still buffered, else here.
  uint64_t file_pos() const { return file_ && active_ && end_ > pos() ? end_ : pos(); }
  // File mode: the first read that left bytes of a frame unread (from there the file parse reads other
  // opcodes than the bytes parse); nullopt while the two agree.
  std::optional<FrameDrop> dropped() const { return dropped_; }

 private:
  void drop() {
    if (pos() < end_ && !dropped_) dropped_ = FrameDrop{frame_op_, pos()};
  }
  bool file_;
  bool active_ = false;
  uint64_t end_ = 0;
  uint64_t frame_op_ = 0;  // the FRAME opcode whose bytes the buffer holds
  std::optional<FrameDrop> dropped_;
};

// Thrown by a packing run when an opcode fetches a packed argument from the memo: unpickle runs again
// without packing.
struct Repack {};

// The memo's mark for an argument value that packing dropped.
inline Value kDropped;

// A memo entry for a string that skimming (Machine::skim_metadata) read without making its value: the
// offset of its opcode, shifted left with the low bit set (a Value* never has it). A fetch makes the value.
inline bool is_unmade(const Value* v) { return (reinterpret_cast<uintptr_t>(v) & 1) != 0; }
inline Value* unmade(uint64_t op_at) { return reinterpret_cast<Value*>(static_cast<uintptr_t>(op_at << 1 | 1)); }
inline uint64_t unmade_at(const Value* v) { return reinterpret_cast<uintptr_t>(v) >> 1; }

class Machine {
 public:
  Machine(const ByteView& data, uint64_t start, Heap& heap, const Limits& limits, bool file, bool pack,
          const std::function<void(uint64_t)>* read_past)
      : c_(data, start, file), heap_(heap), lim_(limits), file_(file), pack_(pack), read_past_(read_past) {}

  Unpickled run();
  const std::vector<GlobalRef>& globals() const { return out_.globals; }
  std::optional<FrameDrop> dropped() const { return c_.dropped(); }

 private:
  [[noreturn]] void fail(const std::string& msg) { c_.fail_at(op_at_, fmt::format("{}: {}", op_name_, msg)); }
  Value* make(PKind k) { return heap_.make(k, op_at_); }
  Value* pop() {
    if (stack_.size() <= floor()) fail(stack_.empty() ? "stack is empty" : "stack underflow below MARK");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value*& top() {
    if (stack_.size() <= floor()) fail("stack is empty");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value* v) {
    if (stack_.size() >= lim_.pickle_depth * 64 + 1024) fail(fmt::format("stack of {} values exceeds the limit", stack_.size()));
    stack_.push_back(v);
  }
  // Pops everything above the last MARK (and the mark), into a buffer the next pop_mark reuses.
  std::span<Value* const> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    if (pack_) {
      popped_at_ = mark_at_.back();
      mark_at_.pop_back();
    }
    popped_.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return popped_;
  }
  void note_child(Value* parent, const Value* child) {
    uint32_t d = child->depth + 1;
    if (d > parent->depth) parent->depth = d;
    if (parent->depth > lim_.pickle_depth)
      fail(fmt::format("nesting depth {} exceeds the limit of {}", parent->depth, lim_.pickle_depth));
  }
  Value* container(PKind k, std::span<Value* const> items) {
    Value* v = make(k);
    for (Value* it : items) note_child(v, it);
    v->mut_kids().assign(heap_, items);
    return v;
  }
  // Small ints, None and bools are immutable in practice: one node each per pickle.
  Value* int_value(int64_t x) {
    if (x >= 0 && x < 256) {
      Value*& c = small_ints_[x];
      if (!c) make_cached(c, PKind::Int)->i = x;
      return c;
    }
    Value* v = make(PKind::Int);
    v->i = x;
    return v;
  }
  // `s` must stay valid as long as the heap: a view of the pickle bytes or of heap_.keep().
  Value* str_value(PKind k, std::string_view s) {
    if (s.size() > lim_.string_bytes) fail(fmt::format("length {} exceeds the limit of {} bytes", s.size(), lim_.string_bytes));
    Value* v = make(k);
    v->set_str(s);
    return v;
  }
  Value* owned_str(std::string s, PKind k = PKind::Str) { return str_value(k, heap_.keep(std::move(s))); }
  std::string_view payload(uint64_t n, bool read_into = false) {
    if (n > lim_.string_bytes) fail(fmt::format("length {} exceeds the limit of {} bytes", n, lim_.string_bytes));
    if (n > c_.remaining()) fail(fmt::format("length {} exceeds {} remaining bytes", n, c_.remaining()));
    return read_into ? c_.take_into(n, op_name_) : c_.take_str(n, op_name_);
  }
  Value* bytes_value(uint64_t n) { return str_value(PKind::Bytes, payload(n, true)); }
  std::string_view text_line() {
    c_.fit_line();
    const uint64_t pos = c_.pos();
    const auto& v = c_.view();
    for (uint64_t k = pos; k < v.size() && k - pos <= lim_.string_bytes; ++k) {
      if (v.data()[k] == '\n') {
        c_.seek(k + 1);
        return std::string_view(reinterpret_cast<const char*>(v.data()) + pos, k - pos);
      }
    }
    fail("argument has no terminating newline");
  }
  // A protocol-0 integer argument (Python's int() rules, pickle_text.h): a node, int or BigInt.
  Value* int_text(const std::optional<PyInt>& x, std::string_view t) {
    if (!x) fail(fmt::format("'{}' is not an integer", t.substr(0, 40)));
    return x->big.empty() ? int_value(x->value) : owned_str(x->big, PKind::BigInt);
  }
  // PUT / GET keys: int(line, 10), and at least one character (load_put / load_get).
  uint64_t memo_key(std::string_view t) {
    if (t.empty()) fail("empty memo key");
    const std::optional<PyInt> k = py_int(t, 10);
    if (!k) fail(fmt::format("'{}' is not an integer", t.substr(0, 40)));
    if (!k->big.empty() || k->value < 0) fail(fmt::format("memo key {} is out of range", k->big.empty() ? std::to_string(k->value) : k->big));
    return static_cast<uint64_t>(k->value);
  }
  Value* long_from_bytes(std::string_view b) {
    if (b.size() <= 8) {
      uint64_t u = 0;
      for (size_t k = 0; k < b.size(); ++k) u |= static_cast<uint64_t>(static_cast<uint8_t>(b[k])) << (8 * k);
      if (!b.empty() && b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80)) u |= ~0ull << (8 * b.size());
      return int_value(static_cast<int64_t>(u));
    }
    return str_value(PKind::BigInt, b);
  }
  void memo_put(uint64_t key, Value* v) {
    if (pack_ && (!marks_.empty() || last_tuple_)) memo_log_.push_back(key);
    if (key < memo_vec_.size()) {
      memo_vec_[key] = v;
      return;
    }
    if (key == memo_vec_.size() && key < (1ull << 26)) {
      if (memo_count() >= lim_.memo_entries) fail(fmt::format("memo exceeds the limit of {} entries", lim_.memo_entries));
      memo_vec_.push_back(v);
      return;
    }
    if (memo_map_.find(key) == memo_map_.end() && memo_count() >= lim_.memo_entries)
      fail(fmt::format("memo exceeds the limit of {} entries", lim_.memo_entries));
    memo_map_[key] = v;
  }
  size_t memo_count() const { return memo_vec_.size() + memo_map_.size(); }
  Value* memo_get(uint64_t key) {
    Value* v = nullptr;
    if (key < memo_vec_.size() && memo_vec_[key] != nullptr) {
      Value*& slot = memo_vec_[key];
      if (is_unmade(slot)) {  // a skimmed string, made now, where its opcode was
        const uint64_t at = unmade_at(slot);
        slot = heap_.make(PKind::Str, at);
        slot->set_str(str_at(at));
      }
      v = slot;
    } else {
      auto it = memo_map_.find(key);
      if (it == memo_map_.end()) fail(fmt::format("memo key {} was never stored", key));
      v = it->second;
    }
    if (v == &kDropped) throw Repack{};
    return v;
  }
  Value** memo_slot(uint64_t key) {
    if (key < memo_vec_.size()) return &memo_vec_[key];
    auto it = memo_map_.find(key);
    return it == memo_map_.end() ? nullptr : &it->second;
  }
  // run()'s opcode handlers, by family, defined before it in pickle_machine.cc and inlined into its switch.
  [[gnu::always_inline]] inline void proto();
  [[gnu::always_inline]] inline void frame();
  [[gnu::always_inline]] inline Unpickled stop();
  [[gnu::always_inline]] inline void mark();
  [[gnu::always_inline]] inline void put(uint64_t key);
  [[gnu::always_inline]] inline void put_line();
  [[gnu::always_inline]] inline Value* none();
  [[gnu::always_inline]] inline Value* bool_value(bool b);
  [[gnu::always_inline]] inline Value* int_line();
  [[gnu::always_inline]] inline Value* long_line();
  [[gnu::always_inline]] inline uint64_t length32();
  [[gnu::always_inline]] inline Value* float_line();
  [[gnu::always_inline]] inline Value* binfloat();
  [[gnu::always_inline]] inline Value* string_line();
  [[gnu::always_inline]] inline Value* empty_tuple();
  [[gnu::always_inline]] inline void empty_dict(uint64_t& ops);
  [[gnu::always_inline]] inline void tuple_from_mark();
  [[gnu::always_inline]] inline Value* dict_from_mark();
  [[gnu::always_inline]] inline void small_tuple(size_t n);
  [[gnu::always_inline]] inline void append();
  [[gnu::always_inline]] inline void setitem();
  [[gnu::always_inline]] inline void items_from_mark(bool set);
  [[gnu::always_inline]] inline Value* global_line();
  [[gnu::always_inline]] inline void stack_global();
  [[gnu::always_inline]] inline Value* extension(uint8_t op);
  [[gnu::always_inline]] inline void reduce();
  [[gnu::always_inline]] inline void newobj();
  [[gnu::always_inline]] inline void newobj_ex();
  [[gnu::always_inline]] inline void obj();
  [[gnu::always_inline]] inline void inst();
  [[gnu::always_inline]] inline void build();
  [[gnu::always_inline]] inline void persid(Value* pid, bool nested);

  // Packs a REDUCE of torch._utils._rebuild_tensor_v2 on the tuple the previous opcode built (memo puts
  // aside), when it has exactly the form PackedTensor describes and every value made since that tuple's
  // MARK is either in it or a scalar the memo or the packed call still needs. Those scalars are copied out,
  // the heap is rewound to the MARK, and they come back after it with the packed call: the memo entries of
  // the dropped containers become kDropped, which makes a later fetch start the pickle again unpacked.
  Value* try_pack(Value* fn, Value* args);
  bool skim_metadata(uint64_t& ops);
  std::string_view str_at(uint64_t at) const;
  std::optional<std::string_view> memo_str(uint64_t key) const;
  bool skim_off_ = false;  // a skim gave up once: the rest of the pickle is read as it is
  struct Skimmed {
    enum Kind : uint8_t { Mark, Str, Int, State, Ordered, Dict, OrderedGlobal, EmptyTuple } kind;
    bool metadata_key = false;  // a Str: "_metadata"
    bool filled = false;  // State, Ordered, Dict: received an item
    Value* real = nullptr;  // Str or OrderedGlobal fetched from the memo: its value
    uint64_t at = 0;  // Str read here: its opcode's offset
  };
  std::vector<Skimmed> skim_;
  // `module` and `name` must outlive the heap (pickle bytes or heap_.keep()).
  Value* global(std::string_view module, std::string_view name, bool stack) {
    Value* g = make(PKind::Global);
    const auto [m3, n3] = python3_global(module, name);
    g->set_str(m3);
    heap_.ext(g)->name = n3;
    heap_.ext(g)->global = out_.globals.size();
    GlobalRef& r = out_.globals.emplace_back();
    r.module = m3;
    r.name = n3;
    r.offset = op_at_;
    r.stack_global = stack;
    r.opcode = op_name_;
    return g;
  }
  // Records how the global behind `v` (if `v` is one) is used by the opcode being run.
  void use(const Value* v, uint8_t how) {
    if (!v || v->kind != PKind::Global) return;
    GlobalRef& g = out_.globals[static_cast<size_t>(v->ext->global)];
    g.use |= how;
    if (!g.use_opcode && how != kUseMemberLookup) {  // the first use that counts: an allowed lookup is none
      g.use_opcode = op_name_;
      g.use_offset = op_at_;
    }
  }
  // REDUCE of builtins.getattr on (a global, a string) that allowlist.cc knows as an Enum member.
  bool member_lookup(const Value* callable, const Value* args) const {
    if (!callable || callable->kind != PKind::Global || callable->str() != "builtins" || callable->name() != "getattr") return false;
    if (std::string_view(op_name_) != "REDUCE" || !args || args->kind != PKind::Tuple || args->kids().size() != 2) return false;
    const Value* cls = args->kids()[0];
    const Value* member = args->kids()[1];
    if (cls->kind != PKind::Global || member->kind != PKind::Str) return false;
    const GlobalRef& c = out_.globals[static_cast<size_t>(cls->ext->global)];
    if (c.computed) return false;
    return allowed_member_lookup(cls->str(), cls->name(), member->str()) != nullptr;
  }
  // A call: its callable is used, and globals among its arguments are passed to it.
  void call(Value* callable, Value* args) {
    use(callable, member_lookup(callable, args) ? kUseMemberLookup : kUseCalled);
    if (!args || args->kind != PKind::Tuple) return;
    std::string callee;
    for (size_t k = 0; k < args->kids().size() && k < 255; ++k) {
      const Value* a = args->kids()[k];
      if (a->kind != PKind::Global) continue;
      if (callee.empty() && callable && callable->kind == PKind::Global) callee = callable->qualified();
      auto& to = out_.globals[static_cast<size_t>(a->ext->global)].passed_to;
      const std::pair<std::string, uint8_t> p{callee, static_cast<uint8_t>(k)};
      if (to.size() < 64 && std::find(to.begin(), to.end(), p) == to.end()) to.push_back(p);
    }
  }
  Value* object(ObjHow how, Value* callable, Value* args) {
    Value* o = make(PKind::Object);
    o->how = how;
    heap_.ext(o)->callable = callable;
    o->ext->args = args;
    note_child(o, callable);
    note_child(o, args);
    return o;
  }
  // SETITEM(S) / APPEND(S) on a tensor a rebuild function returned: Python writes into its values.
  void written(const Value* target) {
    const Value* fn = target->kind == PKind::Object ? target->callable() : nullptr;
    if (!fn || fn->kind != PKind::Global) return;
    const std::string_view m = fn->str(), n = fn->name();
    const bool tensor = (m == "torch._utils" && n.substr(0, 9) == "_rebuild_") ||
                        (m == "torch._tensor" && n == "_rebuild_from_type_v2") ||
                        (m == "torch.nn.parameter" && n == "Parameter") || (m == "torch" && n == "Tensor");
    if (!tensor) return;
    GlobalRef& g = out_.globals[static_cast<size_t>(fn->ext->global)];
    g.use |= kUseWrittenResult;
    if (!g.write_opcode) {
      g.write_opcode = op_name_;
      g.write_offset = op_at_;
    }
  }
  void set_items(Value* target, std::span<Value* const> kv) {
    ++mutations_;
    if (kv.size() % 2 != 0) fail("odd number of items for SETITEMS");
    if (target->kind == PKind::Global) return use(target, kUseMutated);  // Python would write into the import
    written(target);
    if (target->kind != PKind::Dict && target->kind != PKind::Object)
      fail(fmt::format("target is not a dict (it is a {})", kind_name(target)));
    Kids& dst = target->kind == PKind::Dict ? target->mut_kids() : heap_.ext(target)->dict;
    dst.reserve(heap_, dst.size() + kv.size());  // a dict set once ({'version': 1}) takes no room to spare
    for (Value* v : kv) {
      note_child(target, v);
      dst.push(heap_, v);
    }
  }
  void append_items(Value* target, std::span<Value* const> vs) {
    ++mutations_;
    if (target->kind == PKind::Global) return use(target, kUseMutated);  // Python would append to the import
    written(target);
    if (target->kind != PKind::List && target->kind != PKind::Object && target->kind != PKind::Set)
      fail(fmt::format("target is not a list (it is a {})", kind_name(target)));
    for (Value* v : vs) {
      note_child(target, v);
      target->mut_kids().push(heap_, v);
    }
  }
  static const char* kind_name(const Value* v) {
    switch (v->kind) {
      case PKind::None: return "None";
      case PKind::Bool: return "bool";
      case PKind::Int:
      case PKind::BigInt: return "int";
      case PKind::Float: return "float";
      case PKind::Str: return "str";
      case PKind::Bytes: return "bytes";
      case PKind::Tuple: return "tuple";
      case PKind::List: return "list";
      case PKind::Dict: return "dict";
      case PKind::Set: return "set";
      case PKind::FrozenSet: return "frozenset";
      case PKind::Global: return "global";
      case PKind::Object: return "object";
      case PKind::PersId: return "persistent id";
    }
    return "value";
  }

  FrameCursor c_;
  Heap& heap_;
  const Limits& lim_;
  std::vector<Value*> stack_;
  std::vector<Value*> popped_;  // pop_mark's result
  std::vector<size_t> marks_;
  std::vector<Value*> memo_vec_;
  std::unordered_map<uint64_t, Value*> memo_map_;
  Unpickled out_;
  uint64_t op_at_ = 0;
  Value* small_ints_[256] = {};
  Value* none_ = nullptr;
  Value* empty_tuple_ = nullptr;
  Value* bools_[2] = {};
  const char* op_name_ = "";
  uint64_t frame_end_ = 0;

  // Packing (PackedTensor): where each open MARK was in the heap, the memo log, the mutations and the
  // nested loads, and the last TUPLE built from a MARK, for the REDUCE that may follow it.
  struct MarkAt {
    Heap::Pos pos;
    size_t memo_log = 0;
    size_t caches = 0;
    uint64_t mutations = 0;
    size_t nested = 0;
  };
  bool file_ = false;
  bool pack_ = false;
  const std::function<void(uint64_t)>* read_past_ = nullptr;  // told, now and then, how far the machine has read
  std::vector<MarkAt> mark_at_;
  MarkAt popped_at_;
  std::vector<uint64_t> memo_log_;  // memo keys put since the outermost open MARK
  std::vector<Value**> cache_log_;  // the one-per-pickle nodes made since then (small ints, None, ...)
  void made_cache(Value*& c) {
    if (pack_ && !marks_.empty()) cache_log_.push_back(&c);
  }
  // Makes the one node per pickle that `c` caches (small ints, None, the bools, the empty tuple).
  Value* make_cached(Value*& c, PKind k) {
    made_cache(c = make(k));
    return c;
  }
  uint64_t mutations_ = 0;  // SETITEM(S), APPEND(S), ADDITEMS, BUILD run so far
  Value* last_tuple_ = nullptr;
  MarkAt last_tuple_at_;
  struct PackSlot {
    Value** slot;
    bool keep;
  };
  std::vector<PackSlot> pack_slots_;
  struct Kept {  // a value kept across the rewind: where it was, its copy, where it went
    Value* from;
    Value v;
    ObjExt e;
    Value* to;
  };
  std::vector<Kept> kept_;
  struct Cache {  // a one-per-pickle node made since the MARK: where it is cached, and the node
    Value** at;
    Value* was;
  };
  std::vector<Cache> caches_;

  // try_pack's steps and skim_metadata's (pickle_pack.cc). Those that were their inline code are inlined
  // into them again; those that were lambdas g++ kept out of line (keep, give_up, global_is) are left to it.
  struct PackForm;
  struct SkimStart;
  inline bool named_global(const Value* g, std::string_view module, std::string_view name) const;
  inline bool ordered_global(const Value* g) const;
  [[gnu::always_inline]] inline bool pack_hooks(const Value* hooks, Value*& hooks_fn) const;
  [[gnu::always_inline]] inline bool pack_form(const Value* args, PackForm& f) const;
  inline bool pack_keep(const Heap::Pos& since, Value* v);
  [[gnu::always_inline]] inline bool pack_survivors(const MarkAt& at, const PackForm& f);
  [[gnu::always_inline]] inline Value* pack_moved(Value* v) const;
  [[gnu::always_inline]] inline void pack_rewind(const MarkAt& at);
  [[gnu::always_inline]] inline Value* packed_call(Value* fn, const PackForm& f, uint32_t depth);
  [[gnu::always_inline]] inline bool metadata_follows() const;
  inline bool skim_undo(const SkimStart& s, uint64_t& ops);
  [[gnu::always_inline]] inline bool skim_put(uint64_t key);
  [[gnu::always_inline]] inline bool skim_fetch(uint64_t key);
  [[gnu::always_inline]] inline bool skim_item(size_t t, size_t k, bool& deep);
  [[gnu::always_inline]] inline bool skim_setitems(bool& deep);
  [[gnu::always_inline]] inline void skim_build(uint64_t state_at, bool deep);
};

}  // namespace ckpt::pickle_detail
