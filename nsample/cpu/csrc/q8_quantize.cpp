// Activation rows rounded to int8 for the int8-activation decode (q8_linear.cpp), as llama.cpp's Q8_0 and Q8_K:
// each block of 32 or 256 by itself, d = max|x| / 127 and q = nearbyint(x / d), with each 32's float sum and, for
// the K-quants' blocks of 256, each 16's sum of q beside. x86 AVX2 only, as the kernels.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "gguf_formats.h"
#include "linear.h"
#include "q8_formats.h"

#if defined(__AVX2__)
namespace {

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
inline void round32(const float* x, __m256 inv, int8_t* q, int16_t* s16) {
  __m256i v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), inv));
  s16[0] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(v[0], v[1])));
  s16[1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(v[2], v[3])));
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),  // packs work per 128-bit lane: put the 4-byte groups in order
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

}  // namespace
#endif

// x (M, K) float -> (q int8 (M, K), d (M, K / block), sum (float Σx per 32), qsum (int16 Σq per 16, llama.cpp's Q8_K
// bsums; block 256 only, else no columns)), each block by itself: d = max |x| / 127, q = nearbyint(x · 127 / max |x|)
// (0 for an all-zero block).
std::vector<at::Tensor> q8_quantize(const at::Tensor& x, int64_t block) {
  TORCH_CHECK(block == 32 || block == 256, "block: 32 or 256");
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous() && x.size(1) % block == 0,
              "x: contiguous float (M, K), K a multiple of ", block);
#if defined(__AVX2__)
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
    const float top = amax(b, block);
    const __m256 inv = _mm256_set1_ps(top > 0.0f ? 127.0f / top : 0.0f);
    dp[k] = top / 127.0f;
    for (int64_t at = block * k; at < block * (k + 1); at += 32) {  // each 32 of the block
      round32(xp + at, inv, qp + at, s16);
      const float* v = xp + at;
      sp[at / 32] = q8::hsum(_mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8)),
                                           _mm256_add_ps(_mm256_loadu_ps(v + 16), _mm256_loadu_ps(v + 24))));
      if (block == 256) std::copy_n(s16, 2, qsum.data_ptr<int16_t>() + at / 16);
    }
  }
  return {q, d, sum, qsum};
#else
  TORCH_CHECK(false, "int8 activations need x86 AVX2 (this build has no such kernel)");
#endif
}

// The block a type's activations are rounded in: 256 for the K-quants and IQ4_XS, else 32.
int64_t q8_block(int64_t type) {
  return type == gguf::Q2_K::TYPE || type == gguf::Q3_K::TYPE || type == gguf::Q4_K::TYPE ||
                 type == gguf::Q5_K::TYPE || type == gguf::Q6_K::TYPE || type == gguf::IQ4_XS::TYPE
             ? 256 : 32;
}
