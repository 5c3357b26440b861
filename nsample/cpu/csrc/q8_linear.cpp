// Decode-time linear layers on a GGUF file's blocks with int8 activations, as llama.cpp computes them: each activation
// row rounded to int8 (q8_quantize.cpp) (d = max|x| / 127, q = round(x / d)) in blocks of 32 for the 32-weight formats
// (llama.cpp's Q8_0) and of 256 for the K-quants (its Q8_K, with each 16's sum of q beside), integer dot products with
// the weights' small integers (vpmaddubsw, vpmaddwd; with VNNI, vpdpbusd and vpdpwssd), scaled in float once per 32
// weights, or for a K-quant once per 256 (q8_formats.h, q8_kquants.h). Where AVX-512 is built, a K-quant block goes
// two chunks of 32 an instruction (512-bit registers), which Intel's server cores run at twice the 256-bit rate. The
// weights are never expanded to float32, so a step costs some three instructions per 32 weights and row instead of
// the float kernel's (gguf_linear.cpp) expansion and a multiply-add per weight and row. Numbers: a row's activations
// are rounded (relative error about 0.4% per block), not its weights' expansion. Rows stay bitwise independent: each
// row is rounded by itself, integer sums are exact, and each output is one row's float sum over its chunks in a fixed
// order, whatever M and the other rows are.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "gguf_formats.h"
#include "linear.h"
#include "q8_formats.h"

#if defined(__AVX2__)
namespace {

constexpr int TILE = 8;    // activation rows per pass over a column's blocks
constexpr int GROUP = 4;   // columns per step of the column loop
constexpr int AHEAD = 4;   // columns: each block's loads ask for the same block this far ahead (gguf::prefetch)
// One column per tile: at one row, two or four side by side were slower here (Q4_K, 2048x5632: 0.77 against 0.42
// ms), as a K-quant block's sum is integer adds and a 32-weight format's chains are short.

struct Rows {  // q8_quantize's output: q (M, K) int8, d (M, K / block), sum (float Σx per 32), qsum (Σq per 16)
  const int8_t* q;
  const float* d;
  const float* sum;
  const int16_t* qsum;  // block 256
  int64_t K;
};

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

// A tile of the format's kind.
template <class Q, class F, int R>
void any_tile(const Rows& x, int64_t r0, const uint8_t* w, int64_t row, int64_t n, float* y, int64_t ldy,
              const float* bias) {
  if constexpr (Q::K) {
    ktile<Q, F, R>(x, r0, w, row, n, y, ldy, bias);
  } else {
    tile<Q, F, R>(x, r0, w, row, n, y, ldy, bias);
  }
}

// y (M rows, stride ldy) = x · Wᵀ (+ bias): columns split across threads GROUP at a time; in each group the rows
// go by in tiles of TILE, then 4, 2, 1.
template <class Q, class F>
void decode(const Rows& x, int64_t M, const uint8_t* w, int64_t N, float* y, int64_t ldy, const float* bias) {
  const int64_t row = gguf::row_bytes<F>(x.K);
  at::parallel_for(0, (N + GROUP - 1) / GROUP, 4, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t n = g * GROUP, cols = std::min<int64_t>(GROUP, N - n);
      for (int64_t r0 = 0; r0 < M;) {
        const int64_t left = M - r0;
        const auto run = [&](auto tile_rows) {
          constexpr int R = decltype(tile_rows)::value;
          for (int64_t c = 0; c < cols; ++c) any_tile<Q, F, R>(x, r0, w, row, n + c, y, ldy, bias);
          r0 += R;
        };
        if (left >= TILE) {
          run(std::integral_constant<int, TILE>());
        } else if (left >= 4) {
          run(std::integral_constant<int, 4>());
        } else if (left >= 2) {
          run(std::integral_constant<int, 2>());
        } else {
          run(std::integral_constant<int, 1>());
        }
      }
    }
  });
}

}  // namespace
#endif

bool q8_available() {
#if defined(__AVX2__)
  return true;
#else
  return false;
#endif
}

bool q8_readable(int64_t type) {
#if defined(__AVX2__)
  return q8::with_format(type, [](auto, auto) {});
#else
  (void)type;
  return false;
#endif
}

// y (M, N), a view with unit column stride, = the rows' product with blocks (N, row bytes) of a quantized type.
void gguf_decode_q8_into(const std::vector<at::Tensor>& xq, const at::Tensor& blocks, int64_t type, at::Tensor& y,
                         const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(xq.size() == 4, "xq: q8_quantize's (q, d, sum, qsum)");
  TORCH_CHECK(xq[0].size(1) == q8_block(type) * xq[1].size(1), "xq: rounded in blocks of ", q8_block(type),
              " for type ", type);
  TORCH_CHECK(blocks.dim() == 2 && blocks.scalar_type() == at::kByte && blocks.is_contiguous(), "blocks");
  const int64_t M = xq[0].size(0), K = xq[0].size(1), N = blocks.size(0);
  TORCH_CHECK(y.dim() == 2 && y.size(0) == M && y.size(1) == N && y.stride(1) == 1 && y.scalar_type() == at::kFloat,
              "y: float (M, N) with unit column stride");
  TORCH_CHECK(!bias.has_value() || (bias->numel() == N && bias->is_contiguous()), "bias: contiguous float (N,)");
#if defined(__AVX2__)
  const Rows x{xq[0].data_ptr<int8_t>(), xq[1].data_ptr<float>(), xq[2].data_ptr<float>(),
               xq[3].data_ptr<int16_t>(), K};
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const bool known = q8::with_format(type, [&](auto q, auto f) {
    using F = decltype(f);
    TORCH_CHECK(blocks.size(1) == gguf::row_bytes<F>(K), "blocks: ", blocks.size(1), " bytes a row, not K = ", K,
                " weights of type ", type);
    decode<decltype(q), F>(x, M, blocks.data_ptr<uint8_t>(), N, y.data_ptr<float>(), y.stride(0), bp);
  });
  TORCH_CHECK(known, "GGUF type ", type, " has no int8-activation kernel (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K, ",
              "IQ4_NL, IQ4_XS and MXFP4 do)");
#else
  TORCH_CHECK(false, "int8 activations need x86 AVX2 (this build has no such kernel)");
#endif
}

at::Tensor gguf_decode_q8_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                                 const c10::optional<at::Tensor>& bias) {
  auto y = at::empty({x.size(0), blocks.size(0)}, x.options());
  gguf_decode_q8_into(q8_quantize(x, q8_block(type)), blocks, type, y, bias);
  return y;
}
