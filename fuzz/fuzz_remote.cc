// A server's responses, through the functions the remote layer calls on them (src/remote/http_parse.h,
// listing.h, remote.h): the input, line by line, as response header lines the way http.cc's on_header takes
// them (a status line starts a new response; Content-Length, ETag, Content-Range parsed), then whole as an
// error body (server_says), a Link header (next_link), one page of the Hub's tree listing
// (hf_listing_page) and, where libcurl's headers built src/remote, an S3 ListObjectsV2 response
// (parse_s3_listing). Bad input may only throw InputError.
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "core/error.h"
#include "remote/http_parse.h"
#include "remote/listing.h"
#include "targets.h"
#ifdef CKPT_REMOTE
#include "remote/remote.h"
#endif

namespace {

// What on_header keeps of one response.
struct Headers {
  long status = 0;
  std::string etag, link, content_range, retry_after;
  uint64_t content_length = UINT64_MAX;
};

void header_line(std::string_view line, Headers& h) {
  using namespace ckpt::remote::detail;
  if (line.rfind("HTTP/", 0) == 0) {
    h = Headers{};
    const size_t sp = line.find(' ');
    if (sp != std::string_view::npos) h.status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string name = lower(std::string(line.substr(0, colon)));
  const std::string value = trim(line.substr(colon + 1));
  if (name == "etag") h.etag = entity_tag(value) ? value : std::string();
  else if (name == "link") h.link = value;
  else if (name == "content-range") h.content_range = value;
  else if (name == "retry-after") h.retry_after = value;
  else if (name == "content-length") {
    uint64_t v;
    if (parse_u64(value, &v)) h.content_length = v;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::remote::detail;
  const std::string body(reinterpret_cast<const char*>(data), size);
  Headers h;
  for (size_t at = 0; at < body.size();) {
    const size_t nl = body.find('\n', at);
    const size_t end = nl == std::string::npos ? body.size() : nl + 1;
    header_line(std::string_view(body).substr(at, end - at), h);  // curl hands each line with its CR LF
    at = end;
  }
  const ContentRange r = parse_content_range(h.content_range);
  if (r.has_range && (!r.first || !r.last)) __builtin_trap();  // has_range means both numbers parsed
  uint64_t after;
  (void)parse_u64(h.retry_after, &after);
  (void)next_link(h.link);
  (void)server_says(body);
  (void)next_link(body);
  try {
    std::map<std::string, uint64_t> files;
    std::set<std::string> dirs;
    hf_listing_page(body, "fuzz", files, dirs);
    for (const auto& [path, n] : files)
      if (!safe_relative(path)) __builtin_trap();  // every path listed was checked
  } catch (const ckpt::InputError&) {}
#ifdef CKPT_REMOTE
  try {
    (void)ckpt::remote::parse_s3_listing(body, "fuzz");
  } catch (const ckpt::InputError&) {}
#endif
  return 0;
}
