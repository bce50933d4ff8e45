// CRC-32 as zip and zlib define it (zlib.crc32), at memory speed: libdeflate's carry-less-multiply code
// (PCLMULQDQ, ARMv8 PMULL), 3.4x zlib's crc32 on the project's VM (11.8 against 3.4 GB/s over a 1 MiB
// buffer in cache), and on x86-64 CPUs with VPCLMULQDQ a 256-bit fold in front of it (23.5 GB/s; see
// crc32.cc). One place for check --verify, check --values and load --checksum.
#pragma once

#include <cstdint>

namespace ckpt {

// The CRC-32 of the bytes before, `crc` (0 for none), extended by [p, p+n): zlib's crc32_z convention.
uint32_t crc32_update(uint32_t crc, const uint8_t* p, uint64_t n);
// The CRC-32 of A then B from crc(A), crc(B) and B's length (zlib's crc32_combine): pieces taken on
// threads joined in order.
uint32_t crc32_join(uint32_t a, uint32_t b, uint64_t len_b);

// Whether crc32_update folds with VPCLMULQDQ on this CPU (crc32.cc), and libdeflate alone, for tests.
bool crc32_wide();
uint32_t crc32_portable(uint32_t crc, const uint8_t* p, uint64_t n);

}  // namespace ckpt
