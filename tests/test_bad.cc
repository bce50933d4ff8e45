// The adversarial corpus (testdata/gen_bad.py): each file gives exactly its documented one-line error,
// and the ones that hide calls are reported as dangerous by the security scan.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "core/findings.h"
#include "core/reader.h"
#include "core/tar.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("bad corpus: exact errors and findings") {
  const auto dir = test::testdata() / "bad";
  const auto expected = test::read_json(dir / "expected.json");
  REQUIRE(expected.size() >= 15);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    CAPTURE(name);
    auto file = MappedFile::from_memory(test::read_file(dir / name), name);
    std::string error;
    try {
      (void)read_checkpoint(file);
    } catch (const InputError& e) { error = e.render(); }
    CHECK(error == it.value().value("error", ""));
    if (it.value().contains("check")) {
      const CheckResult r = run_checks(file, Limits{});
      bool found = false;
      for (const Finding& f : r.findings) found |= f.id == it.value()["check"].get<std::string>();  // C++20: string == json is ambiguous
      CHECK(found);
    }
  }
}

// Hostile tar checkpoints, cut from testdata/permissive/tar_state_dict.pt (members sys_info at 0x0, pickle
// at 0x400, tensors at 0x800, storages at 0xc00): one-line errors, no crash, and where Python's tarfile
// reads on, ckpt reads on too.
namespace {

std::string tar_error(const std::string& bytes, const Limits& limits = Limits{}) {
  try {
    (void)read_checkpoint(MappedFile::from_memory(bytes, "t.pt"), limits);
  } catch (const InputError& e) { return e.render(); }
  return "";
}

void set_checksum(std::string& b, size_t at) {
  for (size_t k = 148; k < 156; ++k) b[at + k] = ' ';
  unsigned sum = 0;
  for (size_t k = 0; k < 512; ++k) sum += static_cast<uint8_t>(b[at + k]);
  const std::string field = fmt::format("{:06o}", sum) + std::string(1, '\0') + " ";
  b.replace(at + 148, 8, field);
}

void set_field(std::string& b, size_t at, size_t off, const std::string& value) {
  b.replace(at + off, value.size(), value);
  set_checksum(b, at);
}

}  // namespace

