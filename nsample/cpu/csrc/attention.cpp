// The attention of a decode step and of a short prompt's prefill (nsample/cpu/fused_decode.py): rotary embedding, the
// KV append and the whole attention (prompt and own tokens in one softmax) in one kernel, on torch's portable vector
// layer (vec_math.h). Every query is computed alone, in a fixed order whatever the other rows, so rows stay
// independent, bitwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "vec_math.h"

namespace {

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

template <int DV>
void score_run(const float* q, const float* k, int64_t step, int64_t length, int64_t D, float* s) {
  int64_t j = 0;
  for (; j + W <= length; j += W) score_block<DV, false>(q, k + j * step, step, W, D, s + j);
  if (j < length) score_block<DV, true>(q, k + j * step, step, length - j, D, s + j);
}
#endif

// s[j] = dot(q, k_j) for a run of keys, bitwise. On x86 W positions at a time (score_block): each position's chain of
// multiply-adds over D as dot's, W chains side by side, then their sums at once (lane_sums), where each dot summed
// its own vector's lanes. Past the run's end the last block writes up to W - 1 more, which the caller's scratch has
// room for.
void scores(const float* q, Run k, int64_t D, float* s) {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  switch (D / W) {  // the usual head sizes (64, 128) with their loop unrolled
    case 4: score_run<4>(q, k.base, k.step, k.length, D, s); break;
    case 8: score_run<8>(q, k.base, k.step, k.length, D, s); break;
    case 16: score_run<16>(q, k.base, k.step, k.length, D, s); break;
    default: score_run<0>(q, k.base, k.step, k.length, D, s);
  }
#else
  for (int64_t j = 0; j < k.length; ++j) s[j] = dot(q, k.base + j * k.step, D);
#endif
}

constexpr int CHAINS = W == 16 ? 16 : 8;  // accumulators weigh keeps in registers (AVX-512 has 32, AVX2 16)
constexpr int QUERIES = 4;                // queries attended together at most (weigh)

// out_q[i, i + N·W) = inv_q · Σ_j p_q[j]·v_j[i, i + N·W) for Q queries sharing their values (heads of one KV head),
// the prompt's positions then the own ones (p_q = p + q·ps, own ones from p_q + skip; out_q = out + q·D): each
// value vector loaded once for the Q, Q·N independent chains of multiply-adds, and each lane still sums its j in
// order.
template <int N, int Q>
inline void weigh(const float* p, int64_t ps, int64_t skip, Run vp, Run vo, int64_t i, const float* inv, float* out,
                  int64_t D) {
  Vec acc[Q][N];
  for (int q = 0; q < Q; ++q)
    for (int n = 0; n < N; ++n) acc[q][n] = Vec(0.0f);
  const auto add = [&](const float* v, int64_t j) __attribute__((always_inline)) {
    Vec vn[N];
    for (int n = 0; n < N; ++n) vn[n] = Vec::loadu(v + n * W);
    for (int q = 0; q < Q; ++q) {
      const Vec pj(p[q * ps + j]);
      for (int n = 0; n < N; ++n) acc[q][n] = at::vec::fmadd(pj, vn[n], acc[q][n]);
    }
  };
  for (int64_t j = 0; j < vp.length; ++j) add(vp.base + j * vp.step + i, j);
  for (int64_t j = 0; j < vo.length; ++j) add(vo.base + j * vo.step + i, skip + j);
  for (int q = 0; q < Q; ++q)
    for (int n = 0; n < N; ++n) (acc[q][n] * Vec(inv[q])).store(out + q * D + i + n * W);
}

// All of out's D for Q queries: as many vectors at a time as Q·N chains fit in the registers.
template <int Q>
void weigh_all(const float* p, int64_t ps, int64_t skip, Run vp, Run vo, const float* inv, float* out, int64_t D) {
  constexpr int MOST = CHAINS / Q;
  for (int64_t i = 0; i < D;) {  // D a multiple of 16
    const int64_t left = (D - i) / W;
    if constexpr (MOST >= 8) {
      if (left >= 8) {
        weigh<8, Q>(p, ps, skip, vp, vo, i, inv, out, D), i += 8 * W;
        continue;
      }
    }
    if constexpr (MOST >= 4) {
      if (left >= 4) {
        weigh<4, Q>(p, ps, skip, vp, vo, i, inv, out, D), i += 4 * W;
        continue;
      }
    }
    if (left >= 2) {
      weigh<2, Q>(p, ps, skip, vp, vo, i, inv, out, D), i += 2 * W;
    } else {
      weigh<1, Q>(p, ps, skip, vp, vo, i, inv, out, D), i += W;
    }
  }
}

// Q <= QUERIES queries (D each, contiguous: heads of one KV head) over their prompt's and their own keys, each in one
// softmax, into out (Q·D); s: scratch of Q·(P + t + W) floats. Each query's softmax runs over its own L scores, so
// its chunks and masked tail are its own alone, and its weighted sum is a function of its probabilities alone: the
// numbers of one query attended alone.
void attend(const float* q, int Q, Run kp, Run vp, Run ko, Run vo, int64_t D, float* s, float* out) {
  const int64_t L = kp.length + ko.length, ps = L + W;
  float inv[QUERIES];
  for (int h = 0; h < Q; ++h) {
    float* sh = s + h * ps;
    scores(q + h * D, kp, D, sh);
    scores(q + h * D, ko, D, sh + kp.length);
    const Vec lowest(-std::numeric_limits<float>::infinity());
    Vec top = lowest;
    for (int64_t j = 0; j < L; j += W) {  // past L: -inf lanes
      const Vec x = L - j >= W ? Vec::loadu(sh + j) : Vec::set(lowest, Vec::loadu(sh + j, L - j), L - j);
      top = at::vec::maximum(top, x);
    }
    const Vec vmax(at::vec::vec_reduce_all([](const Vec& a, const Vec& b) { return at::vec::maximum(a, b); }, top));
    Vec total(0.0f);
    for (int64_t j = 0; j < L; j += W) {  // past L: zero lanes (scratch has room for a whole last vector)
      Vec e = exp_vec(Vec::loadu(sh + j) - vmax);
      if (L - j < W) e = Vec::set(Vec(0.0f), e, L - j);
      e.store(sh + j);
      total = total + e;
    }
    inv[h] = 1.0f / sum(total);
  }
  switch (Q) {
    case 4: weigh_all<4>(s, ps, kp.length, vp, vo, inv, out, D); break;
    case 3: weigh_all<3>(s, ps, kp.length, vp, vo, inv, out, D); break;
    case 2: weigh_all<2>(s, ps, kp.length, vp, vo, inv, out, D); break;
    default: weigh_all<1>(s, ps, kp.length, vp, vo, inv, out, D);
  }
}

// A KV head's g query heads in parts of at most QUERIES, of sizes as even as can be: part `part` of
// parts(g) is heads [first(g, part), first(g, part + 1)).
int64_t parts(int64_t g) { return (g + QUERIES - 1) / QUERIES; }
int64_t first(int64_t g, int64_t part) { return part * g / parts(g); }

// x·cos + rotate_half(x)·sin for one head (D), as transformers' apply_rotary_pos_emb, times `scale`, into out.
// Each half a vector at a time where it is a whole number of them (the same multiplies and adds lane by lane).
void rotate(const float* x, const float* cos, const float* sin, int64_t D, float scale, float* out) {
  const int64_t half = D / 2;
  if (half % W == 0) {
    const Vec k(scale);
    for (int64_t i = 0; i < half; i += W) {
      const Vec lo = Vec::loadu(x + i), hi = Vec::loadu(x + half + i);
      ((lo * Vec::loadu(cos + i) + hi.neg() * Vec::loadu(sin + i)) * k).store(out + i);
      ((hi * Vec::loadu(cos + half + i) + lo * Vec::loadu(sin + half + i)) * k).store(out + half + i);
    }
    return;
  }
  for (int64_t i = 0; i < D; ++i) {
    const float turned = i < half ? -x[i + half] : x[i - half];
    out[i] = (x[i] * cos[i] + turned * sin[i]) * scale;
  }
}

Run head_run(const at::Tensor& kv, int64_t row, int64_t head, int64_t length) {  // kv (rows, Hkv, L, D), strided
  TORCH_CHECK(kv.scalar_type() == at::kFloat && kv.stride(3) == 1, "KV: float, each position's D contiguous");
  return {kv.data_ptr<float>() + row * kv.stride(0) + head * kv.stride(1), kv.stride(2), length};
}

}  // namespace

