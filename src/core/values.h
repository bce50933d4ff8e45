// What a tensor's bytes hold as values: NaN / Inf counts, the CRC-32 of its elements, the threaded
// check every byte of a load goes through, and one element as float64 for comparing values (diff).
// Where the bytes are and how a strided tensor is walked is storage.h's job.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/checkpoint.h"
#include "core/storage.h"

namespace ckpt {

struct ValueStats {
  uint64_t nan = 0, inf = 0;
};
// NaN / Inf counts over `numel` contiguous elements (floating and complex dtypes; zero for others).
// Complex elements count as torch.isnan / torch.isinf do: either part.
ValueStats count_nonfinite(const DType& d, const uint8_t* p, uint64_t numel);
// Same over a strided tensor whose storage bytes start at `storage`.
ValueStats tensor_nonfinite(const Tensor& t, const uint8_t* storage);
// CRC-32 of the tensor's elements in row-major order, bytes as stored (what
// zlib.crc32(t.contiguous().numpy().tobytes()) gives).
uint32_t tensor_crc32(const Tensor& t, const uint8_t* storage);

// Every byte of the tensors' storages read once, split over `threads`: bounds checked, NaN / Inf counted,
// CRC-32 taken when asked. A mapped file is read in windows of `window` bytes per thread (0:
// window_bytes(threads), mapped_file.h), each released from this process once checked (the pages stay
// in the page cache, and zero-copy tensors over them fault them back in when read): the resident memory
// does not grow with the largest tensor. Entries that are not materialized strided tensors get empty
// results. Throws the first InputError any thread met.
struct TensorCheck {
  ValueStats stats;
  std::optional<uint32_t> crc32;
};
// `progress(bytes done, bytes total)` is called from the calling thread only.
std::vector<TensorCheck> check_values(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors,
                                      bool crc, unsigned threads,
                                      const std::function<void(uint64_t, uint64_t)>& progress = nullptr, uint64_t window = 0);

// One element as float64, or nullopt when the dtype has no plain numeric value (complex, quantized, fp8).
std::optional<double> element_value(const DType& d, const uint8_t* p);
// Whether element_value converts this dtype (false for nullptr).
bool numeric(const DType* d);

}  // namespace ckpt
