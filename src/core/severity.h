// A finding's severity: what text.h colours and checkpoint.h's findings carry.
#pragma once

#include <cstdint>

namespace ckpt {

enum class Severity : uint8_t { Info, Warning, Error };

}  // namespace ckpt
