#include "core/vfs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace ckpt::vfs {

namespace {

std::shared_ptr<Remote>& installed() {
  static std::shared_ptr<Remote> r;
  return r;
}

Remote* remote_for(std::string_view path) {
  Remote* r = installed().get();
  return r && is_url(path) && r->handles(path) ? r : nullptr;
}

thread_local std::shared_ptr<Transfer> t_current;

}  // namespace

void install(std::shared_ptr<Remote> remote) { installed() = std::move(remote); }

bool is_url(std::string_view path) {
  const size_t colon = path.find("://");
  if (colon == std::string_view::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(path[0]))) return false;
  return std::all_of(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

Kind kind(const std::string& path) {
  if (Remote* r = remote_for(path)) return r->kind(path);
  if (is_url(path)) return Kind::Missing;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Kind::Missing;
  return S_ISDIR(st.st_mode) ? Kind::Dir : S_ISREG(st.st_mode) ? Kind::File : Kind::Missing;
}

std::vector<Entry> list(const std::string& dir) {
  if (Remote* r = remote_for(dir)) return r->list(dir);
  std::vector<Entry> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    Entry e;
    e.name = it->path().filename().string();
    std::error_code e2;
    e.dir = it->is_directory(e2);
    if (!e.dir && it->is_regular_file(e2)) e.size = it->file_size(e2);
    out.push_back(std::move(e));
  }
  if (ec) throw InputError(dir, "cannot list directory: " + ec.message());
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

std::shared_ptr<MappedFile> open(const std::string& path) {
  if (Remote* r = remote_for(path)) return r->open(path);
  if (is_url(path))
    throw InputError(path, installed() ? "is a URL of a scheme ckpt does not read (https://, http://, hf://, s3:// are read)"
                                       : "is a URL, and this ckpt was built without remote inputs (no libcurl)");
  return MappedFile::open(path);
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

std::string join(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  return dir.back() == '/' ? dir + std::string(name) : dir + "/" + std::string(name);
}

std::string parent(const std::string& path) {
  std::string p = path;
  // A URL's root (scheme://host) has no parent to step into.
  const size_t root = is_url(p) ? p.find('/', p.find("://") + 3) : 0;
  while (p.size() > 1 && p.back() == '/' && (root == std::string::npos || p.size() > root + 1)) p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos || (root != 0 && (root == std::string::npos || slash < root))) return "";
  return slash == 0 ? "/" : p.substr(0, slash);
}

std::string filename(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

namespace {
std::shared_ptr<Transfer>& process() {
  static std::shared_ptr<Transfer> p = std::make_shared<Transfer>();
  return p;
}
}  // namespace

namespace {
std::mutex g_unverified_mu;
std::vector<std::string> g_unverified;
}  // namespace

void note_unverified(const std::string& display) {
  std::lock_guard<std::mutex> lock(g_unverified_mu);
  if (std::find(g_unverified.begin(), g_unverified.end(), display) == g_unverified.end()) g_unverified.push_back(display);
}

std::vector<std::string> unverified() {
  std::lock_guard<std::mutex> lock(g_unverified_mu);
  return g_unverified;
}

std::shared_ptr<Transfer> current_transfer() { return t_current ? t_current : process(); }
const Transfer& process_transfer() { return *process(); }

TransferScope::TransferScope() : mine_(std::make_shared<Transfer>()), outer_(t_current) { t_current = mine_; }
TransferScope::~TransferScope() { t_current = outer_; }

}  // namespace ckpt::vfs
