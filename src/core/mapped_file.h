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

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  std::string owned_;
  std::shared_ptr<const Origin> origin_;
};

}  // namespace ckpt
