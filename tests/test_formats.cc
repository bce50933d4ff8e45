// safetensors and sharded checkpoints that must be refused, each with the reason the reference
// implementation (or the index) gives; see testdata/formats/reference.json for what huggingface's own
// library says about each (it accepts the duplicate-key file, keeping the last key; ckpt refuses it).
#include <doctest/doctest.h>

#include "core/reader.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("formats: hostile safetensors and broken sharded indexes are refused with the reason") {
  size_t n = 0;
  const auto dir = test::testdata() / "formats";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 14 || name.substr(name.size() - 14) != ".expected.json") continue;
    const auto j = test::read_json(e.path());
    if (!j.contains("error_contains")) continue;
    ++n;
    CAPTURE(name);
    std::string error;
    try {
      (void)read_checkpoint((dir / j["fixture"].get<std::string>()).string());
    } catch (const InputError& err) { error = err.render(); }
    CAPTURE(error);
    REQUIRE(!error.empty());
    CHECK(error.find(j["error_contains"].get<std::string>()) != std::string::npos);
    CHECK(error.find('\n') == std::string::npos);
  }
  CHECK(n >= 12);
}
