// The streaming load (src/core/stream.cc) with the CPU sink, against PyTorch's values: every fixture with
// torch's CRC-32s (testdata/*/load_expected.json; the readers only read and copy, NaN / Inf are counted
// by LibTorch where the tensors land: tests/cli/cuda_load.py) through rings of one and of many slots,
// warm and cold; 100k tiny storages, a storage spanning many chunks with views and a tied alias
// (tests/stream/gen_stream.py, written by Debian's torch at test time); a file truncated under the load
// and sinks that fail, each stopping cleanly; the watchdog (core/watchdog.h) on a copy that never
// completes, an allocation that hangs and a ring that is never allocated; one ring for several loads.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
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
#include "core/watchdog.h"
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

// A ring of plain host memory that counts its allocations.
struct CountingMemory : StagingRing::Memory {
  std::shared_ptr<std::atomic<int>> allocs = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<StagingRing::Memory> host = host_ring_memory();
  uint8_t* alloc(uint64_t bytes) override {
    ++*allocs;
    return host->alloc(bytes);
  }
  void free(uint8_t* p) noexcept override { host->free(p); }
};

StagingRing make_ring(uint64_t chunk, uint64_t ring, unsigned threads = 0) {
  return StagingRing(ring_shape(RingOptions{chunk, ring, threads}), host_ring_memory());
}

// Streams `ck` into a CpuSink through `ring` and checks every tensor named in `truth` (torch's CRC-32s,
// read back through the ring), and every storage's bytes against the file's. Returns the tensors checked.
size_t stream_and_check(const Checkpoint& ck, const json& truth, StagingRing& ring, const StreamOptions& o = {},
                        StreamStats* stats_out = nullptr) {
  StorageIndex index(ck);
  const auto tensors = all_tensors(ck);
  StreamLoad load(ck, index, tensors);
  CpuSink sink;
  StreamStats stats;
  Watchdog dog(30);
  load.run(sink, ring, dog, o, &stats);
  const auto crcs = load.readback_crc(sink, ring, dog, o, &stats);
  uint64_t counted = 0;
  for (uint64_t b : stats.bytes) counted += b;
  CHECK(counted == load.total_bytes());
  CHECK(stats.bytes[size_t(ReadPath::InPlace)] == 0);
  CHECK(sink.written() == load.total_bytes());  // each storage byte written once: tied and views share
  CHECK(sink.allocated() == load.storages().size());
  CHECK(stats.slots == ring.shape().slots);
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
    bool direct;
  };
  const Config configs[] = {
      {"one slot, one thread", 64 << 10, 64 << 10, 1, true},
      {"eight slots, four threads", 64 << 10, 512 << 10, 4, true},
      {"six slots, three threads, no O_DIRECT", 64 << 10, 384 << 10, 3, false},
      {"default ring", 0, 0, 0, true},
  };
  for (const Config& cf : configs) {
    CAPTURE(cf.what);
    StagingRing ring = make_ring(cf.chunk, cf.ring, cf.threads);
    StreamOptions o;
    o.direct = cf.direct;
    size_t tensors = 0;
    for (const Case& c : cases) {
      CAPTURE(c.file);
      const Checkpoint ck = read_checkpoint((test::testdata() / c.file).string());
      tensors += stream_and_check(ck, c.tensors, ring, o);
    }
    CHECK(tensors > 700);
  }
}

TEST_CASE("stream: the default ring is two 4 MiB chunks per reader, at most 8 readers") {
  const RingShape d = ring_shape(RingOptions{});
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  CHECK(d.chunk == 4u << 20);
  CHECK(d.threads == std::min(8u, cores));
  CHECK(d.slots == 2 * d.threads);
  CHECK(d.slot_bytes() == d.chunk + 8192);
  const RingShape one = ring_shape(RingOptions{64 << 10, 64 << 10, 0});
  CHECK(one.slots == 1);
  CHECK(one.threads == 1);
  const RingShape odd = ring_shape(RingOptions{100000, 1 << 20, 3});
  CHECK(odd.chunk == 98304);  // rounded down to 4 KiB
  CHECK(odd.slots == 10);
  CHECK(odd.threads == 3);
}

TEST_CASE("stream: one ring, allocated once on its own thread, serves every load of a run") {
  auto memory = std::make_unique<CountingMemory>();
  auto allocs = memory->allocs;
  StagingRing ring(ring_shape(RingOptions{64 << 10, 256 << 10, 2}), std::move(memory));
  const auto cases = load_cases();
  size_t tensors = 0;
  for (size_t i = 0; i < 5; ++i) {
    const Checkpoint ck = read_checkpoint((test::testdata() / cases[i].file).string());
    tensors += stream_and_check(ck, cases[i].tensors, ring);
  }
  CHECK(tensors > 0);
  CHECK(*allocs == 4);  // 4 slots, once
  CHECK(ring.uses() == 10);  // each load and each readback asked for the buffers
  CHECK(ring.alloc_seconds() >= 0);
}

