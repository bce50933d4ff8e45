#include "core/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

namespace ckpt {

std::string Value::qualified() const {
  const Value* g = this;
  if (kind == PKind::Object) g = callable();
  if (g == nullptr || g->kind != PKind::Global) return {};
  std::string out(g->s);
  out += '.';
  out += g->name();
  return out;
}

void* Heap::alloc(size_t bytes, size_t align) {
  size_t pad = (align - reinterpret_cast<uintptr_t>(cur_) % align) % align;
  if (cur_ == nullptr || pad + bytes > left_) {
    const size_t block = std::max<size_t>(bytes + align, 1 << 20);
    blocks_.emplace_back(new unsigned char[block]);
    cur_ = blocks_.back().get();
    left_ = block;
    pad = (align - reinterpret_cast<uintptr_t>(cur_) % align) % align;
  }
  void* p = cur_ + pad;
  cur_ += pad + bytes;
  left_ -= pad + bytes;
  return p;
}

void Kids::push(Heap& h, Value* v) {
  if (n_ == cap_) {
    const uint32_t cap = cap_ ? cap_ * 2 : 4;
    auto** p = static_cast<Value**>(h.alloc(sizeof(Value*) * cap, alignof(Value*)));
    if (n_) std::memcpy(p, p_, sizeof(Value*) * n_);
    p_ = p;
    cap_ = cap;
  }
  p_[n_++] = v;
}

void Kids::assign(Heap& h, const std::vector<Value*>& vs) {
  p_ = vs.empty() ? nullptr : static_cast<Value**>(h.alloc(sizeof(Value*) * vs.size(), alignof(Value*)));
  if (!vs.empty()) std::memcpy(p_, vs.data(), sizeof(Value*) * vs.size());
  n_ = cap_ = static_cast<uint32_t>(vs.size());
}

Value* Value::get(std::string_view key) const {
  const auto& p = pairs();
  Value* found = nullptr;
  for (size_t k = 0; k + 1 < p.size(); k += 2)
    if (p[k]->kind == PKind::Str && p[k]->s == key) found = p[k + 1];
  return found;
}

std::string_view python3_module(std::string_view m) {
  // Python's _compat_pickle.IMPORT_MAPPING: what Python 3's unpickler really imports for these names.
  static constexpr std::pair<std::string_view, std::string_view> kMap[] = {{"__builtin__", "builtins"},
                                                                           {"exceptions", "builtins"},
                                                                           {"copy_reg", "copyreg"},
                                                                           {"cPickle", "pickle"},
                                                                           {"commands", "subprocess"},
                                                                           {"httplib", "http.client"},
                                                                           {"urllib2", "urllib.request"},
                                                                           {"urlparse", "urllib.parse"},
                                                                           {"thread", "_thread"},
                                                                           {"Queue", "queue"},
                                                                           {"SocketServer", "socketserver"},
                                                                           {"ConfigParser", "configparser"},
                                                                           {"repr", "reprlib"},
                                                                           {"StringIO", "io"},
                                                                           {"cStringIO", "io"},
                                                                           {"UserDict", "collections"},
                                                                           {"UserList", "collections"},
                                                                           {"UserString", "collections"},
                                                                           {"whichdb", "dbm"},
                                                                           {"anydbm", "dbm"},
                                                                           {"BaseHTTPServer", "http.server"},
                                                                           {"SimpleHTTPServer", "http.server"},
                                                                           {"CGIHTTPServer", "http.server"},
                                                                           {"Cookie", "http.cookies"},
                                                                           {"cookielib", "http.cookiejar"},
                                                                           {"HTMLParser", "html.parser"},
                                                                           {"xmlrpclib", "xmlrpc.client"},
                                                                           {"SimpleXMLRPCServer", "xmlrpc.server"},
                                                                           {"dummy_thread", "_dummy_thread"},
                                                                           {"_winreg", "winreg"}};
  for (const auto& [py2, py3] : kMap)
    if (m == py2) return py3;
  return m;
}

namespace {

const char* opname(uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

// Decodes the body of a protocol-0 STRING ('...' or "..." with Python escapes).
std::string unescape_string(std::string_view body, const Cursor& c, uint64_t at) {
  if (body.size() < 2 || (body.front() != '\'' && body.front() != '"') || body.back() != body.front())
    c.fail_at(at, "STRING argument is not a quoted string");
  body = body.substr(1, body.size() - 2);
  std::string out;
  out.reserve(body.size());
  for (size_t k = 0; k < body.size(); ++k) {
    char ch = body[k];
    if (ch != '\\' || k + 1 == body.size()) {
      out += ch;
      continue;
    }
    char e = body[++k];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'x':
        if (k + 2 < body.size()) {
          out += static_cast<char>(std::strtol(std::string(body.substr(k + 1, 2)).c_str(), nullptr, 16));
          k += 2;
        }
        break;
      default: out += '\\'; out += e;
    }
  }
  return out;
}

// raw-unicode-escape: \uXXXX and \UXXXXXXXX become UTF-8, everything else is latin-1.
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | ((cp >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string raw_unicode_escape(std::string_view in) {
  std::string out;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] == '\\' && k + 1 < in.size() && (in[k + 1] == 'u' || in[k + 1] == 'U')) {
      size_t n = in[k + 1] == 'u' ? 4 : 8;
      if (k + 2 + n <= in.size()) {
        std::string hex(in.substr(k + 2, n));
        char* end = nullptr;
        unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
        if (end == hex.c_str() + n && cp <= 0x10FFFF) {
          append_utf8(out, static_cast<uint32_t>(cp));
          k += 1 + n;
          continue;
        }
      }
    }
    append_utf8(out, static_cast<unsigned char>(in[k]));
  }
  return out;
}

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
  // Where a `n`-byte read starts: here, or (file mode) at the buffered frame's end.
  void fit(uint64_t n) {
    if (file_ && active_ && (pos() > end_ || n > end_ - pos())) {
      seek(end_);
      active_ = false;
    }
  }
  // A FRAME of `n` bytes starting here (after fit(n)): the buffer now ends at max(its end, here + n).
  void frame(uint64_t n) {
    if (!file_) return;
    if (!active_ || pos() + n > end_) end_ = pos() + n;
    active_ = true;
  }
  // Where a line starts: file mode skips to the frame's end when the line does not end inside it.
  void fit_line() {
    if (!file_ || !active_) return;
    const auto& v = view();
    for (uint64_t k = pos(); k < end_ && k < v.size(); ++k)
      if (v.data()[k] == '\n') return;
    seek(end_);
    active_ = false;
  }
  // Where a file read resumes after STOP: the end of a frame still buffered, else here.
  uint64_t file_pos() const { return file_ && active_ && end_ > pos() ? end_ : pos(); }

