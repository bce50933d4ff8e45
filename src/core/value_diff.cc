#include "core/value_diff.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <string_view>
#include <thread>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/storage.h"
#include "core/threads.h"

namespace ckpt {
namespace {

// Elements converted per block: two float64 blocks of this size stay in L1.
constexpr size_t kBlock = 512;

// The dtypes element_value converts, one conversion loop each; Bytes for every other dtype.
enum class Kind : uint8_t { F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64, Bytes };

Kind kind_of(const DType& d) {
  static constexpr std::array<std::pair<std::string_view, Kind>, 13> kinds{{{"float32", Kind::F32},
                                                                            {"float64", Kind::F64},
                                                                            {"float16", Kind::F16},
                                                                            {"bfloat16", Kind::BF16},
                                                                            {"int8", Kind::I8},
                                                                            {"uint8", Kind::U8},
                                                                            {"bool", Kind::U8},
                                                                            {"int16", Kind::I16},
                                                                            {"uint16", Kind::U16},
                                                                            {"int32", Kind::I32},
                                                                            {"uint32", Kind::U32},
                                                                            {"int64", Kind::I64},
                                                                            {"uint64", Kind::U64}}};
  for (const auto& [name, k] : kinds)
    if (d.name == name) return k;
  return Kind::Bytes;
}

template <typename T>
T load(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

float bf16_bits_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// `n` elements at `p` (contiguous) as float64, one loop per dtype so each is a plain typed loop.
template <Kind K>
void to_double(const uint8_t* p, double* out, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if constexpr (K == Kind::F32) out[k] = load<float>(p + 4 * k);
    if constexpr (K == Kind::F64) out[k] = load<double>(p + 8 * k);
    if constexpr (K == Kind::F16) out[k] = half_bits_to_float(load<uint16_t>(p + 2 * k));
    if constexpr (K == Kind::BF16) out[k] = bf16_bits_to_float(load<uint16_t>(p + 2 * k));
    if constexpr (K == Kind::I8) out[k] = load<int8_t>(p + k);
    if constexpr (K == Kind::U8) out[k] = p[k];
    if constexpr (K == Kind::I16) out[k] = load<int16_t>(p + 2 * k);
    if constexpr (K == Kind::U16) out[k] = load<uint16_t>(p + 2 * k);
    if constexpr (K == Kind::I32) out[k] = load<int32_t>(p + 4 * k);
    if constexpr (K == Kind::U32) out[k] = load<uint32_t>(p + 4 * k);
    if constexpr (K == Kind::I64) out[k] = static_cast<double>(load<int64_t>(p + 8 * k));
    if constexpr (K == Kind::U64) out[k] = static_cast<double>(load<uint64_t>(p + 8 * k));
  }
}

using Convert = void (*)(const uint8_t*, double*, size_t);
constexpr std::array<Convert, 12> kConvert{to_double<Kind::F32>,  to_double<Kind::F64>, to_double<Kind::F16>,
                                           to_double<Kind::BF16>, to_double<Kind::I8>,  to_double<Kind::U8>,
                                           to_double<Kind::I16>,  to_double<Kind::U16>, to_double<Kind::I32>,
                                           to_double<Kind::U32>,  to_double<Kind::I64>, to_double<Kind::U64>};

// The comparison of diff.h per element: elements that are equal (x == y, or both NaN) contribute
// nothing; for the others |x - y| (NaN -> inf) raises max_abs, |x - y| / |y| where y != 0 raises
// max_rel (a NaN quotient never does), and the tolerance test is torch.isclose's: a finite |x - y| <= atol +
// rtol * |y| (so a finite value against an Inf is never within, whatever rtol).
struct Acc {
  double max_abs = 0.0, max_rel = 0.0;
  bool differ = false, outside = false;
};

void compare_scalar(const double* x, const double* y, size_t n, double atol, double rtol, Acc& acc) {
  for (size_t k = 0; k < n; ++k) {
    const double a = x[k], b = y[k];
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    acc.differ = true;
    const double diff = std::fabs(a - b);
    if (!(diff <= atol + rtol * std::fabs(b) && diff < INFINITY)) acc.outside = true;
    if (std::isnan(diff) || diff > acc.max_abs) acc.max_abs = std::isnan(diff) ? INFINITY : diff;
    if (b != 0 && diff / std::fabs(b) > acc.max_rel) acc.max_rel = diff / std::fabs(b);
  }
}

#if defined(__SSE2__)
// The same two elements at a time, without branches. maxpd(v, m) is exactly `v > m ? v : m` (m when
// v is NaN), and max is order-free, so the lanes' maxima merge to the scalar loop's.
void compare_block(const double* x, const double* y, size_t n, double atol, double rtol, Acc& acc) {
  const __m128d abs_mask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffLL));
  const __m128d ones = _mm_castsi128_pd(_mm_set1_epi64x(-1));
  const __m128d va = _mm_set1_pd(atol), vr = _mm_set1_pd(rtol), inf = _mm_set1_pd(INFINITY), zero = _mm_setzero_pd();
  __m128d max_abs = zero, max_rel = zero, differ = zero, outside = zero;
  size_t k = 0;
  for (; k + 2 <= n; k += 2) {
    const __m128d a = _mm_loadu_pd(x + k), b = _mm_loadu_pd(y + k);
    const __m128d same = _mm_or_pd(_mm_cmpeq_pd(a, b), _mm_and_pd(_mm_cmpunord_pd(a, a), _mm_cmpunord_pd(b, b)));
    const __m128d diff = _mm_and_pd(_mm_sub_pd(a, b), abs_mask), ab = _mm_and_pd(b, abs_mask);
    const __m128d ok = _mm_or_pd(same,
                                 _mm_and_pd(_mm_cmple_pd(diff, _mm_add_pd(va, _mm_mul_pd(vr, ab))), _mm_cmplt_pd(diff, inf)));
    differ = _mm_or_pd(differ, _mm_andnot_pd(same, ones));
    outside = _mm_or_pd(outside, _mm_andnot_pd(ok, ones));
    const __m128d nan = _mm_cmpunord_pd(diff, diff);
    const __m128d d = _mm_andnot_pd(same, _mm_or_pd(_mm_and_pd(nan, inf), _mm_andnot_pd(nan, diff)));
    max_abs = _mm_max_pd(d, max_abs);
    const __m128d want = _mm_andnot_pd(same, _mm_cmpneq_pd(b, zero));
    max_rel = _mm_max_pd(_mm_and_pd(_mm_div_pd(diff, ab), want), max_rel);
  }
  alignas(16) double m[2];
  _mm_store_pd(m, max_abs);
  acc.max_abs = std::max({acc.max_abs, m[0], m[1]});
  _mm_store_pd(m, max_rel);
  acc.max_rel = std::max({acc.max_rel, m[0], m[1]});
  acc.differ = acc.differ || _mm_movemask_pd(differ) != 0;
  acc.outside = acc.outside || _mm_movemask_pd(outside) != 0;
  compare_scalar(x + k, y + k, n - k, atol, rtol, acc);
}
#else
void compare_block(const double* x, const double* y, size_t n, double atol, double rtol, Acc& acc) {
  compare_scalar(x, y, n, atol, rtol, acc);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define CKPT_DIFF_AVX 1
// compare_block four elements at a time where the CPU has AVX2 (chosen at run time).
__attribute__((target("avx2"))) void compare_block_avx2(const double* x, const double* y, size_t n, double atol, double rtol,
                                                        Acc& acc) {
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m256d ones = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
  const __m256d va = _mm256_set1_pd(atol), vr = _mm256_set1_pd(rtol), inf = _mm256_set1_pd(INFINITY);
  const __m256d zero = _mm256_setzero_pd();
  __m256d max_abs = zero, max_rel = zero, differ = zero, outside = zero;
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d a = _mm256_loadu_pd(x + k), b = _mm256_loadu_pd(y + k);
    const __m256d same = _mm256_or_pd(_mm256_cmp_pd(a, b, _CMP_EQ_OQ),
                                      _mm256_and_pd(_mm256_cmp_pd(a, a, _CMP_UNORD_Q), _mm256_cmp_pd(b, b, _CMP_UNORD_Q)));
    const __m256d diff = _mm256_and_pd(_mm256_sub_pd(a, b), abs_mask), ab = _mm256_and_pd(b, abs_mask);
    const __m256d ok = _mm256_or_pd(same, _mm256_and_pd(_mm256_cmp_pd(diff, _mm256_add_pd(va, _mm256_mul_pd(vr, ab)), _CMP_LE_OQ),
                                                        _mm256_cmp_pd(diff, inf, _CMP_LT_OQ)));
    differ = _mm256_or_pd(differ, _mm256_andnot_pd(same, ones));
    outside = _mm256_or_pd(outside, _mm256_andnot_pd(ok, ones));
    const __m256d nan = _mm256_cmp_pd(diff, diff, _CMP_UNORD_Q);
    const __m256d d = _mm256_andnot_pd(same, _mm256_blendv_pd(diff, inf, nan));
    max_abs = _mm256_max_pd(d, max_abs);
    const __m256d want = _mm256_andnot_pd(same, _mm256_cmp_pd(b, zero, _CMP_NEQ_UQ));
    max_rel = _mm256_max_pd(_mm256_and_pd(_mm256_div_pd(diff, ab), want), max_rel);
  }
  alignas(32) double m[4];
  _mm256_store_pd(m, max_abs);
  acc.max_abs = std::max({acc.max_abs, m[0], m[1], m[2], m[3]});
  _mm256_store_pd(m, max_rel);
  acc.max_rel = std::max({acc.max_rel, m[0], m[1], m[2], m[3]});
  acc.differ = acc.differ || _mm256_movemask_pd(differ) != 0;
  acc.outside = acc.outside || _mm256_movemask_pd(outside) != 0;
  compare_scalar(x + k, y + k, n - k, atol, rtol, acc);
}
#endif

