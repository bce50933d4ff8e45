#include "torch/tensor_sink.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace ckpt::torchb {
namespace {

// Host memory as the destination: every storage an at::Tensor of bytes, written by memcpy from the ring.
class HostSink final : public TensorSink {
 public:
  at::Tensor storage(size_t id) const override { return storages_.at(id); }

  void allocate(size_t id, uint64_t nbytes) override {
    if (storages_.size() <= id) storages_.resize(id + 1);
    storages_[id] = at::empty({static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte));  // uninitialized
  }

  void write(unsigned, size_t id, uint64_t offset, const uint8_t* src, uint64_t len) override {
    const at::Tensor& s = storages_.at(id);
    if (offset > static_cast<uint64_t>(s.numel()) || len > static_cast<uint64_t>(s.numel()) - offset)
      throw std::logic_error("HostSink: write out of range");
    std::memcpy(static_cast<uint8_t*>(s.data_ptr()) + offset, src, len);
  }

  void read(unsigned, size_t id, const Tensor& t, uint64_t offset, uint8_t* dst, uint64_t len) override {
    read_rows(t, static_cast<const uint8_t*>(storages_.at(id).data_ptr()), offset, dst, len);
  }

  void abort() noexcept override { storages_.clear(); }

 private:
  std::vector<at::Tensor> storages_;
};

}  // namespace

std::unique_ptr<TensorSink> make_tensor_sink(c10::Device device) {
  if (device.is_cuda()) return detail::make_cuda_sink(device);
  return std::make_unique<HostSink>();
}

std::unique_ptr<StagingRing::Memory> make_ring_memory(bool cuda, int index) {
  if (cuda) return detail::make_pinned_memory(index);
  return host_ring_memory();
}

}  // namespace ckpt::torchb
