// The Python module of nsample's C++ kernels (nsample/cpu/kernels.py builds it).
#include <torch/extension.h>

#include "experts.h"
#include "linear.h"

std::vector<at::Tensor> split_rows(const at::Tensor& x);
at::Tensor join_levels(const at::Tensor& y, const at::Tensor& t1, const c10::optional<at::Tensor>& bias);
at::Tensor norm_linear(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear);
void linear_add(const at::Tensor& x, const Linear& linear, at::Tensor& h, double scale);
at::Tensor norm_swiglu(const at::Tensor& h, const c10::optional<at::Tensor>& w, double eps, const Linear& linear);
at::Tensor norm_geglu(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear);
void linear_norm_add(const at::Tensor& x, const Linear& linear, const at::Tensor& w, double eps, at::Tensor& h);
void soft_cap_(at::Tensor& x, double cap);
at::Tensor decode_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                            int64_t Hkv, double scale, const std::vector<int64_t>& groups,
                            const std::vector<at::Tensor>& own_k, const std::vector<at::Tensor>& own_v,
                            const std::vector<int64_t>& segments, const std::vector<at::Tensor>& prefix_k,
                            const std::vector<at::Tensor>& prefix_v, int64_t window, double softcap,
                            const c10::optional<at::Tensor>& sinks);
at::Tensor prefill_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                             int64_t Hkv, double scale, const std::vector<int64_t>& chunks,
                             const std::vector<at::Tensor>& prompt_k, const std::vector<at::Tensor>& prompt_v,
                             int64_t window, double softcap, const c10::optional<at::Tensor>& sinks);
at::Tensor race_sample(const at::Tensor& probs, const at::Tensor& seeds, const at::Tensor& positions,
                       const at::Tensor& token_hash);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("split_rows", &split_rows, "int8_rows.cpp: activation rows to two int8 levels");
  m.def("join_levels", &join_levels, "int8_rows.cpp: the four level products to the output");
  m.def("gguf_dequantize", &gguf_dequantize, "gguf_expand.cpp: blocks (N, row bytes), type id, K -> (N, K) float");
  m.def("gguf_rows", &gguf_rows, "gguf_expand.cpp: blocks, type id, K, int64 ids -> (*ids, K) float, the rows");
  m.def("gguf_decode_linear", &gguf_decode_linear,
        "gguf_linear.cpp: x (M, K), blocks (N, row bytes), type id, bias or None -> (M, N), rows independent");
  m.def("gguf_prefill_linear", &gguf_prefill_linear,
        "gguf_expand.cpp: the same product through at::mm on tiles of expanded weights, for many rows");
  m.def("q8_available", &q8_available, "q8_linear.cpp: whether this build decodes with int8 activations");
  m.def("q8_readable", &q8_readable, "q8_linear.cpp: whether a ggml type id has an int8-activation kernel");
  m.def("q8_quantize", &q8_quantize,
        "q8_quantize.cpp: x (M, K), block 32 or 256 -> (int8 q, scale d per block, float Σx per 32, int16 Σq per 16 "
        "for block 256)");
  m.def("q8_block", &q8_block, "q8_quantize.cpp: the block a ggml type's activations are rounded in (32 or 256)");
  m.def("gguf_decode_q8_linear", &gguf_decode_q8_linear,
        "q8_linear.cpp: gguf_decode_linear with the activations rounded to int8 in blocks of 32, rows independent");
  // module_local: each instruction set's build is a module of its own with its own Linear, and one process may load
  // two (a test forcing AVX2 beside the AVX-512 default); a global registration would clash.
  pybind11::class_<Linear>(m, "Linear", pybind11::module_local(),
                           "linear.h: a linear layer, parts on GGUF blocks or two-level int8")
      .def("__call__", &Linear::operator(), "x (M, K) float -> (M, N) float");
  m.def("gguf_block_linear", &gguf_block_linear,
        "linear.h: a layer of GGUF block parts side by side (list of blocks, list of type ids, bias or None, int8 "
        "activations)",
        pybind11::arg("blocks"), pybind11::arg("types"), pybind11::arg("bias"), pybind11::arg("q8") = false);
  pybind11::class_<Experts>(m, "Experts", pybind11::module_local(),
                            "experts.h: a mixture of experts' layer on GGUF expert tensors")
      .def("__call__", &Experts::operator(),
           "x (T, H) float, experts (T, k) int64, weights (T, k) float -> (T, H) float");
  m.def("gguf_experts", &gguf_experts,
        "moe.cpp: the experts of a layer (gate rows, type, up rows, type, down rows, type, number of experts, int8 "
        "activations for gate|up, for down, gpt-oss's biases of gate|up and of down or None, its SwiGLU's [alpha, "
        "limit] or [])",
        pybind11::arg("gate"), pybind11::arg("gate_type"), pybind11::arg("up"), pybind11::arg("up_type"),
        pybind11::arg("down"), pybind11::arg("down_type"), pybind11::arg("num_experts"), pybind11::arg("q8_gate_up"),
        pybind11::arg("q8_down"), pybind11::arg("gate_up_bias") = c10::nullopt,
        pybind11::arg("down_bias") = c10::nullopt, pybind11::arg("swiglu") = std::vector<double>{});
  m.def("int8_linear", &int8_linear, "linear.h: a two-level int8 layer (packed, scales, zero points, bias or None)");
  m.def("norm_linear", &norm_linear, "decode_layer.cpp: RMSNorm, then a linear layer");
  m.def("linear_add", &linear_add, "decode_layer.cpp: a linear layer, added into the residual");
  m.def("norm_swiglu", &norm_swiglu, "decode_layer.cpp: RMSNorm (or none: None), gate|up, SiLU(gate)·up");
  m.def("norm_geglu", &norm_geglu, "decode_layer.cpp: RMSNorm, gate|up, GELU-tanh(gate)·up");
  m.def("soft_cap_", &soft_cap_, "decode_layer.cpp: x = cap·tanh(x / cap) in place, each element alone");
  m.def("linear_norm_add", &linear_norm_add, "decode_layer.cpp: a linear layer, its RMSNorm added into the residual");
  m.def("decode_attention", &decode_attention, "attention.cpp: rotary, KV append, attention of a decode step");
  m.def("prefill_attention", &prefill_attention,
        "attention.cpp: rotary, KV store and attention of a prefill of short prompts' chunks");
  m.def("race_sample", &race_sample, "race.cpp: probs (R, V), seeds, positions (R,), token hashes (V,) -> tokens (R,)");
}
