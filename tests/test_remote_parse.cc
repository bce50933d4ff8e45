// src/remote's pure parsing (http_parse.h, listing.h), which http.cc and remote.cc call on what servers
// send and fuzz_remote fuzzes: no libcurl, no server.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "remote/http_parse.h"
#include "remote/listing.h"

using namespace ckpt::remote::detail;

TEST_CASE("remote: Content-Range, numbers and entity-tags as the HTTP layer reads them") {
  const ContentRange a = parse_content_range("bytes 0-1023/20318");
  CHECK(a.has_range);
  CHECK(*a.first == 0);
  CHECK(*a.last == 1023);
  CHECK(*a.total == 20318);
  const ContentRange b = parse_content_range("bytes */20318");  // a 416's: the size only
  CHECK_FALSE(b.has_range);
  CHECK(*b.total == 20318);
  CHECK_FALSE(b.first);
  // The first number is kept when the second does not parse (as http.cc wrote it into the transfer).
  const ContentRange c = parse_content_range("bytes 5-x/10");
  CHECK_FALSE(c.has_range);
  CHECK(*c.first == 5);
  CHECK_FALSE(c.last);
  CHECK_FALSE(parse_content_range("items 0-1/2").total);
  CHECK_FALSE(parse_content_range("bytes 0-1").total);
  uint64_t v = 7;
  CHECK_FALSE(parse_u64("18446744073709551616", &v));  // 20 digits: refused, never wrapped
  CHECK_FALSE(parse_u64("", &v));
  CHECK_FALSE(parse_u64("+1", &v));
  CHECK(v == 7);
  CHECK(parse_u64("9999999999999999999", &v));
  CHECK(entity_tag("\"abc\""));
  CHECK(entity_tag("W/\"abc\""));
  CHECK_FALSE(entity_tag("\"a\rb\""));
  CHECK_FALSE(entity_tag("abc"));
  CHECK_FALSE(entity_tag("\""));
  CHECK(trim(" \t v \r\n") == "v");
  CHECK(lower("Content-Range") == "content-range");
  CHECK(server_says("<Error><Code>NoSuchKey</Code><Message>gone\x1b[2J</Message></Error>") == "NoSuchKey: gone [2J");
  CHECK(server_says("{\"error\":\"Repository Not Found\"}") == "Repository Not Found");
  CHECK(server_says("plain") == "");
}

TEST_CASE("remote: the Hub's listing page and Link header") {
  std::map<std::string, uint64_t> files;
  std::set<std::string> dirs;
  hf_listing_page(R"([{"type":"file","path":"a/b.safetensors","size":134,"lfs":{"size":256128}},
                      {"type":"directory","path":"c"},{"type":"file","path":"config.json","size":821}])",
                  "hf://o/r", files, dirs);
  CHECK(files == std::map<std::string, uint64_t>{{"a/b.safetensors", 256128}, {"config.json", 821}});
  CHECK(dirs == std::set<std::string>{"a", "c"});
  for (const char* bad : {"{}", "[1]", R"([{"type":"file","path":"x","size":1e999}])",  // out_of_range: fuzz_remote R"([{"type":"file","path":"../x","size":1}])", R"([{"type":"file","path":"x"}])",
                          "[", R"([{"type":"file","path":"a//b","size":1}])"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(hf_listing_page(bad, "hf://o/r", files, dirs), ckpt::InputError);
  }
  CHECK(next_link("<https://h/a?c=1>; rel=\"prev\",<https://h/a?c=3>; rel=next") == "https://h/a?c=3");
  CHECK(next_link("<https://h/a?c=1>; rel=\"prev\"") == "");
  CHECK(next_link("<unclosed; rel=next") == "");
  CHECK_FALSE(safe_relative("/abs"));
  CHECK_FALSE(safe_relative("a/./b"));
  CHECK(safe_relative("a/b"));
}
