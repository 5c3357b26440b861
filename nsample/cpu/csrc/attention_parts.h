// The arithmetic of a query's attention (attention.cpp): its scores against a run of keys, their softmax, and the
// weighted sum of the values, each on torch's portable vector layer (vec_math.h) and for several queries at once where
// they share their keys or values, every query's numbers those of it computed alone.
#pragma once
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "vec_math.h"

namespace attn {

using vmath::dot;
using vmath::exp_vec;
using vmath::sum;
using vmath::Vec;
using vmath::W;

// A (P, D) run of keys or values at `base`, position j at base + j·step (a head of a prompt's or a cohort's KV).
struct Run {
  float* base;
  int64_t step, length;
};

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
// The scores of W positions of a run from k (position j at k + j·step), into s[0, W): position p's accumulator is
// lane_sums's input i with lane_of(i) = p, its chain over D's DV vectors as dot's (DV = 0: D / W, not known at compile
// time). Positions from n on repeat position n - 1's sum (TAIL), never read past the run.
template <int DV, bool TAIL>
inline void score_block(const float* q, const float* k, int64_t step, int64_t n, int64_t D, float* s) {
  Vec acc[W];
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) {
    const int64_t p = TAIL ? std::min<int64_t>(vmath::lane_of(i), n - 1) : vmath::lane_of(i);
    const float* kp = k + p * step;
    Vec a(0.0f);
    if constexpr (DV > 0) {
#pragma GCC unroll 16
      for (int d = 0; d < DV; ++d) a = at::vec::fmadd(Vec::loadu(q + d * W), Vec::loadu(kp + d * W), a);
    } else {
      for (int64_t d = 0; d < D; d += W) a = at::vec::fmadd(Vec::loadu(q + d), Vec::loadu(kp + d), a);
    }
    acc[i] = a;
  }
  vmath::lane_sums(acc).store(s);
}

// The scores of n queries against one run, W positions at a time: each block of keys read from memory once for all
// of them, then from L1.
template <int DV>
void score_many(const float* const* q, float* const* s, int n, const float* k, int64_t step, int64_t length,
                int64_t D) {
  int64_t j = 0;
  for (; j + W <= length; j += W)
    for (int i = 0; i < n; ++i) score_block<DV, false>(q[i], k + j * step, step, W, D, s[i] + j);
  if (j < length)
    for (int i = 0; i < n; ++i) score_block<DV, true>(q[i], k + j * step, step, length - j, D, s[i] + j);
}
#endif

// s_i[j] = dot(q_i, k_j) for n queries and a run of keys, bitwise. On x86 W positions at a time (score_block): each
// position's chain of multiply-adds over D as dot's, W chains side by side, then their sums at once (lane_sums),
// where each dot summed its own vector's lanes. Past the run's end the last block writes up to W - 1 more, which the
// caller's scratch has room for.
inline void scores(const float* const* q, float* const* s, int n, Run k, int64_t D) {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  switch (D / W) {  // the usual head sizes (64, 128) with their loop unrolled
    case 4: score_many<4>(q, s, n, k.base, k.step, k.length, D); break;
    case 8: score_many<8>(q, s, n, k.base, k.step, k.length, D); break;
    case 16: score_many<16>(q, s, n, k.base, k.step, k.length, D); break;
    default: score_many<0>(q, s, n, k.base, k.step, k.length, D);
  }
#else
  for (int i = 0; i < n; ++i)
    for (int64_t j = 0; j < k.length; ++j) s[i][j] = dot(q[i], k.base + j * k.step, D);
#endif
}

// A query's L scores in s to cap · tanh(score / cap), in place (Gemma 2's soft-capped attention), each lane alone;
// past L to the end of the last vector too (scratch). cap 0: as they are.
inline void soft_cap(float* s, int64_t L, float cap) {
  if (cap <= 0.0f) return;
  const Vec c(cap);
  for (int64_t j = 0; j < L; j += W) (c * vmath::tanh_vec(Vec::loadu(s + j) / c)).store(s + j);
}

