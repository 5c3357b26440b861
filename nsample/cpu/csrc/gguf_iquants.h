// The 4-bit table formats (llama.cpp's ggml-common.h block_iq4_nl, block_iq4_xs, block_mxfp4): each 4-bit q indexes
// a table of sixteen int8 levels (KVALUES), scaled by the block's d (IQ4_NL, 32 weights) or by d·(scale - 32) of each
// 32 of a 256-weight block (IQ4_XS); MXFP4's table is E2M1's, its scale a power of two. Every product is exact in
// float32 (an fp16 d's 11 significand bits, a 6-bit scale's and a level's 7 fit in 24), so the weights equal
// gguf-py's dequantizers bitwise in any order.
#pragma once
#include <bit>

#include "gguf_kquants.h"

namespace gguf {

alignas(16) inline constexpr int8_t KVALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};

// 32 weights' levels as bytes from a table of sixteen: weight i < 16 from the low nibble of qs[i], the rest from the
// high nibble of qs[i - 16] (as Q4_0 packs them). A byte shuffle of the table on x86, in two registers (lo: weights
// 0..15, hi: 16..31); a loop elsewhere.
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
inline void nibble_levels(const uint8_t* qs, const int8_t* table16, __m128i& lo, __m128i& hi) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table16)), nibble = _mm_set1_epi8(0x0F);
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  lo = _mm_shuffle_epi8(table, _mm_and_si128(x, nibble));
  hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(x, 4), nibble));
}
#endif
inline void nibble_levels(const uint8_t* qs, const int8_t* table16, int8_t* out) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  __m128i lo, hi;
  nibble_levels(qs, table16, lo, hi);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), hi);
#else
  for (int i = 0; i < 16; ++i) {
    out[i] = table16[qs[i] & 15];
    out[i + 16] = table16[qs[i] >> 4];
  }
#endif
}
inline void iq4_levels(const uint8_t* qs, int8_t* out) { nibble_levels(qs, KVALUES, out); }

// The sixteen levels as floats, made from the bytes at compile time. On AVX-512, times a scale (exact products), a
// table each weight is one lane permute of, its q the index (the permute reads only its low four bits), as Q4_K's
// Levels: where the levels went by as bytes, widened and converted, one row of IQ4_XS took about 2x Q4_K's time (with
// the tables 1.6x, IQ4_NL 1.2x).
struct Floats16 {
  alignas(64) float f[16];
};
constexpr Floats16 floats16(const int8_t (&levels)[16]) {
  Floats16 r{};
  for (int i = 0; i < 16; ++i) r.f[i] = levels[i];
  return r;
}
inline constexpr Floats16 KVALUES_FLOAT = floats16(KVALUES);

// A 32-weight block of nibbles packed as IQ4_NL's at qs, each the index of one of sixteen levels (`levels` as bytes,
// `floats` the same as floats), times one scale: the block's weights as vectors.
inline void table_chunk(const uint8_t* qs, float scale, const int8_t* levels, const float* floats, Vec* w) {
#if defined(CPU_CAPABILITY_AVX512)
  const Vec table = Vec(scale) * Vec::loadu(floats);
  const Ints u = u8(qs);
  w[0] = _mm512_permutexvar_ps(u, table);
  w[1] = _mm512_permutexvar_ps(high(u), table);
#elif defined(CPU_CAPABILITY_AVX2)  // the levels widened from registers: through memory, one and two rows took
  (void)floats;                       // 1.1-1.2x the time (Zen 4, 2 threads)
  __m128i lo, hi;
  nibble_levels(qs, levels, lo, hi);
  const Vec d(scale);
  const auto wide = [&](const __m128i& b) { return d * to_float(Ints(_mm256_cvtepi8_epi32(b))); };
  w[0] = wide(lo);
  w[1] = wide(_mm_srli_si128(lo, 8));
  w[2] = wide(hi);
  w[3] = wide(_mm_srli_si128(hi, 8));
#else
  (void)floats;
  alignas(32) int8_t q[32];
  nibble_levels(qs, levels, q);
  const Vec d(scale);
  FOR_VECTORS(v) w[v] = d * to_float(i8(reinterpret_cast<const uint8_t*>(q) + S * v));
#endif
}