bool is_float(Kind k) { return k == Kind::F32 || k == Kind::F64 || k == Kind::F16 || k == Kind::BF16; }

// x rounded to nearest even with `bits` significand bits (the leading one included), exponents below
// `min_exp` as subnormals, past `max_finite` to inf.
double round_bits(double x, int bits, int min_exp, double max_finite) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::max(std::ilogb(x), min_exp);
  const double scale = std::ldexp(1.0, bits - 1 - e);
  const double r = std::nearbyint(x * scale) / scale;  // the default rounding mode: to nearest even
  return std::fabs(r) > max_finite ? std::copysign(INFINITY, x) : r;
}

double round_kind(double x, Kind k) {
  if (k == Kind::F32) return static_cast<double>(static_cast<float>(x));
  if (k == Kind::F16) return round_bits(x, 11, -14, 65504.0);
  if (k == Kind::BF16) return round_bits(x, 8, -126, 3.3895313892515355e38);
  return x;
}

// The kind a side is cast to before comparing (torch.promote_types: a floating dtype wins over an
// integer one and keeps its width), Bytes when the cast changes nothing in float64.
Kind rounding(Kind self, Kind other, bool promote) {
  if (!promote || is_float(self) || !is_float(other) || other == Kind::F64) return Kind::Bytes;
  return other;
}

