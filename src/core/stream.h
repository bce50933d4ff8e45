// The streaming device load (`ckpt load --device cuda`): every byte of the loaded storages flows once from
// its file through a bounded ring of staging buffers into a sink that owns one destination per storage.
// No LibTorch here: the CUDA sink is in src/torch/cuda_sink.cc, the CPU sink below serves the tests.
//
//   file ──pread (page cache) / O_DIRECT (cold) / memcpy (memory)──▶ slot ──sink.write──▶ storage k
//                 │                                                     (async: the slot is
//                 └─ NaN / Inf of the chunk's tensor elements,           reused after sink.wait)
//                    counted by the thread that staged it
//
// Chunks are contiguous byte ranges of one file, at most `chunk_bytes` long: many small storages share one
// (the zip headers between them ride along), a storage larger than a chunk spans several, cut where the
// cut is both element- and page-aligned. Chunk i goes to one of T reader threads, each owning its own
// slots of the ring (ring_bytes / chunk_bytes of them), so a slot is reused only by the thread that
// filled it, after the sink says its writes are done. Where the sink can use file pages in place
// (cudaHostRegister of the mapping), a chunk in the page cache is offered to it instead of staged.
// Reading goes through the file descriptor, never the mapping (except in place), so a file truncated
// under the load is a short read with file, member and offset, not a SIGBUS, and the process holds no
// file pages: its memory is the ring.
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
#include <vector>

#include "core/checkpoint.h"
#include "core/storage.h"
#include "core/values.h"

namespace ckpt {

// How a chunk's bytes reached the ring.
enum class ReadPath : uint8_t {
  Cached,  // pread from the page cache (the chunk was resident)
  Direct,  // O_DIRECT pread, aligned, bypassing the page cache (the chunk was not resident)
  Buffered,  // pread, not resident, O_DIRECT refused by the filesystem (or turned off)
  InPlace,  // the mapped file pages handed to the sink (pinned in place), no staging copy
  Memory,  // bytes already in memory (DCP tensors assembled from their chunks, in-memory files)
  Remote  // HTTP range requests (a remote file: https://, hf://, s3://)
};
inline constexpr size_t kReadPaths = 6;
const char* to_string(ReadPath p);

struct StreamOptions {
  uint64_t chunk_bytes = 16ull << 20;  // one slot; at least 64 KiB, rounded down to 4 KiB
  uint64_t ring_bytes = 256ull << 20;  // slots = ring_bytes / chunk_bytes, at least one
  unsigned threads = 0;  // reader threads; 0: one per core, at most 16; never more than slots
  bool direct = true;  // O_DIRECT for chunks not in the page cache
  bool in_place = false;  // offer resident chunks to sink.pin() before staging them
  std::function<void(uint64_t done, uint64_t total)> progress;  // bytes; called on the calling thread only
};

struct StreamStats {
  std::array<uint64_t, kReadPaths> bytes{};  // storage bytes by the path that brought them
  uint64_t file_bytes = 0;  // bytes read from files (gaps between small storages, O_DIRECT alignment)
  uint64_t chunks = 0, slots = 0, chunk_bytes = 0, readback_bytes = 0;
  unsigned threads = 0;
  double seconds = 0.0, readback_seconds = 0.0;
};

// Where the streamed bytes go: one destination per storage, written from the ring. Every method may be
// called from several reader threads at once, each with its own slots.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Before streaming, on the calling thread: the ring has `slots` slots (a device makes a stream and an
  // event for each).
  virtual void prepare(unsigned slots) { (void)slots; }
  // Staging memory of slot `slot`: `bytes` bytes, 4096-aligned (pinned host memory for a device). Asked
  // for by the thread that owns the slot, the first time it stages a chunk there (so a ring whose chunks
  // are all pinned in place allocates none); the same memory on later calls.
  virtual uint8_t* staging(unsigned slot, uint64_t bytes) = 0;
  // The destination of storage `storage` (index into StreamLoad::storages()); called for every storage
  // before the first write, on the calling thread. Uninitialized: every byte is written once.
  virtual void allocate(size_t storage, uint64_t nbytes) = 0;
  // Copies `len` bytes from `src` (inside the slot's staging memory, or a range pinned by pin()) to the
  // storage at `offset`; may return before the copy is done: `src` stays untouched until wait(slot).
  virtual void write(unsigned slot, size_t storage, uint64_t offset, const uint8_t* src, uint64_t len) = 0;
  // After the last write of a chunk: what wait(slot) waits for.
  virtual void commit(unsigned slot) { (void)slot; }
  // Returns when the writes committed on the slot are done with their sources.
  virtual void wait(unsigned slot) { (void)slot; }
  // In place: makes [p, p+len) of a mapped file usable as a write source (cudaHostRegister read-only);
  // false: stage it instead. Released by unpin(slot) after wait(slot).
  virtual bool pin(unsigned slot, const uint8_t* p, uint64_t len) {
    (void)slot, (void)p, (void)len;
    return false;
  }
  virtual void unpin(unsigned slot) { (void)slot; }
  // Readback: copies bytes [offset, offset+len) of tensor `t` (a view of storage `storage`) in row-major
  // order, as t.contiguous() holds them, into `dst` (the slot's staging memory); done at wait(slot).
  virtual void read(unsigned slot, size_t storage, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) = 0;
  // Every byte of `t` has been read back (a contiguous copy made for it may go).
  virtual void read_done(const Tensor& t) { (void)t; }
  // Every write done (a device synchronized).
  virtual void finish() = 0;
  // After an error: waits for what is in flight, then frees every destination. Never throws.
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

