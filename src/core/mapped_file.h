// A read-only memory map of a whole file. Pages are touched only when read, so mapping a 3 GB
// checkpoint to read its central directory and data.pkl costs a few pages, not 3 GB.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/bytes.h"

namespace ckpt {

class MappedFile {
 public:
  // Throws InputError (no offset) when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  // Maps the regular file open at `fd` (which stays open: the caller owns it), named `display_name` in
  // errors: stdin (`-`) spooled to an unlinked temporary file, which has no path to open.
  static std::shared_ptr<MappedFile> open_fd(int fd, const std::string& display_name);
  // Wraps bytes already in memory (tests, fuzzers); `display_name` is used in errors.
  static std::shared_ptr<MappedFile> from_memory(std::string bytes, const std::string& display_name);
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
};

}  // namespace ckpt
