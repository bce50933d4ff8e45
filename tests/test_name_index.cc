// The flat indexes every per-entry lookup uses (name_index.h), against std::unordered_map.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/name_index.h"

using namespace ckpt;

namespace {

// Inserts `names` in order into `index` and into std::unordered_map, and checks that the two agree on
// every insertion and on every lookup after.
template <typename Index>
void agrees_with_map(Index& index, const std::vector<std::string>& names) {
  std::unordered_map<std::string, uint32_t> truth;
  for (size_t k = 0; k < names.size(); ++k) {
    const auto [pos, fresh] = index.try_emplace(names[k], static_cast<uint32_t>(k));
    const auto [it, inserted] = truth.try_emplace(names[k], static_cast<uint32_t>(k));
    CHECK(fresh == inserted);
    CHECK(pos == it->second);
  }
  CHECK(index.size() == truth.size());
  for (const auto& [name, pos] : truth) {
    CAPTURE(name);
    const uint32_t* at = index.find(name);
    REQUIRE(at);
    CHECK(*at == pos);
  }
}

}  // namespace

TEST_CASE("name index: first position wins, every name found, absent names not") {
  std::mt19937 rng(7);
  std::vector<std::string> names;
  for (int k = 0; k < 20000; ++k) names.push_back("model.layers." + std::to_string(rng() % 5000) + ".w" + std::to_string(rng() % 3));
  NameIndex index;
  agrees_with_map(index, names);
  CHECK(index.find("model.layers.5000.w0") == nullptr);
  CHECK(index.find("") == nullptr);
  CHECK(index.try_emplace("", 99).second);  // the empty name is a name
  CHECK(*index.find("") == 99);
}

TEST_CASE("key index: decimal keys by number, sparse numbers and other keys by name, one answer each") {
  KeyIndex keys;
  std::vector<std::string> held;  // the index views its keys
  for (int k = 0; k < 5000; ++k) held.push_back(std::to_string(k));
  for (const char* odd : {"007", "-1", "1e3", "99999999", "123456789", "1234567890", "", "a", "storage"}) held.emplace_back(odd);
  held.push_back("5");  // a repeat: keeps its first position
  agrees_with_map(keys, held);
  for (const char* absent : {"5000", "07", "0x1", "99999998", "12345678901"}) CHECK(keys.find(absent) == nullptr);
  CHECK(decimal_name("0") == 0u);
  CHECK(decimal_name("999999999") == 999999999u);
  CHECK(!decimal_name("1234567890"));
  CHECK(!decimal_name("01"));
  CHECK(!decimal_name("+1"));
}
