// Decode-time linear layers on a GGUF file's blocks with int8 activations, as llama.cpp computes them: each activation
// row rounded to int8 (q8_quantize.cpp) (d = max|x| / 127, q = round(x / d)) in blocks of 32 for the 32-weight formats
// (llama.cpp's Q8_0) and of 256 for the K-quants (its Q8_K, with each 16's sum of q beside), integer dot products with
// the weights' small integers (vpmaddubsw, vpmaddwd; with VNNI, vpdpbusd and vpdpwssd; on ARM64 sdot or a widening
// multiply: q8_tile_neon.h), scaled in float once per 32 weights, or for a K-quant once per 256 (q8_formats.h,
// q8_kquants.h; on ARM64 q8_neon.h, q8_neon_kquants.h). Where AVX-512 is built, a K-quant block goes
// two chunks of 32 an instruction (512-bit registers), which Intel's server cores run at twice the 256-bit rate. The
// weights are never expanded to float32, so a step costs some three instructions per 32 weights and row instead of
// the float kernel's (gguf_linear.cpp) expansion and a multiply-add per weight and row. Numbers: a row's activations
// are rounded (relative error about 0.4% per block), not its weights' expansion. Rows stay bitwise independent: each
// row is rounded by itself, integer sums are exact, and each output is one row's float sum over its chunks in a fixed
// order, whatever M and the other rows are.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "gguf_formats.h"
#include "linear.h"
#include "q8_formats.h"
#include "q8_neon.h"
#include "q8_rows.h"
#include "q8_tile_neon.h"
#include "q8_tile_x86.h"
#include "q8_with_format.h"

#if defined(NSAMPLE_Q8_X86) || defined(NSAMPLE_Q8_NEON)
namespace {

using namespace q8;

// A tile of the format's kind.
template <class Q, class F, int R>
void any_tile(const Rows& x, int64_t r0, const uint8_t* w, int64_t row, int64_t n, float* y, int64_t ldy,
              const float* bias) {
  if constexpr (Q::K) {
    ktile<Q, F, R>(x, r0, w, row, n, y, ldy, bias);
  } else {
    tile<Q, F, R>(x, r0, w, row, n, y, ldy, bias);
  }
}

// y (M rows, stride ldy) = x · Wᵀ (+ bias): columns split across threads GROUP at a time; in each group the rows
// go by in tiles of TILE, then 4, 2, 1.
template <class Q, class F>
void decode(const Rows& x, int64_t M, const uint8_t* w, int64_t N, float* y, int64_t ldy, const float* bias) {
  const int64_t row = gguf::row_bytes<F>(x.K);
  at::parallel_for(0, (N + GROUP - 1) / GROUP, 4, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t n = g * GROUP, cols = std::min<int64_t>(GROUP, N - n);
      for (int64_t r0 = 0; r0 < M;) {
        const int64_t left = M - r0;
        const auto run = [&](auto tile_rows) {
          constexpr int R = decltype(tile_rows)::value;
          for (int64_t c = 0; c < cols; ++c) any_tile<Q, F, R>(x, r0, w, row, n + c, y, ldy, bias);
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
#endif

bool q8_available() {
#if defined(NSAMPLE_Q8_X86) || defined(NSAMPLE_Q8_NEON)
  return true;
#else
  return false;
#endif
}

bool q8_readable(int64_t type) {
#if defined(NSAMPLE_Q8_X86) || defined(NSAMPLE_Q8_NEON)
  return q8::with_format(type, [](auto, auto) {});
#else
  (void)type;
  return false;
#endif
}

// y (M, N), a view with unit column stride, = the rows' product with blocks (N, row bytes) of a quantized type.
void gguf_decode_q8_into(const std::vector<at::Tensor>& xq, const at::Tensor& blocks, int64_t type, at::Tensor& y,
                         const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(xq.size() == 4, "xq: q8_quantize's (q, d, sum, qsum)");
  TORCH_CHECK(xq[0].size(1) == q8_block(type) * xq[1].size(1), "xq: rounded in blocks of ", q8_block(type),
              " for type ", type);
  TORCH_CHECK(blocks.dim() == 2 && blocks.scalar_type() == at::kByte && blocks.is_contiguous(), "blocks");
  const int64_t M = xq[0].size(0), K = xq[0].size(1), N = blocks.size(0);
  TORCH_CHECK(y.dim() == 2 && y.size(0) == M && y.size(1) == N && y.stride(1) == 1 && y.scalar_type() == at::kFloat,
              "y: float (M, N) with unit column stride");
  TORCH_CHECK(!bias.has_value() || (bias->numel() == N && bias->is_contiguous()), "bias: contiguous float (N,)");
#if defined(NSAMPLE_Q8_X86) || defined(NSAMPLE_Q8_NEON)
  const Rows x{xq[0].data_ptr<int8_t>(), xq[1].data_ptr<float>(), xq[2].data_ptr<float>(),
               xq[3].data_ptr<int16_t>(), K};
  const float* bp = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  const bool known = q8::with_format(type, [&](auto q, auto f) {
    using F = decltype(f);
    TORCH_CHECK(blocks.size(1) == gguf::row_bytes<F>(K), "blocks: ", blocks.size(1), " bytes a row, not K = ", K,
                " weights of type ", type);
    decode<decltype(q), F>(x, M, blocks.data_ptr<uint8_t>(), N, y.data_ptr<float>(), y.stride(0), bp);
  });
  TORCH_CHECK(known, "GGUF type ", type, " has no int8-activation kernel (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K, ",
              "IQ4_NL, IQ4_XS and MXFP4 do)");
#else
  TORCH_CHECK(false, "int8 activations need x86 AVX2 or ARM64 NEON (this build has no such kernel)");
#endif
}

at::Tensor gguf_decode_q8_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                                 const c10::optional<at::Tensor>& bias) {
  auto y = at::empty({x.size(0), blocks.size(0)}, x.options());
  gguf_decode_q8_into(q8_quantize(x, q8_block(type)), blocks, type, y, bias);
  return y;
}
