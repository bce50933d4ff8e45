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
#include "core/input.h"

namespace ckpt {

bool is_dcp_dir(const std::string& path);
// `in.path` is the directory.
// `read_blob` reads a chunk's torch.save blob when a tensor is assembled (kept in ck.dcp).
void read_dcp(Checkpoint& ck, const Input& in, const Limits& limits, Checkpoint (*read_blob)(std::shared_ptr<MappedFile>, const Limits&));

}  // namespace ckpt
