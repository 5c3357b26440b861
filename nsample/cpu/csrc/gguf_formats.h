// The block formats of a GGUF file's tensors (llama.cpp's ggml-common.h block structs, little endian), each read
// to float32: a struct per format with its sizes, `chunk` (32 of a block's weights as float vectors, what the
// linear kernels multiply with) and `expand` (a whole block into memory), and `with_format`, from a ggml type id
// to a functor called with the format's struct. Here the plain and 32-weight formats; the K-quants in
// gguf_kquants.h, IQ4_NL, IQ4_XS and MXFP4 in gguf_iquants.h, the IQ formats below 4 bits in gguf_iq_grids.h, what they
// are all built of in gguf_block.h.
#pragma once
#include "gguf_block.h"
#include "gguf_iq_grids.h"
#include "gguf_iquants.h"
#include "gguf_kquants.h"

namespace gguf {

// F32, F16, BF16: plain values, read 32 at a time as one "block".
struct F32 : Format<F32> {
  static constexpr int64_t TYPE = 0, WEIGHTS = 32, BYTES = 128;
  static constexpr bool PLAIN = true;
  static void chunk(const uint8_t* b, int, Vec* w) {
    FOR_VECTORS(v) w[v] = Vec::loadu(b + 4 * S * v);
  }
};
struct F16 : Format<F16> {
  static constexpr int64_t TYPE = 1, WEIGHTS = 32, BYTES = 64;
  static constexpr bool PLAIN = true;
  static void chunk(const uint8_t* b, int, Vec* w) {
    FOR_VECTORS(v) at::vec::load_fp32_from_fp16(reinterpret_cast<const c10::Half*>(b) + S * v, w[v]);
  }
};
struct BF16 : Format<BF16> {  // the top half of a float32: exact
  static constexpr int64_t TYPE = 30, WEIGHTS = 32, BYTES = 64;
  static constexpr bool PLAIN = true;
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
#if defined(CPU_CAPABILITY_AVX2)
// Under AVX2 the eight lanes of a byte's bits, each 0 or 16, for each of the 256 bytes (8 KiB, kept in L1 by use).
struct FifthTable {
  alignas(32) int32_t lanes[256][8];
};
constexpr FifthTable fifth_table() {
  FifthTable t{};
  for (int b = 0; b < 256; ++b)
    for (int j = 0; j < 8; ++j) t.lanes[b][j] = ((b >> j) & 1) << 4;
  return t;
}
inline constexpr FifthTable FIFTH = fifth_table();
#endif

// Q5's fifth bits: bit i of a little-endian uint32, moved to bit 4 (for five). Lanes i0 .. i0 + S - 1.
inline Ints fifth_bits(const uint8_t* qh, int i0) {
#if defined(CPU_CAPABILITY_AVX2)  // the table's row of the lanes' byte (S = 8: i0 a multiple of 8)
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(FIFTH.lanes[qh[i0 / 8]]));
#else
  uint32_t h;
  std::memcpy(&h, qh, 4);
#if defined(CPU_CAPABILITY_AVX512)  // each lane's bit rotated into place, the others left
  return _mm512_rorv_epi32(_mm512_set1_epi32(static_cast<int>(h)), Ints::arange(i0 - 4, 1));
#else
  return ((Ints(static_cast<int32_t>(h)) >> Ints::arange(i0, 1)) & Ints(1)) << Ints(4);
#endif
#endif
}

// The 32-weight formats made of a block's fp16 scales d (and m) and its q's, F::weights(block, w, scales). Their
// chunks spread the scales in registers (halves, Spread), but for one row on AVX-512, where the tile prepares them
// in memory (Factors: stored once a block, Stored), each then the operand of its product (times). One row is bound by
// the shuffles' port there, where that saves two permutes: 11-20% faster (in-process A/B, 1 thread: Q4_0, Q4_1 0.80x,
// Q5_0 0.82x, Q5_1 0.89x). Prepared, two rows gained nothing, and four and eight were 20-25% and 9-13% slower
// (bound, it seems, by the loads and stores of their spilled accumulators, to which it adds). The same values either
// way: bitwise the same weights.
struct Spread {
  Vec d, m;
  Vec mul(const Vec& q) const { return d * q; }
  Vec mul_add(const Vec& q) const { return exact_mul_add(d, q, m); }
};
#if defined(CPU_CAPABILITY_AVX512)
struct Stored {  // d·q exact, so the product rounded, then the sum: exact_mul_add's value
  const Factors& f;
  Vec mul(const Vec& q) const { return f.times(0, q); }
  Vec mul_add(const Vec& q) const { return f.plus(f.times(0, q), 1); }
};
#endif
template <class F>
struct Scaled : Format<F> {
  static void chunk(const uint8_t* b, int, Vec* w) {
    Spread s;
    halves(b, s.d, s.m);
    F::weights(b, w, s);
  }
#if defined(CPU_CAPABILITY_AVX512)
  static constexpr int PREPARED_BELOW = 2;
  using Prep = Factors;
  static void prepare(const uint8_t* b, Prep& f) {  // f[0] = d, f[1] = m (or the next two bytes), exactly as half()
    int32_t bits;
    std::memcpy(&bits, b, 4);
    _mm_store_ps(f.f, _mm_cvtph_ps(_mm_cvtsi32_si128(bits)));
  }
  static void chunk_with(const uint8_t* b, int, Vec* w, const Prep& f) { F::weights(b, w, Stored{f}); }
#endif
};

// Q4_0 {half d; uint8 qs[16]}: d·(q - 8).
struct Q4_0 : Scaled<Q4_0> {
  static constexpr int64_t TYPE = 2, WEIGHTS = 32, BYTES = 18;
  template <class Sc>
  static void weights(const uint8_t* b, Vec* w, const Sc& s) {
    const auto level = levels<4>([&](const Ints& q) { return s.mul(to_float(q - Ints(8))); });
    FOR_VECTORS(v) w[v] = level(nibbles16(b + 2, S * v));
  }
};
// Q4_1 {half d, m; uint8 qs[16]}: d·q + m.
struct Q4_1 : Scaled<Q4_1> {
  static constexpr int64_t TYPE = 3, WEIGHTS = 32, BYTES = 20;
  template <class Sc>
  static void weights(const uint8_t* b, Vec* w, const Sc& s) {
    const auto level = levels<4>([&](const Ints& q) { return s.mul_add(to_float(q)); });
    FOR_VECTORS(v) w[v] = level(nibbles16(b + 4, S * v));
  }
};
// Q5_0 {half d; uint8 qh[4], qs[16]}: d·(q - 16), q's fifth bit from qh.
struct Q5_0 : Scaled<Q5_0> {
  static constexpr int64_t TYPE = 6, WEIGHTS = 32, BYTES = 22;
  template <class Sc>
  static void weights(const uint8_t* b, Vec* w, const Sc& s) {
    const auto level = levels<5>([&](const Ints& q) { return s.mul(to_float(q - Ints(16))); });
    FOR_VECTORS(v) w[v] = level(five(nibbles16(b + 6, S * v), fifth_bits(b + 2, S * v)));
  }
};
// Q5_1 {half d, m; uint8 qh[4], qs[16]}: d·q + m.
struct Q5_1 : Scaled<Q5_1> {
  static constexpr int64_t TYPE = 7, WEIGHTS = 32, BYTES = 24;
  template <class Sc>
  static void weights(const uint8_t* b, Vec* w, const Sc& s) {
    const auto level = levels<5>([&](const Ints& q) { return s.mul_add(to_float(q)); });
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
    case Q2_K::TYPE: return fn(Q2_K{});
    case Q3_K::TYPE: return fn(Q3_K{});
    case Q4_K::TYPE: return fn(Q4_K{});
    case Q5_K::TYPE: return fn(Q5_K{});
    case Q6_K::TYPE: return fn(Q6_K{});
    case IQ4_NL::TYPE: return fn(IQ4_NL{});
    case IQ4_XS::TYPE: return fn(IQ4_XS{});
    case MXFP4::TYPE: return fn(MXFP4{});
    case IQ1_S::TYPE: return fn(IQ1_S{});
    case IQ1_M::TYPE: return fn(IQ1_M{});
    case IQ2_XXS::TYPE: return fn(IQ2_XXS{});
    case IQ2_XS::TYPE: return fn(IQ2_XS{});
    case IQ2_S::TYPE: return fn(IQ2_S{});
    case IQ3_XXS::TYPE: return fn(IQ3_XXS{});
    case IQ3_S::TYPE: return fn(IQ3_S{});
    default: TORCH_CHECK(false, "GGUF tensor type ", type, " is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, ",
                         "Q5_1, Q8_0, Q2_K to Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, ",
                         "IQ4_XS, MXFP4 are)");
  }
}

// A row of K weights in the format's blocks: its bytes.
template <class F>
int64_t row_bytes(int64_t K) {
  TORCH_CHECK(K % F::WEIGHTS == 0, "GGUF type ", F::TYPE, ": rows of ", F::WEIGHTS, "-weight blocks, got K = ", K);
  return K / F::WEIGHTS * F::BYTES;
}

}  // namespace gguf
