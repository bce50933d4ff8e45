#include "core/values.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string_view>

#include "core/crc32.h"
#include "core/mapped_file.h"
#include "core/threads.h"

namespace ckpt {

namespace {

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

template <typename U, U kAbs, U kInf>
ValueStats count_bits(const uint8_t* p, uint64_t n, uint64_t step) {
  uint64_t nan = 0, inf = 0;
  for (uint64_t k = 0; k < n; ++k) {
    U u;
    std::memcpy(&u, p + k * step, sizeof(U));
    u &= kAbs;
    nan += u > kInf;
    inf += u == kInf;
  }
  return {nan, inf};
}

// Complex: each element is two parts; an element is NaN (Inf) when either part is.
template <typename U, U kAbs, U kInf>
ValueStats count_pairs(const uint8_t* p, uint64_t n) {
  uint64_t nan = 0, inf = 0;
  for (uint64_t k = 0; k < n; ++k) {
    U a, b;
    std::memcpy(&a, p + 2 * k * sizeof(U), sizeof(U));
    std::memcpy(&b, p + (2 * k + 1) * sizeof(U), sizeof(U));
    a &= kAbs;
    b &= kAbs;
    nan += (a > kInf) | (b > kInf);
    inf += (a == kInf) | (b == kInf);
  }
  return {nan, inf};
}

}  // namespace

ValueStats count_nonfinite(const DType& d, const uint8_t* p, uint64_t n) {
  const std::string_view name = d.name;
  if (name == "float32") return count_bits<uint32_t, 0x7fffffffu, 0x7f800000u>(p, n, 4);
  if (name == "float64") return count_bits<uint64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull>(p, n, 8);
  if (name == "float16") return count_bits<uint16_t, 0x7fff, 0x7c00>(p, n, 2);
  if (name == "bfloat16") return count_bits<uint16_t, 0x7fff, 0x7f80>(p, n, 2);
  if (name == "complex64") return count_pairs<uint32_t, 0x7fffffffu, 0x7f800000u>(p, n);
  if (name == "complex128") return count_pairs<uint64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull>(p, n);
  if (name == "complex32") return count_pairs<uint16_t, 0x7fff, 0x7c00>(p, n);
  if (name == "float8_e5m2") return count_bits<uint8_t, 0x7f, 0x7c>(p, n, 1);
  ValueStats s;
  if (name == "float8_e4m3fn")  // no Inf; NaN is S.1111.111
    for (uint64_t k = 0; k < n; ++k) s.nan += (p[k] & 0x7f) == 0x7f;
  if (name == "float8_e4m3fnuz" || name == "float8_e5m2fnuz")  // no Inf; NaN is 0x80 alone
    for (uint64_t k = 0; k < n; ++k) s.nan += p[k] == 0x80;
  if (name == "float8_e8m0fnu")
    for (uint64_t k = 0; k < n; ++k) s.nan += p[k] == 0xff;
  return s;
}

ValueStats tensor_nonfinite(const Tensor& t, const uint8_t* storage) {
  ValueStats total;
  if (t.dtype->pack != 1) return total;
  for_each_run(t, [&](uint64_t off, uint64_t len) {
    ValueStats s = count_nonfinite(*t.dtype, storage + off, len / t.dtype->itemsize);
    total.nan += s.nan;
    total.inf += s.inf;
  });
  return total;
}

uint32_t tensor_crc32(const Tensor& t, const uint8_t* storage) {
  if (t.dtype->pack != 1)  // packed sub-byte dtypes: the stored bytes
    return crc32_update(0, storage + t.offset * t.dtype->itemsize, dtype_bytes(*t.dtype, static_cast<uint64_t>(t.numel)));
  uint32_t crc = 0;
  for_each_run(t, [&](uint64_t off, uint64_t len) { crc = crc32_update(crc, storage + off, len); });
  return crc;
}

namespace {

// tensor_nonfinite and tensor_crc32, reading the tensor's bytes a window at a time through `w`. A
// contiguous tensor is one pass: counts add up and the CRC runs on over the windows. A strided one is
// counted in storage order (storage_order: the counts do not depend on the order), so that a transposed
// view is read forward, window after window; its CRC follows the elements in row-major order, which
// for a transposed view jumps a storage row per element: through windows that would fault its pages in
// again for every element of a row (a 200 MB one took a minute), so its extent is mapped in at once and
// released after. Only load --checksum asks for that CRC, and the load holds the whole file anyway.
TensorCheck check_windowed(const Tensor& t, const uint8_t* storage, bool crc, PageWindow& w, const MappedFile* local) {
  TensorCheck c;
  const uint64_t item = t.dtype->itemsize;
  if (t.dtype->pack != 1) {  // packed sub-byte dtypes: no NaN, the stored bytes' CRC
    uint32_t sum = 0;
    if (crc)
      for_each_window(w, storage + t.offset * item, dtype_bytes(*t.dtype, static_cast<uint64_t>(t.numel)), 1,
                      [&](const uint8_t* p, uint64_t n) { sum = crc32_update(sum, p, n); });
    if (crc) c.crc32 = sum;
    return c;
  }
  auto count = [&](const uint8_t* p, uint64_t n) {
    const ValueStats s = count_nonfinite(*t.dtype, p, n / item);
    c.stats.nan += s.nan;
    c.stats.inf += s.inf;
  };
  if (is_contiguous(t)) {
    uint32_t sum = 0;
    for_each_window(w, storage + t.offset * item, static_cast<uint64_t>(t.numel) * item, item, [&](const uint8_t* p, uint64_t n) {
      count(p, n);
      if (crc) sum = crc32_update(sum, p, n);
    });
    if (crc) c.crc32 = sum;
    return c;
  }
  std::vector<int64_t> shape = t.shape, stride = t.stride;
  storage_order(shape, {&stride});
  for_each_strided_run<1>(shape, t.numel, {{{t.offset, stride}}}, [&](const std::array<int64_t, 1>& at, int64_t n) {
    for_each_window(w, storage + static_cast<uint64_t>(at[0]) * item, static_cast<uint64_t>(n) * item, item, count);
  });
  w.drop();
  if (crc && t.numel > 0) {
    int64_t last = t.offset;
    for (size_t d = 0; d < t.shape.size(); ++d) last += (t.shape[d] - 1) * t.stride[d];
    PageWindow whole(local, UINT64_MAX);
    whole.touch(storage + t.offset * item, static_cast<uint64_t>(last - t.offset + 1) * item);
    c.crc32 = tensor_crc32(t, storage);
  } else if (crc) {
    c.crc32 = 0;
  }
  return c;
}

}  // namespace

std::vector<TensorCheck> check_values(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors,
                                      bool crc, unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress,
                                      uint64_t window) {
  std::vector<TensorCheck> out(tensors.size());
  std::vector<size_t> order;  // biggest first, so the last tensor handed out is a small one
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    if (t.state == TensorState::Materialized && t.dtype && !t.storage.empty() && loadable_layout(t)) order.push_back(k);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a]->bytes > tensors[b]->bytes; });
  uint64_t total = 0;
  for (size_t k : order) total += tensors[k]->bytes;
  if (window == 0) window = window_bytes(threads);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  run_threads(std::max(1u, threads), stop, [&](unsigned j) {
    for (size_t i = next++; i < order.size() && !stop; i = next++) {
      const Tensor& t = *tensors[order[i]];
      const Storage* s = index.find(t.storage);
      if (!s) throw InputError(ck.path, fmt::format("tensor '{}': storage '{}' is not in the file", t.name, t.storage));
      checked_extent(ck, t, *s);
      const ByteView b = index.bytes(*s);
      const MappedFile& file = s->source ? *s->source : *ck.file;
      // A remote file's bytes are fetched whole and stay: the CPU load reads them next, and they are
      // nowhere else to be had. A mapped file's are read a window at a time and released once checked
      // (back to the page cache; zero-copy tensors over them fault them back in when read).
      if (file.remote()) file.prefetch(b.address(), b.size());
      const MappedFile* local = StorageIndex::assembled(*s) || file.remote() ? nullptr : &file;
      PageWindow w(local, window);
      out[order[i]] = check_windowed(t, b.address(), crc, w, local);
      done += t.bytes;
      if (j == 0 && progress) progress(done, total);
    }
  });
  return out;
}

std::optional<double> element_value(const DType& d, const uint8_t* p) {
  const std::string_view n = d.name;
  auto rd = [&](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  if (n == "float32") return rd(float{});
  if (n == "float64") return rd(double{});
  if (n == "float16") return half_to_double(rd(uint16_t{}));
  if (n == "bfloat16") {
    uint32_t u = static_cast<uint32_t>(rd(uint16_t{})) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (n == "int8") return rd(int8_t{});
  if (n == "uint8" || n == "bool") return rd(uint8_t{});
  if (n == "int16") return rd(int16_t{});
  if (n == "uint16") return rd(uint16_t{});
  if (n == "int32") return rd(int32_t{});
  if (n == "uint32") return rd(uint32_t{});
  if (n == "int64") return static_cast<double>(rd(int64_t{}));
  if (n == "uint64") return static_cast<double>(rd(uint64_t{}));
  return std::nullopt;
}

bool numeric(const DType* d) {
  static const uint8_t zero[16] = {};
  return d && element_value(*d, zero).has_value();
}

}  // namespace ckpt