// A query's L scores in s to e^(score - max), in place (past L, to the end of the last vector: zeros); returns 1 over
// their sum. `sink`: one more score beside them, of an output of zero (gpt-oss's), in the max and the sum; NO_SINK
// (-inf): none (e^-inf adds an exact zero, so the sum is bitwise as without it).
inline constexpr float NO_SINK = -std::numeric_limits<float>::infinity();
inline float softmax(float* s, int64_t L, float sink = NO_SINK) {
  const Vec lowest(-std::numeric_limits<float>::infinity());
  Vec top = lowest;
  for (int64_t j = 0; j < L; j += W) {  // past L: -inf lanes
    const Vec x = L - j >= W ? Vec::loadu(s + j) : Vec::set(lowest, Vec::loadu(s + j, L - j), L - j);
    top = at::vec::maximum(top, x);
  }
  const float most = std::max(
      at::vec::vec_reduce_all([](const Vec& a, const Vec& b) { return at::vec::maximum(a, b); }, top), sink);
  const Vec vmax(most);
  Vec total(0.0f);
  for (int64_t j = 0; j < L; j += W) {  // past L: zero lanes (scratch has room for a whole last vector)
    Vec e = exp_vec(Vec::loadu(s + j) - vmax);
    if (L - j < W) e = Vec::set(Vec(0.0f), e, L - j);
    e.store(s + j);
    total = total + e;
  }
  return 1.0f / (sum(total) + std::exp(sink - most));
}

constexpr int CHAINS = W == 16 ? 16 : 8;  // accumulators weigh keeps in registers (AVX-512 has 32, AVX2 16)
constexpr int QUERIES = 4;                // queries weighed together at most

// out_q[i, i + N·W) (+)= Σ_j p_q[j]·v_j[i, i + N·W) over `count` positions from v (position j at v + j·step), for Q
// queries sharing their values (heads of one KV head): each value vector loaded once for the Q, Q·N independent
// chains of multiply-adds. Each query's running sums wait in its out between spans (from zero where fresh), stored
// and loaded exactly, so each lane sums its positions in order whatever the spans.
template <int N, int Q>
inline void weigh(const float* const* p, float* const* out, const float* v, int64_t step, int64_t count, int64_t i,
                  bool fresh) {
  Vec acc[Q][N];
  for (int q = 0; q < Q; ++q)
    for (int n = 0; n < N; ++n) acc[q][n] = fresh ? Vec(0.0f) : Vec::loadu(out[q] + i + n * W);
  for (int64_t j = 0; j < count; ++j) {
    Vec vn[N];
    for (int n = 0; n < N; ++n) vn[n] = Vec::loadu(v + j * step + i + n * W);
    for (int q = 0; q < Q; ++q) {
      const Vec pj(p[q][j]);
      for (int n = 0; n < N; ++n) acc[q][n] = at::vec::fmadd(pj, vn[n], acc[q][n]);
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int n = 0; n < N; ++n) acc[q][n].store(out[q] + i + n * W);
}

// All of D for Q queries: as many vectors at a time as Q·N chains fit in the registers (a width past MOST is never
// taken, and written as 1 so that it is not compiled either).
template <int Q>
void weigh_span(const float* const* p, float* const* out, const float* v, int64_t step, int64_t count, int64_t D,
                bool fresh) {
  constexpr int MOST = CHAINS / Q;
  for (int64_t i = 0; i < D;) {  // D a multiple of 16
    const int64_t left = (D - i) / W;
    if (MOST >= 8 && left >= 8) {
      weigh<(MOST >= 8 ? 8 : 1), Q>(p, out, v, step, count, i, fresh), i += 8 * W;
    } else if (MOST >= 4 && left >= 4) {
      weigh<(MOST >= 4 ? 4 : 1), Q>(p, out, v, step, count, i, fresh), i += 4 * W;
    } else if (left >= 2) {
      weigh<2, Q>(p, out, v, step, count, i, fresh), i += 2 * W;
    } else {
      weigh<1, Q>(p, out, v, step, count, i, fresh), i += W;
    }
  }
}

inline void weigh_queries(const float* const* p, float* const* out, int n, const float* v, int64_t step,
                          int64_t count, int64_t D, bool fresh) {  // n <= QUERIES
  switch (n) {
    case 4: weigh_span<4>(p, out, v, step, count, D, fresh); break;
    case 3: weigh_span<3>(p, out, v, step, count, D, fresh); break;
    case 2: weigh_span<2>(p, out, v, step, count, D, fresh); break;
    default: weigh_span<1>(p, out, v, step, count, D, fresh);
  }
}

inline void scale(float* out, float inv, int64_t D) {
  for (int64_t i = 0; i < D; i += W) (Vec::loadu(out + i) * Vec(inv)).store(out + i);
}

}  // namespace attn