TEST_CASE("bad tar: hostile headers give one-line errors") {
  const std::string good = test::read_file(test::testdata() / "permissive" / "tar_state_dict.pt");
  REQUIRE(tar_error(good) == "");
  const size_t storages = good.find(std::string("storages\0", 9));
  REQUIRE(storages == 0xc00);
  auto one_line = [](const std::string& e) {
    CAPTURE(e);
    CHECK(!e.empty());
    CHECK(e.find('\n') == std::string::npos);
  };

  SUBCASE("truncated inside a later header: the archive ends there, so a member is missing") {
    const std::string e = tar_error(good.substr(0, storages + 100));
    one_line(e);
    CHECK(e == "t.pt: +0x0: tar checkpoint (torch <= 0.1.9) has no 'storages' member");
  }
  SUBCASE("truncated inside the first header: not a tar") {
    const std::string e = tar_error(good.substr(0, 300));
    one_line(e);
    CHECK(e.find("not a PyTorch checkpoint") != std::string::npos);
  }
  SUBCASE("size past the end of the file") {
    std::string b = good;
    set_field(b, storages, 124, "77777777777");
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("t.pt: +0xc7c: tar member 'storages' at 0xc00: its 8589934591 bytes") == 0);
    CHECK(e.find("run past the end of the 10240-byte file") != std::string::npos);
  }
  SUBCASE("negative size (base-256, 0xff)") {
    std::string b = good;
    set_field(b, storages, 124, std::string(11, '\xff') + "\xfe");
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e == "t.pt: +0xc7c: tar member 'storages' has a negative size -2");
  }
  SUBCASE("negative size (octal text)") {
    std::string b = good;
    set_field(b, storages, 124, std::string("-1\0", 3));
    CHECK(tar_error(b) == "t.pt: +0xc7c: tar member 'storages' has a negative size -1");
  }
  SUBCASE("huge size (base-256, 88 bits)") {
    std::string b = good;
    set_field(b, storages, 124, "\x80" + std::string(11, '\xff'));
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("run past the end") != std::string::npos);
  }
  SUBCASE("bad checksum on a later header: tarfile ends the archive there") {
    std::string b = good;
    b[storages + 148] = '1';
    CHECK(tar_error(b) == "t.pt: +0x0: tar checkpoint (torch <= 0.1.9) has no 'storages' member");
  }
  SUBCASE("bad checksum on the first header: not a tar (nor anything else)") {
    std::string b = good;
    b[148] = '1';
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("not a PyTorch checkpoint") != std::string::npos);
    CHECK(!looks_like_tar(MappedFile::from_memory(b, "t.pt")->view()));
  }
  SUBCASE("a number field that is not octal makes the header invalid") {
    std::string b = good;
    set_field(b, storages, 100, "0000x44");
    CHECK(tar_error(b) == "t.pt: +0x0: tar checkpoint (torch <= 0.1.9) has no 'storages' member");
  }
  SUBCASE("a name without a NUL is 100 bytes long, and the rest still reads") {
    std::string b = good;
    set_field(b, 0, 0, std::string(100, 'n'));
    CHECK(tar_error(b) == "");
    const auto members = tar_members(MappedFile::from_memory(b, "t.pt")->view());
    REQUIRE(members.size() == 4);
    CHECK(members[0].name == std::string(100, 'n'));
    CHECK(members[3].name == "storages");
    CHECK(members[3].data == storages + 512);
  }
  SUBCASE("a GNU long-name record followed by garbage") {
    std::string b = good;
    set_field(b, 0, 156, "L");  // sys_info's header becomes a long-name record for the next header...
    b.replace(0x400, 8, "garbage!");  // ...which no longer has a valid checksum
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("tar header after the GNU / PAX record at 0x0 has checksum") != std::string::npos);
  }
  SUBCASE("a PAX record of length 0") {
    std::string b = good;
    set_field(b, 0, 156, "x");
    b.replace(0x200, 6, "0 a=b\n");
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("PAX record of length 0") != std::string::npos);
  }
  SUBCASE("a PAX size past the end") {
    std::string b = good;
    set_field(b, 0, 156, "x");
    const std::string rec = "20 size=99999999999\n";
    b.replace(0x200, rec.size(), rec);
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("run past the end") != std::string::npos);
  }
  SUBCASE("a PAX size past 2^64 stays huge (no wrap to a small size)") {
    std::string b = good;
    set_field(b, 0, 156, "x");
    const std::string rec = "29 size=18446744073709551690\n";  // 2^64 + 74
    b.replace(0x200, rec.size(), rec);
    const std::string e = tar_error(b);
    one_line(e);
    CHECK(e.find("run past the end") != std::string::npos);
  }
  SUBCASE("more members than the limit") {
    Limits lim;
    lim.zip_entries = 3;
    CHECK(tar_error(good, lim) == "t.pt: +0xc00: more than 3 tar members (limit zip-entries)");
  }
  SUBCASE("storages is a directory") {
    std::string b = good;
    set_field(b, storages, 156, "5");
    CHECK(tar_error(b) == "t.pt: +0xc00: tar checkpoint member 'storages' is not a file (type '5')");
  }
}

TEST_CASE("bad tar: hostile members of a torch tar checkpoint") {
  const std::string good = test::read_file(test::testdata() / "permissive" / "tar_state_dict.pt");
  const size_t tensors = 0x800, storages = 0xc00;
  SUBCASE("a storage count far past the limit") {
    std::string b = good;
    // storages opens with pickle(n): PROTO 2, BININT1 n, STOP
    REQUIRE(b.substr(storages + 512, 4) == std::string("\x80\x02K\x05", 4));
    b.replace(storages + 512 + 2, 2, "J\xff");  // BININT 0x??????ff: n is now read from the next bytes
    const std::string e = tar_error(b);
    CAPTURE(e);
    CHECK(!e.empty());
    CHECK(e.find('\n') == std::string::npos);
  }
  SUBCASE("a tensor with a negative number of dimensions") {
    std::string b = good;
    const size_t ndim = b.find(std::string("\x02\x00\x00\x00\x00\x00\x00\x00", 8), tensors + 512);  // fc.weight: 2 dims
    REQUIRE(ndim != std::string::npos);
    b.replace(ndim, 4, std::string("\xff\xff\xff\xff", 4));
    const std::string e = tar_error(b);
    CHECK(e.find("has -1 dimensions") != std::string::npos);
  }
  SUBCASE("a tensor that reaches past its storage") {
    std::string b = good;
    const size_t ndim = b.find(std::string("\x02\x00\x00\x00\x00\x00\x00\x00", 8), tensors + 512);
    b[ndim + 8] = 100;  // fc.weight's first size: 3 -> 100
    const std::string e = tar_error(b);
    CHECK(e.find("tensors+0x") != std::string::npos);
    CHECK(e.find("does not fit its storage") != std::string::npos);
  }
}

