#include "core/error.h"

#include <fmt/format.h>

namespace ckpt {

std::string InputError::render() const {
  std::string out = file_;
  if (!member_.empty() || has_offset_) {
    out += ": ";
    out += member_.empty() ? "" : member_;
    if (has_offset_) out += fmt::format("+0x{:x}", offset_);
  }
  out += ": ";
  out += what();
  // One line, whatever bytes a hostile file put into names quoted in the message.
  std::string clean;
  for (unsigned char c : out) {
    if (c < 0x20 || c == 0x7f) clean += fmt::format("\\x{:02x}", c);
    else clean += static_cast<char>(c);
  }
  return clean;
}

}  // namespace ckpt
