// The vector math the decode layer's kernels share (decode_layer.cpp, attention.cpp), on torch's portable vector
// layer (at::vec::Vectorized<float>: W = 8 floats on AVX2, 16 on AVX-512, 4 on NEON): e^x, tanh, a vector's sum, a
// dot product, and on x86 the sums of W vectors at once.
#pragma once
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cstdint>
#include <functional>

namespace vmath {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t W = Vec::size();
static_assert(16 % W == 0, "head dims and widths are multiples of 16, so of every W");

// e^x lane by lane: Cephes' expf (x = n·ln2 + r, e^r by a degree-7 polynomial, times 2^n); relative error ~1e-7.
// Our own rather than Vectorized::exp (Sleef's, 1 ulp): inlined, no call, the same few ops on every instruction set.
// 2^n is built in a float's exponent bits, the int (n + 127)·2^23, so x is clamped to [-87, 88] where n stays in
// [-126, 127] and 2^n a normal float: e^-87 ≈ 1.6e-38 is nothing next to a softmax's sum of at least 1, and
// SiLU's 1 + e^-g rounds to 1 as it would.
inline Vec exp_vec(Vec x) {
  x = at::vec::clamp(x, Vec(-87.0f), Vec(88.0f));
  const Vec n = (x * Vec(1.44269504088896341f)).round();
  Vec r = at::vec::fnmadd(n, Vec(0.693359375f), x);  // x - n·ln2, ln2 in two parts
  r = at::vec::fnmadd(n, Vec(-2.12194440e-4f), r);
  Vec p(1.9875691500e-4f);
  p = at::vec::fmadd(p, r, Vec(1.3981999507e-3f));
  p = at::vec::fmadd(p, r, Vec(8.3334519073e-3f));
  p = at::vec::fmadd(p, r, Vec(4.1665795894e-2f));
  p = at::vec::fmadd(p, r, Vec(1.6666665459e-1f));
  p = at::vec::fmadd(p, r, Vec(5.0000001201e-1f));
  p = at::vec::fmadd(p, r * r, r) + Vec(1.0f);
  const Vec bits = at::vec::fmadd(n, Vec(8388608.0f), Vec(1065353216.0f));  // (n + 127)·2^23, exact in a float
  return p * at::vec::cast<float>(at::vec::convert_to_int_of_same_size(bits));  // exact: times a normal 2^n
}

// tanh(u) = 1 - 2 / (1 + e^2u) lane by lane, on exp_vec (±1 where e^2u saturates); absolute error ~1e-7.
inline Vec tanh_vec(Vec u) { return Vec(1.0f) - Vec(2.0f) / (Vec(1.0f) + exp_vec(u + u)); }

inline float sum(const Vec& v) { return at::vec::vec_reduce_all(std::plus<Vec>(), v); }

inline float dot(const float* a, const float* b, int64_t D) {  // D a multiple of W
  Vec acc(0.0f);
  for (int64_t i = 0; i < D; i += W) acc = at::vec::fmadd(Vec::loadu(a + i), Vec::loadu(b + i), acc);
  return sum(acc);
}

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
// The lane of lane_sums's result that its input i's sum lands in.
constexpr int lane_of(int i) { return W == 16 ? 4 * (i % 4) + i / 4 : 4 * (i % 2) + i / 2; }
// The sums of W vectors' lanes at once, a[i]'s in lane lane_of(i) of the result, each added exactly as vec_reduce_all adds
// one vector (lane i plus lane i ^ 8 on AVX-512, then ^ 4, ^ 2, ^ 1; float addition commutes), so each is sum(a[·])
// bitwise: the vectors go through each level side by side, two or four to a register, in 45 shuffles and adds for
// sixteen on AVX-512 (21 for eight on AVX2) where sixteen sum calls take 128.
inline Vec lane_sums(const Vec* a) {
#if defined(CPU_CAPABILITY_AVX512)
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i)  // ^8: lanes 0..7 a[2i]'s i + (i + 8), lanes 8..15 a[2i + 1]'s
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // ^4: 128-bit lane q holds a[4i + q]'s four
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i)  // ^2: 128-bit lane q holds a[8i + q]'s two, then a[8i + 4 + q]'s
    w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
  // ^1: lane 4q + e holds a[4e + q]'s sum
  return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
#else
  __m256 t[4], u[2];
  for (int i = 0; i < 4; ++i)  // ^4: the low 128 bits a[2i]'s four, the high a[2i + 1]'s
    t[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
  for (int i = 0; i < 2; ++i)  // ^2: low a[4i]'s two, a[4i + 2]'s two; high a[4i + 1]'s, a[4i + 3]'s
    u[i] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44), _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], 0xEE));
  // ^1: lane 4h + e holds a[2e + h]'s sum
  return _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], 0x88), _mm256_shuffle_ps(u[0], u[1], 0xDD));
#endif
}
#endif  // (NEON's sum is vaddvq_f32's pairwise order: there each score is a dot of its own)

}  // namespace vmath
