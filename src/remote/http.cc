#include "remote/http.h"

// libcurl is opened on first use (dlopen), not linked: its ~30 libraries (OpenSSL, Kerberos, LDAP, SSH,
// ...) cost every ckpt process ~15 ms of start-up, and only a URL needs them. The declarations come from
// its header; the macros that type-check setopt would hide the functions.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>

#include "core/error.h"
#include "remote/http_parse.h"

namespace ckpt::remote {

namespace {

// The libcurl functions ckpt calls, from libcurl.so.4 (Debian's libcurl4; the ABI of libcurl 7.x and 8.x).
struct Api {
  decltype(&curl_global_init) global_init;
  decltype(&curl_share_init) share_init;
  decltype(&curl_share_setopt) share_setopt;
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
  decltype(&curl_url) url;
  decltype(&curl_url_set) url_set;
  decltype(&curl_url_get) url_get;
  decltype(&curl_url_cleanup) url_cleanup;
  decltype(&curl_free) free;
};

const Api& api() {
  static Api a;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      error = e ? e : "dlopen failed";
      return;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn && error.empty()) error = std::string("libcurl.so.4 has no ") + name;
    };
    get(a.global_init, "curl_global_init");
    get(a.share_init, "curl_share_init");
    get(a.share_setopt, "curl_share_setopt");
    get(a.easy_init, "curl_easy_init");
    get(a.easy_cleanup, "curl_easy_cleanup");
    get(a.easy_reset, "curl_easy_reset");
    get(a.easy_setopt, "curl_easy_setopt");
    get(a.easy_perform, "curl_easy_perform");
    get(a.easy_getinfo, "curl_easy_getinfo");
    get(a.easy_strerror, "curl_easy_strerror");
    get(a.slist_append, "curl_slist_append");
    get(a.slist_free_all, "curl_slist_free_all");
    get(a.url, "curl_url");
    get(a.url_set, "curl_url_set");
    get(a.url_get, "curl_url_get");
    get(a.url_cleanup, "curl_url_cleanup");
    get(a.free, "curl_free");
  });
  if (!error.empty())
    throw EnvironmentError(fmt::format("cannot load libcurl for remote inputs ({}): install libcurl4", error));
  return a;
}

Settings g_settings;
CURLSH* g_share = nullptr;
std::mutex g_share_locks[CURL_LOCK_DATA_LAST];

void share_lock(CURL*, curl_lock_data d, curl_lock_access, void*) { g_share_locks[d].lock(); }
void share_unlock(CURL*, curl_lock_data d, void*) { g_share_locks[d].unlock(); }

using detail::entity_tag;
using detail::http_date_chars;  // the pure parsing, in http_parse.cc (fuzz_remote)
using detail::lower;
using detail::parse_u64;
using detail::server_says;
using detail::trim;

// One transfer's state, filled by the callbacks.
struct Transfer {
  const Request* req = nullptr;
  long status = 0;
  std::string etag, last_modified, link, content_range, retry_after, location;
  uint64_t content_length = UINT64_MAX;
  uint64_t written = 0;  // body bytes taken
  std::string body;  // 200 body, or the first 4 KiB of an error body
  uint8_t* whole = nullptr;  // a 200 body's destination (Request::whole), whole_cap bytes
  uint64_t whole_cap = 0;
  // Why the write callback stopped the transfer: kNone while it runs on; kBadRange's words in `refused_why`.
  enum class Refusal { kNone, kChanged, kTooLarge, kFailure, kBadRange } refused = Refusal::kNone;
  std::string refused_why;
  std::exception_ptr failure;  // Request::whole threw (no exception crosses libcurl): rethrown by get()
  bool checked = false;  // the status / range of the final response was checked at its first body byte
  bool body_cut = false;  // an error body longer than kErrorBody: the transfer was stopped, the status stands
  uint64_t range_first = 0, range_last = 0, range_total = UINT64_MAX;
  bool has_range = false;
};

