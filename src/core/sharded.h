// Hugging Face sharded checkpoints: `model.safetensors.index.json` / `pytorch_model.bin.index.json`
//   {"metadata": {"total_size": N}, "weight_map": {"<tensor>": "<shard file>", ...}}
// beside the shards. Every shard is read with the ordinary readers and checked against the map: a
// missing shard, a tensor in another shard than the map says, or a mapped tensor no shard holds is an
// error naming the index, the shard and the tensor.
#pragma once

#include <string>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/input.h"

namespace ckpt {

// The index file inside a directory (the first *.index.json with a weight_map), or "" when none.
std::string find_index(const std::string& dir);
bool is_index_path(const std::string& path);
// `in.path` is the index.
// `read_whole` reads a shard that is not safetensors (reader.h's read_weights).
void read_sharded(Checkpoint& ck, const Input& in, const Limits& limits, ReadWhole read_whole);

}  // namespace ckpt
