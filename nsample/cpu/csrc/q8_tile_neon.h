// The int8-activation tiles on ARM64 (NEON): rows r0 .. r0 + R - 1 of the rounded activations against one column's
// blocks (q8_linear.cpp's decode), on q8_neon.h's chunks, with the same sums as the x86 tiles (q8_tile_x86.h). Each
// 16 weights' products go into four int32 lanes: one sdot where the CPU has the dot product (ARMv8.2's, built as
// neondot and on every Apple silicon core), else a widening multiply and a pairwise add (any ARMv8). Both give the
// same integers; which lane holds which of them differs, so the two builds' float sums may differ in their last bits.
#pragma once
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include "gguf_formats.h"
#include "q8_neon.h"
#include "q8_rows.h"

namespace q8 {
namespace {  // internal linkage: only q8_linear.cpp includes this

// acc + the products of 16 signed bytes, four to a lane (sums within int16 per pair without the dot product:
// |w| <= 127 against |s| <= 127).
inline int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t s) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, w, s);
#else
  return vpadalq_s16(vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(s))), vmull_high_s8(w, s));
#endif
}

// A tile's outputs: y[r, n] = Σ lanes of acc[r] + lin[r] (+ bias[n]).
template <int R>
void store(const float32x4_t* acc, const float* lin, int64_t r0, int64_t n, float* y, int64_t ldy, const float* bias) {
  for (int r = 0; r < R; ++r) {
    const float v = vaddvq_f32(acc[r]) + lin[r];
    y[(r0 + r) * ldy + n] = bias ? v + bias[n] : v;
  }
}

// Rows against column n of a 32-weight format: per output, acc += dot·(scale·d) chunk by chunk, and lin += min·Σx, in
// order; then y = Σ lanes + lin (+ bias).
template <class Q, class F, int R>
void tile(const Rows& x, int64_t r0, const uint8_t* w, int64_t row, int64_t n, float* y, int64_t ldy,
          const float* bias) {
  float32x4_t acc[R];
  float lin[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f), lin[r] = 0.0f;
  const int64_t KB = x.K / 32, nb = x.K / F::WEIGHTS;
  for (int64_t b = 0; b < nb; ++b) {
    gguf::prefetch<F>(w + (n + AHEAD) * row + b * F::BYTES);
    for (int j = 0; j < F::WEIGHTS / 32; ++j) {
      const int64_t k = b * (F::WEIGHTS / 32) + j;
      const Chunk ch = Q::chunk(w + n * row + b * F::BYTES, j);
      for (int r = 0; r < R; ++r) {
        const int64_t at = (r0 + r) * KB + k;
        const int8_t* s = x.q + 32 * at;
        const int32x4_t p = dot16(dot16(vdupq_n_s32(0), ch.w[0], vld1q_s8(s)), ch.w[1], vld1q_s8(s + 16));
        acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(p), vdupq_n_f32(ch.scale * x.d[at]));
        if constexpr (Q::MIN) lin[r] += ch.min * x.sum[at];
      }
    }
  }
  store<R>(acc, lin, r0, n, y, ldy, bias);
}

// The same for a K-quant against rows rounded per 256: a block's 16s summed in int32 with their integer scales, then
// acc += (sum·d)·d_x; Q4_K's and Q5_K's minimums acc -= (dmin·m_j)·Σx_j, Q2_K's acc -= (Σ_k m_k·Σq_k·dmin)·d_x.
template <class Q, class F, int R>
void ktile(const Rows& x, int64_t r0, const uint8_t* w, int64_t row, int64_t n, float* y, int64_t ldy,
           const float* bias) {
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
  const int64_t nb = x.K / 256;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = w + n * row + b * F::BYTES;
    gguf::prefetch<F>(block + AHEAD * row);
    const KBlock k = Q::block(block);
    int32x4_t sum[R];
    for (int r = 0; r < R; ++r) sum[r] = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
      int8x16_t q[2];
      Q::weights(block, j, q);
      for (int r = 0; r < R; ++r) {
        const int8_t* s = x.q + (r0 + r) * x.K + 256 * b + 32 * j;
        if constexpr (Q::PER16) {
          sum[r] = vmlaq_n_s32(sum[r], dot16(vdupq_n_s32(0), q[0], vld1q_s8(s)), k.scales[2 * j]);
          sum[r] = vmlaq_n_s32(sum[r], dot16(vdupq_n_s32(0), q[1], vld1q_s8(s + 16)), k.scales[2 * j + 1]);
        } else {
          const int32x4_t p = dot16(dot16(vdupq_n_s32(0), q[0], vld1q_s8(s)), q[1], vld1q_s8(s + 16));
          sum[r] = vmlaq_n_s32(sum[r], p, k.scales[2 * j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const int64_t at = (r0 + r) * nb + b;  // the row's block
      acc[r] = vfmaq_n_f32(acc[r], vmulq_n_f32(vcvtq_f32_s32(sum[r]), k.d), x.d[at]);
      if constexpr (Q::MIN) {
        acc[r] = vfmsq_f32(acc[r], vld1q_f32(k.mins), vld1q_f32(x.sum + 8 * at));
        acc[r] = vfmsq_f32(acc[r], vld1q_f32(k.mins + 4), vld1q_f32(x.sum + 8 * at + 4));
      }
      if constexpr (Q::MIN16) {  // Σ_k m_k·Σq_k, exact in int32, then times dmin and the row's d
        const int16_t* qs = x.qsum + 16 * at;
        int32x4_t m = vmull_s16(vld1_s16(k.low), vld1_s16(qs));
        for (int i = 4; i < 16; i += 4) m = vmlal_s16(m, vld1_s16(k.low + i), vld1_s16(qs + i));
        acc[r] = vfmsq_n_f32(acc[r], vmulq_n_f32(vcvtq_f32_s32(m), k.dmin), x.d[at]);
      }
    }
  }
  const float lin[R] = {};
  store<R>(acc, lin, r0, n, y, ldy, bias);
}

}  // namespace
}  // namespace q8
#endif
