// Bounded byte views. All parsing in ckpt goes through ByteView / Cursor: every read is checked
// against the view's end and a failed check throws InputError naming file, member and offset.
// This header is the only place that does raw pointer arithmetic on input bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace ckpt {

// Where a view's bytes come from: the file name and the member inside it ("" = the file itself).
struct Origin {
  std::string file;
  std::string member;
};

// Bytes that arrive on demand (a remote file: range requests into a block cache, vfs.h). A view over such
// bytes carries its Fetcher: every read through the view first makes the bytes it touches present, so a
// reader asks only for what it reads, and no read ever sees bytes that have not arrived. ensure() throws
// (InputError, EnvironmentError) when the bytes cannot be had.
class Fetcher {
 public:
  virtual ~Fetcher() = default;
  virtual void ensure(const uint8_t* p, uint64_t len) const = 0;
};

// Checked arithmetic on sizes and offsets that come from input.
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

class ByteView {
 public:
  ByteView() = default;
  ByteView(const uint8_t* data, uint64_t size, std::shared_ptr<const Origin> origin, uint64_t base = 0,
           const Fetcher* fetcher = nullptr)
      : data_(data), size_(size), origin_(std::move(origin)), base_(base), fetcher_(fetcher) {}

  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The view's first byte; every byte of the view is present (fetched) once this returns.
  const uint8_t* data() const {
    if (fetcher_) fetcher_->ensure(data_, size_);
    return data_;
  }
  // The same bytes, all fetched now: reads through the copy cost nothing more (a pickle walked byte by byte).
  ByteView fetched() const {
    if (!fetcher_) return *this;
    fetcher_->ensure(data_, size_);
    return ByteView(data_, size_, origin_, base_);
  }
  // Where the bytes start, without fetching them (pointer arithmetic and identity only, never a read).
  const uint8_t* address() const { return data_; }
  const Fetcher* fetcher() const { return fetcher_; }
  // Offset of byte 0 of this view inside its member (for error messages).
  uint64_t base() const { return base_; }
  const std::shared_ptr<const Origin>& origin() const { return origin_; }

  // A sub-view [off, off+len); throws when it does not fit.
  ByteView sub(uint64_t off, uint64_t len, const char* what = "range") const {
    uint64_t end;
    if (add_overflows(off, len, &end) || end > size_) fail(off, fmt_range(what, off, len));
    return ByteView(data_ + off, len, origin_, base_ + off, fetcher_);
  }
  // The same bytes seen as a new member (base offset reset): used for zip entries.
  ByteView as_member(std::string member) const {
    auto o = std::make_shared<Origin>(Origin{origin_ ? origin_->file : std::string(), std::move(member)});
    return ByteView(data_, size_, std::move(o), 0, fetcher_);
  }

  uint8_t u8(uint64_t off) const {
    if (off >= size_) fail(off, "read of 1 byte past the end");
    if (fetcher_) fetcher_->ensure(data_ + off, 1);
    return data_[off];
  }
  template <typename T>
  T le(uint64_t off) const {
    static_assert(std::is_integral_v<T> || std::is_floating_point_v<T>);
    uint64_t end;
    if (add_overflows(off, sizeof(T), &end) || end > size_)
      fail(off, "read of " + std::to_string(sizeof(T)) + " bytes past the end");
    if (fetcher_) fetcher_->ensure(data_ + off, sizeof(T));
    T v;
    std::memcpy(&v, data_ + off, sizeof(T));  // host is little-endian (checked in CMake)
    return v;
  }
  template <typename T>
  T be(uint64_t off) const {
    T v = le<T>(off);
    if constexpr (sizeof(T) == 8) {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      u = __builtin_bswap64(u);
      std::memcpy(&v, &u, 8);
    } else if constexpr (sizeof(T) == 4) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      u = __builtin_bswap32(u);
      std::memcpy(&v, &u, 4);
    }
    return v;
  }
  std::string_view str(uint64_t off, uint64_t len) const {
    ByteView s = sub(off, len, "string");
    return std::string_view(reinterpret_cast<const char*>(s.data()), len);
  }
  bool starts_with(std::string_view prefix) const {
    if (size_ < prefix.size()) return false;
    if (fetcher_) fetcher_->ensure(data_, prefix.size());
    return std::memcmp(data_, prefix.data(), prefix.size()) == 0;
  }

  [[noreturn]] void fail(uint64_t off, const std::string& msg) const {
    throw InputError(origin_ ? origin_->file : std::string(), origin_ ? origin_->member : std::string(), base_ + off, msg);
  }

 private:
  static std::string fmt_range(const char* what, uint64_t off, uint64_t len);

  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::shared_ptr<const Origin> origin_;
  uint64_t base_ = 0;
  const Fetcher* fetcher_ = nullptr;  // null: every byte is present (a mapped or in-memory file)
};

// Sequential reader over a view.
class Cursor {
 public:
  explicit Cursor(ByteView v, uint64_t pos = 0) : v_(std::move(v)), pos_(pos) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return pos_ <= v_.size() ? v_.size() - pos_ : 0; }
  bool at_end() const { return pos_ >= v_.size(); }
  const ByteView& view() const { return v_; }
  void seek(uint64_t pos) { pos_ = pos; }

  uint8_t u8() { return v_.u8(pos_++); }
  template <typename T>
  T le() {
    T v = v_.le<T>(pos_);
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  T be() {
    T v = v_.be<T>(pos_);
    pos_ += sizeof(T);
    return v;
  }
  // `n` bytes; `what` names the thing whose length this is for the error message.
  ByteView take(uint64_t n, const char* what) {
    if (n > remaining())
      v_.fail(pos_, std::string(what) + " length " + std::to_string(n) + " exceeds " + std::to_string(remaining()) +
                        " remaining bytes");
    ByteView out = v_.sub(pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view take_str(uint64_t n, const char* what) {
    ByteView b = take(n, what);
    return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // Bytes up to (not including) the next '\n'; consumes the newline.
  std::string_view line(const char* what);
  [[noreturn]] void fail(const std::string& msg) const { v_.fail(pos_, msg); }
  [[noreturn]] void fail_at(uint64_t pos, const std::string& msg) const { v_.fail(pos, msg); }

 private:
  ByteView v_;
  uint64_t pos_;
};

}  // namespace ckpt
