#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace ckpt {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path, std::string("cannot open: ") + std::strerror(errno));
  try {
    auto f = open_fd(fd, path);
    f->reopen_path_ = path;
    ::close(fd);
    return f;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::shared_ptr<MappedFile> MappedFile::open_fd(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw InputError(path, S_ISDIR(st.st_mode) ? "is a directory, not a checkpoint file" : "is not a regular file");
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->reopen_path_ = "/proc/self/fd/" + std::to_string(fd);
  f->dev_ = static_cast<uint64_t>(st.st_dev);
  f->ino_ = static_cast<uint64_t>(st.st_ino);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) throw InputError(path, std::string("cannot map: ") + std::strerror(errno));
    f->data_ = static_cast<const uint8_t*>(p);
    f->mapped_ = true;
  }
  f->origin_ = std::make_shared<Origin>(Origin{path, ""});
  return f;
}

std::shared_ptr<MappedFile> MappedFile::from_memory(std::string bytes, const std::string& display_name) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = display_name;
  f->owned_ = std::move(bytes);
  f->data_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  f->size_ = f->owned_.size();
  f->origin_ = std::make_shared<Origin>(Origin{display_name, ""});
  return f;
}

std::shared_ptr<MappedFile> MappedFile::from_source(std::shared_ptr<FileSource> source, const std::string& display_name) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = display_name;
  f->data_ = source->base();
  f->size_ = source->size();
  f->source_ = std::move(source);
  f->origin_ = std::make_shared<Origin>(Origin{display_name, ""});
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

ByteView MappedFile::view() const { return ByteView(data_, size_, origin_, 0, source_.get()); }

void MappedFile::release(const uint8_t* ptr, uint64_t len) const {
  if (source_) {
    if (len && ptr >= data_ && ptr + len <= data_ + size_) source_->release(static_cast<uint64_t>(ptr - data_), len);
    return;
  }
  if (!mapped_ || len == 0 || ptr < data_ || ptr + len > data_ + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + len) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

uint64_t MappedFile::readable_from(const uint8_t* ptr) const {
  if (source_ || ptr < data_ || ptr > data_ + size_) return 0;  // a remote file's bytes are fetched in blocks
  const auto left = static_cast<uint64_t>(data_ + size_ - ptr);
  if (!mapped_) return left;
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return left + (page - size_ % page) % page;  // the last page's rest reads as zeros
}

void MappedFile::prefetch(const uint8_t* ptr, uint64_t len) const {
  if (source_) {
    if (len && ptr >= data_ && ptr + len <= data_ + size_) source_->ensure(ptr, len);
    return;
  }
  if (!mapped_ || len == 0 || ptr < data_ || ptr + len > data_ + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(ptr) + len;
#ifdef MADV_POPULATE_READ
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0) return;
#endif
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

void prefault(void* p, uint64_t len) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + len) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)len;
#endif
}

void MappedFile::advise_random() const {
  if (mapped_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_RANDOM);
}

bool MappedFile::resident(const uint8_t* ptr, uint64_t len) const {
  if (source_) return len == 0 || ptr < data_ || ptr + len > data_ + size_ || source_->present(static_cast<uint64_t>(ptr - data_), len);
  if (!mapped_ || len == 0 || ptr < data_ || ptr + len > data_ + size_) return true;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(ptr) + len;
  thread_local std::vector<unsigned char> pages;
  pages.resize((end - begin + page - 1) / page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, pages.data()) != 0) return false;
  for (unsigned char c : pages)
    if (!(c & 1)) return false;
  return true;
}

int MappedFile::reopen(bool direct) const {
  if (!mapped_) {
    errno = EINVAL;
    return -1;
  }
  const int fd = ::open(reopen_path_.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != dev_ || static_cast<uint64_t>(st.st_ino) != ino_) {
    ::close(fd);
    errno = ESTALE;
    return -1;
  }
  return fd;
}

