// Test helpers: where the fixtures are, and reading them with their expected values.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ckpt::test {

std::filesystem::path testdata();
// Every fixture that has an .expected.json beside it, in t113/, t26/, ts113/ and formats/ (sorted, stable).
// A fixture may be a directory (sharded checkpoints).
struct Fixture {
  std::filesystem::path file;
  std::filesystem::path expected;
  std::string id;  // "t113/plain_state_dict.pt"
};
std::vector<Fixture> fixtures();
nlohmann::json read_json(const std::filesystem::path& p);
std::string read_file(const std::filesystem::path& p);

}  // namespace ckpt::test