size_t on_header(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  std::string_view line(p, len);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or a 100): start over
    const Request* r = t->req;
    *t = Transfer{};
    t->req = r;
    const size_t sp = line.find(' ');
    if (sp != std::string_view::npos) t->status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
    return len;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  const std::string name = lower(std::string(line.substr(0, colon)));
  const std::string value = trim(line.substr(colon + 1));
  if (name == "etag") t->etag = entity_tag(value) ? value : std::string();  // never echo a control into If-Range
  else if (name == "last-modified") t->last_modified = http_date_chars(value) ? value : std::string();
  else if (name == "link") t->link = value;
  else if (name == "location") t->location = value.substr(0, 8192);
  else if (name == "content-range") t->content_range = value;
  else if (name == "retry-after") t->retry_after = value;
  else if (name == "content-length") {
    uint64_t v;
    if (parse_u64(value, &v)) t->content_length = v;
  }
  return len;
}

// "bytes A-B/T" or "bytes */T".
void parse_content_range(Transfer& t) {
  const detail::ContentRange c = detail::parse_content_range(t.content_range);
  if (c.total) t.range_total = *c.total;
  if (c.first) t.range_first = *c.first;
  if (c.last) t.range_last = *c.last;
  if (c.has_range) t.has_range = true;
}

// The range sent is the one asked for, or its part before the file's end (a range may run past the end:
// the server then sends what there is).
bool range_as_asked(const Transfer& t, const Request& r) {
  if (r.suffix)  // the last bytes: as many as asked, or the whole file when it is shorter
    return t.has_range && t.range_total != UINT64_MAX && t.range_first <= t.range_last && t.range_last + 1 == t.range_total &&
           t.range_last - t.range_first + 1 == std::min(r.suffix, t.range_total);
  if (!t.has_range || t.range_first != r.first || t.range_last < t.range_first || t.range_last > r.last) return false;
  return t.range_last == r.last || (t.range_total != UINT64_MAX && t.range_last + 1 == t.range_total);
}

// The range asked for, as errors say it.
std::string asked(const Request& r) {
  return r.suffix ? fmt::format("the last {} bytes", r.suffix) : fmt::format("bytes {}-{}", r.first, r.last);
}

constexpr uint64_t kErrorBody = 64 << 10;

size_t on_body(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const Request& r = *t->req;
  const size_t len = size * n;
  if (!t->checked) {
    t->checked = true;
    parse_content_range(*t);
    if (t->status == 206 && r.ranged) {
      if (!range_as_asked(*t, r)) {
        t->refused = Transfer::Refusal::kBadRange;
        t->refused_why = fmt::format("asked for {}, the server sent '{}'", asked(r), t->content_range);
        return 0;
      }
    } else if (t->status == 200 && r.ranged && !r.if_range.empty()) {
      t->refused = Transfer::Refusal::kChanged;  // If-Range no longer matched: the whole new file follows
      return 0;
    } else if (t->status == 200) {
      if (t->content_length != UINT64_MAX && t->content_length > r.max_body) {
        t->refused = Transfer::Refusal::kTooLarge;
        return 0;
      }
      if (r.whole) {
        t->whole_cap = t->content_length != UINT64_MAX ? t->content_length : r.max_body;
        try {
          t->whole = r.whole(t->whole_cap);
        } catch (...) {
          t->failure = std::current_exception();
          t->refused = Transfer::Refusal::kFailure;
          return 0;
        }
      }
    }
  }
  if (t->status == 206 && r.ranged) {
    const uint64_t want = t->range_last - t->range_first + 1;  // range_first is r.first (range_as_asked)
    if (t->written + len > want) {
      t->refused = Transfer::Refusal::kBadRange;
      t->refused_why = fmt::format("the server sent more than the {} bytes of range {}-{}", want, t->range_first, t->range_last);
      return 0;
    }
    std::memcpy(r.dst + t->written, p, len);
  } else if (t->status >= 200 && t->status < 300) {
    if (t->written + len > (t->whole ? t->whole_cap : r.max_body)) {
      t->refused = Transfer::Refusal::kTooLarge;
      return 0;
    }
    if (t->whole) std::memcpy(t->whole + t->written, p, len);
    else t->body.append(p, len);
  } else {  // an error's or a redirect's body: its first 4 KiB kept, at most kErrorBody read (an endless one is cut)
    if (t->body.size() < 4096) t->body.append(p, std::min<size_t>(len, 4096 - t->body.size()));
    if (t->written + len > kErrorBody) {
      t->body_cut = true;
      return 0;
    }
  }
  t->written += len;
  if (r.stats) r.stats->bytes += len;
  return len;
}

