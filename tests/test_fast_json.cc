// fast_json.h: simdjson's reading of safetensors headers and sharded indexes takes only the ordinary
// shape and agrees with nlohmann's reading wherever it answers; everything else is left to the full path.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "core/fast_json.h"
#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/zip.h"

using namespace ckpt;

namespace {

std::string safetensors_file(const std::string& header) {
  std::string f(8, '\0');
  for (int k = 0; k < 8; ++k) f[k] = static_cast<char>((header.size() >> (8 * k)) & 0xff);
  return f + header;
}

}  // namespace

TEST_CASE("fast_json: a safetensors header in file order, equal to nlohmann's reading") {
  std::mt19937 rng(43);
  for (int round = 0; round < 50; ++round) {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    const int n = 1 + static_cast<int>(rng() % 40);
    uint64_t at = 0;
    if (round % 3 == 0) h["__metadata__"] = {{"format", "pt"}, {"b", "2"}};
    for (int k = 0; k < n; ++k) {
      std::vector<int64_t> shape;
      uint64_t numel = 1;
      for (uint32_t d = 0, nd = rng() % 4; d < nd; ++d) {
        shape.push_back(static_cast<int64_t>(rng() % 5));
        numel *= static_cast<uint64_t>(shape.back());
      }
      const std::string name = "layers." + std::to_string(rng() % 1000) + ".w" + std::to_string(k);
      h[name] = {{"dtype", k % 2 ? "BF16" : "F32"}, {"shape", shape}, {"data_offsets", {at, at + numel * (k % 2 ? 2 : 4)}}};
      at += numel * (k % 2 ? 2 : 4);
    }
    const std::string text = h.dump();
    const auto fast = fast_safetensors_header(text);
    REQUIRE(fast.has_value());
    size_t k = 0;
    for (const auto& [name, v] : h.items()) {
      if (name == "__metadata__") {
        REQUIRE(fast->metadata.has_value());
        CHECK(fast->metadata->size() == v.size());
        CHECK(fast->metadata->front().first == "format");
        continue;
      }
      REQUIRE(k < fast->tensors.size());
      const FastTensorEntry& e = fast->tensors[k++];
      CHECK(e.name == name);
      CHECK(e.dtype == v["dtype"].get<std::string>());
      CHECK(std::vector<int64_t>(e.shape) == v["shape"].get<std::vector<int64_t>>());
      CHECK(e.begin == v["data_offsets"][0].get<uint64_t>());
      CHECK(e.end == v["data_offsets"][1].get<uint64_t>());
    }
    CHECK(k == fast->tensors.size());
    CHECK(fast->metadata.has_value() == (round % 3 == 0));
  }
}

TEST_CASE("fast_json: anything but the ordinary shape is left to the full reading") {
  const char* refused[] = {
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "dtype": "F16"}})",
      R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
      R"({"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}})",
      R"({"a": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 4]}})",
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})",
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})",
      R"({"a": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})",
      R"({"a": {"shape": [1], "data_offsets": [0, 4]}})",
      R"({"a": [1]})",
      R"({"__metadata__": {"k": 1}})",
      R"({"__metadata__": {"k": "1", "k": "2"}})",
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 1e999]}})",
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}} trailing)",
      R"([1, 2])",
      "{\"a\xff\": {}}",
  };
  for (const char* text : refused) {
    CAPTURE(text);
    CHECK_FALSE(fast_safetensors_header(text).has_value());
  }
  CHECK_FALSE(fast_index(R"({"weight_map": {"a": "s1", "a": "s2"}})").has_value());
  CHECK_FALSE(fast_index(R"({"weight_map": {"a": 1}})").has_value());
  CHECK_FALSE(fast_index(R"({"metadata": {}})").has_value());
  CHECK_FALSE(fast_index(R"({"weight_map": {}, "weight_map": {}})").has_value());
  const auto index = fast_index(R"({"metadata": {"total_size": 8, "z": [1, 2.5]}, "weight_map": {"b": "s2", "a": "s1"}})");
  REQUIRE(index.has_value());
  CHECK(index->names == std::vector<std::string_view>{"b", "a"});
  CHECK(index->file_of == std::vector<uint32_t>{0, 1});
  CHECK(index->find("a") == 1);
  CHECK(index->find("b") == 0);
  CHECK(index->find("c") == FastIndex::kNone);
  CHECK(index->files == std::vector<std::string>{"s2", "s1"});
  // each shard kept once, whatever the order its tensors come in
  const auto mixed = fast_index(R"({"weight_map": {"a": "s1", "b": "s2", "c": "s1", "d": "s1", "e": "s2"}})");
  REQUIRE(mixed.has_value());
  CHECK(mixed->files == std::vector<std::string>{"s1", "s2"});
  CHECK(mixed->names == std::vector<std::string_view>{"a", "b", "c", "d", "e"});
  CHECK(mixed->file_of == std::vector<uint32_t>{0, 1, 0, 0, 1});
  // sorted names (as transformers writes them) are found by binary search, with or without a right hint
  for (uint32_t k = 0; k < 5; ++k) {
    CHECK(mixed->find(mixed->names[k]) == k);
    CHECK(mixed->find(mixed->names[k], k) == k);
    CHECK(mixed->find(mixed->names[k], (k + 1) % 5) == k);
  }
  CHECK(mixed->find("bb") == FastIndex::kNone);
  CHECK(mixed->find("f", 4) == FastIndex::kNone);
  // a name repeated after a sorted run is still refused
  CHECK_FALSE(fast_index(R"({"weight_map": {"a": "s1", "b": "s1", "c": "s1", "b": "s2"}})").has_value());
  REQUIRE(index->metadata.has_value());
  CHECK(nlohmann::json::parse(*index->metadata) == nlohmann::json::parse(R"({"total_size": 8, "z": [1, 2.5]})"));
}

