// The block formats of a GGUF file's tensors (llama.cpp's ggml-common.h block structs, little endian), each read
// to float32: a struct per format with its sizes, `chunk` (32 of a block's weights as float vectors, what the
// linear kernels multiply with) and `expand` (a whole block into memory), and `with_format`, from a ggml type id
// to a functor called with the format's struct.
// The float32 weights equal gguf-py's numpy dequantizers (gguf/quants.py) bitwise: the same float32 operations in
// the same order, never fused (the build has -ffp-contract=off), on exactly converted fp16 scales.
// Written on at::vec (Vec = Vectorized<float>: S = 8 floats on AVX2, 16 on AVX-512), compiled per instruction set.
#pragma once
#include <ATen/ATen.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cstdint>
#include <cstring>

namespace gguf {

using Vec = at::vec::Vectorized<float>;
using Ints = at::vec::Vectorized<int32_t>;
constexpr int S = Vec::size();
constexpr int V = 32 / S;  // vectors per chunk of 32 weights
static_assert(16 % S == 0, "a vector never straddles a half of 16 weights (Q4_0's nibbles, Q6_K's scales)");
// A loop over a chunk's V vectors, unrolled: constant offsets, the lanes' branches resolved, w kept in registers.
#define FOR_VECTORS(v) _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v)  // V <= 8: S >= 4

// S bytes from p, widened to S int32 lanes: one vpmovzxbd/vpmovsxbd on x86; elsewhere at::vec's generic convert.
inline Ints u8(const uint8_t* p) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  return at::vec::convert_to_int32<uint8_t>(p);
#else
  return at::vec::convert<int32_t>(at::vec::Vectorized<uint8_t>::loadu(p, S));
#endif
}
inline Ints i8(const uint8_t* p) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  return at::vec::convert_to_int32<int8_t>(reinterpret_cast<const int8_t*>(p));
#else
  return at::vec::convert<int32_t>(at::vec::Vectorized<int8_t>::loadu(p, S));
#endif
}
inline Vec to_float(const Ints& q) { return at::vec::convert<float>(q); }  // exact: |q| < 2^24
inline float half(const uint8_t* p) {  // an fp16 scale, exactly: F16C's scalar vcvtph2ps on x86 (Half's float()
  uint16_t bits;                       // there converts a whole zmm), exact bit arithmetic elsewhere
  std::memcpy(&bits, p, 2);
  return c10::detail::fp16_ieee_to_fp32_value(bits);
}
// A block's two adjacent fp16 scales (d and m), each broadcast to a vector, exactly: on x86 one 4-byte broadcast,
// one vector conversion (vcvtph2ps, as half() uses) and two in-lane permutes, where two half() calls and their
// broadcasts cost about twice the instructions.
inline void halves(const uint8_t* p, Vec& a, Vec& b) {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  int32_t bits;
  std::memcpy(&bits, p, 4);
#if defined(CPU_CAPABILITY_AVX512)
  const __m512 v = _mm512_cvtph_ps(_mm256_set1_epi32(bits));
  a = _mm512_permute_ps(v, 0x00);
  b = _mm512_permute_ps(v, 0x55);
#else
  const __m256 v = _mm256_cvtph_ps(_mm_set1_epi32(bits));
  a = _mm256_permute_ps(v, 0x00);
  b = _mm256_permute_ps(v, 0x55);
#endif
#else
  a = Vec(half(p));
  b = Vec(half(p + 2));
#endif
}
inline Ints low(const Ints& u) { return u & Ints(0x0F); }
inline Ints high(const Ints& u) {  // u < 256; an immediate shift on x86 (at::vec shifts by a vector of counts)
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_srli_epi32(u, 4);
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_srli_epi32(u, 4);
#else
  return u >> Ints(4);
#endif
}

