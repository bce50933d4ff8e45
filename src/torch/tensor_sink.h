// The ends of the streaming load (core/stream.h) that make at::Tensors: one uninitialized allocation per
// storage on the device, written from the staging ring, and the ring's memory.
//   cpu   (`--device cpu --stream`, the CUDA load's twin): at::empty on the CPU, memcpy from the ring;
//         tensor_sink.cc.
//   cuda  a stream and an event per ring slot, cudaMemcpyAsync from the pinned ring into the storage,
//         done(slot) an event query; the ring pinned with cudaHostAlloc on its own thread, whose first
//         call makes the CUDA context. Compiled only against a CUDA LibTorch (CKPT_CUDA, set by CMake when
//         the Torch package has CUDA libraries); elsewhere the factories say CUDA is not built in.
//         cuda_sink.cc, the only code that only a GPU runs: keep it small.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "core/stream.h"
#include "core/watchdog.h"

namespace ckpt::torchb {

class TensorSink : public StreamSink {
 public:
  // The storage allocated for `storage` (a byte tensor on the device).
  virtual at::Tensor storage(size_t storage) const = 0;
  // Returns once the work LibTorch queued so far on the device's current stream is done (NaN / Inf
  // reductions), polling under `dog`; StallError(message) when it is not in time.
  virtual void fence(Watchdog& dog, const std::string& message) { (void)dog, (void)message; }
};

// cpu or cuda:N (an index always set, parse_device). Throws EnvironmentError for cuda where this
// ckpt-torch was built without CUDA.
std::unique_ptr<TensorSink> make_tensor_sink(c10::Device device);
// The ring's memory for `device`: plain on the CPU; pinned for cuda, with the device's context (and
// LibTorch's CUDA state) made first by init() on the ring's thread. `index`: the CUDA device.
std::unique_ptr<StagingRing::Memory> make_ring_memory(bool cuda, int index);

namespace detail {
std::unique_ptr<TensorSink> make_cuda_sink(c10::Device device);  // cuda_sink.cc
std::unique_ptr<StagingRing::Memory> make_pinned_memory(int index);  // cuda_sink.cc
}  // namespace detail

}  // namespace ckpt::torchb
