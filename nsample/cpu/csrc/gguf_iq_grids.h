// The IQ formats below 4 bits (llama.cpp's ggml-common.h block_iq2_xxs, block_iq2_xs, block_iq2_s, block_iq3_xxs,
// block_iq3_s, block_iq1_s, block_iq1_m), 256 weights a block: each group of 8 (or 4) weights is a point of a fixed
// grid (gguf_iq_grid_tables.h, gguf-py's own tables), its index in the block, with a sign per weight (IQ2, IQ3) or a
// shift of ±1/8 for the group (IQ1), times a factor per 16 or 32 weights made of the block's fp16 d and a small scale.
// A block is made once into its 256 q as signed bytes and its sixteen factors (SignedBytes, as Q3_K and Q6_K), and
// each weight is one float32 product factor·q. That is gguf-py's weight bitwise: there (db·grid)·sign, the sign exact;
// for IQ1 dl·(grid ± 1/8), here (dl/8)·(8·grid ± 1), the same real product (dl/8 is exact) rounded once.
#pragma once
#include <cstring>

#include "gguf_iq_grid_tables.h"
#include "gguf_kquants.h"

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
#define NSAMPLE_IQ_GATHER 1  // x86: gathers and a vector sign pass (below); elsewhere scalar code
#endif

namespace gguf {
namespace iq {

// llama.cpp's ksigns: a group's seven stored signs, its eighth their parity (each group has an even number of minus
// signs). scripts/make_iq_grids.py checks gguf-py's table is this.
struct KSigns {
  uint8_t s[128];
  constexpr KSigns() : s() {
    for (int i = 0; i < 128; ++i) s[i] = static_cast<uint8_t>(i | (__builtin_popcount(i) & 1) << 7);
  }
};
inline constexpr KSigns KSIGNS{};
inline int ksign(uint32_t i) { return KSIGNS.s[i & 127]; }
// Four groups' ksigns, 7 bits each from bit 0 of v, as four bytes.
inline uint32_t ksigns4(uint32_t v) {
  return ksign(v) | ksign(v >> 7) << 8 | ksign(v >> 14) << 16 | static_cast<uint32_t>(ksign(v >> 21)) << 24;
}
inline uint32_t u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
// IQ2's and IQ3_XXS's factor of a 4-bit scale s: d·(0.5 + s)·k, in gguf-py's order.
inline float half_step(float d, uint32_t s, float k) { return d * (0.5f + static_cast<float>(s)) * k; }
// IQ2_XS's and IQ2_S's sixteen factors: scale k the low (even k) or high nibble of scales[k / 2].
inline void nibble_steps(Factors& f, float d, const uint8_t* scales) {
  for (int k = 0; k < 16; ++k) f.f[k] = half_step(d, scales[k / 2] >> 4 * (k % 2) & 15, 0.25f);
}
// IQ1's factor of a 3-bit scale s: dl / 8 with dl = d·(2·s + 1), gguf-py's dl (the / 8 is exact).
inline float iq1_step(float d, uint32_t s) { return d * static_cast<float>(2 * s + 1) * 0.125f; }

#if defined(NSAMPLE_IQ_GATHER)
// On x86 a chunk of 32 weights' grid points are one gather (eight 4-weight points, or four 8-weight ones: 256-bit
// gathers on AVX-512 too), their signs one vector pass: 3-6x less time a block than a load and a table's sign mask
// per group (the scalar code below, still what other CPUs run). The same bytes.
inline __m256i gather4(const uint64_t* grid, __m128i index) {
  return _mm256_i32gather_epi64(reinterpret_cast<const long long*>(grid), index, 8);
}
inline __m256i gather8(const uint32_t* grid, __m256i index) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(grid), index, 4);
}
// 32 grid weights g (bytes, each 1..127), negated where the 32 bits of signs (byte k for weights 8k .. 8k + 7) say,
// stored at q (aligned): (g ^ m) - m, m 0xff where a sign is set.
inline void put_signed(int8_t* q, __m256i g, uint32_t signs) {
  const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i bits = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i s = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(signs)), spread);
  const __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(s, bits), bits);
  _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_sub_epi8(_mm256_xor_si256(g, m), m));
}
// 32 IQ1 grid weights g (-1, 0, 1 as bytes) as 8·g + delta (each byte of delta 1 or -1), stored at q (aligned).
inline void put_iq1(int8_t* q, __m256i g, __m256i delta) {
  const __m256i eight = _mm256_and_si256(_mm256_slli_epi16(g, 3), _mm256_set1_epi8(static_cast<char>(0xf8)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_add_epi8(eight, delta));
}
// Four small indices from a byte each (qs) with bits of `high` above: lane l's (high >> shift_l) & mask, << 8.
inline __m128i indices4(const uint8_t* qs, uint32_t high, __m128i shifts, int mask) {
  const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(high)), shifts),
                                    _mm_set1_epi32(mask));
  return _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(u32(qs)))), _mm_slli_epi32(top, 8));
}
#else
// Byte k of SIGNS[s] is 0xff where bit k of s is set: eight weights' signs as a mask.
struct SignMasks {
  uint64_t m[256];
  constexpr SignMasks() : m() {
    for (int s = 0; s < 256; ++s)
      for (int k = 0; k < 8; ++k)
        if (s >> k & 1) m[s] |= uint64_t{0xff} << 8 * k;
  }
};
inline constexpr SignMasks SIGNS{};
// Eight grid weights (bytes, each 1..127), negated where the signs s say, as bytes at q: (g ^ m) + (m & 1) per byte,
// -g as 256 - g, so no carry crosses a byte.
inline void put(int8_t* q, uint64_t g, int s) {
  const uint64_t m = SIGNS.m[s], v = (g ^ m) + (m & 0x0101010101010101ull);
  std::memcpy(q, &v, 8);
}
// Eight IQ1 grid weights (-1, 0, 1 as bytes) as 8·g ± 1 at q: the grid shifted by ∓1/8 (minus), times 8.
inline void put_iq1(int8_t* q, uint64_t g, bool minus) {
  for (int k = 0; k < 8; ++k) q[k] = static_cast<int8_t>(8 * static_cast<int8_t>(g >> 8 * k) + (minus ? -1 : 1));
}
// Two 4-weight grid points as one group of eight.
inline uint64_t pair(const uint32_t* grid, int a, int b) { return grid[a] | static_cast<uint64_t>(grid[b]) << 32; }
#endif

}  // namespace iq

