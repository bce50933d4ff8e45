#include "core/pickle.h"

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

namespace ckpt {

std::string Value::qualified() const {
  const Value* g = this;
  if (kind == PKind::Object) g = callable();
  if (g == nullptr || g->kind != PKind::Global) return {};
  std::string out(g->str());
  out += '.';
  out += g->name();
  return out;
}

void* Heap::alloc(size_t bytes, size_t align) {
  size_t pad = -reinterpret_cast<uintptr_t>(cur_) & (align - 1);  // align: a power of two
  if (cur_ == nullptr || pad + bytes > left_) {
    // The first block, 64 KiB from malloc, is memory the process has touched before when it reads many
    // small files; a pickle that outgrows it gets populated blocks of 256 KiB doubling to 4 MiB.
    const size_t n = blocks_.size();
    const size_t grow = n == 0 ? size_t{64} << 10 : std::min<size_t>(size_t{256} << 10 << std::min<size_t>(n - 1, 4), size_t{4} << 20);
    const size_t block = std::max<size_t>(bytes + align, grow);
#if defined(__SANITIZE_ADDRESS__) || defined(CKPT_ASAN)
    const bool mapped = false;  // the sanitizer sees every block
#else
    const bool mapped = n > 0;
#endif
    if (!mapped) {
      blocks_.emplace_back(new unsigned char[block], Unmap{0});
    } else {
      void* m = ::mmap(nullptr, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      blocks_.emplace_back(static_cast<unsigned char*>(m), Unmap{block});
    }
    cur_ = blocks_.back().get();
    left_ = block;
    pad = -reinterpret_cast<uintptr_t>(cur_) & (align - 1);
  }
  void* p = cur_ + pad;
  cur_ += pad + bytes;
  left_ -= pad + bytes;
  return p;
}

void Heap::trim() {
  if (blocks_.empty() || blocks_.back().get_deleter().size == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t from = (reinterpret_cast<uintptr_t>(cur_) + page - 1) & ~(page - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(cur_) + left_;  // the block's end, a page boundary
  if (from < to) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void Heap::Unmap::operator()(unsigned char* p) const {
  if (size == 0) delete[] p;  // a malloc'd block
  else ::munmap(p, size);
}

void Kids::push(Heap& h, Value* v) {
  if (n_ == cap_) reserve(h, cap_ ? size_t{cap_} * 2 : 4);
  p_[n_++] = v;
}

void Kids::reserve(Heap& h, size_t n) {
  if (n <= cap_) return;
  const size_t cap = cap_ ? std::max<size_t>(n, size_t{cap_} * 2) : n;  // the first room is exactly what is asked
  auto** p = static_cast<Value**>(h.alloc(sizeof(Value*) * cap, alignof(Value*)));
  if (n_) std::memcpy(p, p_, sizeof(Value*) * n_);
  p_ = p;
  cap_ = static_cast<uint32_t>(cap);
}

void Kids::assign(Heap& h, std::span<Value* const> vs) {
  p_ = vs.empty() ? nullptr : static_cast<Value**>(h.alloc(sizeof(Value*) * vs.size(), alignof(Value*)));
  if (!vs.empty()) std::memcpy(p_, vs.data(), sizeof(Value*) * vs.size());
  n_ = cap_ = static_cast<uint32_t>(vs.size());
}

Value* Value::get(std::string_view key) const {
  const auto& p = pairs();
  Value* found = nullptr;
  for (size_t k = 0; k + 1 < p.size(); k += 2)
    if (p[k]->kind == PKind::Str && p[k]->str() == key) found = p[k + 1];
  return found;
}

namespace {

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
Value kDropped;

// A memo entry for a string that skimming (Machine::skim_metadata) read without making its value: the
// offset of its opcode, shifted left with the low bit set (a Value* never has it). A fetch makes the value.
bool is_unmade(const Value* v) { return (reinterpret_cast<uintptr_t>(v) & 1) != 0; }
Value* unmade(uint64_t op_at) { return reinterpret_cast<Value*>(static_cast<uintptr_t>(op_at << 1 | 1)); }
uint64_t unmade_at(const Value* v) { return reinterpret_cast<uintptr_t>(v) >> 1; }

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
      if (!c) {
        c = make(PKind::Int);
        c->i = x;
        made_cache(c);
      }
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
};

// Packs a REDUCE of torch._utils._rebuild_tensor_v2 on the tuple the previous opcode built (memo puts
// aside), when it has exactly the form PackedTensor describes and every value made since that tuple's
// MARK is either in it or a scalar the memo or the packed call still needs. Those scalars are copied out,
// the heap is rewound to the MARK, and they come back after it with the packed call: the memo entries of
// the dropped containers become kDropped, which makes a later fetch start the pickle again unpacked.
Value* Machine::try_pack(Value* fn, Value* args) {
  const MarkAt at = last_tuple_at_;
  auto global_is = [&](const Value* g, std::string_view m, std::string_view n) {
    return g->kind == PKind::Global && g->str() == m && g->name() == n && !out_.globals[static_cast<size_t>(g->ext->global)].computed;
  };
  auto plain = [](const Value* v, PKind k) { return v->kind == k && v->ext == nullptr; };
  if (!global_is(fn, "torch._utils", "_rebuild_tensor_v2") || heap_.since(at.pos, fn)) return nullptr;
  if (mutations_ != at.mutations || out_.nested_loads.size() != at.nested || !heap_.can_rewind(at.pos)) return nullptr;
  if (!plain(args, PKind::Tuple) || args->kids().size() != 6) return nullptr;
  const Kids& a = args->kids();
  const Value* pers = a[0];
  if (pers->kind != PKind::PersId || !pers->ext || pers->ext->callable || pers->ext->kwargs || pers->ext->state ||
      !pers->ext->dict.empty() || !pers->kids().empty() || !pers->ext->args)
    return nullptr;
  const Value* pid = pers->ext->args;
  if (!plain(pid, PKind::Tuple) || pid->kids().size() != 5) return nullptr;
  Value* word = pid->kids()[0];
  Value* cls = pid->kids()[1];
  Value* key = pid->kids()[2];
  Value* loc = pid->kids()[3];
  const Value* numel = pid->kids()[4];
  if (!word->is_str() || word->str() != "storage" || cls->kind != PKind::Global || out_.globals[static_cast<size_t>(cls->ext->global)].computed ||
      !key->is_str() || !loc->is_str() || !plain(numel, PKind::Int))
    return nullptr;
  const Value* offset = a[1];
  const Value* size = a[2];
  const Value* stride = a[3];
  const Value* grad = a[4];
  const Value* hooks = a[5];
  if (!plain(offset, PKind::Int) || !plain(size, PKind::Tuple) || !plain(stride, PKind::Tuple) || !plain(grad, PKind::Bool))
    return nullptr;
  const size_t ndim = size->kids().size();
  if (ndim != stride->kids().size() || ndim > 64) return nullptr;
  for (size_t k = 0; k < ndim; ++k)
    if (!plain(size->kids()[k], PKind::Int) || !plain(stride->kids()[k], PKind::Int)) return nullptr;
  Value* hooks_fn = nullptr;
  if (hooks->kind == PKind::Object) {
    const ObjExt* e = hooks->ext;
    if (hooks->how != ObjHow::Reduce || !hooks->kids().empty() || !e || !e->callable || !global_is(e->callable, "collections", "OrderedDict") ||
        !e->args || !plain(e->args, PKind::Tuple) || !e->args->kids().empty() || e->kwargs || e->state || !e->dict.empty() || e->packed)
      return nullptr;
    hooks_fn = e->callable;
  } else if (!plain(hooks, PKind::Dict) || !hooks->kids().empty()) {
    return nullptr;
  }
  const Value* located[6] = {args, pid, pers, size, stride, hooks};
  uint32_t back[6];
  for (size_t k = 0; k < 6; ++k) {
    if (located[k]->offset > op_at_ || op_at_ - located[k]->offset > UINT32_MAX) return nullptr;
    back[k] = static_cast<uint32_t>(op_at_ - located[k]->offset);
  }
  // Values to keep: the packed call's scalars and the memo's, when made since the MARK. Each is copied out
  // (with its ext: a Global's name) before the rewind and allocated again after it.
  std::vector<Kept>& kept = kept_;
  kept.clear();
  auto keep = [&](Value* v) -> bool {
    if (!heap_.since(at.pos, v)) return true;
    switch (v->kind) {
      case PKind::Tuple:
      case PKind::List:
      case PKind::Dict:
      case PKind::Set:
      case PKind::FrozenSet:
      case PKind::Object:
      case PKind::PersId: return false;
      default: break;
    }
    for (const Kept& k : kept)
      if (k.from == v) return true;
    if (kept.size() == 32 || (v->ext && (v->ext->state || !v->ext->dict.empty()))) return false;
    kept.push_back({v, *v, v->ext ? *v->ext : ObjExt(), nullptr});
    return true;
  };
  for (Value* v : {word, cls, key, loc, hooks_fn})
    if (v && !keep(v)) return nullptr;
  std::vector<PackSlot>& slots = pack_slots_;
  slots.clear();
  for (size_t k = at.memo_log; k < memo_log_.size(); ++k) {
    Value** slot = memo_slot(memo_log_[k]);
    if (!slot || !*slot || is_unmade(*slot) || !heap_.since(at.pos, *slot)) continue;
    const bool kept_value = keep(*slot);
    if (!kept_value && kept.size() == 32) return nullptr;
    slots.push_back({slot, kept_value});
  }
  // The one-per-pickle nodes (small ints, None, bools, the empty tuple) made since the MARK: their copy
  // when the memo keeps one, else made again when next needed.
  std::vector<Cache>& caches = caches_;
  caches.clear();
  for (size_t k = at.caches; k < cache_log_.size(); ++k)
    if (Value*& c = *cache_log_[k]; c && heap_.since(at.pos, c)) caches.push_back({&c, c});
  const int64_t numel_v = numel->i, offset_v = offset->i;
  const bool grad_v = grad->b;
  int64_t dims[128];
  for (size_t k = 0; k < ndim; ++k) {
    dims[k] = size->kids()[k]->i;
    dims[ndim + k] = stride->kids()[k]->i;
  }
  const uint32_t depth = args->depth + 1;
  if (depth > lim_.pickle_depth) return nullptr;  // the call as unpacked fails there, with its message

  heap_.rewind(at.pos);
  auto moved = [&](Value* v) -> Value* {
    for (const Kept& k : kept)
      if (k.from == v) return k.to;
    return v;
  };
  for (Kept& kp : kept) {
    kp.to = heap_.make(kp.v.kind, kp.v.offset);
    *kp.to = kp.v;
    if (kp.v.ext) {
      kp.to->ext = nullptr;
      *heap_.ext(kp.to) = kp.e;
    }
  }
  for (const PackSlot& s : slots) *s.slot = s.keep ? moved(*s.slot) : &kDropped;
  for (const Cache& c : caches) {
    Value* to = moved(c.was);
    *c.at = to == c.was ? nullptr : to;
  }
  memo_log_.resize(at.memo_log);
  cache_log_.resize(at.caches);

  Value* o = make(PKind::Object);
  o->how = ObjHow::Reduce;
  o->depth = depth;
  ObjExt* e = heap_.ext(o);
  e->callable = fn;
  auto* p = new (heap_.alloc(sizeof(PackedTensor) + sizeof(int64_t) * (ndim ? 2 * ndim - 1 : 0), alignof(PackedTensor))) PackedTensor();
  p->heap = &heap_;
  p->reduce_at = op_at_;
  p->storage_word = moved(word);
  p->cls = moved(cls);
  p->key = moved(key);
  p->location = moved(loc);
  p->hooks_fn = hooks_fn ? moved(hooks_fn) : nullptr;
  p->numel = numel_v;
  p->offset = offset_v;
  std::copy(back, back + 6, p->back);
  p->ndim = static_cast<uint8_t>(ndim);
  p->requires_grad = grad_v;
  std::copy(dims, dims + 2 * ndim, p->dims);
  e->packed = p;
  return o;
}

// The text of the string whose opcode (BINUNICODE or SHORT_BINUNICODE, checked when skimmed) is at `at`.
std::string_view Machine::str_at(uint64_t at) const {
  const uint8_t* d = c_.view().data();
  if (d[at] == 0x8c) return {reinterpret_cast<const char*>(d + at + 2), d[at + 1]};
  uint32_t n = 0;
  std::memcpy(&n, d + at + 1, 4);  // little-endian, as the hosts ckpt builds for
  return {reinterpret_cast<const char*>(d + at + 5), n};
}

std::optional<std::string_view> Machine::memo_str(uint64_t key) const {
  if (key >= memo_vec_.size() || memo_vec_[key] == nullptr) return std::nullopt;
  const Value* v = memo_vec_[key];
  if (is_unmade(v)) return str_at(unmade_at(v));
  if (v->kind == PKind::Str) return v->str();
  return std::nullopt;
}

// Packing, at an EMPTY_DICT on top of a state dict of packed tensors: torch.save's module versions, the
// OrderedDict's BUILD state after its last tensor,
//   {'_metadata': OrderedDict([('', {'version': 1}), ('fc', {'version': 1}), ...])}
// are read opcode by opcode without making their values (more than a third of a state dict's graph, and
// read by nothing: an OrderedDict is its items). The strings the memo keeps are noted where their
// opcodes are (unmade: made when fetched), the containers as kDropped (a fetch reads the pickle again
// unpacked). The BUILD then gets an empty dict of the state's depth, and the OrderedDict's global is used
// as it would have been. Anything else on the way (another opcode, shape or memo key, the limits) gives
// up: the cursor and the memo go back to the EMPTY_DICT, which is read as usual, and so is the rest.
bool Machine::skim_metadata(uint64_t& ops) {
  // (a depth limit under the state's 4 levels is met where reading it in full meets it)
  if (file_ || stack_.size() <= floor() || lim_.pickle_depth < 4) return false;
  const Value* od = stack_.back();
  auto ordered_global = [&](const Value* g) {
    return g && g->kind == PKind::Global && g->str() == "collections" && g->name() == "OrderedDict" &&
           !out_.globals[static_cast<size_t>(g->ext->global)].computed;
  };
  if (od->kind != PKind::Object || !ordered_global(od->callable()) || od->ext->state) return false;
  const Kids& items = od->ext->dict;
  if (items.empty() || !items[items.size() - 1]->packed()) return false;
  // The next opcodes: a memo put, then the key "_metadata" (written, or fetched from the memo).
  const ByteView& v = c_.view();
  const uint8_t* d = v.data();
  uint64_t at = c_.pos();
  auto have = [&](uint64_t n) { return at <= v.size() && n <= v.size() - at; };
  if (have(2) && d[at] == 'q') at += 2;
  else if (have(5) && d[at] == 'r') at += 5;
  else if (have(1) && d[at] == 0x94) at += 1;
  constexpr std::string_view kKey = "_metadata";
  const bool written = (have(11) && d[at] == 0x8c && d[at + 1] == kKey.size() &&
                        std::string_view(reinterpret_cast<const char*>(d + at + 2), kKey.size()) == kKey) ||
                       (have(14) && d[at] == 'X' && d[at + 1] == kKey.size() && d[at + 2] == 0 && d[at + 3] == 0 && d[at + 4] == 0 &&
                        std::string_view(reinterpret_cast<const char*>(d + at + 5), kKey.size()) == kKey);
  const bool fetched = (have(2) && d[at] == 'h' && memo_str(d[at + 1]) == kKey) ||
                       (have(5) && d[at] == 'j' && memo_str(d[at + 1] | d[at + 2] << 8 | d[at + 3] << 16 | uint64_t{d[at + 4]} << 24) == kKey);
  if (!written && !fetched) return false;

  const uint64_t start = c_.pos(), state_at = op_at_, ops_at = ops, frame_end = frame_end_;
  const size_t memo_at = memo_vec_.size();
  const bool framed = out_.framed;
  const char* name = op_name_;
  auto give_up = [&] {
    memo_vec_.resize(memo_at);
    c_.seek(start);
    op_at_ = state_at;
    op_name_ = name;
    ops = ops_at;
    frame_end_ = frame_end;
    out_.framed = framed;
    skim_off_ = true;
    return false;
  };
  using K = Skimmed::Kind;
  std::vector<Skimmed>& st = skim_;
  st.assign(1, Skimmed{K::State});
  bool deep = false;  // an inner dict received an item: the state is 4 deep, else 3 or less
  size_t marks = 0;  // MARKs open on `st`
  auto put = [&](uint64_t key) -> bool {
    if (st.empty() || st.back().kind == K::Mark || key != memo_vec_.size() || key >= (1ull << 26) || memo_count() >= lim_.memo_entries)
      return false;
    const Skimmed& s = st.back();
    memo_vec_.push_back(s.real ? s.real : s.kind == K::Str ? unmade(s.at) : &kDropped);
    return true;
  };
  // SETITEM(S) of st[k] -> st[k + 1] into st[t]: '_metadata' -> OrderedDict, str -> dict, str -> int.
  auto item = [&](size_t t, size_t k) {
    Skimmed& to = st[t];
    const K key = st[k].kind, val = st[k + 1].kind;
    if (key != K::Str) return false;
    if (to.kind == K::State && val == K::Ordered && st[k].metadata_key) return to.filled = true;
    if (to.kind == K::Ordered && val == K::Dict) return to.filled = true;
    if (to.kind == K::Dict && val == K::Int) return to.filled = deep = true;
    return false;
  };
  auto le32 = [&](uint64_t p) {
    uint32_t x = 0;
    std::memcpy(&x, d + p, 4);  // little-endian, as every host ckpt builds for
    return x;
  };
  for (;;) {
    at = c_.pos();
    op_at_ = at;
    // The limits: where one is near, reading in full says which, where.
    if (++ops > lim_.pickle_ops || !have(1) || stack_.size() + st.size() + 1 >= lim_.pickle_depth * 64 + 1024) return give_up();
    const uint8_t op = d[at];
    uint64_t next = at + 1;
    switch (op) {
      case '(':
        if (marks_.size() + marks++ >= lim_.pickle_depth) return give_up();
        st.push_back({K::Mark});
        break;
      case '}': st.push_back({K::Dict}); break;
      case ')': st.push_back({K::EmptyTuple}); break;
      case 'K':
      case 'M':
      case 'J':
        next += op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (!have(next - at)) return give_up();
        st.push_back({K::Int});
        break;
      case 0x8c:
      case 'X': {
        const uint64_t len_bytes = op == 'X' ? 4 : 1;
        if (!have(1 + len_bytes)) return give_up();
        const uint64_t n = op == 'X' ? le32(at + 1) : d[at + 1];
        next += len_bytes + n;
        if (n > lim_.string_bytes || !have(next - at)) return give_up();
        st.push_back({K::Str, std::string_view(reinterpret_cast<const char*>(d + at + 1 + len_bytes), n) == kKey, false, nullptr, at});
        break;
      }
      case 'q':
      case 'r':
      case 0x94: {
        next += op == 'q' ? 1 : op == 'r' ? 4 : 0;
        if (!have(next - at) || !put(op == 'q' ? d[at + 1] : op == 'r' ? le32(at + 1) : memo_count())) return give_up();
        break;
      }
      case 'h':
      case 'j': {
        next += op == 'h' ? 1 : 4;
        if (!have(next - at)) return give_up();
        const uint64_t key = op == 'h' ? d[at + 1] : le32(at + 1);
        Value* m = key < memo_vec_.size() ? memo_vec_[key] : nullptr;
        if (!m) return give_up();
        if (is_unmade(m)) st.push_back({K::Str, str_at(unmade_at(m)) == kKey, false, nullptr, unmade_at(m)});
        else if (m->kind == PKind::Str && !m->ext) st.push_back({K::Str, m->str() == kKey, false, m});
        else if (ordered_global(m)) st.push_back({K::OrderedGlobal, false, false, m});
        else return give_up();
        break;
      }
      case 0x95: {  // FRAME, parsing bytes: a length that must fit
        if (!have(9)) return give_up();
        uint64_t n = 0;
        std::memcpy(&n, d + at + 1, 8);
        next += 8;
        if (n > v.size() - next) return give_up();
        frame_end_ = next + n;
        out_.framed = true;
        break;
      }
      case 'R':  // OrderedDict()
        if (st.size() < 2 || st.back().kind != K::EmptyTuple || st[st.size() - 2].kind != K::OrderedGlobal) return give_up();
        op_name_ = "REDUCE";
        use(st[st.size() - 2].real, kUseCalled);
        st.pop_back();
        st.back() = {K::Ordered};
        break;
      case 's':
        if (st.size() < 3 || !item(st.size() - 3, st.size() - 2)) return give_up();
        st.resize(st.size() - 2);
        break;
      case 'u': {
        size_t m = st.size();
        while (m > 0 && st[m - 1].kind != K::Mark) --m;
        if (m < 2 || (st.size() - m) % 2 != 0) return give_up();  // m - 1: the MARK; m - 2: the target
        for (size_t k = m; k < st.size(); k += 2)
          if (!item(m - 2, k)) return give_up();
        st.resize(m - 1);
        --marks;
        break;
      }
      case 'b': {  // BUILD of the state dict with the whole state read
        if (st.size() != 1 || !st[0].filled) return give_up();
        c_.seek(next);
        op_name_ = "BUILD";
        ++mutations_;
        Value* target = stack_.back();
        use(target->callable(), kUseBuilt);
        Value* state = heap_.make(PKind::Dict, state_at);
        state->depth = deep ? 4 : 3;
        heap_.ext(target)->state = state;
        note_child(target, state);
        return true;
      }
      default: return give_up();
    }
    c_.seek(next);
  }
}

Unpickled Machine::run() {
  uint64_t ops = 0;
  uint64_t tell_at = kReadPastStep;
  for (;;) {
    op_at_ = c_.pos();
    if (read_past_ && op_at_ >= tell_at) {
      (*read_past_)(op_at_);
      tell_at = op_at_ + kReadPastStep;
    }
    if (c_.at_end()) {
      op_name_ = "pickle";
      fail(stack_.empty() ? "data ends before any opcode" : "data ends before STOP");
    }
    if (++ops > lim_.pickle_ops) fail(fmt::format("more than {} opcodes", lim_.pickle_ops));
    const uint8_t op = c_.u8();
    static const std::array<const char*, 256> kNames = [] {
      std::array<const char*, 256> t{};
      for (size_t k = 0; k < t.size(); ++k) t[k] = opname(static_cast<uint8_t>(k));
      return t;
    }();
    if (last_tuple_ && op != 'R' && op != 'q' && op != 'r' && op != 'p' && op != 0x94) last_tuple_ = nullptr;
    op_name_ = kNames[op];
    if (op_name_ == nullptr) {
      op_name_ = "opcode";
      fail(fmt::format("unknown opcode 0x{:02x}", op));
    }
    switch (op) {
      case 0x80: {  // PROTO
        uint8_t p = c_.u8();
        if (p > 5) fail(fmt::format("unsupported protocol {}", p));
        out_.protocol = std::max<int>(out_.protocol, p);
        break;
      }
      case 0x95: {  // FRAME: a length hint; a frame that claims more than remains is a lie.
        uint64_t n = c_.le<uint64_t>();
        c_.fit(n);
        if (n > c_.remaining()) fail(fmt::format("frame length {} exceeds {} remaining bytes", n, c_.remaining()));
        c_.frame(n, op_at_);
        frame_end_ = c_.pos() + n;
        out_.framed = true;
        break;
      }
      case '.': {  // STOP
        Value* v = pop();
        if (!marks_.empty()) fail("STOP with an open MARK");
        out_.root = v;
        out_.end = c_.pos();
        out_.dropped = c_.dropped();
        if (frame_end_ > out_.end) out_.frame_end = frame_end_;
        if (c_.file_pos() > out_.end) out_.frame_end = c_.file_pos();
        return std::move(out_);
      }
      case '(':
        if (marks_.size() >= lim_.pickle_depth) fail(fmt::format("more than {} open MARKs", lim_.pickle_depth));
        if (pack_ && marks_.empty()) {  // no value made before this MARK can be packed
          memo_log_.clear();
          cache_log_.clear();
        }
        marks_.push_back(stack_.size());
        if (pack_) mark_at_.push_back({heap_.pos(), memo_log_.size(), cache_log_.size(), mutations_, out_.nested_loads.size()});
        break;
      case '0': pop(); break;
      case '1': pop_mark(); break;
      case '2': push(top()); break;
      case 'N':
        if (!none_) made_cache(none_ = make(PKind::None));
        push(none_);
        break;
      case 0x88:
      case 0x89: {
        Value*& v = bools_[op == 0x88];
        if (!v) {
          v = make(PKind::Bool);
          v->b = op == 0x88;
          made_cache(v);
        }
        push(v);
        break;
      }
      case 'I': {  // load_int: strtol(base 0), else int(line, 0); "00" / "01" are the booleans
        std::string_view t = text_line();
        if (t.empty()) fail("empty integer");
        bool exact = false;
        const std::optional<PyInt> x = py_int_opcode(t, &exact);
        if (exact && t.size() == 2 && x && (x->value == 0 || x->value == 1)) {
          Value* v = make(PKind::Bool);
          v->b = x->value == 1;
          push(v);
          break;
        }
        push(int_text(x, t));
        break;
      }
      case 'L': {  // load_long: a trailing 'L' dropped, then int(line, 0)
        std::string_view t = text_line();
        if (t.empty()) fail("empty integer");
        if (t.back() == 'L') t.remove_suffix(1);
        push(int_text(py_int(t, 0), t));
        break;
      }
      case 'J': push(int_value(c_.le<int32_t>())); break;
      case 'K': push(int_value(c_.u8())); break;
      case 'M': push(int_value(c_.le<uint16_t>())); break;
      case 0x8a: {
        uint8_t n = c_.u8();
        push(long_from_bytes(payload(n)));
        break;
      }
      case 0x8b: {
        int32_t n = c_.le<int32_t>();
        if (n < 0) fail("negative length");
        push(long_from_bytes(payload(static_cast<uint64_t>(n))));
        break;
      }
      case 'F': {
        std::string t(text_line());
        char* end = nullptr;
        double d = std::strtod(t.c_str(), &end);
        if (end != t.c_str() + t.size()) fail("not a float");
        Value* v = make(PKind::Float);
        v->f = d;
        push(v);
        break;
      }
      case 'G': {
        Value* v = make(PKind::Float);
        v->f = c_.be<double>();
        push(v);
        break;
      }
      case 'S': {
        uint64_t at = c_.pos();
        push(owned_str(unescape_string(text_line(), c_, at)));
        break;
      }
      case 'V': push(owned_str(raw_unicode_escape(text_line()))); break;
      case 'T': {
        int32_t n = c_.le<int32_t>();
        if (n < 0) fail("negative length");
        push(str_value(PKind::Str, payload(static_cast<uint64_t>(n))));
        break;
      }
      case 'U': {
        uint8_t n = c_.u8();
        push(str_value(PKind::Str, payload(n)));
        break;
      }
      case 'X': push(str_value(PKind::Str, payload(c_.le<uint32_t>()))); break;
      case 0x8c: {
        uint8_t n = c_.u8();
        push(str_value(PKind::Str, payload(n)));
        break;
      }
      case 0x8d: push(str_value(PKind::Str, payload(c_.le<uint64_t>()))); break;
      case 'B': push(bytes_value(c_.le<uint32_t>())); break;
      case 'C': {
        uint8_t n = c_.u8();
        push(bytes_value(n));
        break;
      }
      case 0x8e:
      case 0x96: push(bytes_value(c_.le<uint64_t>())); break;
      case 0x97: fail("out-of-band buffers are not supported");
      case 0x98: top(); break;  // READONLY_BUFFER: no-op on an inert value
      case ')':  // immutable: one node per pickle
        if (!empty_tuple_) made_cache(empty_tuple_ = make(PKind::Tuple));
        push(empty_tuple_);
        break;
      case ']': push(make(PKind::List)); break;
      case '}':
        if (pack_ && !skim_off_ && skim_metadata(ops)) break;
        push(make(PKind::Dict));
        break;
      case 0x8f: push(make(PKind::Set)); break;
      case 't':
        push(container(PKind::Tuple, pop_mark()));
        if (pack_) {
          last_tuple_ = stack_.back();
          last_tuple_at_ = popped_at_;
        }
        break;
      case 'l': push(container(PKind::List, pop_mark())); break;
      case 0x91: push(container(PKind::FrozenSet, pop_mark())); break;
      case 'd': {
        auto kv = pop_mark();
        if (kv.size() % 2) fail("odd number of items for DICT");
        push(container(PKind::Dict, kv));
        break;
      }
      case 0x85: {
        Value* a[1] = {pop()};
        push(container(PKind::Tuple, a));
        break;
      }
      case 0x86: {
        Value* b = pop();
        Value* ab[2] = {pop(), b};
        push(container(PKind::Tuple, ab));
        break;
      }
      case 0x87: {
        Value* c3 = pop();
        Value* b = pop();
        Value* abc[3] = {pop(), b, c3};
        push(container(PKind::Tuple, abc));
        break;
      }
      case 'a': {
        Value* v[1] = {pop()};
        append_items(top(), v);
        break;
      }
      case 'e': {
        auto vs = pop_mark();
        append_items(top(), vs);
        break;
      }
      case 0x90: {
        auto vs = pop_mark();
        append_items(top(), vs);
        break;
      }
      case 's': {
        Value* v = pop();
        Value* kv[2] = {pop(), v};
        set_items(top(), kv);
        break;
      }
      case 'u': {
        auto kv = pop_mark();
        set_items(top(), kv);
        break;
      }
      case 'p': memo_put(memo_key(text_line()), top()); break;
      case 'q': memo_put(c_.u8(), top()); break;
      case 'r': memo_put(c_.le<uint32_t>(), top()); break;
      case 0x94: memo_put(memo_count(), top()); break;
      case 'g': push(memo_get(memo_key(text_line()))); break;
      case 'h': push(memo_get(c_.u8())); break;
      case 'j': push(memo_get(c_.le<uint32_t>())); break;
      case 'c': {
        std::string_view module = text_line();
        std::string_view name = text_line();
        push(global(module, name, false));
        break;
      }
      case 0x93: {
        Value* name = pop();
        Value* module = pop();
        if (!module->is_str() || !name->is_str()) {
          // Computed at load time (results of calls): the scan cannot name it, but keeps going.
          push(global(heap_.keep(module->is_str() ? std::string(module->str()) : "<computed>"),
                      heap_.keep(name->is_str() ? std::string(name->str()) : "<computed>"), true));
          out_.globals.back().computed = true;
          break;
        }
        push(global(module->str(), name->str(), true));
        break;
      }
      case 0x82:
      case 0x83:
      case 0x84: {
        uint64_t code = op == 0x82 ? c_.u8() : op == 0x83 ? c_.le<uint16_t>() : c_.le<uint32_t>();
        push(global("copyreg._extension_registry", heap_.keep(std::to_string(code)), false));
        break;
      }
      case 'R': {
        Value* args = pop();
        Value* fn = pop();
        call(fn, args);
        if (Value* packed = args == last_tuple_ ? try_pack(fn, args) : nullptr) {
          last_tuple_ = nullptr;
          push(packed);
          break;
        }
        last_tuple_ = nullptr;
        push(object(ObjHow::Reduce, fn, args));
        if (fn->kind == PKind::Global && fn->str() == "torch.storage" && fn->name() == "_load_from_bytes")
          out_.nested_loads.push_back(stack_.back());
        break;
      }
      case 0x81: {
        Value* args = pop();
        Value* cls = pop();
        call(cls, args);
        push(object(ObjHow::NewObj, cls, args));
        break;
      }
      case 0x92: {
        Value* kwargs = pop();
        Value* args = pop();
        Value* cls = pop();
        call(cls, args);
        Value* o = object(ObjHow::NewObjEx, cls, args);
        o->ext->kwargs = kwargs;
        note_child(o, kwargs);
        push(o);
        break;
      }
      case 'o': {
        auto vs = pop_mark();
        if (vs.empty()) fail("OBJ needs a class");
        Value* cls = vs.front();
        Value* args = container(PKind::Tuple, vs.subspan(1));
        call(cls, args);  // a call hidden behind OBJ
        push(object(ObjHow::Obj, cls, args));
        break;
      }
      case 'i': {
        if (marks_.empty()) fail("no MARK on the stack");  // load_inst looks for the MARK before any import
        std::string_view module = text_line();
        std::string_view name = text_line();
        Value* cls = global(module, name, false);
        auto vs = pop_mark();
        Value* args = container(PKind::Tuple, vs);
        call(cls, args);
        push(object(ObjHow::Inst, cls, args));
        break;
      }
      case 'b': {
        ++mutations_;
        Value* state = pop();
        Value* target = top();
        // On an instance: its class's __setstate__ runs with this state. On the global itself: Python
        // sets attributes of the imported class, function or module.
        if (target->kind == PKind::Global) use(target, kUseMutated);
        else if (target->kind == PKind::Object) use(target->callable(), kUseBuilt);
        heap_.ext(target)->state = state;
        note_child(target, state);
        break;
      }
      case 'P': {
        Value* pid = str_value(PKind::Str, text_line());
        Value* v = make(PKind::PersId);
        heap_.ext(v)->args = pid;
        push(v);
        break;
      }
      case 'Q': {
        Value* pid = pop();
        Value* v = make(PKind::PersId);
        heap_.ext(v)->args = pid;
        note_child(v, pid);
        push(v);
        break;
      }
      default: fail("unhandled opcode");
    }
  }
}

}  // namespace

Unpickled unpickle(const ByteView& data, uint64_t start, Heap& heap, const Limits& limits, std::vector<GlobalRef>* seen,
                   bool as_file, std::optional<FrameDrop>* dropped, bool pack, const std::function<void(uint64_t)>* read_past) {
  for (;;) {
    Machine m(data, start, heap, limits, as_file, pack, read_past);
    try {
      return m.run();
    } catch (const Repack&) {
      pack = false;  // a packed argument was fetched again: the values made so far stay in the heap, unused
    } catch (const InputError&) {
      if (seen) *seen = m.globals();
      if (dropped) *dropped = m.dropped();
      throw;
    }
  }
}

Value* unpack_args(ObjExt* e) {
  const PackedTensor& p = *e->packed;
  Heap& h = *p.heap;
  auto at = [&](size_t k) { return p.reduce_at - p.back[k]; };
  auto tuple = [&](uint64_t offset, std::span<Value* const> items) {
    Value* t = h.make(PKind::Tuple, offset);
    for (const Value* c : items) t->depth = std::max(t->depth, c->depth + 1);
    t->mut_kids().assign(h, items);
    return t;
  };
  auto int_at = [&](int64_t x, uint64_t offset) {
    Value* v = h.make(PKind::Int, offset);
    v->i = x;
    return v;
  };
  Value* pid_items[5] = {p.storage_word, p.cls, p.key, p.location, int_at(p.numel, at(1))};
  Value* pid = tuple(at(1), pid_items);
  Value* pers = h.make(PKind::PersId, at(2));
  h.ext(pers)->args = pid;
  pers->depth = pid->depth + 1;
  std::vector<Value*> dims(p.ndim);
  for (size_t k = 0; k < p.ndim; ++k) dims[k] = int_at(p.sizes()[k], at(3));
  Value* size = tuple(at(3), dims);
  for (size_t k = 0; k < p.ndim; ++k) dims[k] = int_at(p.strides()[k], at(4));
  Value* stride = tuple(at(4), dims);
  Value* grad = h.make(PKind::Bool, at(0));
  grad->b = p.requires_grad;
  Value* hooks = nullptr;
  if (p.hooks_fn) {
    hooks = h.make(PKind::Object, at(5));
    ObjExt* he = h.ext(hooks);
    he->callable = p.hooks_fn;
    he->args = tuple(at(5) > 0 ? at(5) - 1 : 0, {});
    hooks->depth = 2;
  } else {
    hooks = h.make(PKind::Dict, at(5));
  }
  Value* args_items[6] = {pers, int_at(p.offset, at(2)), size, stride, grad, hooks};
  e->args = tuple(at(0), args_items);
  return e->args;
}

std::string bigint_decimal(const Value* v) { return v->kind == PKind::BigInt ? bigint_decimal_text(v->str()) : std::string(); }

}  // namespace ckpt