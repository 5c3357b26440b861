// Activation rows rounded to int8 for the int8-activation decode (q8_linear.cpp), as llama.cpp's Q8_0 and Q8_K:
// each block of 32 or 256 by itself, d = max|x| / 127 and q = nearbyint(x / d), with each 32's float sum and, for
// the K-quants' blocks of 256, each 16's sum of q beside. x86 AVX2 and ARM64 NEON, as the kernels.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "gguf_formats.h"
#include "linear.h"
#include "q8_formats.h"
#include "q8_neon.h"
#include "q8_rows.h"

namespace {

#if defined(NSAMPLE_Q8_X86)
inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}

inline float amax(const float* x, int n) {  // max |x_i|, n a multiple of 8
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

// 32 floats times inv, rounded to the nearest integer (ties to even, as nearbyint) into 32 int8 at q; the sums of
// the first and the second 16 of them into s16[0], s16[1].
inline void round32(const float* x, float times, int8_t* q, int16_t* s16) {
  const __m256 inv = _mm256_set1_ps(times);
  __m256i v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), inv));
  s16[0] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(v[0], v[1])));
  s16[1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(v[2], v[3])));
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),  // packs work per 128-bit lane: put the 4-byte groups in order
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

inline float sum32(const float* v) {  // 32 floats' sum, in a fixed order
  return q8::hsum(_mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8)),
                                _mm256_add_ps(_mm256_loadu_ps(v + 16), _mm256_loadu_ps(v + 24))));
}
#elif defined(NSAMPLE_Q8_NEON)
inline float amax(const float* x, int n) {  // max |x_i|, n a multiple of 4
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int i = 0; i < n; i += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + i)));
  return vmaxvq_f32(m);
}

// As x86's: vcvtnq rounds to the nearest integer, ties to even; vqmovn narrows as packs do.
inline void round32(const float* x, float times, int8_t* q, int16_t* s16) {
  int32x4_t v[8];
  for (int i = 0; i < 8; ++i) v[i] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4 * i), times));
  for (int h = 0; h < 2; ++h) {
    const int32x4_t* u = v + 4 * h;
    s16[h] = static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(u[0], u[1]), vaddq_s32(u[2], u[3]))));
    const int16x8_t a = vcombine_s16(vqmovn_s32(u[0]), vqmovn_s32(u[1]));
    const int16x8_t b = vcombine_s16(vqmovn_s32(u[2]), vqmovn_s32(u[3]));
    vst1q_s8(q + 16 * h, vcombine_s8(vqmovn_s16(a), vqmovn_s16(b)));
  }
}

inline float sum32(const float* v) {  // 32 floats' sum, in a fixed order
  float32x4_t s[2];
  for (int h = 0; h < 2; ++h)
    s[h] = vaddq_f32(vaddq_f32(vld1q_f32(v + 4 * h), vld1q_f32(v + 4 * h + 8)),
                     vaddq_f32(vld1q_f32(v + 4 * h + 16), vld1q_f32(v + 4 * h + 24)));
  return vaddvq_f32(vaddq_f32(s[0], s[1]));
}
#endif

}  // namespace

// x (M, K) float -> (q int8 (M, K), d (M, K / block), sum (float Σx per 32), qsum (int16 Σq per 16, llama.cpp's Q8_K
// bsums; block 256 only, else no columns)), each block by itself: d = max |x| / 127, q = nearbyint(x · 127 / max |x|)
// (0 for an all-zero block).
std::vector<at::Tensor> q8_quantize(const at::Tensor& x, int64_t block) {
  TORCH_CHECK(block == 32 || block == 256, "block: 32 or 256");
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous() && x.size(1) % block == 0,
              "x: contiguous float (M, K), K a multiple of ", block);
#if defined(NSAMPLE_Q8_X86) || defined(NSAMPLE_Q8_NEON)
  const int64_t M = x.size(0), K = x.size(1), blocks = M * K / block;
  auto q = at::empty({M, K}, x.options().dtype(at::kChar));
  auto d = at::empty({M, K / block}, x.options());
  auto sum = at::empty({M, K / 32}, x.options());
  auto qsum = at::empty({M, block == 256 ? K / 16 : 0}, x.options().dtype(at::kShort));
  const float* xp = x.data_ptr<float>();
  int8_t* qp = q.data_ptr<int8_t>();
  float *dp = d.data_ptr<float>(), *sp = sum.data_ptr<float>();
  int16_t s16[2];
  for (int64_t k = 0; k < blocks; ++k) {
    const float* b = xp + block * k;
    const float top = amax(b, block), inv = top > 0.0f ? 127.0f / top : 0.0f;
    dp[k] = top / 127.0f;
    for (int64_t at = block * k; at < block * (k + 1); at += 32) {  // each 32 of the block
      round32(xp + at, inv, qp + at, s16);
      sp[at / 32] = sum32(xp + at);
      if (block == 256) std::copy_n(s16, 2, qsum.data_ptr<int16_t>() + at / 16);
    }
  }
  return {q, d, sum, qsum};
#else
  TORCH_CHECK(false, "int8 activations need x86 AVX2 or ARM64 NEON (this build has no such kernel)");
#endif
}

// The block a type's activations are rounded in: 256 for the K-quants and IQ4_XS, else 32.
int64_t q8_block(int64_t type) {
  return type == gguf::Q2_K::TYPE || type == gguf::Q3_K::TYPE || type == gguf::Q4_K::TYPE ||
                 type == gguf::Q5_K::TYPE || type == gguf::Q6_K::TYPE || type == gguf::IQ4_XS::TYPE
             ? 256 : 32;
}