// Compares `n` elements contiguous on both sides; ra / rb: the kind each side is rounded to (Bytes: none).
void compare_run(Kind ka, Kind kb, const uint8_t* pa, const uint8_t* pb, uint64_t n, uint32_t ia, uint32_t ib, double atol,
                 double rtol, bool wide, Kind ra, Kind rb, Acc& acc) {
  alignas(64) double x[kBlock], y[kBlock];
#ifdef CKPT_DIFF_AVX
  static const bool avx2 = __builtin_cpu_supports("avx2");
  auto* const compare = avx2 && wide ? compare_block_avx2 : compare_block;
#else
  (void)wide;
  auto* const compare = compare_block;
#endif
  for (uint64_t k = 0; k < n; k += kBlock) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(kBlock, n - k));
    const uint8_t *qa = pa + k * ia, *qb = pb + k * ib;
    if (ka == kb && std::memcmp(qa, qb, m * ia) == 0) continue;  // bitwise equal: equal values, NaN included
    kConvert[static_cast<size_t>(ka)](qa, x, m);
    kConvert[static_cast<size_t>(kb)](qb, y, m);
    if (ra != Kind::Bytes)
      for (size_t j = 0; j < m; ++j) x[j] = round_kind(x[j], ra);
    if (rb != Kind::Bytes)
      for (size_t j = 0; j < m; ++j) y[j] = round_kind(y[j], rb);
    compare(x, y, m, atol, rtol, acc);
  }
}

