#include "remote/http_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ckpt::remote::detail {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return std::string(s);
}

bool parse_u64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool entity_tag(std::string_view v) {
  if (v.rfind("W/", 0) == 0) v.remove_prefix(2);
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') return false;
  for (unsigned char c : v.substr(1, v.size() - 2))
    if (!(c == 0x21 || (c >= 0x23 && c <= 0x7e) || c >= 0x80)) return false;
  return true;
}

ContentRange parse_content_range(std::string_view s) {
  ContentRange r;
  if (s.rfind("bytes ", 0) != 0) return r;
  s.remove_prefix(6);
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return r;
  uint64_t v;
  if (parse_u64(s.substr(slash + 1), &v)) r.total = v;
  const std::string_view span = s.substr(0, slash);
  const size_t dash = span.find('-');
  if (dash == std::string_view::npos) return r;
  if (!parse_u64(span.substr(0, dash), &v)) return r;
  r.first = v;
  if (!parse_u64(span.substr(dash + 1), &v)) return r;
  r.last = v;
  r.has_range = true;
  return r;
}

std::string server_says(const std::string& body) {
  auto tag = [&](const char* name) -> std::string {
    const std::string open = fmt::format("<{}>", name), close = fmt::format("</{}>", name);
    const size_t a = body.find(open);
    if (a == std::string::npos) return "";
    const size_t b = body.find(close, a);
    return b == std::string::npos ? "" : body.substr(a + open.size(), std::min<size_t>(b - a - open.size(), 200));
  };
  std::string s;
  if (const std::string code = tag("Code"); !code.empty()) {
    s = code;
    if (const std::string msg = tag("Message"); !msg.empty()) s += ": " + msg;
  } else if (const size_t e = body.find("\"error\""); e != std::string::npos) {
    const size_t q1 = body.find('"', body.find(':', e) + 1);
    const size_t q2 = q1 == std::string::npos ? q1 : body.find('"', q1 + 1);
    if (q2 != std::string::npos) s = body.substr(q1 + 1, std::min<size_t>(q2 - q1 - 1, 200));
  }
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  return out;
}

bool http_date_chars(std::string_view v) {
  if (v.empty() || v.size() > 64) return false;
  return std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isalnum(c) || c == ' ' || c == ',' || c == ':' || c == '-'; });
}

}  // namespace ckpt::remote::detail
