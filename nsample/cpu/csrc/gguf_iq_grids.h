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

namespace gguf {
namespace iq {

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

// llama.cpp's ksigns: a group's seven stored signs, its eighth their parity (each group has an even number of minus
// signs). scripts/make_iq_grids.py checks gguf-py's table is this.
constexpr int ksign(uint32_t i) { return static_cast<int>(i | (__builtin_popcount(i) & 1) << 7); }

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
      for (int l = 0; l < 4; ++l)
        iq::put(p.q + 32 * j + 8 * l, grids::IQ2XXS_GRID[index >> 8 * l & 255], iq::ksign(sign >> 7 * l & 127));
    }
  }
};

// IQ2_XS {half d; uint16 qs[32]; uint8 scales[8]}: each group of 8 a 9-bit grid index and a 7-bit sign index; each 16
// weights a 4-bit scale (low nibble first), factor d·(0.5 + scale)/4.
struct IQ2_XS : SignedBytes<IQ2_XS> {
  static constexpr int64_t TYPE = 17, WEIGHTS = 256, BYTES = 74;
  static void prepare(const uint8_t* b, Prep& p) {
    const float d = half(b);
    for (int k = 0; k < 16; ++k) p.f.f[k] = iq::half_step(d, b[66 + k / 2] >> 4 * (k % 2) & 15, 0.25f);
    for (int l = 0; l < 32; ++l) {
      const uint16_t v = iq::u16(b + 2 + 2 * l);
      iq::put(p.q + 8 * l, grids::IQ2XS_GRID[v & 511], iq::ksign(v >> 9));
    }
  }
};

// IQ2_S {half d; uint8 qs[32], signs[32], qh[8], scales[8]}: group l's 10-bit grid index qs[l] with two bits of
// qh[l / 4] above, its signs the byte signs[l]; scales as IQ2_XS.
struct IQ2_S : SignedBytes<IQ2_S> {
  static constexpr int64_t TYPE = 22, WEIGHTS = 256, BYTES = 82;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    const float d = half(b);
    for (int k = 0; k < 16; ++k) p.f.f[k] = iq::half_step(d, scales[k / 2] >> 4 * (k % 2) & 15, 0.25f);
    for (int l = 0; l < 32; ++l)
      iq::put(p.q + 8 * l, grids::IQ2S_GRID[qs[l] | (qh[l / 4] >> 2 * (l % 4) & 3) << 8], signs[l]);
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
      for (int l = 0; l < 4; ++l) {
        const int at = 8 * j + 2 * l;
        iq::put(p.q + 32 * j + 8 * l, iq::pair(grids::IQ3XXS_GRID, qs[at], qs[at + 1]), iq::ksign(sign >> 7 * l & 127));
      }
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
    const auto index = [&](int i) { return qs[i] | (qh[i / 8] >> i % 8 & 1) << 8; };
    for (int l = 0; l < 32; ++l)
      iq::put(p.q + 8 * l, iq::pair(grids::IQ3S_GRID, index(2 * l), index(2 * l + 1)), signs[l]);
  }
};

// IQ1_S {half d; uint8 qs[32]; uint16 qh[8]}: each 32 weights one uint16 of qh: four 3-bit tops of the groups'
// 11-bit grid indices, a 3-bit scale (dl = d·(2·scale + 1)) and the sign of the groups' shift (bit 15: -1/8).
struct IQ1_S : SignedBytes<IQ1_S> {
  static constexpr int64_t TYPE = 19, WEIGHTS = 256, BYTES = 50;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t* qs = b + 2;
    const float d = half(b);
    for (int j = 0; j < 8; ++j) {
      const uint16_t h = iq::u16(b + 34 + 2 * j);
      p.f.f[2 * j] = p.f.f[2 * j + 1] = d * static_cast<float>(2 * (h >> 12 & 7) + 1) * 0.125f;
      for (int l = 0; l < 4; ++l)
        iq::put_iq1(p.q + 32 * j + 8 * l, grids::IQ1S_GRID[qs[4 * j + l] | (h >> 3 * l & 7) << 8], h & 0x8000);
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
    for (int k = 0; k < 16; ++k) p.f.f[k] = d * static_cast<float>(2 * (sc[k / 4] >> 3 * (k % 4) & 7) + 1) * 0.125f;
    for (int i = 0; i < 32; ++i) {
      const int nibble = qh[i / 2] >> 4 * (i % 2) & 15;
      iq::put_iq1(p.q + 8 * i, grids::IQ1S_GRID[qs[i] | (nibble & 7) << 8], nibble & 8);
    }
  }
};

}  // namespace gguf
