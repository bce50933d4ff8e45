// PyTorch dtypes as ckpt knows them: PyTorch's own name (str(torch.float32) without "torch."), the
// element size, and the legacy storage class that carries it in pickles (FloatStorage, ...).
#pragma once

#include <cstdint>
#include <string_view>

namespace ckpt {

enum class DTypeClass : uint8_t { Float, Complex, Int, Bool, Quantized, Bits };

struct DType {
  std::string_view name;  // "float32"
  uint32_t itemsize;  // bytes per element (packed sub-byte types: bytes per stored element)
  DTypeClass cls;
  std::string_view storage_class;  // "FloatStorage", or "" when only UntypedStorage carries it
  uint32_t pack = 1;  // elements per stored item (quint4x2: 2, quint2x4: 4)
};

// Bytes that `numel` elements occupy: ceil(numel / pack) * itemsize.
inline uint64_t dtype_bytes(const DType& d, uint64_t numel) { return (numel + d.pack - 1) / d.pack * d.itemsize; }

// By PyTorch name ("float32"), by torch attribute alias ("float", "half", "long", ...) or nullptr.
const DType* dtype_by_name(std::string_view name);
// By legacy storage class name ("FloatStorage", "cuda.HalfStorage" is accepted too) or nullptr.
const DType* dtype_by_storage_class(std::string_view cls);
// The uint8 dtype that UntypedStorage counts in.
const DType* dtype_uint8();

}  // namespace ckpt
