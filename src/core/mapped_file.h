// A read-only memory map of a whole file. Pages are touched only when read, so mapping a 3 GB
// checkpoint to read its central directory and data.pkl costs a few pages, not 3 GB.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

// Maps the whole pages inside [p, p + len) of this process's own memory in now, writable
// (MADV_POPULATE_WRITE: one call instead of a page fault per 4 KiB), before a large array is filled. Does
// nothing where the kernel cannot (before Linux 5.14).
void prefault(void* p, uint64_t len);

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
  // How many bytes from `ptr` (inside the file) on may be read: to the end of the mapping's last page for a
  // mapped file (a parser that reads ahead in blocks needs no padded copy of a document that ends
  // there), to the end of the file for a memory file, none for a remote one.
  uint64_t readable_from(const uint8_t* ptr) const;
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
  // Copies [off, off+len) into `dst` (the caller has checked the bounds). A mapped file is read with
  // pread on a descriptor of its own (reopen, once, on first use), so that no page of the mapping is
  // touched: one page fault maps in a whole folio of the page cache (2 MiB for a file cached in large
  // folios), so a 30-byte zip header read through the mapping between two tensors would cost this
  // process 2 MiB of resident memory. Memory and remote files copy from view() (a remote block stays
  // cached, as after any read). Throws InputError when pread fails (the file shrank).
  void copy_out(uint8_t* dst, uint64_t len, uint64_t off) const;

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
  mutable std::once_flag fd_once_;
  mutable int fd_ = -1;  // copy_out's descriptor
};

// Small records scattered through a file (zip local headers between tensors) read through copy_out:
// le() and str() answer as the view's own le() and str() do, bounds errors included, without touching a
// page of the mapping. Over memory, a remote file, or a view outside `file`'s mapping, the view is read.
class HeaderReader {
 public:
  HeaderReader(const ByteView& v, const MappedFile* file);
  template <typename T>
  T le(uint64_t off) const {
    if (at_ == UINT64_MAX || off > v_.size() || v_.size() - off < sizeof(T)) return v_.le<T>(off);
    T x;
    read(reinterpret_cast<uint8_t*>(&x), sizeof(T), off);  // host is little-endian (CMake)
    return x;
  }
  std::string str(uint64_t off, uint64_t len) const;

 private:
  // Copies from a window of the file read with one pread (kWindow bytes from the first byte asked for):
  // the headers of a hundred small members cost one system call, a large member's one each.
  static constexpr uint64_t kWindow = 16 << 10;
  void read(uint8_t* dst, uint64_t len, uint64_t off) const;
  ByteView v_;
  const MappedFile* file_ = nullptr;
  uint64_t at_ = UINT64_MAX;  // file offset of the view's first byte; UINT64_MAX: read the view
  mutable std::vector<uint8_t> window_;
  mutable uint64_t window_at_ = 0;  // file offset of window_[0]
};

// A walk over a mapped file's bytes that keeps about `bytes` of them resident in this process, whatever
// it reads: touch() each range before reading it through the mapping; when the ranges touched since the
// last drop would span more than `bytes`, they are released first (MappedFile::release: the pages stay
// in the page cache). A pass over a 3 GB tensor holds one window of it, and a strided walk that jumps
// back and forth stays bounded too (a page it comes back to faults in again). A range of 64 KiB or more
// is mapped in with one call (prefetch). Nothing for memory or remote files (their callers fetch and
// keep) or nullptr. One walker per thread.
//
// A release covers whole page tables' spans (table_bytes(), 2 MiB with 4 KiB pages) around what was
// touched: one page fault maps in every page of its large folio, or of its fault-around range, that is
// not mapped yet, all within its page table, neighbours' bytes included. Released page by page, a
// window would leave those mapped behind it (measured: 1 GB resident for a 3 GB file read in 64 KiB
// windows). A neighbour's page released under another thread faults back in there, unchanged.
class PageWindow {
 public:
  PageWindow(const MappedFile* file, uint64_t bytes);
  ~PageWindow() { drop(); }
  PageWindow(const PageWindow&) = delete;
  PageWindow& operator=(const PageWindow&) = delete;
  uint64_t bytes() const { return bytes_; }
  void touch(const uint8_t* p, uint64_t n);
  // Releases every range touched so far.
  void drop();
  // The span of addresses one page table maps (page size x entries per table).
  static uintptr_t table_bytes();

 private:
  const MappedFile* file_ = nullptr;  // nullptr: nothing to do
  uint64_t bytes_;
  uintptr_t lo_ = 0, hi_ = 0;  // the span touched since the last drop (empty: lo_ == hi_)
};

// The default window of a pass over every byte on `threads` threads: the largest power of two of page
// tables (table_bytes()) that keeps them all within 16 MiB, at least one table each. 8 MiB on 2 cores:
// `check --values` of a 3 GB file then stays under 30 MiB resident. Past 8 threads the floor of one
// table each (and the folios mapped around a window's ends) makes it a few MiB per thread: 35 MiB for
// `check --values` on 16 threads, 87 for `diff --values`, which reads two files.
uint64_t window_bytes(unsigned threads);

// Calls fn(p, n) on [p, p+len) in consecutive pieces of at most w.bytes() (a multiple of `align`, the
// element size, and at least one element), each touched through `w` first. The pieces end at multiples
// of w.bytes() in the address space (to within an element), so that a window's page tables are its own.
template <typename Fn>
void for_each_window(PageWindow& w, const uint8_t* p, uint64_t len, uint64_t align, Fn&& fn) {
  const uint64_t piece = std::max<uint64_t>(align, w.bytes() / align * align);
  uint64_t n = (piece - reinterpret_cast<uintptr_t>(p) % piece) / align * align;  // to the next edge
  if (n == 0) n = piece;
  for (uint64_t at = 0; at < len; at += n, n = piece) {
    n = std::min(n, len - at);
    w.touch(p + at, n);
    fn(p + at, n);
  }
}

}  // namespace ckpt
