// The 4-bit "non-linear" formats (llama.cpp's ggml-common.h block_iq4_nl, block_iq4_xs): each 4-bit q indexes a
// table of sixteen int8 levels (KVALUES), scaled by the block's d (IQ4_NL, 32 weights) or by d·(scale - 32) of each
// 32 of a 256-weight block (IQ4_XS). Every product is exact in float32 (an fp16 d's 11 significand bits, a 6-bit
// scale's and a level's 7 fit in 24), so the weights equal gguf-py's dequantizers bitwise in any order.
#pragma once
#include "gguf_kquants.h"

namespace gguf {

alignas(16) inline constexpr int8_t KVALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};

// 32 weights' levels as bytes: weight i < 16 from the low nibble of qs[i], the rest from the high nibble of
// qs[i - 16] (as Q4_0 packs them). A byte shuffle of the table on x86; a loop elsewhere.
inline void iq4_levels(const uint8_t* qs, int8_t* out) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(KVALUES)), nibble = _mm_set1_epi8(0x0F);
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_shuffle_epi8(table, _mm_and_si128(x, nibble)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16),
                   _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(x, 4), nibble)));
#else
  for (int i = 0; i < 16; ++i) {
    out[i] = KVALUES[qs[i] & 15];
    out[i + 16] = KVALUES[qs[i] >> 4];
  }
#endif
}

// IQ4_NL {half d; uint8 qs[16]}: d·KVALUES[q].
struct IQ4_NL : Format<IQ4_NL> {
  static constexpr int64_t TYPE = 20, WEIGHTS = 32, BYTES = 18;
  static void chunk(const uint8_t* b, int, Vec* w) {
    alignas(32) int8_t levels[32];
    iq4_levels(b + 2, levels);
    const Vec d(half(b));
    FOR_VECTORS(v) w[v] = d * to_float(i8(reinterpret_cast<const uint8_t*>(levels) + S * v));
  }
};

// IQ4_XS {half d; uint16 scales_h; uint8 scales_l[4], qs[128]}, 256 weights in eight sub-blocks of 32: sub-block
// j's levels from qs[16j .. 16j + 16] (as IQ4_NL's), its 6-bit scale the low (even j) or high (odd j) nibble of
// scales_l[j / 2] with bits 2j of scales_h above it. A block's levels as bytes and its factors made once (prepare),
// each factor d·(scale - 32) twice in Factors, once for each 16 of its sub-block, as SignedBytes reads them.
struct IQ4_XS : SignedBytes<IQ4_XS> {
  static constexpr int64_t TYPE = 23, WEIGHTS = 256, BYTES = 136;
  static void prepare(const uint8_t* b, Prep& p) {
    uint16_t high;
    std::memcpy(&high, b + 2, 2);
    alignas(16) uint8_t scales[16];
    for (int j = 0; j < 8; ++j) {
      const int scale = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4);
      scales[2 * j] = scales[2 * j + 1] = static_cast<uint8_t>(scale - 32);
    }
    const float d = half(b);
    p.f = factors<true>(bytes16(scales), d, d);
    for (int j = 0; j < 8; ++j) iq4_levels(b + 8 + 16 * j, p.q + 32 * j);
  }
};

}  // namespace gguf
