// Tar checkpoints of torch <= 0.1.9, read as torch/serialization.py's legacy_load reads them: their
// tensors, and the pickles it unpickles (for the security scan).
#pragma once

#include <string>
#include <vector>

#include "core/bytes.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/input.h"

namespace ckpt {

// Reads a tar checkpoint (looks_like_tar in tar.h) into `ck`.
void read_torch_tar(Checkpoint& ck, const Input& in, const Limits& lim);

// The pickles torch.load unpickles in a tar checkpoint of torch <= 0.1.9 (looks_like_tar in tar.h), in
// the order it reads them: in 'storages' the count, each (key, location, type) record and the view list;
// in 'tensors' the count and each (key, storage, type) record; then 'pickle' (for each name, the last
// member of that name, as tarfile's getmember). The raw bytes between pickles are skipped as torch
// skips them. 'sys_info' is left out: torch never unpickles it. For a scanner: unpickle each span with
// its own VM. The walk stops at the first thing it cannot follow; `stopped` then says what and where.
struct TarPickle {
  std::string member;
  ByteView data;  // the member's bytes (a view naming the member)
  uint64_t start = 0, end = 0;  // the pickle within `data`, STOP included
};
struct TarPickles {
  std::vector<TarPickle> pickles;
  std::string stopped;  // "" when every member was walked to its end
};
TarPickles torch_tar_pickles(const ByteView& file, const Limits& limits = Limits{});

}  // namespace ckpt