// IQ2_XXS {half d; uint16 qs[32]}: each 32 weights two uint32, the first four grid indices (bytes), the second four
// 7-bit sign indices and the 4-bit scale on top; factor d·(0.5 + scale)/4.
struct IQ2_XXS : SignedBytes<IQ2_XXS> {
  static constexpr int64_t TYPE = 16, WEIGHTS = 256, BYTES = 66;
  static void prepare(const uint8_t* b, Prep& p) {
    const float d = half(b);
    for (int j = 0; j < 8; ++j) {
      const uint32_t index = iq::u32(b + 2 + 8 * j), sign = iq::u32(b + 6 + 8 * j);
      p.f.f[2 * j] = p.f.f[2 * j + 1] = iq::half_step(d, sign >> 28, 0.25f);
#if defined(NSAMPLE_IQ_GATHER)
      const __m128i at = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(index)));
      iq::put_signed(p.q + 32 * j, iq::gather4(grids::IQ2XXS_GRID, at), iq::ksigns4(sign));
#else
      for (int l = 0; l < 4; ++l)
        iq::put(p.q + 32 * j + 8 * l, grids::IQ2XXS_GRID[index >> 8 * l & 255], iq::ksign(sign >> 7 * l));
#endif
    }
  }
};

// IQ2_XS {half d; uint16 qs[32]; uint8 scales[8]}: each group of 8 a 9-bit grid index and a 7-bit sign index; each 16
// weights a 4-bit scale (low nibble first), factor d·(0.5 + scale)/4.
struct IQ2_XS : SignedBytes<IQ2_XS> {
  static constexpr int64_t TYPE = 17, WEIGHTS = 256, BYTES = 74;
  static void prepare(const uint8_t* b, Prep& p) {
    const float d = half(b);
    iq::nibble_steps(p.f, d, b + 66);
#if defined(NSAMPLE_IQ_GATHER)
    for (int j = 0; j < 8; ++j) {
      uint64_t v;
      std::memcpy(&v, b + 2 + 8 * j, 8);
      const __m128i at = _mm_and_si128(_mm_cvtepu16_epi32(_mm_cvtsi64_si128(static_cast<long long>(v))),
                                       _mm_set1_epi32(511));
      const uint32_t signs = iq::ksign(v >> 9) | iq::ksign(v >> 25) << 8 | iq::ksign(v >> 41) << 16 |
                             static_cast<uint32_t>(iq::ksign(v >> 57)) << 24;
      iq::put_signed(p.q + 32 * j, iq::gather4(grids::IQ2XS_GRID, at), signs);
    }
#else
    for (int l = 0; l < 32; ++l) {
      const uint16_t v = iq::u16(b + 2 + 2 * l);
      iq::put(p.q + 8 * l, grids::IQ2XS_GRID[v & 511], iq::ksign(v >> 9));
    }
#endif
  }
};

