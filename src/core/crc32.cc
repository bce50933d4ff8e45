#include "core/crc32.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CKPT_CRC_VPCLMUL 1
#endif

namespace ckpt {

namespace {

uint32_t deflate_crc(uint32_t crc, const uint8_t* p, uint64_t n) {
  while (n > 0) {  // size_t is 64 bits on every host ckpt builds for; the loop only guards a 32-bit one
    const size_t len = static_cast<size_t>(std::min<uint64_t>(n, SIZE_MAX));
    crc = libdeflate_crc32(crc, p, len);
    p += len;
    n -= len;
  }
  return crc;
}

#ifdef CKPT_CRC_VPCLMUL
// Debian 12's libdeflate (1.14) folds 16 bytes per carry-less multiply pair; CPUs with VPCLMULQDQ (Intel
// Ice Lake, AMD Zen 3 and later) do two such lanes per instruction, which libdeflate uses from 1.19 on.
// Until then, this loop does the bulk: eight 16-byte lanes in four 256-bit registers, each folded 1024
// bits forward onto the next 128 bytes, and hands the 128 bytes left in the registers, followed by the
// tail, to libdeflate. 23.5 GB/s against 11.8 on the project's VM (a 1 MiB buffer in cache); a 3.1 GB
// file from the page cache in 0.33 s of CPU against 0.45.
//
// Why that is the CRC: in the reflected bit order of zip's CRC-32, a 16-byte lane L = lo * x^64 + hi
// (lo: its first 8 bytes) moved D bits further on is L * x^D = lo * x^(64+D) + hi * x^D, which modulo
// the polynomial P is lo * (x^(64+D) mod P) + hi * (x^D mod P): under 128 bits, and congruent, so the
// message's CRC does not change. A carry-less multiply of two bit-reflected 64-bit values gives the
// reflected product one degree low, hence the constants x^(64+D-1) and x^(D-1) mod P, bit-reflected
// into 64 bits. The running CRC (inverted, as zlib's is) is XORed into the first 4 bytes, so the 128
// bytes left are a message whose CRC from the initial value ~0 is the whole message's.
uint64_t xpow_mod(unsigned n) {  // x^n mod P, P = 0x104C11DB7 (bit k: x^k)
  uint64_t r = 1;
  for (unsigned k = 0; k < n; ++k) {
    r <<= 1;
    if (r & (1ull << 32)) r ^= 0x104C11DB7ull;
  }
  return r;
}

uint64_t reflect64(uint64_t v) {
  uint64_t r = 0;
  for (int k = 0; k < 64; ++k)
    if (v >> k & 1) r |= 1ull << (63 - k);
  return r;
}

#define CKPT_WIDE __attribute__((target("avx2,pclmul,vpclmulqdq")))

CKPT_WIDE inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// a's two lanes, each moved 1024 bits on, XORed onto the 32 bytes at p
CKPT_WIDE inline __m256i fold(__m256i a, __m256i k, const uint8_t* p) {
  return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11)), load(p));
}

CKPT_WIDE uint32_t wide_crc(uint32_t crc, const uint8_t* p, uint64_t n) {  // n >= 256
  static const uint64_t lo = reflect64(xpow_mod(64 + 1024 - 1)), hi = reflect64(xpow_mod(1024 - 1));
  const __m256i k = _mm256_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo), static_cast<long long>(hi),
                                      static_cast<long long>(lo));
  __m256i a0 = _mm256_xor_si256(load(p), _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, static_cast<int>(~crc)));
  __m256i a1 = load(p + 32), a2 = load(p + 64), a3 = load(p + 96);
  uint64_t at = 128;
  for (; n - at >= 128; at += 128) {
    a0 = fold(a0, k, p + at);
    a1 = fold(a1, k, p + at + 32);
    a2 = fold(a2, k, p + at + 64);
    a3 = fold(a3, k, p + at + 96);
  }
  alignas(32) uint8_t left[128];
  _mm256_store_si256(reinterpret_cast<__m256i*>(left), a0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(left + 32), a1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(left + 64), a2);
  _mm256_store_si256(reinterpret_cast<__m256i*>(left + 96), a3);
  return deflate_crc(libdeflate_crc32(0xffffffffu, left, sizeof left), p + at, n - at);
}

bool wide() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("vpclmulqdq");
  }();
  return yes;
}
#endif

}  // namespace

uint32_t crc32_update(uint32_t crc, const uint8_t* p, uint64_t n) {
#ifdef CKPT_CRC_VPCLMUL
  if (n >= 512 && wide()) return wide_crc(crc, p, n);
#endif
  return deflate_crc(crc, p, n);
}

bool crc32_wide() {
#ifdef CKPT_CRC_VPCLMUL
  return wide();
#else
  return false;
#endif
}

uint32_t crc32_portable(uint32_t crc, const uint8_t* p, uint64_t n) { return deflate_crc(crc, p, n); }

uint32_t crc32_join(uint32_t a, uint32_t b, uint64_t len_b) {
  return static_cast<uint32_t>(crc32_combine(a, b, static_cast<z_off_t>(len_b)));  // z_off_t: 64 bits on LP64
}

}  // namespace ckpt
