// The attention of a decode step and of a short prompt's prefill (nsample/cpu/fused_decode.py): rotary embedding, the
// KV append and the whole attention (prompt and own tokens in one softmax) in one kernel, on torch's portable vector
// layer (vec_math.h). Every query is computed alone, in a fixed order whatever the other rows, so rows stay
// independent, bitwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

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

// out[i, i + N·W) = inv · Σ_j p_j·v_j[i, i + N·W), the prompt's positions then the own ones (p: their
// probabilities, own ones from p + skip), N vectors at a time: N independent chains of fused multiply-adds hide
// each other's latency, and each lane still sums its j in order.
template <int N>
inline void weigh(const float* p, int64_t skip, Run vp, Run vo, int64_t i, float inv, float* out) {
  Vec acc[N];
  for (int n = 0; n < N; ++n) acc[n] = Vec(0.0f);
  for (int64_t j = 0; j < vp.length; ++j) {
    const Vec pj(p[j]);
    const float* v = vp.base + j * vp.step + i;
    for (int n = 0; n < N; ++n) acc[n] = at::vec::fmadd(pj, Vec::loadu(v + n * W), acc[n]);
  }
  for (int64_t j = 0; j < vo.length; ++j) {
    const Vec pj(p[skip + j]);
    const float* v = vo.base + j * vo.step + i;
    for (int n = 0; n < N; ++n) acc[n] = at::vec::fmadd(pj, Vec::loadu(v + n * W), acc[n]);
  }
  for (int n = 0; n < N; ++n) (acc[n] * Vec(inv)).store(out + i + n * W);
}

// One query (D) over its prompt's and its own keys in one softmax, into out (D); s: scratch of P + t + W floats.
// The softmax runs over this query's own L scores from s[0], so its chunks and masked tail are its own alone.
void attend_one(const float* q, Run kp, Run vp, Run ko, Run vo, int64_t D, float* s, float* out) {
  const int64_t L = kp.length + ko.length;
  for (int64_t j = 0; j < kp.length; ++j) s[j] = dot(q, kp.base + j * kp.step, D);
  for (int64_t j = 0; j < ko.length; ++j) s[kp.length + j] = dot(q, ko.base + j * ko.step, D);
  const Vec lowest(-std::numeric_limits<float>::infinity());
  Vec top = lowest;
  for (int64_t j = 0; j < L; j += W) {  // past L: -inf lanes
    const Vec x = L - j >= W ? Vec::loadu(s + j) : Vec::set(lowest, Vec::loadu(s + j, L - j), L - j);
    top = at::vec::maximum(top, x);
  }
  const Vec vmax(at::vec::vec_reduce_all([](const Vec& a, const Vec& b) { return at::vec::maximum(a, b); }, top));
  Vec total(0.0f);
  for (int64_t j = 0; j < L; j += W) {  // past L: zero lanes (scratch has room for a whole last vector)
    Vec e = exp_vec(Vec::loadu(s + j) - vmax);
    if (L - j < W) e = Vec::set(Vec(0.0f), e, L - j);
    e.store(s + j);
    total = total + e;
  }
  const float inv = 1.0f / sum(total);
  for (int64_t i = 0; i < D;) {  // D a multiple of 16: as many vectors at a time as fit in the registers
    const int64_t left = (D - i) / W, n = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    switch (n) {
      case 8: weigh<8>(s, kp.length, vp, vo, i, inv, out); break;
      case 4: weigh<4>(s, kp.length, vp, vo, i, inv, out); break;
      case 2: weigh<2>(s, kp.length, vp, vo, i, inv, out); break;
      default: weigh<1>(s, kp.length, vp, vo, i, inv, out);
    }
    i += n * W;
  }
}

// x·cos + rotate_half(x)·sin for one head (D), as transformers' apply_rotary_pos_emb, times `scale`, into out.
void rotate(const float* x, const float* cos, const float* sin, int64_t D, float scale, float* out) {
  const int64_t half = D / 2;
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
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / H, h = task % H, c = group_of[r], s = segment_of[r], t = groups[2 * c + 1];
      const at::Tensor &pk = prefix_k[s], &pv = prefix_v[s];
      scratch.resize(pk.size(2) + t + W);
      attend_one(qp + task * D, head_run(pk, 0, h / g, pk.size(2)), head_run(pv, 0, h / g, pv.size(2)),
                 head_run(own_k[c], r - groups[2 * c], h / g, t), head_run(own_v[c], r - groups[2 * c], h / g, t),
                 D, scratch.data(), op + task * D);
    }
  });
  return out;
}

// The attention of a prefill of short prompts' chunks packed into one sequence (fused_decode.py, prefill): qkv
// (T, (H + 2·Hkv)·D), cos, sin (T, D); chunks = (first row, end row, first position) per chunk, prompt_k/prompt_v
// its request's buffers for the whole prompt (1, Hkv, P, D). Each row's k and v are rotated and stored at its
// position, then each query attends to its prompt up to itself in one softmax, as a decode row attends to its
// prompt (attend_one), so its numbers are its own whatever the chunks beside it or before it. Returns (T, H·D).
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
  at::parallel_for(0, T * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    const Run none{nullptr, 0, 0};
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / H, h = task % H, c = chunk_of[r], length = position[r] + 1;
      scratch.resize(length + W);
      attend_one(qp + task * D, head_run(prompt_k[c], 0, h / g, length), head_run(prompt_v[c], 0, h / g, length),
                 none, none, D, scratch.data(), op + task * D);
    }
  });
  return out;
}
