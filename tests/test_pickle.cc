// The inert pickle VM against Python's own pickle module (testdata/gen_pickles.py), plus the limits.
#include <doctest/doctest.h>

#include <string>

#include "core/mapped_file.h"
#include "core/pickle.h"
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
    CHECK(u.root->s == "abcdefghij");
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
