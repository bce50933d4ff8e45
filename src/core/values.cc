#include "core/values.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string_view>

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
  uLong crc = crc32(0L, Z_NULL, 0);
  if (t.dtype->pack != 1) {  // packed sub-byte dtypes: the stored bytes
    const uint64_t n = dtype_bytes(*t.dtype, static_cast<uint64_t>(t.numel));
    return static_cast<uint32_t>(crc32_z(crc, storage + t.offset * t.dtype->itemsize, n));
  }
  for_each_run(t, [&](uint64_t off, uint64_t len) { crc = crc32_z(crc, storage + off, len); });
  return static_cast<uint32_t>(crc);
}

std::vector<TensorCheck> check_values(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors,
                                      bool crc, unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::vector<TensorCheck> out(tensors.size());
  std::vector<size_t> order;  // biggest first, so the last tensor handed out is a small one
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    if (t.state == TensorState::Materialized && t.dtype && !t.storage.empty() && loadable_layout(t)) order.push_back(k);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a]->bytes > tensors[b]->bytes; });
  uint64_t total = 0;
  for (size_t k : order) total += tensors[k]->bytes;
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
      file.prefetch(b.address(), b.size());
      TensorCheck& c = out[order[i]];
      c.stats = tensor_nonfinite(t, b.data());
      if (crc) c.crc32 = tensor_crc32(t, b.data());
      // A remote file's bytes stay: the CPU load reads them next, and they are nowhere else to be had.
      if (!StorageIndex::assembled(*s) && !file.remote()) file.release(b.address(), b.size());  // checked: back to the page cache
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
