// What a decode call on a GGUF's blocks takes (gguf_linear.cpp, gguf_expand.cpp, q8_linear.cpp): its arguments
// checked, and x's rows packed into the tiles a K-quant's tile of TILE rows reads (gguf_tile.h's packed).
#include <ATen/ATen.h>

#include "gguf_formats.h"
#include "gguf_tile.h"
#include "linear.h"

using gguf::packed;
using gguf::S;
using gguf::TILE;
using gguf::V;
using gguf::Vec;

void gguf_check_blocks(const at::Tensor& blocks) {
  TORCH_CHECK(blocks.dim() == 2 && blocks.scalar_type() == at::kByte && blocks.is_contiguous(),
              "blocks: contiguous uint8 (N, row bytes)");
}

void gguf_check_x(const at::Tensor& x, const at::Tensor& blocks, int64_t type, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float (M, K)");
  gguf_check_blocks(blocks);
  gguf::with_format(type, [&](auto f) {
    using F = decltype(f);
    TORCH_CHECK(blocks.size(1) == gguf::row_bytes<F>(x.size(1)), "blocks: ", blocks.size(1), " bytes a row, not ",
                "K = ", x.size(1), " weights of type ", type);
  });
  TORCH_CHECK(!bias.has_value() || (bias->numel() == blocks.size(0) && bias->scalar_type() == at::kFloat &&
                                    bias->is_contiguous()),
              "bias: contiguous float (N,)");
}

at::Tensor gguf_pack_rows(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float (M, K)");
  const int64_t M = x.size(0), K = x.size(1), tiles = M / TILE;
  TORCH_CHECK(K % 32 == 0, "x: K = ", K, " is not a multiple of 32");
  auto out = at::empty({tiles, K / 32, TILE, 32}, x.options());  // 64-byte aligned: so is each chunk's row
  const float* src = x.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t c = 0; c < K / 32; ++c)
      for (int r = 0; r < TILE; ++r) {
        const float* from = src + (t * TILE + r) * K + 32 * c;
        float* to = dst + ((t * K / 32 + c) * TILE + r) * 32;
        FOR_VECTORS(v) Vec::loadu(from + S * v).store(to + S * v);
      }
  return out;
}

bool gguf_packs_rows(int64_t type, int64_t M) {
  return M >= TILE && gguf::with_format(type, [](auto f) { return packed<decltype(f), TILE>(); });
}
