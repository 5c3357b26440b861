// The K-quants (llama.cpp's ggml-common.h block_q2_K .. block_q6_K): 256 weights a block in sub-blocks with 4-, 6- or
// 8-bit scales, each block's sixteen float32 factors (and Q2_K's minimums) made once (Factors).
#pragma once
#include "gguf_block.h"

namespace gguf {

// Sixteen bytes of a block (a K-quant's scales), and the sixteen float32 factors made of them once a block: a·q[k]
// for k < 8, b·q[k] above, stored, each broadcast from there where a chunk needs it. Computed per chunk instead (two
// scales unpacked and two scalar products each), the one-row Q4_K loop spent twice the instructions on them that it
// spent on the weights.
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
using Bytes16 = __m128i;
inline Bytes16 bytes16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline Bytes16 bytes16(const uint32_t (&w)[4]) {
  return _mm_setr_epi32(static_cast<int>(w[0]), static_cast<int>(w[1]), static_cast<int>(w[2]),
                        static_cast<int>(w[3]));
}
#else
struct Bytes16 {
  uint8_t b[16];
};
inline Bytes16 bytes16(const uint8_t* p) {
  Bytes16 r;
  std::memcpy(r.b, p, 16);
  return r;
}
inline Bytes16 bytes16(const uint32_t (&w)[4]) {  // little endian, as the file
  Bytes16 r;
  std::memcpy(r.b, w, 16);
  return r;
}
#endif
struct Factors {
  alignas(64) float f[16];
  Vec at(int k) const {  // one broadcast load (AVX2: with Vec(f[k]) here eight rows of Q4_K were 6-9% slower, while
#if defined(CPU_CAPABILITY_AVX2)  // Q6_K is faster that way: see Q6_K)
    return _mm256_broadcast_ss(f + k);
#else
    return Vec(f[k]);
#endif
  }
#if defined(CPU_CAPABILITY_AVX512)
  // a·f[k], a + f[k] and a - f[k], f[k] the operation's own operand (gguf::times): the AVX-512 chunks' products.
  Vec times(int k, const Vec& a) const { return gguf::times(f[k], a); }
  Vec plus(const Vec& a, int k) const { return gguf::plus(a, f[k]); }
  Vec minus(const Vec& a, int k) const { return gguf::minus(a, f[k]); }
#endif
};
// The factors as vector products on x86 (GCC made the scalar loop below into a byte-by-byte extraction there, which
// made one row of Q4_K 20% slower than computing each chunk's factors alone), as scalar ones elsewhere.
#if defined(CPU_CAPABILITY_AVX512)
template <bool Signed>
inline Factors factors(const Bytes16& q, const __m512& ab) {  // ab: a in lanes 0..7, b in 8..15
  Factors r;
  const __m512i i = Signed ? _mm512_cvtepi8_epi32(q) : _mm512_cvtepu8_epi32(q);
  _mm512_store_ps(r.f, _mm512_mul_ps(ab, _mm512_cvtepi32_ps(i)));
  return r;
}
#endif
template <bool Signed>
inline Factors factors(const Bytes16& q, float a, float b) {
#if defined(CPU_CAPABILITY_AVX512)
  return factors<Signed>(q, _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b)));
#else
  Factors r;
#if defined(CPU_CAPABILITY_AVX2)
  const auto wide = [](__m128i x) {
    return _mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(x) : _mm256_cvtepu8_epi32(x));
  };
  _mm256_store_ps(r.f, _mm256_mul_ps(_mm256_set1_ps(a), wide(q)));
  _mm256_store_ps(r.f + 8, _mm256_mul_ps(_mm256_set1_ps(b), wide(_mm_srli_si128(q, 8))));
#else
  for (int k = 0; k < 16; ++k)
    r.f[k] = (k < 8 ? a : b) * static_cast<float>(Signed ? static_cast<int8_t>(q.b[k]) : q.b[k]);
#endif
  return r;
#endif
}

