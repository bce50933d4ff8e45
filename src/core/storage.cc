#include "core/storage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/bytes.h"
#include "core/mapped_file.h"
#include "core/text.h"

namespace ckpt {

StorageIndex::StorageIndex(const Checkpoint& ck, Limits limits) : ck_(ck), limits_(limits), by_key_(ck.storages.size(), KeyOf{&ck}) {
  for (size_t k = 0; k < ck.storages.size(); ++k) by_key_.try_emplace(ck.storages[k].key, static_cast<uint32_t>(k));  // the first of a key
}

const Storage* StorageIndex::find(std::string_view key) const {
  const uint32_t* k = by_key_.find(key);
  return k ? &ck_.storages[*k] : nullptr;
}

ByteView StorageIndex::bytes(const Storage& s) const {
  if (assembled(s)) return assemble(s);
  const MappedFile* f = s.source ? s.source : ck_.file.get();
  const ByteView v = f->view();
  const std::string member = s.member.empty() ? std::string() : std::string(s.member);
  if (!s.present) throw InputError(f->path(), member, 0, fmt::format("storage '{}' has no bytes in the file", s.key));
  uint64_t off = s.file_offset;
  if (s.local_header != UINT64_MAX) {  // read with copy_out: no folio of tensor data mapped in for 30 bytes
    const HeaderReader lh(v.sub(s.local_header, 30, "zip local header").as_member(member), f);
    off = s.local_header + 30 + lh.le<uint16_t>(26) + lh.le<uint16_t>(28);
  }
  if (off > v.size() || v.size() - off < s.nbytes)
    throw InputError(f->path(), member, 0,
                     fmt::format("storage '{}' needs {} bytes at file offset {:#x}; the file has {}", s.key, s.nbytes, off,
                                 off > v.size() ? 0 : v.size() - off));
  return v.sub(off, s.nbytes, "storage data").as_member(member);
}

// A DCP tensor: each chunk is a torch.save blob of that piece, read by ckpt's own reader and copied
// run by run into the whole (contiguous) tensor.
ByteView StorageIndex::assemble(const Storage& s) const {
  std::lock_guard<std::mutex> g(lock_);
  auto it = assembled_.find(&s);
  if (it == assembled_.end()) {
    std::vector<uint8_t> whole(s.nbytes, 0);
    const uint64_t item = s.dtype->itemsize;
    const std::vector<int64_t> strides = contiguous_strides(s.dcp->shape);
    for (const Chunk& c : s.dcp->chunks) {
      const ByteView region = c.file->view().sub(c.offset, c.length, "DCP region");
      const std::string name = fmt::format("{}+{:#x}", c.file->path(), c.offset);
      if (!ck_.dcp.read_blob) throw std::logic_error("a DCP checkpoint without its blob reader");
      Checkpoint part = ck_.dcp.read_blob(MappedFile::from_memory(std::string(region.data(), region.data() + region.size()), name),
                                          limits_);
      auto fail = [&](const std::string& why) {
        throw InputError(c.file->path(), "", c.offset, fmt::format("DCP chunk of '{}': {}", s.key, why));
      };
      if (part.tensors.size() != 1) fail(fmt::format("the region holds {} tensors, not one", part.tensors.size()));
      const Tensor& pt = part.tensors.front();
      if (pt.dtype != s.dtype || pt.shape != c.sizes || pt.layout != Layout::Strided || pt.state != TensorState::Materialized)
        fail(fmt::format("the region holds {} {}, the metadata says {} {}", pt.dtype ? pt.dtype->name : "?", shape_text(pt.shape),
                         s.dtype->name, shape_text(c.sizes)));
      StorageIndex sub(part, limits_);
      const Storage* ps = sub.find(pt.storage);
      if (!ps) fail("its tensor has no storage");
      checked_extent(part, pt, *ps);
      const uint8_t* src = sub.bytes(*ps).data();
      // the piece at its place in the whole: its elements walked in step with where they go
      int64_t to = 0;
      for (size_t d = 0; d < c.offsets.size(); ++d) to += c.offsets[d] * strides[d];
      for_each_strided_run<2>(c.sizes, pt.numel, {{{pt.offset, pt.stride}, {to, strides}}},
                              [&](const std::array<int64_t, 2>& at, int64_t n) {
                                std::memcpy(whole.data() + static_cast<uint64_t>(at[1]) * item,
                                            src + static_cast<uint64_t>(at[0]) * item, static_cast<uint64_t>(n) * item);
                              });
    }
    auto origin = std::make_shared<Origin>(Origin{ck_.path, s.key});
    it = assembled_.emplace(&s, std::make_pair(std::move(whole), std::move(origin))).first;
  }
  return ByteView(it->second.first.data(), it->second.first.size(), it->second.second, 0);
}

bool loadable_layout(const Tensor& t) {
  if (t.layout == Layout::Strided) return true;
  return t.layout == Layout::Quantized && t.x->qscheme == "per_tensor_affine" && t.dtype && t.dtype->pack == 1 && is_contiguous(t);
}

Unread why_not_loaded(const Tensor& t, bool streamed, bool (*makes)(const DType&)) {
  if (t.state == TensorState::Uninitialized) return Unread::Lazy;
  if (!t.dtype || (makes && !makes(*t.dtype))) return Unread::Dtype;
  if (!loadable_layout(t) || t.dtype->pack != 1) return Unread::Layout;
  if (t.layout == Layout::Quantized && streamed) return Unread::QuantizedStreamed;
  if (t.state == TensorState::Meta) return Unread::Meta;
  if (t.storage.empty()) return Unread::NoStorage;
  return Unread::No;
}

Dims contiguous_strides(std::span<const int64_t> shape) {
  Dims stride;
  stride.resize(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) stride[k - 1] = stride[k] * std::max<int64_t>(shape[k], 1);
  return stride;
}

bool is_contiguous(std::span<const int64_t> shape, std::span<const int64_t> stride) {
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && stride[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

bool is_contiguous(const Tensor& t) { return is_contiguous(t.shape, t.stride); }

void storage_order(std::vector<int64_t>& shape, std::initializer_list<std::vector<int64_t>*> strides) {
  if (strides.size() == 0) return;
  const std::vector<int64_t>& key = **strides.begin();
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return key[a] > key[b]; });
  auto reorder = [&](std::vector<int64_t>& v) {
    std::vector<int64_t> out;
    for (size_t d : dims) out.push_back(v[d]);
    v = std::move(out);
  };
  for (std::vector<int64_t>* s : strides) reorder(*s);
  reorder(shape);
}

uint64_t checked_extent(const Checkpoint& ck, const Tensor& t, const Storage& s) {
  auto fail = [&](const std::string& why) -> uint64_t {
    const MappedFile* f = s.source ? s.source : ck.file.get();
    throw InputError(f->path(), std::string(s.member), 0, fmt::format("tensor '{}': {}", t.name, why));
  };
  if (!t.dtype) return fail("no dtype");
  if (t.stride.size() != t.shape.size()) return fail("stride and shape differ in length");
  if (t.offset < 0) return fail("negative storage offset");
  if (t.numel == 0) return 0;
  // last element offset: offset + sum (shape-1)*stride, overflow-checked
  uint64_t last = static_cast<uint64_t>(t.offset);
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0 || t.stride[d] < 0) return fail("negative size or stride");
    uint64_t step;
    if (mul_overflows(static_cast<uint64_t>(t.shape[d] - 1), static_cast<uint64_t>(t.stride[d]), &step) ||
        add_overflows(last, step, &last))
      return fail("extent overflows");
  }
  uint64_t end_elems, begin_bytes, end_bytes;
  if (add_overflows(last, 1, &end_elems) || mul_overflows(end_elems, t.dtype->itemsize, &end_bytes) ||
      mul_overflows(static_cast<uint64_t>(t.offset), t.dtype->itemsize, &begin_bytes))
    return fail("extent overflows");
  if (end_bytes > s.nbytes)
    return fail(fmt::format("shape {} stride {} offset {} needs {} bytes of storage '{}', which holds {}", shape_text(t.shape),
                            shape_text(t.stride), t.offset, end_bytes, s.key, s.nbytes));
  return end_bytes - begin_bytes;
}

}  // namespace ckpt
