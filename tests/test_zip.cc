// The zip reader on archives written by torch (miniz), and on edited copies of them.
#include <doctest/doctest.h>

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
  SUBCASE("local name differs from central name") {
    std::string b = good;
    const size_t local = b.find("plain_dict/data.pkl");
    b[local] = 'P';
    CHECK(
        zip_error(b).find("local header name 'Plain_dict/data.pkl' differs from central directory name 'plain_dict/data.pkl'") !=
        std::string::npos);
  }
  SUBCASE("no end record") {
    CHECK(zip_error(good.substr(0, eocd)).find("no zip end-of-central-directory record") != std::string::npos);
  }
}
