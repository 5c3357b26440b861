// The decode product on a GGUF file's own quantized tensors (gguf_formats.h), read in the file's block layout with no
// float32 copy of the weights: each block expanded once for a tile of activation rows. Rows stay bitwise
// independent: each output is one row's float32 sum over K in a fixed order, whatever M and the other rows are.
// Expanding whole rows (dequantizing, an embedding lookup, prefill's GEMM tiles) is gguf_expand.cpp's.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

#include "gguf_formats.h"
#include "gguf_tile.h"
#include "linear.h"

using gguf::packed;
using gguf::S;
using gguf::TILE;
using gguf::V;
using gguf::Vec;

namespace {

constexpr int GROUP = 4;    // columns per step of the column loop
constexpr int AHEAD = 4;    // columns: the blocks asked for ahead of their loads (gguf::prefetch, burst below)
constexpr int SPAN = 16;    // groups whose accumulators are carried from one slice of K to the next
// Columns a tile of R rows computes side by side: at one or two rows, one column's sum is a chain of dependent
// multiply-adds whose latency, not the expansion, would bound the loop; two to four columns hide it. At four rows
// two, each x vector read once for both (tile), and at eight on AVX-512 (32 registers): four rows so took 0.88-0.95x
// the time of one column on AVX-512 (Q8_0 the same), 0.76-0.92x under AVX2 (in-process A/B, 2 threads, from memory),
// where eight rows keep one column (16 registers: 8 accumulators, a chunk's 4 weight vectors). NEON's four rows, not
// measured there, keep one.
constexpr int columns(int R) {
#if defined(CPU_CAPABILITY_AVX512)
  if (R >= 4) return 2;
#elif defined(CPU_CAPABILITY_AVX2)
  if (R == 4) return 2;
#endif
  return R >= 4 ? 1 : GROUP / R;
}

// Bytes of a row tile's slice of x, which every column reads again: two thirds of the L1 data cache (32 KiB of 48
// on a Xeon; 16384 before, which at 8 rows and K = 576 cut x into slices of 16 and 2 blocks and was 10-20% slower),
// the rest for the weights streaming through, where a tile reads x once for each column (AVX2's eight rows), a
// 32-weight format's four rows (their x K apart, read for two columns: 1.11-1.13x the time on half L2), or plain F32,
// F16 and BF16 rows (a hub model's checkpoint rows, 2 or 4 bytes a weight through L1 beside x). Since stop 57 those
// take L1's slices and steady requests (below), where they took half L2 and, from four rows up, bursts: in-process
// A/B, 2 threads, from memory, AVX-512, BF16 and F16 four rows 0.61-0.73x the time, eight 0.69-0.75x, sixteen
// 0.83-0.91x, two at K = 5632 0.72-0.77x, one the same; F32 0.52x, 0.84x, 0.73x; AVX2 four rows 0.74x, eight
// 0.87-0.93x. Other
// tiles read each x vector once for two to four columns (columns): they take half the L2 cache, so that a column's
// blocks are read as one run, not a slice's few blocks at a time (on Zen 4, 32 KiB of L1, x of 2048 floats went to
// eight rows of a K-quant in slices of two blocks), and x comes from L2 at a half or less the rate of the
// multiply-adds. In-process A/B, 2 threads, from memory, AVX-512: eight rows of the K-quants and IQ4_XS 0.66-0.90x the
// time, of Q4_0, Q4_1, Q5_0, IQ4_NL and MXFP4 0.86-0.94x, Q8_0 1.03x; four rows of Q4_K and Q6_K 0.89-0.97x; two rows
// 0.91-0.98x (AVX2 0.90-0.98x), one row of Q6_K at K = 5632 and 14336 0.93-0.97x (others, and AVX2's, 0.98-1.03x,
// the A/B's noise). Read by one column at a time (AVX2's eight rows), x from L2 made them 1.3-1.5x as slow. glibc
// reports the sizes; 32 KiB and 1 MiB are assumed where it does not.
template <class F, int R>
int64_t x_bytes() {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  static const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#else
  static const long l1 = 0, l2 = 0;
#endif
  constexpr bool wide = columns(R) > 1 && (R != 4 || F::WEIGHTS == 256) && !F::PLAIN;
  return wide ? (l2 > 0 ? l2 : 1 << 20) / 2 : (l1 > 0 ? l1 : 32768) * 2 / 3;
}

// An x vector loaded into a register of its own. In a pair of columns GCC otherwise folded the load into each
// multiply-add, reading every x vector twice, with an indexed address (which a fused multiply-add cannot keep as one
// micro-op), or spilled accumulators: eight rows 4-15% less time across the formats (2 threads, from L3; Q5_K, whose
// loop already loaded each once, the same), with Q6_K now paired too (stop 37, in-process A/B).
inline Vec held(const float* p) {
#if defined(CPU_CAPABILITY_AVX512)
  __m512 v = Vec::loadu(p);
  asm("" : "+v"(v));
  return v;
#else
  return Vec::loadu(p);
#endif
}

// One pass of a row tile over a slice of K, blocks [b0, b1), for one group of columns. Whole rows of x would
// not stay in L1 at 8 or 16 rows (16 × 2048 floats is 128 KiB), and every column reads them all again; a
// slice does. Each column's accumulators wait in `part` between slices, stored and loaded exactly, so the sums
// are the same whatever the slices.
struct Pass {
  const float* x;
  int64_t K;  // the tile's rows of x: packed, or K apart (packed)
  const uint8_t* w;
  int64_t row;  // the group's blocks, a column's bytes apart
  int64_t b0, b1;
  float* part;  // the group's accumulators: column c's row r at part[(c·R + r)·S]
  bool first, last;
  float* y;
  int64_t ldy;
  const float* bias;  // on the last slice: y[r·ldy + c] = the sum (+ bias[c])
};

// Whether a tile of R rows asks for each block AHEAD columns on as it loads the one before (gguf::prefetch), or
// rows() asks for a group's blocks of the slice all at once, into L2 (burst below). The steady requests made
// GCC spill the accumulators of the 32-weight formats' loops from four rows up (Q4_1 at eight: 34 stack accesses a
// block, from none), 20-38% slower. The K-quants take them at every size: the 1.1B Q4_K_M file's n=8 decoded 63
// tokens/s so against 58 with the bursts from eight rows up (benchmark.py, two rounds each, one after the other).
// The bursts went into L1 until stop 37: into L2, four and eight rows of Q4_1, Q8_0 and F16 took 2-9% less time
// from L3, the same from memory; with no requests at all, from memory, 1.2-1.5x as long (in-process A/B, 2 threads).
// Plain F32, F16 and BF16 rows take them at every size too (stop 57; x_bytes says what it gained): their loop has no
// scales to spill around.
template <class F>
constexpr bool steady(int R) {
  return F::WEIGHTS == 256 || R < 4 || F::PLAIN;
}
inline void burst(const uint8_t* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
  __builtin_prefetch(p + bytes - 1, 0, 2);
}

// Blocks whose shared parts (a K-quant's factors, and its q as bytes where it has them) a tile makes for a run of
// them before their chunks. Made between blocks, they had GCC keep the accumulators on the stack across each block
// (at eight rows on AVX-512, 16 stores and 16 reloads a block pair): made ahead, a loop over a block has fewer
// instructions, on AVX-512 at eight rows Q4_K 573 (21 on the stack) from 585 (67), Q6_K 577 from 676, Q5_K 594 from
// 665; under AVX2 Q4_K 429 from 497, Q6_K 409 from 603; at one row under AVX2 Q6_K 650 from 1258. In-process A/B, 2
// threads, from memory, time against before: AVX-512 eight rows 0.92-1.03x, four 0.91-0.96x; AVX2 eight rows
// 0.92-0.95x, four 0.95-1.0x; two rows 0.91-1.05x either. One row takes runs of four: its blocks stream from memory,
// and a run's blocks are read at its start, sooner after the requests for them (gguf::prefetch) than one at a time;
// with runs of eight the 49152-row Q6_K head took 1.02-1.04x the time on AVX-512, with four 0.97x (other shapes
// 0.89-0.97x; AVX2 0.80-0.94x, the head 0.90x). A run's parts are made in a loop of their own, then its blocks go by
// in another, where one loop over the blocks tested each one's place in its run: one row 0.94-1.0x the time on
// AVX-512 and 0.95-1.01x under AVX2, four and eight rows the same within the A/B's noise, 3-5% (stop 40, the two
// builds' order turned each round: the one timed first in a round had taken up to 10% longer at one row).
template <class F, int R>
constexpr int run() {
  return F::WEIGHTS == 256 ? (R == 1 ? 4 : 8) : 1;
}

// Chunk j of a block into w: from the block's prepared part (F::chunk_with) or from the block alone (F::chunk).
template <class F, bool PREPARED>
inline void expand(const uint8_t* block, int j, Vec* w, const typename F::Prep& prep) {
  if constexpr (PREPARED) {
    F::chunk_with(block, j, w, prep);
  } else {
    F::chunk(block, j, w);
  }
}

// Columns c0 .. c0 + C - 1 of a pass, for R rows. Per output: acc = fma(x, w, acc) over K's vectors in order,
// then vec_reduce_all's sum of the lanes (reduce8's, the same, for eight rows at once): the same for every R, C and
// slicing, so rows are bitwise independent.
template <class F, int R, int C>
void tile(const Pass& p, int c0) {
  constexpr bool PREPARED = R < F::PREPARED_BELOW;
  Vec acc[R][C];  // the unrolled loops below keep these in registers
  float* part = p.part + c0 * R * S;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = p.first ? Vec(0.0f) : Vec::loadu(part + (c * R + r) * S);
  // Block b's chunks, given its columns' shared parts.
  const auto block = [&](int64_t b, const typename F::Prep* prep) __attribute__((always_inline)) {
    if constexpr (steady<F>(R))
      for (int c = 0; c < C; ++c) gguf::prefetch<F>(p.w + (c0 + c + AHEAD) * p.row + b * F::BYTES);
    // The block's packed x, one register (the empty asm): GCC otherwise addressed each load as base + index, which a
    // multiply-add that takes its load (AVX2's one-column tiles) cannot keep as one micro-op: eight and sixteen rows of
    // the K-quants 0.93-0.97x the time under AVX2, the same on AVX-512 (in-process A/B, 2 threads).
    const float* xblock = packed<F, R>() ? p.x + b * F::WEIGHTS * R : p.x;
    if constexpr (packed<F, R>()) asm("" : "+r"(xblock));
#pragma GCC unroll 8  // a K-quant's eight sub-blocks: their factors' lanes and nibble picks resolved at compile time
    for (int j = 0; j < F::WEIGHTS / 32; ++j) {
      // x's chunk: packed, its rows 32 floats apart; else the rows' own, K apart (written so, GCC kept a pointer a row)
      const float* xb = packed<F, R>() ? xblock + 32 * R * j : p.x + b * F::WEIGHTS + 32 * j;
      const int64_t ld = packed<F, R>() ? 32 : p.K;
      if constexpr (C > 1 && R >= 4) {  // all columns' chunks, then each x vector once for all
        Vec wv[C][V];
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) expand<F, PREPARED>(p.w + (c0 + c) * p.row + b * F::BYTES, j, wv[c], prep[c]);
        FOR_VECTORS(v)
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const Vec xv = held(xb + r * ld + S * v);
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) acc[r][c] = at::vec::fmadd(xv, wv[c][v], acc[r][c]);
          }
      } else {
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          Vec wv[V];
          expand<F, PREPARED>(p.w + (c0 + c) * p.row + b * F::BYTES, j, wv, prep[c]);
          FOR_VECTORS(v)  // each weight vector to all rows, then dead: fewer registers live at once (AVX2 has 16)
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r)
              acc[r][c] = at::vec::fmadd(Vec::loadu(xb + r * ld + S * v), wv[v], acc[r][c]);
        }
      }
    }
  };
  constexpr int RUN = PREPARED ? run<F, R>() : 1;
  if constexpr (RUN > 1) {  // the K-quants: a run's shared parts, then its blocks, each in a loop of its own (run)
    typename F::Prep ahead[RUN][C];
    for (int64_t b0 = p.b0; b0 < p.b1; b0 += RUN) {
      const int64_t b1 = std::min<int64_t>(p.b1, b0 + RUN);
      for (int64_t b = b0; b < b1; ++b)
        for (int c = 0; c < C; ++c) F::prepare(p.w + (c0 + c) * p.row + b * F::BYTES, ahead[b - b0][c]);
      for (int64_t b = b0; b < b1; ++b) block(b, ahead[b - b0]);
    }
  } else {  // one block at a time: in the nested loops above, four rows of Q4_0, Q4_1 and Q8_0 took 1.33-1.43x the time
    for (int64_t b = p.b0; b < p.b1; ++b) {
      typename F::Prep here[C];  // each column's block's shared part, made here (a one-row Q4_1's d and m)
      if constexpr (PREPARED)
        for (int c = 0; c < C; ++c) F::prepare(p.w + (c0 + c) * p.row + b * F::BYTES, here[c]);
      block(b, here);
    }
  }
  if (!p.last) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c].store(part + (c * R + r) * S);
    return;
  }
  float sums[R][C];
  const auto plus = [](const Vec& a, const Vec& b) { return a + b; };
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (R % 8 == 0) {
    for (int c = 0; c < C; ++c)
      for (int r0 = 0; r0 < R; r0 += 8) {
        Vec eight[8];
        float out[8];
        for (int r = 0; r < 8; ++r) eight[r] = acc[r0 + r][c];
        gguf::reduce8(eight, out);
        for (int r = 0; r < 8; ++r) sums[r0 + r][c] = out[r];
      }
  } else
