// The zip reader on archives written by torch (miniz), and on edited copies of them.
#include <doctest/doctest.h>

#include <cstring>

#include "core/mapped_file.h"
#include "core/zip.h"
#include "fixtures.h"

using namespace ckpt;

namespace {
std::string zip_error(const std::string& bytes) {
  try {
    auto f = MappedFile::from_memory(bytes, "a.pt");
    ZipReader z(f->view(), Limits{});
    for (const auto& e : z.entries()) (void)z.data_offset(e);
  } catch (const InputError& e) { return e.render(); }
  return "";
}
}  // namespace

TEST_CASE("zip: torch.save archives list every record from the central directory") {
  auto f = MappedFile::open((test::testdata() / "t113" / "plain_state_dict.pt").string());
  ZipReader z(f->view(), Limits{});
  REQUIRE(z.find("plain_state_dict/data.pkl") != nullptr);
  REQUIRE(z.find("plain_state_dict/version") != nullptr);
  CHECK(z.stored(*z.find("plain_state_dict/version")).str(0, 2) == "3\n");
  for (const auto& e : z.entries()) {
    CAPTURE(e.name);
    CHECK(e.method == 0);
    CHECK(z.data_offset(e) % 64 == 0);  // torch aligns tensor data to 64 bytes
  }
}

TEST_CASE("zip: torch 2.x archives carry a zip64 end record and still read") {
  auto f = MappedFile::open((test::testdata() / "t26" / "plain_state_dict.pt").string());
  ZipReader z(f->view(), Limits{});
  CHECK(z.find("plain_state_dict/byteorder") != nullptr);
}

TEST_CASE("zip: lies in the directory are errors") {
  const std::string good = test::read_file(test::testdata() / "t113" / "plain_dict.pt");
  REQUIRE(zip_error(good) == "");
  const size_t eocd = good.rfind("PK\x05\x06");
  REQUIRE(eocd != std::string::npos);
  // miniz writes a zip64 end record (which readers must prefer) even for small files.
  const size_t z64 = good.rfind("PK\x06\x06");
  REQUIRE(z64 != std::string::npos);
  auto put64 = [](std::string& b, size_t at, uint64_t v) {
    for (int k = 0; k < 8; ++k) b[at + k] = static_cast<char>(v >> (8 * k));
  };
  SUBCASE("central directory offset past the end") {
    std::string b = good;
    put64(b, z64 + 48, 0x7fffffff);
    CHECK(zip_error(b).find("central directory [0x7fffffff") != std::string::npos);
  }
  SUBCASE("entry count larger than the directory") {
    std::string b = good;
    put64(b, z64 + 32, 1ull << 40);
    CHECK(zip_error(b).find("exceed the limit") != std::string::npos);
    put64(b, z64 + 32, 100000);
    CHECK(zip_error(b).find("zip entries cannot fit") != std::string::npos);
  }
  SUBCASE("zip64 locator pointing after itself") {
    std::string b = good;
    put64(b, eocd - 20 + 8, eocd);
    CHECK(zip_error(b).find("zip64 locator points to") != std::string::npos);
  }
  SUBCASE("local name differs from central name: read past, as torch's miniz does") {
    std::string b = good;
    const size_t local = b.find("plain_dict/data.pkl");
    b[local] = 'P';
    CHECK(zip_error(b).empty());
    auto f0 = MappedFile::from_memory(good, "a.pt"), f = MappedFile::from_memory(b, "a.pt");
    ZipReader z0(f0->view(), Limits{}), z(f->view(), Limits{});
    const ZipEntry *e0 = z0.find("plain_dict/data.pkl"), *e = z.find("plain_dict/data.pkl");
    REQUIRE(e0 != nullptr);
    REQUIRE(e != nullptr);
    CHECK(z.data_offset(*e) == z0.data_offset(*e0));
  }
  SUBCASE("no end record") {
    CHECK(zip_error(good.substr(0, eocd)).find("no zip end-of-central-directory record") != std::string::npos);
  }
}

// What torch.load accepts, as miniz reads it (testdata/gen_permissive.py holds torch's own answers).
namespace {
std::string stored_text(const ZipReader& z, const ZipEntry* e) {
  return e ? std::string(z.stored(*e).str(0, e->compressed_size)) : "-";
}
}  // namespace

TEST_CASE("zip: bytes after the end record, as far back as miniz looks") {
  const std::string good = test::read_file(test::testdata() / "t113" / "plain_dict.pt");
  REQUIRE(good.size() < 8189);  // small: miniz's second step back would wrap below offset 0
  CHECK(zip_error(good + std::string(1, '\0')) == "");
  CHECK(zip_error(good + std::string(4074, 'x')) == "");  // the end record is still in the last 4 KiB
  CHECK(zip_error(good + std::string(4075, 'x')).find("no zip end-of-central-directory record") != std::string::npos);
  // A larger file: miniz steps back 4093 bytes at a time, up to 69584 bytes from the end.
  const std::string padded = good + std::string(69584 - 22, '\0');
  CHECK(zip_error(padded) == "");
  CHECK(zip_error(padded + std::string(1, '\0')).find("no zip end-of-central-directory record") != std::string::npos);
  // The last signature wins: an empty end record appended is read as an empty archive.
  std::string empty_end("PK\x05\x06", 4);
  empty_end += std::string(18, '\0');
  auto f = MappedFile::from_memory(good + empty_end, "a.pt");
  CHECK(ZipReader(f->view(), Limits{}).entries().empty());
}

TEST_CASE("zip: repeated names stay listed, and find() returns the copy miniz finds by binary search") {
  const auto dir = test::testdata() / "permissive";
  // data/0 copies hold 0.., 10.., 100.., 1000..: which one torch read is in expected.json
  struct Case {
    const char* file;
    size_t entries;
    float first_value;  // of the data/0 copy find() returns
  };
  for (const Case& c : {Case{"zip_dup_data_2.pt", 4, 0}, Case{"zip_dup_data_2_first.pt", 4, 0}, Case{"zip_dup_data_3.pt", 5, 10},
                        Case{"zip_dup_data_4.pt", 6, 0}}) {
    CAPTURE(c.file);
    auto f = MappedFile::open((dir / c.file).string());
    ZipReader z(f->view(), Limits{});
    CHECK(z.entries().size() == c.entries);
    const ZipEntry* e = z.find("archive/data/0");
    REQUIRE(e != nullptr);
    float v;
    std::memcpy(&v, z.stored(*e).data(), 4);
    CHECK(v == c.first_value);
  }
  auto f = MappedFile::open((dir / "zip_dup_pkl_2_first.pt").string());
  ZipReader z(f->view(), Limits{});
  // two data.pkl records first and second in the directory: miniz finds the second
  CHECK(z.find("archive/data.pkl") == &z.entries()[1]);
}

TEST_CASE("zip: find() ignores ASCII case, as miniz does") {
  auto f = MappedFile::open((test::testdata() / "permissive" / "zip_names_case.pt").string());
  ZipReader z(f->view(), Limits{});
  CHECK(z.find("archive/data/0") == z.find("ARCHIVE/DATA/0"));
  CHECK(z.find("archive/data/0") != nullptr);
  CHECK(stored_text(z, z.find("archive/version")) == "3\n");
  CHECK(z.find("archive/data/1") == nullptr);
  CHECK(z.find("archive/data") == nullptr);  // a prefix of a name is not the name
}
