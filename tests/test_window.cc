// The passes that read every byte (check --values, check --verify, diff --values) through bounded windows
// of a mapped file (PageWindow, mapped_file.h): with windows of a few bytes to a few MiB, on one thread
// or several, every count, CRC-32 and difference of a tensor spanning many windows, contiguous or
// strided, is the one a single pass over its bytes gives. The resident-memory bound itself is measured
// by bench/verify.sh (peak RSS of each command on a 3.1 GB file), not timed here.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/crc32.h"
#include "core/integrity.h"
#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/storage.h"
#include "core/value_diff.h"
#include "core/values.h"
#include "core/zip.h"
#include "fixtures.h"

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

// Windows from one element to more than the tensors: pieces of a few bytes, sizes that are no multiple
// of the element size, and the default (0).
constexpr uint64_t kWindows[] = {6, 100, 4096, 65536, 0};

fs::path scratch() {
  const fs::path dir = fs::path(CKPT_TEST_WORKDIR) / "window";
  fs::create_directories(dir);
  return dir;
}

// A safetensors file of 256 KiB of float32 (256 x 256, NaN and +-Inf sprinkled) and 3000 bfloat16.
fs::path write_big(const std::string& name, float bump) {
  const fs::path p = scratch() / name;
  std::string data;
  for (uint32_t i = 0; i < 256 * 256; ++i) {
    float v = static_cast<float>(i % 977) * 0.25f - 100.0f + (i % 5 == 0 ? bump : 0.0f);
    if (i % 1000 == 7) v = NAN;
    if (i % 4093 == 1) v = i % 2 ? INFINITY : -INFINITY;
    data.append(reinterpret_cast<const char*>(&v), 4);
  }
  for (uint32_t i = 0; i < 3000; ++i) {
    const uint16_t h = i % 301 == 0 ? 0x7fc0 : static_cast<uint16_t>(0x3f80 + i % 64);
    data.append(reinterpret_cast<const char*>(&h), 2);
  }
  const std::string header = R"({"big":{"dtype":"F32","shape":[256,256],"data_offsets":[0,262144]},)"
                             R"("half":{"dtype":"BF16","shape":[3000],"data_offsets":[262144,268144]}})";
  const uint64_t n = header.size();
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
  return p;
}

const Tensor& named(const Checkpoint& ck, const std::string& name) {
  for (const Tensor& t : ck.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  throw;
}

// Views of the 256 x 256 tensor's storage, each walked differently: as saved, transposed (one element
// per run, jumping 1 KiB), a slice of rows with an offset (runs of 200), every 61st element.
std::vector<Tensor> views(const Tensor& big) {
  std::vector<Tensor> out(4, big);
  out[1].name = "transposed";
  out[1].stride = {1, 256};
  out[2].name = "slice";
  out[2].shape = {100, 200};
  out[2].stride = {256, 1};
  out[2].offset = 3;
  out[2].numel = 100 * 200;
  out[3].name = "strided";
  out[3].shape = {1000};
  out[3].stride = {61};
  out[3].offset = 11;
  out[3].numel = 1000;
  for (Tensor& t : out) t.bytes = static_cast<uint64_t>(t.numel) * 4;
  return out;
}

}  // namespace

TEST_CASE("crc32: libdeflate's CRC-32 and the VPCLMULQDQ fold are zlib's, on the check value, odd sizes and joined pieces") {
  const std::string wide = crc32_wide() ? "yes" : "no (libdeflate alone)";
  MESSAGE("VPCLMULQDQ fold on this CPU: " << wide);
  const std::string check = "123456789";
  CHECK(crc32_update(0, reinterpret_cast<const uint8_t*>(check.data()), check.size()) == 0xCBF43926u);
  CHECK(crc32_portable(0, reinterpret_cast<const uint8_t*>(check.data()), check.size()) == 0xCBF43926u);
  CHECK(crc32_update(0, nullptr, 0) == 0);
  std::vector<uint8_t> buf(1 << 20);
  uint32_t x = 12345;
  for (uint8_t& b : buf) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t n : {size_t{1}, size_t{3}, size_t{15}, size_t{16}, size_t{17}, size_t{63}, size_t{255}, size_t{511}, size_t{512},
                   size_t{513}, size_t{639}, size_t{640}, size_t{767}, size_t{4097}, size_t{65535}, size_t{1000003}}) {
    for (size_t at : {size_t{0}, size_t{1}, size_t{7}}) {  // unaligned starts too
      CAPTURE(n);
      CAPTURE(at);
      const uint32_t want = static_cast<uint32_t>(crc32(0, buf.data() + at, static_cast<uInt>(n)));
      CHECK(crc32_update(0, buf.data() + at, n) == want);
      CHECK(crc32_portable(0, buf.data() + at, n) == want);
      CHECK(crc32_update(0x12345678u, buf.data() + at, n) ==
            static_cast<uint32_t>(crc32(0x12345678u, buf.data() + at, static_cast<uInt>(n))));
      const size_t half = n / 3;  // in two pieces, run on and joined
      CHECK(crc32_update(crc32_update(0, buf.data() + at, half), buf.data() + at + half, n - half) == want);
      CHECK(crc32_join(crc32_update(0, buf.data() + at, half), crc32_update(0, buf.data() + at + half, n - half), n - half) ==
            want);
    }
  }
}