TEST_CASE("stream: a storage spanning many chunks, its transposed view, a slice and a tied alias") {
  const json& truth = stream_truth()["big.pt"];
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
  const std::pair<uint64_t, unsigned> configs[] = {{64 << 10, 1}, {64 << 10, 4}, {4 << 20, 2}};
  for (const auto& [chunk, threads] : configs) {
    std::ifstream(stream_fixtures() / "big.pt", std::ios::binary).ignore(std::numeric_limits<std::streamsize>::max());
    StagingRing ring = make_ring(chunk, 4 * chunk, threads);
    StreamStats stats;
    CHECK(stream_and_check(ck, truth, ring, {}, &stats) == truth.size());
    StorageIndex index(ck);
    StreamLoad load(ck, index, all_tensors(ck));
    // big, big_t, tied and slice share one storage: allocated and written once
    CHECK(load.storages().size() == 4);
    uint64_t biggest = 0;
    for (const Storage* s : load.storages()) biggest = std::max(biggest, s->nbytes);
    CHECK(biggest == 1536 * 1024 * 4);
    CHECK(stats.chunks >= biggest / chunk);
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
  StagingRing ring = make_ring(64 << 10, 4 * (64 << 10), 2);
  StreamStats stats;
  CHECK(stream_and_check(ck, truth, ring, {}, &stats) == truth.size());
  uint64_t total = 0;
  for (uint64_t b : stats.bytes) total += b;
  CHECK(stats.bytes[size_t(ReadPath::Remote)] == total);
  CHECK(src->reads == stats.chunks);
  CHECK(src->read_bytes == stats.file_bytes);
}

TEST_CASE("stream: unaligned storages packed in a chunk") {
  const json& truth = stream_truth()["legacy.pt"];
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "legacy.pt").string());
  REQUIRE(ck.format == Format::TorchLegacy);
  for (uint64_t chunk : {4ull << 20, 64ull << 10}) {
    std::ifstream(stream_fixtures() / "legacy.pt", std::ios::binary).ignore(std::numeric_limits<std::streamsize>::max());
    StagingRing ring = make_ring(chunk, 2 * chunk);
    StreamStats stats;
    CHECK(stream_and_check(ck, truth, ring, {}, &stats) == truth.size());
    if (chunk > (1u << 20)) CHECK(stats.chunks == 2);  // 5.5 MB of storages
  }
}

TEST_CASE("stream: 100,000 one-element storages share chunks") {
  const json& truth = stream_truth()["many.pt"];
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "many.pt").string());
  StagingRing ring = make_ring(1 << 20, 8 << 20, 2);
  StreamStats stats;
  CHECK(stream_and_check(ck, truth, ring, {}, &stats) == 100'000);
  // each storage is 4 bytes in a member of its own; a chunk holds hundreds of them
  CHECK(stats.chunks < 1000);
}

