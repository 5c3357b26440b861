// The K-quants and IQ4_XS read as small integers for the int8-activation kernels (q8_linear.cpp's ktile): 256 weights
// a block whose scales are integers, so a block's whole sum stays in integers (their `weights2` and `scale2`: two
// chunks at once, for 512-bit registers). The same block layouts as gguf_kquants.h and gguf_iquants.h.
#pragma once
#if defined(__AVX2__)
#include "q8_block.h"

namespace q8 {

// The K-quants, against activations rounded per 256 (llama.cpp's Q8_K, with Σq per 16 and Σx per 32 beside): a
// block's eight 32-weight chunks as unsigned bytes, each with its integer scale as 16 int16 lanes (lane k covers
// weights 2k, 2k + 1), so a block's sum stays an exact int32 until one float multiply by d. A block's scales are
// widened to int16 once (`scales`, both 128-bit halves alike) and each chunk's picked out of them by one byte shuffle,
// as llama.cpp's AVX2 kernels do, instead of a broadcast from memory per chunk. Q4_K's and Q5_K's minimums give the
// term -Σ_j (dmin·m_j)·Σx_j (`mins`, eight floats); Q6_K's offset the integer term -32·Σ_k s_k·Σq_k (`low`, its
// sixteen scales against the Σq per 16), so its bytes stay unsigned as well; Q3_K's alike, -4·Σ_k s_k·Σq_k.
struct KBlock {
  float d;
  __m256i scales[2];  // int16: Q4_K, Q5_K sub-block scales 0..7 in [0]; Q6_K's, Q3_K's sixteen: 0..7, 8..15
  __m256 mins;        // Q4_K, Q5_K: dmin·m_j for the eight 32s; Q2_K: dmin
  __m256i low;        // Q6_K, Q3_K: the sixteen scales as int16; Q2_K: its sixteen minimums
};
// The shuffle that spreads int16 lane `lo` of each half over the low half and lane `hi` over the high one.
inline __m256i lanes(int lo, int hi) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(0x0100 + 0x0202 * lo)),
                           _mm_set1_epi16(static_cast<short>(0x0100 + 0x0202 * hi)));
}
inline __m256i widen8(__m128i bytes) { return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes)); }
// The eight 6-bit scales and minimums (gguf::k_scales).
inline KBlock scales_mins(const uint8_t* b) {
  const __m128i both = gguf::k_scales(b);  // scales 0..7, minimums 0..7
  const __m128i mins = _mm_srli_si128(both, 8);
  return {gguf::half(b), {widen8(both), _mm256_setzero_si256()},
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mins)), _mm256_set1_ps(gguf::half(b + 2))),
          _mm256_setzero_si256()};
}
struct Q4_K {  // sub-block j: (d·sc)·q - dmin·m
  static constexpr bool K = true, SIGNED = false, MIN = true;
  static constexpr int OFFSET = 0;
  static KBlock block(const uint8_t* b) { return scales_mins(b); }
  static __m256i weights(const uint8_t* b, int j) { return bits(load(b + 16 + 32 * (j / 2)), 4 * (j % 2), 4, 0); }
  static __m256i scale(const KBlock& k, int j) { return _mm256_shuffle_epi8(k.scales[0], lanes(j, j)); }
#if defined(__AVX512BW__)
  static __m512i weights2(const uint8_t* b, int j) { return bits2(pair(load(b + 16 + 16 * j)), 0, 4, 4, 0); }
  static __m512i scale2(const __m512i* s, int j) { return _mm512_shuffle_epi8(s[0], lanes4(j, j, j + 1, j + 1)); }
#endif
};
struct Q5_K {  // Q4_K's nibbles with bit j of qh[i] as the fifth
  static constexpr bool K = true, SIGNED = false, MIN = true;
  static constexpr int OFFSET = 0;
  static KBlock block(const uint8_t* b) { return scales_mins(b); }
  static __m256i weights(const uint8_t* b, int j) {
    return _mm256_or_si256(bits(load(b + 48 + 32 * (j / 2)), 4 * (j % 2), 4, 0), bits(load(b + 16), j, 1, 4));
  }
  static __m256i scale(const KBlock& k, int j) { return _mm256_shuffle_epi8(k.scales[0], lanes(j, j)); }
#if defined(__AVX512BW__)
  static __m512i weights2(const uint8_t* b, int j) {
    return _mm512_or_si512(bits2(pair(load(b + 48 + 16 * j)), 0, 4, 4, 0), bits2(pair(load(b + 16)), j, j + 1, 1, 4));
  }
  static __m512i scale2(const __m512i* s, int j) { return _mm512_shuffle_epi8(s[0], lanes4(j, j, j + 1, j + 1)); }
#endif
};
struct Q6_K {  // d·scales[w / 16]·(q - 32), q's low four bits from ql and top two from qh (gguf_kquants.h); the
               // bytes here are q itself (0..63), the -32 is OFFSET
  static constexpr bool K = true, SIGNED = false, MIN = false;
  static constexpr int OFFSET = 32;
  static KBlock block(const uint8_t* b) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));  // sixteen int8 scales
    return {gguf::half(b + 208),
            {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(s)),
             _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(s, 8)))},
            _mm256_setzero_ps(), _mm256_cvtepi8_epi16(s)};
  }
  static __m256i weights(const uint8_t* b, int j) {
    const int h = j / 4, t = j % 4;
    const __m256i low = bits(load(b + 64 * h + 32 * (t % 2)), t < 2 ? 0 : 4, 4, 0);
    return _mm256_or_si256(low, bits(load(b + 128 + 32 * h), 2 * t, 2, 4));
  }
  // Chunk j's halves have scales 2j and 2j + 1.
  static __m256i scale(const KBlock& k, int j) {
    return _mm256_shuffle_epi8(k.scales[j / 4], lanes(2 * (j % 4), 2 * (j % 4) + 1));
  }