// The weights a block's (or sub-block's) q of 4 or 5 bits stands for, fn(q) (Ints -> Vec). On AVX-512 a table of its
// 16 or 32 values, fn(0 .. 15) and fn(16 .. 31) made once, and each weight one lane permute of its q, where it took
// a conversion and a multiply-add (and a mask or two): the same float32 operations, so bitwise the same weights.
// One row of Q4_K 10-13% faster. A permute reads only an index's low 4 or 5 bits, so the q given need not be masked
// there (low4, five). Elsewhere (AVX2's permute has 8 lanes, NEON's none of floats) fn(q) itself.
template <int BITS, class Fn>
struct Levels {
  static_assert(BITS == 4 || BITS == 5);
  Fn fn;
#if defined(CPU_CAPABILITY_AVX512)
  Vec lo, hi;
  explicit Levels(Fn f) : fn(f), lo(f(Ints::arange(0, 1))), hi(BITS == 5 ? f(Ints::arange(16, 1)) : lo) {}
  Vec operator()(const Ints& q) const {
    return BITS == 4 ? _mm512_permutexvar_ps(q, lo) : _mm512_permutex2var_ps(lo, q, hi);
  }
#else
  explicit Levels(Fn f) : fn(f) {}
  Vec operator()(const Ints& q) const { return fn(q); }
#endif
};
template <int BITS, class Fn>
Levels<BITS, Fn> levels(Fn fn) {
  return Levels<BITS, Fn>(fn);
}
// A low nibble as a Levels index: bits above it are left where a table reads only the low bits.
inline Ints low4(const Ints& u) {
#if defined(CPU_CAPABILITY_AVX512)
  return u;
#else
  return low(u);
#endif
}
// A 5-bit q of a nibble (bits 0..3 of `nibble`; above them anything, from low4) and a fifth bit (bit 4 of `top`; on
// AVX-512 its other bits anything): one bitwise select there.
inline Ints five(const Ints& nibble, const Ints& top) {
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_ternarylogic_epi32(nibble, top, _mm512_set1_epi32(0x0F), 0xE4);  // bits of 0x0F from nibble, else top
#else
  return nibble | top;
#endif
}

// d·q + m as one fused multiply-add, for the formats whose d·q is exact in float32: the significand bits of d times
// those of q fit in 24 (Q4_1, Q5_1: an fp16 d's 11 and q <= 31's 5; Q4_K, Q5_K: fp16 d times a 6-bit scale, 17, and
// q's 5). It then rounds once, as gguf-py's d·q (exact) followed by + m (rounded) does: bitwise the same weight.
// d·q - m likewise (negating m for exact_mul_add made Q4_K's one-row decode 30-50% slower under AVX2).
inline Vec exact_mul_add(const Vec& d, const Vec& q, const Vec& m) { return at::vec::fmadd(d, q, m); }
inline Vec exact_mul_sub(const Vec& d, const Vec& q, const Vec& m) { return at::vec::fmsub(d, q, m); }

// Every format: WEIGHTS per block (32 or 256), BYTES per block; chunk_with(block, j, w, prep) puts the block's
// weights 32j .. 32j + 31 in w[0 .. V), given prepare(block, prep) once for the block: what its chunks share (Prep,
// the K-quants' factors; nothing in the other formats, whose chunk(block, j, w) stands alone); expand(block, out)
// writes all WEIGHTS.
template <class F>
struct Format {
  // Whether a tile of eight rows takes two columns at once on AVX-512 (gguf_linear.cpp's columns): 8-15% faster for
  // the formats whose chunks are a table read or a conversion; 1-3% slower for Q5_K and Q6_K, whose chunks need more
  // registers (in-process A/B, 2026-12-04).
  static constexpr bool PAIR_AT_8 = true;
  struct Prep {};
  static void prepare(const uint8_t*, Prep&) {}
  static void chunk_with(const uint8_t* b, int j, Vec* w, const Prep&) { F::chunk(b, j, w); }
  static void expand(const uint8_t* block, float* out) {
    typename F::Prep prep;
    F::prepare(block, prep);
    for (int j = 0; j < F::WEIGHTS / 32; ++j) {
      Vec w[V];
      F::chunk_with(block, j, w, prep);
      FOR_VECTORS(v) w[v].store(out + 32 * j + S * v);
    }
  }
};

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
};
// The factors as vector products on x86 (GCC made the scalar loop below into a byte-by-byte extraction there, which
// made one row of Q4_K 20% slower than computing each chunk's factors alone), as scalar ones elsewhere.
template <bool Signed>
inline Factors factors(const Bytes16& q, float a, float b) {
  Factors r;
#if defined(CPU_CAPABILITY_AVX512)
  const __m512i i = Signed ? _mm512_cvtepi8_epi32(q) : _mm512_cvtepu8_epi32(q);
  const __m512 ab = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b));
  _mm512_store_ps(r.f, _mm512_mul_ps(ab, _mm512_cvtepi32_ps(i)));
