// The streaming load (src/core/stream.cc) with the CPU sink, against PyTorch's values: every fixture with
// torch's CRC-32s and NaN/Inf counts (testdata/*/load_expected.json) through rings of one and of many
// slots, in place and staged, warm and cold; 100k tiny storages, a storage spanning many chunks with
// views and a tied alias (tests/stream/gen_stream.py, written by Debian's torch at test time); a file
// truncated under the load and sinks that fail, each stopping cleanly.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>

#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/render_report.h"
#include "core/storage.h"
#include "core/stream.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;
namespace fs = std::filesystem;

namespace {

struct Case {
  std::string file;
  json tensors;
};

std::vector<Case> load_cases() {
  std::vector<fs::path> lists = {test::testdata() / "load" / "expected.json"};
  for (const auto& d : {"t26", "t214", "t215", "pt2/t26", "pt2/t214"}) lists.push_back(test::testdata() / d / "load_expected.json");
  std::vector<Case> out;
  for (const fs::path& p : lists) {
    const json list = test::read_json(p);
    for (const json& c : list["loads"])
      if (!c["tensors"].empty()) out.push_back({c["file"].get<std::string>(), c["tensors"]});
  }
  return out;
}

std::vector<const Tensor*> all_tensors(const Checkpoint& ck) {
  std::vector<const Tensor*> v;
  for (const Tensor& t : ck.tensors) v.push_back(&t);
  return v;
}

// Streams `ck` into a CpuSink and checks every tensor named in `truth` (torch's values), and every
// storage's bytes against the file's. Returns the tensors checked.
size_t stream_and_check(const Checkpoint& ck, const json& truth, const StreamOptions& o, bool in_place,
                        StreamStats* stats_out = nullptr) {
  StorageIndex index(ck);
  const auto tensors = all_tensors(ck);
  StreamLoad load(ck, index, tensors);
  CpuSink sink(in_place);
  StreamStats stats;
  const auto values = load.run(sink, o, &stats);
  const auto crcs = load.readback_crc(sink, o, &stats);
  uint64_t counted = 0;
  for (uint64_t b : stats.bytes) counted += b;
  CHECK(counted == load.total_bytes());
  CHECK(sink.written() == load.total_bytes());  // each storage byte written once: tied and views share
  CHECK(sink.allocated() == load.storages().size());
  // the ring bounds the staging memory; buffers are allocated when first used (none when all is in place)
  CHECK(sink.staging_bytes() <= stats.slots * (stats.chunk_bytes + 8192));
  if (in_place) CHECK(stats.bytes[size_t(ReadPath::InPlace)] + stats.bytes[size_t(ReadPath::Memory)] == load.total_bytes());
  if (!in_place && load.total_bytes() > 0) CHECK(sink.staging_bytes() > 0);
  for (size_t id = 0; id < load.storages().size(); ++id) {
    const ByteView b = index.bytes(*load.storages()[id]);
    REQUIRE(sink.size(id) == b.size());
    CHECK(std::memcmp(sink.data(id), b.data(), b.size()) == 0);
  }
  size_t checked = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    if (!truth.contains(t.name)) continue;
    CAPTURE(t.name);
    const json& w = truth[t.name];
    REQUIRE(crcs[k].has_value());
    CHECK(*crcs[k] == w["crc32"].get<uint32_t>());
    CHECK(values[k].nan == w["nan"].get<uint64_t>());
    CHECK(values[k].inf == w["inf"].get<uint64_t>());
    ++checked;
  }
  if (stats_out) *stats_out = stats;
  return checked;
}