#if defined(__AVX512BW__)
  static __m512i weights2(const uint8_t* b, int j) {  // j even: chunks j, j + 1 are ql's 64 bytes from 64·(j / 4)
    const int h = j / 4, t = j % 4;
    const __m512i low = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(b + 64 * h), t < 2 ? 0 : 4),
                                         mask512(0x0F));
    return _mm512_or_si512(low, bits2(pair(load(b + 128 + 32 * h)), 2 * t, 2 * t + 2, 2, 4));
  }
  static __m512i scale2(const __m512i* s, int j) {
    const int t = 2 * (j % 4);
    return _mm512_shuffle_epi8(s[j / 4], lanes4(t, t + 1, t + 2, t + 3));
  }
#endif
};

struct Q3_K {  // d·(scale - 32)·(q - 4) (gguf_kquants.h), q's low two bits from qs and its third from hmask; the bytes
               // here are q itself (0..7), the -4 is OFFSET, the scales (less 32) signed as Q6_K's
  static constexpr bool K = true, SIGNED = false, MIN = false;
  static constexpr int OFFSET = 4;
  static KBlock block(const uint8_t* b) {
    const __m128i s = gguf::q3_scales(b + 96);
    return {gguf::half(b + 108),
            {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(s)),
             _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(s, 8)))},
            _mm256_setzero_ps(), _mm256_cvtepi8_epi16(s)};
  }
  static __m256i weights(const uint8_t* b, int j) {  // chunk j = 4h + t: bits 2t of qs[32h + i], bit 4h + t of hmask[i]
    const int h = j / 4, t = j % 4;
    return _mm256_or_si256(bits(load(b + 32 + 32 * h), 2 * t, 2, 0), bits(load(b), j, 1, 2));
  }
  static __m256i scale(const KBlock& k, int j) { return Q6_K::scale(k, j); }
#if defined(__AVX512BW__)
  static __m512i weights2(const uint8_t* b, int j) {  // j even: chunks j, j + 1 (t, t + 1 of half j / 4)
    const int h = j / 4, t = j % 4;
    return _mm512_or_si512(bits2(pair(load(b + 32 + 32 * h)), 2 * t, 2 * t + 2, 2, 0),
                           bits2(pair(load(b)), j, j + 1, 1, 2));
  }
  static __m512i scale2(const __m512i* s, int j) { return Q6_K::scale2(s, j); }
