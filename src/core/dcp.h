// torch.distributed.checkpoint directories: `.metadata` (a protocol-4 pickle of dataclasses, read by the
// inert VM) and `__<rank>_<n>.distcp` files whose regions are complete torch.save zips, one per chunk:
//
//   Metadata.state_dict_metadata = {fqn: TensorStorageMetadata(properties=TensorProperties(dtype, layout,
//       requires_grad, memory_format, pin_memory), size=torch.Size, chunks=[ChunkStorageMetadata(offsets,
//       sizes)]) | BytesStorageMetadata()}
//   Metadata.storage_data = {MetadataIndex(fqn, offset, index): _StorageInfo(relative_path, offset, length)}
//
// Summary needs only the metadata; every region is checked to lie inside its file.
#pragma once

#include <string>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/reader.h"

namespace ckpt {

bool is_dcp_dir(const std::string& path);
// `in.path` is the directory.
void read_dcp(Checkpoint& ck, const Input& in, const Limits& limits);

}  // namespace ckpt