TEST_CASE("check --values: NaN/Inf and CRC-32 through windows of any size equal a single pass, contiguous and strided") {
  const Checkpoint ck = read_checkpoint(write_big("values.safetensors", 0.0f).string());
  REQUIRE(ck.file->mapped());
  const StorageIndex index(ck);
  std::vector<Tensor> list = views(named(ck, "big"));
  list.push_back(named(ck, "half"));
  std::vector<const Tensor*> ptrs;
  std::vector<ValueStats> want_stats;
  std::vector<uint32_t> want_crc;
  for (const Tensor& t : list) {
    ptrs.push_back(&t);
    const Storage* s = index.find(t.storage);
    REQUIRE(s);
    checked_extent(ck, t, *s);
    const uint8_t* p = index.bytes(*s).data();
    want_stats.push_back(tensor_nonfinite(t, p));
    want_crc.push_back(tensor_crc32(t, p));
    // zlib over the elements gathered in row-major order: the CRC's truth, independent of crc32.cc
    std::string gathered;
    for_each_run(t, [&](uint64_t off, uint64_t len) { gathered.append(reinterpret_cast<const char*>(p) + off, len); });
    CHECK(want_crc.back() ==
          static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(gathered.data()), static_cast<uInt>(gathered.size()))));
  }
  CHECK(want_stats[0].nan == 66);
  CHECK(want_stats[0].inf == 17);
  CHECK(want_stats[1].nan == want_stats[0].nan);  // the transposed view holds the same elements
  CHECK(want_stats[4].nan == 10);
  ck.file->release(ck.file->view().address(), ck.file->size());
  for (uint64_t window : kWindows)
    for (unsigned threads : {1u, 3u}) {
      CAPTURE(window);
      CAPTURE(threads);
      const std::vector<TensorCheck> got = check_values(ck, index, ptrs, true, threads, nullptr, window);
      for (size_t k = 0; k < list.size(); ++k) {
        CAPTURE(list[k].name);
        CHECK(got[k].stats.nan == want_stats[k].nan);
        CHECK(got[k].stats.inf == want_stats[k].inf);
        REQUIRE(got[k].crc32.has_value());
        CHECK(*got[k].crc32 == want_crc[k]);
      }
    }
}

TEST_CASE("diff --values: pairs compared through windows of any size equal a single pass, contiguous and strided") {
  const Checkpoint a = read_checkpoint(write_big("a.safetensors", 0.0f).string());
  const Checkpoint b = read_checkpoint(write_big("b.safetensors", 0.125f).string());
  const StorageIndex ia(a), ib(b);
  const std::vector<Tensor> va = views(named(a, "big")), vb = views(named(b, "big"));
  const uint8_t* pa = ia.bytes(*ia.find(va[0].storage)).data();
  const uint8_t* pb = ib.bytes(*ib.find(vb[0].storage)).data();
  std::vector<ValuePair> pairs;
  for (size_t k = 0; k < va.size(); ++k) {
    pairs.push_back({&va[k], &vb[k], pa, pb, a.file.get(), b.file.get()});  // each view against B's
    pairs.push_back({&va[k], &va[k], pa, pa, a.file.get(), a.file.get()});  // and against itself
  }
  pairs.push_back({&va[1], &vb[0], pa, pb, a.file.get(), b.file.get()});  // transposed against contiguous
  ValueCompareOptions one;
  one.threads = 1;
  one.piece_bytes = UINT64_MAX;  // one item per pair
  one.window_bytes = UINT64_MAX / 2;  // one window: a single pass
  one.rtol = 1e-3;
  const std::vector<ValueDiff> want = compare_values(pairs, one);
  CHECK_FALSE(want[0].equal);
  CHECK(want[1].equal);
  CHECK(want[0].max_abs == 0.125);
  for (uint64_t window : kWindows)
    for (unsigned threads : {1u, 3u})
      for (uint64_t piece : {uint64_t{8} << 20, uint64_t{4000}}) {
        if (window < 8) continue;  // a release per element on each side: seconds, and nothing the 100-byte window misses
        if ((threads == 1) == (piece == 4000)) continue;  // one thread in one item per pair, three in small ones
        CAPTURE(window);
        CAPTURE(threads);
        CAPTURE(piece);
        ValueCompareOptions o = one;
        o.threads = threads;
        o.piece_bytes = piece;
        o.window_bytes = window;
        const std::vector<ValueDiff> got = compare_values(pairs, o);
        for (size_t k = 0; k < pairs.size(); ++k) {
          CAPTURE(k);
          CHECK(got[k].equal == want[k].equal);
          CHECK(got[k].within == want[k].within);
          CHECK(got[k].max_abs == want[k].max_abs);
          CHECK(got[k].max_rel == want[k].max_rel);
        }
      }
}