// The attention of one decode step. qkv (B, (H + 2·Hkv)·D): each row's q, k, v; cos, sin (B, D): each row's
// rotary embedding. Rows are grouped by cohort: groups = (first row, generated length t) per cohort, own_k/own_v
// its buffers (rows, Hkv, capacity, D), this step's k, v stored at t - 1; segments = (first row, end row) per
// request, prefix_k/prefix_v its prompt's KV (1, Hkv, P, D). Queries are rotated and scaled by `scale`; each
// attends to its request's prompt and its own t tokens. Returns (B, H·D).
at::Tensor decode_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                            int64_t Hkv, double scale, const std::vector<int64_t>& groups,
                            const std::vector<at::Tensor>& own_k, const std::vector<at::Tensor>& own_v,
                            const std::vector<int64_t>& segments, const std::vector<at::Tensor>& prefix_k,
                            const std::vector<at::Tensor>& prefix_v) {
  const int64_t B = qkv.size(0), D = cos.size(1), g = H / Hkv, width = (H + 2 * Hkv) * D;
  TORCH_CHECK(qkv.is_contiguous() && qkv.size(1) == width && D % 16 == 0 && cos.is_contiguous() && sin.is_contiguous());
  std::vector<int64_t> group_of(B, -1), segment_of(B, -1);
  const int64_t C = own_k.size();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = groups[2 * c]; r < (c + 1 < C ? groups[2 * c + 2] : B); ++r) group_of[r] = c;
  for (size_t s = 0; s < prefix_k.size(); ++s)
    for (int64_t r = segments[2 * s]; r < segments[2 * s + 1]; ++r) segment_of[r] = s;
  auto queries = at::empty({B, H, D}, qkv.options());
  float* qp = queries.data_ptr<float>();
  const float *xp = qkv.data_ptr<float>(), *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  for (int64_t r = 0; r < B; ++r) {  // rotate q (scaled) and k; store k and v at the row's own position t - 1
    TORCH_CHECK(group_of[r] >= 0 && segment_of[r] >= 0, "every row belongs to a cohort and a request");
    const int64_t c = group_of[r], row = r - groups[2 * c], t = groups[2 * c + 1];
    const float *x = xp + r * width, *cr = cp + r * D, *sr = sp + r * D;
    for (int64_t h = 0; h < H; ++h) rotate(x + h * D, cr, sr, D, static_cast<float>(scale), qp + (r * H + h) * D);
    for (int64_t h = 0; h < Hkv; ++h) {
      Run k = head_run(own_k[c], row, h, t), v = head_run(own_v[c], row, h, t);
      rotate(x + (H + h) * D, cr, sr, D, 1.0f, k.base + (t - 1) * k.step);
      std::copy_n(x + (H + Hkv + h) * D, D, v.base + (t - 1) * v.step);
    }
  }
  auto out = at::empty({B, H * D}, qkv.options());
  float* op = out.data_ptr<float>();
  const int64_t P = parts(g);  // tasks: a row's KV head's query heads, in parts of at most QUERIES
  at::parallel_for(0, B * Hkv * P, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / (Hkv * P), kv = task / P % Hkv, h = kv * g + first(g, task % P),
                    Q = kv * g + first(g, task % P + 1) - h;
      const int64_t c = group_of[r], s = segment_of[r], t = groups[2 * c + 1];
      const at::Tensor &pk = prefix_k[s], &pv = prefix_v[s];
      scratch.resize(Q * (pk.size(2) + t + W));
      attend(qp + (r * H + h) * D, Q, head_run(pk, 0, kv, pk.size(2)), head_run(pv, 0, kv, pv.size(2)),
             head_run(own_k[c], r - groups[2 * c], kv, t), head_run(own_v[c], r - groups[2 * c], kv, t), D,
             scratch.data(), op + (r * H + h) * D);
    }
  });
  return out;
}