const char* reason(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 410: return "Gone";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

std::string status_text(long status, const std::string& body) {
  std::string s = fmt::format("HTTP {}", status);
  if (*reason(status)) s += std::string(" ") + reason(status);
  if (const std::string says = server_says(body); !says.empty()) s += " (" + says + ")";
  return s;
}

bool retryable_status(long s) { return s == 429 || s == 500 || s == 502 || s == 503 || s == 504; }

bool retryable_curl(CURLcode c) {
  return c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR || c == CURLE_GOT_NOTHING || c == CURLE_PARTIAL_FILE ||
         c == CURLE_HTTP2 || c == CURLE_HTTP2_STREAM;
}

CURL* thread_handle() {
  struct Handle {
    CURL* h = api().easy_init();
    ~Handle() {
      if (h) api().easy_cleanup(h);
    }
  };
  thread_local Handle handle;
  return handle.h;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

void configure(const Settings& s) { g_settings = s; }
const Settings& settings() { return g_settings; }

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    api().global_init(CURL_GLOBAL_DEFAULT);
    g_share = api().share_init();
    if (!g_share) return;
    api().share_setopt(g_share, CURLSHOPT_LOCKFUNC, share_lock);
    api().share_setopt(g_share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    api().share_setopt(g_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    api().share_setopt(g_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    api().share_setopt(g_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
  });
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxRedirects = 10;

// A Location resolved against the URL it came from (RFC 3986 5.2, by libcurl's URL parser); "" when it is
// no URL. libcurl resolves it only for a transfer it completes, and a redirect's body is cut short.
std::string resolve(const std::string& base, const std::string& location) {
  CURLU* u = api().url();
  if (!u) return "";
  std::string out;
  char* text = nullptr;
  if (api().url_set(u, CURLUPART_URL, base.c_str(), 0) == CURLUE_OK &&
      api().url_set(u, CURLUPART_URL, location.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
      api().url_get(u, CURLUPART_URL, &text, 0) == CURLUE_OK && text)
    out = text;
  if (text) api().free(text);
  api().url_cleanup(u);
  return out;
}

// One exchange with one URL, no redirect followed.
struct Exchange {
  CURLcode rc = CURLE_OK;
  Transfer t;
  std::string location;  // a redirect's target, resolved against the URL
  std::string what;  // libcurl's error text
  bool timed_out_overall = false;  // the request's deadline, not the low-speed or connect limit
};

void set_auth(CURL* h, const Auth& a, const std::function<void(const std::string&)>& add) {
  if (!a.bearer.empty()) add("Authorization: Bearer " + a.bearer);
  if (!a.sigv4.empty()) {
    api().easy_setopt(h, CURLOPT_AWS_SIGV4, a.sigv4.c_str());
    api().easy_setopt(h, CURLOPT_USERPWD, a.userpwd.c_str());
    // The hash of the empty payload of a GET, which S3 wants stated (and signed).
    add("x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    if (!a.session_token.empty()) add("x-amz-security-token: " + a.session_token);
  }
}

void set_transfer(CURL* h, const std::string& url, char* errbuf, Clock::time_point deadline) {
  const Settings& st = g_settings;
  api().easy_setopt(h, CURLOPT_URL, url.c_str());
  api().easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  api().easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  api().easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // get() follows, deciding where credentials go
  api().easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  api().easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(st.connect_seconds));
  api().easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(std::min<uint64_t>(st.low_speed, LONG_MAX)));
  api().easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(st.stall_seconds));
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  api().easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, left)));
  api().easy_setopt(h, CURLOPT_USERAGENT, "ckpt/0.1 (libcurl)");
  api().easy_setopt(h, CURLOPT_ACCEPT_ENCODING, nullptr);  // ranges of the stored bytes, never re-encoded
  api().easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  api().easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  if (std::string ca = env("CURL_CA_BUNDLE"); !ca.empty()) api().easy_setopt(h, CURLOPT_CAINFO, ca.c_str());
  else if (std::string ca2 = env("SSL_CERT_FILE"); !ca2.empty()) api().easy_setopt(h, CURLOPT_CAINFO, ca2.c_str());
  if (std::string dir = env("SSL_CERT_DIR"); !dir.empty()) api().easy_setopt(h, CURLOPT_CAPATH, dir.c_str());
  if (g_share) api().easy_setopt(h, CURLOPT_SHARE, g_share);
}