#endif
};

struct Q2_K {  // d·scale_k·q - dmin·minimum_k (gguf_kquants.h), q two bits of qs; the minimums' term is an integer
               // Σ_k minimum_k·Σq_k per block (MIN16, against each 16's Σq), times dmin (in `mins`) and the row's d
  static constexpr bool K = true, SIGNED = false, MIN = false, MIN16 = true;
  static constexpr int OFFSET = 0;
  static KBlock block(const uint8_t* b) {
    const __m128i both = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));  // scale low nibble, minimum high
    const __m128i scales = _mm_and_si128(both, _mm_set1_epi8(0x0F));
    const __m128i mins = _mm_and_si128(_mm_srli_epi16(both, 4), _mm_set1_epi8(0x0F));
    return {gguf::half(b + 80), {widen8(scales), widen8(_mm_srli_si128(scales, 8))},
            _mm256_set1_ps(gguf::half(b + 82)), _mm256_cvtepu8_epi16(mins)};
  }
  static __m256i weights(const uint8_t* b, int j) {  // chunk j = 4h + t: bits 2t of qs[32h + i]
    return bits(load(b + 16 + 32 * (j / 4)), 2 * (j % 4), 2, 0);
  }
  static __m256i scale(const KBlock& k, int j) { return Q6_K::scale(k, j); }
#if defined(__AVX512BW__)
  static __m512i weights2(const uint8_t* b, int j) {  // j even: chunks j, j + 1
    const int t = j % 4;
    return bits2(pair(load(b + 16 + 32 * (j / 4))), 2 * t, 2 * t + 2, 2, 0);
  }
  static __m512i scale2(const __m512i* s, int j) { return Q6_K::scale2(s, j); }
#endif
};
// IQ4_XS (gguf_iquants.h): sub-block j's weights d·(scale_j - 32)·KVALUES[q], its levels signed bytes (levels16,
// as IQ4_NL's) against the eight signed scales as int16: a K-quant whose bytes are SIGNED (q8_linear.cpp's ktile
// multiplies their magnitudes by the activations with the weights' signs).
struct IQ4_XS {
  static constexpr bool K = true, SIGNED = true, MIN = false;
  static constexpr int OFFSET = 0;
  static KBlock block(const uint8_t* b) {
    int64_t s = 0;
    for (int j = 0; j < 8; ++j) s |= static_cast<int64_t>(static_cast<uint8_t>(gguf::iq4_xs_scale(b, j))) << (8 * j);
    return {gguf::half(b), {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(s))),
                            _mm256_setzero_si256()},
            _mm256_setzero_ps(), _mm256_setzero_si256()};
  }
  static __m256i weights(const uint8_t* b, int j) { return levels16(gguf::KVALUES, b + 8 + 16 * j); }
  static __m256i scale(const KBlock& k, int j) { return Q4_K::scale(k, j); }
#if defined(__AVX512BW__)
  // Chunks j, j + 1: qs's 32 bytes as 128-bit lanes 0, 0, 1, 1, low nibbles in lanes 0 and 2, high in 1 and 3, each
  // a level by one shuffle of the table (two 256-bit chunks joined took 1.05-1.10x the time, in-process A/B).
  static __m512i weights2(const uint8_t* b, int j) {
    const __m512i qs = _mm512_castsi256_si512(load(b + 8 + 16 * j)), high = _mm512_set1_epi64(0x0004000400040004);
    const __m512i by = _mm512_mask_blend_epi64(0xCC, _mm512_setzero_si512(), high);  // 16-bit shifts: 0, 4, 0, 4
    const __m512i nibbles = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_i64x2(qs, qs, 0x50), by), mask512(0x0F));
    return _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(gguf::KVALUES))), nibbles);
  }
  static __m512i scale2(const __m512i* s, int j) { return Q4_K::scale2(s, j); }
#endif
};
// Whether a format's minimums go per 16 weights against Σq (Q2_K's), not per 32 against Σx.
template <class Q>
constexpr bool min16() {
  if constexpr (requires { Q::MIN16; }) {
    return Q::MIN16;
  } else {
    return false;
  }
}

}  // namespace q8
#endif
