// Opens any checkpoint ckpt knows. Format detection tries each opener in turn on the first bytes /
// records (FORMATS.md "Detecting the format"); adding a format adds one entry to the list in reader.cc.
#pragma once

#include <memory>
#include <string>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace ckpt {

Checkpoint read_checkpoint(std::shared_ptr<MappedFile> file, const Limits& limits = Limits{});
Checkpoint read_checkpoint(const std::string& path, const Limits& limits = Limits{});

}  // namespace ckpt