Exchange perform(const Request& r, const std::string& url, const Auth* auth, Clock::time_point deadline) {
  CURL* h = thread_handle();
  if (!h) throw EnvironmentError(fmt::format("{}: cannot start an HTTP transfer (libcurl)", r.display));
  api().easy_reset(h);
  Exchange x;
  x.t.req = &r;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  auto add = [&](const std::string& hline) { headers = api().slist_append(headers, hline.c_str()); };
  set_transfer(h, url, errbuf, deadline);
  api().easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  api().easy_setopt(h, CURLOPT_HEADERDATA, &x.t);
  api().easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  api().easy_setopt(h, CURLOPT_WRITEDATA, &x.t);
  std::string range;
  if (r.ranged) {
    range = r.suffix ? fmt::format("-{}", r.suffix) : fmt::format("{}-{}", r.first, r.last);
    api().easy_setopt(h, CURLOPT_RANGE, range.c_str());
    if (!r.if_range.empty()) add("If-Range: " + r.if_range);
  }
  if (auth) set_auth(h, *auth, add);
  if (headers) api().easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  x.rc = api().easy_perform(h);
  api().slist_free_all(headers);
  x.what = errbuf[0] ? errbuf : api().easy_strerror(x.rc);
  x.timed_out_overall = x.rc == CURLE_OPERATION_TIMEDOUT && Clock::now() >= deadline - std::chrono::milliseconds(50);
  const long s = x.t.status;
  if ((s == 301 || s == 302 || s == 303 || s == 307 || s == 308) && !x.t.location.empty()) x.location = resolve(url, x.t.location);
  return x;
}

// The transfer ended as the callbacks wanted: completed, or stopped by them with a reason.
bool completed(const Exchange& x) {
  return x.rc == CURLE_OK || (x.rc == CURLE_WRITE_ERROR && (x.t.refused != Transfer::Refusal::kNone || x.t.body_cut));
}

// Follows the redirects of one try from `r.url`. Credentials go to the first origin only: at the first
// change of scheme, host or port they are dropped, for this hop and every later one.
Exchange follow(const Request& r, Clock::time_point deadline, std::string* url) {
  *url = r.url;
  const Auth* auth = r.auth;
  for (int hop = 0;; ++hop) {
    Exchange x = perform(r, *url, auth, deadline);
    if (r.stats) r.stats->requests += 1;
    if (!completed(x) || x.location.empty() || x.t.refused != Transfer::Refusal::kNone) return x;
    if (hop == kMaxRedirects) throw InputError(r.display, fmt::format("too many redirects (more than {})", kMaxRedirects));
    const std::string scheme = lower(x.location.substr(0, x.location.find("://")));
    if (scheme != "http" && scheme != "https")
      throw InputError(r.display, fmt::format("HTTP {} redirects to a URL that is not http(s):// ({}): not followed", x.t.status,
                                              vfs::display(x.location)));
    if (origin_of(x.location) != origin_of(*url)) auth = nullptr;
    *url = x.location;
  }
}

[[noreturn]] void throw_curl(const Request& r, const Exchange& x, uint64_t attempt) {
  const Settings& st = g_settings;
  const CURLcode rc = x.rc;
  if (x.timed_out_overall)
    throw EnvironmentError(fmt::format("{}: the request did not complete in {} s (raise --limit request-seconds={})", r.display,
                                       st.request_seconds, st.request_seconds));
  if (rc == CURLE_OPERATION_TIMEDOUT)
    throw EnvironmentError(fmt::format("{}: the transfer stalled: {} (raise --limit stall-seconds={}, low-speed={} or connect-seconds={})",
                                       r.display, x.what, st.stall_seconds, st.low_speed, st.connect_seconds));
  if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM)
    throw EnvironmentError(fmt::format("{}: TLS certificate not verified: {} (CA bundle: SSL_CERT_FILE or CURL_CA_BUNDLE)", r.display, x.what));
  if (retryable_curl(rc)) throw EnvironmentError(fmt::format("{}: {} (after {} retries)", r.display, x.what, attempt));
  throw EnvironmentError(fmt::format("{}: {}", r.display, x.what));
}

