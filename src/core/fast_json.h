// The two JSON documents that grow with the tensor count, a safetensors header and a sharded index's
// weight_map, read with simdjson: a tape of the document, keys in file order, no tree of std::map nodes
// (nlohmann's DOM took ~65,000 instructions per tensor, two thirds of a sharded summary). Only the
// ordinary, valid shape of each document is taken here; anything else (bad JSON, a repeated key, a
// missing or mistyped field, a number out of range) gives nullopt, and the caller reads the text again
// with its nlohmann path, which names the problem exactly as before. So the fast path decides nothing
// about bad input: it only never runs on it.
#pragma once

#include "core/dims.h"
#include "core/name_index.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

struct FastTensorEntry {
  std::string_view name;  // views the header's own copy (FastSafetensorsHeader::strings)
  std::string_view dtype;  // as the header spells it ("BF16")
  Dims shape;  // every size >= 0
  uint64_t begin = 0, end = 0;  // data_offsets
};

struct FastSafetensorsHeader {
  std::vector<FastTensorEntry> tensors;  // in file order
  std::optional<std::vector<std::pair<std::string, std::string>>> metadata;  // __metadata__, in file order
  std::shared_ptr<const void> strings;  // what the entries' views point into (the parser's strings)
};

// A safetensors header: an object of tensor entries ({"dtype": str, "shape": [int >= 0...],
// "data_offsets": [uint, uint]}, other fields ignored) and an optional __metadata__ object of strings,
// no key repeated at any level that is read. `check_repeats` false leaves tensor names repeated at the
// top level to the caller (a sharded read finds them through its index of the weight_map).
// `readable`: the bytes from text.data() on that may be read (64 past the end spare a padded copy of the
// text). `reuse`: a parser kept between documents read one after another on one thread, its buffers
// used again once no header it gave out is alive (a fresh parser faults in new pages for each).
std::optional<FastSafetensorsHeader> fast_safetensors_header(std::string_view text, bool check_repeats = true,
                                                             size_t readable = 0, std::shared_ptr<void>* reuse = nullptr);

// A sharded index's weight_map, each tensor name copied once into blocks the index owns, found by name.
class FastIndex {
 public:
  std::vector<std::string> files;  // the shards the weight_map names, each once, in first-seen order
  std::vector<std::string_view> names;  // the weight_map's tensors in file order, no repeats
  std::vector<uint32_t> file_of;  // names[k]'s shard: an index into `files`
  std::optional<std::string> metadata;  // "metadata" as compact JSON text, when present

  // The place of `name` in `names`, or kNone; `hint`: where it probably is (the entry after the last one
  // found, for a shard that holds a run of the weight_map).
  uint32_t find(std::string_view name, uint32_t hint = kNone) const;
  static constexpr uint32_t kNone = UINT32_MAX;

  // Appends tensor -> shard (a shard's name is kept once: a million entries name a few dozen files);
  // false, adding nothing, when the tensor is already there.
  bool add(std::string_view tensor, std::string_view shard);
  void reserve(size_t n);  // room for n tensors

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* free_ = nullptr;
  size_t left_ = 0;
  // Names in strictly increasing order so far (transformers writes the weight_map with sorted keys): found
  // by binary search, no repeat possible. The first name out of order indexes them all in index_.
  bool sorted_ = true;
  PosIndex index_;  // name -> its place in `names`, once not sorted
  std::unordered_map<std::string, uint32_t> file_index_;
};

// A sharded index: an object with a "weight_map" object of strings (no repeated tensor) and maybe a
// "metadata" value; no repeated top-level key.
// `readable` as above.
std::optional<FastIndex> fast_index(std::string_view text, size_t readable = 0);

}  // namespace ckpt
