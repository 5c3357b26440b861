// The int8-activation tiles on x86 (AVX2, and AVX-512 where built): rows r0 .. r0 + R - 1 of the rounded
// activations against one column's blocks (q8_linear.cpp's decode), on q8_formats.h's and q8_kquants.h's chunks.
#pragma once
#if defined(__AVX2__)
#include <immintrin.h>

#include <bit>

#include "gguf_formats.h"
#include "q8_formats.h"
#include "q8_rows.h"

namespace q8 {
namespace {  // internal linkage: only q8_linear.cpp includes this, and its kernels were inlined and laid out so

// Eight int32 lanes, lane k = Σ of u_i·s_i over bytes 4k .. 4k + 3 (u unsigned, s signed; pair sums stay within
// int16: u <= 63 against |s| <= 127, or |u| <= 128 against |s| <= 127 for the signed formats' magnitudes, so
// vpmaddubsw never saturates and VNNI's one instruction gives the same sums).
inline __m256i dot(const __m256i& u, const __m256i& s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// acc + the int16 pairs p times the int16 scales sc, pairwise summed (int32 lanes, exact): one instruction with VNNI.
inline __m256i madd_add(const __m256i& acc, const __m256i& p, const __m256i& sc) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, p, sc);
#elif defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(acc, p, sc);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}
#if defined(__AVX512BW__)
inline __m512i madd_add(const __m512i& acc, const __m512i& p, const __m512i& sc) {
#if defined(__AVX512VNNI__)
  return _mm512_dpwssd_epi32(acc, p, sc);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
}
#endif

// Keeps a sum's chunks added one after another: integer adds reassociate, and without this GCC computed all R x 8
// products of a block first and added them as a tree, spilling most of them to the stack (16 registers on AVX2;
// 8 rows of Q4_K and Q6_K 7-8% slower, A/B in one process on this Xeon). The sums are the same either way.
inline void in_order(__m256i& v) {
#if defined(__GNUC__)
  asm("" : "+x"(v));
#endif
}

// A tile's outputs: y[r, n] = Σ lanes of acc[r] + lin[r] (+ bias[n]).
template <int R>
void store(const __m256* acc, const float* lin, int64_t r0, int64_t n, float* y, int64_t ldy, const float* bias) {
  for (int r = 0; r < R; ++r) {
    const float v = q8::hsum(acc[r]) + lin[r];
    y[(r0 + r) * ldy + n] = bias ? v + bias[n] : v;
  }
}

// Rows r0 .. r0 + R - 1 against column n: per output, acc += dot·(scale·d) chunk by chunk, and lin += min·Σx, in
// order; then y = Σ lanes + lin (+ bias).
template <class Q, class F, int R>
void tile(const Rows& x, int64_t r0, const uint8_t* w, int64_t row, int64_t n, float* y, int64_t ldy,
          const float* bias) {
  __m256 acc[R];
  float lin[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), lin[r] = 0.0f;
  const int64_t KB = x.K / 32, nb = x.K / F::WEIGHTS;
  for (int64_t b = 0; b < nb; ++b) {
    gguf::prefetch<F>(w + (n + AHEAD) * row + b * F::BYTES);
#pragma GCC unroll 8
    for (int j = 0; j < F::WEIGHTS / 32; ++j) {
      const int64_t k = b * (F::WEIGHTS / 32) + j;
      const q8::Chunk ch = Q::chunk(w + n * row + b * F::BYTES, j);
      const __m256i u = Q::SIGNED ? _mm256_sign_epi8(ch.w, ch.w) : ch.w;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int64_t at = (r0 + r) * KB + k;
        __m256i s = q8::load(reinterpret_cast<const uint8_t*>(x.q) + 32 * at);
        if (Q::SIGNED) s = _mm256_sign_epi8(s, ch.w);
        const __m256 p = _mm256_cvtepi32_ps(dot(u, s));
        acc[r] = _mm256_fmadd_ps(p, _mm256_mul_ps(ch.scale, _mm256_set1_ps(x.d[at])), acc[r]);
        if (Q::MIN) lin[r] += ch.min * x.sum[at];
      }
    }
  }
  store<R>(acc, lin, r0, n, y, ldy, bias);
}

// The same for a K-quant against rows rounded per 256: a block's chunks summed in int32 with their integer scales
// (less Q6_K's offset, 32·Σ_k s_k·Σq_k), then acc += (sum·d)·d_x; for the formats with minimums, acc -= (dmin·m_j)·Σx_j
// lane by lane; y = Σ lanes of acc.
template <class Q, class F, int R>
void ktile(const Rows& x, int64_t r0, const uint8_t* w, int64_t row, int64_t n, float* y, int64_t ldy,
           const float* bias) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t nb = x.K / 256;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = w + n * row + b * F::BYTES;
    gguf::prefetch<F>(block + AHEAD * row);
    const q8::KBlock k = Q::block(block);
    __m256i sum[R];
#if defined(__AVX512BW__)
    const __m512i scales[2] = {_mm512_broadcast_i64x4(k.scales[0]), _mm512_broadcast_i64x4(k.scales[1])};
    __m512i sum2[R];
    for (int r = 0; r < R; ++r) sum2[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
      const __m512i w2 = Q::weights2(block, j), sc = Q::scale2(scales, j);
      const __m512i u = Q::SIGNED ? _mm512_abs_epi8(w2) : w2;  // signed weights: |w| against x with w's sign
      [[maybe_unused]] const __mmask64 negative = Q::SIGNED ? _mm512_movepi8_mask(w2) : 0;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i s = _mm512_loadu_si512(x.q + (r0 + r) * x.K + 256 * b + 32 * j);
        if constexpr (Q::SIGNED) s = _mm512_mask_sub_epi8(s, negative, _mm512_setzero_si512(), s);
        sum2[r] = madd_add(sum2[r], _mm512_maddubs_epi16(u, s), sc);
      }
    }
    for (int r = 0; r < R; ++r)
      sum[r] = _mm256_add_epi32(_mm512_castsi512_si256(sum2[r]), _mm512_extracti64x4_epi64(sum2[r], 1));
