// The inert pickle VM against Python's own pickle module (testdata/gen_pickles.py), plus the limits.
#include <doctest/doctest.h>

#include <string>
#include <memory>
#include <vector>

#include "core/mapped_file.h"
#include "core/pickle.h"
#include "core/zip.h"
#include "fixtures.h"

using namespace ckpt;

namespace {

// A byte string literal with embedded NULs kept.
template <size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

nlohmann::json load_plain(const std::string& bytes, const Limits& lim = Limits{}) {
  auto f = MappedFile::from_memory(bytes, "mem.pkl");
  Heap heap;
  Unpickled u = unpickle(f->view(), 0, heap, lim);
  return nlohmann::json::parse(plain_json(u.root).dump());
}

std::string error_of(const std::string& bytes, const Limits& lim = Limits{}) {
  try {
    load_plain(bytes, lim);
  } catch (const InputError& e) { return e.render(); }
  return "no error";
}

}  // namespace

TEST_CASE("pickle: protocols 0-5 from Python decode to the same plain value") {
  const auto expected = test::read_json(test::testdata() / "pickles" / "expected.json");
  for (int proto = 0; proto <= 5; ++proto) {
    CAPTURE(proto);
    const auto bytes = test::read_file(test::testdata() / "pickles" / ("p" + std::to_string(proto) + ".pkl"));
    REQUIRE(!bytes.empty());
    const auto got = load_plain(bytes);
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      CAPTURE(it.key());
      CHECK(got[it.key()] == it.value());
    }
  }
}

TEST_CASE("pickle: globals are recorded, never resolved") {
  const auto bytes = test::read_file(test::testdata() / "pickles" / "p4.pkl");
  auto f = MappedFile::from_memory(bytes, "p4.pkl");
  Heap heap;
  Unpickled u = unpickle(f->view(), 0, heap, Limits{});
  bool saw_point = false;
  for (const auto& g : u.globals) saw_point |= g.module == "__main__" && g.name == "Point" && g.stack_global;
  CHECK(saw_point);
  CHECK(u.protocol == 4);
  CHECK(u.end == bytes.size());
}

