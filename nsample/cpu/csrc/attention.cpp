// The attention of a decode step and of a short prompt's prefill (nsample/cpu/fused_decode.py): rotary embedding, the
// KV append and the whole attention (prompt and own tokens in one softmax) in one kernel, on torch's portable vector
// layer (attention_parts.h). A request's rows go together for each KV head, its prompt's keys and values read once for
// all of them; every query's numbers are still those of it computed alone, in a fixed order whatever the other rows,
// so rows stay independent, bitwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "attention_parts.h"

namespace {

using attn::QUERIES;
using attn::Run;
using attn::Vec;
using attn::W;

constexpr int64_t ROWS = 8;  // a decode task's rows at most (its scratch: their queries' scores)

// A KV head's g query heads in parts of at most QUERIES, of sizes as even as can be: part `part` of
// parts(g) is heads [first(g, part), first(g, part + 1)).
int64_t parts(int64_t g) { return (g + QUERIES - 1) / QUERIES; }
int64_t first(int64_t g, int64_t part) { return part * g / parts(g); }

// The attention of the queries of R rows of one request for one KV head: g heads a row, row r's at q + r·H·D, into
// out likewise; over the request's prompt (kp, vp: shared by the rows) and each row's own keys and values (ko[r],
// vo[r], t positions each), each query in one softmax of its scores (soft-capped by `cap` where it is not 0; with its
// head's sink, sinks[i % g], beside them where sinks is not null: the KV head's g sinks). The
// prompt's keys and values go by a block at a time for all the queries, read from memory once where each query read
// them all for itself (a request's n choices share one prompt). s: scratch. Each query's numbers are those of it
// attended alone: its scores, softmax and each lane's sum over the positions in order, then times 1 over the sum.
void attend(const float* q, float* out, int64_t R, int64_t H, int64_t g, Run kp, Run vp, const Run* ko, const Run* vo,
            int64_t D, float cap, const float* sinks, std::vector<float>& s) {
  const int64_t n = R * g, t = ko[0].length, L = kp.length + t, ps = L + W;
  s.resize(n * ps);
  std::vector<const float*> qs(n), from_j0(n);
  std::vector<float*> ss(n), so(n), os(n);
  std::vector<float> inv(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = (i / g) * H * D + (i % g) * D;
    qs[i] = q + at, os[i] = out + at, ss[i] = s.data() + i * ps, so[i] = ss[i] + kp.length;
  }
  attn::scores(qs.data(), ss.data(), n, kp, D);
  for (int64_t r = 0; r < R; ++r) attn::scores(qs.data() + r * g, so.data() + r * g, g, ko[r], D);
  for (int64_t i = 0; i < n; ++i) {
    attn::soft_cap(ss[i], L, cap);
    inv[i] = attn::softmax(ss[i], L, sinks ? sinks[i % g] : attn::NO_SINK);
  }
  const auto each_part = [&](auto fn) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t part = 0; part < parts(g); ++part) fn(r, r * g + first(g, part), first(g, part + 1) - first(g, part));
  };
  const int64_t block = std::max<int64_t>(W, 16384 / (4 * D));  // the prompt's values a block (16 KiB) at a time
  for (int64_t j0 = 0; j0 < kp.length; j0 += block) {
    const int64_t count = std::min(block, kp.length - j0);
    for (int64_t i = 0; i < n; ++i) from_j0[i] = ss[i] + j0;
    each_part([&](int64_t, int64_t i, int64_t Q) {
      attn::weigh_queries(from_j0.data() + i, os.data() + i, Q, vp.base + j0 * vp.step, vp.step, count, D, j0 == 0);
    });
  }
  if (t > 0)
    each_part([&](int64_t r, int64_t i, int64_t Q) {
      attn::weigh_queries(so.data() + i, os.data() + i, Q, vo[r].base, vo[r].step, t, D, kp.length == 0);
    });
  for (int64_t i = 0; i < n; ++i) attn::scale(os[i], inv[i], D);
}

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

// The sinks (H,) as the kernels read them: float, contiguous; null where there are none.
const float* sink_heads(const c10::optional<at::Tensor>& sinks, int64_t H) {
  if (!sinks) return nullptr;
  TORCH_CHECK(sinks->scalar_type() == at::kFloat && sinks->is_contiguous() && sinks->numel() == H,
              "sinks: contiguous float, one a head");
  return sinks->data_ptr<float>();
}

Run head_run(const at::Tensor& kv, int64_t row, int64_t head, int64_t length) {  // kv (rows, Hkv, L, D), strided
  TORCH_CHECK(kv.scalar_type() == at::kFloat && kv.stride(3) == 1, "KV: float, each position's D contiguous");
  return {kv.data_ptr<float>() + row * kv.stride(0) + head * kv.stride(1), kv.stride(2), length};
}

// The last `keep` positions of run (all of it where keep passes its length, none where keep < 1).
Run last(Run run, int64_t keep) {
  keep = std::clamp<int64_t>(keep, 0, run.length);
  return {run.base + (run.length - keep) * run.step, run.step, keep};
}

}  // namespace

