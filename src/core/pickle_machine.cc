// The pickle machine's opcode loop (Machine::run) and unpickle(), which runs it (pickle_machine.h).
#include "core/pickle_machine.h"

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

namespace ckpt::pickle_detail {

// The opcode handlers run() hands its opcodes to, by family. Each is declared [[gnu::always_inline]] inline
// and defined here, before run(): the loop compiles to the one switch it was.

// The stream: PROTO, FRAME, STOP.
void Machine::proto() {
  uint8_t p = c_.u8();
  if (p > 5) fail(fmt::format("unsupported protocol {}", p));
  out_.protocol = std::max<int>(out_.protocol, p);
}

// FRAME: a length hint; a frame that claims more than remains is a lie.
void Machine::frame() {
  uint64_t n = c_.le<uint64_t>();
  c_.fit(n);
  if (n > c_.remaining()) fail(fmt::format("frame length {} exceeds {} remaining bytes", n, c_.remaining()));
  c_.frame(n, op_at_);
  frame_end_ = c_.pos() + n;
  out_.framed = true;
}

Unpickled Machine::stop() {
  Value* v = pop();
  if (!marks_.empty()) fail("STOP with an open MARK");
  out_.root = v;
  out_.end = c_.pos();
  out_.dropped = c_.dropped();
  if (frame_end_ > out_.end) out_.frame_end = frame_end_;
  if (c_.file_pos() > out_.end) out_.frame_end = c_.file_pos();
  return std::move(out_);
}

void Machine::mark() {
  if (marks_.size() >= lim_.pickle_depth) fail(fmt::format("more than {} open MARKs", lim_.pickle_depth));
  if (pack_ && marks_.empty()) {  // no value made before this MARK can be packed
    memo_log_.clear();
    cache_log_.clear();
  }
  marks_.push_back(stack_.size());
  if (pack_) mark_at_.push_back({heap_.pos(), memo_log_.size(), cache_log_.size(), mutations_, out_.nested_loads.size()});
}

// The memo puts, in CPython's _pickle order: the key read (the caller's argument), then the stack's top
// looked at; PUT's line is parsed as a key only after that.
void Machine::put(uint64_t key) { memo_put(key, top()); }

void Machine::put_line() {
  const std::string_view line = text_line();
  if (line.empty()) fail("empty memo key");  // a short line, refused before the stack is looked at
  Value* v = top();
  memo_put(memo_key(line), v);
}

// Scalars: None, the bools, ints and floats.
Value* Machine::none() {
  if (!none_) make_cached(none_, PKind::None);
  return none_;
}

Value* Machine::bool_value(bool b) {
  Value*& v = bools_[b];
  if (!v) make_cached(v, PKind::Bool)->b = b;
  return v;
}

// INT: load_int's strtol(base 0), else int(line, 0); "00" / "01" are the booleans (a node each time).
Value* Machine::int_line() {
  std::string_view t = text_line();
  if (t.empty()) fail("empty integer");
  bool exact = false;
  const std::optional<PyInt> x = py_int_opcode(t, &exact);
  if (exact && t.size() == 2 && x && (x->value == 0 || x->value == 1)) {
    Value* v = make(PKind::Bool);
    v->b = x->value == 1;
    return v;
  }
  return int_text(x, t);
}

// LONG: load_long's trailing 'L' dropped, then int(line, 0).
Value* Machine::long_line() {
  std::string_view t = text_line();
  if (t.empty()) fail("empty integer");
  if (t.back() == 'L') t.remove_suffix(1);
  return int_text(py_int(t, 0), t);
}

// The length of LONG4 and BINSTRING: a signed 32-bit one.
uint64_t Machine::length32() {
  int32_t n = c_.le<int32_t>();
  if (n < 0) fail("negative length");
  return static_cast<uint64_t>(n);
}

Value* Machine::float_line() {
  std::string t(text_line());
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) fail("not a float");
  Value* v = make(PKind::Float);
  v->f = d;
  return v;
}

Value* Machine::binfloat() {
  Value* v = make(PKind::Float);
  v->f = c_.be<double>();
  return v;
}

// STRING: a quoted, escaped line.
Value* Machine::string_line() {
  uint64_t at = c_.pos();
  return owned_str(unescape_string(text_line(), c_, at));
}

