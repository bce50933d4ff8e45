// What a format reader is given (reader.h's table hands each the input it sniffed), and the reader it may
// call back for a part in another format (a sharded set's non-safetensors shard, a DCP chunk's torch.save
// blob): passed down by reader.cc, so that no format reader depends on the table of them all.
#pragma once

#include <memory>
#include <string>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace ckpt {

// What a format sniffs and reads: a path (a directory, an index file, any file), and once the path is
// neither a directory nor an index, the file mapped. A mapped input is told apart by its bytes alone.
struct Input {
  std::string path;
  std::shared_ptr<MappedFile> file;  // null while only the path is known
};

// reader.h's read_weights: a file read as a checkpoint of any format (its path as named; `file` mapped).
using ReadWhole = Checkpoint (*)(const std::string& path, std::shared_ptr<MappedFile> file, const Limits& limits);

}  // namespace ckpt
