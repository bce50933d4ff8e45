#include "remote/remote.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/text.h"
#include "core/vfs.h"
#include "remote/http.h"
#include "remote/listing.h"
#include "remote/remote_file.h"

namespace ckpt::remote {

namespace {

constexpr uint64_t kMaxListing = 16ull << 20;  // one page of a listing (the Hub's and S3's: 1000 entries, < 1 MiB)
constexpr uint64_t kMaxPages = 10000;
constexpr uint64_t kMaxListingBytes = 128ull << 20;  // all pages of one listing
// Files and folders of one repo: model repos hold at most a few thousand; 200k keeps an endless listing
// within ~30 MB.
constexpr size_t kMaxListingEntries = 200'000;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string home() { return env("HOME"); }

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string s;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    s.append(buf, static_cast<size_t>(in.gcount()));
    if (s.size() > (1 << 20)) break;  // a credentials file, not a dump
  }
  return s;
}

// A path inside a repo or bucket as a listing gives it: no empty, "." or ".." component.
using detail::next_link;  // the pure parsing, in listing.cc (fuzz_remote)
using detail::safe_relative;

// An INI file as the AWS CLI reads ~/.aws/credentials and ~/.aws/config: [section] then key = value.
std::map<std::string, std::string> ini_section(const std::string& path, const std::string& section) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_small_file(path));
  std::string line, current;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || current != section) continue;
    out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

// --- Hugging Face ---------------------------------------------------------------------------------------

