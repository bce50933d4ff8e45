// NaN / Inf of loaded tensors counted where they are, by LibTorch's own reductions (isnan / isinf), as
// torch counts them: the streaming load's readers only read and copy (issue 40). Batched: the small
// tensors of one dtype go into one flat tensor per 4M elements (one isnan, one isinf and one cumulative
// sum for a hundred thousand tensors, not a hundred thousand reductions), large ones are reduced alone,
// and every count lands in one int64 tensor, copied to the host once after `fence`.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "core/values.h"

namespace ckpt::torchb {

// Counts per tensor; undefined tensors, and tensors of dtypes that hold neither (integers, bool), count 0.
// Complex: an element is NaN (Inf) when either part is. float8: through float32. `fence` is called after
// the reductions are queued and before their results are copied (a device's bounded wait).
std::vector<ValueStats> count_nonfinite(const std::vector<at::Tensor>& tensors, const std::function<void()>& fence);

}  // namespace ckpt::torchb
