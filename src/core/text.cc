#include "core/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ckpt {

std::string grouped_count(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

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
  return x >= 100 ? fmt::format("{:.0f} {}", x, units[u]) : fmt::format("{:.1f} {}", x, units[u]);
}

std::string shape_text(std::span<const int64_t> s) {
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

namespace {

// The code point of the valid UTF-8 sequence at v[i] and its length (2 to 4), or length 0 when the
// bytes there are no valid sequence (Unicode's table 3-7: no overlong forms, no surrogates, nothing
// past U+10FFFF, nothing cut short). v[i] is not ASCII.
size_t utf8_at(std::string_view v, size_t i, uint32_t& cp) {
  const unsigned c = static_cast<unsigned char>(v[i]);
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range; the others are all 0x80-0xbf
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    lo = c == 0xe0 ? 0xa0 : 0x80;  // overlong below
    hi = c == 0xed ? 0x9f : 0xbf;  // surrogates above
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    lo = c == 0xf0 ? 0x90 : 0x80;  // overlong below
    hi = c == 0xf4 ? 0x8f : 0xbf;  // past U+10FFFF above
  } else {
    return 0;  // ASCII, a continuation byte, 0xc0 / 0xc1 (overlong two-byte forms), 0xf5-0xff
  }
  if (i + n > v.size()) return 0;
  cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const unsigned x = static_cast<unsigned char>(v[i + k]);
    if (x < (k == 1 ? lo : 0x80u) || x > (k == 1 ? hi : 0xbfu)) return 0;
    cp = cp << 6 | (x & 0x3f);
  }
  return n;
}

// Valid code points that still must not reach a terminal raw: C1 controls (U+009B is CSI) and the
// bidi controls: embeddings / overrides / isolates (Trojan Source) and the marks LRM, RLM, ALM, which
// are invisible and move the neutral characters around them.
bool hidden_code_point(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

bool printable_ascii(std::string_view v) {
  for (unsigned char c : v)
    if (c < 0x20 || c >= 0x7f) return false;
  return true;
}

// Appends the escaped form of `v` to `out`, one unit (a character as it is, or one escape) at a time,
// stopping before the unit that would take `out` past `most` bytes. Returns whether all of `v` went in.
bool put_visible(std::string& out, std::string_view v, size_t most) {
  static const char hex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < v.size()) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    char unit[8];
    size_t len = 0, used = 1;
    uint32_t cp = 0;
    if (c >= 0x20 && c < 0x7f) {
      unit[len++] = static_cast<char>(c);
    } else if (c >= 0x80 && (used = utf8_at(v, i, cp)) != 0) {
      if (hidden_code_point(cp)) {
        const char u[] = {'\\', 'u', hex[cp >> 12 & 15], hex[cp >> 8 & 15], hex[cp >> 4 & 15], hex[cp & 15]};
        for (char x : u) unit[len++] = x;
      } else {
        for (size_t k = 0; k < used; ++k) unit[len++] = v[i + k];
      }
    } else {
      used = 1;  // a control, DEL, or one byte of something that is not UTF-8: shown byte by byte
      const char x[] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
      for (char y : x) unit[len++] = y;
    }
    if (out.size() + len > most) return false;
    out.append(unit, len);
    i += used;
  }
  return true;
}

// JSON escapes for what nlohmann writes raw but visible() would not: DEL, C1 and bidi controls. In
// its output (valid UTF-8, ASCII outside strings) those bytes only occur inside strings.
std::string json_controls(std::string s) {
  size_t i = 0;
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x7f) ++i;
  if (i == s.size()) return s;
  std::string out(s, 0, i);
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = c;
    const size_t n = c < 0x80 ? 1 : utf8_at(s, i, cp);
    if (n == 0) {  // nlohmann's replace handler leaves none; U+FFFD all the same, never broken UTF-8
      out += "\xef\xbf\xbd";
      ++i;
    } else if (cp == 0x7f || hidden_code_point(cp)) {
      out += fmt::format("\\u{:04x}", cp);
      i += n;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace

bool is_visible(std::string_view v) {
  if (printable_ascii(v)) return true;
  std::string out;
  out.reserve(v.size());
  put_visible(out, v, std::numeric_limits<size_t>::max());
  return out == v;
}

std::string visible(std::string_view v) {
  if (printable_ascii(v)) return std::string(v);
  std::string out;
  out.reserve(v.size() + 8);
  put_visible(out, v, std::numeric_limits<size_t>::max());
  return out;
}

std::string visible_prefix(std::string_view v, size_t most, bool* cut) {
  std::string out;
  const bool all = put_visible(out, v, most);
  if (cut) *cut = !all;
  return out;
}

std::string json_text(const nlohmann::ordered_json& j, int indent) {
  return json_controls(j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

void put_string(std::string& out, std::string_view v) {
  // Printable ASCII goes straight through; anything else takes nlohmann's path so that invalid UTF-8
  // from a pickle becomes U+FFFD instead of broken JSON, and controls become escapes.
  bool simple = true;
  for (unsigned char c : v) simple &= c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
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
  const std::string shown = visible(v);
  if (shown.find('|') == std::string::npos) return shown;
  std::string r;
  for (char c : shown) r += c == '|' ? std::string("\\|") : std::string(1, c);
  return r;
}


void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | ((cp >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace ckpt
