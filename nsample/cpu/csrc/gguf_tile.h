// What the decode product's row tiles (gguf_linear.cpp) and the packing of their x (gguf_pack.cpp) share: the rows a
// tile takes, which tiles read x packed, and on AVX-512 the sums of a tile's eight accumulators at once.
#pragma once
#include "gguf_block.h"

namespace gguf {

// Rows of the activations per pass over a column's weights: 8, with one vector accumulator each per column (AVX2 and
// NEON have 16 registers; AVX-512's 32 take two columns at eight rows: columns in gguf_linear.cpp). On AVX-512
// sixteen rows as two tiles of eight, two columns each, were 1.15-1.35x as fast as one tile of sixteen taking one
// (in-process A/B, 1 thread, 16 and 32 rows, 2026-12-04), Q6_K's too since its pair loads each x vector once (stop
// 37: 0.79-0.90x the time of its tile of sixteen). A K-quant's tile of TILE rows reads x packed (gguf_pack_rows;
// packed, below).
constexpr int TILE = 8;

// Whether a tile of R rows reads x packed (gguf_pack_rows: each chunk of 32 columns of a tile's rows side by side, so
// that a chunk's vectors of all its rows lie at fixed offsets from one pointer) or as x holds its rows, K apart: packed
// for a K-quant's tile of TILE. Rows K apart, a K-quant's eight sub-blocks a block needed an address for each row's
// load: GCC kept the rows' offsets in registers and added the sub-block's offset to one before every load (128
// integer instructions a block of Q4_K at eight rows, beside 272 multiply-adds), or spilled them under AVX2's 16
// registers. Packed, eight and sixteen rows of Q4_K and Q6_K took 0.95-0.98x the time on AVX-512 and 0.84-0.94x
// under AVX2 (in-process A/B, 2 threads, from L3; the copy, once for all of a layer's parts, included). The
// 32-weight formats' loop, a chunk a block, keeps its row pointers: packed, Q4_1 took 1.02-1.07x the time.
template <class F, int R>
constexpr bool packed() {
  return R == TILE && F::WEIGHTS == 256;
}

#if defined(CPU_CAPABILITY_AVX512)
// The sums of eight accumulators' lanes, out[r] for a[r], each added exactly as vec_reduce_all adds one vector (lane
// i plus lane i ^ 8, then ^ 4, ^ 2, ^ 1, and lane 0 kept): the eight go through each level side by side, two or
// four to a register, in 23 instructions where eight vec_reduce_all calls take 64.
inline void reduce8(const Vec* a, float* out) {
  __m512 t[4], u[2];
  for (int i = 0; i < 4; ++i)  // t[i]: lane i < 8 holds a[2i]'s lanes i + (i + 8); lane 8 + i, a[2i + 1]'s
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int i = 0; i < 2; ++i)  // u[i]: 128-bit lane q holds a[4i + q]'s four sums of the next level
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
  const __m512 v = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x44), _mm512_shuffle_ps(u[0], u[1], 0xEE));
  const __m512 z = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));  // lane 4q: a[q]'s sum; 4q + 2: a[q + 4]'s
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, z);
  for (int q = 0; q < 4; ++q) {
    out[q] = lanes[4 * q];
    out[q + 4] = lanes[4 * q + 2];
  }
}
#endif

}  // namespace gguf
