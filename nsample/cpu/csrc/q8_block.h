// What the int8-activation kernels' formats (q8_formats.h, q8_kquants.h) share: a 32-weight chunk as bytes with its
// scales, and the byte tricks that unpack the blocks (nibbles, single bits, tables of levels), on 256-bit registers
// and, where AVX-512 is built, two chunks at once on 512-bit ones. x86 (AVX2); ARM64's are q8_neon.h.
#pragma once
#if defined(__AVX2__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gguf_formats.h"

namespace q8 {

// A chunk of 32 weights: bytes w (unsigned, or signed where SIGNED), scale (8 floats: lane k covers weights
// 4k .. 4k + 3), min (times the chunk's Σx).
struct Chunk {
  __m256i w;
  __m256 scale;
  float min;
};

inline float hsum(__m128 s) {  // the lanes' sum, added in a fixed order
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float hsum(const __m256& v) { return hsum(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }
inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i mask(int m) { return _mm256_set1_epi8(static_cast<char>(m)); }
// 16 bytes of nibbles as 32: weight i < 16 the low nibble of byte i, the rest the high nibble of byte i - 16.
inline __m256i nibbles16(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), mask(0x0F));
}
// Bit i of a little-endian uint32 as 0x10 in byte i (Q5_0 / Q5_1's fifth bits).
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(  // byte i <- byte i / 8 of h
      _mm256_set1_epi32(static_cast<int>(h)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                                        _mm256_set1_epi64x(-1));  // all bits but bit i % 8 set: 0xFF iff it is
  return _mm256_and_si256(set, mask(0x10));
}
// Bits [shift, shift + width) of each byte, moved to bit `to` (16-bit shifts; the mask drops what crossed bytes).
inline __m256i bits(const __m256i& v, int shift, int width, int to) {
  const __m256i x = _mm256_and_si256(_mm256_srli_epi16(v, shift), mask((1 << width) - 1));
  return to ? _mm256_slli_epi16(x, to) : x;
}

#if defined(__AVX512BW__)
// Two chunks side by side in one 512-bit register (chunk j in the low half, j + 1 in the high one): where a core has
// full-width 512-bit units (Intel's server cores), one instruction does the work of two 256-bit ones.
inline __m512i pair(const __m256i& v) { return _mm512_broadcast_i64x4(v); }
inline __m512i mask512(int m) { return _mm512_set1_epi8(static_cast<char>(m)); }
// Bits [shift, shift + width) of each byte of v, shifted by `lo` in the low half and `hi` in the high one, moved to
// bit `to`.
inline __m512i bits2(const __m512i& v, int lo, int hi, int width, int to) {
  const __m512i by = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(lo)), _mm256_set1_epi16(
                                        static_cast<short>(hi)), 1);
  const __m512i x = _mm512_and_si512(_mm512_srlv_epi16(v, by), mask512((1 << width) - 1));
  return to ? _mm512_slli_epi16(x, to) : x;
}
// The shuffle that spreads int16 lane a over 128-bit lane 0 of a register, b over lane 1, c over 2, d over 3.
inline __m512i lanes4(int a, int b, int c, int d) {
  const auto one = [](int i) { return static_cast<int>(0x01000100 + 0x02020202 * i); };
  return _mm512_setr_epi32(one(a), one(a), one(a), one(a), one(b), one(b), one(b), one(b), one(c), one(c), one(c),
                           one(c), one(d), one(d), one(d), one(d));
}
#endif
// The 4-bit table formats: each nibble one of sixteen signed levels, picked by a byte shuffle of the table.
inline __m256i levels16(const int8_t* table, const uint8_t* qs) {
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))),
                             nibbles16(qs));
}

}  // namespace q8
#endif
