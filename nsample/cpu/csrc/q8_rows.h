// The activation rows rounded to int8 (q8_quantize.cpp's output) as the int8-activation tiles read them
// (q8_tile_x86.h, q8_tile_neon.h), and the tiles' sizes (q8_linear.cpp).
#pragma once
#include <cstdint>

#if defined(__AVX2__)
#define NSAMPLE_Q8_X86 1  // q8_tile_x86.h
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define NSAMPLE_Q8_NEON 1  // q8_tile_neon.h
#endif

namespace q8 {

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

}  // namespace q8
