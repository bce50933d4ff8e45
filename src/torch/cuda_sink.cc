// The CUDA end of the streaming load (tensor_sink.h): the only code that only a GPU runs. Everything
// around it (plan, readers, ring, watchdog, NaN / Inf reductions, readback) runs on the CPU too, through
// the host sink (`ckpt load --device cpu --stream`, tests/cli/cuda_load.py --device cpu).
#include <fmt/format.h>

#include "core/error.h"
#include "torch/materialize.h"
#include "torch/tensor_sink.h"

#if CKPT_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace ckpt::torchb::detail {

#if CKPT_CUDA
namespace {

// A CUDA runtime failure as the environment's error (exit 4): out of memory, a device that went away.
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear it: the runtime keeps the last non-sticky error
  throw EnvironmentError(fmt::format("{}: CUDA error: {}", what, cudaGetErrorString(e)));
}

// Whether `q` (an event or stream query) says done; NotReady: not yet; anything else throws.
bool ready(cudaError_t q, const char* what) {
  if (q == cudaErrorNotReady) return false;
  check(q, what);
  return true;
}

class Sink final : public TensorSink {
 public:
  explicit Sink(c10::Device device) : device_(device) {}
  ~Sink() override { release(); }

  at::Tensor storage(size_t id) const override { return storages_.at(id); }

  void prepare(unsigned slots) override {
    c10::cuda::CUDAGuard g(device_);
    if (slots_.size() < slots) slots_.resize(slots);
    for (Slot& s : slots_) {
      if (!s.stream) check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      if (!s.event) check(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming), "cudaEventCreate");
    }
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

  bool done(unsigned slot) override { return ready(cudaEventQuery(slots_[slot].event), "device copy"); }

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
        at::Tensor c = view.contiguous();  // on LibTorch's current stream: the slot's stream waits for it
        cudaEvent_t made = nullptr;
        check(cudaEventCreateWithFlags(&made, cudaEventDisableTiming), "cudaEventCreate");
        check(cudaEventRecord(made, c10::cuda::getCurrentCUDAStream(device_.index()).stream()), "cudaEventRecord");
        check(cudaStreamWaitEvent(slots_[slot].stream, made, 0), "cudaStreamWaitEvent");
        (void)cudaEventDestroy(made);  // released once recorded work completes
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

  void fence(Watchdog& dog, const std::string& message) override {
    c10::cuda::CUDAGuard g(device_);
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(e, c10::cuda::getCurrentCUDAStream(device_.index()).stream()), "cudaEventRecord");
    try {
      dog.wait([&] { return ready(cudaEventQuery(e), "device reductions"); }, message);
    } catch (...) {
      (void)cudaEventDestroy(e);
      throw;
    }
    (void)cudaEventDestroy(e);
  }

  void abort() noexcept override {
    // What is in flight finishes before its memory goes, for at most two seconds: a device that does not
    // answer (a stall) keeps it, and the process ends.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    bool idle = true;
    for (Slot& s : slots_)
      while (s.stream && cudaStreamQuery(s.stream) == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > until) {
          idle = false;
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    (void)cudaGetLastError();
    storages_.clear();  // back to LibTorch's caching allocator
    contiguous_.clear();
    if (idle) try {
        c10::cuda::CUDACachingAllocator::emptyCache();  // the device memory goes back, not only to the cache
      } catch (...) {}
  }

 private:
  struct Slot {
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
  };
  void release() noexcept {
    for (Slot& s : slots_) {
      if (s.event) (void)cudaEventDestroy(s.event);
      if (s.stream) (void)cudaStreamDestroy(s.stream);  // returns at once; resources go when its work is done
    }
    slots_.clear();
    (void)cudaGetLastError();
  }

  c10::Device device_;
  std::vector<Slot> slots_;
  std::vector<at::Tensor> storages_;
  std::mutex lock_;
  std::map<const Tensor*, at::Tensor> contiguous_;
};

// Pinned host memory for the ring. init() makes the device's primary context and LibTorch's CUDA state
// (its first allocation), on the ring's thread, while the main thread reads the checkpoint.
class Pinned final : public StagingRing::Memory {
 public:
  explicit Pinned(int index) : index_(index) {}
  void init() override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    check(cudaFree(nullptr), "CUDA context");
    (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index_))));
  }
  uint8_t* alloc(uint64_t bytes) override {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "pinned staging buffer");  // page-aligned
    return static_cast<uint8_t*>(p);
  }
  void free(uint8_t* p) noexcept override { (void)cudaFreeHost(p); }

 private:
  int index_;
};

}  // namespace

std::unique_ptr<TensorSink> make_cuda_sink(c10::Device device) { return std::make_unique<Sink>(device); }
std::unique_ptr<StagingRing::Memory> make_pinned_memory(int index) { return std::make_unique<Pinned>(index); }

#else

namespace {
[[noreturn]] void no_cuda() {
  throw EnvironmentError(
      fmt::format("--device cuda: this ckpt-torch was built against LibTorch {} without CUDA (rebuild "
                  "against a CUDA LibTorch, see docs/ckpt-torch.md)",
                  libtorch_version()));
}
}  // namespace

// Lazy: parse_device, on the main thread, says so first, in its own words.
class NoCuda final : public StagingRing::Memory {
 public:
  void init() override { no_cuda(); }
  uint8_t* alloc(uint64_t) override { no_cuda(); }
  void free(uint8_t*) noexcept override {}
};

std::unique_ptr<TensorSink> make_cuda_sink(c10::Device) { no_cuda(); }
std::unique_ptr<StagingRing::Memory> make_pinned_memory(int) { return std::make_unique<NoCuda>(); }

#endif

}  // namespace ckpt::torchb::detail
