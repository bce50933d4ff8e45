// Opens any checkpoint ckpt knows. Format detection walks one table in reader.cc, in order: each
// entry sniffs the input (the path first, then the mapped file's first bytes) and the first that
// matches reads it; adding a format adds one entry there.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/input.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace ckpt {


Checkpoint read_checkpoint(std::shared_ptr<MappedFile> file, const Limits& limits = Limits{});
Checkpoint read_checkpoint(const std::string& path, const Limits& limits = Limits{});
// The weights alone, without a Hugging Face config.json beside them (a sharded set's shards).
Checkpoint read_weights(const std::string& path, const Limits& limits = Limits{});
// The same, of a file already open at `path`.
Checkpoint read_weights(const std::string& path, std::shared_ptr<MappedFile> file, const Limits& limits);

// Whether `dir` is one model: a DCP directory, a directory with a sharded checkpoint's *.index.json, or a
// Hugging Face model folder (config.json beside model.safetensors or pytorch_model.bin).
bool is_model_folder(const std::string& dir);

// The files of the model folder `dir` that pickle would load besides those `ck` read as the model (its
// weights or shards, DCP's .metadata and data files, the index): each file in `dir` itself (no
// sub-folder) whose name ends .bin .pt .pth .ckpt .pkl .pickle .pt2 .ptl (any case), or, in a local folder,
// whose first bytes are a zip or a pickle (protocol 2+ by its signature, 0 and 1 when Python would read it
// to its STOP). Empty files are none. With `ck` null (its reader failed), every such file. At most
// kMaxFolderFiles files are looked at, in name order. Throws InputError when `dir` cannot be listed.
FolderFiles folder_side_files(const std::string& dir, const Checkpoint* ck, const Limits& limits = Limits{});

// Printable text whose first byte starts no pickle that Python would read on from (a script, notes,
// a README): INST without a MARK, SETITEM, a byte that is no opcode, GLOBAL of a line that names no
// module, INT of a line that is no number. Python's unpickler stops at that first opcode, importing
// nothing, so there is nothing to scan. A printable file that could be a protocol-0 pickle is not text.
bool looks_like_text(const ByteView& f);
// "is text, not a PyTorch checkpoint (it begins '...')", about `path`.
InputError not_a_checkpoint_text(const std::string& path, const ByteView& f);

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