std::string hf_endpoint() {
  std::string e = env("HF_ENDPOINT");
  if (e.empty()) e = "https://huggingface.co";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

// huggingface_hub's order: HF_TOKEN, then the token file (HF_TOKEN_PATH, else HF_HOME/token, HF_HOME being
// $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface).
std::string hf_token() {
  if (std::string t = trim(env("HF_TOKEN")); !t.empty()) return t;
  if (std::string t = trim(env("HUGGING_FACE_HUB_TOKEN")); !t.empty()) return t;
  std::string path = env("HF_TOKEN_PATH");
  if (path.empty()) {
    std::string hf_home = env("HF_HOME");
    if (hf_home.empty()) {
      std::string cache = env("XDG_CACHE_HOME");
      if (cache.empty() && !home().empty()) cache = home() + "/.cache";
      if (!cache.empty()) hf_home = cache + "/huggingface";
    }
    if (!hf_home.empty()) path = hf_home + "/token";
  }
  return path.empty() ? "" : trim(read_small_file(path));
}

struct RepoTree {
  std::map<std::string, uint64_t> files;  // path -> size
  std::set<std::string> dirs;  // every folder, "" (the root) included
};

// --- S3 -------------------------------------------------------------------------------------------------

struct S3Config {
  std::string endpoint;  // AWS_ENDPOINT_URL(_S3): path-style; "" for AWS itself
  std::string region;
  std::shared_ptr<Auth> auth;  // null: unsigned requests (a public bucket)
};

S3Config s3_config() {
  S3Config c;
  c.endpoint = env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = env("AWS_ENDPOINT_URL");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  std::string profile = env("AWS_PROFILE");
  if (profile.empty()) profile = env("AWS_DEFAULT_PROFILE");
  if (profile.empty()) profile = "default";
  std::string creds_path = env("AWS_SHARED_CREDENTIALS_FILE");
  if (creds_path.empty() && !home().empty()) creds_path = home() + "/.aws/credentials";
  std::string config_path = env("AWS_CONFIG_FILE");
  if (config_path.empty() && !home().empty()) config_path = home() + "/.aws/config";
  const auto creds = creds_path.empty() ? std::map<std::string, std::string>{} : ini_section(creds_path, profile);
  const auto config =
      config_path.empty() ? std::map<std::string, std::string>{} : ini_section(config_path, profile == "default" ? "default" : "profile " + profile);
  auto pick = [&](const char* key) {
    if (auto it = creds.find(key); it != creds.end()) return it->second;
    if (auto it = config.find(key); it != config.end()) return it->second;
    return std::string();
  };
  c.region = env("AWS_REGION");
  if (c.region.empty()) c.region = env("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = pick("region");
  if (c.region.empty()) c.region = "us-east-1";
  std::string key = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY"), token = env("AWS_SESSION_TOKEN");
  if (key.empty() || secret.empty()) {
    key = pick("aws_access_key_id");
    secret = pick("aws_secret_access_key");
    token = pick("aws_session_token");
  }
  const std::string hint =
      "check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or AWS_PROFILE in ~/.aws/credentials) and AWS_REGION";
  if (!key.empty() && !secret.empty() && env("AWS_NO_SIGN_REQUEST").empty()) {
    c.auth = std::make_shared<Auth>();
    c.auth->sigv4 = "aws:amz:" + c.region + ":s3";
    c.auth->userpwd = key + ":" + secret;
    c.auth->session_token = token;
    c.auth->hint = hint;
  } else {
    c.auth = std::make_shared<Auth>();
    c.auth->hint = "no AWS credentials were found: " + hint;
  }
  return c;
}

// The object's URL: path-style on a given endpoint (S3-compatible stores) or for a bucket whose name has a
// dot (a virtual host would not match AWS's certificate), virtual-hosted on AWS otherwise.
std::string s3_url(const S3Config& c, const std::string& bucket, const std::string& key_or_query) {
  if (!c.endpoint.empty()) return c.endpoint + "/" + bucket + "/" + key_or_query;
  if (bucket.find('.') != std::string::npos) return fmt::format("https://s3.{}.amazonaws.com/{}/{}", c.region, bucket, key_or_query);
  return fmt::format("https://{}.s3.{}.amazonaws.com/{}", bucket, c.region, key_or_query);
}

std::string xml_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    const std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      const bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      const std::string digits(ent.substr(hex ? 2 : 1));
      char* end = nullptr;
      const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (digits.empty() || *end || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        out += s.substr(i, semi - i + 1);
      } else {
        append_utf8(out, static_cast<uint32_t>(cp));
      }
    } else {
      out += s.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

// The text of each <tag>...</tag> inside [from, to) of `xml`, in order.
std::vector<std::pair<size_t, size_t>> elements(const std::string& xml, const std::string& tag, size_t from, size_t to) {
  std::vector<std::pair<size_t, size_t>> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t pos = from;
  while (pos < to) {
    const size_t a = xml.find(open, pos);
    if (a == std::string::npos || a >= to) break;
    const size_t b = xml.find(close, a + open.size());
    if (b == std::string::npos || b + close.size() > to) break;
    out.emplace_back(a + open.size(), b);
    pos = b + close.size();
  }
  return out;
}

class RemoteFs : public vfs::Remote {
 public:
  bool handles(std::string_view path) const override { return backend(path) != nullptr; }

  vfs::Kind kind(const std::string& path) override { return (this->*backend(path)->kind)(path); }

  std::vector<vfs::Entry> list(const std::string& dir) override {
    std::vector<vfs::Entry> out = (this->*backend(dir)->list)(dir);
    std::sort(out.begin(), out.end(), [](const vfs::Entry& a, const vfs::Entry& b) { return a.name < b.name; });
    return out;
  }

  std::shared_ptr<MappedFile> open(const std::string& path) override {
    // A file still open (a shard the reader holds, opened again by the scan) is the same file: its
    // cache, no second first range.
    // A file that failed to open fails again without a request (each failure requested once: a
    // summary that names a file's pickles after its read error opens it a second time).
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = open_.find(path); it != open_.end())
        if (auto f = it->second.lock()) return f;
    }
    auto f = once("file|" + path, [&] {
      FileSpec spec;
      spec.display = display_url(path);
      (this->*backend(path)->file)(path, spec);
      return MappedFile::from_source(RemoteFile::open(std::move(spec)), display_url(path));
    });
    std::lock_guard<std::mutex> lock(mu_);
    open_[path] = f;
    return f;
  }

 private:
  // The three remote schemes, each by what its paths start with: how a path is a file or a folder, a
  // folder's entries, and what a file's requests are (its URL, credentials and, where a listing said it,
  // its size).
  struct Backend {
    std::string_view prefix;
    vfs::Kind (RemoteFs::*kind)(const std::string& path);
    std::vector<vfs::Entry> (RemoteFs::*list)(const std::string& dir);
    void (RemoteFs::*file)(const std::string& path, FileSpec& spec);
  };
  static const Backend* backend(std::string_view path) {
    static constexpr Backend kBackends[] = {
        {"hf://", &RemoteFs::hf_kind, &RemoteFs::hf_list, &RemoteFs::hf_file},
        {"s3://", &RemoteFs::s3_kind, &RemoteFs::s3_list_dir, &RemoteFs::s3_file},
        {"https://", &RemoteFs::url_kind, &RemoteFs::url_list, &RemoteFs::url_file},
        {"http://", &RemoteFs::url_kind, &RemoteFs::url_list, &RemoteFs::url_file},
    };
    for (const Backend& b : kBackends)
      if (path.substr(0, b.prefix.size()) == b.prefix) return &b;
    return nullptr;
  }

  // --- hf:// ---
  vfs::Kind hf_kind(const std::string& path) {
    const HfPath p = parse_hf(path);
    const RepoTree& t = tree(p, path);
    if (t.files.count(p.path)) return vfs::Kind::File;
    return t.dirs.count(p.path) ? vfs::Kind::Dir : vfs::Kind::Missing;
  }

  std::vector<vfs::Entry> hf_list(const std::string& dir) {
    std::vector<vfs::Entry> out;
    const HfPath p = parse_hf(dir);
    const RepoTree& t = tree(p, dir);
    if (!t.dirs.count(p.path)) throw InputError(dir, fmt::format("no folder '{}' in {} at revision {}", p.path, p.repo, p.revision));
    const std::string prefix = p.path.empty() ? "" : p.path + "/";
    for (const auto& [f, size] : t.files)
      if (f.rfind(prefix, 0) == 0 && f.find('/', prefix.size()) == std::string::npos) out.push_back({f.substr(prefix.size()), false, size});
    for (const std::string& d : t.dirs)
      if (!d.empty() && d.size() > prefix.size() && d.rfind(prefix, 0) == 0 && d.find('/', prefix.size()) == std::string::npos)
        out.push_back({d.substr(prefix.size()), true, 0});
    return out;
  }

  void hf_file(const std::string& path, FileSpec& spec) {
    const HfPath p = parse_hf(path);
    const RepoTree& t = tree(p, path);
    auto it = t.files.find(p.path);
    if (it == t.files.end()) {
      if (t.dirs.count(p.path)) throw InputError(path, "is a folder of the repo, not a file");
      throw InputError(path, fmt::format("no file '{}' in {} at revision {}", p.path, p.repo, p.revision));
    }
    spec.size = it->second;
    spec.url = fmt::format("{}/{}{}/resolve/{}/{}", hf_endpoint(), p.kind == "models" ? "" : p.kind + "/", p.repo,
                           url_encode(p.revision, false), url_encode(p.path, true));
    spec.auth = hf_auth(p);
  }

  // --- s3:// ---
  vfs::Kind s3_kind(const std::string& path) {
    const S3Path p = parse_s3(path);
    if (p.key.empty() || p.key.back() == '/') {
      // A folder is listed to be known (an empty or missing prefix is no folder); its objects are
      // then known files, found beside one another as on disk.
      try {
        const S3List& l = s3_list(p, path);
        return l.files.empty() && l.dirs.empty() ? vfs::Kind::Missing : vfs::Kind::Dir;
      } catch (const InputError&) {
        return vfs::Kind::Missing;
      }
    }
    // A key of a folder already listed is answered from the listing; any other key is read, not looked
    // for (one request for one object, and no s3:ListBucket needed).
    const size_t slash = p.key.rfind('/');
    const std::string parent = p.bucket + "/" + (slash == std::string::npos ? "" : p.key.substr(0, slash + 1));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = s3_lists_.find(parent);
    if (it == s3_lists_.end()) return vfs::Kind::Unknown;
    if (it->second.files.count(p.key)) return vfs::Kind::File;
    return it->second.dirs.count(p.key + "/") ? vfs::Kind::Dir : vfs::Kind::Missing;
  }

  std::vector<vfs::Entry> s3_list_dir(const std::string& dir) {
    std::vector<vfs::Entry> out;
    S3Path p = parse_s3(dir);
    if (!p.key.empty() && p.key.back() != '/') p.key += '/';
    const S3List& l = s3_list(p, dir);
    for (const auto& [k, size] : l.files) out.push_back({k.substr(p.key.size()), false, size});
    for (const std::string& d : l.dirs) out.push_back({d.substr(p.key.size(), d.size() - p.key.size() - 1), true, 0});
    return out;
  }

  void s3_file(const std::string& path, FileSpec& spec) {
    const S3Path p = parse_s3(path);
    if (p.key.empty() || p.key.back() == '/') {
      s3_list(p, path);  // a listing that failed says why (its failure, kept, is not requested again)
      throw InputError(path, "is a prefix (a folder), not an object");
    }
    const S3Config& c = s3();
    spec.url = s3_url(c, p.bucket, url_encode(p.key, true));
    spec.auth = c.auth;
    const size_t slash = p.key.rfind('/');
    const std::string prefix = slash == std::string::npos ? "" : p.key.substr(0, slash + 1);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = s3_lists_.find(p.bucket + "/" + prefix); it != s3_lists_.end())
      if (auto f = it->second.files.find(p.key); f != it->second.files.end()) spec.size = f->second;
  }

  // --- http(s):// ---
  vfs::Kind url_kind(const std::string&) { return vfs::Kind::Unknown; }

  std::vector<vfs::Entry> url_list(const std::string& dir) {
    throw InputError(dir, "an http(s) URL names one file and cannot be listed (hf:// and s3:// folders can)");
  }

  void url_file(const std::string& path, FileSpec& spec) { spec.url = path; }

  void remember_failure(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_.emplace(path, std::current_exception());
  }

  // One Auth per repo, the token read once (HF_TOKEN or its file), not once per file opened.
  std::shared_ptr<const Auth> hf_auth(const HfPath& p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!token_read_) {
      token_ = hf_token();
      token_read_ = true;
    }
    auto& a = hf_auths_[p.repo];
    if (a) return a;
    a = std::make_shared<Auth>();
    a->bearer = token_;
    a->hint = a->bearer.empty() ? fmt::format("{} may be gated or private: set HF_TOKEN to a token with access to it", p.repo)
                                : fmt::format("the token in HF_TOKEN may have no access to {}", p.repo);
    return a;
  }

  // A failure (of a listing, of a file's first request), kept: each failure is requested once per run.
  template <typename F>
  auto once(const std::string& key, F&& list) -> decltype(list()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = failed_.find(key); it != failed_.end()) std::rethrow_exception(it->second);
    }
    try {
      return list();
    } catch (const InputError&) {
      remember_failure(key);
      throw;
    } catch (const EnvironmentError&) {
      remember_failure(key);
      throw;
    }
  }

  const RepoTree& tree(const HfPath& p, const std::string& url) {
    const std::string key = fmt::format("{}|{}|{}|{}", hf_endpoint(), p.kind, p.repo, p.revision);
    std::lock_guard<std::mutex> lock(tree_mu_);  // one listing per repo, whatever the threads
    if (auto it = trees_.find(key); it != trees_.end()) return it->second;
    return once("tree|" + key, [&]() -> const RepoTree& { return list_tree(p, url, key); });
  }

  const RepoTree& list_tree(const HfPath& p, const std::string& url, const std::string& key) {
    const auto auth = hf_auth(p);
    const std::string display = fmt::format("hf://{}{}@{}", p.kind == "models" ? "" : p.kind + "/", p.repo, p.revision);
    RepoTree t;
    t.dirs.insert("");
    std::string next = fmt::format("{}/api/{}/{}/tree/{}?recursive=true", hf_endpoint(), p.kind, p.repo, url_encode(p.revision, false));
    uint64_t listed = 0;  // bytes of the pages so far
    for (uint64_t page = 0; !next.empty(); ++page) {
      if (page >= kMaxPages) throw InputError(display, fmt::format("the repo's listing has more than {} pages", kMaxPages));
      Request r;
      r.url = next;
      r.display = display_url(url) + " (listing " + display_url(next) + ")";
      r.auth = auth.get();
      r.max_body = kMaxListing;
      r.stats = vfs::current_transfer().get();
      Response resp;
      try {
        resp = get(r);
      } catch (const InputError& e) {
        // A missing repo or revision is a 404 (401 when not logged in, as the Hub hides private repos).
        throw InputError(url, fmt::format("cannot list {} at revision {}: {}", p.repo, p.revision, e.what()));
      }
      detail::hf_listing_page(resp.body, r.display, t.files, t.dirs);
      listed += resp.body.size();
      if (listed > kMaxListingBytes || t.files.size() + t.dirs.size() > kMaxListingEntries)
        throw InputError(display, fmt::format("the repo's listing exceeds {} entries or {} bytes: refused", kMaxListingEntries,
                                              kMaxListingBytes));
      next = next_link(resp.link);
      if (!next.empty() && next.front() == '/') next = origin_of(hf_endpoint()) + next;
      // The token goes to the endpoint only: a next page elsewhere is refused, not fetched with it.
      if (!next.empty() && origin_of(next) != origin_of(hf_endpoint()))
        throw InputError(display, fmt::format("the listing's next page is on another host ({}): refused (HF_TOKEN is for {})",
                                              display_url(origin_of(next)), display_url(origin_of(hf_endpoint()))));
    }
    return trees_.emplace(key, std::move(t)).first->second;
  }

  struct S3List {
    std::map<std::string, uint64_t> files;  // full keys
    std::set<std::string> dirs;  // full prefixes, ending '/'
  };

  const S3Config& s3() {
    std::call_once(s3_once_, [&] { s3_ = s3_config(); });
    return s3_;
  }

  const S3List& s3_list(const S3Path& p, const std::string& url) {
    const std::string key = p.bucket + "/" + p.key;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = s3_lists_.find(key); it != s3_lists_.end()) return it->second;
    }
    return once("s3|" + key, [&]() -> const S3List& { return list_s3(p, url, key); });
  }

  const S3List& list_s3(const S3Path& p, const std::string& url, const std::string& key) {
    const S3Config& c = s3();
    S3List l;
    std::string token;
    for (uint64_t page = 0;; ++page) {
      if (page >= kMaxPages) throw InputError(url, fmt::format("the listing has more than {} pages", kMaxPages));
      // The query in SigV4's canonical form: parameters sorted, values percent-encoded ('/' too).
      std::string query;
      if (!token.empty()) query += "continuation-token=" + url_encode(token, false) + "&";
      query += "delimiter=%2F&list-type=2";
      query += "&prefix=" + url_encode(p.key, false);
      Request r;
      r.url = s3_url(c, p.bucket, "?" + query);
      r.display = url + " (listing)";
      r.auth = c.auth.get();
      r.max_body = kMaxListing;
      r.stats = vfs::current_transfer().get();
      const Response resp = get(r);
      const S3Listing page_list = parse_s3_listing(resp.body, r.display);
      for (const auto& [k, size] : page_list.objects) {
        if (k.size() <= p.key.size() || k.rfind(p.key, 0) != 0) continue;  // the prefix's own marker object
        if (!safe_relative(k.substr(p.key.size()))) continue;
        l.files[k] = size;
      }
      for (const std::string& d : page_list.prefixes)
        if (d.size() > p.key.size() + 1 && d.rfind(p.key, 0) == 0 && safe_relative(d.substr(p.key.size(), d.size() - p.key.size() - 1)))
          l.dirs.insert(d);
      if (!page_list.truncated) break;
      if (page_list.next_token.empty()) throw InputError(r.display, "the listing is truncated but gives no continuation token");
      token = page_list.next_token;
    }
    std::lock_guard<std::mutex> lock(mu_);
    return s3_lists_.emplace(key, std::move(l)).first->second;
  }

  std::mutex tree_mu_, mu_;
  std::map<std::string, RepoTree> trees_;
  std::map<std::string, S3List> s3_lists_;
  std::map<std::string, std::weak_ptr<MappedFile>> open_;  // remote files still open, by path
  std::map<std::string, std::exception_ptr> failed_;  // files whose opening failed, by path; listings that failed
  std::once_flag s3_once_;
  bool token_read_ = false;  // token_: under mu_
  std::string token_;
  std::map<std::string, std::shared_ptr<Auth>> hf_auths_;
  S3Config s3_;
};

}  // namespace

