#include "core/stream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/crc32.h"
#include "core/mapped_file.h"
#include "core/threads.h"
#include "core/watchdog.h"

namespace ckpt {

const char* to_string(ReadPath p) {
  switch (p) {
    case ReadPath::Cached: return "page-cache";
    case ReadPath::Direct: return "direct";
    case ReadPath::Buffered: return "buffered";
    case ReadPath::InPlace: return "in-place";  // reserved, always 0 (schema ckpt.load/1 lists it)
    case ReadPath::Memory: return "memory";
    case ReadPath::Remote: return "network";
  }
  return "?";
}

namespace {

constexpr uint64_t kPage = 4096;  // O_DIRECT alignment of buffer, offset and length
constexpr uint64_t kGap = 64 << 10;  // storages closer than this in a file share a chunk, gap included
constexpr uint64_t kMinChunk = 64 << 10;
constexpr uint64_t kDefaultChunk = 4 << 20;  // bench/ring_reads.py: pread from the page cache slows past 2-4 MiB
constexpr unsigned kMaxReaders = 8;

uint64_t align_down(uint64_t x, uint64_t a) { return x / a * a; }
uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// One storage's bytes: a range of a mapped file, or memory.
struct Source {
  const MappedFile* file = nullptr;  // null: memory
  const uint8_t* data = nullptr;  // the bytes (in the mapping, or in memory)
  uint64_t offset = 0;  // file offset of data (files only)
  std::string member;  // for errors
};

// A part of one storage inside a chunk.
struct Piece {
  size_t storage;
  uint64_t offset;  // in the storage (readback: in the tensor's row-major bytes)
  uint64_t len;
  uint64_t at;  // in the chunk
};

struct ChunkPlan {
  const MappedFile* file = nullptr;  // null: memory chunk (one storage)
  const uint8_t* data = nullptr;  // the chunk's first byte in the mapping / memory
  uint64_t offset = 0;  // file offset of the chunk's first byte
  uint64_t len = 0;
  size_t first = 0, count = 0;  // pieces
  uint64_t payload = 0;  // storage bytes in it (len less the gaps)
};

// An open file for the readers: a buffered descriptor, and an O_DIRECT one where the filesystem allows.
struct OpenFile {
  int fd = -1, direct = -1;
  std::atomic<bool> direct_ok{false};  // cleared when the filesystem refuses O_DIRECT reads
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
    if (direct >= 0) ::close(direct);
  }
};

}  // namespace

struct StreamLoad::Plan {
  std::vector<Source> sources;  // per storage
  std::vector<ChunkPlan> chunks;
  std::vector<Piece> pieces;
};