 private:
  bool file_;
  bool active_ = false;
  uint64_t end_ = 0;
};

class Machine {
 public:
  Machine(const ByteView& data, uint64_t start, Heap& heap, const Limits& limits, bool file)
      : c_(data, start, file), heap_(heap), lim_(limits) {}

  Unpickled run();
  const std::vector<GlobalRef>& globals() const { return out_.globals; }

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
  // Pops everything above the last MARK (and the mark).
  std::vector<Value*> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value*> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  void note_child(Value* parent, const Value* child) {
    uint32_t d = child->depth + 1;
    if (d > parent->depth) parent->depth = d;
    if (parent->depth > lim_.pickle_depth)
      fail(fmt::format("nesting depth {} exceeds the limit of {}", parent->depth, lim_.pickle_depth));
  }
  Value* container(PKind k, const std::vector<Value*>& items) {
    Value* v = make(k);
    for (Value* it : items) note_child(v, it);
    v->items.assign(heap_, items);
    return v;
  }
  // Small ints, None and bools are immutable in practice: one node each per pickle.
  Value* int_value(int64_t x) {
    if (x >= 0 && x < 256) {
      Value*& c = small_ints_[x];
      if (!c) {
        c = make(PKind::Int);
        c->i = x;
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
    v->s = s;
    return v;
  }
  Value* owned_str(std::string s) { return str_value(PKind::Str, heap_.keep(std::move(s))); }
  std::string_view payload(uint64_t n) {
    if (n > lim_.string_bytes) fail(fmt::format("length {} exceeds the limit of {} bytes", n, lim_.string_bytes));
    if (n > c_.remaining()) fail(fmt::format("length {} exceeds {} remaining bytes", n, c_.remaining()));
    return c_.take_str(n, op_name_);
  }
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
  int64_t parse_decimal(std::string_view t) {
    std::string s(t);
    if (!s.empty() && s.back() == 'L') s.pop_back();
    if (s.empty()) fail("empty integer");
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (end != s.c_str() + s.size()) fail(fmt::format("'{}' is not an integer", s.substr(0, 40)));
    if (errno == ERANGE) return INT64_MIN;  // caller turns into BigInt
    return x;
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
    if (key < memo_vec_.size() && memo_vec_[key] != nullptr) return memo_vec_[key];
    auto it = memo_map_.find(key);
    if (it == memo_map_.end()) fail(fmt::format("memo key {} was never stored", key));
    return it->second;
  }
  // `module` and `name` must outlive the heap (pickle bytes or heap_.keep()).
  Value* global(std::string_view module, std::string_view name, bool stack) {
    Value* g = make(PKind::Global);
    std::string_view m3 = python3_module(module);
    g->s = m3;
    heap_.ext(g)->name = name;
    g->i = static_cast<int64_t>(out_.globals.size());  // a Global's int slot: its GlobalRef
    GlobalRef& r = out_.globals.emplace_back();
    r.module = m3;
    r.name = name;
    r.offset = op_at_;
    r.stack_global = stack;
    r.opcode = op_name_;
    return g;
  }
  // Records how the global behind `v` (if `v` is one) is used by the opcode being run.
  void use(const Value* v, uint8_t how) {
    if (!v || v->kind != PKind::Global) return;
    GlobalRef& g = out_.globals[static_cast<size_t>(v->i)];
    g.use |= how;
    if (!g.use_opcode) {
      g.use_opcode = op_name_;
      g.use_offset = op_at_;
    }
  }
  // A call: its callable is used, and globals among its arguments are passed to it.
  void call(Value* callable, Value* args) {
    use(callable, kUseCalled);
    if (!args || args->kind != PKind::Tuple) return;
    std::string callee;
    for (size_t k = 0; k < args->items.size() && k < 255; ++k) {
      const Value* a = args->items[k];
      if (a->kind != PKind::Global) continue;
      if (callee.empty() && callable && callable->kind == PKind::Global) callee = callable->qualified();
      auto& to = out_.globals[static_cast<size_t>(a->i)].passed_to;
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
  void set_items(Value* target, const std::vector<Value*>& kv) {
    if (kv.size() % 2 != 0) fail("odd number of items for SETITEMS");
    if (target->kind == PKind::Global) return use(target, kUseMutated);  // Python would write into the import
    if (target->kind != PKind::Dict && target->kind != PKind::Object)
      fail(fmt::format("target is not a dict (it is a {})", kind_name(target)));
    Kids& dst = target->kind == PKind::Dict ? target->items : heap_.ext(target)->dict;
    for (Value* v : kv) {
      note_child(target, v);
      dst.push(heap_, v);
    }
  }
  void append_items(Value* target, const std::vector<Value*>& vs) {
    if (target->kind == PKind::Global) return use(target, kUseMutated);  // Python would append to the import
    if (target->kind != PKind::List && target->kind != PKind::Object && target->kind != PKind::Set)
      fail(fmt::format("target is not a list (it is a {})", kind_name(target)));
    for (Value* v : vs) {
      note_child(target, v);
      target->items.push(heap_, v);
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
};

Unpickled Machine::run() {
  uint64_t ops = 0;
  for (;;) {
    op_at_ = c_.pos();
    if (c_.at_end()) {
      op_name_ = "pickle";
      fail(stack_.empty() ? "data ends before any opcode" : "data ends before STOP");
    }
    if (++ops > lim_.pickle_ops) fail(fmt::format("more than {} opcodes", lim_.pickle_ops));
    const uint8_t op = c_.u8();
    op_name_ = opname(op);
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
        c_.frame(n);
        frame_end_ = c_.pos() + n;
        out_.framed = true;
        break;
      }
      case '.': {  // STOP
        Value* v = pop();
        if (!marks_.empty()) fail("STOP with an open MARK");
        out_.root = v;
        out_.end = c_.pos();
        if (frame_end_ > out_.end) out_.frame_end = frame_end_;
        if (c_.file_pos() > out_.end) out_.frame_end = c_.file_pos();
        return std::move(out_);
      }
      case '(':
        if (marks_.size() >= lim_.pickle_depth) fail(fmt::format("more than {} open MARKs", lim_.pickle_depth));
        marks_.push_back(stack_.size());
        break;
      case '0': pop(); break;
      case '1': pop_mark(); break;
      case '2': push(top()); break;
      case 'N':
        if (!none_) none_ = make(PKind::None);
        push(none_);
        break;
      case 0x88:
      case 0x89: {
        Value*& v = bools_[op == 0x88];
        if (!v) {
          v = make(PKind::Bool);
          v->b = op == 0x88;
        }
        push(v);
        break;
      }
      case 'I': {
        std::string_view t = text_line();
        if (t == "00" || t == "01") {
          Value* v = make(PKind::Bool);
          v->b = t == "01";
          push(v);
          break;
        }
        int64_t x = parse_decimal(t);
        push(x == INT64_MIN && t != "-9223372036854775808" ? str_value(PKind::BigInt, t) : int_value(x));
        break;
      }
      case 'L': {
        std::string_view t = text_line();
        int64_t x = parse_decimal(t);
        push(x == INT64_MIN && t.substr(0, 20) != "-9223372036854775808" ? str_value(PKind::BigInt, t) : int_value(x));
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
      case 'B': push(str_value(PKind::Bytes, payload(c_.le<uint32_t>()))); break;
      case 'C': {
        uint8_t n = c_.u8();
        push(str_value(PKind::Bytes, payload(n)));
        break;
      }
      case 0x8e:
      case 0x96: push(str_value(PKind::Bytes, payload(c_.le<uint64_t>()))); break;
      case 0x97: fail("out-of-band buffers are not supported");
      case 0x98: top(); break;  // READONLY_BUFFER: no-op on an inert value
      case ')':  // immutable: one node per pickle
        if (!empty_tuple_) empty_tuple_ = make(PKind::Tuple);
        push(empty_tuple_);
        break;
      case ']': push(make(PKind::List)); break;
      case '}': push(make(PKind::Dict)); break;
      case 0x8f: push(make(PKind::Set)); break;
      case 't': push(container(PKind::Tuple, pop_mark())); break;
      case 'l': push(container(PKind::List, pop_mark())); break;
      case 0x91: push(container(PKind::FrozenSet, pop_mark())); break;
      case 'd': {
        auto kv = pop_mark();
        if (kv.size() % 2) fail("odd number of items for DICT");
        push(container(PKind::Dict, std::move(kv)));
        break;
      }
      case 0x85: {
        Value* a = pop();
        push(container(PKind::Tuple, {a}));
        break;
      }
      case 0x86: {
        Value* b = pop();
        Value* a = pop();
        push(container(PKind::Tuple, {a, b}));
        break;
      }
      case 0x87: {
        Value* c3 = pop();
        Value* b = pop();
        Value* a = pop();
        push(container(PKind::Tuple, {a, b, c3}));
        break;
      }
      case 'a': {
        Value* v = pop();
        append_items(top(), {v});
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
        Value* k = pop();
        set_items(top(), {k, v});
        break;
      }
      case 'u': {
        auto kv = pop_mark();
        set_items(top(), kv);
        break;
      }
      case 'p': {
        std::string_view t = text_line();
        int64_t k = parse_decimal(t);
        if (k < 0) fail("negative memo key");
        memo_put(static_cast<uint64_t>(k), top());
        break;
      }
      case 'q': memo_put(c_.u8(), top()); break;
      case 'r': memo_put(c_.le<uint32_t>(), top()); break;
      case 0x94: memo_put(memo_count(), top()); break;
      case 'g': {
        int64_t k = parse_decimal(text_line());
        if (k < 0) fail("negative memo key");
        push(memo_get(static_cast<uint64_t>(k)));
        break;
      }
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
          push(global(heap_.keep(module->is_str() ? std::string(module->s) : "<computed>"),
                      heap_.keep(name->is_str() ? std::string(name->s) : "<computed>"), true));
          out_.globals.back().computed = true;
          break;
        }
        push(global(module->s, name->s, true));
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
        push(object(ObjHow::Reduce, fn, args));
        if (fn->kind == PKind::Global && fn->s == "torch.storage" && fn->name() == "_load_from_bytes")
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
        Value* args = container(PKind::Tuple, std::vector<Value*>(vs.begin() + 1, vs.end()));
        call(cls, args);  // a call hidden behind OBJ
        push(object(ObjHow::Obj, cls, args));
        break;
      }
      case 'i': {
        std::string_view module = text_line();
        std::string_view name = text_line();
        Value* cls = global(module, name, false);
        auto vs = pop_mark();
        Value* args = container(PKind::Tuple, std::move(vs));
        call(cls, args);
        push(object(ObjHow::Inst, cls, args));
        break;
      }
      case 'b': {
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

std::string bigint_decimal(const Value* v) {
  if (v->kind != PKind::BigInt) return {};
  std::string_view b = v->s;
  if (!b.empty() && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))) {  // from text LONG / INT
    std::string t(b);
    if (!t.empty() && t.back() == 'L') t.pop_back();
    return t;
  }
  // Two's-complement little-endian bytes -> magnitude in base 1e9 limbs.
  std::vector<uint8_t> mag(b.begin(), b.end());
  const bool neg = !mag.empty() && (mag.back() & 0x80);
  if (neg) {  // negate: invert and add one
    int carry = 1;
    for (auto& x : mag) {
      int y = static_cast<uint8_t>(~x) + carry;
      x = static_cast<uint8_t>(y);
      carry = y >> 8;
    }
  }
  std::vector<uint32_t> limbs{0};
  for (size_t k = mag.size(); k-- > 0;) {
    uint64_t carry = mag[k];
    for (auto& l : limbs) {
      uint64_t y = static_cast<uint64_t>(l) * 256 + carry;
      l = static_cast<uint32_t>(y % 1000000000);
      carry = y / 1000000000;
    }
    while (carry) {
      limbs.push_back(static_cast<uint32_t>(carry % 1000000000));
      carry /= 1000000000;
    }
  }
  std::string out = std::to_string(limbs.back());
  for (size_t k = limbs.size() - 1; k-- > 0;) out += fmt::format("{:09d}", limbs[k]);
  return neg ? "-" + out : out;
}

namespace {

size_t utf8_code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

struct PlainWalker {
  const PlainHook& hook;
  int max_depth;
  uint64_t budget;
  std::vector<const Value*> path;

  nlohmann::ordered_json operator()(const Value* v, int depth) {
    using J = nlohmann::ordered_json;
    if (depth > max_depth || budget == 0) return J("...");
    --budget;
    if (std::find(path.begin(), path.end(), v) != path.end()) return J("<cycle>");
    if (hook)
      if (auto h = hook(v)) return *h;
    path.push_back(v);
    J out = convert(v, depth);
    path.pop_back();
    return out;
  }

  nlohmann::ordered_json convert(const Value* v, int depth) {
    using J = nlohmann::ordered_json;
    auto key_text = [&](const Value* k) {
      if (k->is_str()) return std::string(k->s);
      if (k->is_int()) return std::to_string(k->i);
      return (*this)(k, depth + 1).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    };
    auto object_of = [&](const Kids& pairs) {
      J o = J::object();
      for (size_t k = 0; k + 1 < pairs.size(); k += 2) o[key_text(pairs[k])] = (*this)(pairs[k + 1], depth + 1);
      return o;
    };
    switch (v->kind) {
      case PKind::None: return nullptr;
      case PKind::Bool: return v->b;
      case PKind::Int: return v->i;
      case PKind::BigInt: return bigint_decimal(v);
      case PKind::Float: return v->f;
      case PKind::Str: return std::string(v->s);
      case PKind::Bytes: return J(fmt::format("<{} bytes>", v->s.size()));
      case PKind::Global: return J{{"__global__", v->qualified()}};
      case PKind::PersId: return J("<persistent id>");
      case PKind::Tuple:
      case PKind::List:
      case PKind::Set:
      case PKind::FrozenSet: {
        J a = J::array();
        for (const Value* e : v->items) a.push_back((*this)(e, depth + 1));
        return a;
      }
      case PKind::Dict: return object_of(v->items);
      case PKind::Object: break;
    }
    std::string q = v->qualified();
    const Value* a = v->args();
    const Value* a0 = a && a->kind == PKind::Tuple && !a->items.empty() ? a->items[0] : nullptr;
    if (q == "collections.OrderedDict" || q == "builtins.dict") return object_of(v->pairs());
    if ((q == "builtins.set" || q == "builtins.frozenset" || q == "builtins.list" || q == "builtins.tuple")) {
      if (!a0) return J::array();
      return (*this)(a0, depth + 1);
    }
    if (q == "_codecs.encode" && a0 && a0->is_str()) return J(fmt::format("<{} bytes>", utf8_code_points(a0->s)));
    if ((q == "builtins.bytes" || q == "builtins.bytearray") && !a0) return J("<0 bytes>");
    if ((q == "builtins.bytes" || q == "builtins.bytearray") && a0 && a0->kind == PKind::Bytes) return (*this)(a0, depth + 1);
    // TorchScript's list builders and type tags wrap a plain value.
    if (a0 && (q.rfind("torch.jit._pickle.build_", 0) == 0 || q == "torch.jit._pickle.restore_type_tag"))
      return (*this)(a0, depth + 1);
    if (q == "copyreg._reconstructor" && a0) q = a0->qualified();
    J o = J::object();
    o["__class__"] = q.empty() ? "?" : q;
    if (const Value* st = v->state(); st && st->kind == PKind::Dict) {
      for (size_t k = 0; k + 1 < st->items.size(); k += 2)
        if (st->items[k]->is_str()) o[std::string(st->items[k]->s)] = (*this)(st->items[k + 1], depth + 1);
    }
    return o;
  }
};

}  // namespace

nlohmann::ordered_json plain_json(const Value* v, const PlainHook& hook, int max_depth, uint64_t budget) {
  PlainWalker w{hook, max_depth, budget, {}};
  return w(v, 0);
}

Unpickled unpickle(const ByteView& data, uint64_t start, Heap& heap, const Limits& limits, std::vector<GlobalRef>* seen,
                   bool as_file) {
  Machine m(data, start, heap, limits, as_file);
  try {
    return m.run();
  } catch (const InputError&) {
    if (seen) *seen = m.globals();
    throw;
  }
}

}  // namespace ckpt
