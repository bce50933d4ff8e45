// safetensors (huggingface/safetensors), validated as the reference implementation does:
//
//   [u64 LE header length N][N bytes UTF-8 JSON, may be space-padded][data]
//   JSON: {"__metadata__": {str: str}?, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
//
// Offsets are relative to the data start; the tensors must tile [0, last end) exactly (sorted by begin,
// no gap, no overlap), e - b must equal numel x itemsize, and the file must end at the last end.
#pragma once

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/input.h"

#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

bool looks_like_safetensors(const ByteView& file);

// A tensor of a safetensors header, checked (a known dtype, a size that fits, data_offsets spanning
// exactly its bytes).
struct SafetensorsEntry {
  std::string_view name;  // views SafetensorsHeader::strings
  const DType* dtype = nullptr;
  Dims shape;
  uint64_t numel = 1, begin = 0, end = 0;  // begin, end: data_offsets
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data order, tiling the data region exactly
  uint64_t data_start = 0;  // 8 + the header's length
  std::optional<std::vector<std::pair<std::string, std::string>>> metadata;  // __metadata__, in file order
  std::shared_ptr<const void> strings;  // what the names view
};

// A file's header when it has the ordinary shape (fast_json.h), else nullopt: read_safetensors then names
// what is wrong. What is read is checked as read_safetensors checks it and throws the same errors (a
// header length over the limits, tensors that do not tile the data). `check_repeats` false: a tensor name
// may repeat, for the caller to find (a sharded read, through its index of the weight_map). `mapped`: the
// file behind the view, when the header may be parsed where it lies (MappedFile::readable_from);
// `reuse`: fast_safetensors_header's.
std::optional<SafetensorsHeader> read_safetensors_header_fast(const ByteView& file, const Limits& limits, bool check_repeats,
                                                              const MappedFile* mapped = nullptr,
                                                              std::shared_ptr<void>* reuse = nullptr);

// The records of one entry as read_safetensors makes them (its storage key the name, or `key`), its
// shape moved out.
void safetensors_records(SafetensorsEntry& e, uint64_t data_start, std::string key, Tensor& t, Storage& s);
void read_safetensors(Checkpoint& ck, const Input& in, const Limits& limits);

}  // namespace ckpt