// A rebuild call with fewer (or more) arguments than torch's function takes: Python raises TypeError
// ("_rebuild_meta_tensor_no_storage() missing 1 required positional argument: 'requires_grad'", torch 2.15's
// pickle.loads of the first pickle below), so ckpt refuses it too; with the fourth it is a meta tensor.
TEST_CASE("bad pickle: a rebuild call short of torch's arguments") {
  const std::string head = "\x80\x02" "ctorch._utils\n_rebuild_meta_tensor_no_storage\n(ctorch\nfloat32\n(K\x02t(K\x01t";
  std::string error;
  try {
    (void)read_checkpoint(MappedFile::from_memory(head + "tR.", "meta3.pkl"));
  } catch (const InputError& e) { error = e.render(); }
  CHECK(error == "meta3.pkl: +0x49: torch._utils._rebuild_meta_tensor_no_storage for '' has 3 arguments, expected at least 4");
  const Checkpoint ck = read_checkpoint(MappedFile::from_memory(head + "\x89tR.", "meta4.pkl"));
  REQUIRE(ck.tensors.size() == 1);
  CHECK(ck.tensors[0].state == TensorState::Meta);
  // One too many: "_rebuild_meta_tensor_no_storage() takes 4 positional arguments but 5 were given".
  error.clear();
  try {
    (void)read_checkpoint(MappedFile::from_memory(head + "\x89NtR.", "meta5.pkl"));
  } catch (const InputError& e) { error = e.render(); }
  CHECK(error == "meta5.pkl: +0x4b: torch._utils._rebuild_meta_tensor_no_storage for '' has 5 arguments, expected at most 4");
}

// A dict whose pickle sets a key twice (Python's pickler never writes that; SETITEMS can): Python keeps one
// entry, where the key came first, with the last value. torch 2.15's pickle.loads of the two pickles below:
// {'a': size (3,), 'b': size (2,)} and {'a': 5}.
TEST_CASE("bad pickle: a key set twice is one entry with the last value, as in Python") {
  const std::string m2 = "ctorch._utils\n_rebuild_meta_tensor_no_storage\n(ctorch\nfloat32\n(K\x02t(K\x01t\x89tR";
  const std::string m3 = "ctorch._utils\n_rebuild_meta_tensor_no_storage\n(ctorch\nfloat32\n(K\x03t(K\x01t\x89tR";
  auto key = [](char c) { return std::string("X\x01\0\0\0", 5) + c; };
  const Checkpoint ck = read_checkpoint(
      MappedFile::from_memory("\x80\x02}(" + key('a') + m2 + key('b') + m2 + key('a') + m3 + "u.", "twice.pkl"));
  REQUIRE(ck.tensors.size() == 2);
  CHECK(ck.tensors[0].name == "a");
  CHECK(std::vector<int64_t>(ck.tensors[0].shape.begin(), ck.tensors[0].shape.end()) == std::vector<int64_t>{3});
  CHECK(ck.tensors[1].name == "b");
  CHECK(std::vector<int64_t>(ck.tensors[1].shape.begin(), ck.tensors[1].shape.end()) == std::vector<int64_t>{2});
  const Checkpoint other = read_checkpoint(MappedFile::from_memory("\x80\x02}(" + key('a') + m2 + key('a') + "K\x05u.", "int.pkl"));
  CHECK(other.tensors.empty());
}

// A parameter whose data is the parameter itself (through _rebuild_from_type_v2's mutable argument
// list): interpreting it must stop, not recurse until the stack runs out.
TEST_CASE("bad pickle: a tensor rebuilt from itself") {
  // PROTO 2, GLOBAL _rebuild_from_type_v2, MARK, GLOBAL _rebuild_parameter, GLOBAL Parameter, EMPTY_LIST,
  // BINPUT 0, EMPTY_DICT, TUPLE, REDUCE, BINPUT 1, BINGET 0, BINGET 1, APPEND, NEWFALSE, APPEND, EMPTY_DICT,
  // APPEND, POP, STOP: _rebuild_parameter(p, False, {}) with p itself
  const std::string pkl = std::string("\x80\x02", 2) +
                          "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_parameter\n"
                          "ctorch.nn.parameter\nParameter\n]q" +
                          std::string(1, '\0') + "}tRq\001h" + std::string(1, '\0') + "h\001a\211a}a0.";
  std::string error;
  try {
    (void)read_checkpoint(MappedFile::from_memory(pkl, "loop.pkl"));
  } catch (const InputError& e) { error = e.render(); }
  CHECK(error.find("is rebuilt from tensors nested more than 32 deep") != std::string::npos);
}