// Q4_K and Q5_K's eight 6-bit scales and minimums of sub-blocks j = 0..7, packed in 12 bytes: j < 4 in the low
// six bits of bytes j and j + 4; j >= 4 in byte j + 4's nibbles with their top two bits in the top of bytes j - 4
// and j. Unpacked four at a time (llama.cpp's masks): the scales in bytes 0..7, the minimums in 8..15.
inline Bytes16 k_scales(const uint8_t* b) {
  uint32_t u[3];
  std::memcpy(u, b + 4, 12);
  constexpr uint32_t six = 0x3f3f3f3f, four = 0x0f0f0f0f, two = 0x03030303;
  const uint32_t scales_mins[4] = {u[0] & six, (u[2] & four) | (((u[0] >> 6) & two) << 4), u[1] & six,
                                   ((u[2] >> 4) & four) | (((u[1] >> 6) & two) << 4)};
  return bytes16(scales_mins);
}
// Sub-block j's weights (d·sc_j)·q - dmin·m_j of a Q4_K or Q5_K block (Levels), from the block's factors.
template <int BITS>
inline auto k_levels(const Factors& f, int j) {
#if defined(CPU_CAPABILITY_AVX512)  // (d·sc_j)·q exact, so the product rounded, then the difference: the same weight
  return levels<BITS>([&f, j](const Ints& q) { return f.minus(f.times(j, to_float(q)), 8 + j); });
#else
  const Vec ds = f.at(j), dm = f.at(8 + j);
  return levels<BITS>([ds, dm](const Ints& q) { return exact_mul_sub(ds, to_float(q), dm); });
#endif
}
// A Q4_K or Q5_K block's factors: d·sc_j at j and dmin·m_j at 8 + j, the same float32 products gguf-py computes.
// On AVX-512 d and dmin are converted together and spread to lanes 0..7 and 8..15 with one permute, where two scalar
// conversions, two broadcasts and a blend took some six uops of port 5, the port the weights' tables wait for: one
// row of Q4_K 3-4% faster (in-process A/B, 1 thread), eight rows the same. (k_scales's words unpacked in a vector
// register, or as two 64-bit words, made one row 6-22% slower, though llvm-mca counts fewer cycles for both.)
inline Factors k_factors(const uint8_t* b) {
#if defined(CPU_CAPABILITY_AVX512)
  const __m512 both = scale_pair(b);  // d, dmin, d, dmin, ...
  const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);  // d to 0..7, dmin 8..15
  return factors<false>(k_scales(b), _mm512_permutexvar_ps(lanes, both));
#else
  return factors<false>(k_scales(b), half(b), half(b + 2));
#endif
}

// Q4_K and Q5_K's q of a block as bytes, sub-block j's at 32j (KBytes::q): for weight i of sub-block j = 2g + s the
// low (s = 0) or high (s = 1) nibble of qs[32g + i], and with FIFTH (Q5_K) bit j of qh[i] as its bit 4. On AVX-512
// two sub-blocks a register, their bits 5-7 left as they fall (a table reads bits 0-4: Levels); elsewhere exact.
template <bool FIFTH>
inline void k_bytes(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
#if defined(CPU_CAPABILITY_AVX512)
  const auto both = [](const uint8_t* p) {  // 32 bytes in each half of a register
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  };
  const auto halves = [](int a, int b) { return _mm512_inserti64x4(_mm512_set1_epi16(a), _mm256_set1_epi16(b), 1); };
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int g = 0; g < 4; ++g) {
    const __m512i nibbles = _mm512_srlv_epi16(both(qs + 32 * g), halves(0, 4));  // sub-block 2g | 2g + 1, bits 0-3
    __m512i r = nibbles;
    if constexpr (FIFTH)  // bit j moved to bit 4 (16-bit shifts: what crosses a byte lands outside bits 0-4)
      r = _mm512_ternarylogic_epi32(  // bits of 0x0F from the nibbles, the others from the fifth bits
          nibbles, _mm512_slli_epi16(_mm512_srlv_epi16(both(qh), halves(2 * g, 2 * g + 1)), 4), nibble, 0xE4);
    _mm512_store_si512(q + 64 * g, r);
  }
