// One HTTP GET through libcurl, with what a remote checkpoint read needs around it: a byte range written
// straight into the caller's buffer, If-Range against the ETag first seen, time-outs on connect and on a
// stalled transfer, bounded retries with backoff (429, 5xx, a connection reset or cut short), redirects
// followed (credentials dropped at a host change: libcurl sends a custom Authorization header to the
// first host only; SigV4 signs for the first host only), TLS verified with SSL_CERT_FILE / CURL_CA_BUNDLE.
//
// Failures throw, naming the URL as `display` (secrets removed):
//   InputError        (exit 3) the remote file is bad: 404, changed between two requests, a range not
//                                as asked, a server that ignores Range for a file larger than allowed;
//   EnvironmentError  (exit 4) the network or the credentials: unreachable, TLS, 401/403, time-outs,
//                                429/5xx after the retries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/vfs.h"

namespace ckpt::remote {

// --limit's network values (core/error.h).
using Settings = NetworkLimits;
// Set once at startup from --limit (before any request).
void configure(const Settings& s);
const Settings& settings();
// curl_global_init and the shared connection cache; once (get() calls it).
void init();

// Credentials for a request.
struct Auth {
  std::string bearer;  // "Authorization: Bearer ..." (Hugging Face)
  std::string sigv4;  // CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3"; with `userpwd` "KEY:SECRET"
  std::string userpwd;
  std::string session_token;  // x-amz-security-token
  std::string hint;  // said after a 401 / 403 ("set HF_TOKEN ...")
};

struct Request {
  std::string url;  // sent as is
  std::string display;  // named in errors
  const Auth* auth = nullptr;
  bool ranged = false;
  uint64_t first = 0, last = 0;  // Range: bytes=first-last (inclusive)
  // Not 0: the file's last `suffix` bytes instead (Range: bytes=-suffix, first and last unused), for a
  // file whose size is not known yet and whose reader starts at its end (a zip).
  uint64_t suffix = 0;
  uint8_t* dst = nullptr;  // a 206 body goes here: last - first + 1 bytes (suffix bytes at most)
  std::string if_range;  // the ETag the file had: a changed file is a 200, refused
  // A 200 body is kept in Response::body up to this many bytes; a larger one is refused (a listing, a
  // whole file when the server ignores Range and --limit download-bytes allows it).
  uint64_t max_body = 0;
  bool accept_416 = false;  // a first range of an empty file
  // A 200 body (a server that ignores Range) written here instead of Response::body: called once per try
  // at the body's first byte with its size (Content-Length, else max_body), returns where it goes. The
  // whole file is then held once, where its reader reads it.
  std::function<uint8_t*(uint64_t capacity)> whole;
  vfs::Transfer* stats = nullptr;
};

struct Response {
  long status = 0;
  std::string etag;  // as sent (quotes and W/ kept)
  std::string last_modified;  // as sent ("" when none or not an HTTP-date's characters)
  std::string link;  // the Link header (pagination)
  std::string effective_url;  // after redirects
  bool range_ignored = false;  // a 200 to a ranged request
  uint64_t total = UINT64_MAX;  // the file's size: Content-Range's "/N", or a 200's Content-Length
  uint64_t first = 0;  // a 206's first byte in the file (Content-Range's A)
  std::string body;  // a 200 body (see max_body)
};

// Sends the request, retrying as above; returns a 2xx (or an accepted 416) response, else throws.
Response get(const Request& r);

// The URL as errors may show it (vfs::display): user:password@ removed, every query value but those of a
// few harmless keys replaced by REDACTED.
std::string display_url(const std::string& url);
// Percent-encodes everything but unreserved characters (and '/' when keep_slash).
std::string url_encode(const std::string& s, bool keep_slash);
// scheme://host[:port] of a URL, lowercased, without user:password@ ("" when it has none).
std::string origin_of(const std::string& url);

}  // namespace ckpt::remote
