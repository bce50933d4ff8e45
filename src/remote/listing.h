// The pure parts of remote.cc's listings, apart from libcurl so that tests and the fuzz target fuzz_remote
// run them as the remote layer does: one page of the Hugging Face Hub's tree listing (JSON), the Link
// header's next page, and the path check both listings apply. (S3's ListObjectsV2 XML is remote.h's
// parse_s3_listing.)
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace ckpt::remote::detail {

// A path inside a repo or under a prefix: not empty, not absolute, no empty, "." or ".." part, no control
// character.
bool safe_relative(const std::string& p);

// One page of ENDPOINT/api/{kind}/{repo}/tree/{rev}?recursive=true: a JSON array of {"type": "file" |
// "directory", "path", "size", "lfs": {"size"}} entries, added to `files` (path -> size) and `dirs` (every
// folder, those above each entry included). Throws InputError naming `display` when the page is not such
// an array or names a path that is not safe_relative.
void hf_listing_page(const std::string& body, const std::string& display, std::map<std::string, uint64_t>& files,
                     std::set<std::string>& dirs);

// The URL of rel="next" in a Link header, "" when none.
std::string next_link(const std::string& link);

}  // namespace ckpt::remote::detail