#endif
  {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) sums[r][c] = at::vec::vec_reduce_all<float>(plus, acc[r][c]);
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) p.y[r * p.ldy + c0 + c] = p.bias ? sums[r][c] + p.bias[c0 + c] : sums[r][c];
}

// A row tile of R rows against groups [g0, g1), slice by slice. A function of its own for each R: inlined into
// decode as GCC chose, one row of Q6_K took 4-7% longer after an unrelated change to the eight-row tile.
template <class F, int R>
__attribute__((noinline)) void rows(const float* x, int64_t K, const uint8_t* w, int64_t N, int64_t g0, int64_t g1,
                                    float* part, float* y, int64_t ldy, const float* bias) {
  const int64_t row = gguf::row_bytes<F>(K), nb = K / F::WEIGHTS;
  const int64_t most = std::max<int64_t>(1, x_bytes<F, R>() / (4 * R * F::WEIGHTS));
  const int64_t slices = (nb + most - 1) / most;
  const int64_t step = (nb + slices - 1) / slices;  // slices of even size, not full ones and a short last one
  for (int64_t b0 = 0; b0 < nb; b0 += step) {
    const int64_t b1 = std::min(nb, b0 + step);
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t n = g * GROUP, cols = std::min<int64_t>(GROUP, N - n);
      if constexpr (!steady<F>(R))
        for (int64_t a = n + AHEAD; a < std::min<int64_t>(N, n + AHEAD + GROUP); ++a)
          burst(w + a * row + b0 * F::BYTES, (b1 - b0) * F::BYTES);
      const Pass p{x, K, w + n * row, row, b0, b1, part + (g - g0) * GROUP * R * S, b0 == 0, b1 == nb,
                   y + n, ldy, bias ? bias + n : nullptr};
      if (cols == GROUP) {
        for (int c = 0; c < GROUP; c += columns(R)) tile<F, R, columns(R)>(p, c);
      } else {
        for (int c = 0; c < cols; ++c) tile<F, R, 1>(p, c);  // the end of N
      }
    }
  }
}

