#include "core/url.h"

#include <algorithm>
#include <cctype>

namespace ckpt::vfs {

bool is_url(std::string_view path) {
  const size_t colon = path.find("://");
  if (colon == std::string_view::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(path[0]))) return false;
  return std::all_of(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

namespace {
std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

std::string display(const std::string& url) {
  if (!is_url(url)) return url;
  std::string u = url;
  const size_t scheme = u.find("://");
  if (scheme != std::string::npos) {
    const size_t host = scheme + 3;
    const size_t end = u.find_first_of("/?#", host);
    const size_t at = u.rfind('@', end == std::string::npos ? u.size() : end);
    if (at != std::string::npos && at >= host) u.erase(host, at + 1 - host);
  }
  const size_t q = u.find('?');
  if (q == std::string::npos) return u;
  std::string out = u.substr(0, q + 1);
  const size_t hash = u.find('#', q);
  const std::string query = u.substr(q + 1, hash == std::string::npos ? std::string::npos : hash - q - 1);
  size_t pos = 0;
  bool first = true;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    const std::string kv = query.substr(pos, amp - pos);
    const size_t eq = kv.find('=');
    const std::string key = lowered(kv.substr(0, eq));
    // Every value is redacted but those of a short list of keys known to be harmless: a secret's key can
    // be any name (sessionid, sv, sp, ...).
    bool secret = true;
    for (const char* s : {"revision", "rev", "ref", "branch", "download", "dl", "raw", "versionid", "version", "x-amz-date",
                          "x-amz-expires", "x-amz-signedheaders", "x-amz-algorithm", "expires", "response-content-type",
                          "response-content-disposition", "filename", "format", "partnumber"})
      if (key == s) secret = false;
    out += first ? "" : "&";
    out += secret && eq != std::string::npos ? kv.substr(0, eq) + "=REDACTED" : kv;
    first = false;
    pos = amp + 1;
  }
  return out;
}

}  // namespace ckpt::vfs
