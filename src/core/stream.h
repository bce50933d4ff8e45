// The streaming device load (`ckpt load --device cuda`, and `--device cpu --stream`, its CPU twin): every
// byte of the loaded storages flows once from its file through a small ring of staging buffers into a sink
// that owns one destination per storage. No LibTorch here: the sinks that make at::Tensors are in
// src/torch (tensor_sink.h); the CPU sink below serves the tests.
//
//   file ──pread (page cache) / O_DIRECT (cold) / memcpy (memory) / range requests──▶ slot ──sink.write──▶ storage k
//                                                                        (async: the slot is reused once
//                                                                         sink.done(slot) says so)
//
// Chunks are contiguous byte ranges of one file, at most `chunk` bytes long: many small storages share one
// (the zip headers between them ride along), a storage larger than a chunk spans several, cut where the
// cut is both element- and page-aligned. Chunk i goes to one of T reader threads, each owning its own
// slots of the ring, so a slot is reused only by the thread that filled it, after the sink says its writes
// are done. The readers only read and copy: NaN / Inf are counted on the destination afterwards (on a
// device by LibTorch reductions, src/torch/nonfinite.cc). Reading goes through the file descriptor, never
// the mapping, so a file truncated under the load is a short read with file, member and offset, not a
// SIGBUS, and the process holds no file pages: its memory is the ring.
//
// The ring (StagingRing) is allocated once per run, on a thread of its own started as soon as the command
// knows its device (pinned memory costs about 0.5 ms per MB, and its first call makes the CUDA context),
// and reused by every input of the run. Every wait on the sink is bounded by the Watchdog
// (--limit stall-seconds): a copy that never completes stops the load with StallError (exit 4).
//
// A sink could take chunks in place (registered file pages) instead of staged ones; in-place registration
// of the mapping stalled on a GPU (issue 40) and was removed until a measurement shows a safe way: such a
// sink would add a call beside write() and a read path beside Cached.
//
// --checksum reads every tensor back from the sink through the same ring (readback_crc): the CRC-32
// proves the bytes at the destination, not the bytes that were sent.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/checkpoint.h"
#include "core/storage.h"
#include "core/values.h"
#include "core/watchdog.h"

namespace ckpt {

// How a chunk's bytes reached the ring.
enum class ReadPath : uint8_t {
  Cached,  // pread from the page cache (the chunk was resident)
  Direct,  // O_DIRECT pread, aligned, bypassing the page cache (the chunk was not resident)
  Buffered,  // pread, not resident, O_DIRECT refused by the filesystem (or turned off)
  InPlace,  // reserved: chunks taken in place (registered file pages); none since issue 40, always 0
  Memory,  // bytes already in memory (DCP tensors assembled from their chunks, in-memory files)
  Remote  // HTTP range requests (a remote file: https://, hf://, s3://)
};
inline constexpr size_t kReadPaths = 6;
const char* to_string(ReadPath p);

// The ring's shape: `slots` buffers of `chunk` bytes, filled by `threads` reader threads (each owns
// slots / threads of them). Defaults (0): 4 MiB chunks, one reader per core up to 8, two slots per reader
// (docs/load.md says why).
struct RingOptions {
  uint64_t chunk_bytes = 0;  // 0: 4 MiB; else at least 64 KiB, rounded down to 4 KiB
  uint64_t ring_bytes = 0;  // 0: two chunks per reader; else slots = ring_bytes / chunk, at least one
  unsigned threads = 0;  // 0: one per core, at most 8; never more than slots
};
struct RingShape {
  uint64_t chunk = 0;
  unsigned slots = 0, threads = 0;
  uint64_t bytes() const { return chunk * slots; }
  // One slot's memory: a chunk and two pages, so that an O_DIRECT read of a chunk that starts and ends
  // mid-page lands page-aligned.
  uint64_t slot_bytes() const;
};
RingShape ring_shape(const RingOptions& o);

// The staging memory of the streaming load: `shape.slots` buffers allocated by `memory` on a thread of
// its own, started by the constructor, so that the allocation (and a device's context, made by its first
// call) overlaps the reading of the checkpoint. Reused by every load of a run.
class StagingRing {
 public:
  class Memory {  // how host buffers are made: pinned by CUDA (src/torch), plain on the CPU
   public:
    virtual ~Memory() = default;
    virtual void init() {}  // first, on the ring's thread (a device: its context)
    virtual uint8_t* alloc(uint64_t bytes) = 0;  // 4096-aligned
    virtual void free(uint8_t* p) noexcept = 0;
    virtual void interrupt() noexcept {}  // the watchdog: make a blocked alloc() return (throwing)
  };
  StagingRing(RingShape shape, std::unique_ptr<Memory> memory);
  ~StagingRing();  // joins the thread, frees the buffers
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  const RingShape& shape() const { return shape_; }
  // The buffers, once allocated: waits for the ring's thread (under `dog`; `file` names the load that
  // waits in a StallError) and rethrows its error. The first call's wait is kept in waited_seconds().
  const std::vector<uint8_t*>& buffers(Watchdog& dog, const std::string& file);
  void interrupt() noexcept;
  double init_seconds() const { return init_seconds_; }  // Memory::init (a CUDA context)
  double alloc_seconds() const { return alloc_seconds_; }  // the buffers
  double waited_seconds() const { return waited_seconds_; }  // how long the first load waited for them
  unsigned uses() const { return uses_; }  // calls of buffers(): loads served

