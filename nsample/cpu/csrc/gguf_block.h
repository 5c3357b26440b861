// What every GGUF block format (gguf_formats.h, gguf_kquants.h) is read with: the vector types, bytes widened to
// int32 lanes, fp16 scales, the tables of a block's values (Levels), the exact multiply-adds, and Format, the base
// of each format's struct.
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
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
// A block's two adjacent fp16 scales at p (d and m), exactly: one 4-byte broadcast and one vector conversion
// (vcvtph2ps, as half() uses), d in the even lanes and m in the odd ones.
inline Vec scale_pair(const uint8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, 4);
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_cvtph_ps(_mm256_set1_epi32(bits));
#else
  return _mm256_cvtph_ps(_mm_set1_epi32(bits));
#endif
}
#endif
// The same two scales, each broadcast to a vector: on x86 scale_pair and two in-lane permutes, where two half() calls
// and their broadcasts cost about twice the instructions.
inline void halves(const uint8_t* p, Vec& a, Vec& b) {
#if defined(CPU_CAPABILITY_AVX512)
  const __m512 v = scale_pair(p);
  a = _mm512_permute_ps(v, 0x00);
  b = _mm512_permute_ps(v, 0x55);
#elif defined(CPU_CAPABILITY_AVX2)
  const __m256 v = scale_pair(p);
  a = _mm256_permute_ps(v, 0x00);
  b = _mm256_permute_ps(v, 0x55);
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
#if defined(CPU_CAPABILITY_AVX512)
  Vec lo, hi;
  explicit Levels(Fn f) : lo(f(Ints::arange(0, 1))), hi(BITS == 5 ? f(Ints::arange(16, 1)) : lo) {}
  Vec operator()(const Ints& q) const {
    return BITS == 4 ? _mm512_permutexvar_ps(q, lo) : _mm512_permutex2var_ps(lo, q, hi);
  }
#else
  Fn fn;
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

// s·a, a + s and a - s on AVX-512 for a float s in memory (a block's factor or scale), s the operation's own
// memory operand, broadcast as it is read ({1to16}): Zen 4 runs a broadcast load (vbroadcastss, or GCC's vpermd of
// a register) on the port of the shuffles, which the weights' widenings and table permutes keep busy at one row, and
// an embedded broadcast on the load's own (a microbenchmark of 12 independent pairs: a table permute with either a
// broadcast load or a widening 2 cycles a pair, with a multiply-add or an embedded-broadcast product 1.45). In-process
// A/B, 2 threads, from memory, against broadcast loads: one row of Q4_K 0.78-0.81x the time, Q5_K 0.81x, Q6_K
// 0.83-0.85x, Q3_K 0.87x, Q4_1 0.85x, Q4_0 0.88x, Q5_1 0.96x, IQ4_XS 0.90x; two rows 0.87-0.93x (Q4_0, Q4_1, Q5_1
// the same); four to sixteen rows the same within the A/B's noise, but for Q6_K's eight, 1.02-1.04x (an unchanged
// copy of the old build 1.0-1.01x in the same run). Bitwise the same products. IQ4_NL's and MXFP4's tables
// (table_chunk) keep their scale's broadcast: as an operand, eight rows took 1.42-1.49x the time.
#if defined(CPU_CAPABILITY_AVX512)
inline Vec times(const float& s, const Vec& a) {
  __m512 r;
  asm("vmulps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(static_cast<__m512>(a)), "m"(s));
  return r;
}
inline Vec plus(const Vec& a, const float& s) {
  __m512 r;
  asm("vaddps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(static_cast<__m512>(a)), "m"(s));
  return r;
}
inline Vec minus(const Vec& a, const float& s) {
  __m512 r;
  asm("vsubps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(static_cast<__m512>(a)), "m"(s));
  return r;
}
#endif

// The weights stream through a linear kernel once per call, from memory or far caches, a few columns at a time: too
// many streams, each too short, for the hardware's prefetchers. So the kernels ask, as they load each block, for
// the same block a few columns on, into L2 (prefetcht1): a steady stream of requests. Asking for a whole group of
// columns at once, into L1, came in bursts that (at large K) evicted x. In-process A/B, 2 threads, AVX-512, time
// against that: the float kernel's one row of Q4_K 0.79-0.84x (5632x2048, 14336x4096; from memory 0.76x), of Q6_K
// 0.68-0.76x (from memory 0.60x), of Q4_1 and Q8_0 0.81-0.93x, two and four rows 0.84-0.91x (gguf_linear.cpp's
// steady says where it is not used); the int8-activation kernel's 0.55-0.87x at one to eight rows of Q4_K, Q6_K and
// Q8_0, 0.91-0.98x for Q4_1. A block's last line, where it straddles one, is the next block's first. (Past a
// tensor's end nothing is loaded: a prefetch does not fault.)
template <class F>
inline void prefetch(const uint8_t* block) {
  for (int64_t o = 0; o < F::BYTES; o += 64) __builtin_prefetch(block + o, 0, 2);
}

// Every format: WEIGHTS per block (32 or 256), BYTES per block; chunk_with(block, j, w, prep) puts the block's
// weights 32j .. 32j + 31 in w[0 .. V), given prepare(block, prep) once for the block: what its chunks share (Prep,
// the K-quants' factors; nothing in the other formats, whose chunk(block, j, w) stands alone); expand(block, out)
// writes all WEIGHTS.
template <class F>
struct Format {
  // Rows below which a tile prepares each block's shared part once (prepare, then chunk_with); from there on it calls
  // chunk alone (Scaled's formats, gguf_formats.h). Always, here.
  static constexpr int PREPARED_BELOW = 1 << 30;
  static constexpr bool PLAIN = false;  // F32, F16, BF16 rows (gguf_formats.h): no scales, 2-4 bytes a weight
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

}  // namespace gguf
