// The one place where ckpt-torch's code differs between LibTorch versions (1.13 in Debian 12, 2.6 in
// Debian 13, 2.14 in Debian sid): version tests and the calls whose spelling changed.
#pragma once

#include <torch/version.h>

#define CKPT_TORCH_AT_LEAST(maj, min) \
  (TORCH_VERSION_MAJOR > (maj) || (TORCH_VERSION_MAJOR == (maj) && TORCH_VERSION_MINOR >= (min)))