#elif defined(CPU_CAPABILITY_AVX2)
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
}

// F32, F16, BF16: plain values, read 32 at a time as one "block".
struct F32 : Format<F32> {
  static constexpr int64_t TYPE = 0, WEIGHTS = 32, BYTES = 128;
  static void chunk(const uint8_t* b, int, Vec* w) {
    FOR_VECTORS(v) w[v] = Vec::loadu(b + 4 * S * v);
  }
};
struct F16 : Format<F16> {
  static constexpr int64_t TYPE = 1, WEIGHTS = 32, BYTES = 64;
  static void chunk(const uint8_t* b, int, Vec* w) {
    FOR_VECTORS(v) at::vec::load_fp32_from_fp16(reinterpret_cast<const c10::Half*>(b) + S * v, w[v]);
  }
};
struct BF16 : Format<BF16> {  // the top half of a float32: exact
  static constexpr int64_t TYPE = 30, WEIGHTS = 32, BYTES = 64;
  static void chunk(const uint8_t* b, int, Vec* w) {
    FOR_VECTORS(v)
      at::vec::load_fp32_from_bf16(reinterpret_cast<const c10::BFloat16*>(b) + S * v, w[v]);
  }
};

// The 4-bit nibble of weight i of a 32-weight block packed in 16 bytes: i < 16 in byte i's low nibble, the rest in
// byte i - 16's high one. Lanes i0 .. i0 + S - 1.
inline Ints nibbles16(const uint8_t* qs, int i0) {
  const Ints u = u8(qs + i0 % 16);
  return i0 < 16 ? low4(u) : high(u);
}
// Q5's fifth bits: bit i of a little-endian uint32, moved to bit 4 (for five). Lanes i0 .. i0 + S - 1.
inline Ints fifth_bits(const uint8_t* qh, int i0) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
#if defined(CPU_CAPABILITY_AVX512)  // each lane's bit rotated into place, the others left
  return _mm512_rorv_epi32(_mm512_set1_epi32(static_cast<int>(h)), Ints::arange(i0 - 4, 1));
#else
  return ((Ints(static_cast<int32_t>(h)) >> Ints::arange(i0, 1)) & Ints(1)) << Ints(4);
#endif
}

