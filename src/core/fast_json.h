// The two JSON documents that grow with the tensor count, a safetensors header and a sharded index's
// weight_map, read with simdjson: a tape of the document, keys in file order, no tree of std::map nodes
// (nlohmann's DOM took ~65,000 instructions per tensor, two thirds of a sharded summary). Only the
// ordinary, valid shape of each document is taken here; anything else (bad JSON, a repeated key, a
// missing or mistyped field, a number out of range) gives nullopt, and the caller reads the text again
// with its nlohmann path, which names the problem exactly as before. So the fast path decides nothing
// about bad input: it only never runs on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

struct FastTensorEntry {
  std::string name;
  std::string dtype;  // as the header spells it ("BF16")
  std::vector<int64_t> shape;  // every size >= 0
  uint64_t begin = 0, end = 0;  // data_offsets
};

struct FastSafetensorsHeader {
  std::vector<FastTensorEntry> tensors;  // in file order
  std::optional<std::vector<std::pair<std::string, std::string>>> metadata;  // __metadata__, in file order
};

// A safetensors header: an object of tensor entries ({"dtype": str, "shape": [int >= 0...],
// "data_offsets": [uint, uint]}, other fields ignored) and an optional __metadata__ object of strings,
// no key repeated at any level that is read.
std::optional<FastSafetensorsHeader> fast_safetensors_header(std::string_view text);

struct FastIndex {
  std::vector<std::string> files;  // the shards the weight_map names, each once, in first-seen order
  std::vector<std::pair<std::string, uint32_t>> weight_map;  // tensor -> its shard in `files`, in file order, no repeats
  std::optional<std::string> metadata;  // "metadata" as compact JSON text, when present
  // Appends tensor -> shard (a shard's name is kept once: a million entries name a few dozen files).
  void add(std::string tensor, std::string_view shard);

 private:
  std::unordered_map<std::string, uint32_t> file_of_;
};

// A sharded index: an object with a "weight_map" object of strings (no repeated tensor) and maybe a
// "metadata" value; no repeated top-level key.
std::optional<FastIndex> fast_index(std::string_view text);

}  // namespace ckpt