[[noreturn]] void throw_refused(const Request& r, const Transfer& t) {
  if (t.refused == Transfer::Refusal::kChanged)
    throw InputError(r.display, fmt::format("changed on the server while being read (ETag was {}, now {}): read it again", r.if_range,
                                            t.etag.empty() ? "none" : t.etag));
  if (t.refused == Transfer::Refusal::kTooLarge) {
    if (r.ranged)
      throw InputError(r.display, fmt::format("the server ignores Range requests and sends the whole file ({}); "
                                              "allow a whole download of that size with --limit download-bytes=N",
                                              t.content_length == UINT64_MAX ? std::string("of unknown size")
                                                                             : fmt::format("{} bytes", t.content_length)));
    throw InputError(r.display, fmt::format("the response is larger than {} bytes", r.max_body));
  }
  throw InputError(r.display, t.refused_why);
}

Response response_of(const Request& r, Transfer& t, const std::string& url) {
  Response out;
  out.status = t.status;
  out.etag = t.etag;
  out.last_modified = t.last_modified;
  out.link = t.link;
  out.effective_url = url;
  out.range_ignored = t.status == 200 && r.ranged;
  out.total = t.status == 206 || t.status == 416 ? t.range_total : t.written;
  if (t.status == 206) out.first = t.range_first;
  out.body = std::move(t.body);
  return out;
}

}  // namespace

Response get(const Request& r) {
  init();
  const Settings& st = g_settings;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(st.request_seconds);
  for (uint64_t attempt = 0;; ++attempt) {
    std::string url;
    Exchange x = follow(r, deadline, &url);
    Transfer& t = x.t;
    // Waits before the next try, never past the request's deadline.
    auto backoff = [&](uint64_t retry_after) {
      double s = std::min(8.0, 0.25 * static_cast<double>(1ull << std::min<uint64_t>(attempt, 5)));
      if (retry_after != UINT64_MAX) s = static_cast<double>(std::min<uint64_t>(retry_after, 30));
      const auto wake = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
      if (wake >= deadline) {
        x.timed_out_overall = true;
        throw_curl(r, x, attempt);
      }
      std::this_thread::sleep_until(wake);
    };
    const bool can_retry = attempt < st.retries;

    if (!completed(x)) {
      if (retryable_curl(x.rc) && can_retry && !x.timed_out_overall) {
        backoff(UINT64_MAX);
        continue;
      }
      throw_curl(r, x, attempt);
    }
    if (t.failure) std::rethrow_exception(t.failure);
    if (t.refused != Transfer::Refusal::kNone) throw_refused(r, t);
    const long status = t.status;
    if (status == 206 || (status >= 200 && status < 300) || (status == 416 && r.accept_416)) {
      if (!t.checked) parse_content_range(t);  // an empty body never reached the write callback
      if (status == 206 && r.ranged) {
        if (!range_as_asked(t, r))
          throw InputError(r.display, fmt::format("asked for {}, the server sent '{}'", asked(r), t.content_range));
        if (t.written != t.range_last - t.range_first + 1) {
          if (can_retry) {
            backoff(UINT64_MAX);
            continue;
          }
          throw EnvironmentError(fmt::format("{}: the response was cut short ({} of {} bytes, after {} retries)", r.display,
                                             t.written, t.range_last - t.range_first + 1, attempt));
        }
      }
      if (status == 200 && r.ranged && !r.if_range.empty())
        throw InputError(r.display, fmt::format("changed on the server while being read (ETag was {}, now {}): read it again",
                                                r.if_range, t.etag.empty() ? "none" : t.etag));
      return response_of(r, t, url);
    }
    if (retryable_status(status) && can_retry) {
      uint64_t after = UINT64_MAX;
      if (!parse_u64(t.retry_after, &after)) after = UINT64_MAX;
      backoff(after);
      continue;
    }
    const std::string text = status_text(status, t.body);
    if (status == 401 || status == 403)
      throw EnvironmentError(fmt::format("{}: {}{}", r.display, text, r.auth && !r.auth->hint.empty() ? "; " + r.auth->hint : ""));
    if (retryable_status(status)) throw EnvironmentError(fmt::format("{}: {} (after {} retries)", r.display, text, attempt));
    throw InputError(r.display, text);
  }
}

std::string display_url(const std::string& url) { return vfs::display(url); }

std::string url_encode(const std::string& s, bool keep_slash) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string origin_of(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  const size_t end = url.find_first_of("/?#", scheme + 3);
  std::string o = url.substr(0, end);
  const size_t at = o.rfind('@');  // user:password@ is no part of the host
  if (at != std::string::npos && at > scheme) o.erase(scheme + 3, at - scheme - 2);
  return lower(o);
}

}  // namespace ckpt::remote
