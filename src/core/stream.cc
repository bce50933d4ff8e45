#include "core/stream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

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

#include "core/mapped_file.h"
#include "core/threads.h"

namespace ckpt {

const char* to_string(ReadPath p) {
  switch (p) {
    case ReadPath::Cached: return "page-cache";
    case ReadPath::Direct: return "direct";
    case ReadPath::Buffered: return "buffered";
    case ReadPath::InPlace: return "in-place";
    case ReadPath::Memory: return "memory";
    case ReadPath::Remote: return "network";
  }
  return "?";
}

namespace {

constexpr uint64_t kPage = 4096;  // O_DIRECT alignment of buffer, offset and length; registration unit
constexpr uint64_t kGap = 64 << 10;  // storages closer than this in a file share a chunk, gap included
constexpr uint64_t kMinChunk = 64 << 10;
constexpr uint64_t kSub = 1 << 20;  // page-cache reads: read and counted this much at a time

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
  std::vector<std::vector<size_t>> tensors_of;  // per storage: indexes into tensors_
  std::vector<uint64_t> lo, hi;  // per tensor: first byte and one past the last in its storage
  std::vector<ChunkPlan> chunks;
  std::vector<Piece> pieces;
};

namespace {

bool eligible(const Tensor* t) {
  return t && t->state == TensorState::Materialized && t->dtype && t->dtype->pack == 1 && !t->storage.empty() &&
         loadable_layout(*t);
}

// Where a piece of a storage that starts at file offset `f` may end, as late as possible but not past
// `limit`: element-aligned (a multiple of 16 from the storage's start) and, where the storage starts on
// a 16-byte boundary, on a page of the file (no page shared by two chunks: O_DIRECT reads and in-place
// registration need whole pages).
uint64_t cut_before(uint64_t f, uint64_t limit) {
  if (f % 16 == 0) return align_down(limit, kPage);
  return limit < f ? f : f + align_down(limit - f, kPage);
}

[[noreturn]] void throw_errno(const std::string& path, const std::string& member, uint64_t off, const std::string& what) {
  throw InputError(path, member, off, fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

StreamLoad::StreamLoad(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors)
    : tensors_(tensors), tensor_storage_(tensors.size(), SIZE_MAX), plan_(std::make_unique<Plan>()) {
  Plan& p = *plan_;
  std::map<const Storage*, size_t> ids;
  std::set<const MappedFile*> advised;
  p.lo.assign(tensors.size(), 0);
  p.hi.assign(tensors.size(), 0);
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor* t = tensors[k];
    if (!eligible(t)) continue;
    const Storage* s = index.find(t->storage);
    if (!s) throw InputError(ck.path, fmt::format("tensor '{}': storage '{}' is not in the file", t->name, t->storage));
    const uint64_t extent = checked_extent(ck, *t, *s);
    p.lo[k] = static_cast<uint64_t>(t->offset) * t->dtype->itemsize;
    p.hi[k] = p.lo[k] + extent;
    auto [it, fresh] = ids.emplace(s, storages_.size());
    if (fresh) {
      const MappedFile* file = s->source ? s->source : ck.file.get();
      if (file && advised.insert(file).second) file->advise_random();  // before index.bytes reads a zip header
      storages_.push_back(s);
      p.tensors_of.emplace_back();
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
    p.tensors_of[it->second].push_back(k);
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

// Sizes the ring: chunk and slot counts and reader threads.
struct Ring {
  uint64_t chunk;
  unsigned slots, threads;
};
Ring size_ring(const StreamOptions& o) {
  Ring r;
  r.chunk = std::max(kMinChunk, align_down(o.chunk_bytes, kPage));
  r.slots = static_cast<unsigned>(std::clamp<uint64_t>(o.ring_bytes / r.chunk, 1, 4096));
  unsigned t = o.threads ? o.threads : std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  r.threads = std::max(1u, std::min(t, r.slots));
  return r;
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

std::vector<ValueStats> StreamLoad::run(StreamSink& sink, const StreamOptions& o, StreamStats* stats) {
  Plan& p = *plan_;
  const Ring ring = size_ring(o);
  make_chunks(p, storages_, ring.chunk);
  const auto t0 = std::chrono::steady_clock::now();

  std::vector<std::atomic<uint64_t>> nan(tensors_.size()), inf(tensors_.size());
  std::array<std::atomic<uint64_t>, kReadPaths> by_path{};
  std::atomic<uint64_t> file_bytes{0}, done{0};
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};

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
    std::vector<uint8_t*> slot_mem(ring.slots, nullptr);  // each asked for by its owner, when first needed
    for (size_t id = 0; id < storages_.size(); ++id) sink.allocate(id, storages_[id]->nbytes);

    // NaN / Inf of the tensors' elements inside piece `pc` (whose first byte is at `bytes`): every tensor,
    // or only the contiguous ones / only the others.
    enum class Which { All, Contiguous, Strided };
    auto count = [&](const Piece& pc, const uint8_t* bytes, Which which) {
      for (size_t k : p.tensors_of[pc.storage]) {
        const uint64_t lo = std::max(p.lo[k], pc.offset), hi = std::min(p.hi[k], pc.offset + pc.len);
        if (lo >= hi) continue;
        const Tensor& t = *tensors_[k];
        const bool contiguous = is_contiguous(t);
        if ((which == Which::Contiguous && !contiguous) || (which == Which::Strided && contiguous)) continue;
        ValueStats v;
        auto add = [&](uint64_t a, uint64_t b) {  // storage byte range [a, b) of the tensor's elements
          const uint64_t x = std::max(a, pc.offset), y = std::min(b, pc.offset + pc.len);
          if (x >= y) return;
          const ValueStats s = count_nonfinite(*t.dtype, bytes + (x - pc.offset), (y - x) / t.dtype->itemsize);
          v.nan += s.nan;
          v.inf += s.inf;
        };
        if (contiguous) add(p.lo[k], p.lo[k] + t.bytes);
        else for_each_run(t, [&](uint64_t off, uint64_t len) { add(off, off + len); });
        nan[k] += v.nan;
        inf[k] += v.inf;
      }
    };

    // Brings chunk c into slot memory `buf` (or pins it in place); returns its first byte. A file chunk
    // sits in `buf` where its file offset falls within a page (so O_DIRECT reads land page-aligned): read
    // from the page cache when every page is resident, else with O_DIRECT, else buffered.
    // `counted`: the contiguous tensors' elements were counted while reading (the strided ones are left).
    auto stage = [&](const ChunkPlan& c, unsigned slot, uint8_t* buf, bool& pinned, bool& counted) -> const uint8_t* {
      pinned = counted = false;
      auto staged = [&] {
        if (!buf) buf = slot_mem[slot] = sink.staging(slot, ring.chunk + 2 * kPage);
      };
      if (!c.file) {
        staged();
        std::memcpy(buf, c.data, c.len);
        by_path[static_cast<size_t>(ReadPath::Memory)] += c.payload;
        return buf;
      }
      if (c.file->remote()) {  // HTTP range requests straight into the slot, one per chunk, each thread its own
        staged();
        c.file->read_at(buf, c.len, c.offset);
        file_bytes += c.len;
        by_path[static_cast<size_t>(ReadPath::Remote)] += c.payload;
        return buf;
      }
      OpenFile& of = *files.at(c.file);
      const std::string& member0 = p.sources[p.pieces[c.first].storage].member;
      auto fail_short = [&](uint64_t got_to) {  // names the piece holding the first byte that did not come
        const Piece* pc = &p.pieces[c.first];
        for (size_t i = c.first; i < c.first + c.count; ++i)
          if (c.offset + p.pieces[i].at <= got_to) pc = &p.pieces[i];
        const uint64_t in = got_to > c.offset + pc->at ? got_to - (c.offset + pc->at) : 0;
        struct stat st {};
        const std::string now = ::fstat(of.fd, &st) == 0 ? fmt::format("the file has {} bytes now", st.st_size) : "";
        throw InputError(c.file->path(), p.sources[pc->storage].member, pc->offset + std::min(in, pc->len),
                         fmt::format("short read at file offset {}: {}, this load needs {} (changed or truncated "
                                     "while loading?)",
                                     got_to, now, c.offset + c.len));
      };
      if (o.in_place && c.file->resident(c.data, c.len)) {
        struct stat st {};  // the mapping faults (SIGBUS) past the end of a truncated file: check first
        if (::fstat(of.fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= c.offset + c.len && sink.pin(slot, c.data, c.len)) {
          pinned = true;
          by_path[static_cast<size_t>(ReadPath::InPlace)] += c.payload;
          return c.data;
        }
      }
      staged();
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
      // From the page cache a chunk is read 1 MiB at a time, and each MiB counted while it is still in
      // the core's cache: the count then costs almost nothing beside the copy.
      thread_local std::vector<uint64_t> done;  // per piece: storage bytes counted so far
      done.resize(c.count);
      for (size_t i = 0; i < c.count; ++i) done[i] = p.pieces[c.first + i].offset;
      size_t open_piece = 0;  // pieces before it are counted to their end
      for (uint64_t pos = 0; pos < c.len; pos += kSub) {
        const uint64_t n = std::min(kSub, c.len - pos);
        const int64_t r = read_full(of.fd, data + pos, n, c.offset + pos);
        if (r < 0) throw_errno(c.file->path(), member0, 0, "read");
        if (static_cast<uint64_t>(r) < n) fail_short(c.offset + pos + static_cast<uint64_t>(r));
        const uint64_t upto = pos + n;
        for (size_t i = open_piece; i < c.count; ++i) {
          const Piece& pc = p.pieces[c.first + i];
          if (pc.at >= upto) break;
          const uint64_t end = pc.offset + pc.len;
          uint64_t avail = pc.offset + std::min(pc.len, upto - pc.at);
          if (avail < end) avail = align_down(avail, 16);  // whole elements only: 16 bytes hold any
          if (avail > done[i]) {
            const uint64_t at = pc.at + (done[i] - pc.offset);
            count(Piece{pc.storage, done[i], avail - done[i], at}, data + at, Which::Contiguous);
            done[i] = avail;
          }
          if (done[i] == end && i == open_piece) ++open_piece;
        }
      }
      counted = true;
      file_bytes += c.len;
      by_path[static_cast<size_t>(cold ? ReadPath::Buffered : ReadPath::Cached)] += c.payload;
      return data;
    };

    run_threads(ring.threads, stop, [&](unsigned j) {
      std::vector<unsigned> own;
      for (unsigned s = j; s < ring.slots; s += ring.threads) own.push_back(s);
      std::vector<bool> used(own.size(), false);
      std::vector<const ChunkPlan*> pinned(own.size(), nullptr);
      size_t r = 0;
      auto settle = [&](size_t i) {  // the slot's last chunk is done with its source
        if (!used[i]) return;
        used[i] = false;
        sink.wait(own[i]);
        if (const ChunkPlan* c = pinned[i]) {
          pinned[i] = nullptr;
          sink.unpin(own[i]);
          c->file->release(c->data, c->len);  // counted and copied: this process's pages of it go
        }
      };
      try {
        for (size_t ci = next++; ci < p.chunks.size() && !stop; ci = next++) {
          const size_t i = r++ % own.size();
          settle(i);
          const ChunkPlan& c = p.chunks[ci];
          bool in_place = false, counted = false;
          const uint8_t* data = stage(c, own[i], slot_mem[own[i]], in_place, counted);
          pinned[i] = in_place ? &c : nullptr;
          used[i] = true;  // from here on the slot is waited for, even if a write below throws
          for (size_t q = c.first; q < c.first + c.count; ++q) {
            const Piece& pc = p.pieces[q];
            count(pc, data + pc.at, counted ? Which::Strided : Which::All);
            sink.write(own[i], pc.storage, pc.offset, data + pc.at, pc.len);
          }
          sink.commit(own[i]);
          done += c.payload;
          if (j == 0 && o.progress) o.progress(done, p.chunks.empty() ? 0 : total_);
        }
        for (size_t i = 0; i < own.size(); ++i) settle(i);
      } catch (...) {
        for (size_t i = 0; i < own.size(); ++i) try {
            settle(i);
          } catch (...) {}
        throw;
      }
    });
    sink.finish();
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
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<ValueStats> out(tensors_.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = {nan[k].load(), inf[k].load()};
  return out;
}

std::vector<std::optional<uint32_t>> StreamLoad::readback_crc(StreamSink& sink, const StreamOptions& o, StreamStats* stats) {
  const Ring ring = size_ring(o);
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
  try {
    sink.prepare(ring.slots);
    std::vector<uint8_t*> slot_mem(ring.slots, nullptr);
    run_threads(ring.threads, stop, [&](unsigned j) {
      std::vector<unsigned> own;
      for (unsigned s = j; s < ring.slots; s += ring.threads) own.push_back(s);
      size_t r = 0;
      for (size_t ci = next++; ci < chunks.size() && !stop; ci = next++) {
        const unsigned slot = own[r++ % own.size()];
        if (!slot_mem[slot]) slot_mem[slot] = sink.staging(slot, ring.chunk + 2 * kPage);
        uint8_t* buf = slot_mem[slot];
        const auto [first, count] = chunks[ci];
        for (size_t q = first; q < first + count; ++q) {
          const Piece& pc = pieces[q];
          sink.read(slot, tensor_storage_[pc.storage], *tensors_[pc.storage], pc.offset, buf + pc.at, pc.len);
        }
        sink.commit(slot);
        sink.wait(slot);
        for (size_t q = first; q < first + count; ++q) {
          const Piece& pc = pieces[q];
          piece_crc[q] = static_cast<uint32_t>(crc32_z(crc32(0L, Z_NULL, 0), buf + pc.at, pc.len));
          done += pc.len;
          if (--left[pc.storage] == 0) sink.read_done(*tensors_[pc.storage]);
        }
        if (j == 0 && o.progress) o.progress(done, total);
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
    uLong c = out[pc.storage] ? *out[pc.storage] : crc32(0L, Z_NULL, 0);
    c = pc.offset == 0 ? piece_crc[q] : crc32_combine(c, piece_crc[q], static_cast<z_off_t>(pc.len));
    out[pc.storage] = static_cast<uint32_t>(c);
  }
  if (stats) {
    stats->readback_bytes = total;
    stats->readback_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return out;
}

// ---- CpuSink

void CpuSink::Free::operator()(uint8_t* p) const { std::free(p); }

void CpuSink::prepare(unsigned slots) {
  if (slots_.size() < slots) {
    slots_.resize(slots);
    slot_bytes_.resize(slots, 0);
  }
}

uint8_t* CpuSink::staging(unsigned slot, uint64_t bytes) {
  if (slot >= slots_.size()) throw std::logic_error("CpuSink: staging before prepare");
  if (slot_bytes_[slot] < bytes) {
    void* p = std::aligned_alloc(kPage, align_up(bytes, kPage));
    if (!p) throw std::bad_alloc();
    slots_[slot].reset(static_cast<uint8_t*>(p));
    slot_bytes_[slot] = bytes;
  }
  return slots_[slot].get();
}

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

bool CpuSink::pin(unsigned, const uint8_t*, uint64_t) { return in_place_; }

void CpuSink::read(unsigned, size_t storage, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) {
  const uint8_t* base = storages_.at(storage).get();
  uint64_t pos = 0;  // row-major bytes walked so far
  for_each_run(t, [&](uint64_t off, uint64_t n) {
    const uint64_t x = std::max(pos, offset), y = std::min(pos + n, offset + len);
    if (x < y) std::memcpy(dst + (x - offset), base + off + (x - pos), y - x);
    pos += n;
  });
}

void CpuSink::abort() noexcept {
  storages_.clear();
  sizes_.clear();
}

size_t CpuSink::allocated() const {
  return static_cast<size_t>(std::count_if(storages_.begin(), storages_.end(), [](const auto& p) { return p != nullptr; }));
}

uint64_t CpuSink::staging_bytes() const {
  uint64_t n = 0;
  for (uint64_t b : slot_bytes_) n += b;
  return n;
}

}  // namespace ckpt