// IQ4_NL {half d; uint8 qs[16]}: d·KVALUES[q].
struct IQ4_NL : Format<IQ4_NL> {
  static constexpr int64_t TYPE = 20, WEIGHTS = 32, BYTES = 18;
  static void chunk(const uint8_t* b, int, Vec* w) { table_chunk(b + 2, half(b), KVALUES, KVALUES_FLOAT.f, w); }
};

// MXFP4 {uint8 e; uint8 qs[16]} (OCP's microscaling FP4, gpt-oss's experts): each q an E2M1 value, doubled in the
// table (MXFP4_LEVELS), times 2^(e - 128), ggml's e8m0_to_fp32_half (e < 2 a denormal). A power of two times a small
// integer: exact, so gguf-py's dequantizer bitwise.
alignas(16) inline constexpr int8_t MXFP4_LEVELS[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
inline constexpr Floats16 MXFP4_FLOATS = floats16(MXFP4_LEVELS);
// The scales are read from a table of the 256 made at compile time: a broadcast from memory. Made in a general
// register and moved to a vector, they took 1.18-1.26x the time at one row on float32 activations and 1.01-1.16x on
// int8 (1.12-1.22x at eight rows; Zen 4, 2 threads).
struct E8M0Table {
  float f[256];
};
constexpr E8M0Table e8m0_table() {
  E8M0Table t{};
  for (uint32_t e = 0; e < 256; ++e) t.f[e] = std::bit_cast<float>(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  return t;
}
alignas(64) inline constexpr E8M0Table E8M0_HALF = e8m0_table();
inline const float& e8m0_half(uint8_t e) { return E8M0_HALF.f[e]; }
struct MXFP4 : Format<MXFP4> {
  static constexpr int64_t TYPE = 39, WEIGHTS = 32, BYTES = 17;
  static void chunk(const uint8_t* b, int, Vec* w) {
    table_chunk(b + 1, e8m0_half(b[0]), MXFP4_LEVELS, MXFP4_FLOATS.f, w);
  }
};

// IQ4_XS {half d; uint16 scales_h; uint8 scales_l[4], qs[128]}, 256 weights in eight sub-blocks of 32: sub-block
// j's levels from qs[16j .. 16j + 16] (as IQ4_NL's), its 6-bit scale the low (even j) or high (odd j) nibble of
// scales_l[j / 2] with bits 2j of scales_h above it. A block's factors d·(scale - 32) made once, each twice in Factors
// (once for each 16 of its sub-block); on AVX-512 each sub-block's table of levels (its factor times KVALUES_FLOAT),
// elsewhere the block's levels as bytes, made once (SignedBytes).
inline int iq4_xs_scale(const uint8_t* b, int j) {  // sub-block j's scale - 32, in [-32, 31]
  uint16_t high;
  std::memcpy(&high, b + 2, 2);
  return (((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4)) - 32;
}
inline Factors iq4_xs_factors(const uint8_t* b) {
  alignas(16) uint8_t scales[16];
  for (int j = 0; j < 8; ++j) scales[2 * j] = scales[2 * j + 1] = static_cast<uint8_t>(iq4_xs_scale(b, j));
  const float d = half(b);
  return factors<true>(bytes16(scales), d, d);
}
#if defined(CPU_CAPABILITY_AVX512)
struct IQ4_XS : Format<IQ4_XS> {
  static constexpr int64_t TYPE = 23, WEIGHTS = 256, BYTES = 136;
  using Prep = Factors;
  static void prepare(const uint8_t* b, Prep& f) { f = iq4_xs_factors(b); }
  static void chunk_with(const uint8_t* b, int j, Vec* w, const Prep& f) {
    const Vec table = f.times(2 * j, Vec::loadu(KVALUES_FLOAT.f));
    const Ints u = u8(b + 8 + 16 * j);
    w[0] = _mm512_permutexvar_ps(u, table);
    w[1] = _mm512_permutexvar_ps(high(u), table);
  }
};
#else
struct IQ4_XS : SignedBytes<IQ4_XS> {
  static constexpr int64_t TYPE = 23, WEIGHTS = 256, BYTES = 136;
  static void prepare(const uint8_t* b, Prep& p) {
    p.f = iq4_xs_factors(b);
    for (int j = 0; j < 8; ++j) iq4_levels(b + 8 + 16 * j, p.q + 32 * j);
  }
};
#endif

}  // namespace gguf
