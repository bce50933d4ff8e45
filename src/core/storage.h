// Where a tensor's bytes are and how to walk them: storages found by key (DCP ones assembled from their
// chunks), the bounds check every strided view goes through, and the row-major walk over strided
// layouts that value checks, CRC-32, diff and DCP assembly all share. Nothing here interprets values.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/checkpoint.h"
#include "core/name_index.h"

namespace ckpt {

// Storage lookup by key, and the bytes of a storage as a view naming its zip member (errors then say
// "model.pt: archive/data/3+0x0: ..."). Throws InputError when the bytes are not in the file.
// DCP storages are assembled from their chunks on first use into memory this index owns (thread-safe):
// views of those live as long as the index.
class StorageIndex {
 public:
  explicit StorageIndex(const Checkpoint& ck, Limits limits = Limits{});
  const Storage* find(std::string_view key) const;
  ByteView bytes(const Storage& s) const;
  // True when bytes(s) is memory of this index rather than a view of a mapped file.
  static bool assembled(const Storage& s) { return !s.dcp->chunks.empty(); }

 private:
  ByteView assemble(const Storage& s) const;
  const Checkpoint& ck_;
  Limits limits_;
  struct KeyOf {  // the index's names: the storages' keys (8 bytes a slot, no copy of a key)
    const Checkpoint* ck;
    std::string_view operator()(uint32_t k) const { return ck->storages[k].key; }
  };
  IndexBy<KeyOf> by_key_;
  mutable std::mutex lock_;
  mutable std::map<const Storage*, std::pair<std::vector<uint8_t>, std::shared_ptr<const Origin>>> assembled_;
};

// Checks that a strided tensor lies inside its storage (offset + extent) and returns the number of
// storage bytes from the tensor's first element to one past its last. Throws InputError naming the tensor.
uint64_t checked_extent(const Checkpoint& ck, const Tensor& t, const Storage& s);
// Row-major (contiguous) strides for a shape, as torch computes them (size-0/1 dims count as 1).
Dims contiguous_strides(std::span<const int64_t> shape);
// Size-1 dimensions may have any stride, as in torch.
bool is_contiguous(std::span<const int64_t> shape, std::span<const int64_t> stride);
bool is_contiguous(const Tensor& t);
// Layouts `ckpt load` materializes: strided, and contiguous per-tensor affine qint8 / quint8 / qint32.
bool loadable_layout(const Tensor& t);
// Why `ckpt load` leaves a tensor's bytes unread, in the order it asks: lazy (no shape), a dtype it cannot
// make, a layout or packing it does not materialize, quantized on a streamed load (cuda, --stream), a meta
// tensor, no storage of its own (a pickled wrapper subclass). Unread::No: the load reads them.
enum class Unread : uint8_t { No, Lazy, Dtype, Layout, QuantizedStreamed, Meta, NoStorage };
// `makes` says whether the caller can make the dtype (LibTorch's own list); nullptr: every known dtype.
Unread why_not_loaded(const Tensor& t, bool streamed, bool (*makes)(const DType&) = nullptr);

// Puts the dimensions of `shape`, and the same dimensions of each stride list in `strides` (each as long
// as `shape`), in the order of the first list's strides, largest first (ties keep their order), and drops
// the dimensions of size 1. A walk in that order meets a transposed or permuted view's elements where
// they lie in its storage, in long runs, instead of a storage row apart each. For passes whose result
// does not depend on the order (counts, maxima): the elements come in another order than row-major.
void storage_order(std::vector<int64_t>& shape, std::initializer_list<std::vector<int64_t>*> strides);

// One strided layout of a shape's elements: the element offset of the first one and a stride per
// dimension (as long as the shape).
struct StridedLayout {
  int64_t offset;
  std::span<const int64_t> stride;
};

// Visits the `numel` elements of `shape` in row-major order, in runs contiguous in each of the N
// layouts: all of them in one run when every layout is contiguous, one innermost row at a time when
// every last stride is 1, else one element at a time. Calls fn(element offset of the run's first
// element in each layout, run length in elements). Several layouts walk in step: a strided source
// and where its elements go in a contiguous destination.
template <size_t N, typename Fn>
void for_each_strided_run(std::span<const int64_t> shape, int64_t numel, const std::array<StridedLayout, N>& layouts,
                          Fn&& fn) {
  if (numel == 0) return;
  const size_t nd = shape.size();
  bool contiguous = true, inner = nd > 0;
  for (const StridedLayout& l : layouts) {
    contiguous = contiguous && is_contiguous(shape, l.stride);
    inner = inner && l.stride[nd - 1] == 1;
  }
  std::array<int64_t, N> first;
  if (contiguous) {
    for (size_t k = 0; k < N; ++k) first[k] = layouts[k].offset;
    fn(first, numel);
    return;
  }
  const int64_t run = inner ? shape[nd - 1] : 1;
  const size_t outer_dims = inner ? nd - 1 : nd;
  std::vector<int64_t> idx(outer_dims, 0);
  for (int64_t r = 0; r < numel / run; ++r) {
    for (size_t k = 0; k < N; ++k) {
      int64_t off = layouts[k].offset;
      for (size_t d = 0; d < outer_dims; ++d) off += idx[d] * layouts[k].stride[d];
      first[k] = off;
    }
    fn(first, run);
    for (size_t d = outer_dims; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Calls fn(byte offset in the storage, byte length) for each contiguous run of a strided tensor's
// elements in row-major order: one run for a contiguous tensor, one per innermost row when the last
// stride is 1, one per element otherwise.
template <typename Fn>
void for_each_run(const Tensor& t, Fn&& fn) {
  const uint64_t item = t.dtype->itemsize;
  for_each_strided_run<1>(t.shape, t.numel, {{{t.offset, t.stride}}}, [&](const std::array<int64_t, 1>& at, int64_t n) {
    fn(static_cast<uint64_t>(at[0]) * item, static_cast<uint64_t>(n) * item);
  });
}

// Calls fn(byte offset in the storage) for every element of a strided tensor in row-major order.
template <typename Fn>
void for_each_element(const Tensor& t, Fn&& fn) {
  const uint64_t item = t.dtype->itemsize;
  for_each_run(t, [&](uint64_t off, uint64_t len) {
    for (uint64_t b = 0; b < len; b += item) fn(off + b);
  });
}

}  // namespace ckpt