// Q4_0 {half d; uint8 qs[16]}: d·(q - 8).
struct Q4_0 : Format<Q4_0> {
  static constexpr int64_t TYPE = 2, WEIGHTS = 32, BYTES = 18;
  static void chunk(const uint8_t* b, int, Vec* w) {
    const Vec d(half(b));
    const auto level = levels<4>([&](const Ints& q) { return d * to_float(q - Ints(8)); });
    FOR_VECTORS(v) w[v] = level(nibbles16(b + 2, S * v));
  }
};
// Q4_1 {half d, m; uint8 qs[16]}: d·q + m.
struct Q4_1 : Format<Q4_1> {
  static constexpr int64_t TYPE = 3, WEIGHTS = 32, BYTES = 20;
  static void chunk(const uint8_t* b, int, Vec* w) {
    Vec d, m;
    halves(b, d, m);
    const auto level = levels<4>([&](const Ints& q) { return exact_mul_add(d, to_float(q), m); });
    FOR_VECTORS(v) w[v] = level(nibbles16(b + 4, S * v));
  }
};
// Q5_0 {half d; uint8 qh[4], qs[16]}: d·(q - 16), q's fifth bit from qh.
struct Q5_0 : Format<Q5_0> {
  static constexpr int64_t TYPE = 6, WEIGHTS = 32, BYTES = 22;
  static void chunk(const uint8_t* b, int, Vec* w) {
    const Vec d(half(b));
    const auto level = levels<5>([&](const Ints& q) { return d * to_float(q - Ints(16)); });
    FOR_VECTORS(v) w[v] = level(five(nibbles16(b + 6, S * v), fifth_bits(b + 2, S * v)));
  }
};
// Q5_1 {half d, m; uint8 qh[4], qs[16]}: d·q + m.
struct Q5_1 : Format<Q5_1> {
  static constexpr int64_t TYPE = 7, WEIGHTS = 32, BYTES = 24;
  static void chunk(const uint8_t* b, int, Vec* w) {
    Vec d, m;
    halves(b, d, m);
    const auto level = levels<5>([&](const Ints& q) { return exact_mul_add(d, to_float(q), m); });
    FOR_VECTORS(v) w[v] = level(five(nibbles16(b + 8, S * v), fifth_bits(b + 4, S * v)));
  }
};
// Q8_0 {half d; int8 qs[32]}: q·d.
struct Q8_0 : Format<Q8_0> {
  static constexpr int64_t TYPE = 8, WEIGHTS = 32, BYTES = 34;
  static void chunk(const uint8_t* b, int, Vec* w) {
    const Vec d(half(b));
    FOR_VECTORS(v) w[v] = to_float(i8(b + 2 + S * v)) * d;
  }
};

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
// Bit j of each lane moved to bit 4 (Q5_K's fifth bits, for five): on AVX-512 one shift, the other bits left.
inline Ints top_bit(const Ints& u, int j) {
#if defined(CPU_CAPABILITY_AVX512)
  return j < 4 ? _mm512_slli_epi32(u, 4 - j) : j > 4 ? _mm512_srli_epi32(u, j - 4) : __m512i(u);
#else
  return ((u >> Ints(j)) & Ints(1)) << Ints(4);
#endif
}
// A Q4_K or Q5_K block's factors: d·sc_j at j and dmin·m_j at 8 + j, the same float32 products gguf-py computes.
inline Factors k_factors(const uint8_t* b) { return factors<false>(k_scales(b), half(b), half(b + 2)); }