// A pair's elements as rows along its first dimension in A's storage order (all elements as one dimension when both
// sides are contiguous), so a work item is a range of rows.
struct Plan {
  const ValuePair* pair = nullptr;
  Kind ka = Kind::Bytes, kb = Kind::Bytes;
  Kind ra = Kind::Bytes, rb = Kind::Bytes;  // compare_run's rounding of each side
  uint32_t ia = 0, ib = 0;
  std::vector<int64_t> shape, stride_a, stride_b;
  int64_t offset_a = 0, offset_b = 0;
  int64_t row_elems = 1;  // elements per row
  bool packed = false;  // sub-byte dtype: its stored bytes compared as a whole
};

struct Item {
  size_t plan;
  int64_t begin, end;  // rows
};

// Storage elements [first, last] a strided view touches (strides are non-negative: checked_extent).
std::pair<int64_t, int64_t> span(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t offset) {
  int64_t last = offset;
  for (size_t d = 0; d < shape.size(); ++d) last += (shape[d] - 1) * stride[d];
  return {offset, last};
}

}  // namespace

float half_bits_to_float(uint16_t h) {
  // The 15 bits below the sign, moved to float's place, are the value times 2^-112 for normal and
  // subnormal halves alike (the multiplication is exact); exponent 31 is Inf / NaN.
  const uint32_t em = h & 0x7fffu;
  uint32_t u = em << 13;
  float f;
  std::memcpy(&f, &u, 4);
  f *= 0x1p112f;
  std::memcpy(&u, &f, 4);
  if (em >= 0x7c00u) u = 0x7f800000u | ((em & 0x3ffu) << 13);
  u |= static_cast<uint32_t>(h & 0x8000u) << 16;
  std::memcpy(&f, &u, 4);
  return f;
}

double round_to_dtype(double x, std::string_view dtype) {
  if (dtype == "float32") return round_kind(x, Kind::F32);
  if (dtype == "float16") return round_kind(x, Kind::F16);
  if (dtype == "bfloat16") return round_kind(x, Kind::BF16);
  return x;
}

void ValueDiff::merge(const ValueDiff& o) {
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  equal = equal && o.equal;
  within = within && o.within;
}

