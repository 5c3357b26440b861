// A decode step of a Llama-style layer around its quantized linear layers (linear.h; nsample/fused_decode.py), in
// four calls per layer instead of some forty ATen ops and the transformers modules' Python around them: RMSNorm
// fused into the projection that reads it, the residual add into the projection that feeds it, SiLU·mul into
// gate/up, and rotary embedding, the KV append and the whole attention (prompt and own tokens in one softmax) in
// one kernel.
// Every step is per row, in a fixed order whatever the other rows, so rows stay independent, bitwise.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cmath>
#include <vector>

#include "linear.h"

namespace {

#define AVX512 __attribute__((target("avx512f,fma")))

// e^x for 16 floats (Cephes' expf: x = n·ln2 + r, e^r by a degree-7 polynomial, times 2^n); relative error ~1e-7.
AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f)), _mm512_set1_ps(-88.3762626647949f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

AVX512 inline float dot(const float* a, const float* b, int64_t D) {  // D a multiple of 16
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < D; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  return _mm512_reduce_add_ps(acc);
}

// Each row of h (M, K) as transformers' LlamaRMSNorm: w · (x · 1/sqrt(mean(x²) + eps)). K a multiple of 16.
AVX512 at::Tensor rms_norm(const at::Tensor& h, const at::Tensor& w, double eps) {
  TORCH_CHECK(h.dim() == 2 && h.scalar_type() == at::kFloat && h.is_contiguous() && h.size(1) % 16 == 0, "h");
  const int64_t M = h.size(0), K = h.size(1);
  auto y = at::empty_like(h);
  const float *hp = h.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < M; ++r) {
    const float* x = hp + r * K;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(x + k), acc);
    const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / K + static_cast<float>(eps)));
    for (int64_t k = 0; k < K; k += 16) {
      const __m512 normed = _mm512_mul_ps(_mm512_loadu_ps(x + k), inv);
      _mm512_storeu_ps(yp + r * K + k, _mm512_mul_ps(_mm512_loadu_ps(wp + k), normed));
    }
  }
  return y;
}

// A (P, D) run of keys or values at `base`, position j at base + j·step (a head of a prompt's or a cohort's KV).
struct Run {
  float* base;
  int64_t step, length;
};

// One query (D) over its prompt's and its own keys in one softmax, into out (D); s: scratch of P + t + 16 floats.
AVX512 void attend_one(const float* q, Run kp, Run vp, Run ko, Run vo, int64_t D, float* s, float* out) {
  const int64_t L = kp.length + ko.length;
  for (int64_t j = 0; j < kp.length; ++j) s[j] = dot(q, kp.base + j * kp.step, D);
  for (int64_t j = 0; j < ko.length; ++j) s[kp.length + j] = dot(q, ko.base + j * ko.step, D);
  __m512 top = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < L; j += 16) {
    const __mmask16 lanes = L - j >= 16 ? 0xFFFF : (1u << (L - j)) - 1;
    top = _mm512_mask_max_ps(top, lanes, top, _mm512_maskz_loadu_ps(lanes, s + j));
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(top));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < L; j += 16) {
    const __mmask16 lanes = L - j >= 16 ? 0xFFFF : (1u << (L - j)) - 1;
    const __m512 e = _mm512_maskz_mov_ps(lanes, exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vmax)));
    _mm512_storeu_ps(s + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  const float inv = 1.0f / _mm512_reduce_add_ps(sum);
  for (int64_t i = 0; i < D; i += 16) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < vp.length; ++j)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(s[j]), _mm512_loadu_ps(vp.base + j * vp.step + i), acc);
    for (int64_t j = 0; j < vo.length; ++j)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(s[kp.length + j]), _mm512_loadu_ps(vo.base + j * vo.step + i), acc);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(acc, _mm512_set1_ps(inv)));
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

// h (M, K) -> RMSNorm(h; w, eps) · Wᵀ + bias.
at::Tensor norm_linear(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear) {
  return linear(rms_norm(h, w, eps));
}

// h += x · Wᵀ + bias (the residual add of a layer's o_proj or down_proj).
void linear_add(const at::Tensor& x, const Linear& linear, at::Tensor& h) { h.add_(linear(x)); }

// gate|up = RMSNorm(h) · Wᵀ + bias (M, 2I) -> SiLU(gate) · up (M, I), SiLU(x) = x / (1 + e^-x) as ATen's.
AVX512 at::Tensor norm_swiglu(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear) {
  const auto y = norm_linear(h, w, eps, linear);
  const int64_t M = y.size(0), I = y.size(1) / 2;
  TORCH_CHECK(I % 16 == 0, "gate/up: a multiple of 16 columns each");
  auto act = at::empty({M, I}, y.options());
  const float* yp = y.data_ptr<float>();
  float* ap = act.data_ptr<float>();
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t i = 0; i < I; i += 16) {
      const __m512 g = _mm512_loadu_ps(yp + r * 2 * I + i), u = _mm512_loadu_ps(yp + r * 2 * I + I + i);
      const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
      _mm512_storeu_ps(ap + r * I + i, _mm512_mul_ps(silu, u));
    }
  return act;
}

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
      scratch.resize(pk.size(2) + t + 16);
      attend_one(qp + task * D, head_run(pk, 0, h / g, pk.size(2)), head_run(pv, 0, h / g, pv.size(2)),
                 head_run(own_k[c], r - groups[2 * c], h / g, t), head_run(own_v[c], r - groups[2 * c], h / g, t),
                 D, scratch.data(), op + task * D);
    }
  });
  return out;
}