// IQ2_S {half d; uint8 qs[32], signs[32], qh[8], scales[8]}: group l's 10-bit grid index qs[l] with two bits of
// qh[l / 4] above, its signs the byte signs[l]; scales as IQ2_XS.
struct IQ2_S : SignedBytes<IQ2_S> {
  static constexpr int64_t TYPE = 22, WEIGHTS = 256, BYTES = 82;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    const float d = half(b);
    iq::nibble_steps(p.f, d, scales);
#if defined(NSAMPLE_IQ_GATHER)
    const __m128i shifts = _mm_setr_epi32(0, 2, 4, 6);
    for (int j = 0; j < 8; ++j)
      iq::put_signed(p.q + 32 * j, iq::gather4(grids::IQ2S_GRID, iq::indices4(qs + 4 * j, qh[j], shifts, 3)),
                     iq::u32(signs + 4 * j));
#else
    for (int l = 0; l < 32; ++l)
      iq::put(p.q + 8 * l, grids::IQ2S_GRID[qs[l] | (qh[l / 4] >> 2 * (l % 4) & 3) << 8], signs[l]);
#endif
  }
};

// IQ3_XXS {half d; uint8 qs[64]; uint32 scales_signs[8]}: 4-weight grid points (byte indices); each 32 weights one
// uint32 of four 7-bit sign indices (one a group of 8) and the 4-bit scale on top, factor d·(0.5 + scale)/2.
struct IQ3_XXS : SignedBytes<IQ3_XXS> {
  static constexpr int64_t TYPE = 18, WEIGHTS = 256, BYTES = 98;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t* qs = b + 2;
    const float d = half(b);
    for (int j = 0; j < 8; ++j) {
      const uint32_t sign = iq::u32(b + 66 + 4 * j);
      p.f.f[2 * j] = p.f.f[2 * j + 1] = iq::half_step(d, sign >> 28, 0.5f);
#if defined(NSAMPLE_IQ_GATHER)
      const __m256i at = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * j)));
      iq::put_signed(p.q + 32 * j, iq::gather8(grids::IQ3XXS_GRID, at), iq::ksigns4(sign));
#else
      for (int l = 0; l < 4; ++l) {
        const int at = 8 * j + 2 * l;
        iq::put(p.q + 32 * j + 8 * l, iq::pair(grids::IQ3XXS_GRID, qs[at], qs[at + 1]), iq::ksign(sign >> 7 * l));
      }
#endif
    }
  }
};

// IQ3_S {half d; uint8 qs[64], qh[8], signs[32], scales[4]}: point i's 9-bit index qs[i] with bit i % 8 of qh[i / 8]
// above, group l's signs the byte signs[l]; each 32 weights a 4-bit scale (low nibble first), factor d·(1 + 2·scale).
struct IQ3_S : SignedBytes<IQ3_S> {
  static constexpr int64_t TYPE = 21, WEIGHTS = 256, BYTES = 110;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
    const float d = half(b);
    for (int j = 0; j < 8; ++j)
      p.f.f[2 * j] = p.f.f[2 * j + 1] = d * static_cast<float>(1 + 2 * (scales[j / 2] >> 4 * (j % 2) & 15));
#if defined(NSAMPLE_IQ_GATHER)
    const __m256i shifts = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1), ninth = _mm256_set1_epi32(256);
    for (int j = 0; j < 8; ++j) {  // point 8j + i's ninth bit: bit i of qh[j], moved to bit 8
      const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * j)));
      const __m256i top = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(qh[j]), shifts), ninth);
      iq::put_signed(p.q + 32 * j, iq::gather8(grids::IQ3S_GRID, _mm256_or_si256(low, top)), iq::u32(signs + 4 * j));
    }