namespace {

// The sink takes a quantized tensor's bytes as any other's: whether to stream them is the caller's choice.
bool eligible(const Tensor* t) { return t && why_not_loaded(*t, false) == Unread::No; }

// Where a piece of a storage that starts at file offset `f` may end, as late as possible but not past
// `limit`: element-aligned (a multiple of 16 from the storage's start) and, where the storage starts on
// a 16-byte boundary, on a page of the file (no page shared by two chunks: O_DIRECT reads need whole
// pages).
uint64_t cut_before(uint64_t f, uint64_t limit) {
  if (f % 16 == 0) return align_down(limit, kPage);
  return limit < f ? f : f + align_down(limit - f, kPage);
}

[[noreturn]] void throw_errno(const std::string& path, const std::string& member, uint64_t off, const std::string& what) {
  throw InputError(path, member, off, fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

StreamLoad::StreamLoad(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors)
    : path_(ck.path), tensors_(tensors), tensor_storage_(tensors.size(), SIZE_MAX), plan_(std::make_unique<Plan>()) {
  Plan& p = *plan_;
  std::map<const Storage*, size_t> ids;
  std::set<const MappedFile*> advised;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor* t = tensors[k];
    if (!eligible(t)) continue;
    const Storage* s = index.find(t->storage);
    if (!s) throw InputError(ck.path, fmt::format("tensor '{}': storage '{}' is not in the file", t->name, t->storage));
    checked_extent(ck, *t, *s);
    auto [it, fresh] = ids.emplace(s, storages_.size());
    if (fresh) {
      const MappedFile* file = s->source ? s->source : ck.file.get();
      if (file && advised.insert(file).second) file->advise_random();  // before index.bytes reads a zip header
      storages_.push_back(s);
      const ByteView b = index.bytes(*s);
      Source src;
      src.member = std::string(s->member);
      if (!StorageIndex::assembled(*s) && file && (file->mapped() || file->remote())) {
        src.file = file;
        src.data = b.address();  // a remote file's bytes are streamed by read_at, never fetched into its cache
        src.offset = static_cast<uint64_t>(b.address() - file->view().address());
      } else {
        src.data = b.data();
      }
      p.sources.push_back(std::move(src));
      total_ += s->nbytes;
    }
    tensor_storage_[k] = it->second;
  }
}

StreamLoad::~StreamLoad() = default;

namespace {

// Chunks of at most `chunk` bytes over the storages: files in file order, memory storages alone.
void make_chunks(StreamLoad::Plan& p, const std::vector<const Storage*>& storages, uint64_t chunk) {
  p.chunks.clear();
  p.pieces.clear();
  std::vector<size_t> order(storages.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Source &x = p.sources[a], &y = p.sources[b];
    if (x.file != y.file) return std::less<const MappedFile*>()(x.file, y.file);
    return x.file ? x.offset < y.offset : a < b;
  });
  ChunkPlan cur;
  bool open = false;
  auto close = [&] {
    if (open && cur.count) p.chunks.push_back(cur);
    open = false;
  };
  for (size_t id : order) {
    const Source& src = p.sources[id];
    const uint64_t n = storages[id]->nbytes;
    if (!src.file) {  // memory: its own chunks, cut every `chunk` bytes (a multiple of 4096)
      close();
      for (uint64_t pos = 0; pos < n; pos += chunk) {
        const uint64_t len = std::min(chunk, n - pos);
        p.chunks.push_back({nullptr, src.data + pos, 0, len, p.pieces.size(), 1, 0});
        p.pieces.push_back({id, pos, len, 0});
      }
      continue;
    }
    const uint64_t f = src.offset;
    uint64_t pos = 0;
    while (pos < n) {
      const uint64_t here = f + pos;
      if (open && (cur.file != src.file || here < cur.offset + cur.len || here - (cur.offset + cur.len) > kGap)) close();
      if (!open) {
        cur = ChunkPlan{src.file, src.data + pos, here, 0, p.pieces.size(), 0, 0};
        open = true;
      }
      const uint64_t limit = cur.offset + chunk;
      if (here + (n - pos) <= limit) {
        p.pieces.push_back({id, pos, n - pos, here - cur.offset});
        ++cur.count;
        cur.len = f + n - cur.offset;
        pos = n;
        continue;
      }
      const uint64_t cut = cut_before(f, limit);
      if (cut <= here) {  // no room for an aligned part here: start the storage's next part afresh
        if (cur.count == 0) {  // cannot happen with chunk >= 64 KiB; never loop
          p.pieces.push_back({id, pos, n - pos, 0});
          ++cur.count;
          cur.len = n - pos;
          pos = n;
        }
        close();
        continue;
      }
      p.pieces.push_back({id, pos, cut - here, here - cur.offset});
      ++cur.count;
      cur.len = cut - cur.offset;
      pos = cut - f;
      close();
    }
  }
  close();
  for (ChunkPlan& c : p.chunks)
    for (size_t q = c.first; q < c.first + c.count; ++q) c.payload += p.pieces[q].len;
}

// pread until `len` bytes or the end of the file; returns the bytes read, -1 with errno on failure.
int64_t read_full(int fd, uint8_t* dst, uint64_t len, uint64_t off) {
  uint64_t got = 0;
  while (got < len) {
    const ssize_t r = ::pread(fd, dst + got, len - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(got);
}

}  // namespace


uint64_t RingShape::slot_bytes() const { return chunk + 2 * kPage; }

RingShape ring_shape(const RingOptions& o) {
  RingShape r;
  r.chunk = o.chunk_bytes ? std::max(kMinChunk, align_down(o.chunk_bytes, kPage)) : kDefaultChunk;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned readers = o.threads ? o.threads : std::min(kMaxReaders, cores);
  r.slots = o.ring_bytes ? static_cast<unsigned>(std::clamp<uint64_t>(o.ring_bytes / r.chunk, 1, 4096)) : 2 * readers;
  r.threads = std::max(1u, std::min(readers, r.slots));
  return r;
}

// ---- StagingRing

StagingRing::StagingRing(RingShape shape, std::unique_ptr<Memory> memory) : shape_(shape), memory_(std::move(memory)) {
  buffers_.assign(shape_.slots, nullptr);
  thread_ = std::thread([this] {
    try {
      using C = std::chrono::steady_clock;
      const auto t0 = C::now();
      memory_->init();
      const auto t1 = C::now();
      for (uint8_t*& b : buffers_) b = memory_->alloc(shape_.slot_bytes());
      init_seconds_ = std::chrono::duration<double>(t1 - t0).count();
      alloc_seconds_ = std::chrono::duration<double>(C::now() - t1).count();
    } catch (...) {
      error_ = std::current_exception();
    }
    ready_ = true;  // after every write above: buffers() reads them once it sees this
  });
}

StagingRing::~StagingRing() {
  if (!ready_) {  // a load gave up waiting (a stall): ask the allocation to stop, wait a little
    memory_->interrupt();
    for (int i = 0; i < 5000 && !ready_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!ready_) {  // a call that does not return (a driver): nothing can be joined or freed
      thread_.detach();
      (void)memory_.release();
      return;
    }
  }
  if (thread_.joinable()) thread_.join();
  for (uint8_t* b : buffers_)
    if (b) memory_->free(b);
}

void StagingRing::interrupt() noexcept { memory_->interrupt(); }

const std::vector<uint8_t*>& StagingRing::buffers(Watchdog& dog, const std::string& file) {
  const auto t0 = std::chrono::steady_clock::now();
  dog.wait([&] { return ready_.load(); },
           stall_message(file, "", std::nullopt,
                         fmt::format("allocating the staging ring ({} x {} bytes)", shape_.slots, shape_.slot_bytes()),
                         dog.seconds()));
  if (uses_++ == 0) waited_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  return buffers_;
}

namespace {

// What a slot's pending work is, for the StallError should it never complete.
std::string copy_stall(const std::string& file, const std::string& member, uint64_t offset, const Watchdog& dog) {
  return stall_message(file, member, offset, "the copy to the device", dog.seconds());
}

// Chunk by chunk, what StreamLoad::run's threads read into their slots: every file opened once before
// (`files`), the bytes counted by read path.
struct Stager {
  const std::vector<Source>& sources;
  const std::vector<Piece>& pieces;
  const std::map<const MappedFile*, std::unique_ptr<OpenFile>>& files;
  std::array<std::atomic<uint64_t>, kReadPaths>& by_path;
  std::atomic<uint64_t>& file_bytes;

  // Brings chunk c into slot memory `buf`; returns its first byte. A file chunk sits in `buf` where its
  // file offset falls within a page (so O_DIRECT reads land page-aligned): read from the page cache when
  // every page is resident, else with O_DIRECT, else buffered.
  const uint8_t* operator()(const ChunkPlan& c, uint8_t* buf) const {
    if (!c.file) {
      std::memcpy(buf, c.data, c.len);
      by_path[static_cast<size_t>(ReadPath::Memory)] += c.payload;
      return buf;
    }
    if (c.file->remote()) {  // HTTP range requests straight into the slot, one per chunk, each thread its own
      c.file->read_at(buf, c.len, c.offset);
      file_bytes += c.len;
      by_path[static_cast<size_t>(ReadPath::Remote)] += c.payload;
      return buf;
    }
    OpenFile& of = *files.at(c.file);
    const std::string& member0 = sources[pieces[c.first].storage].member;
    auto fail_short = [&](uint64_t got_to) {  // names the piece holding the first byte that did not come
      const Piece* pc = &pieces[c.first];
      for (size_t i = c.first; i < c.first + c.count; ++i)
        if (c.offset + pieces[i].at <= got_to) pc = &pieces[i];
      const uint64_t in = got_to > c.offset + pc->at ? got_to - (c.offset + pc->at) : 0;
      struct stat st {};
      const std::string now = ::fstat(of.fd, &st) == 0 ? fmt::format("the file has {} bytes now", st.st_size) : "";
      throw InputError(c.file->path(), sources[pc->storage].member, pc->offset + std::min(in, pc->len),
                       fmt::format("short read at file offset {}: {}, this load needs {} (changed or truncated "
                                   "while loading?)",
                                   got_to, now, c.offset + c.len));
    };
    const uint64_t a0 = align_down(c.offset, kPage), end = c.offset + c.len;
    uint8_t* data = buf + (c.offset - a0);
    // mincore faults nothing in and starts no readahead (a RWF_NOWAIT probe would start readahead that
    // competes with the direct reads). Where the kernel will not tell (a file this user may not write),
    // it says resident: read buffered.
    const bool cold = !c.file->resident(c.data, c.len);
    if (cold && of.direct_ok) {
      const uint64_t a1 = align_up(end, kPage);
      const int64_t r = read_full(of.direct, buf, a1 - a0, a0);
      if (r >= 0) {
        if (a0 + static_cast<uint64_t>(r) < end) fail_short(a0 + static_cast<uint64_t>(r));
        file_bytes += static_cast<uint64_t>(r);
        by_path[static_cast<size_t>(ReadPath::Direct)] += c.payload;
        return data;
      }
      if (errno != EINVAL) throw_errno(c.file->path(), member0, 0, "read");
      of.direct_ok = false;  // this filesystem takes O_DIRECT opens but not the reads: buffered from here on
    }
    const int64_t r = read_full(of.fd, data, c.len, c.offset);
    if (r < 0) throw_errno(c.file->path(), member0, 0, "read");
    if (static_cast<uint64_t>(r) < c.len) fail_short(c.offset + static_cast<uint64_t>(r));
    file_bytes += c.len;
    by_path[static_cast<size_t>(cold ? ReadPath::Buffered : ReadPath::Cached)] += c.payload;
    return data;
  }
};

}  // namespace

void StreamLoad::run(StreamSink& sink, StagingRing& ring_mem, Watchdog& dog, const StreamOptions& o, StreamStats* stats) {
  Plan& p = *plan_;
  const RingShape ring = ring_mem.shape();
  const auto tp = std::chrono::steady_clock::now();
  make_chunks(p, storages_, ring.chunk);
  const auto t0 = std::chrono::steady_clock::now();

  std::array<std::atomic<uint64_t>, kReadPaths> by_path{};
  std::atomic<uint64_t> file_bytes{0}, done{0};
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex progress_lock;
  const Watchdog::Hook hook = dog.on_stall([&] {
    sink.interrupt();
    ring_mem.interrupt();
  });

  try {
    // Every file opened once, before any thread starts.
    std::map<const MappedFile*, std::unique_ptr<OpenFile>> files;
    for (const ChunkPlan& c : p.chunks) {
      if (!c.file || c.file->remote() || files.count(c.file)) continue;
      auto of = std::make_unique<OpenFile>();
      of->fd = c.file->reopen(false);
      if (of->fd < 0) throw_errno(c.file->path(), "", 0, "cannot open again for reading");
      ::posix_fadvise(of->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      if (o.direct) of->direct = c.file->reopen(true);  // -1: the filesystem refuses O_DIRECT (tmpfs)
      of->direct_ok = of->direct >= 0;
      files.emplace(c.file, std::move(of));
    }
    sink.prepare(ring.slots);
    for (size_t id = 0; id < storages_.size(); ++id) {
      const std::string why = stall_message(path_, p.sources[id].member, std::nullopt,
                                            fmt::format("allocating {} bytes on the device", storages_[id]->nbytes), dog.seconds());
      dog.guarded(why, [&] { sink.allocate(id, storages_[id]->nbytes); });
    }
    const std::vector<uint8_t*>& slot_mem = ring_mem.buffers(dog, path_);

    const Stager stage{p.sources, p.pieces, files, by_path, file_bytes};

    run_threads(ring.threads, stop, [&](unsigned j) {
      std::vector<unsigned> own;
      for (unsigned s = j; s < ring.slots; s += ring.threads) own.push_back(s);
      std::vector<const ChunkPlan*> pending(own.size(), nullptr);  // each slot's last chunk, until done
      size_t r = 0;
      auto settle = [&](size_t i) {  // the slot's last chunk is done with its source
        const ChunkPlan* c = pending[i];
        if (!c) return;
        const Piece& pc = p.pieces[c->first];
        dog.wait([&] { return sink.done(own[i]); },
                 copy_stall(c->file ? c->file->path() : path_, p.sources[pc.storage].member, pc.offset, dog));
        pending[i] = nullptr;
      };
      try {
        for (size_t ci = next++; ci < p.chunks.size() && !stop; ci = next++) {
          const size_t i = r++ % own.size();
          settle(i);
          const ChunkPlan& c = p.chunks[ci];
          const uint8_t* data = stage(c, slot_mem[own[i]]);
          pending[i] = &c;  // from here on the slot is waited for, even if a write below throws
          for (size_t q = c.first; q < c.first + c.count; ++q) {
            const Piece& pc = p.pieces[q];
            sink.write(own[i], pc.storage, pc.offset, data + pc.at, pc.len);
          }
          sink.commit(own[i]);
          const uint64_t now = done += c.payload;
          if (o.progress) {
            std::unique_lock<std::mutex> l(progress_lock, std::try_to_lock);
            if (l) o.progress(now, total_);
          }
        }
        for (size_t i = 0; i < own.size(); ++i) settle(i);
      } catch (...) {
        if (!dog.fired())  // after a stall nothing more is waited for
          for (size_t i = 0; i < own.size(); ++i) try {
              settle(i);
            } catch (...) {}
        throw;
      }
    });
  } catch (...) {
    sink.abort();
    throw;
  }
  if (o.progress) o.progress(total_, total_);
  if (stats) {
    for (size_t i = 0; i < kReadPaths; ++i) stats->bytes[i] = by_path[i];
    stats->file_bytes = file_bytes;
    stats->chunks = p.chunks.size();
    stats->slots = ring.slots;
    stats->chunk_bytes = ring.chunk;
    stats->threads = ring.threads;
    stats->plan_seconds = std::chrono::duration<double>(t0 - tp).count();
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

std::vector<std::optional<uint32_t>> StreamLoad::readback_crc(StreamSink& sink, StagingRing& ring_mem, Watchdog& dog,
                                                              const StreamOptions& o, StreamStats* stats) {
  const RingShape ring = ring_mem.shape();
  const auto t0 = std::chrono::steady_clock::now();
  // Chunks over the tensors' row-major bytes: small tensors share one, large ones span several.
  std::vector<Piece> pieces;  // storage field: the tensor's index
  std::vector<std::pair<size_t, size_t>> chunks;  // first piece, count
  std::vector<size_t> pieces_left(tensors_.size(), 0);
  uint64_t fill = ring.chunk;
  uint64_t total = 0;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    if (tensor_storage_[k] == SIZE_MAX || tensors_[k]->bytes == 0) continue;  // empty: CRC-32 0
    const uint64_t n = tensors_[k]->bytes;
    uint64_t pos = 0;
    do {
      if (fill == ring.chunk) {
        chunks.emplace_back(pieces.size(), 0);
        fill = 0;
      }
      const uint64_t len = std::min(n - pos, ring.chunk - fill);
      pieces.push_back({k, pos, len, fill});
      ++chunks.back().second;
      ++pieces_left[k];
      fill += len;
      pos += len;
    } while (pos < n);
    total += n;
  }
  std::vector<uint32_t> piece_crc(pieces.size(), 0);
  std::vector<std::atomic<size_t>> left(tensors_.size());
  for (size_t k = 0; k < left.size(); ++k) left[k] = pieces_left[k];
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::mutex progress_lock;
  const Watchdog::Hook hook = dog.on_stall([&] { sink.interrupt(); });
  try {
    sink.prepare(ring.slots);
    const std::vector<uint8_t*>& slot_mem = ring_mem.buffers(dog, path_);
    run_threads(ring.threads, stop, [&](unsigned j) {
      std::vector<unsigned> own;
      for (unsigned s = j; s < ring.slots; s += ring.threads) own.push_back(s);
      size_t r = 0;
      for (size_t ci = next++; ci < chunks.size() && !stop; ci = next++) {
        const unsigned slot = own[r++ % own.size()];
        uint8_t* buf = slot_mem[slot];
        const auto [first, count] = chunks[ci];
        for (size_t q = first; q < first + count; ++q) {
          const Piece& pc = pieces[q];
          sink.read(slot, tensor_storage_[pc.storage], *tensors_[pc.storage], pc.offset, buf + pc.at, pc.len);
        }
        sink.commit(slot);
        const Tensor& t0 = *tensors_[pieces[first].storage];
        dog.wait([&] { return sink.done(slot); },
                 stall_message(path_, t0.name, pieces[first].offset, "the copy back from the device (--checksum)", dog.seconds()));
        for (size_t q = first; q < first + count; ++q) {
          const Piece& pc = pieces[q];
          piece_crc[q] = crc32_update(0, buf + pc.at, pc.len);
          if (--left[pc.storage] == 0) sink.read_done(*tensors_[pc.storage]);
        }
        const uint64_t now = done += pieces[first + count - 1].at + pieces[first + count - 1].len;
        if (o.progress) {
          std::unique_lock<std::mutex> l(progress_lock, std::try_to_lock);
          if (l) o.progress(now, total);
        }
      }
    });
  } catch (...) {
    sink.abort();
    throw;
  }
  std::vector<std::optional<uint32_t>> out(tensors_.size());
  for (size_t k = 0; k < out.size(); ++k)
    if (tensor_storage_[k] != SIZE_MAX && tensors_[k]->bytes == 0) out[k] = 0;
  for (size_t q = 0; q < pieces.size(); ++q) {
    const Piece& pc = pieces[q];
    const uint32_t c = out[pc.storage] ? *out[pc.storage] : 0;
    out[pc.storage] = pc.offset == 0 ? piece_crc[q] : crc32_join(c, piece_crc[q], pc.len);
  }
  if (stats) {
    stats->readback_bytes = total;
    stats->readback_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return out;
}

// ---- CpuSink

void CpuSink::allocate(size_t storage, uint64_t nbytes) {
  if (storages_.size() <= storage) {
    storages_.resize(storage + 1);
    sizes_.resize(storage + 1, 0);
  }
  storages_[storage].reset(new uint8_t[std::max<uint64_t>(nbytes, 1)]);  // uninitialized, as on a device
  sizes_[storage] = nbytes;
}

void CpuSink::write(unsigned, size_t storage, uint64_t offset, const uint8_t* src, uint64_t len) {
  if (offset > sizes_.at(storage) || len > sizes_[storage] - offset) throw std::logic_error("CpuSink: write out of range");
  std::memcpy(storages_[storage].get() + offset, src, len);
  written_ += len;
}

void CpuSink::read(unsigned, size_t storage, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) {
  read_rows(t, storages_.at(storage).get(), offset, dst, len);
}

void CpuSink::abort() noexcept {
  storages_.clear();
  sizes_.clear();
}

size_t CpuSink::allocated() const {
  return static_cast<size_t>(std::count_if(storages_.begin(), storages_.end(), [](const auto& p) { return p != nullptr; }));
}

void read_rows(const Tensor& t, const uint8_t* storage, uint64_t offset, uint8_t* dst, uint64_t len) {
  uint64_t pos = 0;  // row-major bytes walked so far
  for_each_run(t, [&](uint64_t off, uint64_t n) {
    const uint64_t x = std::max(pos, offset), y = std::min(pos + n, offset + len);
    if (x < y) std::memcpy(dst + (x - offset), storage + off + (x - pos), y - x);
    pos += n;
  });
}

namespace {
class HostMemory final : public StagingRing::Memory {
 public:
  uint8_t* alloc(uint64_t bytes) override {
    void* p = std::aligned_alloc(kPage, align_up(bytes, kPage));
    if (!p) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  void free(uint8_t* p) noexcept override { std::free(p); }
};
}  // namespace

std::unique_ptr<StagingRing::Memory> host_ring_memory() { return std::make_unique<HostMemory>(); }

}  // namespace ckpt
