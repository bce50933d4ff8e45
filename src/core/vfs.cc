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

std::function<std::shared_ptr<MappedFile>()>& stdin_source() {
  static std::function<std::shared_ptr<MappedFile>()> open;
  return open;
}

bool stdin_installed(std::string_view path) { return is_stdin(path) && stdin_source(); }

thread_local std::shared_ptr<Transfer> t_current;

}  // namespace

void install(std::shared_ptr<Remote> remote) { installed() = std::move(remote); }

void install_stdin(std::function<std::shared_ptr<MappedFile>()> open) { stdin_source() = std::move(open); }


Kind kind(const std::string& path) {
  if (Remote* r = remote_for(path)) return r->kind(path);
  if (is_url(path)) return Kind::Missing;
  if (stdin_installed(path)) return Kind::File;
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
    e.dir = it->is_directory(e2);  // a link followed, as stat does
    if (!e.dir && it->is_regular_file(e2)) e.size = it->file_size(e2);
    else if (!e.dir) e.other = true;
    out.push_back(std::move(e));
  }
  if (ec) throw InputError(dir, "cannot list directory: " + ec.message());
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

std::shared_ptr<MappedFile> open(const std::string& path) {
  if (Remote* r = remote_for(path)) return r->open(path);
  if (stdin_installed(path)) return stdin_source()();
  if (is_url(path))
    throw InputError(path, installed() ? "is a URL of a scheme ckpt does not read (https://, http://, hf://, s3:// are read)"
                                       : "is a URL, and this ckpt was built without remote inputs (no libcurl)");
  return MappedFile::open(path);
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
