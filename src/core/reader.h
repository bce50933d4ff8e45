// Opens any checkpoint ckpt knows. Format detection walks one table in reader.cc, in order: each
// entry sniffs the input (the path first, then the mapped file's first bytes) and the first that
// matches reads it; adding a format adds one entry there.
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

Checkpoint read_checkpoint(std::shared_ptr<MappedFile> file, const Limits& limits = Limits{});
Checkpoint read_checkpoint(const std::string& path, const Limits& limits = Limits{});

}  // namespace ckpt