// Q4_K {half d, dmin; uint8 scales[12], qs[128]}, 256 weights in eight sub-blocks of 32: sub-block j = 2g + s is
// the low (s = 0) or high (s = 1) nibbles of qs[32g .. 32g + 32]; weight (d·sc)·q - dmin·m.
struct Q4_K : Format<Q4_K> {
  static constexpr int64_t TYPE = 12, WEIGHTS = 256, BYTES = 144;
  using Prep = Factors;
  static void prepare(const uint8_t* b, Prep& f) { f = k_factors(b); }
  static void chunk_with(const uint8_t* b, int j, Vec* w, const Prep& f) {
    const Vec ds = f.at(j), dm = f.at(8 + j);
    const auto level = levels<4>([&](const Ints& q) { return exact_mul_sub(ds, to_float(q), dm); });
    const uint8_t* qs = b + 16 + 32 * (j / 2);
    FOR_VECTORS(v) {
      const Ints u = u8(qs + S * v);
      w[v] = level(j % 2 ? high(u) : low4(u));
    }
  }
};
// Q5_K {half d, dmin; uint8 scales[12], qh[32], qs[128]}: Q4_K's nibbles with a fifth bit, bit j of qh[i] for
// weight i of sub-block j.
struct Q5_K : Format<Q5_K> {
  static constexpr int64_t TYPE = 13, WEIGHTS = 256, BYTES = 176;
  static constexpr bool PAIR_AT_8 = false;
  using Prep = Factors;
  static void prepare(const uint8_t* b, Prep& f) { f = k_factors(b); }
  static void chunk_with(const uint8_t* b, int j, Vec* w, const Prep& f) {
    const Vec ds = f.at(j), dm = f.at(8 + j);
    const auto level = levels<5>([&](const Ints& q) { return exact_mul_sub(ds, to_float(q), dm); });
    const uint8_t* qs = b + 48 + 32 * (j / 2);
    FOR_VECTORS(v) {
      const Ints u = u8(qs + S * v), h = top_bit(u8(b + 16 + S * v), j);
      w[v] = level(five(j % 2 ? high(u) : low4(u), h));
    }
  }
};
// Q6_K {uint8 ql[128], qh[64]; int8 scales[16]; half d}, 256 weights in two halves of 128: weight 32t + i of half
// h (t = 0..3, i = 0..31) has its low four bits in ql[64h + 32(t % 2) + i] (low nibble for t < 2) and its top two
// in bits 2t of qh[32h + i]; q - 32 is scaled by (d·scales[w / 16]), the factors.
struct Q6_K : Format<Q6_K> {
  static constexpr int64_t TYPE = 14, WEIGHTS = 256, BYTES = 210;
  static constexpr bool PAIR_AT_8 = false;
  using Prep = Factors;
  static void prepare(const uint8_t* b, Prep& f) {
    const float d = half(b + 208);
    f = factors<true>(bytes16(b + 192), d, d);
  }
  static void chunk_with(const uint8_t* b, int j, Vec* w, const Prep& f) {
    const int h = j / 4, t = j % 4;
    const uint8_t* ql = b + 64 * h + 32 * (t % 2);
    const uint8_t* qh = b + 128 + 32 * h;
#if defined(CPU_CAPABILITY_AVX512)
    // q - 32 as (q's low four bits) + (16·its top two - 32), each read from a constant table of those exact integers
    // with one permute (which reads only index bits 0..3: the table of the top two repeats, so the next two bits need
    // no mask), where assembling q took five integer operations and a conversion. The same float32 q - 32 times the
    // same factor: the same weight. One row 13-15% faster, eight 5-6%.
    const Vec lows(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const Vec tops(_mm512_setr_ps(-32, -16, 0, 16, -32, -16, 0, 16, -32, -16, 0, 16, -32, -16, 0, 16));
    FOR_VECTORS(v) {
      const Ints u = u8(ql + S * v), h = u8(qh + S * v);
      const Vec q = Vec(_mm512_permutexvar_ps(t < 2 ? __m512i(u) : _mm512_srli_epi32(u, 4), lows)) +
                    Vec(_mm512_permutexvar_ps(_mm512_srli_epi32(h, 2 * t), tops));
      w[v] = Vec(f.f[2 * j + S * v / 16]) * q;
    }
#else
    FOR_VECTORS(v) {  // Vec(f[k]), not at(k): eight rows 10% faster under AVX2, the reverse of Q4_K
      const Ints u = u8(ql + S * v), top = ((u8(qh + S * v) >> Ints(2 * t)) & Ints(3)) << Ints(4);
      w[v] = Vec(f.f[2 * j + S * v / 16]) * to_float(((t < 2 ? low(u) : high(u)) | top) - Ints(32));
    }
#endif
  }
};

// Calls fn(Format{}) for a ggml type id; any other id is an error.
template <class Fn>
decltype(auto) with_format(int64_t type, Fn&& fn) {
  switch (type) {
    case F32::TYPE: return fn(F32{});
    case F16::TYPE: return fn(F16{});
    case BF16::TYPE: return fn(BF16{});
    case Q4_0::TYPE: return fn(Q4_0{});
    case Q4_1::TYPE: return fn(Q4_1{});
    case Q5_0::TYPE: return fn(Q5_0{});
    case Q5_1::TYPE: return fn(Q5_1{});
    case Q8_0::TYPE: return fn(Q8_0{});
    case Q4_K::TYPE: return fn(Q4_K{});
    case Q5_K::TYPE: return fn(Q5_K{});
    case Q6_K::TYPE: return fn(Q6_K{});
    default: TORCH_CHECK(false, "GGUF tensor type ", type, " is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, ",
                         "Q5_1, Q8_0, Q4_K, Q5_K, Q6_K are)");
  }
}

// A row of K weights in the format's blocks: its bytes.
template <class F>
int64_t row_bytes(int64_t K) {
  TORCH_CHECK(K % F::WEIGHTS == 0, "GGUF type ", F::TYPE, ": rows of ", F::WEIGHTS, "-weight blocks, got K = ", K);
  return K / F::WEIGHTS * F::BYTES;
}

}  // namespace gguf