 private:
  RingShape shape_;
  std::unique_ptr<Memory> memory_;
  std::vector<uint8_t*> buffers_;
  std::atomic<bool> ready_{false};
  std::exception_ptr error_;
  double init_seconds_ = 0, alloc_seconds_ = 0, waited_seconds_ = 0;
  unsigned uses_ = 0;
  std::thread thread_;
};

struct StreamOptions {
  bool direct = true;  // O_DIRECT for chunks not in the page cache
  std::function<void(uint64_t done, uint64_t total)> progress;  // bytes; called on one reader thread at a time
};

struct StreamStats {
  std::array<uint64_t, kReadPaths> bytes{};  // storage bytes by the path that brought them
  uint64_t file_bytes = 0;  // bytes read from files (gaps between small storages, O_DIRECT alignment)
  uint64_t chunks = 0, slots = 0, chunk_bytes = 0, readback_bytes = 0;
  unsigned threads = 0;
  double seconds = 0.0, readback_seconds = 0.0;
  double plan_seconds = 0.0;  // cutting the storages into chunks
};

// Where the streamed bytes go: one destination per storage, written from the ring. write, commit, done
// and read may be called from several reader threads at once, each with its own slots.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Before streaming, on the calling thread: the ring has `slots` slots (a device makes a stream and an
  // event for each).
  virtual void prepare(unsigned slots) { (void)slots; }
  // The destination of storage `storage` (index into StreamLoad::storages()); called for every storage
  // before the first write, on the calling thread, under the watchdog. Uninitialized: every byte is
  // written once.
  virtual void allocate(size_t storage, uint64_t nbytes) = 0;
  // Copies `len` bytes from `src` (inside the slot's staging memory) to the storage at `offset`; may
  // return before the copy is done: `src` stays untouched until done(slot).
  virtual void write(unsigned slot, size_t storage, uint64_t offset, const uint8_t* src, uint64_t len) = 0;
  // After the last write (or read) of a chunk: what done(slot) reports on.
  virtual void commit(unsigned slot) { (void)slot; }
  // Whether everything committed on the slot is done with its sources. Never blocks: the load polls it
  // under the watchdog (a device's event query).
  virtual bool done(unsigned slot) { (void)slot; return true; }
  // Readback: copies bytes [offset, offset+len) of tensor `t` (a view of storage `storage`) in row-major
  // order, as t.contiguous() holds them, into `dst` (the slot's staging memory); done at done(slot).
  virtual void read(unsigned slot, size_t storage, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) = 0;
  // Every byte of `t` has been read back (a contiguous copy made for it may go).
  virtual void read_done(const Tensor& t) { (void)t; }
  // From the watchdog's thread when a call outran --limit stall-seconds: a call blocked in the sink
  // returns, throwing, as soon as it can. Must not block.
  virtual void interrupt() noexcept {}
  // After an error: waits (boundedly) for what is in flight, then frees every destination. Never throws.
  virtual void abort() noexcept = 0;
};

// One load: the storages of `tensors` (nullptr entries, and tensors that are not materialized strided
// tensors with bytes, are left out), planned into chunks.
class StreamLoad {
 public:
  // Checks every tensor against its storage (InputError naming it when a view lies outside).
  StreamLoad(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors);
  ~StreamLoad();
  StreamLoad(const StreamLoad&) = delete;
  StreamLoad& operator=(const StreamLoad&) = delete;

  const std::vector<const Storage*>& storages() const { return storages_; }
  // Index into storages() of tensors[k]'s storage, or SIZE_MAX when it is left out.
  size_t storage_of(size_t k) const { return tensor_storage_[k]; }
  uint64_t total_bytes() const { return total_; }

  // Allocates every storage in the sink and streams every byte into it through `ring`, every wait on the
  // sink bounded by `dog`. On any error the sink is aborted (destinations freed), every thread joined, and
  // the error rethrown: an InputError names the file, the member and the offset, a StallError the stage.
  void run(StreamSink& sink, StagingRing& ring, Watchdog& dog, const StreamOptions& o, StreamStats* stats = nullptr);
  // After run(): the CRC-32 of every tensor's values (zlib.crc32 of t.contiguous() bytes) as the sink
  // holds them, read back through the ring; nullopt for tensors left out.
  std::vector<std::optional<uint32_t>> readback_crc(StreamSink& sink, StagingRing& ring, Watchdog& dog,
                                                    const StreamOptions& o, StreamStats* stats = nullptr);
  // The file a load names in its errors (the checkpoint's path).
  const std::string& path() const { return path_; }

  struct Plan;

 private:
  std::string path_;
  std::vector<const Tensor*> tensors_;
  std::vector<const Storage*> storages_;
  std::vector<size_t> tensor_storage_;
  uint64_t total_ = 0;
  std::unique_ptr<Plan> plan_;
};

// Host memory as the destination: every storage a plain allocation; the core's tests' sink.
class CpuSink : public StreamSink {
 public:
  void allocate(size_t storage, uint64_t nbytes) override;
  void write(unsigned slot, size_t storage, uint64_t offset, const uint8_t* src, uint64_t len) override;
  void read(unsigned slot, size_t storage, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) override;
  void abort() noexcept override;

  const uint8_t* data(size_t storage) const { return storages_.at(storage).get(); }
  uint64_t size(size_t storage) const { return sizes_.at(storage); }
  size_t allocated() const;  // storages still held
  uint64_t written() const { return written_; }  // bytes written to storages, in all

 private:
  std::vector<std::unique_ptr<uint8_t[]>> storages_;
  std::vector<uint64_t> sizes_;
  std::atomic<uint64_t> written_{0};
};

// Bytes [offset, offset+len) of tensor `t` in row-major order (as t.contiguous() holds them) from its
// storage's bytes into `dst`: a host sink's read().
void read_rows(const Tensor& t, const uint8_t* storage, uint64_t offset, uint8_t* dst, uint64_t len);

// Plain host memory for a StagingRing (aligned_alloc): the CPU's ring.
std::unique_ptr<StagingRing::Memory> host_ring_memory();

}  // namespace ckpt