TEST_CASE("check --verify: CRC-32 of every member through windows of any size, and a changed byte found whatever the window") {
  const fs::path good = scratch() / "verify.pt", bad = scratch() / "verify_bad.pt";
  fs::copy_file(test::testdata() / "formats" / "diff_values" / "a.pt", good, fs::copy_options::overwrite_existing);
  std::string bytes = test::read_file(good);
  // one byte in the middle of the largest stored member
  const auto file = MappedFile::from_memory(bytes, "a.pt");
  const ZipReader zip(file->view(), Limits{});
  const ZipEntry* largest = nullptr;
  for (const ZipEntry& e : zip.entries())
    if (e.method == 0 && (!largest || e.compressed_size > largest->compressed_size)) largest = &e;
  REQUIRE(largest);
  REQUIRE(largest->compressed_size > 1000);
  bytes[zip.data_offset(*largest) + largest->compressed_size / 2] ^= 0x40;
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes;
  const Checkpoint ck_good = read_checkpoint(good.string()), ck_bad = read_checkpoint(bad.string());
  const ZipVerify want_good = verify_zip(ck_good, Limits{}, 1, UINT64_MAX / 2),
                  want_bad = verify_zip(ck_bad, Limits{}, 1, UINT64_MAX / 2);
  CHECK(want_good.findings.empty());
  REQUIRE(want_bad.findings.size() == 1);
  CHECK(want_bad.findings[0].message.find(std::string(largest->name)) != std::string::npos);
  for (uint64_t window : kWindows)
    for (unsigned threads : {1u, 3u}) {
      CAPTURE(window);
      CAPTURE(threads);
      const ZipVerify g = verify_zip(ck_good, Limits{}, threads, window), b = verify_zip(ck_bad, Limits{}, threads, window);
      CHECK(g.members == want_good.members);
      CHECK(g.bytes == want_good.bytes);
      CHECK(g.findings.empty());
      REQUIRE(b.findings.size() == 1);
      CHECK(b.findings[0].message == want_bad.findings[0].message);
    }
}

TEST_CASE("window: header reads and windows leave no page of the file mapped in") {
  const Checkpoint ck = read_checkpoint(write_big("resident.safetensors", 0.0f).string());
  const MappedFile& f = *ck.file;
  f.release(f.view().address(), f.size());
  // what mincore says is in the page cache is not what this process maps: compare through /proc instead
  auto mapped_kib = [&] {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    const auto lo = reinterpret_cast<uintptr_t>(f.view().address());
    bool in = false;
    uint64_t rss = 0;
    while (std::getline(smaps, line)) {
      const size_t dash = line.find('-');
      if (dash != std::string::npos && dash > 0 &&
          line.find_first_not_of("0123456789abcdef") == dash) {  // a mapping's first line
        in = std::stoull(line.substr(0, dash), nullptr, 16) == lo;
        continue;
      }
      if (in && line.rfind("Rss:", 0) == 0) rss = std::stoull(line.substr(4));
    }
    return rss;
  };
  uint64_t head = 0;
  f.copy_out(reinterpret_cast<uint8_t*>(&head), 8, 0);
  CHECK(head > 100);  // the safetensors header's length
  const HeaderReader r(f.view(), &f);
  CHECK(r.le<uint64_t>(0) == head);
  CHECK(r.str(9, 5) == "\"big\"");
  CHECK_THROWS_AS(r.le<uint32_t>(f.size() - 2), InputError);  // the view's own bounds error
  CHECK(mapped_kib() == 0);  // read with pread: nothing mapped in
  {
    PageWindow w(&f, 64 << 10);
    uint32_t crc = 0;
    for_each_window(w, f.view().address(), f.size(), 1, [&](const uint8_t* p, uint64_t n) { crc = crc32_update(crc, p, n); });
    w.drop();
    CHECK(crc == crc32_update(0, f.view().address(), f.size()));
  }
  f.release(f.view().address(), f.size());
  {
    PageWindow w(&f, 64 << 10);
    for_each_window(w, f.view().address(), f.size(), 1, [&](const uint8_t* p, uint64_t n) {
      volatile uint8_t sink = p[n - 1];
      (void)sink;
    });
    w.drop();
  }
  CHECK(mapped_kib() <= 8);  // at most the file's last, partial page
}
