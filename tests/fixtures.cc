#include "fixtures.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ckpt::test {

std::filesystem::path testdata() { return CKPT_TESTDATA; }

std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  for (const char* set : {"t113", "t26", "t214", "t215", "ts113", "formats"}) {
    const auto dir = testdata() / set;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      const std::string suffix = ".expected.json";
      if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      nlohmann::json j = read_json(e.path());
      // Files that must be refused are tested by their error (test_formats.cc).
      if (j.contains("error_contains")) continue;
      Fixture f;
      f.expected = e.path();
      f.file = dir / j.at("fixture").get<std::string>();
      f.id = std::string(set) + "/" + f.file.filename().string();
      out.push_back(std::move(f));
    }
  }
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.id < b.id; });
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const std::filesystem::path& p) { return nlohmann::json::parse(read_file(p)); }

}  // namespace ckpt::test
