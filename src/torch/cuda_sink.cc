#include "torch/cuda_sink.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/storage.h"
#include "torch/materialize.h"

#if CKPT_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <vector>
#endif

namespace ckpt::torchb {

Staging parse_staging(const std::string& s) {
  if (s == "auto") return Staging::Auto;
  if (s == "pinned") return Staging::Pinned;
  if (s == "register") return Staging::Register;
  throw UsageError(fmt::format("--staging {}: expected auto, pinned or register", s));
}

const char* to_string(Staging s) {
  switch (s) {
    case Staging::Auto: return "auto";
    case Staging::Pinned: return "pinned";
    case Staging::Register: return "register";
  }
  return "?";
}

#if CKPT_CUDA
namespace {

// A CUDA runtime failure as the environment's error (exit 4): out of memory, a device that went away.
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear it: the runtime keeps the last non-sticky error
  throw EnvironmentError(fmt::format("{}: CUDA error: {}", what, cudaGetErrorString(e)));
}

class Sink final : public CudaSink {
 public:
  Sink(c10::Device device, bool in_place) : device_(device), in_place_(in_place) {}
  ~Sink() override { release(); }

  bool in_place() const override { return in_place_; }
  at::Tensor storage(size_t id) const override { return storages_.at(id); }

  void prepare(unsigned slots) override {
    c10::cuda::CUDAGuard g(device_);
    if (slots_.size() < slots) slots_.resize(slots);
    for (Slot& s : slots_) {
      if (!s.stream) check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      if (!s.event) check(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming), "cudaEventCreate");
    }
  }

