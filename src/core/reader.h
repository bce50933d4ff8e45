// Opens any checkpoint ckpt knows. Format detection walks one table in reader.cc, in order: each
// entry sniffs the input (the path first, then the mapped file's first bytes) and the first that
// matches reads it; adding a format adds one entry there.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/input.h"
#include "core/torch_tar.h"
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

// What an operand names, decided once for the CLI's expansion: a file (local, `-` read
// from stdin, a sharded index, a URL read whole), a folder that is ONE checkpoint (is_model_folder), any
// other folder (the CLI walks it), or nothing there. Throws what a remote listing throws (401, network).
enum class Operand : uint8_t { Missing, File, Model, Folder };
Operand classify(const std::string& path);

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


}  // namespace ckpt