// Hand-written bytes below are hostile inputs only.
TEST_CASE("pickle: limits give one clear error each") {
  Limits lim;
  SUBCASE("string length beyond the data") {
    std::string p(
        "\x80\x02X\x00\x10\x00\x00"
        "abc",
        10);
    CHECK(error_of(p) == "mem.pkl: +0x2: BINUNICODE: length 4096 exceeds 3 remaining bytes");
  }
  SUBCASE("string length beyond the limit") {
    lim.string_bytes = 2;
    CHECK(error_of(std::string("\x80\x02X\x03\x00\x00\x00"
                               "abc.",
                               11),
                   lim) == "mem.pkl: +0x2: BINUNICODE: length 3 exceeds the limit of 2 bytes");
  }
  SUBCASE("nesting depth") {
    lim.pickle_depth = 50;
    std::string p = "\x80\x02N";
    for (int k = 0; k < 60; ++k) p += "\x85";  // TUPLE1 around and around
    p += ".";
    CHECK(error_of(p, lim).find("nesting depth 51 exceeds the limit of 50") != std::string::npos);
  }
  SUBCASE("too many marks") {
    lim.pickle_depth = 10;
    CHECK(error_of(std::string(20, '('), lim).find("more than 10 open MARKs") != std::string::npos);
  }
  SUBCASE("memo entries") {
    lim.memo_entries = 3;
    std::string p = "\x80\x04N";
    for (int k = 0; k < 5; ++k) p += "\x94";  // MEMOIZE
    CHECK(error_of(p, lim).find("memo exceeds the limit of 3 entries") != std::string::npos);
  }
  SUBCASE("opcode count") {
    lim.pickle_ops = 100;
    std::string p = "\x80\x02";
    for (int k = 0; k < 200; ++k) p += "N0";
    CHECK(error_of(p, lim).find("more than 100 opcodes") != std::string::npos);
  }
  SUBCASE("memo key never stored") {
    CHECK(error_of(B("\x80\x02h\x07.")).find("memo key 7 was never stored") != std::string::npos);
  }
  SUBCASE("lying FRAME length") {
    std::string p("\x80\x04\x95\x00\x01\x00\x00\x00\x00\x00\x00N.", 13);
    CHECK(error_of(p).find("FRAME: frame length 256 exceeds 2 remaining bytes") != std::string::npos);
  }
  SUBCASE("unknown opcode") { CHECK(error_of("\x80\x02\xff").find("unknown opcode 0xff") != std::string::npos); }
  SUBCASE("stack underflow") { CHECK(error_of("\x80\x02R.").find("REDUCE: stack is empty") != std::string::npos); }
  SUBCASE("a memo put reads its key before it looks at the stack, as CPython's _pickle does") {
    // Python 3.11's pickle.loads: b"\x80\x02q" and b"\x80\x02p\n." "pickle data was truncated",
    // b"\x80\x02q\x00." and b"\x80\x02p7\n." "unpickling stack underflow".
    const std::string cut = error_of("\x80\x02q");  // BINPUT without its byte, on an empty stack
    CHECK(cut.find("read of 1 byte past the end") != std::string::npos);
    CHECK(cut.find("stack is empty") == std::string::npos);
    CHECK(error_of(B("\x80\x02q\x00.")).find("BINPUT: stack is empty") != std::string::npos);
    CHECK(error_of("\x80\x02p\n.").find("PUT: empty memo key") != std::string::npos);
    CHECK(error_of("\x80\x02p7\n.").find("PUT: stack is empty") != std::string::npos);
  }
  SUBCASE("no STOP") { CHECK(error_of("\x80\x02N").find("data ends before STOP") != std::string::npos); }
  SUBCASE("out-of-band buffer") {
    CHECK(error_of("\x80\x05\x97.").find("out-of-band buffers are not supported") != std::string::npos);
  }
  SUBCASE("SETITEM on a non-dict") { CHECK(error_of("\x80\x02NNNs.").find("target is not a dict") != std::string::npos); }
}

TEST_CASE("pickle: REDUCE of os.system stays an inert object") {
  // What `pickle.dumps(Evil())` with __reduce__ = (os.system, ("touch x",)) produces, protocol 2.
  std::string p = B(
      "\x80\x02"
      "cposix\nsystem\nq\x00X\x07\x00\x00\x00"
      "touch xq\x01\x85q\x02Rq\x03.");
  auto v = load_plain(p);
  CHECK(v["__class__"] == "posix.system");
}

TEST_CASE("pickle: a list that contains itself is shown as a cycle, not walked forever") {
  // EMPTY_LIST, BINPUT 0, BINGET 0, APPEND, STOP
  auto v = load_plain(
      B("\x80\x02]q\x00h\x00"
        "a."));
  REQUIRE(v.is_array());
  CHECK(v[0] == "<cycle>");
}

