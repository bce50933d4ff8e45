// The flat indexes every per-entry lookup uses (name_index.h), against std::unordered_map; and the
// derived module tree, which finds its rows without them, against the tree every name's prefixes make.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/name_index.h"
#include "core/summary.h"

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

TEST_CASE("position index: names a table holds, found through it, as a map finds them") {
  std::mt19937 rng(11);
  std::vector<std::string> names;
  for (int k = 0; k < 20000; ++k) names.push_back("blocks." + std::to_string(rng() % 4000) + "." + std::to_string(rng() % 4));
  IndexBy index(0, [&names](uint32_t k) -> std::string_view { return names[k]; });
  agrees_with_map(index, names);
  CHECK(index.find("blocks.4000.0") == nullptr);
}

TEST_CASE("derived module tree: the rows of every prefix, once each, whatever the order of the names") {
  // An MoE-like tree (numbered layers and experts, named submodules), its names in the orders readers
  // give: torch's module order, sorted, sorted within shards cut in module order, shuffled.
  std::vector<std::string> base;
  for (int l = 0; l < 23; ++l) {
    const std::string layer = "model.layers." + std::to_string(l);
    for (const char* p : {"self_attn.q_proj", "self_attn.o_proj"}) base.push_back(layer + "." + p + ".weight");
    for (int e = 0; e < 14; ++e)
      for (const char* w : {"w1", "w2", "w3"}) base.push_back(layer + ".mlp.experts." + std::to_string(e) + "." + w + ".weight");
    base.push_back(layer + ".input_layernorm.weight");
  }
  base.push_back("model.norm.weight");
  base.push_back("lm_head.weight");
  base.push_back("logit_scale");
  std::mt19937 rng(43);
  std::vector<std::vector<std::string>> orders{base};
  orders.push_back(base);
  std::sort(orders.back().begin(), orders.back().end());
  orders.push_back(base);
  for (size_t at = 0; at < base.size(); at += 97)  // shards of 97 names, each sorted
    std::sort(orders.back().begin() + static_cast<std::ptrdiff_t>(at),
              orders.back().begin() + static_cast<std::ptrdiff_t>(std::min(base.size(), at + 97)));
  for (int k = 0; k < 3; ++k) {
    orders.push_back(base);
    std::shuffle(orders.back().begin(), orders.back().end(), rng);
  }
  for (size_t o = 0; o < orders.size(); ++o) {
    CAPTURE(o);
    Checkpoint ck;
    ck.content = Content::StateDict;
    for (const std::string& name : orders[o]) {
      Tensor& t = ck.tensors.emplace_back();
      t.name = name;
      t.dtype = dtype_by_name("float32");
      t.shape = {2};
      t.stride = {1};
      t.numel = 2;
      t.bytes = 8;
      t.storage = name;
    }
    std::map<std::string, std::pair<uint64_t, int>> truth;  // prefix -> (tensors under it, depth)
    for (const std::string& name : orders[o]) {
      ++truth[""].first;
      for (size_t dot = name.find('.'), depth = 1; dot != std::string::npos; dot = name.find('.', dot + 1), ++depth) {
        auto& row = truth[name.substr(0, dot)];
        ++row.first;
        row.second = static_cast<int>(depth);
      }
    }
    const Summary s = summarize(ck);
    REQUIRE(s.modules.size() == truth.size());
    std::map<std::string, size_t> seen;
    for (size_t r = 0; r < s.modules.size(); ++r) {
      const ModuleRow& row = s.modules[r];
      const std::string name(row.name);
      CAPTURE(name);
      CHECK(++seen[name] == 1);
      REQUIRE(truth.count(name));
      CHECK(row.tensors == truth[name].first);
      CHECK(row.depth == truth[name].second);
      CHECK(row.parameters == 2 * truth[name].first);
      if (r > 0) {  // pre-order: a row's parent is listed before it
        const std::string parent = name.find('.') == std::string::npos ? "" : name.substr(0, name.rfind('.'));
        CHECK(seen.count(parent));
      }
    }
  }
}

TEST_CASE("SharedString and Interned: copies share one block / one kept string, and read as their text") {
  SharedString a("model-00001-of-00002.safetensors:layers.0.weight");
  SharedString b = a;  // shared
  CHECK(&a.str() == &b.str());
  CHECK(b == "model-00001-of-00002.safetensors:layers.0.weight");
  CHECK(b.view().size() == 48);
  SharedString c(std::string("model-00001-of-00002.safetensors:layers.0.weight"));  // equal text, its own block
  CHECK(&c.str() != &a.str());
  CHECK(c == a);
  CHECK_FALSE(c < a);
  CHECK(SharedString("0") < SharedString("1"));
  a = SharedString();  // b keeps the block alive
  CHECK(a.empty());
  CHECK(a.str().empty());
  CHECK(b == c);
  CHECK(fmt::format("[{}]", SharedString("12")) == "[12]");
  CHECK("storage " + SharedString("7") == "storage 7");
  std::vector<SharedString> many(1000, b);  // copied and dropped in bulk
  many.clear();
  CHECK(b.size() == 48);

  Interned d;  // ""
  CHECK(d.empty());
  Interned cpu = "cpu", cuda0 = std::string("cuda:0"), cuda0_again = std::string_view("cuda:0");
  CHECK(cpu == "cpu");
  CHECK(&cuda0.str() == &cuda0_again.str());  // one string for the process
  CHECK(cuda0 == cuda0_again);
  CHECK_FALSE(cuda0 == cpu);
  CHECK(cuda0 != "cuda:1");
  const std::string& as_string = cuda0;
  CHECK(as_string == "cuda:0");
}
