// `diff --values` at memory speed: two tensors' elements compared pairwise (in the order of A's storage) with one typed
// conversion loop per dtype into float64 blocks and one comparison loop over them, bitwise-equal
// blocks of the same dtype skipped with memcmp, and the work split over threads in pieces of a few
// MiB so one big tensor keeps every core busy. Mapped files are read through bounded windows
// (PageWindow), so the resident memory does not grow with the tensors. What is computed per element is
// diff.h's definition (README "ckpt diff"): the same float64 arithmetic, so every number is the one
// element_value gives.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

// What a value comparison of one pair found; merge() combines pieces of one pair (order-free).
struct ValueDiff {
  double max_abs = 0.0, max_rel = 0.0;
  bool equal = true;  // bitwise / exactly equal (NaN equals NaN, -0.0 equals 0.0)
  bool within = true;  // torch.isclose everywhere: equal (NaN too), or finite |a - b| <= atol + rtol * |b|
  void merge(const ValueDiff& o);
};

// One pair to compare: same shape and same dtype, or both dtypes numeric() (values.h). `a_bytes` /
// `b_bytes` are the storages' first bytes; `a_file` / `b_file` the mapped files they are in (nullptr
// for memory the caller owns, e.g. assembled DCP storages), read a window at a time and released.
// The caller has bounds-checked both views (checked_extent).
struct ValuePair {
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  const uint8_t* a_bytes = nullptr;
  const uint8_t* b_bytes = nullptr;
  const MappedFile* a_file = nullptr;
  const MappedFile* b_file = nullptr;
};

struct ValueCompareOptions {
  double atol = 0.0, rtol = 0.0;
  unsigned threads = 1;
  uint64_t piece_bytes = 8ull << 20;  // bytes of A and B per work item
  // Bytes of each side a thread keeps mapped in (PageWindow); 0: half of window_bytes(threads), at least
  // one page table's span.
  uint64_t window_bytes = 0;
  bool wide_simd = true;  // AVX2 where the CPU has it; false: the baseline SSE2 loop (tests cover both)
  // diff --ignore-dtype, as torch.testing.assert_close(check_dtype=False): a pair of two dtypes is compared
  // after both are cast to torch.promote_types of the two. Only an integer side against a narrower
  // floating dtype is changed by that cast (int32 against float32, int16 against float16 / bfloat16 are
  // rounded to nearest even, past the largest float16 to inf); every other promotion is exact in float64.
  bool promote = false;
  // (bytes of A and B compared, total), from the calling thread only, last with done == total.
  std::function<void(uint64_t, uint64_t)> progress;
};

// One result per pair, in the pairs' order.
std::vector<ValueDiff> compare_values(const std::vector<ValuePair>& pairs, const ValueCompareOptions& o);

// Exposed for tests: float16 bits as float (exact), the conversion compare_values uses.
float half_bits_to_float(uint16_t h);
// Exposed for tests: x rounded to float32 / float16 / bfloat16 ("float32", "float16", "bfloat16"), round
// to nearest even as torch's casts do, overflow to inf; x itself for any other name.
double round_to_dtype(double x, std::string_view dtype);

}  // namespace ckpt
