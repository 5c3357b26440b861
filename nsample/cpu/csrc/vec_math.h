// The vector math the decode layer's kernels share (decode_layer.cpp, attention.cpp), on torch's portable vector
// layer (at::vec::Vectorized<float>: W = 8 floats on AVX2, 16 on AVX-512, 4 on NEON): e^x, a vector's sum, a dot
// product.
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

inline float sum(const Vec& v) { return at::vec::vec_reduce_all(std::plus<Vec>(), v); }

inline float dot(const float* a, const float* b, int64_t D) {  // D a multiple of W
  Vec acc(0.0f);
  for (int64_t i = 0; i < D; i += W) acc = at::vec::fmadd(Vec::loadu(a + i), Vec::loadu(b + i), acc);
  return sum(acc);
}

}  // namespace vmath