HfPath parse_hf(const std::string& url) {
  const std::string bad = "expected hf://ORG/REPO[@REVISION][/PATH] (or hf://datasets/ORG/REPO..., hf://spaces/ORG/REPO...)";
  if (url.rfind("hf://", 0) != 0) throw InputError(url, bad);
  std::string rest = url.substr(5);
  HfPath p;
  p.kind = "models";
  for (const char* k : {"datasets/", "spaces/", "models/"}) {
    const std::string ks = k;
    if (rest.rfind(ks, 0) == 0) {
      p.kind = ks.substr(0, ks.size() - 1);
      rest = rest.substr(ks.size());
    }
  }
  const size_t s1 = rest.find('/');
  if (s1 == std::string::npos || s1 == 0) throw InputError(url, bad);
  size_t s2 = rest.find('/', s1 + 1);
  std::string repo_rev = rest.substr(0, s2);
  std::string tail = s2 == std::string::npos ? "" : rest.substr(s2 + 1);
  const size_t at = repo_rev.find('@');
  p.repo = repo_rev.substr(0, at);
  p.revision = "main";
  if (at != std::string::npos) {
    p.revision = repo_rev.substr(at + 1);
    // A pull request's or a conversion's ref has slashes of its own: refs/pr/N, refs/convert/NAME.
    if (p.revision == "refs") {
      const size_t a = tail.find('/');
      const size_t b = a == std::string::npos ? a : tail.find('/', a + 1);
      p.revision += "/" + tail.substr(0, b);
      tail = b == std::string::npos ? "" : tail.substr(b + 1);
    }
    if (p.revision.empty() || p.revision == "refs/") throw InputError(url, bad + ": empty revision");
  }
  while (!tail.empty() && tail.back() == '/') tail.pop_back();
  p.path = tail;
  const std::string org = p.repo.substr(0, p.repo.find('/'));
  const std::string name = p.repo.substr(p.repo.find('/') + 1);
  auto ok_name = [](const std::string& s) {
    return !s.empty() && s != "." && s != ".." &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
  };
  if (!ok_name(org) || !ok_name(name)) throw InputError(url, bad);
  if (!p.path.empty() && !safe_relative(p.path)) throw InputError(url, bad + ": the path has an empty, '.' or '..' part");
  return p;
}

