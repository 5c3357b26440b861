// The K-quants and IQ4_XS as small signed integers for the int8-activation kernels on ARM64 (q8_tile_neon.h's ktile):
// 256 weights a block, its eight chunks of 32 as signed bytes, and an integer scale for each 16 weights (the formats
// with one per 32 give it to both halves), so a block's sum stays an exact int32 until one float multiply by d.
// The activations are rounded per 256 (llama.cpp's Q8_K, each 32's Σx and each 16's Σq beside). Q4_K's and Q5_K's
// minimums give the float term -Σ_j (dmin·m_j)·Σx_j, Q2_K's the integer one -Σ_k m_k·Σq_k times dmin, as on x86
// (q8_kquants.h). The same block layouts as gguf_kquants.h and gguf_iquants.h. Included by q8_neon.h.
#pragma once
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cstdint>

#include "gguf_formats.h"

namespace q8 {

struct KBlock {
  float d;
  int32_t scales[16];  // each 16 weights' integer scale (PER16), else each 32's at 2j
  float mins[8];       // Q4_K, Q5_K: dmin·m_j of each 32
  float dmin;          // Q2_K
  int16_t low[16];     // Q2_K: each 16's minimum
};

// Q4_K's and Q5_K's eight 6-bit scales and minimums (gguf::k_scales).
inline KBlock scales_mins(const uint8_t* b) {
  const auto both = gguf::k_scales(b);  // scales 0..7, minimums 0..7
  KBlock k{gguf::half(b), {}, {}, 0.0f, {}};
  const float dmin = gguf::half(b + 2);
  for (int j = 0; j < 8; ++j) {
    k.scales[2 * j] = k.scales[2 * j + 1] = both.b[j];
    k.mins[j] = static_cast<float>(both.b[8 + j]) * dmin;
  }
  return k;
}
// The 32 bytes at p, low nibbles (j even) or high ones (j odd): Q4_K's and Q5_K's chunk j of 64-weight pairs.
inline void nibbles32(const uint8_t* p, int j, int8x16_t* w) {
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t x = vld1q_u8(p + 16 * h);
    w[h] = j % 2 ? high4(x) : low4(x);
  }
}

struct Q4_K {  // sub-block j: (d·sc)·q - dmin·m
  static constexpr bool K = true, MIN = true, MIN16 = false, PER16 = false;
  static KBlock block(const uint8_t* b) { return scales_mins(b); }
  static void weights(const uint8_t* b, int j, int8x16_t* w) { nibbles32(b + 16 + 32 * (j / 2), j, w); }
};
struct Q5_K {  // Q4_K's nibbles with bit j of qh[i] as the fifth
  static constexpr bool K = true, MIN = true, MIN16 = false, PER16 = false;
  static KBlock block(const uint8_t* b) { return scales_mins(b); }
  static void weights(const uint8_t* b, int j, int8x16_t* w) {
    nibbles32(b + 48 + 32 * (j / 2), j, w);
    for (int h = 0; h < 2; ++h) w[h] = vorrq_s8(w[h], vreinterpretq_s8_u8(bits(b + 16 + 16 * h, j, 1, 4)));
  }
};
struct Q6_K {  // d·scales[w / 16]·(q - 32): q's low four bits from ql, its top two from qh (gguf_kquants.h)
  static constexpr bool K = true, MIN = false, MIN16 = false, PER16 = true;
  static KBlock block(const uint8_t* b) {
    KBlock k{gguf::half(b + 208), {}, {}, 0.0f, {}};
    for (int i = 0; i < 16; ++i) k.scales[i] = static_cast<int8_t>(b[192 + i]);
    return k;
  }
  static void weights(const uint8_t* b, int j, int8x16_t* w) {  // chunk j = 4h + t
    const int h = j / 4, t = j % 4;
    for (int i = 0; i < 2; ++i) {
      const uint8x16_t x = vld1q_u8(b + 64 * h + 32 * (t % 2) + 16 * i);
      const uint8x16_t q = vorrq_u8(t < 2 ? vandq_u8(x, vdupq_n_u8(0x0F)) : vshrq_n_u8(x, 4),
                                    bits(b + 128 + 32 * h + 16 * i, 2 * t, 2, 4));
      w[i] = vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(32));
    }
  }
};
struct Q3_K {  // d·(scale - 32)·(q - 4): q's low two bits from qs, its third from hmask (gguf_kquants.h)
  static constexpr bool K = true, MIN = false, MIN16 = false, PER16 = true;
  static KBlock block(const uint8_t* b) {
    const auto s = gguf::q3_scales(b + 96);
    KBlock k{gguf::half(b + 108), {}, {}, 0.0f, {}};
    for (int i = 0; i < 16; ++i) k.scales[i] = static_cast<int8_t>(s.b[i]);
    return k;
  }
  static void weights(const uint8_t* b, int j, int8x16_t* w) {  // chunk j = 4h + t: bits 2t of qs[32h + i], bit
    const int h = j / 4, t = j % 4;                                // 4h + t of hmask[i]
    for (int i = 0; i < 2; ++i) {
      const uint8x16_t q = vorrq_u8(bits(b + 32 + 32 * h + 16 * i, 2 * t, 2, 0), bits(b + 16 * i, j, 1, 2));
      w[i] = vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(4));
    }
  }
};
struct Q2_K {  // d·scale_k·q - dmin·minimum_k (gguf_kquants.h), q two bits of qs
  static constexpr bool K = true, MIN = false, MIN16 = true, PER16 = true;
  static KBlock block(const uint8_t* b) {
    KBlock k{gguf::half(b + 80), {}, {}, gguf::half(b + 82), {}};
    for (int i = 0; i < 16; ++i) k.scales[i] = b[i] & 0x0F, k.low[i] = static_cast<int16_t>(b[i] >> 4);
    return k;
  }
  static void weights(const uint8_t* b, int j, int8x16_t* w) {  // chunk j = 4h + t: bits 2t of qs[32h + i]
    for (int i = 0; i < 2; ++i) w[i] = vreinterpretq_s8_u8(bits(b + 16 + 32 * (j / 4) + 16 * i, 2 * (j % 4), 2, 0));
  }
};
struct IQ4_XS {  // sub-block j: d·(scale_j - 32)·KVALUES[q] (gguf_iquants.h)
  static constexpr bool K = true, MIN = false, MIN16 = false, PER16 = false;
  static KBlock block(const uint8_t* b) {
    KBlock k{gguf::half(b), {}, {}, 0.0f, {}};
    for (int j = 0; j < 8; ++j) k.scales[2 * j] = k.scales[2 * j + 1] = gguf::iq4_xs_scale(b, j);
    return k;
  }
  static void weights(const uint8_t* b, int j, int8x16_t* w) { levels16(gguf::KVALUES, b + 8 + 16 * j, w); }
};

}  // namespace q8
#endif