// The attention of a prefill of short prompts' chunks packed into one sequence (fused_decode.py, prefill): qkv
// (T, (H + 2·Hkv)·D), cos, sin (T, D); chunks = (first row, end row, first position) per chunk, prompt_k/prompt_v
// its request's buffers for the whole prompt (1, Hkv, P, D). Each row's k and v are rotated and stored at its
// position, then each query attends to its prompt up to itself in one softmax, as a decode row attends to its
// prompt (attend), so its numbers are its own whatever the chunks beside it or before it. Returns (T, H·D).
at::Tensor prefill_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                             int64_t Hkv, double scale, const std::vector<int64_t>& chunks,
                             const std::vector<at::Tensor>& prompt_k, const std::vector<at::Tensor>& prompt_v) {
  const int64_t T = qkv.size(0), D = cos.size(1), g = H / Hkv, width = (H + 2 * Hkv) * D, C = prompt_k.size();
  TORCH_CHECK(qkv.is_contiguous() && qkv.size(1) == width && D % 16 == 0 && cos.is_contiguous() && sin.is_contiguous());
  TORCH_CHECK(chunks.size() == static_cast<size_t>(3 * C) && prompt_v.size() == static_cast<size_t>(C), "chunks");
  std::vector<int64_t> chunk_of(T, -1), position(T);
  for (int64_t c = 0; c < C; ++c) {
    const int64_t first = chunks[3 * c], stop = chunks[3 * c + 1], at = chunks[3 * c + 2];
    TORCH_CHECK(0 <= first && first <= stop && stop <= T && at >= 0 && at + stop - first <= prompt_k[c].size(2),
                "a chunk outside the sequence or past its prompt's buffer");
    for (int64_t r = first; r < stop; ++r) chunk_of[r] = c, position[r] = at + r - first;
  }
  auto queries = at::empty({T, H, D}, qkv.options());
  float* qp = queries.data_ptr<float>();
  const float *xp = qkv.data_ptr<float>(), *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  for (int64_t r = 0; r < T; ++r) {  // rotate q (scaled) and k; store k and v at the row's position
    TORCH_CHECK(chunk_of[r] >= 0, "every row belongs to a chunk");
    const int64_t c = chunk_of[r], pos = position[r];
    const float *x = xp + r * width, *cr = cp + r * D, *sr = sp + r * D;
    for (int64_t h = 0; h < H; ++h) rotate(x + h * D, cr, sr, D, static_cast<float>(scale), qp + (r * H + h) * D);
    for (int64_t h = 0; h < Hkv; ++h) {
      Run k = head_run(prompt_k[c], 0, h, pos + 1), v = head_run(prompt_v[c], 0, h, pos + 1);
      rotate(x + (H + h) * D, cr, sr, D, 1.0f, k.base + pos * k.step);
      std::copy_n(x + (H + Hkv + h) * D, D, v.base + pos * v.step);
    }
  }
  auto out = at::empty({T, H * D}, qkv.options());
  float* op = out.data_ptr<float>();
  const int64_t P = parts(g);  // tasks as decode_attention's
  at::parallel_for(0, T * Hkv * P, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    const Run none{nullptr, 0, 0};
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / (Hkv * P), kv = task / P % Hkv, h = kv * g + first(g, task % P),
                    Q = kv * g + first(g, task % P + 1) - h;
      const int64_t c = chunk_of[r], length = position[r] + 1;
      scratch.resize(Q * (length + W));
      attend(qp + (r * H + h) * D, Q, head_run(prompt_k[c], 0, kv, length), head_run(prompt_v[c], 0, kv, length),
             none, none, D, scratch.data(), op + (r * H + h) * D);
    }
  });
  return out;
}