#elif defined(CPU_CAPABILITY_AVX2)
  const auto load = [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  const __m256i nibble = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  [[maybe_unused]] const __m256i h = FIFTH ? load(qh) : __m256i();
  for (int j = 0; j < 8; ++j) {
    const __m256i l = load(qs + 32 * (j / 2));
    __m256i r = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(l, 4) : l, nibble);
    if constexpr (FIFTH) {  // bit j to bit 4: what a 16-bit shift carries across a byte lands outside bit 4
      const __m256i top = j <= 4 ? _mm256_slli_epi16(h, 4 - j) : _mm256_srli_epi16(h, j - 4);
      r = _mm256_or_si256(r, _mm256_and_si256(top, bit4));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * j), r);
  }
#else
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 32; ++i) {
      const int l = qs[32 * (j / 2) + i];
      q[32 * j + i] = static_cast<uint8_t>((j % 2 ? l >> 4 : l & 15) | (FIFTH ? ((qh[i] >> j) & 1) << 4 : 0));
    }
#endif
}
// A Q4_K or Q5_K block's factors and its q as bytes (k_bytes).
struct KBytes {
  Factors f;
  alignas(64) uint8_t q[256];
};

// Q4_K {half d, dmin; uint8 scales[12], qs[128]}, 256 weights in eight sub-blocks of 32: sub-block j = 2g + s is
// the low (s = 0) or high (s = 1) nibbles of qs[32g .. 32g + 32]; weight (d·sc)·q - dmin·m.
// Each chunk takes its nibbles from qs on AVX-512 (a widening, a permute and, for the high ones, a shift; from bytes
// made once a block, as Q5_K, 1.01-1.12x the time), and elsewhere from the block's bytes (KBytes: a widening and the
// multiply-add), where each vector masked or shifted its own: under AVX2 one row 0.91-0.92x the time, eight
// 0.96-0.99x (in-process A/B, 2 threads, from L3).
struct Q4_K : Format<Q4_K> {
  static constexpr int64_t TYPE = 12, WEIGHTS = 256, BYTES = 144;
#if defined(CPU_CAPABILITY_AVX512)
  using Prep = Factors;
  static void prepare(const uint8_t* b, Prep& f) { f = k_factors(b); }
  static void chunk_with(const uint8_t* b, int j, Vec* w, const Prep& f) {
    const auto level = k_levels<4>(f, j);
    const uint8_t* qs = b + 16 + 32 * (j / 2);
    FOR_VECTORS(v) {
      const Ints u = u8(qs + S * v);
      w[v] = level(j % 2 ? high(u) : low4(u));
    }
  }
#else
  using Prep = KBytes;
  static void prepare(const uint8_t* b, Prep& p) {
    p.f = k_factors(b);
    k_bytes<false>(b + 16, nullptr, p.q);
  }
  static void chunk_with(const uint8_t*, int j, Vec* w, const Prep& p) {
    const auto level = k_levels<4>(p.f, j);
    FOR_VECTORS(v) w[v] = level(u8(p.q + 32 * j + S * v));
  }
#endif
};
// Q5_K {half d, dmin; uint8 scales[12], qh[32], qs[128]}: Q4_K's nibbles with a fifth bit, bit j of qh[i] for
// weight i of sub-block j. Each chunk takes its q from the block's bytes (KBytes, made once a block), where each
// vector assembled its own from qs and qh (two widenings, a shift or two and a select): in-process A/B, 2 threads,
// from L3, one row 0.97-0.98x the time on AVX-512, eight and sixteen 0.92-0.99x; under AVX2 one row 0.54x, eight and
// sixteen 0.82-0.84x.
struct Q5_K : Format<Q5_K> {
  static constexpr int64_t TYPE = 13, WEIGHTS = 256, BYTES = 176;
  using Prep = KBytes;
  static void prepare(const uint8_t* b, Prep& p) {
    p.f = k_factors(b);
    k_bytes<true>(b + 48, b + 16, p.q);
  }
  static void chunk_with(const uint8_t*, int j, Vec* w, const Prep& p) {
    const auto level = k_levels<5>(p.f, j);
    FOR_VECTORS(v) w[v] = level(u8(p.q + 32 * j + S * v));
  }
};
// The formats whose weights are a signed q times its sub-block of 16's factor (d·scale): Q6_K, Q3_K, and IQ4_XS but on
// AVX-512 (gguf_iquants.h). A block's 256 q are assembled once, as bytes (F::prepare, into Prep), and each chunk widens
// and converts its bytes.
template <class F>
struct SignedBytes : Format<F> {
  struct Prep {
    Factors f;
    alignas(64) int8_t q[256];  // weight w's q at w
  };
  static void chunk_with(const uint8_t*, int j, Vec* w, const Prep& p) {
    const uint8_t* q = reinterpret_cast<const uint8_t*>(p.q) + 32 * j;
    FOR_VECTORS(v) {
#if defined(CPU_CAPABILITY_AVX512)
      w[v] = p.f.times(2 * j + v, to_float(i8(q + S * v)));
#else  // Vec(f[k]), not at(k): eight rows of Q6_K 10% faster under AVX2, the reverse of Q4_K
      w[v] = Vec(p.f.f[2 * j + S * v / 16]) * to_float(i8(q + S * v));
#endif
    }
  }
};

