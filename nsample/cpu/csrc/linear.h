// A linear layer of the kinds nsample runs (fused_decode.py builds them from nsample/models/gguf_model.py's and
// nsample/cpu/int8_linear.py's layers): a list of parts side by side along the output columns (a fused q|k|v or
// gate|up, whose parts may differ in type: Q4_K_M files hold v as Q6_K), each a GGUF file's blocks
// (gguf_linear.cpp) or two-level int8 on oneDNN's prepacked GEMM (int8_rows.cpp around it), and one bias over all
// columns. Either way each output row depends on its input row alone, bitwise.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <vector>

struct LinearPart {
  bool blocks;
  int64_t N;                               // output columns
  at::Tensor data;                         // blocks: uint8 (N, row bytes)
  int64_t type;                            // blocks: the ggml type id (gguf_formats.h)
  at::Tensor packed, scales, zero_points;  // int8: oneDNN's packed levels (2N, K), their scales and zero points (2N,)
};

struct Linear {
  std::vector<LinearPart> parts;
  int64_t N;                       // all parts' columns
  c10::optional<at::Tensor> bias;  // (N,)
  bool q8 = false;                 // blocks: decode with int8 activations where the format has a kernel (q8_linear.cpp)

  at::Tensor operator()(const at::Tensor& x) const;  // x (M, K) float -> (M, N) float
};

Linear gguf_block_linear(std::vector<at::Tensor> blocks, std::vector<int64_t> types, c10::optional<at::Tensor> bias,
                         bool q8);
Linear int8_linear(at::Tensor packed, at::Tensor scales, at::Tensor zero_points, c10::optional<at::Tensor> bias);

// gguf_linear.cpp: the decode product on blocks (N, row bytes) of a ggml type, read as the file holds them.
at::Tensor gguf_decode_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                              const c10::optional<at::Tensor>& bias);  // x (M, K) -> (M, N), rows independent
void gguf_check_blocks(const at::Tensor& blocks);  // contiguous uint8 (N, row bytes), or an error
void gguf_check_x(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                  const c10::optional<at::Tensor>& bias);  // x (M, K) float for these blocks, a bias of N, or an error
bool gguf_packs_rows(int64_t type, int64_t M);   // whether gguf_decode_into reads M rows' tiles for a ggml type
at::Tensor gguf_pack_rows(const at::Tensor& x);  // x (M, K) -> its tiles of 8 rows, as gguf_decode_into reads them
// Into y (M, N), a view with unit column stride; tiles: gguf_pack_rows(x), shared by a layer's parts, or undefined.
void gguf_decode_into(const at::Tensor& x, const at::Tensor& tiles, const at::Tensor& blocks, int64_t type,
                      at::Tensor& y, const c10::optional<at::Tensor>& bias);

// gguf_expand.cpp: the blocks expanded to float32.
at::Tensor gguf_dequantize(const at::Tensor& blocks, int64_t type, int64_t K);  // -> (N, K) float
at::Tensor gguf_rows(const at::Tensor& blocks, int64_t type, int64_t K, const at::Tensor& ids);  // (*ids, K)
at::Tensor gguf_prefill_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                               const c10::optional<at::Tensor>& bias);  // the decode product through at::mm, many rows

// q8_linear.cpp: the decode product with the activation rows rounded to int8 in blocks of 32 or 256 (x86, ARM64).
bool q8_available();                                             // whether this build has the kernels
bool q8_readable(int64_t type);                                  // whether a ggml type has one
void gguf_decode_q8_into(const std::vector<at::Tensor>& xq, const at::Tensor& blocks, int64_t type, at::Tensor& y,
                         const c10::optional<at::Tensor>& bias);  // into y (M, N), unit column stride
at::Tensor gguf_decode_q8_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                                 const c10::optional<at::Tensor>& bias);  // x (M, K) -> (M, N), rows independent

// q8_quantize.cpp: the activation rows rounded to int8, as those kernels read them.
std::vector<at::Tensor> q8_quantize(const at::Tensor& x, int64_t block);  // x (M, K) -> (q, d, Σx, Σq), block 32|256
int64_t q8_block(int64_t type);                                  // the block a type's kernel wants
