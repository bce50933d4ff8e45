// The CUDA end of the streaming load (core/stream.h): one uninitialized device allocation per storage,
// a pinned staging buffer, a stream and an event per ring slot; cudaMemcpyAsync from the slot (or from
// file pages registered in place, read-only) into the storage; readback for --checksum through the
// same slots. Compiled only against a CUDA LibTorch (CKPT_CUDA, set by CMake when the Torch package has
// CUDA libraries); elsewhere make_cuda_sink says CUDA is not built in.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "core/stream.h"

namespace ckpt::torchb {

// How chunks reach the device: Auto registers page-cache chunks in place where the device supports
// read-only registration (cudaDevAttrHostRegisterReadOnlySupported) and stages the rest; Pinned always
// stages; Register asks for registration and fails when the device cannot.
enum class Staging : uint8_t { Auto, Pinned, Register };
Staging parse_staging(const std::string& s);  // UsageError for anything else
const char* to_string(Staging s);

class CudaSink : public StreamSink {
 public:
  // The storage allocated for `storage` (a byte tensor on the device).
  virtual at::Tensor storage(size_t storage) const = 0;
  // Whether chunks are offered in place (StreamOptions::in_place).
  virtual bool in_place() const = 0;
};

// Throws EnvironmentError where this ckpt-torch was built without CUDA, or `Register` was asked of a
// device that cannot register read-only memory.
std::unique_ptr<CudaSink> make_cuda_sink(c10::Device device, Staging staging);

}  // namespace ckpt::torchb