// Containers, and what APPEND(S) / SETITEM(S) put into the one under them.
Value* Machine::empty_tuple() {  // immutable: one node per pickle
  if (!empty_tuple_) make_cached(empty_tuple_, PKind::Tuple);
  return empty_tuple_;
}

void Machine::empty_dict(uint64_t& ops) {
  if (pack_ && !skim_off_ && skim_metadata(ops)) return;
  push(make(PKind::Dict));
}

// TUPLE: the last one a REDUCE may pack.
void Machine::tuple_from_mark() {
  push(container(PKind::Tuple, pop_mark()));
  if (pack_) {
    last_tuple_ = stack_.back();
    last_tuple_at_ = popped_at_;
  }
}

Value* Machine::dict_from_mark() {
  auto kv = pop_mark();
  if (kv.size() % 2) fail("odd number of items for DICT");
  return container(PKind::Dict, kv);
}

// TUPLE1, TUPLE2, TUPLE3: the top `n` values, popped from the top down.
void Machine::small_tuple(size_t n) {
  Value* items[3];
  for (size_t k = n; k > 0; --k) items[k - 1] = pop();
  push(container(PKind::Tuple, std::span<Value* const>(items, n)));
}

void Machine::append() {
  Value* v[1] = {pop()};
  append_items(top(), v);
}

void Machine::setitem() {
  Value* v = pop();
  Value* kv[2] = {pop(), v};
  set_items(top(), kv);
}

// APPENDS, ADDITEMS (`set`: false) and SETITEMS: the values above the MARK, then their target.
void Machine::items_from_mark(bool set) {
  auto vs = pop_mark();
  if (set) set_items(top(), vs);
  else append_items(top(), vs);
}

// Globals, calls, BUILD and persistent ids.
Value* Machine::global_line() {
  std::string_view module = text_line();
  std::string_view name = text_line();
  return global(module, name, false);
}

void Machine::stack_global() {
  Value* name = pop();
  Value* module = pop();
  if (!module->is_str() || !name->is_str()) {
    // Computed at load time (results of calls): the scan cannot name it, but keeps going.
    push(global(heap_.keep(module->is_str() ? std::string(module->str()) : "<computed>"),
                heap_.keep(name->is_str() ? std::string(name->str()) : "<computed>"), true));
    out_.globals.back().computed = true;
    return;
  }
  push(global(module->str(), name->str(), true));
}

// EXT1, EXT2, EXT4: a code of the copyreg extension registry.
Value* Machine::extension(uint8_t op) {
  uint64_t code = op == 0x82 ? c_.u8() : op == 0x83 ? c_.le<uint16_t>() : c_.le<uint32_t>();
  return global("copyreg._extension_registry", heap_.keep(std::to_string(code)), false);
}

void Machine::reduce() {
  Value* args = pop();
  Value* fn = pop();
  call(fn, args);
  if (Value* packed = args == last_tuple_ ? try_pack(fn, args) : nullptr) {
    last_tuple_ = nullptr;
    push(packed);
    return;
  }
  last_tuple_ = nullptr;
  push(object(ObjHow::Reduce, fn, args));
  if (fn->kind == PKind::Global && fn->str() == "torch.storage" && fn->name() == "_load_from_bytes")
    out_.nested_loads.push_back(stack_.back());
}

void Machine::newobj() {
  Value* args = pop();
  Value* cls = pop();
  call(cls, args);
  push(object(ObjHow::NewObj, cls, args));
}

void Machine::newobj_ex() {
  Value* kwargs = pop();
  Value* args = pop();
  Value* cls = pop();
  call(cls, args);
  Value* o = object(ObjHow::NewObjEx, cls, args);
  o->ext->kwargs = kwargs;
  note_child(o, kwargs);
  push(o);
}

void Machine::obj() {
  auto vs = pop_mark();
  if (vs.empty()) fail("OBJ needs a class");
  Value* cls = vs.front();
  Value* args = container(PKind::Tuple, vs.subspan(1));
  call(cls, args);  // a call hidden behind OBJ
  push(object(ObjHow::Obj, cls, args));
}

void Machine::inst() {
  if (marks_.empty()) fail("no MARK on the stack");  // load_inst looks for the MARK before any import
  std::string_view module = text_line();
  std::string_view name = text_line();
  Value* cls = global(module, name, false);
  auto vs = pop_mark();
  Value* args = container(PKind::Tuple, vs);
  call(cls, args);
  push(object(ObjHow::Inst, cls, args));
}