void MappedFile::copy_out(uint8_t* dst, uint64_t len, uint64_t off) const {
  if (len == 0) return;
  if (mapped_ && !source_) {
    std::call_once(fd_once_, [&] { fd_ = reopen(false); });
    if (fd_ >= 0) {  // else (the path now names another file, no descriptor left): through the mapping
      for (uint64_t done = 0; done < len;) {
        const ssize_t got = ::pread(fd_, dst + done, static_cast<size_t>(len - done), static_cast<off_t>(off + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
          throw InputError(path_, "cannot read " + std::to_string(len - done) + " bytes at offset " + std::to_string(off + done) +
                                      ": " + (got < 0 ? std::strerror(errno) : "end of file"));
        done += static_cast<uint64_t>(got);
      }
      return;
    }
  }
  std::memcpy(dst, view().sub(off, len).data(), static_cast<size_t>(len));
}

HeaderReader::HeaderReader(const ByteView& v, const MappedFile* file) : v_(v), file_(file) {
  if (!file || !file->mapped() || file->remote()) return;
  const auto base = reinterpret_cast<uintptr_t>(file->view().address()), at = reinterpret_cast<uintptr_t>(v.address());
  if (at >= base && at - base <= file->size() && file->size() - (at - base) >= v.size()) at_ = at - base;
}

std::string HeaderReader::str(uint64_t off, uint64_t len) const {
  if (at_ == UINT64_MAX) return std::string(v_.str(off, len));
  (void)v_.sub(off, len, "string");  // the bounds error str() gives; nothing is read
  std::string out(len, '\0');
  read(reinterpret_cast<uint8_t*>(out.data()), len, off);
  return out;
}

void HeaderReader::read(uint8_t* dst, uint64_t len, uint64_t off) const {
  const uint64_t at = at_ + off;  // within the file: the callers checked the view's bounds
  if (len > kWindow) return file_->copy_out(dst, len, at);
  if (window_.empty() || at < window_at_ || at - window_at_ > window_.size() || window_.size() - (at - window_at_) < len) {
    window_.resize(static_cast<size_t>(std::min<uint64_t>(kWindow, file_->size() - at)));
    file_->copy_out(window_.data(), window_.size(), at);
    window_at_ = at;
  }
  std::memcpy(dst, window_.data() + (at - window_at_), static_cast<size_t>(len));
}

PageWindow::PageWindow(const MappedFile* file, uint64_t bytes) : bytes_(std::max<uint64_t>(bytes, 1)) {
  if (file && file->mapped() && !file->remote()) file_ = file;
}

void PageWindow::touch(const uint8_t* p, uint64_t n) {
  if (!file_ || n == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(p), b = a + n;
  const uintptr_t lo = lo_ == hi_ ? a : std::min(lo_, a), hi = lo_ == hi_ ? b : std::max(hi_, b);
  if (lo_ != hi_ && hi - lo > bytes_) {
    drop();
    lo_ = a;
    hi_ = b;
  } else {
    lo_ = lo;
    hi_ = hi;
  }
  if (n >= (64u << 10)) file_->prefetch(p, n);
}

void PageWindow::drop() {
  if (file_ && hi_ > lo_) {
    const uintptr_t table = table_bytes();
    const uintptr_t base = reinterpret_cast<uintptr_t>(file_->view().address()), end = base + file_->size();
    const uintptr_t lo = std::max(base, lo_ & ~(table - 1)), hi = std::min(end, (hi_ + table - 1) & ~(table - 1));
    file_->release(reinterpret_cast<const uint8_t*>(lo), hi - lo);
  }
  lo_ = hi_ = 0;
}

uintptr_t PageWindow::table_bytes() {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return page * (page / sizeof(void*));
}

uint64_t window_bytes(unsigned threads) {
  uint64_t w = PageWindow::table_bytes();
  while (w * 2 * std::max(1u, threads) <= (16ull << 20)) w *= 2;
  return w;
}

}  // namespace ckpt
