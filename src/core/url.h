// URLs as paths: what is one, and how one is shown (no userinfo, no secret query value). A leaf: error.cc
// names a file through it, and vfs.h (paths local or remote) declares these through it.
#pragma once

#include <string>
#include <string_view>

namespace ckpt::vfs {

// "scheme://..." (letters, digits, + - . then "://").
bool is_url(std::string_view path);
// The path as output may show it: a URL's user:password@ removed and the values of query parameters that
// carry secrets (signatures, tokens, credentials, keys) replaced by REDACTED; a local path unchanged.
std::string display(const std::string& path);

}  // namespace ckpt::vfs