// y (M rows, stride ldy) = x (M, K) · Wᵀ (+ bias), W: N rows of blocks; tiles: x's tiles of TILE rows packed
// (gguf_pack_rows) where the format reads them so. Columns split across threads GROUP at a time, SPAN groups at
// once; for each span the rows go by in tiles of TILE, then 4, 2, 1.
template <class F>
void decode(const float* x, const float* tiles, int64_t M, int64_t K, const uint8_t* w, int64_t N, float* y,
            int64_t ldy, const float* bias) {
  at::parallel_for(0, (N + GROUP - 1) / GROUP, 4, [&](int64_t g0, int64_t g1) {
    std::vector<float> part(SPAN * GROUP * TILE * S);
    for (int64_t s0 = g0; s0 < g1; s0 += SPAN) {
      const int64_t s1 = std::min<int64_t>(g1, s0 + SPAN);
      for (int64_t r0 = 0; r0 < M;) {
        const int64_t left = M - r0;
        const auto run = [&](auto tile_rows) {
          constexpr int R = decltype(tile_rows)::value;
          rows<F, R>((packed<F, R>() ? tiles : x) + r0 * K, K, w, N, s0, s1, part.data(), y + r0 * ldy, ldy, bias);
          r0 += R;
        };
        if (left >= TILE) {
          run(std::integral_constant<int, TILE>());
        } else if (left >= 4) {
          run(std::integral_constant<int, 4>());
        } else if (left >= 2) {
          run(std::integral_constant<int, 2>());
        } else {
          run(std::integral_constant<int, 1>());
        }
      }
    }
  });
}

}  // namespace