// Q6_K {uint8 ql[128], qh[64]; int8 scales[16]; half d}, 256 weights in two halves of 128: weight 32t + i of half
// h (t = 0..3, i = 0..31) has its low four bits in ql[64h + 32(t % 2) + i] (low nibble for t < 2) and its top two
// in bits 2t of qh[32h + i]; q - 32 is scaled by (d·scales[w / 16]), the factors.
// A block's 256 q - 32 are assembled once, as bytes, 64 (or 32) at a time (prepare), and each chunk widens and
// converts its bytes: one widening a vector, where each vector's q took two (of its ql and qh bytes) and on AVX-512
// two table permutes, or under AVX2 five integer operations. The same float32 q - 32 times the same
// factor: the same weight. In-process A/B, 2 threads, from L3, time against that: AVX-512 one row 0.91-0.92x, eight
// and sixteen 0.94-0.95x; AVX2 one row 0.69-0.70x, eight 0.90-0.91x, sixteen 0.86-0.89x.
struct Q6_K : SignedBytes<Q6_K> {
  static constexpr int64_t TYPE = 14, WEIGHTS = 256, BYTES = 210;
  static void prepare(const uint8_t* b, Prep& p) {
    const float d = half(b + 208);
    p.f = factors<true>(bytes16(b + 192), d, d);
#if defined(CPU_CAPABILITY_AVX512)
    // Per half: t = 0 and 1 side by side in one register (ql's 64 bytes), t = 2 and 3 in another; each byte's top two
    // bits shifted to bits 4-5 (16-bit shifts, per half of the register, masked) and joined to its nibble by a select.
    const __m512i nibble = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30), bias = _mm512_set1_epi8(32);
    const __m512i up = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);    // t = 0 | 1
    const __m512i down = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);  // t = 2 | 3
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(b + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h)));
      const __m512i q01 = _mm512_ternarylogic_epi32(l, _mm512_and_si512(_mm512_sllv_epi16(qh, up), top), nibble, 0xE4);
      const __m512i q23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4),
                                                    _mm512_and_si512(_mm512_srlv_epi16(qh, down), top), nibble, 0xE4);
      _mm512_store_si512(p.q + 128 * h, _mm512_sub_epi8(q01, bias));
      _mm512_store_si512(p.q + 128 * h + 64, _mm512_sub_epi8(q23, bias));
    }