namespace {

// The work of a comparison: each pair's plan (its element kinds and roundings, the shape and strides in
// the order of A's storage, a leading 1 dropped) and the items the threads share (a packed pair whole, any
// other in slabs of rows of about `piece_bytes`), with the bytes all of them read.
struct Work {
  std::vector<Plan> plans;
  std::vector<Item> items;
  uint64_t total = 0;
};

Work plan_work(const std::vector<ValuePair>& pairs, const ValueCompareOptions& o) {
  Work w;
  const uint64_t piece = std::max<uint64_t>(o.piece_bytes, 1);
  for (const ValuePair& p : pairs) {
    const Tensor &a = *p.a, &b = *p.b;
    Plan pl;
    pl.pair = &p;
    pl.ka = kind_of(*a.dtype);
    pl.kb = kind_of(*b.dtype);
    if (pl.ka != Kind::Bytes && pl.kb != Kind::Bytes) {
      pl.ra = rounding(pl.ka, pl.kb, o.promote);
      pl.rb = rounding(pl.kb, pl.ka, o.promote);
    }
    pl.ia = a.dtype->itemsize;
    pl.ib = b.dtype->itemsize;
    pl.shape = a.shape;
    pl.stride_a = a.stride;
    pl.stride_b = b.stride;
    pl.offset_a = a.offset;
    pl.offset_b = b.offset;
    pl.packed = a.dtype->pack != 1 || b.dtype->pack != 1;
    const size_t index = w.plans.size();
    if (a.numel == 0) {
      w.plans.push_back(std::move(pl));
      continue;
    }
    if (pl.packed) {
      w.total += dtype_bytes(*a.dtype, a.numel) + dtype_bytes(*b.dtype, b.numel);
      w.items.push_back({index, 0, 1});
      w.plans.push_back(std::move(pl));
      continue;
    }
    if (is_contiguous(a) && is_contiguous(b)) {
      pl.shape = {a.numel};
      pl.stride_a = pl.stride_b = {1};
    } else {
      // In the order of A's storage (the maxima and flags do not depend on the order): a transposed
      // pair is read forward in long runs, and an item is a slab of A's storage, not a few elements of
      // every row of it.
      storage_order(pl.shape, {&pl.stride_a, &pl.stride_b});
    }
    while (pl.shape.size() > 1 && pl.shape[0] == 1) {  // a leading 1 cannot be split
      pl.shape.erase(pl.shape.begin());
      pl.stride_a.erase(pl.stride_a.begin());
      pl.stride_b.erase(pl.stride_b.begin());
    }
    if (pl.shape.empty()) {  // 0-dim
      pl.shape = {1};
      pl.stride_a = pl.stride_b = {1};
    }
    for (size_t d = 1; d < pl.shape.size(); ++d) pl.row_elems *= pl.shape[d];
    const uint64_t row_bytes = static_cast<uint64_t>(pl.row_elems) * (pl.ia + pl.ib);
    const int64_t rows_per_item = static_cast<int64_t>(std::max<uint64_t>(1, piece / row_bytes));
    for (int64_t r = 0; r < pl.shape[0]; r += rows_per_item)
      w.items.push_back({index, r, std::min(pl.shape[0], r + rows_per_item)});
    w.total += static_cast<uint64_t>(a.numel) * (pl.ia + pl.ib);
    w.plans.push_back(std::move(pl));
  }

  return w;
}

}  // namespace