// The attention of one decode step. qkv (B, (H + 2·Hkv)·D): each row's q, k, v; cos, sin (B, D): each row's
// rotary embedding. Rows are grouped by cohort: groups = (first row, generated length t) per cohort, own_k/own_v
// its buffers (rows, Hkv, capacity, D), this step's k, v stored at t - 1; segments = (first row, end row) per
// request, prefix_k/prefix_v its prompt's KV (1, Hkv, P, D). Queries are rotated and scaled by `scale`; each
// attends to its request's prompt and its own t tokens, or with a sliding `window` (0: none) to the window positions
// up to its own, P + t - 1: the prompt's last window - t, its own last window; scores soft-capped by `softcap` (0:
// not; Gemma 2's attn_logit_softcapping); `sinks` (H,): a sink per head beside the scores (gpt-oss's). Returns
// (B, H·D).
at::Tensor decode_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                            int64_t Hkv, double scale, const std::vector<int64_t>& groups,
                            const std::vector<at::Tensor>& own_k, const std::vector<at::Tensor>& own_v,
                            const std::vector<int64_t>& segments, const std::vector<at::Tensor>& prefix_k,
                            const std::vector<at::Tensor>& prefix_v, int64_t window, double softcap,
                            const c10::optional<at::Tensor>& sinks) {
  const int64_t B = qkv.size(0), D = cos.size(1), g = H / Hkv, width = (H + 2 * Hkv) * D;
  TORCH_CHECK(qkv.is_contiguous() && qkv.size(1) == width && D % 16 == 0 && cos.is_contiguous() && sin.is_contiguous());
  const float* sink = sink_heads(sinks, H);
  std::vector<int64_t> group_of(B, -1), segment_of(B, -1);
  const int64_t C = own_k.size();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = groups[2 * c]; r < (c + 1 < C ? groups[2 * c + 2] : B); ++r) group_of[r] = c;
  TORCH_CHECK(segments.size() == 2 * prefix_k.size() && prefix_v.size() == prefix_k.size(), "segments");
  for (size_t s = 0; s < prefix_k.size(); ++s) {
    TORCH_CHECK(0 <= segments[2 * s] && segments[2 * s] <= segments[2 * s + 1] && segments[2 * s + 1] <= B,
                "a request's rows outside the step");
    for (int64_t r = segments[2 * s]; r < segments[2 * s + 1]; ++r) {
      segment_of[r] = s;
      TORCH_CHECK(group_of[r] == group_of[segments[2 * s]], "a request's rows belong to one cohort");
    }
  }
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
  // Tasks: a request's rows for one KV head, ROWS rows at most, and in more parts where there would be fewer tasks
  // than two a thread (the parts' numbers are the same as whole ones').
  const int64_t S = prefix_k.size();
  if (S == 0) return out;  // no rows
  int64_t most = 1;
  for (int64_t s = 0; s < S; ++s) most = std::max(most, segments[2 * s + 1] - segments[2 * s]);
  const int64_t split = std::min(most, std::max((most + ROWS - 1) / ROWS,
                                                (2 * at::get_num_threads() + S * Hkv - 1) / (S * Hkv)));
  at::parallel_for(0, S * Hkv * split, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t s = task / (Hkv * split), kv = task / split % Hkv, part = task % split;
      const int64_t rows = segments[2 * s + 1] - segments[2 * s], ra = segments[2 * s] + part * rows / split,
                    rb = segments[2 * s] + (part + 1) * rows / split;
      if (ra == rb) continue;
      const int64_t c = group_of[ra], t = groups[2 * c + 1], first_row = groups[2 * c];
      const at::Tensor &pk = prefix_k[s], &pv = prefix_v[s];
      const int64_t P = pk.size(2), prompt = window > 0 ? window - t : P, own = window > 0 ? window : t;
      Run ko[ROWS], vo[ROWS];  // each row's own keys and values (rb - ra <= ROWS: split)
      for (int64_t r = ra; r < rb; ++r)
        ko[r - ra] = last(head_run(own_k[c], r - first_row, kv, t), own),
        vo[r - ra] = last(head_run(own_v[c], r - first_row, kv, t), own);
      attend(qp + (ra * H + kv * g) * D, op + (ra * H + kv * g) * D, rb - ra, H, g,
             last(head_run(pk, 0, kv, P), prompt), last(head_run(pv, 0, kv, P), prompt), ko, vo, D,
             static_cast<float>(softcap), sink ? sink + kv * g : nullptr, scratch);
    }
  });
  return out;
}

// The attention of a prefill of short prompts' chunks packed into one sequence (fused_decode.py, prefill): qkv
// (T, (H + 2·Hkv)·D), cos, sin (T, D); chunks = (first row, end row, first position) per chunk, prompt_k/prompt_v
// its request's buffers for the whole prompt (1, Hkv, P, D). Each row's k and v are rotated and stored at its
// position, then each query attends to its prompt up to itself in one softmax, as a decode row attends to its
// prompt (attend), so its numbers are its own whatever the chunks beside it or before it; with a sliding `window` (0:
// none) to the window positions up to its own; scores soft-capped by `softcap` (0: not); `sinks` as decode_attention's.
// Returns (T, H·D).
at::Tensor prefill_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                             int64_t Hkv, double scale, const std::vector<int64_t>& chunks,
                             const std::vector<at::Tensor>& prompt_k, const std::vector<at::Tensor>& prompt_v,
                             int64_t window, double softcap, const c10::optional<at::Tensor>& sinks) {
  const int64_t T = qkv.size(0), D = cos.size(1), g = H / Hkv, width = (H + 2 * Hkv) * D, C = prompt_k.size();
  const float* sink = sink_heads(sinks, H);
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
  at::parallel_for(0, T * Hkv, 1, [&](int64_t begin, int64_t end) {  // tasks: a row's KV head
    std::vector<float> scratch;
    const Run none{nullptr, 0, 0};  // no own tokens
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / Hkv, kv = task % Hkv, c = chunk_of[r], length = position[r] + 1;
      const int64_t keep = window > 0 ? window : length;
      attend(qp + (r * H + kv * g) * D, op + (r * H + kv * g) * D, 1, H, g,
             last(head_run(prompt_k[c], 0, kv, length), keep), last(head_run(prompt_v[c], 0, kv, length), keep),
             &none, &none, D, static_cast<float>(softcap), sink ? sink + kv * g : nullptr, scratch);
    }
  });
  return out;
}