  // Allocates every storage in the sink, streams every byte into it and returns the NaN / Inf counts of
  // each tensor (zero for those left out). On any error the sink is aborted (destinations freed), every
  // thread joined, and the error rethrown: an InputError names the file, the member and the offset.
  std::vector<ValueStats> run(StreamSink& sink, const StreamOptions& o, StreamStats* stats = nullptr);
  // After run(): the CRC-32 of every tensor's values (zlib.crc32 of t.contiguous() bytes) as the sink
  // holds them, read back through the ring; nullopt for tensors left out.
  std::vector<std::optional<uint32_t>> readback_crc(StreamSink& sink, const StreamOptions& o, StreamStats* stats = nullptr);

  struct Plan;

 private:
  std::vector<const Tensor*> tensors_;
  std::vector<const Storage*> storages_;
  std::vector<size_t> tensor_storage_;
  uint64_t total_ = 0;
  std::unique_ptr<Plan> plan_;
};

// Host memory as the destination: every storage a plain allocation. The tests' sink; `in_place` accepts
// every pin() (the mapping is read directly, as a registered range would be).
class CpuSink : public StreamSink {
 public:
  explicit CpuSink(bool in_place = false) : in_place_(in_place) {}
  void prepare(unsigned slots) override;
  uint8_t* staging(unsigned slot, uint64_t bytes) override;
  void allocate(size_t storage, uint64_t nbytes) override;
  void write(unsigned slot, size_t storage, uint64_t offset, const uint8_t* src, uint64_t len) override;
  bool pin(unsigned slot, const uint8_t* p, uint64_t len) override;
  void read(unsigned slot, size_t storage, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) override;
  void finish() override {}
  void abort() noexcept override;

  const uint8_t* data(size_t storage) const { return storages_.at(storage).get(); }
  uint64_t size(size_t storage) const { return sizes_.at(storage); }
  size_t allocated() const;  // storages still held
  uint64_t staging_bytes() const;
  uint64_t written() const { return written_; }  // bytes written to storages, in all

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  bool in_place_;
  std::vector<std::unique_ptr<uint8_t, Free>> slots_;
  std::vector<uint64_t> slot_bytes_;
  std::vector<std::unique_ptr<uint8_t[]>> storages_;
  std::vector<uint64_t> sizes_;
  std::atomic<uint64_t> written_{0};
};

}  // namespace ckpt