TEST_CASE("fast_json: a refused header still gets the full path's message") {
  // Each refusal above goes to nlohmann's reading, which names the problem as before the fast path.
  auto error_of = [](const std::string& header) {
    try {
      (void)read_checkpoint(MappedFile::from_memory(safetensors_file(header), "t.safetensors"), Limits{});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})")
            .find("duplicate tensor name 'a'") != std::string::npos);
  CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})").find("negative or non-integer") !=
        std::string::npos);
  CHECK(error_of(R"({"a": {"dtype": "X9", "shape": [1], "data_offsets": [0, 4]}})").find("unknown dtype \"X9\"") !=
        std::string::npos);
  CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})").find("needs 8") != std::string::npos);
}

TEST_CASE("fast_json: a reused parser never overwrites a header still held, and parsing in place reads as the copy") {
  auto header = [](const std::string& name, int n) {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    for (int k = 0; k < n; ++k)
      h[name + std::to_string(k)] = {{"dtype", "F32"}, {"shape", {k}}, {"data_offsets", {0, 4 * k}}};
    return h.dump();
  };
  std::shared_ptr<void> reuse;
  const std::string a = header("first.", 300), b = header("second.", 5), c = header("third.", 40);
  auto ha = fast_safetensors_header(a, true, 0, &reuse);
  REQUIRE(ha.has_value());
  const void* parser_a = ha->strings.get();
  // ha is alive: the next header needs a parser of its own, and ha's names stay as they were.
  auto hb = fast_safetensors_header(b, true, 0, &reuse);
  REQUIRE(hb.has_value());
  CHECK(hb->strings.get() != parser_a);
  CHECK(ha->tensors.size() == 300);
  CHECK(ha->tensors[299].name == "first.299");
  CHECK(hb->tensors[4].name == "second.4");
  // Both dropped: the parser kept in `reuse` (hb's) reads the next one.
  const void* parser_b = hb->strings.get();  // (no reference kept: that would keep it from reuse)
  ha.reset();
  hb.reset();
  auto hc = fast_safetensors_header(c, true, 0, &reuse);
  REQUIRE(hc.has_value());
  CHECK(hc->strings.get() == parser_b);
  CHECK(hc->tensors.size() == 40);
  CHECK(hc->tensors[39].name == "third.39");

  // In place: the text followed by bytes that may be read (not JSON, not zero) reads as a padded copy.
  const std::string padded = c + std::string(100, '}');
  const std::string_view text(padded.data(), c.size());
  auto in_place = fast_safetensors_header(text, true, padded.size());
  auto copied = fast_safetensors_header(text, true, 0);
  REQUIRE(in_place.has_value());
  REQUIRE(copied.has_value());
  REQUIRE(in_place->tensors.size() == copied->tensors.size());
  for (size_t k = 0; k < copied->tensors.size(); ++k) {
    CHECK(in_place->tensors[k].name == copied->tensors[k].name);
    CHECK(in_place->tensors[k].end == copied->tensors[k].end);
  }
  // A document cut short stays refused in place (the bytes after it are not read as its own).
  const std::string_view cut(padded.data(), c.size() - 1);
  CHECK_FALSE(fast_safetensors_header(cut, true, padded.size()).has_value());
  CHECK(fast_index(std::string_view(padded.data(), c.size()), padded.size()) == std::nullopt);  // no weight_map
}

TEST_CASE("MappedFile::readable_from: to the end of the last page for a mapped file, the file's end otherwise") {
  const std::string path = "/tmp/ckpt_test_readable_" + std::to_string(::getpid());
  for (const size_t size : {size_t{1}, size_t{4000}, size_t{4096}, size_t{10000}}) {
    {
      FILE* f = std::fopen(path.c_str(), "wb");
      REQUIRE(f);
      const std::string bytes(size, 'x');
      REQUIRE(std::fwrite(bytes.data(), 1, size, f) == size);
      std::fclose(f);
    }
    auto m = MappedFile::open(path);
    const ByteView v = m->view();
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t mapped_end = (size + page - 1) / page * page;
    CHECK(m->readable_from(v.data()) == mapped_end);
    CHECK(m->readable_from(v.data() + size) == mapped_end - size);
    CHECK(m->readable_from(v.data() + size + 1) == 0);  // outside the file
    auto mem = MappedFile::from_memory(std::string(size, 'y'), "mem");
    CHECK(mem->readable_from(mem->view().data()) == size);
  }
  std::remove(path.c_str());
}
