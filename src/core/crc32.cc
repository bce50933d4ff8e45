#include "core/crc32.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>

namespace ckpt {

uint32_t crc32_update(uint32_t crc, const uint8_t* p, uint64_t n) {
  // size_t is 64 bits on every host ckpt builds for; the loop only guards a 32-bit one.
  while (n > 0) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(n, SIZE_MAX));
    crc = libdeflate_crc32(crc, p, len);
    p += len;
    n -= len;
  }
  return crc;
}

uint32_t crc32_join(uint32_t a, uint32_t b, uint64_t len_b) {
  return static_cast<uint32_t>(crc32_combine(a, b, static_cast<z_off_t>(len_b)));  // z_off_t: 64 bits on LP64
}

}  // namespace ckpt