fs::path stream_fixtures() {
  static std::once_flag once;
  static fs::path dir = fs::path(CKPT_TEST_WORKDIR) / "stream";
  // ctest runs each test case as its own process, several at once: one writes the fixtures (under a lock,
  // into a fresh directory renamed into place), the others wait; none rewrites a file another has mapped.
  std::call_once(once, [] {
    fs::create_directories(dir.parent_path());
    const int lock = ::open((dir.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(lock >= 0);
    REQUIRE(::flock(lock, LOCK_EX) == 0);
    if (!(fs::exists(dir / "truth.json") && fs::exists(dir / "legacy.pt"))) {
      const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
      fs::remove_all(tmp);
      const std::string cmd = "/usr/bin/python3 " + std::string(CKPT_TEST_SOURCE_DIR) + "/stream/gen_stream.py " + tmp.string();
      REQUIRE(std::system(cmd.c_str()) == 0);
      fs::remove_all(dir);  // an older, incomplete set
      fs::rename(tmp, dir);
    }
    ::close(lock);  // releases the lock
  });
  return dir;
}

const json& stream_truth() {
  static json t = test::read_json(stream_fixtures() / "truth.json")["files"];
  return t;
}

fs::path copy_to_temp(const fs::path& from, const std::string& name) {
  fs::path dir = fs::path(CKPT_TEST_WORKDIR) / "stream_tmp";
  fs::create_directories(dir);
  fs::path to = dir / name;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  return to;
}

}  // namespace

TEST_CASE("stream: every fixture with torch's values, through rings of one and of many slots") {
  const auto cases = load_cases();
  REQUIRE(cases.size() > 70);
  struct Config {
    const char* what;
    uint64_t chunk, ring;
    unsigned threads;
    bool in_place, direct;
  };
  const Config configs[] = {
      {"one slot, one thread", 64 << 10, 64 << 10, 1, false, true},
      {"eight slots, four threads", 64 << 10, 512 << 10, 4, false, true},
      {"in place, three threads", 64 << 10, 384 << 10, 3, true, false},
      {"default ring", 16 << 20, 256 << 20, 0, false, true},
  };
  for (const Config& cf : configs) {
    CAPTURE(cf.what);
    StreamOptions o;
    o.chunk_bytes = cf.chunk;
    o.ring_bytes = cf.ring;
    o.threads = cf.threads;
    o.direct = cf.direct;
    o.in_place = cf.in_place;
    size_t tensors = 0;
    for (const Case& c : cases) {
      CAPTURE(c.file);
      const Checkpoint ck = read_checkpoint((test::testdata() / c.file).string());
      tensors += stream_and_check(ck, c.tensors, o, cf.in_place);
    }
    CHECK(tensors > 700);
  }
}

TEST_CASE("stream: a storage spanning many chunks, its transposed view, a slice and a tied alias") {
  const json& truth = stream_truth()["big.pt"];
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
  // 64 KiB chunks: one read each; 4 MiB chunks: from the page cache, read and counted 1 MiB at a time
  const std::pair<uint64_t, unsigned> configs[] = {{64 << 10, 1}, {64 << 10, 4}, {4 << 20, 2}};
  for (const auto& [chunk, threads] : configs) {
    std::ifstream(stream_fixtures() / "big.pt", std::ios::binary).ignore(std::numeric_limits<std::streamsize>::max());
    StreamOptions o;
    o.chunk_bytes = chunk;
    o.ring_bytes = 4 * chunk;
    o.threads = threads;
    StreamStats stats;
    CHECK(stream_and_check(ck, truth, o, false, &stats) == truth.size());
    StorageIndex index(ck);
    StreamLoad load(ck, index, all_tensors(ck));
    // big, big_t, tied and slice share one storage: allocated and written once
    CHECK(load.storages().size() == 4);
    uint64_t biggest = 0;
    for (const Storage* s : load.storages()) biggest = std::max(biggest, s->nbytes);
    CHECK(biggest == 1536 * 1024 * 4);
    CHECK(stats.chunks >= biggest / o.chunk_bytes);
    CHECK(stats.slots == 4);
    CHECK(stats.threads == threads);
    CHECK(stats.bytes[size_t(ReadPath::Cached)] == load.total_bytes());
  }
}

// A file served as a remote one is (src/remote's RemoteFile, whose ranges come over HTTP): the bytes in
// memory, every read_at counted.
namespace {
struct MemorySource : FileSource {
  std::string bytes;
  mutable std::atomic<uint64_t> reads{0}, read_bytes{0};
  const uint8_t* base() const override { return reinterpret_cast<const uint8_t*>(bytes.data()); }
  uint64_t size() const override { return bytes.size(); }
  void ensure(const uint8_t*, uint64_t) const override {}
  void read_at(uint8_t* dst, uint64_t len, uint64_t off) const override {
    REQUIRE(off + len <= bytes.size());
    std::memcpy(dst, base() + off, len);
    ++reads;
    read_bytes += len;
  }
  void release(uint64_t, uint64_t) const override {}
  bool present(uint64_t, uint64_t) const override { return false; }
};
}  // namespace

TEST_CASE("stream: a remote file streams through range reads, each chunk one read, with torch's values") {
  const json& truth = stream_truth()["big.pt"];
  auto src = std::make_shared<MemorySource>();
  std::ifstream in(stream_fixtures() / "big.pt", std::ios::binary);
  src->bytes.assign(std::istreambuf_iterator<char>(in), {});
  const Checkpoint ck = read_checkpoint(MappedFile::from_source(src, "https://example.invalid/big.pt"));
  REQUIRE(ck.file->remote());
  StreamOptions o;
  o.chunk_bytes = 64 << 10;
  o.ring_bytes = 4 * o.chunk_bytes;
  o.threads = 2;
  StreamStats stats;
  CHECK(stream_and_check(ck, truth, o, false, &stats) == truth.size());
  uint64_t total = 0;
  for (uint64_t b : stats.bytes) total += b;
  CHECK(stats.bytes[size_t(ReadPath::Remote)] == total);
  CHECK(src->reads == stats.chunks);
  CHECK(src->read_bytes == stats.file_bytes);
}

TEST_CASE("stream: unaligned storages packed in a chunk, read and counted a MiB at a time") {
  const json& truth = stream_truth()["legacy.pt"];
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "legacy.pt").string());
  REQUIRE(ck.format == Format::TorchLegacy);
  for (uint64_t chunk : {4ull << 20, 64ull << 10}) {
    std::ifstream(stream_fixtures() / "legacy.pt", std::ios::binary).ignore(std::numeric_limits<std::streamsize>::max());
    StreamOptions o;
    o.chunk_bytes = chunk;
    o.ring_bytes = 2 * chunk;
    StreamStats stats;
    CHECK(stream_and_check(ck, truth, o, false, &stats) == truth.size());
    if (chunk > (1u << 20)) CHECK(stats.chunks == 2);  // 5.5 MB of storages: a MiB boundary inside elements
  }
}

