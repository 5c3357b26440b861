// The GGUF block formats read as small integers for a dot product with int8 activations (q8_linear.cpp). The
// 32-weight formats: each block as 32 bytes (unsigned nibbles or 5-bit values, or signed values: Q8_0's, and the
// levels of IQ4_NL's and MXFP4's tables), its float scale per lane of eight int32 sums, and the coefficient of the
// activations' plain sum (a format's minimum or offset):
//     Σ_i w_i·x_i ≈ Σ_lanes scale·dot(w, q)·d + min·Σ_i x_i   (x_i ≈ d·q_i, q int8, d per 32 weights)
// The K-quants, whose scales are integers within a 256-weight block, keep a whole block's sum in integers
// (q8_kquants.h).
// The same block layouts as gguf_formats.h, which reads them to float32; llama.cpp's AVX2 vec_dot kernels
// (ggml-cpu/arch/x86/quants.c) unpack them the same way. x86 (AVX2); on ARM64 q8_neon.h has them; elsewhere there
// are no int8-activation kernels, and asking for them is an error (gguf_linear.int8_activations).
#pragma once
#if defined(__AVX2__)
#include "q8_block.h"
#include "q8_kquants.h"

namespace q8 {

struct Q4_0 {  // d·(q - 8)
  static constexpr bool K = false, SIGNED = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    const float d = gguf::half(b);
    return {nibbles16(b + 2), _mm256_set1_ps(d), -8.0f * d};
  }
};
struct Q4_1 {  // d·q + m
  static constexpr bool K = false, SIGNED = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    return {nibbles16(b + 4), _mm256_set1_ps(gguf::half(b)), gguf::half(b + 2)};
  }
};
struct Q5_0 {  // d·(q - 16)
  static constexpr bool K = false, SIGNED = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    const float d = gguf::half(b);
    return {_mm256_or_si256(nibbles16(b + 6), fifth_bits(b + 2)), _mm256_set1_ps(d), -16.0f * d};
  }
};
struct Q5_1 {  // d·q + m
  static constexpr bool K = false, SIGNED = false, MIN = true;
  static Chunk chunk(const uint8_t* b, int) {
    return {_mm256_or_si256(nibbles16(b + 8), fifth_bits(b + 4)), _mm256_set1_ps(gguf::half(b)),
            gguf::half(b + 2)};
  }
};
struct Q8_0 {  // d·q, q signed
  static constexpr bool K = false, SIGNED = true, MIN = false;
  static Chunk chunk(const uint8_t* b, int) { return {load(b + 2), _mm256_set1_ps(gguf::half(b)), 0.0f}; }
};
struct IQ4_NL {  // d·KVALUES[q]
  static constexpr bool K = false, SIGNED = true, MIN = false;
  static Chunk chunk(const uint8_t* b, int) {
    return {levels16(gguf::KVALUES, b + 2), _mm256_set1_ps(gguf::half(b)), 0.0f};
  }
};
struct MXFP4 {  // 2^(e - 128)·MXFP4_LEVELS[q]
  static constexpr bool K = false, SIGNED = true, MIN = false;
  static Chunk chunk(const uint8_t* b, int) {
    return {levels16(gguf::MXFP4_LEVELS, b + 1), _mm256_broadcast_ss(&gguf::e8m0_half(b[0])), 0.0f};
  }
};

}  // namespace q8
#endif