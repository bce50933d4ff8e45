// The pure parts of http.cc's response handling, apart from libcurl so that tests and the fuzz target
// fuzz_remote run them as the HTTP layer does: header values, Content-Range, entity-tags, and the line of
// an error body worth quoting. http.cc calls exactly these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ckpt::remote::detail {

// ASCII lower case (header names).
std::string lower(std::string s);
// A header value without the spaces and tabs around it and the line's CR LF.
std::string trim(std::string_view s);
// A decimal of 1 to 19 digits and nothing else; `out` is left alone otherwise.
bool parse_u64(std::string_view s, uint64_t* out);
// An entity-tag as RFC 9110 8.8.3 has it: [W/] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text. A
// server's ETag that is not one (a bare CR, an escape) is dropped: it would be sent back in If-Range.
bool entity_tag(std::string_view v);
// What an HTTP-date (RFC 9110 5.6.7) is made of, at most 64 characters: a Last-Modified kept only to be
// compared, never parsed, never sent.
bool http_date_chars(std::string_view v);

// A Content-Range value, "bytes A-B/T" or "bytes */T": each number that parsed, in the order they are
// read (the last only when the first parsed); `has_range` when both A and B did.
struct ContentRange {
  std::optional<uint64_t> total, first, last;
  bool has_range = false;
};
ContentRange parse_content_range(std::string_view value);

// The first line of an error body worth quoting: S3's <Code>/<Message>, the Hub's {"error": ...}; at most
// 200 bytes of each, control characters as spaces; "" when neither is there.
std::string server_says(const std::string& body);

}  // namespace ckpt::remote::detail
