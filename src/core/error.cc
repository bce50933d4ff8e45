#include "core/error.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>

#include "core/text.h"
#include "core/url.h"

namespace ckpt {

std::string InputError::render() const {
  std::string out = vfs::display(file_);  // a signed URL's signature is never shown
  if (!member_.empty() || has_offset_) {
    out += ": ";
    out += member_.empty() ? "" : member_;
    if (has_offset_) out += fmt::format("+0x{:x}", offset_);
  }
  out += ": ";
  out += what();
  // One line, whatever a hostile file put into the member name or the names quoted in the message;
  // the path too, which may come from a directory listing or a sharded index (visible: see text.h).
  return visible(out);
}

namespace {
struct LimitField {
  const char* name;
  uint64_t Limits::*field;
};
constexpr LimitField kLimitFields[] = {
    {"pickle-depth", &Limits::pickle_depth}, {"memo-entries", &Limits::memo_entries}, {"string-bytes", &Limits::string_bytes},
    {"pickle-ops", &Limits::pickle_ops},     {"pickle-bytes", &Limits::pickle_bytes}, {"zip-entries", &Limits::zip_entries},
    {"tensors", &Limits::tensors},           {"walk-nodes", &Limits::walk_nodes},     {"inflate-bytes", &Limits::inflate_bytes},
    {"stdin-bytes", &Limits::stdin_bytes},   {"connect-seconds", &Limits::connect_seconds}, {"stall-seconds", &Limits::stall_seconds},
    {"low-speed", &Limits::low_speed},       {"request-seconds", &Limits::request_seconds},
    {"retries", &Limits::retries},           {"download-bytes", &Limits::download_bytes}};
}  // namespace

std::string set_limit(Limits& limits, const std::string& name, const std::string& value) {
  for (const LimitField& f : kLimitFields) {
    if (name != f.name) continue;
    uint64_t v = 0, scale = 1;
    std::string digits = value;
    if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) scale = 1ull << 10;
    if (!digits.empty() && digits.back() == 'M') scale = 1ull << 20;
    if (!digits.empty() && digits.back() == 'G') scale = 1ull << 30;
    if (scale != 1) digits.pop_back();
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 15)
      return fmt::format("limit {}: '{}' is not a number", name, value);
    v = std::stoull(digits) * scale;
    if (v == 0) return fmt::format("limit {}: must be positive", name);
    limits.*f.field = v;
    return "";
  }
  return fmt::format("unknown limit '{}' (known: {})", name, describe_limits());
}

std::string describe_limits() {
  Limits d;
  std::string out;
  for (const LimitField& f : kLimitFields) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", f.name, d.*f.field);
  return out;
}

namespace {
std::atomic<int> g_output_errno{0};
}  // namespace

void note_output_errno(int err) {
  int none = 0;
  g_output_errno.compare_exchange_strong(none, err ? err : EIO);
}

int output_errno() { return g_output_errno.load(); }

void write_output(std::FILE* f, std::string_view bytes) {
  errno = 0;
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) note_output_errno(errno);
}

}  // namespace ckpt
