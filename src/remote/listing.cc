#include "remote/listing.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ckpt::remote::detail {

bool safe_relative(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (unsigned char c : part)
      if (c < 0x20 || c == 0x7f) return false;
    start = end + 1;
  }
  return true;
}

void hf_listing_page(const std::string& body, const std::string& display, std::map<std::string, uint64_t>& files,
                     std::set<std::string>& dirs) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(display, fmt::format("the listing is not JSON (byte {})", e.byte));
  } catch (const nlohmann::json::out_of_range&) {  // a number too large for a double (1e999): fuzz_remote
    throw InputError(display, "the listing is not JSON (a number out of range)");
  }
  if (!j.is_array()) throw InputError(display, "the listing is not a JSON array");
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("type") || !e["type"].is_string() || !e.contains("path") || !e["path"].is_string())
      throw InputError(display, "a listing entry has no type and path");
    const std::string path = e["path"].get<std::string>();
    if (!safe_relative(path)) throw InputError(display, fmt::format("the listing names '{}', which is not a path in the repo", path));
    // Every folder above the entry.
    for (size_t s = path.find('/'); s != std::string::npos; s = path.find('/', s + 1)) dirs.insert(path.substr(0, s));
    if (e["type"] == "directory") {
      dirs.insert(path);
    } else if (e["type"] == "file") {
      uint64_t size = 0;
      if (e.contains("lfs") && e["lfs"].is_object() && e["lfs"].contains("size") && e["lfs"]["size"].is_number_unsigned())
        size = e["lfs"]["size"].get<uint64_t>();
      else if (e.contains("size") && e["size"].is_number_unsigned())
        size = e["size"].get<uint64_t>();
      else
        throw InputError(display, fmt::format("the listing gives '{}' no size", path));
      files[path] = size;
    }
  }
}

std::string next_link(const std::string& link) {
  size_t pos = 0;
  while (pos < link.size()) {
    const size_t lt = link.find('<', pos);
    if (lt == std::string::npos) break;
    const size_t gt = link.find('>', lt);
    if (gt == std::string::npos) break;
    const size_t comma = link.find(",<", gt);
    const std::string params = link.substr(gt + 1, comma == std::string::npos ? std::string::npos : comma - gt - 1);
    if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos)
      return link.substr(lt + 1, gt - lt - 1);
    pos = gt + 1;
  }
  return "";
}

}  // namespace ckpt::remote::detail