  // Called by the slot's owning thread only: no lock.
  uint8_t* staging(unsigned slot, uint64_t bytes) override {
    c10::cuda::CUDAGuard g(device_);
    Slot& s = slots_.at(slot);
    if (s.bytes < bytes) {
      if (s.host) check(cudaFreeHost(s.host), "cudaFreeHost");
      s.host = nullptr;
      s.bytes = 0;
      void* p = nullptr;
      check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "pinned staging buffer");  // page-aligned
      s.host = static_cast<uint8_t*>(p);
      s.bytes = bytes;
    }
    return s.host;
  }

  void allocate(size_t id, uint64_t nbytes) override {
    if (storages_.size() <= id) storages_.resize(id + 1);
    // Uninitialized: every byte is written by the stream. An allocation that fails throws c10::Error
    // ("CUDA out of memory ..."), which the load reports with the file's name.
    storages_[id] = at::empty({static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte).device(device_));
  }

  void write(unsigned slot, size_t id, uint64_t offset, const uint8_t* src, uint64_t len) override {
    c10::cuda::CUDAGuard g(device_);
    uint8_t* dst = static_cast<uint8_t*>(storages_[id].data_ptr()) + offset;
    check(cudaMemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, slots_[slot].stream), "host-to-device copy");
  }

  void commit(unsigned slot) override { check(cudaEventRecord(slots_[slot].event, slots_[slot].stream), "cudaEventRecord"); }

  void wait(unsigned slot) override { check(cudaEventSynchronize(slots_[slot].event), "device copy"); }

  bool pin(unsigned slot, const uint8_t* p, uint64_t len) override {
    if (!in_place_) return false;
    const uintptr_t page = 4096;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + len + page - 1) & ~(page - 1);
    c10::cuda::CUDAGuard g(device_);
    // Fails where a neighbouring chunk holds the page already (their ranges share it): then staged.
    if (cudaHostRegister(reinterpret_cast<void*>(a), b - a, cudaHostRegisterReadOnly) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    slots_[slot].registered = reinterpret_cast<void*>(a);
    return true;
  }

  void unpin(unsigned slot) override {
    if (void* p = slots_[slot].registered) {
      slots_[slot].registered = nullptr;
      check(cudaHostUnregister(p), "cudaHostUnregister");
    }
  }

  void read(unsigned slot, size_t id, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) override {
    c10::cuda::CUDAGuard g(device_);
    const uint8_t* src;
    if (is_contiguous(t)) {
      src = static_cast<const uint8_t*>(storages_[id].data_ptr()) + static_cast<uint64_t>(t.offset) * t.dtype->itemsize;
    } else {  // t.contiguous() on the device, kept until read_done
      std::lock_guard<std::mutex> l(lock_);
      auto it = contiguous_.find(&t);
      if (it == contiguous_.end()) {
        at::Tensor view = at::empty({0}, at::TensorOptions().dtype(*scalar_type(*t.dtype)).device(device_))
                              .set_(storages_[id].storage(), t.offset, t.shape, t.stride);
        at::Tensor c = view.contiguous();
        c10::cuda::getCurrentCUDAStream(device_.index()).synchronize();  // made on the current stream
        it = contiguous_.emplace(&t, std::move(c)).first;
      }
      src = static_cast<const uint8_t*>(it->second.data_ptr());
    }
    check(cudaMemcpyAsync(dst, src + offset, len, cudaMemcpyDeviceToHost, slots_[slot].stream), "device-to-host copy");
  }

  void read_done(const Tensor& t) override {
    std::lock_guard<std::mutex> l(lock_);
    contiguous_.erase(&t);
  }

  void finish() override {
    for (Slot& s : slots_)
      if (s.stream) check(cudaStreamSynchronize(s.stream), "device copy");
  }

  void abort() noexcept override {
    for (Slot& s : slots_)
      if (s.stream) (void)cudaStreamSynchronize(s.stream);
    for (Slot& s : slots_)
      if (s.registered) (void)cudaHostUnregister(s.registered), s.registered = nullptr;
    (void)cudaGetLastError();
    storages_.clear();
    contiguous_.clear();
    try {
      c10::cuda::CUDACachingAllocator::emptyCache();  // the device memory goes back, not only to the cache
    } catch (...) {}
  }

 private:
  struct Slot {
    uint8_t* host = nullptr;
    uint64_t bytes = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
    void* registered = nullptr;
  };
  void release() noexcept {
    for (Slot& s : slots_) {
      if (s.stream) (void)cudaStreamSynchronize(s.stream);
      if (s.registered) (void)cudaHostUnregister(s.registered);
      if (s.event) (void)cudaEventDestroy(s.event);
      if (s.stream) (void)cudaStreamDestroy(s.stream);
      if (s.host) (void)cudaFreeHost(s.host);
    }
    slots_.clear();
    (void)cudaGetLastError();
  }

  c10::Device device_;
  bool in_place_;
  std::vector<Slot> slots_;
  std::vector<at::Tensor> storages_;
  std::mutex lock_;
  std::map<const Tensor*, at::Tensor> contiguous_;
};

}  // namespace

std::unique_ptr<CudaSink> make_cuda_sink(c10::Device device, Staging staging) {
  int can = 0;
  c10::cuda::CUDAGuard g(device);
  if (cudaDeviceGetAttribute(&can, cudaDevAttrHostRegisterReadOnlySupported, device.index()) != cudaSuccess) {
    (void)cudaGetLastError();
    can = 0;
  }
  if (staging == Staging::Register && !can)
    throw EnvironmentError(
        fmt::format("--staging register: {} cannot register host memory read-only "
                    "(cudaDevAttrHostRegisterReadOnlySupported is 0); use --staging pinned",
                    device.str()));
  return std::make_unique<Sink>(device, staging != Staging::Pinned && can);
}

#else

std::unique_ptr<CudaSink> make_cuda_sink(c10::Device device, Staging) {
  throw EnvironmentError(
      fmt::format("--device {}: this ckpt-torch was built against LibTorch {} without CUDA (rebuild "
                  "against a CUDA LibTorch, see docs/ckpt-torch.md)",
                  device.str(), libtorch_version()));
}

#endif

}  // namespace ckpt::torchb