#elif defined(CPU_CAPABILITY_AVX2)
    const __m256i nibble = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30), bias = _mm256_set1_epi8(32);
    const auto join = [&](__m256i low, __m256i high) {  // (low & 0x0F) | (high & 0x30) - 32
      return _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(low, nibble), _mm256_and_si256(high, top)), bias);
    };
    for (int h = 0; h < 2; ++h) {
      const auto load = [&](int at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + at)); };
      const __m256i l0 = load(64 * h), l1 = load(64 * h + 32), qh = load(128 + 32 * h);
      int8_t* q = p.q + 128 * h;
      _mm256_store_si256(reinterpret_cast<__m256i*>(q), join(l0, _mm256_slli_epi16(qh, 4)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32), join(l1, _mm256_slli_epi16(qh, 2)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(q + 64), join(_mm256_srli_epi16(l0, 4), qh));
      _mm256_store_si256(reinterpret_cast<__m256i*>(q + 96), join(_mm256_srli_epi16(l1, 4), _mm256_srli_epi16(qh, 2)));
    }
#else
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 32; ++i) {
          const int l = b[64 * h + 32 * (t % 2) + i], top = (b[128 + 32 * h + i] >> (2 * t)) & 3;
          p.q[128 * h + 32 * t + i] = static_cast<int8_t>(((t < 2 ? l & 15 : l >> 4) | (top << 4)) - 32);
        }
#endif
  }
};

// Q3_K's sixteen 6-bit scales less 32, as signed bytes: scale k's low four bits in byte k % 8 (the high nibble for
// k >= 8), its top two in bits 2(k / 4) of byte 8 + k % 4. Unpacked a word (four scales) at a time, with llama.cpp's
// masks, where a loop over the scales took some hundred instructions a block.
inline Bytes16 q3_scales(const uint8_t* sc) {
  uint32_t u[3];
  std::memcpy(u, sc, 12);
  constexpr uint32_t four = 0x0f0f0f0f, two = 0x03030303;
  const uint32_t s[4] = {(u[0] & four) | ((u[2] & two) << 4), (u[1] & four) | (((u[2] >> 2) & two) << 4),
                         ((u[0] >> 4) & four) | (((u[2] >> 4) & two) << 4),
                         ((u[1] >> 4) & four) | (((u[2] >> 6) & two) << 4)};
  // Each byte s (0..63) less 32, mod 256 within its byte: s + 0x60 carries into no other byte, then bit 7 flipped.
  const auto less = [](uint32_t w) { return (w + 0x60606060u) ^ 0x80808080u; };
  const uint32_t q[4] = {less(s[0]), less(s[1]), less(s[2]), less(s[3])};
  return bytes16(q);
}

// Q3_K {uint8 hmask[32], qs[64], scales[12]; half d}, 256 weights in two halves of 128: weight 32t + i of half h
// (t = 0..3, i = 0..31) has its low two bits in bits 2t of qs[32h + i] and its third in bit 4h + t of hmask[i], and
// is q - 4 where that bit is clear; scaled by d·(scale - 32), a 6-bit scale for each 16 weights (q3_scales). As
// gguf-py's and llama.cpp's dequantizers: the float32 product (d·(scale - 32))·q.
struct Q3_K : SignedBytes<Q3_K> {
  static constexpr int64_t TYPE = 11, WEIGHTS = 256, BYTES = 110;
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t *hmask = b, *qs = b + 32;
    const float d = half(b + 108);
    p.f = factors<true>(q3_scales(b + 96), d, d);
#if defined(CPU_CAPABILITY_AVX512)
    // Two t side by side (each half of a register its own shift counts), as Q6_K: each byte's two bits at 2t and its
    // third moved to bit 2 (16-bit shifts: what crosses a byte lands outside the bits kept), joined, less 4.
    const auto both = [](const uint8_t* at) {
      return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
    };
    const auto halves = [](int a, int c) { return _mm512_inserti64x4(_mm512_set1_epi16(a), _mm256_set1_epi16(c), 1); };
    const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4), bits = both(hmask);
    for (int h = 0; h < 2; ++h) {
      const __m512i l = both(qs + 32 * h);
      for (int t = 0; t < 4; t += 2) {
        const int bit = 4 * h + t;  // and bit + 1 in the upper half
        const __m512i top = bit == 0 ? _mm512_sllv_epi16(bits, halves(2, 1))
                                     : _mm512_srlv_epi16(bits, halves(bit - 2, bit - 1));
        const __m512i q = _mm512_ternarylogic_epi32(_mm512_srlv_epi16(l, halves(2 * t, 2 * t + 2)),
                                                    _mm512_and_si512(top, four), three, 0xE4);
        _mm512_store_si512(p.q + 128 * h + 32 * t, _mm512_sub_epi8(q, four));
      }
    }