#else
    const auto index = [&](int i) { return qs[i] | (qh[i / 8] >> i % 8 & 1) << 8; };
    for (int l = 0; l < 32; ++l)
      iq::put(p.q + 8 * l, iq::pair(grids::IQ3S_GRID, index(2 * l), index(2 * l + 1)), signs[l]);
#endif
  }
};

// IQ1_S {half d; uint8 qs[32]; uint16 qh[8]}: each 32 weights one uint16 of qh: four 3-bit tops of the groups'
// 11-bit grid indices, a 3-bit scale (dl = d·(2·scale + 1)) and the sign of the groups' shift (bit 15: -1/8).
struct IQ1_S : SignedBytes<IQ1_S> {
  static constexpr int64_t TYPE = 19, WEIGHTS = 256, BYTES = 50;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t* qs = b + 2;
    const float d = half(b);
#if defined(NSAMPLE_IQ_GATHER)
    const __m128i shifts = _mm_setr_epi32(0, 3, 6, 9);
#endif
    for (int j = 0; j < 8; ++j) {
      const uint16_t h = iq::u16(b + 34 + 2 * j);
      p.f.f[2 * j] = p.f.f[2 * j + 1] = iq::iq1_step(d, h >> 12 & 7);
#if defined(NSAMPLE_IQ_GATHER)
      const __m256i g = iq::gather4(grids::IQ1S_GRID, iq::indices4(qs + 4 * j, h, shifts, 7));
      iq::put_iq1(p.q + 32 * j, g, _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
#else
      for (int l = 0; l < 4; ++l)
        iq::put_iq1(p.q + 32 * j + 8 * l, grids::IQ1S_GRID[qs[4 * j + l] | (h >> 3 * l & 7) << 8], h & 0x8000);
#endif
    }
  }
};

// IQ1_M {uint8 qs[32], qh[16]; uint16 scales[4]}: group i's 11-bit grid index qs[i] with the low three bits of its
// nibble of qh (qh[i / 2], low nibble first) above, the nibble's fourth bit the sign of its shift; sixteen 3-bit
// scales (dl = d·(2·scale + 1), one a 16 weights) at bits 0, 3, 6, 9 of each uint16, and d's fp16 bits the four top
// nibbles.
struct IQ1_M : SignedBytes<IQ1_M> {
  static constexpr int64_t TYPE = 29, WEIGHTS = 256, BYTES = 56;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t *qs = b, *qh = b + 32;
    uint16_t sc[4];
    std::memcpy(sc, b + 48, 8);
    const uint16_t bits = (sc[0] >> 12) | (sc[1] >> 8 & 0xf0) | (sc[2] >> 4 & 0xf00) | (sc[3] & 0xf000);
    const float d = c10::detail::fp16_ieee_to_fp32_value(bits);
    for (int k = 0; k < 16; ++k) p.f.f[k] = iq::iq1_step(d, sc[k / 4] >> 3 * (k % 4) & 7);
#if defined(NSAMPLE_IQ_GATHER)
    const __m128i shifts = _mm_setr_epi32(0, 4, 8, 12);
    const __m256i shifts64 = _mm256_setr_epi64x(3, 7, 11, 15), one = _mm256_set1_epi8(1);
    for (int j = 0; j < 8; ++j) {  // points 4j .. 4j + 3: the nibbles of qh[2j], qh[2j + 1]
      const uint16_t h = iq::u16(qh + 2 * j);
      const __m256i g = iq::gather4(grids::IQ1S_GRID, iq::indices4(qs + 4 * j, h, shifts, 7));
      const __m256i minus = _mm256_sub_epi64(_mm256_setzero_si256(),  // all ones where the point's fourth bit is set
                                             _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(h), shifts64),
                                                              _mm256_set1_epi64x(1)));
      iq::put_iq1(p.q + 32 * j, g, _mm256_or_si256(minus, one));
    }
#else
    for (int i = 0; i < 32; ++i) {
      const int nibble = qh[i / 2] >> 4 * (i % 2) & 15;
      iq::put_iq1(p.q + 8 * i, grids::IQ1S_GRID[qs[i] | (nibble & 7) << 8], nibble & 8);
    }
#endif
  }
};

}  // namespace gguf
