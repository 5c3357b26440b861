// The GGUF block formats read as small integers for the int8-activation kernels on ARM64 (q8_tile_neon.h): the same
// formats, layouts and sums as the x86 ones (q8_formats.h, q8_kquants.h), unpacked with NEON's byte operations.
// A chunk of 32 weights is two int8x16 (weights 0..15 and 16..31). NEON multiplies signed bytes by signed bytes
// (sdot, or a widening multiply where the CPU has no dot product), so every format's bytes are signed, and the
// K-quants' offsets (Q6_K's 32, Q3_K's 4) are taken off the bytes themselves: a block's integer sum is the one the
// x86 kernels get from their unsigned bytes and the Σq term.
#pragma once
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cstdint>

#include "gguf_formats.h"

namespace q8 {

// A 32-weight block's chunk: its bytes, the float scale of their dot product, the coefficient of the chunk's Σx.
struct Chunk {
  int8x16_t w[2];
  float scale, min;
};

inline int8x16_t low4(uint8x16_t x) { return vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0F))); }
inline int8x16_t high4(uint8x16_t x) { return vreinterpretq_s8_u8(vshrq_n_u8(x, 4)); }
// 16 bytes of nibbles as 32 weights: weight i < 16 the low nibble of byte i, the rest the high nibble of byte i - 16.
inline void nibbles16(const uint8_t* qs, int8x16_t* w) {
  const uint8x16_t x = vld1q_u8(qs);
  w[0] = low4(x), w[1] = high4(x);
}
// The same through a table of sixteen signed levels (IQ4_NL's, MXFP4's).
inline void levels16(const int8_t* table, const uint8_t* qs, int8x16_t* w) {
  const int8x16_t t = vld1q_s8(table);
  nibbles16(qs, w);
  for (int h = 0; h < 2; ++h) w[h] = vqtbl1q_s8(t, vreinterpretq_u8_s8(w[h]));
}
// Bits of a little-endian uint32 (Q5_0 / Q5_1's fifth bits) added as 0x10 to bytes 0..15 and 16..31.
inline void add_fifth_bits(const uint8_t* qh, int8x16_t* w) {
  alignas(16) static constexpr uint8_t BIT[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t v = vcombine_u8(vdup_n_u8(qh[2 * h]), vdup_n_u8(qh[2 * h + 1]));
    w[h] = vorrq_s8(w[h], vreinterpretq_s8_u8(vandq_u8(vtstq_u8(v, vld1q_u8(BIT)), vdupq_n_u8(0x10))));
  }
}
// Bits [shift, shift + width) of each byte at p (16 bytes), moved to bit `to`: one shift by a vector of counts.
inline uint8x16_t bits(const uint8_t* p, int shift, int width, int to) {
  return vandq_u8(vshlq_u8(vld1q_u8(p), vdupq_n_s8(static_cast<int8_t>(to - shift))),
                  vdupq_n_u8(static_cast<uint8_t>(((1 << width) - 1) << to)));
}

struct Q4_0 {  // d·(q - 8)
  static constexpr bool K = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    Chunk c;
    nibbles16(b + 2, c.w);
    c.scale = gguf::half(b), c.min = -8.0f * c.scale;
    return c;
  }
};
struct Q4_1 {  // d·q + m
  static constexpr bool K = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    Chunk c;
    nibbles16(b + 4, c.w);
    c.scale = gguf::half(b), c.min = gguf::half(b + 2);
    return c;
  }
};
struct Q5_0 {  // d·(q - 16)
  static constexpr bool K = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    Chunk c;
    nibbles16(b + 6, c.w);
    add_fifth_bits(b + 2, c.w);
    c.scale = gguf::half(b), c.min = -16.0f * c.scale;
    return c;
  }
};
struct Q5_1 {  // d·q + m
  static constexpr bool K = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    Chunk c;
    nibbles16(b + 8, c.w);
    add_fifth_bits(b + 4, c.w);
    c.scale = gguf::half(b), c.min = gguf::half(b + 2);
    return c;
  }
};
struct Q8_0 {  // d·q
  static constexpr bool K = false, MIN = false;
  static Chunk chunk(const uint8_t* b, int) {
    return {{vld1q_s8(reinterpret_cast<const int8_t*>(b + 2)), vld1q_s8(reinterpret_cast<const int8_t*>(b + 18))},
            gguf::half(b), 0.0f};
  }
};
struct IQ4_NL {  // d·KVALUES[q]
  static constexpr bool K = false, MIN = false;
  static Chunk chunk(const uint8_t* b, int) {
    Chunk c;
    levels16(gguf::KVALUES, b + 2, c.w);
    c.scale = gguf::half(b), c.min = 0.0f;
    return c;
  }
};
struct MXFP4 {  // 2^(e - 128)·MXFP4_LEVELS[q]
  static constexpr bool K = false, MIN = false;
  static Chunk chunk(const uint8_t* b, int) {
    Chunk c;
    levels16(gguf::MXFP4_LEVELS, b + 1, c.w);
    c.scale = gguf::e8m0_half(b[0]), c.min = 0.0f;
    return c;
  }
};

}  // namespace q8

#include "q8_neon_kquants.h"
#endif