#elif defined(CPU_CAPABILITY_AVX2)
    // Each byte's two bits at 2t and its third moved to bit 2 (16-bit shifts: what crosses a byte lands outside the
    // bits kept), joined, less 4.
    const auto load = [](const uint8_t* at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)); };
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4), bits = load(hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i l = load(qs + 32 * h);
      for (int t = 0; t < 4; ++t) {
        const int bit = 4 * h + t;
        const __m256i top = bit >= 2 ? _mm256_srli_epi16(bits, bit - 2) : _mm256_slli_epi16(bits, 2 - bit);
        const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 2 * t), three),
                                          _mm256_and_si256(top, four));
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 128 * h + 32 * t), _mm256_sub_epi8(q, four));
      }
    }
#else
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 32; ++i) {
          const int low = (qs[32 * h + i] >> (2 * t)) & 3, third = (hmask[i] >> (4 * h + t)) & 1;
          p.q[128 * h + 32 * t + i] = static_cast<int8_t>((low | (third << 2)) - 4);
        }
#endif
  }
};

// Q2_K {uint8 scales[16], qs[64]; half d, dmin}, 256 weights in sixteen sub-blocks of 16: weight 32t + i of half h
// (t = 0..3, i = 0..31) is bits 2t of qs[32h + i]; sub-block k's scale and minimum the low and high nibbles of
// scales[k]; weight (d·scale)·q - dmin·minimum (exact_mul_sub: d·scale·q is exact), as gguf-py's dequantizer. A
// block's q as bytes and its 32 factors made once (prepare), each chunk a widening and one multiply-add a vector.
struct Q2_K : Format<Q2_K> {
  static constexpr int64_t TYPE = 10, WEIGHTS = 256, BYTES = 84;
  struct Prep {
    Factors scale, min;  // d·scale_k and dmin·minimum_k
    alignas(64) uint8_t q[256];
  };
  static void prepare(const uint8_t* b, Prep& p) {
    const uint8_t* qs = b + 16;
    uint32_t u[4];
    std::memcpy(u, b, 16);
    const uint32_t scales[4] = {u[0] & 0x0f0f0f0fu, u[1] & 0x0f0f0f0fu, u[2] & 0x0f0f0f0fu, u[3] & 0x0f0f0f0fu};
    const uint32_t mins[4] = {(u[0] >> 4) & 0x0f0f0f0fu, (u[1] >> 4) & 0x0f0f0f0fu, (u[2] >> 4) & 0x0f0f0f0fu,
                              (u[3] >> 4) & 0x0f0f0f0fu};
    const float d = half(b + 80), dmin = half(b + 82);
    p.scale = factors<false>(bytes16(scales), d, d);
    p.min = factors<false>(bytes16(mins), dmin, dmin);
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
    const __m256i three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
      for (int t = 0; t < 4; ++t)  // 16-bit shifts: what crosses a byte lands above the two bits kept
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 128 * h + 32 * t),
                           _mm256_and_si256(_mm256_srli_epi16(l, 2 * t), three));
    }
#else
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 32; ++i) p.q[128 * h + 32 * t + i] = (qs[32 * h + i] >> (2 * t)) & 3;
#endif
  }
  static void chunk_with(const uint8_t*, int j, Vec* w, const Prep& p) {
    FOR_VECTORS(v) {
      const int k = 2 * j + S * v / 16;
      w[v] = exact_mul_sub(Vec(p.scale.f[k]), to_float(u8(p.q + 32 * j + S * v)), Vec(p.min.f[k]));
    }
  }
};

}  // namespace gguf