#else
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i w = Q::weights(block, j), sc = Q::scale(k, j);
      const __m256i u = Q::SIGNED ? _mm256_sign_epi8(w, w) : w;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256i s = q8::load(reinterpret_cast<const uint8_t*>(x.q) + (r0 + r) * x.K + 256 * b + 32 * j);
        if constexpr (Q::SIGNED) s = _mm256_sign_epi8(s, w);
        sum[r] = madd_add(sum[r], _mm256_maddubs_epi16(u, s), sc);
        in_order(sum[r]);
      }
    }
#endif
    const __m256 d = _mm256_set1_ps(k.d);
    for (int r = 0; r < R; ++r) {
      const int64_t at = (r0 + r) * nb + b;  // the row's block
      if constexpr (Q::OFFSET != 0) {  // OFFSET·Σ_k s_k·Σq_k (a power of two), pairwise in 8 lanes
        const __m256i low = _mm256_madd_epi16(q8::load(reinterpret_cast<const uint8_t*>(x.qsum + 16 * at)), k.low);
        sum[r] = _mm256_sub_epi32(sum[r], _mm256_slli_epi32(low, std::countr_zero(static_cast<unsigned>(Q::OFFSET))));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum[r]), d), _mm256_broadcast_ss(x.d + at), acc[r]);
      if (Q::MIN) acc[r] = _mm256_fnmadd_ps(k.mins, _mm256_loadu_ps(x.sum + 8 * at), acc[r]);
      if constexpr (q8::min16<Q>()) {  // Σ_k m_k·Σq_k, exact in int32, then times dmin and the row's d
        const __m256i m = _mm256_madd_epi16(q8::load(reinterpret_cast<const uint8_t*>(x.qsum + 16 * at)), k.low);
        acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(m), k.mins), _mm256_broadcast_ss(x.d + at), acc[r]);
      }
    }
  }
  float lin[R] = {};
  store<R>(acc, lin, r0, n, y, ldy, bias);
}

}  // namespace
}  // namespace q8
#endif
