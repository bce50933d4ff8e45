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
#include "core/reader.h"

namespace ckpt {

bool looks_like_safetensors(const ByteView& file);
void read_safetensors(Checkpoint& ck, const Input& in, const Limits& limits);

}  // namespace ckpt
