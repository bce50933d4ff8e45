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
  return out;
}

}  // namespace ckpt
