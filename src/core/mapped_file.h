// A read-only memory map of a whole file. Pages are touched only when read, so mapping a 3 GB
// checkpoint to read its central directory and data.pkl costs a few pages, not 3 GB.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/bytes.h"

namespace ckpt {

// A file whose bytes arrive on demand (a remote file, src/remote): a buffer as large as the file, filled
// as ranges are asked for. ensure() (bytes.h's Fetcher) fills and keeps; read_at() copies a range
// straight to the caller, keeping nothing (a load streaming every byte once).
class FileSource : public Fetcher {
 public:
  virtual const uint8_t* base() const = 0;
  virtual uint64_t size() const = 0;
  virtual void read_at(uint8_t* dst, uint64_t len, uint64_t off) const = 0;
  // Forgets the whole blocks inside [off, off+len) (their memory goes; read again if asked again).
  virtual void release(uint64_t off, uint64_t len) const = 0;
  // Whether every byte of [off, off+len) is held.
  virtual bool present(uint64_t off, uint64_t len) const = 0;
};

class MappedFile {
 public:
  // Throws InputError (no offset) when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  // Maps the regular file open at `fd` (which stays open: the caller owns it), named `display_name` in
  // errors: stdin (`-`) spooled to an unlinked temporary file, which has no path to open.
  static std::shared_ptr<MappedFile> open_fd(int fd, const std::string& display_name);
  // Wraps bytes already in memory (tests, fuzzers); `display_name` is used in errors.
  static std::shared_ptr<MappedFile> from_memory(std::string bytes, const std::string& display_name);
  // A file served by `source` (a URL: `display_name` is what errors call it).
  static std::shared_ptr<MappedFile> from_source(std::shared_ptr<FileSource> source, const std::string& display_name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  ByteView view() const;
  // Asks the kernel to map [ptr, ptr+len) in now (MADV_POPULATE_READ, else MADV_WILLNEED): one call
  // instead of a page fault per 4 KiB when a load is about to read every byte. No-op for memory files.
  void prefetch(const uint8_t* ptr, uint64_t len) const;
  // Drops this process's mapping of the whole pages inside [ptr, ptr+len) (MADV_DONTNEED). The mapping is
  // read-only, so nothing is lost: the bytes stay in the page cache and fault back in on the next read.
  // Lets a load check 3 GB without holding 3 GB resident. No-op for memory files.
  void release(const uint8_t* ptr, uint64_t len) const;

  // Page faults in the mapping read only the page they need from here on (MADV_RANDOM), not the
  // readahead window around it (8 MiB on some disks): a load that reads tensor bytes with pread / O_DIRECT
  // must not pull the file through the page cache by touching the zip headers between them.
  void advise_random() const;
  // Whether the file is mapped (false for memory files, which have no file behind them).
  bool mapped() const { return mapped_; }
  // Whether the bytes come from a FileSource (a remote file): read_at() then streams them.
  bool remote() const { return source_ != nullptr; }
  // Copies [off, off+len) into `dst` (remote files only; throws as the source does).
  void read_at(uint8_t* dst, uint64_t len, uint64_t off) const { source_->read_at(dst, len, off); }
  // Whether every page of [ptr, ptr+len) is in the page cache (mincore; nothing is faulted in).
  // True for memory files.
  bool resident(const uint8_t* ptr, uint64_t len) const;
  // A new descriptor of the same file for pread (O_DIRECT when asked): the path opened again, checked to
  // be the same file (device and inode) as the one mapped. -1 with errno set when it cannot be
  // (memory files, O_DIRECT refused, the path now names another file: errno ESTALE).
  int reopen(bool direct) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  std::string reopen_path_;  // the path, or /proc/self/fd/N for open_fd
  uint64_t dev_ = 0, ino_ = 0;
  std::string owned_;
  std::shared_ptr<const Origin> origin_;
  std::shared_ptr<FileSource> source_;
};

}  // namespace ckpt