std::vector<ValueDiff> compare_values(const std::vector<ValuePair>& pairs, const ValueCompareOptions& o) {
  Work work = plan_work(pairs, o);
  const std::vector<Plan>& plans = work.plans;
  const std::vector<Item>& items = work.items;
  const uint64_t total = work.total;

  std::vector<ValueDiff> results(items.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  // Each side read through its own window: a thread holds about `window` bytes of A and of B, whatever
  // the tensors' sizes and strides.
  const unsigned thread_count = static_cast<unsigned>(
      std::min<size_t>(std::max(1u, o.threads), std::max<size_t>(1, items.size())));
  const uint64_t window =
      o.window_bytes ? o.window_bytes : std::max<uint64_t>(PageWindow::table_bytes(), window_bytes(thread_count) / 2);
  auto run_item = [&](const Item& it, ValueDiff& out) {
    const Plan& pl = plans[it.plan];
    const ValuePair& p = *pl.pair;
    // A remote file's bytes are fetched per item, whatever the view (they are nowhere else to be had),
    // and kept: its release would drop the fetched block while a tied twin of this storage may still be
    // compared on another thread (values.cc and integrity.cc keep them too). A mapped file's pass
    // through windows released as it goes (back to the page cache).
    const MappedFile* fa = p.a_file && !p.a_file->remote() ? p.a_file : nullptr;
    const MappedFile* fb = p.b_file && !p.b_file->remote() ? p.b_file : nullptr;
    PageWindow wa(fa, window), wb(fb, window);
    Acc acc;
    uint64_t bytes;
    if (pl.packed) {  // same dtype (a packed dtype is never numeric): the stored bytes
      const uint64_t na = dtype_bytes(*p.a->dtype, p.a->numel), nb = dtype_bytes(*p.b->dtype, p.b->numel);
      const uint8_t *qa = p.a_bytes + p.a->offset * pl.ia, *qb = p.b_bytes + p.b->offset * pl.ib;
      if (p.a_file && p.a_file->remote()) p.a_file->prefetch(qa, na);
      if (p.b_file && p.b_file->remote()) p.b_file->prefetch(qb, nb);
      acc.differ = acc.outside = na != nb;
      for (uint64_t at = 0; at < na && !acc.differ; at += window) {
        const uint64_t n = std::min(window, na - at);
        wa.touch(qa + at, n);
        wb.touch(qb + at, n);
        acc.differ = acc.outside = std::memcmp(qa + at, qb + at, n) != 0;
      }
      bytes = na + nb;
    } else {
      std::vector<int64_t> shape = pl.shape;
      shape[0] = it.end - it.begin;
      const int64_t numel = shape[0] * pl.row_elems;
      const int64_t oa = pl.offset_a + it.begin * pl.stride_a[0], ob = pl.offset_b + it.begin * pl.stride_b[0];
      if (p.a_file && p.a_file->remote()) {
        const auto [first, last] = span(shape, pl.stride_a, oa);
        p.a_file->prefetch(p.a_bytes + first * pl.ia, static_cast<uint64_t>(last - first + 1) * pl.ia);
      }
      if (p.b_file && p.b_file->remote()) {
        const auto [first, last] = span(shape, pl.stride_b, ob);
        p.b_file->prefetch(p.b_bytes + first * pl.ib, static_cast<uint64_t>(last - first + 1) * pl.ib);
      }
      // A run longer than the window is compared in parts of at most a window on either side.
      const int64_t part = static_cast<int64_t>(std::max<uint64_t>(1, window / std::max(pl.ia, pl.ib)));
      auto compare = [&](const std::array<int64_t, 2>& at, int64_t run) {
        for (int64_t k = 0; k < run; k += part) {
          const int64_t n = std::min(part, run - k);
          const uint8_t *qa = p.a_bytes + (at[0] + k) * pl.ia, *qb = p.b_bytes + (at[1] + k) * pl.ib;
          wa.touch(qa, static_cast<uint64_t>(n) * pl.ia);
          wb.touch(qb, static_cast<uint64_t>(n) * pl.ib);
          if (pl.ka == Kind::Bytes) {  // same dtype, no float64 view
            if (std::memcmp(qa, qb, static_cast<size_t>(n) * pl.ia) != 0) acc.differ = acc.outside = true;
            continue;
          }
          compare_run(pl.ka, pl.kb, qa, qb, static_cast<uint64_t>(n), pl.ia, pl.ib, o.atol, o.rtol, o.wide_simd, pl.ra, pl.rb,
                      acc);
        }
      };
      for_each_strided_run<2>(shape, numel, {{{oa, pl.stride_a}, {ob, pl.stride_b}}}, compare);
      bytes = static_cast<uint64_t>(numel) * (pl.ia + pl.ib);
    }
    out = {acc.max_abs, acc.max_rel, !acc.differ, !acc.outside};
    return bytes;
  };
  std::atomic<bool> stop{false};
  run_threads(thread_count, stop, [&](unsigned j) {
    for (size_t i = next++; i < items.size() && !stop; i = next++) {
      done += run_item(items[i], results[i]);
      if (j == 0 && o.progress) o.progress(done, total);
    }
  });
  if (o.progress) o.progress(done, total);  // the other threads may have taken every item

  std::vector<ValueDiff> out(plans.size());
  for (size_t i = 0; i < items.size(); ++i) out[items[i].plan].merge(results[i]);
  return out;
}

}  // namespace ckpt
