#include "core/bytes.h"

#include <fmt/format.h>

namespace ckpt {

std::string ByteView::fmt_range(const char* what, uint64_t off, uint64_t len) {
  return fmt::format("{} [0x{:x}, +{}) lies outside the data", what, off, len);
}

std::string_view Cursor::line(const char* what) {
  const uint64_t start = pos_;
  const uint64_t n = v_.size();
  for (uint64_t i = start; i < n; ++i) {
    if (v_.data()[i] == '\n') {
      pos_ = i + 1;
      return std::string_view(reinterpret_cast<const char*>(v_.data()) + start, i - start);
    }
  }
  v_.fail(start, std::string(what) + " has no terminating newline");
}

}  // namespace ckpt