TEST_CASE("stream: chunks not in the page cache are read with O_DIRECT (or buffered where refused)") {
  const json& truth = stream_truth()["big.pt"];
  const fs::path copy = copy_to_temp(stream_fixtures() / "big.pt", "cold.pt");
  const Checkpoint ck = read_checkpoint(copy.string());
  StagingRing ring = make_ring(1 << 20, 4 << 20);
  {  // cold: evict the file's pages (written, so sync first)
    const int fd = ::open(copy.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  StreamStats cold;
  CHECK(stream_and_check(ck, truth, ring, {}, &cold) == truth.size());
  // the first chunk holds data.pkl's pages, which reading the file's structure brought in
  const uint64_t not_cached = cold.bytes[size_t(ReadPath::Direct)] + cold.bytes[size_t(ReadPath::Buffered)];
  CHECK(not_cached >= 6u << 20);
  // warm now (the stream_and_check above read the storages back through the mapping)
  std::ifstream(copy, std::ios::binary).ignore(std::numeric_limits<std::streamsize>::max());
  StreamStats warm;
  CHECK(stream_and_check(ck, truth, ring, {}, &warm) == truth.size());
  CHECK(warm.bytes[size_t(ReadPath::Cached)] == warm.bytes[0] + warm.bytes[1] + warm.bytes[2]);
  CHECK(warm.bytes[size_t(ReadPath::Cached)] > 0);
}

namespace {

// A sink that runs `hook` before its n-th write (counting from 1), on whichever thread makes it.
struct HookSink : CpuSink {
  std::atomic<int> writes{0};
  int at;
  std::function<void()> hook;
  std::atomic<bool> aborted{false};
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
  StagingRing ring = make_ring(64 << 10, 64 << 10);  // one slot, one thread: the chunks come in file order
  Watchdog dog(30);
  HookSink sink(3, [&] { fs::resize_file(copy, 1 << 20); });
  try {
    load.run(sink, ring, dog, {});
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
  Watchdog dog(30);
  for (unsigned threads : {1u, 4u}) {
    StagingRing ring = make_ring(64 << 10, 1 << 20, threads);
    HookSink sink(10, [] { throw std::runtime_error("out of device memory"); });
    CHECK_THROWS_WITH(load.run(sink, ring, dog, {}), "out of device memory");
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
  StagingRing ring = make_ring(0, 0);
  CHECK_THROWS_WITH(load.run(fa, ring, dog, {}), "CUDA out of memory");
  CHECK(fa.aborted);
  CHECK(fa.allocated() == 0);
}

namespace {

// Sinks that hang where a device could: a copy whose event never completes, an allocation that blocks
// until the watchdog interrupts it (or, `deaf`, never returns at all).
struct NeverDone : CpuSink {
  std::atomic<bool> aborted{false};
  bool done(unsigned) override { return false; }
  void abort() noexcept override {
    aborted = true;
    CpuSink::abort();
  }
};

struct HangingAlloc : CpuSink {
  std::mutex m;
  std::condition_variable cv;
  bool interrupted = false, deaf = false;
  std::atomic<bool> aborted{false};
  void allocate(size_t storage, uint64_t nbytes) override {
    if (storage == 1) {
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, [&] { return interrupted && !deaf; });
      throw std::runtime_error("allocation interrupted");
    }
    CpuSink::allocate(storage, nbytes);
  }
  void interrupt() noexcept override {
    std::lock_guard<std::mutex> l(m);
    interrupted = true;
    cv.notify_all();
  }
  void abort() noexcept override {
    aborted = true;
    CpuSink::abort();
  }
};

struct HangingRing : StagingRing::Memory {
  std::mutex m;
  std::condition_variable cv;
  bool interrupted = false;
  uint8_t* alloc(uint64_t) override {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return interrupted; });
    throw std::runtime_error("ring allocation interrupted");
  }
  void free(uint8_t*) noexcept override {}
  void interrupt() noexcept override {
    std::lock_guard<std::mutex> l(m);
    interrupted = true;
    cv.notify_all();
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The StallError's message of a load under a 0.3 s watchdog ("" when none), and how long it took.
std::string stall_of(StreamLoad& load, StreamSink& sink, StagingRing& ring, double& took) {
  Watchdog dog(0.3);
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    load.run(sink, ring, dog, {});
  } catch (const StallError& e) {
    msg = e.what();
  }
  took = seconds_since(t0);
  return msg;
}

}  // namespace

TEST_CASE("stream: a copy that never completes stops the load after stall-seconds, naming stage, file, member and offset") {
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
  StorageIndex index(ck);
  StreamLoad load(ck, index, all_tensors(ck));
  for (unsigned threads : {1u, 3u}) {
    StagingRing ring = make_ring(64 << 10, 6 * (64 << 10), threads);
    NeverDone sink;
    double took = 0;
    const std::string msg = stall_of(load, sink, ring, took);
    CAPTURE(msg);
    CHECK(msg.rfind(ck.path + ": big/data/", 0) == 0);
    CHECK(msg.find("+0x") != std::string::npos);
    CHECK(msg.find(": the copy to the device has not completed in 0.3 s (--limit stall-seconds); the load was stopped") !=
          std::string::npos);
    CHECK(took >= 0.3);
    CHECK(took < 3.0);
    CHECK(sink.aborted);  // every destination freed; run() returned: every reader joined
    CHECK(sink.allocated() == 0);
  }
}

TEST_CASE("stream: an allocation that hangs is interrupted by the watchdog, the load stopped and freed") {
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
  StorageIndex index(ck);
  StreamLoad load(ck, index, all_tensors(ck));
  StagingRing ring = make_ring(0, 0);
  HangingAlloc sink;
  double took = 0;
  const std::string msg = stall_of(load, sink, ring, took);
  CAPTURE(msg);
  CHECK(msg.rfind(ck.path + ": ", 0) == 0);
  CHECK(msg.find("allocating ") != std::string::npos);
  CHECK(msg.find(" bytes on the device has not completed in 0.3 s") != std::string::npos);
  CHECK(took < 3.0);
  CHECK(sink.aborted);
  CHECK(sink.allocated() == 0);
}

TEST_CASE("stream: a staging ring that is never allocated stops the load") {
  const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
  StorageIndex index(ck);
  StreamLoad load(ck, index, all_tensors(ck));
  StagingRing ring(ring_shape(RingOptions{}), std::make_unique<HangingRing>());
  Watchdog dog(0.3);
  CpuSink sink;
  CHECK_THROWS_WITH_AS(load.run(sink, ring, dog, {}), doctest::Contains("allocating the staging ring"), StallError);
  CHECK(sink.allocated() == 0);
}  // the ring's destructor interrupts its thread and joins it

TEST_CASE("stream: a device call that never returns ends the process with exit 4 and the error on stderr") {
  // In a child: the watchdog can neither interrupt nor join such a call, so it prints and exits.
  int err[2];
  REQUIRE(::pipe(err) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(err[1], STDERR_FILENO);
    const Checkpoint ck = read_checkpoint((stream_fixtures() / "big.pt").string());
    StorageIndex index(ck);
    StreamLoad load(ck, index, all_tensors(ck));
    StagingRing ring = make_ring(0, 0);
    Watchdog dog(0.3);
    HangingAlloc sink;
    sink.deaf = true;
    try {
      load.run(sink, ring, dog, {});
    } catch (...) {
    }
    ::_exit(0);  // not reached: the watchdog ends the process
  }
  ::close(err[1]);
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(err[0]);
  CAPTURE(text);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 4);
  CHECK(seconds_since(t0) < 5.0);  // 0.3 s, then the grace of 0.5 s
  CHECK(text.find("ckpt: error: ") == 0);
  CHECK(text.find("bytes on the device has not completed in 0.3 s (--limit stall-seconds)") != std::string::npos);
  CHECK(text.find("a device call that does not return: exiting") != std::string::npos);
}

TEST_CASE("stream: tensors that are not materialized are left out") {
  const Checkpoint ck = read_checkpoint((test::testdata() / "load" / "nan_inf.pt").string());
  StorageIndex index(ck);
  std::vector<const Tensor*> list = all_tensors(ck);
  list.front() = nullptr;
  StreamLoad load(ck, index, list);
  CHECK(load.storage_of(0) == SIZE_MAX);
  CpuSink sink;
  StagingRing ring = make_ring(0, 0);
  Watchdog dog(30);
  load.run(sink, ring, dog, {});
  CHECK_FALSE(load.readback_crc(sink, ring, dog, {})[0].has_value());
}

TEST_CASE("stream: the load report says how the bytes came and where the time went, in text and JSON") {
  LoadReport r;
  r.file = "m.pt";
  r.device = "cuda:0";
  StreamStats st;
  st.bytes[size_t(ReadPath::Cached)] = 3000;
  st.bytes[size_t(ReadPath::Direct)] = 96;
  st.threads = 8;
  st.slots = 16;
  st.chunk_bytes = 8 << 20;
  st.chunks = 190;
  st.readback_bytes = 3096;
  r.stream = st;
  r.staging = "pinned";
  r.device_crc = true;
  r.context_seconds = 0.25;
  r.ring_seconds = 0.07;
  r.ring_wait_seconds = 0.001;
  r.plan_seconds = 0.002;
  r.count_seconds = 0.004;
  r.load_seconds = 0.1;
  const std::string text = render_load_text(r, false);
  CAPTURE(text);
  CHECK(text.find("190       Chunks streamed: 8 thread(s), ring 134 MB (16 x 8.4 MB, pinned); read: 3.0 kB page-cache, "
                  "96 B direct\n") != std::string::npos);
  CHECK(text.find("CRC-32s of 3.1 kB read back from cuda:0") != std::string::npos);
  CHECK(text.find("0.250 s   CUDA context (ring's thread, overlapped)\n") != std::string::npos);
  CHECK(text.find("0.070 s   Allocating the staging ring (ring's thread, overlapped; waited 0.001 s)\n") != std::string::npos);
  CHECK(text.find("0.100 s   Loading (planning 0.002 s, NaN/Inf on cuda:0 0.004 s)\n") != std::string::npos);
  const json j = json::parse(load_json_text(r));
  CHECK(j["stream"]["read"]["direct"] == 96);
  CHECK(j["stream"]["read"]["page-cache"] == 3000);
  CHECK(j["stream"]["read"]["in-place"] == 0);
  CHECK(j["stream"]["ring_bytes"] == 16ull * (8 << 20));
  CHECK(j["stream"]["checksums"] == "device");
  CHECK(j["stream"]["ring_reused"] == false);
  CHECK(j["time"]["context_seconds"] == 0.25);
  CHECK(j["time"]["ring_seconds"] == 0.07);
  CHECK(j["time"]["ring_wait_seconds"] == 0.001);
  CHECK(j["time"]["plan_seconds"] == 0.002);
  CHECK(j["time"]["count_seconds"] == 0.004);
  r.ring_reused = true;
  const std::string again = render_load_text(r, false);
  CHECK(again.find("pinned, reused)") != std::string::npos);
  CHECK(again.find("CUDA context") == std::string::npos);
  r.stream.reset();
  CHECK(json::parse(load_json_text(r))["stream"].is_null());
  CHECK(render_load_text(r, false).find("stream ") == std::string::npos);
}
