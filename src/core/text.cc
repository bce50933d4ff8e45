#include "core/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ckpt {

std::string human_count(uint64_t number) {
  // lightning/pytorch/utilities/model_summary/model_summary.py get_human_readable_count
  static const char* labels[] = {" ", "K", "M", "B", "T"};
  const int digits = number > 0 ? static_cast<int>(std::floor(std::log10(static_cast<double>(number)))) + 1 : 1;
  int groups = std::min((digits + 2) / 3, 5);
  double x = static_cast<double>(number) * std::pow(10.0, -3 * (groups - 1));
  const int index = groups - 1;
  if (index < 1 || x >= 100) {
    // Python's f"{int(number):,d}" truncates toward zero
    uint64_t whole = static_cast<uint64_t>(x);
    std::string w = std::to_string(whole);
    for (int pos = static_cast<int>(w.size()) - 3; pos > 0; pos -= 3) w.insert(static_cast<size_t>(pos), ",");
    return w + " " + labels[index];
  }
  return fmt::format("{:.1f} {}", x, labels[index]);
}

std::string human_bytes(uint64_t n) {
  if (n < 1000) return fmt::format("{} B", n);
  static const char* units[] = {"kB", "MB", "GB", "TB", "PB"};
  double x = static_cast<double>(n);
  int u = -1;
  while (x >= 1000 && u < 4) {
    x /= 1000;
    ++u;
  }
  return fmt::format(x >= 100 ? "{:.0f} {}" : "{:.1f} {}", x, units[u]);
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

std::string join(const std::vector<std::string>& items, std::string_view sep, size_t most, std::string_view more) {
  std::string out;
  for (size_t k = 0; k < items.size() && k < most; ++k) {
    if (k) out.append(sep);
    out += items[k];
  }
  if (items.size() > most) {
    const size_t left = items.size() - most;
    out += fmt::vformat(more, fmt::make_format_args(left));
  }
  return out;
}

std::string json_text(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void put_string(std::string& out, std::string_view v) {
  // ASCII goes straight through; anything else takes nlohmann's path so that invalid UTF-8 from a pickle
  // becomes U+FFFD instead of broken JSON.
  bool simple = true;
  for (unsigned char c : v) simple &= c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
  if (simple) {
    out += '"';
    out.append(v);
    out += '"';
  } else {
    out += json_text(nlohmann::ordered_json(std::string(v)), -1);
  }
}

const char* severity_color(Severity sev, bool color) {
  if (!color) return "";
  return sev == Severity::Error ? "\x1b[1;31m" : sev == Severity::Warning ? "\x1b[1;33m" : "\x1b[1;36m";
}

std::string markdown_cell(std::string_view v) {
  std::string r;
  for (char c : v) r += c == '|' ? std::string("\\|") : std::string(1, c);
  return r;
}

const char* format_title(const Checkpoint& ck) {
  switch (ck.format) {
    case Format::TorchZip: return "torch.save zip";
    case Format::TorchLegacy: return "torch.save legacy stream (pre-1.6)";
    case Format::Lightning:
      return ck.container == Container::Zip ? "PyTorch Lightning checkpoint (torch.save zip)" : "PyTorch Lightning checkpoint";
    case Format::TorchScript: return "TorchScript archive";
    case Format::Pickle: return "pickle";
    case Format::Safetensors: return "safetensors";
    case Format::Dcp: return "torch.distributed.checkpoint directory";
    case Format::Sharded: return "sharded checkpoint (index + shards)";
    case Format::None: break;
  }
  return "unknown";
}

}  // namespace ckpt