TEST_CASE("pickle: big integers and the legacy magic number") {
  // LONG1 10 bytes: the legacy torch.save magic 0x1950a86a20f9469cfc6c
  std::string p("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  CHECK(load_plain(p) == "119547037146038801333356");
}

// Protocol-0 numbers as CPython 3.11's C unpickler reads them (each expectation below is what
// pickle.loads returned for the same bytes: load_put / load_get use int(line, 10), load_long
// int(line, 0), load_int strtol(line, 0) and then int(line, 0)).
TEST_CASE("pickle: protocol-0 PUT / GET / INT / LONG follow Python's int() rules") {
  for (const char* key : {"+0_1", " 0002 ", "01", "\t3\v"}) {
    CAPTURE(key);
    CHECK(load_plain(std::string("(lp") + key + "\n0g" + key + "\n.") == nlohmann::json::array());
  }
  for (const char* key : {"0x1", "1_", "1__0"}) {
    CAPTURE(key);
    CHECK(error_of(std::string("(lp") + key + "\n0g" + key + "\n.").find("is not an integer") != std::string::npos);
  }
  CHECK(load_plain("I010\n.") == 8);
  CHECK(load_plain("I0x10\n.") == 16);
  CHECK(load_plain("I 12 \n.") == 12);
  CHECK(load_plain("I1_0\n.") == 10);
  CHECK(load_plain("I0o7\n.") == 7);
  CHECK(load_plain("I00\n.") == false);
  CHECK(load_plain("I01\n.") == true);
  CHECK(load_plain("I 01\n.") == 1);
  CHECK(error_of("I+0_1\n.").find("is not an integer") != std::string::npos);
  CHECK(error_of("I1L\n.").find("is not an integer") != std::string::npos);
  CHECK(load_plain("L 12 \n.") == 12);
  CHECK(load_plain("L12L\n.") == 12);
  CHECK(load_plain("L0x10\n.") == 16);
  CHECK(error_of("L010\n.").find("is not an integer") != std::string::npos);
  CHECK(error_of("L+0_1\n.").find("is not an integer") != std::string::npos);
  CHECK(load_plain("L0x1950A86A20F9469CFC6C\n.") == "119547037146038801333356");  // torch's legacy magic number
}

// CPython reads a BINBYTES payload with _Unpickler_ReadInto: contiguous, also past the end of a FRAME and
// also from a file object (pickle.Unpickler(io.BytesIO(b)).load() == b'abcdefghij' for these bytes).
TEST_CASE("pickle: a BINBYTES payload that overruns its FRAME reads on contiguously") {
  const std::string b = B("\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00"
                          "B\x0a\x00\x00\x00"
                          "abcdefghij.");
  for (const bool as_file : {false, true}) {
    CAPTURE(as_file);
    auto f = MappedFile::from_memory(b, "mem.pkl");
    Heap heap;
    const Unpickled u = unpickle(f->view(), 0, heap, Limits{}, nullptr, as_file);
    REQUIRE(u.root->kind == PKind::Bytes);
    CHECK(u.root->str() == "abcdefghij");
  }
}

// load_inst looks for the MARK before it reads the module line: nothing is imported.
TEST_CASE("pickle: INST without a MARK names no global") {
  auto f = MappedFile::from_memory("iposix\nsystem\n.", "mem.pkl");
  Heap heap;
  std::vector<GlobalRef> seen;
  CHECK_THROWS_AS(unpickle(f->view(), 0, heap, Limits{}, &seen), InputError);
  CHECK(seen.empty());
}

// _compat_pickle: NAME_MAPPING for a module and name pair, then IMPORT_MAPPING for the module.
TEST_CASE("pickle: Python 2 names map as Python 3's unpickler maps them") {
  CHECK(python3_global("__builtin__", "xrange") == std::pair<std::string_view, std::string_view>{"builtins", "range"});
  CHECK(python3_global("__builtin__", "reduce") == std::pair<std::string_view, std::string_view>{"functools", "reduce"});
  CHECK(python3_global("__builtin__", "len") == std::pair<std::string_view, std::string_view>{"builtins", "len"});
  CHECK(python3_global("copy_reg", "_reconstructor") ==
        std::pair<std::string_view, std::string_view>{"copyreg", "_reconstructor"});
  CHECK(python3_global("torch", "Tensor") == std::pair<std::string_view, std::string_view>{"torch", "Tensor"});
}

// ---- packing (PackedTensor): the same graph through Value's accessors, a third of the memory ----

namespace {

// Structural equality of two graphs: kinds, scalar values, string bytes, how, depths, children, and the
// offsets of every value but the one-per-pickle nodes (small ints, bools, None, the empty tuple), whose
// offset is where the pickle first made them.
// Whether `b` (read with packing) is the state dict `a` with its `_metadata` state skimmed: an empty dict
// made where the state's EMPTY_DICT was, of the state's depth.
bool skimmed(const Value* a, const Value* b) {
  const Value* sa = a->state();
  const Value* sb = b->state();
  if (!sa || !sb || sa->kind != PKind::Dict || !sa->get("_metadata") || !sb->kids().empty() || sa->kids().empty()) return false;
  CHECK(a->qualified() == "collections.OrderedDict");
  CHECK(sb->kind == PKind::Dict);
  CHECK(sb->offset == sa->offset);
  CHECK(sb->depth == sa->depth);
  return true;
}

void same_graph(const Value* a, const Value* b, int depth = 0) {
  REQUIRE((a == nullptr) == (b == nullptr));
  if (!a || depth > 64) return;
  CAPTURE(a->offset);
  REQUIRE(a->kind == b->kind);
  CHECK(a->depth == b->depth);
  const bool shared = a->kind == PKind::Int || a->kind == PKind::Bool || a->kind == PKind::None ||
                      (a->kind == PKind::Tuple && a->kids().empty());
  if (!shared) CHECK(a->offset == b->offset);
  if (a->kind == PKind::Int) CHECK(a->i == b->i);
  if (a->kind == PKind::Bool) CHECK(a->b == b->b);
  if (a->kind == PKind::Str || a->kind == PKind::Bytes || a->kind == PKind::Global || a->kind == PKind::BigInt) CHECK(a->str() == b->str());
  CHECK(a->name() == b->name());
  if (a->kind == PKind::Object) CHECK(a->how == b->how);
  REQUIRE(a->kids().size() == b->kids().size());
  for (size_t k = 0; k < a->kids().size(); ++k) same_graph(a->kids()[k], b->kids()[k], depth + 1);
  REQUIRE(a->pairs().size() == b->pairs().size());
  if (a->kind != PKind::Dict)
    for (size_t k = 0; k < a->pairs().size(); ++k) same_graph(a->pairs()[k], b->pairs()[k], depth + 1);
  if (a->kind == PKind::Global) return;  // its callable / args slots are unused
  same_graph(a->callable(), b->callable(), depth + 1);
  same_graph(a->args(), b->args(), depth + 1);
  same_graph(a->kwargs(), b->kwargs(), depth + 1);
  if (skimmed(a, b)) return;
  same_graph(a->state(), b->state(), depth + 1);
}

size_t packed_count(const Value* v, int depth = 0) {
  if (!v || depth > 64) return 0;
  if (v->packed()) return 1;  // (its args() would unpack it)
  size_t n = 0;
  for (const Value* c : v->pairs()) n += packed_count(c, depth + 1);
  if (v->kind != PKind::Dict)
    for (const Value* c : v->kids()) n += packed_count(c, depth + 1);
  if (v->kind != PKind::Global) n += packed_count(v->args(), depth + 1) + packed_count(v->state(), depth + 1);
  return n;
}

}  // namespace

TEST_CASE("pickle: packed tensor rebuilds unpack to the graph the pickle made (torch.save files)") {
  for (const std::string name : {"t26/plain_state_dict.pt", "t26/tied_weights.pt", "t26/views.pt", "t26/dtypes.pt",
                           "t26/whole_module.pt", "t211/sd_compiled_211.pt", "load/sd_module.pt"}) {
    CAPTURE(name);
    const auto f = MappedFile::open((test::testdata() / name).string());
    const ZipReader zip(f->view(), Limits{});
    const ZipEntry* pkl = nullptr;
    for (const ZipEntry& e : zip.entries())
      if (e.name.size() >= 9 && e.name.substr(e.name.size() - 9) == "/data.pkl") pkl = &e;
    REQUIRE(pkl);
    const ByteView bytes = zip.stored(*pkl);
    Heap plain_heap, packed_heap;
    const Unpickled plain = unpickle(bytes, 0, plain_heap, Limits{});
    const Unpickled packed = unpickle(bytes, 0, packed_heap, Limits{}, nullptr, false, nullptr, /*pack=*/true);
    CHECK(packed_count(packed.root) > 0);
    CHECK(packed_count(plain.root) == 0);
    CHECK(packed.end == plain.end);
    CHECK(packed.globals.size() == plain.globals.size());
    same_graph(plain.root, packed.root);
  }
}

namespace {
struct Both {
  std::shared_ptr<MappedFile> file;
  Heap plain_heap, packed_heap;
  Unpickled plain, packed;
};
// data.pkl of a torch.save zip, unpickled as it is and with packing.
std::unique_ptr<Both> both(const std::string& name) {
  auto r = std::make_unique<Both>();
  r->file = MappedFile::open((test::testdata() / name).string());
  const ZipReader zip(r->file->view(), Limits{});
  const ZipEntry* pkl = nullptr;
  for (const ZipEntry& e : zip.entries())
    if (e.name.size() >= 9 && e.name.substr(e.name.size() - 9) == "/data.pkl") pkl = &e;
  REQUIRE(pkl);
  const ByteView bytes = zip.stored(*pkl);
  r->plain = unpickle(bytes, 0, r->plain_heap, Limits{});
  r->packed = unpickle(bytes, 0, r->packed_heap, Limits{}, nullptr, false, nullptr, /*pack=*/true);
  return r;
}
// The state dicts under `v` (OrderedDicts with a `_metadata` state in the plain graph), in pickle order.
void state_dicts(const Value* v, std::vector<const Value*>& out, int depth = 0) {
  if (!v || depth > 16) return;
  if (v->kind == PKind::Object && v->qualified() == "collections.OrderedDict" && v->state() && v->state()->get("_metadata"))
    out.push_back(v);
  for (size_t k = 1; k < v->pairs().size(); k += 2) state_dicts(v->pairs()[k], out, depth + 1);
}
}  // namespace

TEST_CASE("pickle: packing skims a state dict's _metadata, and reads it in full where the pickle uses it") {
  struct Case {
    const char* name;
    size_t dicts;  // state dicts in the file
    bool skim;  // their _metadata skimmed (else read in full)
    bool repacked;  // read again unpacked (a version dict fetched from the memo)
  };
  for (const Case& c : {Case{"metadata/refetch_str.pt", 1, true, false}, Case{"metadata/two.pt", 2, true, false},
                        Case{"metadata/protocol_4.pt", 1, true, false}, Case{"metadata/odd_metadata.pt", 1, false, false},
                        Case{"metadata/refetch_dict.pt", 1, false, true}, Case{"t26/plain_state_dict.pt", 1, true, false}}) {
    const std::string name = c.name;
    CAPTURE(name);
    const auto r = both(name);
    same_graph(r->plain.root, r->packed.root);
    CHECK(r->packed.end == r->plain.end);
    std::vector<const Value*> plain_sds, packed_sds;
    state_dicts(r->plain.root, plain_sds);
    REQUIRE(plain_sds.size() == c.dicts);
    // the same walk over the packed graph, by position
    for (const Value* sd : plain_sds) {
      const Value* found = nullptr;
      std::vector<const Value*> todo{r->packed.root};
      while (!todo.empty() && !found) {
        const Value* x = todo.back();
        todo.pop_back();
        if (x->offset == sd->offset && x->kind == PKind::Object) found = x;
        for (size_t k = 1; k < x->pairs().size(); k += 2) todo.push_back(x->pairs()[k]);
      }
      REQUIRE(found);
      REQUIRE(found->state());
      CHECK(found->state()->kids().empty() == c.skim);
      CHECK((found->state()->get("_metadata") != nullptr) == !c.skim);
    }
    CHECK((packed_count(r->packed.root) == 0) == c.repacked);
    // every global used as Python's unpickler would use it (the OrderedDict called and built)
    REQUIRE(r->packed.globals.size() == r->plain.globals.size());
    for (size_t k = 0; k < r->plain.globals.size(); ++k) {
      const GlobalRef& a = r->plain.globals[k];
      const GlobalRef& b = r->packed.globals[k];
      CHECK(a.module == b.module);
      CHECK(a.name == b.name);
      CHECK(a.use == b.use);
      CHECK(a.use_offset == b.use_offset);
      CHECK(std::string(a.use_opcode ? a.use_opcode : "") == std::string(b.use_opcode ? b.use_opcode : ""));
    }
  }
  // The strings fetched again after the skim are made where their opcodes are, with their text.
  const auto r = both("metadata/refetch_str.pt");
  const Value* prefix = r->packed.root->get("prefix");
  const Value* key = r->packed.root->get("key");
  REQUIRE(prefix);
  REQUIRE(key);
  CHECK(prefix->str().empty());
  CHECK(key->str() == "version");
  CHECK(prefix->offset == r->plain.root->get("prefix")->offset);
  CHECK(key->offset == r->plain.root->get("key")->offset);
}

TEST_CASE("pickle: hostile bytes in a skimmed _metadata give what reading it in full gives") {
  // Each byte from the state's EMPTY_DICT on replaced by opcodes and lengths the skim reads, and the pickle
  // cut there: a packed run fails with the plain run's message and offset, or makes the same graph.
  for (const char* name : {"metadata/refetch_str.pt", "metadata/protocol_4.pt"}) {
    CAPTURE(std::string(name));
    const auto f = MappedFile::open((test::testdata() / name).string());
    const ZipReader zip(f->view(), Limits{});
    std::string pkl;
    for (const ZipEntry& e : zip.entries())
      if (e.name.size() >= 9 && e.name.substr(e.name.size() - 9) == "/data.pkl") pkl = std::string(zip.stored(e).str(0, e.compressed_size));
    const size_t from = pkl.find("_metadata");
    REQUIRE(from != std::string::npos);
    std::vector<std::shared_ptr<MappedFile>> kept;  // the values view the bytes
    auto outcome = [&](const std::string& bytes, bool pack, Heap& heap, Unpickled& u) -> std::string {
      auto m = kept.emplace_back(MappedFile::from_memory(bytes, "mem.pkl"));
      try {
        u = unpickle(m->view(), 0, heap, Limits{}, nullptr, false, nullptr, pack);
      } catch (const InputError& e) { return e.render(); }
      return "";
    };
    size_t runs = 0, failed = 0;
    for (size_t at = from - 8; at < pkl.size(); ++at) {
      std::vector<std::string> variants{pkl.substr(0, at)};
      for (const char b : {'\0', 'h', 'q', '}', 'u', 's', 'b', 'R', '(', 'K', '\x8c', '\xff', '\x95'}) {
        std::string v = pkl;
        v[at] = b;
        variants.push_back(std::move(v));
      }
      for (const std::string& v : variants) {
        Heap ph, kh;
        Unpickled pu, ku;
        const std::string plain = outcome(v, false, ph, pu);
        const std::string packed = outcome(v, true, kh, ku);
        ++runs;
        REQUIRE(plain == packed);
        if (!plain.empty()) {
          ++failed;
          continue;
        }
        same_graph(pu.root, ku.root);
        REQUIRE(pu.globals.size() == ku.globals.size());
        for (size_t k = 0; k < pu.globals.size(); ++k) CHECK(pu.globals[k].use == ku.globals[k].use);
        kept.clear();
      }
    }
    MESSAGE(runs << " variants, " << failed << " refused");
    CHECK(failed > 0);
    CHECK(failed < runs);
  }
}

TEST_CASE("pickle: limits met inside a skimmed _metadata fail where reading it in full fails") {
  // metadata/two.pt: two state dicts, 61 memo puts, 485 opcodes; each limit swept across the values where
  // the skim's part of the pickle crosses it.
  const auto f = MappedFile::open((test::testdata() / "metadata/two.pt").string());
  const ZipReader zip(f->view(), Limits{});
  std::string pkl;
  for (const ZipEntry& e : zip.entries())
    if (e.name.size() >= 9 && e.name.substr(e.name.size() - 9) == "/data.pkl") pkl = std::string(zip.stored(e).str(0, e.compressed_size));
  REQUIRE(!pkl.empty());
  auto m = MappedFile::from_memory(pkl, "mem.pkl");
  auto outcome = [&](const Limits& lim, bool pack, Heap& heap, Unpickled& u) -> std::string {
    try {
      u = unpickle(m->view(), 0, heap, lim, nullptr, false, nullptr, pack);
    } catch (const InputError& e) { return e.render(); }
    return "";
  };
  size_t runs = 0, refused = 0;
  auto same = [&](const Limits& lim) {
    Heap ph, kh;
    Unpickled pu, ku;
    const std::string plain = outcome(lim, false, ph, pu), packed = outcome(lim, true, kh, ku);
    ++runs;
    CHECK(plain == packed);
    if (!plain.empty()) ++refused;
    else if (packed.empty()) same_graph(pu.root, ku.root);
  };
  for (uint64_t n = 1; n <= 500; ++n) {
    Limits lim;
    lim.pickle_ops = n;
    same(lim);
  }
  for (uint64_t n = 1; n <= 70; ++n) {
    Limits lim;
    lim.memo_entries = n;
    same(lim);
  }
  for (uint64_t n = 1; n <= 8; ++n) {
    Limits lim;
    lim.pickle_depth = n;
    same(lim);
  }
  for (uint64_t n = 0; n <= 12; ++n) {
    Limits lim;
    lim.string_bytes = n;
    same(lim);
  }
  MESSAGE(runs << " limits, " << refused << " refused");
  CHECK(refused > 0);
  CHECK(refused < runs);
}

TEST_CASE("pickle: a packed argument fetched again from the memo runs the pickle unpacked") {
  // {'a': rebuild(pid('storage', FloatStorage, '0', 'cpu', 4), 0, (2, 2), (2, 1), False, OrderedDict()),
  //  'b': rebuild(the same storage by memo, ...), 'c': <the first tensor's size tuple, by memo>}
  // (hex escapes end where a literal ends: the pieces keep "\x00" "a" from reading as "\x00a")
  const std::string head =
      B("\x80\x02}q\x00(X\x01\x00\x00\x00" "aq\x01" "ctorch._utils\n_rebuild_tensor_v2\nq\x02" "((X\x07\x00\x00\x00" "storageq\x03"
        "ctorch\nFloatStorage\nq\x04X\x01\x00\x00\x00" "0q\x05X\x03\x00\x00\x00" "cpuq\x06K\x04tq\x07QK\x00K\x02K\x02\x86q\x08"
        "K\x02K\x01\x86q\x09\x89" "ccollections\nOrderedDict\nq\x0a)Rq\x0btq\x0cRq\x0d"
        "X\x01\x00\x00\x00" "bq\x0eh\x02((h\x03h\x04h\x05h\x06K\x04tq\x0fQK\x00K\x02K\x02\x86q\x10K\x02K\x01\x86q\x11\x89h\x0a)Rq\x12tq\x13Rq\x14");
  const std::string refetch = head + B("X\x01\x00\x00\x00" "ch\x08u.");
  const std::string plain_end = head + B("u.");
  for (const std::string* bytes : {&plain_end, &refetch}) {
    auto f = MappedFile::from_memory(*bytes, "mem.pkl");
    Heap plain_heap, packed_heap;
    const Unpickled plain = unpickle(f->view(), 0, plain_heap, Limits{});
    const Unpickled packed = unpickle(f->view(), 0, packed_heap, Limits{}, nullptr, false, nullptr, true);
    same_graph(plain.root, packed.root);
    const Value* a = packed.root->get("a");
    const Value* b = packed.root->get("b");
    REQUIRE(a);
    REQUIRE(b);
    if (bytes == &plain_end) {
      // Both packed; the second one's storage key, the class and the 'storage' word came from the memo, where
      // the first pack left copies of them.
      CHECK(packed_count(packed.root) == 2);
      REQUIRE(b->packed());
      CHECK(b->packed()->key->str() == "0");
      CHECK(b->packed()->cls->name() == "FloatStorage");
      CHECK(a->packed()->key == b->packed()->key);
    } else {
      CHECK(packed_count(packed.root) == 0);  // run again unpacked
      const Value* c = packed.root->get("c");
      REQUIRE(c);
      CHECK(c->kind == PKind::Tuple);
      CHECK(c->kids().size() == 2);
      CHECK(c == a->args()->kids()[2]);  // the same node as the tensor's sizes
    }
  }
}