S3Path parse_s3(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) throw InputError(url, "expected s3://BUCKET/KEY or s3://BUCKET/PREFIX/");
  const std::string rest = url.substr(5);
  S3Path p;
  const size_t slash = rest.find('/');
  p.bucket = rest.substr(0, slash);
  p.key = slash == std::string::npos ? "" : rest.substr(slash + 1);
  const bool ok = p.bucket.size() >= 3 && p.bucket.size() <= 63 && std::all_of(p.bucket.begin(), p.bucket.end(), [](unsigned char c) {
                    return std::islower(c) || std::isdigit(c) || c == '-' || c == '.' || c == '_';
                  });
  if (!ok) throw InputError(url, "expected s3://BUCKET/KEY or s3://BUCKET/PREFIX/ (a bucket name of 3 to 63 lowercase letters, digits, '.', '-')");
  return p;
}

S3Listing parse_s3_listing(const std::string& xml, const std::string& display) {
  S3Listing out;
  if (xml.find("<ListBucketResult") == std::string::npos) throw InputError(display, "the listing is not a ListBucketResult");
  for (auto [a, b] : elements(xml, "Contents", 0, xml.size())) {
    const auto k = elements(xml, "Key", a, b);
    const auto s = elements(xml, "Size", a, b);
    if (k.size() != 1 || s.size() != 1) throw InputError(display, "a <Contents> of the listing has no single Key and Size");
    const std::string size_text = xml.substr(s[0].first, s[0].second - s[0].first);
    if (size_text.empty() || size_text.size() > 19 || size_text.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(display, fmt::format("the listing gives a size '{}'", size_text.substr(0, 40)));
    out.objects.emplace_back(xml_decode(std::string_view(xml).substr(k[0].first, k[0].second - k[0].first)), std::stoull(size_text));
  }
  for (auto [a, b] : elements(xml, "CommonPrefixes", 0, xml.size()))
    for (auto [c, d] : elements(xml, "Prefix", a, b)) out.prefixes.push_back(xml_decode(std::string_view(xml).substr(c, d - c)));
  const auto t = elements(xml, "IsTruncated", 0, xml.size());
  out.truncated = !t.empty() && xml.compare(t[0].first, t[0].second - t[0].first, "true") == 0;
  const auto n = elements(xml, "NextContinuationToken", 0, xml.size());
  if (!n.empty()) out.next_token = xml_decode(std::string_view(xml).substr(n[0].first, n[0].second - n[0].first));
  return out;
}

void install(const Limits& limits) {
  configure(limits);  // libcurl itself starts with the first request (http.cc): a local input never pays for it
  static bool installed = false;
  if (!installed) {
    vfs::install(std::make_shared<RemoteFs>());
    installed = true;
  }
}

}  // namespace ckpt::remote
