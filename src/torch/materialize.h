// Checkpoint tensors as at::Tensors on meta, CPU or CUDA, each storage written exactly once:
//   meta  at::empty_strided on the meta device, no byte of the file read;
//   cpu   a read-only view of the mapped file when the bytes are aligned for the dtype (zero-copy),
//         else one copy; every byte read once for the NaN / Inf count;
//   cuda  one uninitialized device allocation per storage, filled by the streaming load (core/stream.h,
//         torch/tensor_sink.h): several threads read the file into a small ring of pinned buffers while
//         earlier chunks copy asynchronously; NaN / Inf counted afterwards on the device by LibTorch's
//         reductions (nonfinite.h); --checksum reads every tensor back from the device. Every device
//         wait bounded by --limit stall-seconds (core/watchdog.h).
//   cpu with `stream`: the same streaming load into CPU allocations (the CUDA load's CPU twin).
// Tensors sharing a storage (tied weights, views) share it on the device too.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.h"
#include "core/device.h"
#include "core/load_report.h"
#include "core/values.h"
#include "torch/tensor_sink.h"

namespace ckpt::torchb {

// "1.13.0" (the headers ckpt-torch was built against) and whether that LibTorch has CUDA.
std::string libtorch_version();

// The c10::Device of a parsed --device (core/device.h; `spec` its text, for errors). Throws
// EnvironmentError when CUDA is asked for and this LibTorch or this machine has none.
c10::Device parse_device(const DeviceSpec& ds, const std::string& spec);

// at::ScalarType for a ckpt dtype; nullopt when the linked LibTorch does not know it.
std::optional<at::ScalarType> scalar_type(const DType& d);
// PyTorch's name for it ("float32").
std::string dtype_name(at::ScalarType t);

struct Target {
  std::string name;  // the name it is reported under (after --strip-prefix / --add-prefix)
  const Tensor* tensor;
};

struct MaterializeOptions {
  c10::Device device = c10::Device(c10::kCPU);
  bool checksum = false;  // CRC-32 per tensor, before any --dtype conversion (cuda: of the device's copy)
  bool stream = false;  // cpu: through the streaming load, as cuda always is
  StagingRing* ring = nullptr;  // cuda, stream: the run's staging ring (made when the device was known)
  double stall_seconds = 30;  // cuda, stream: --limit stall-seconds, for every device wait
  std::optional<at::ScalarType> dtype;  // convert floating tensors
  std::function<void(uint64_t done, uint64_t total)> progress;  // bytes
  const std::vector<TensorCheck>* prechecked = nullptr;  // check_values results for `targets`, done elsewhere
};

// Materializes `targets` of `ck`, appending one row per target to report.rows and updating its totals.
// Returns (name, tensor) for every target that loaded (on meta also for meta entries of the file).
std::vector<std::pair<std::string, at::Tensor>> materialize(const Checkpoint& ck, const std::vector<Target>& targets,
                                                            const MaterializeOptions& o, LoadReport& report);

}  // namespace ckpt::torchb