void Machine::build() {
  ++mutations_;
  Value* state = pop();
  Value* target = top();
  // On an instance: its class's __setstate__ runs with this state. On the global itself: Python
  // sets attributes of the imported class, function or module.
  if (target->kind == PKind::Global) use(target, kUseMutated);
  else if (target->kind == PKind::Object) use(target->callable(), kUseBuilt);
  heap_.ext(target)->state = state;
  note_child(target, state);
}

// PERSID (`pid` a string line: its depth not counted) and BINPERSID (`nested`: any value).
void Machine::persid(Value* pid, bool nested) {
  Value* v = make(PKind::PersId);
  heap_.ext(v)->args = pid;
  if (nested) note_child(v, pid);
  push(v);
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
      case 0x80: proto(); break;
      case 0x95: frame(); break;
      case '.': return stop();
      case '(': mark(); break;
      case '0': pop(); break;
      case '1': pop_mark(); break;
      case '2': push(top()); break;
      case 'N': push(none()); break;
      case 0x88:
      case 0x89: push(bool_value(op == 0x88)); break;
      case 'I': push(int_line()); break;
      case 'L': push(long_line()); break;
      case 'J': push(int_value(c_.le<int32_t>())); break;
      case 'K': push(int_value(c_.u8())); break;
      case 'M': push(int_value(c_.le<uint16_t>())); break;
      case 0x8a: push(long_from_bytes(payload(c_.u8()))); break;
      case 0x8b: push(long_from_bytes(payload(length32()))); break;
      case 'F': push(float_line()); break;
      case 'G': push(binfloat()); break;
      case 'S': push(string_line()); break;
      case 'V': push(owned_str(raw_unicode_escape(text_line()))); break;
      case 'T': push(str_value(PKind::Str, payload(length32()))); break;
      case 'U':
      case 0x8c: push(str_value(PKind::Str, payload(c_.u8()))); break;
      case 'X': push(str_value(PKind::Str, payload(c_.le<uint32_t>()))); break;
      case 0x8d: push(str_value(PKind::Str, payload(c_.le<uint64_t>()))); break;
      case 'B': push(bytes_value(c_.le<uint32_t>())); break;
      case 'C': push(bytes_value(c_.u8())); break;
      case 0x8e:
      case 0x96: push(bytes_value(c_.le<uint64_t>())); break;
      case 0x97: fail("out-of-band buffers are not supported");
      case 0x98: top(); break;  // READONLY_BUFFER: no-op on an inert value
      case ')': push(empty_tuple()); break;
      case ']': push(make(PKind::List)); break;
      case '}': empty_dict(ops); break;
      case 0x8f: push(make(PKind::Set)); break;
      case 't': tuple_from_mark(); break;
      case 'l': push(container(PKind::List, pop_mark())); break;
      case 0x91: push(container(PKind::FrozenSet, pop_mark())); break;
      case 'd': push(dict_from_mark()); break;
      case 0x85: small_tuple(1); break;
      case 0x86: small_tuple(2); break;
      case 0x87: small_tuple(3); break;
      case 'a': append(); break;
      case 'e':
      case 0x90: items_from_mark(false); break;
      case 's': setitem(); break;
      case 'u': items_from_mark(true); break;
      case 'p': put_line(); break;
      case 'q': put(c_.u8()); break;
      case 'r': put(c_.le<uint32_t>()); break;
      case 0x94: put(memo_count()); break;
      case 'g': push(memo_get(memo_key(text_line()))); break;
      case 'h': push(memo_get(c_.u8())); break;
      case 'j': push(memo_get(c_.le<uint32_t>())); break;
      case 'c': push(global_line()); break;
      case 0x93: stack_global(); break;
      case 0x82:
      case 0x83:
      case 0x84: push(extension(op)); break;
      case 'R': reduce(); break;
      case 0x81: newobj(); break;
      case 0x92: newobj_ex(); break;
      case 'o': obj(); break;
      case 'i': inst(); break;
      case 'b': build(); break;
      case 'P': persid(str_value(PKind::Str, text_line()), false); break;
      case 'Q': persid(pop(), true); break;
      default: fail("unhandled opcode");
    }
  }
}
}  // namespace ckpt::pickle_detail

namespace ckpt {

using pickle_detail::Machine;
using pickle_detail::Repack;

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

}  // namespace ckpt