TEST_CASE("stream: 100,000 one-element storages share chunks") {
  const json& truth = stream_truth()["many.pt"];
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "many.pt").string());
  StreamOptions o;
  o.chunk_bytes = 1 << 20;
  o.ring_bytes = 8 << 20;
  o.threads = 2;
  StreamStats stats;
  CHECK(stream_and_check(ck, truth, o, false, &stats) == 100'000);
  // each storage is 4 bytes in a member of its own; a chunk holds hundreds of them
  CHECK(stats.chunks < 1000);
}

TEST_CASE("stream: chunks not in the page cache are read with O_DIRECT (or buffered where refused)") {
  const json& truth = stream_truth()["big.pt"];
  const fs::path copy = copy_to_temp(stream_fixtures() / "big.pt", "cold.pt");
  const Checkpoint ck = read_checkpoint(copy.string());
  StreamOptions o;
  o.chunk_bytes = 1 << 20;
  o.ring_bytes = 4 << 20;
  {  // cold: evict the file's pages (written, so sync first)
    const int fd = ::open(copy.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  StreamStats cold;
  CHECK(stream_and_check(ck, truth, o, false, &cold) == truth.size());
  // the first chunk holds data.pkl's pages, which reading the file's structure brought in
  const uint64_t not_cached = cold.bytes[size_t(ReadPath::Direct)] + cold.bytes[size_t(ReadPath::Buffered)];
  CHECK(not_cached >= 6u << 20);
  // warm now (the stream_and_check above read the storages back through the mapping)
  std::ifstream(copy, std::ios::binary).ignore(std::numeric_limits<std::streamsize>::max());
  StreamStats warm;
  CHECK(stream_and_check(ck, truth, o, false, &warm) == truth.size());
  CHECK(warm.bytes[size_t(ReadPath::Cached)] == warm.bytes[0] + warm.bytes[1] + warm.bytes[2]);
  CHECK(warm.bytes[size_t(ReadPath::Cached)] > 0);
}

namespace {

// A sink that runs `hook` before its n-th write (counting from 1), on whichever thread makes it.
struct HookSink : CpuSink {
  std::atomic<int> writes{0};
  int at;
  std::function<void()> hook;
  bool aborted = false;
  HookSink(int n, std::function<void()> h) : at(n), hook(std::move(h)) {}
  void write(unsigned slot, size_t storage, uint64_t offset, const uint8_t* src, uint64_t len) override {
    if (++writes == at) hook();
    CpuSink::write(slot, storage, offset, src, len);
  }
  void abort() noexcept override {
    aborted = true;
    CpuSink::abort();
  }
};

}  // namespace

TEST_CASE("stream: a file truncated under the load stops with file, member and offset") {
  const fs::path copy = copy_to_temp(stream_fixtures() / "big.pt", "truncated.pt");
  const Checkpoint ck = read_checkpoint(copy.string());
  StorageIndex index(ck);
  StreamLoad load(ck, index, all_tensors(ck));
  StreamOptions o;
  o.chunk_bytes = 64 << 10;
  o.ring_bytes = 64 << 10;  // one slot, one thread: the chunks come in file order
  HookSink sink(3, [&] { fs::resize_file(copy, 1 << 20); });
  try {
    (void)load.run(sink, o);
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string msg = e.render();
    CAPTURE(msg);
    CHECK(msg.find(copy.string() + ": big/data/") != std::string::npos);
    CHECK(msg.find("short read at file offset") != std::string::npos);
    CHECK(msg.find("the file has 1048576 bytes now") != std::string::npos);
    CHECK(e.has_offset());
  }
  CHECK(sink.aborted);
  CHECK(sink.allocated() == 0);
}

TEST_CASE("stream: a sink that fails stops the load, frees what it holds and joins every thread") {
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
  StorageIndex index(ck);
  StreamLoad load(ck, index, all_tensors(ck));
  for (unsigned threads : {1u, 4u}) {
    StreamOptions o;
    o.chunk_bytes = 64 << 10;
    o.ring_bytes = 1 << 20;
    o.threads = threads;
    HookSink sink(10, [] { throw std::runtime_error("out of device memory"); });
    CHECK_THROWS_WITH(load.run(sink, o), "out of device memory");
    CHECK(sink.aborted);
    CHECK(sink.allocated() == 0);
    CHECK(sink.writes < 10 + static_cast<int>(threads) * 2);  // the others stopped at their next chunk
  }
  struct FailAlloc : CpuSink {
    bool aborted = false;
    void allocate(size_t storage, uint64_t nbytes) override {
      if (storage == 2) throw std::runtime_error("CUDA out of memory");
      CpuSink::allocate(storage, nbytes);
    }
    void abort() noexcept override {
      aborted = true;
      CpuSink::abort();
    }
  } fa;
  CHECK_THROWS_WITH(load.run(fa, StreamOptions{}), "CUDA out of memory");
  CHECK(fa.aborted);
  CHECK(fa.allocated() == 0);
}

TEST_CASE("stream: tensors that are not materialized are left out, not counted") {
  const Checkpoint ck = read_checkpoint((test::testdata() / "load" / "nan_inf.pt").string());
  StorageIndex index(ck);
  std::vector<const Tensor*> list = all_tensors(ck);
  list.front() = nullptr;
  StreamLoad load(ck, index, list);
  CHECK(load.storage_of(0) == SIZE_MAX);
  CpuSink sink;
  const auto v = load.run(sink, StreamOptions{});
  CHECK(v[0].nan == 0);
  CHECK(v[0].inf == 0);
  CHECK_FALSE(load.readback_crc(sink, StreamOptions{})[0].has_value());
}

TEST_CASE("stream: the load report says how the bytes came, in text and JSON") {
  LoadReport r;
  r.file = "m.pt";
  r.device = "cuda:0";
  StreamStats st;
  st.bytes[size_t(ReadPath::Cached)] = 3000;
  st.bytes[size_t(ReadPath::Direct)] = 96;
  st.threads = 16;
  st.slots = 16;
  st.chunk_bytes = 16 << 20;
  st.chunks = 190;
  st.readback_bytes = 3096;
  r.stream = st;
  r.staging = "pinned";
  r.device_crc = true;
  const std::string text = render_load_text(r, false);
  CHECK(text.find("190       Chunks streamed: 16 thread(s), ring 268 MB (16 x 16.8 MB, pinned); read: 3.0 kB page-cache, "
                  "96 B direct\n") != std::string::npos);
  CHECK(text.find("CRC-32s of 3.1 kB read back from cuda:0") != std::string::npos);
  const json j = json::parse(load_json_text(r));
  CHECK(j["stream"]["read"]["direct"] == 96);
  CHECK(j["stream"]["read"]["page-cache"] == 3000);
  CHECK(j["stream"]["ring_bytes"] == 16ull * (16 << 20));
  CHECK(j["stream"]["checksums"] == "device");
  r.stream.reset();
  CHECK(json::parse(load_json_text(r))["stream"].is_null());
  CHECK(render_load_text(r, false).find("stream ") == std::string::npos);
}