void gguf_decode_into(const at::Tensor& x, const at::Tensor& tiles, const at::Tensor& blocks, int64_t type,
                      at::Tensor& y, const c10::optional<at::Tensor>& bias) {
  gguf_check_x(x, blocks, type, bias);
  const bool packs = gguf_packs_rows(type, x.size(0));
  TORCH_CHECK(!packs || !tiles.defined() ||
                  (tiles.scalar_type() == at::kFloat && tiles.is_contiguous() &&
                   tiles.sizes() == at::IntArrayRef({x.size(0) / TILE, x.size(1) / 32, TILE, 32})),
              "tiles: x's rows packed (gguf_pack_rows)");
  TORCH_CHECK(y.dim() == 2 && y.size(0) == x.size(0) && y.size(1) == blocks.size(0) && y.stride(1) == 1 &&
                  y.scalar_type() == at::kFloat,
              "y: float (M, N) with unit column stride");
  const at::Tensor packed_x = packs && !tiles.defined() ? gguf_pack_rows(x) : tiles;  // packed here if not given
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  gguf::with_format(type, [&](auto f) {
    decode<decltype(f)>(x.data_ptr<float>(), packs ? packed_x.data_ptr<float>() : nullptr, x.size(0), x.size(1),
                        blocks.data_ptr<uint8_t>(), blocks.size(0), y.data_ptr<float>(), y.stride(0), bp);
  });
}

at::Tensor gguf_decode_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                              const c10::optional<at::Tensor>& bias) {
  auto y = at::empty({x.size(0), blocks.size(0)}, x.options());
  gguf_decode_into(x, at::Tensor(), blocks, type, y, bias);
  return y;
}
