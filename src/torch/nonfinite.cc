#include "torch/nonfinite.h"

#include <map>
#include <string_view>
#include <utility>

namespace ckpt::torchb {
namespace {

constexpr int64_t kAlone = 1 << 20;  // tensors with at least this many elements are reduced alone
constexpr int64_t kBatch = 4 << 20;  // elements in one batch of small tensors (int32 sums: 32 MB)

// float4_e2m1fn_x2 encodes neither NaN nor Inf (OCP Microscaling spec, 5.3.3), and LibTorch has no kernel
// to convert or compare it: it counts 0, as torch's own counts (testdata/gen_load.py) say. By name: the
// enumerator exists from LibTorch 2.8 only.
bool holds_nonfinite(at::ScalarType s) {
  return (at::isFloatingType(s) || at::isComplexType(s)) && std::string_view(c10::toString(s)) != "Float4_e2m1fn_x2";
}

// `x` flattened to what isnan / isinf take: complex as (n, 2) real parts, float8 as float32.
at::Tensor countable(const at::Tensor& x) {
  at::Tensor f = x.reshape({-1});
  if (at::isComplexType(f.scalar_type())) {
    if (f.scalar_type() == at::kComplexHalf) f = f.to(at::kComplexFloat);
    return at::view_as_real(f);
  }
  if (f.element_size() == 1) return f.to(at::kFloat);  // the float8 formats: the cast keeps NaN and Inf
  return f;
}

// (2, n) bool: NaN and Inf per element of a countable() tensor.
at::Tensor flags(const at::Tensor& c) {
  at::Tensor nan = at::isnan(c), inf = at::isinf(c);
  if (c.dim() == 2) {  // complex: either part
    nan = nan.any(1);
    inf = inf.any(1);
  }
  return at::stack({nan, inf});
}

}  // namespace

std::vector<ValueStats> count_nonfinite(const std::vector<at::Tensor>& tensors, const std::function<void()>& fence) {
  std::vector<ValueStats> out(tensors.size());
  std::vector<size_t> order;  // the tensors each column of `counts` belongs to
  std::vector<at::Tensor> counts;  // (2, m) int64 each
  std::map<at::ScalarType, std::vector<size_t>> small;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const at::Tensor& t = tensors[k];
    if (!t.defined() || t.numel() == 0 || !holds_nonfinite(t.scalar_type())) continue;
    if (t.numel() >= kAlone) {
      counts.push_back(flags(countable(t)).sum(1, false, at::kLong).unsqueeze(1));
      order.push_back(k);
    } else {
      small[t.scalar_type()].push_back(k);
    }
  }
  for (auto& [type, list] : small) {
    for (size_t b = 0; b < list.size();) {
      std::vector<at::Tensor> parts;
      std::vector<int64_t> ends;
      int64_t n = 0;
      size_t e = b;
      for (; e < list.size() && (e == b || n + tensors[list[e]].numel() <= kBatch); ++e) {
        parts.push_back(tensors[list[e]].reshape({-1}));
        n += tensors[list[e]].numel();
        ends.push_back(n);
      }
      // Per tensor: the cumulative count at its last element less the one before its first.
      const at::Tensor f = flags(countable(at::cat(parts)));
      const at::Tensor cum = at::cat({at::zeros({2, 1}, f.options().dtype(at::kInt)), f.cumsum(1, at::kInt)}, 1);
      const at::Tensor idx = at::tensor(ends, at::TensorOptions().dtype(at::kLong)).to(f.device());
      const at::Tensor at_end = cum.index_select(1, idx);
      at::Tensor at_start = at::zeros_like(at_end);
      if (at_end.size(1) > 1) at_start.narrow(1, 1, at_end.size(1) - 1).copy_(at_end.narrow(1, 0, at_end.size(1) - 1));
      counts.push_back((at_end - at_start).to(at::kLong));
      for (size_t i = b; i < e; ++i) order.push_back(list[i]);
      b = e;
    }
  }
  if (counts.empty()) return out;
  const at::Tensor all = at::cat(counts, 1);
  if (fence) fence();
  const at::Tensor host = all.to(at::kCPU).contiguous();
  const int64_t m = host.size(1);
  const int64_t* p = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < m; ++i) {
    out[order[static_cast<size_t>(i)]].nan = static_cast<uint64_t>(p[i]);
    out[order[static_cast<size_t>(i)]].inf = static_cast<uint64_t>(p[m + i]);
  }
  return out;
}

}  // namespace ckpt::torchb
