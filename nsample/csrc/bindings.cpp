// The Python module of nsample's C++ kernels (nsample/kernels.py builds it).
#include <torch/extension.h>

#include "linear.h"

std::vector<at::Tensor> split_rows(const at::Tensor& x);
at::Tensor join_levels(const at::Tensor& y, const at::Tensor& t1, const c10::optional<at::Tensor>& bias);
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& q, const at::Tensor& d, const at::Tensor& m,
                     const c10::optional<at::Tensor>& bias);
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& q, const at::Tensor& d,
                     const c10::optional<at::Tensor>& bias);
at::Tensor norm_linear(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear);
void linear_add(const at::Tensor& x, const Linear& linear, at::Tensor& h);
at::Tensor norm_swiglu(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear);
at::Tensor decode_attention(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H,
                            int64_t Hkv, double scale, const std::vector<int64_t>& groups,
                            const std::vector<at::Tensor>& own_k, const std::vector<at::Tensor>& own_v,
                            const std::vector<int64_t>& segments, const std::vector<at::Tensor>& prefix_k,
                            const std::vector<at::Tensor>& prefix_v);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("split_rows", &split_rows, "int8_rows.cpp: activation rows to two int8 levels");
  m.def("join_levels", &join_levels, "int8_rows.cpp: the four level products to the output");
  m.def("q4_linear", &q4_linear, "block_rows.cpp: a linear layer on 4-bit blocks (Q4_1), float32 sums");
  m.def("q8_linear", &q8_linear, "block_rows.cpp: a linear layer on 8-bit blocks (Q8_0), float32 sums");
  pybind11::class_<Linear>(m, "Linear", "linear.h: a linear layer, on blocks or two-level int8")
      .def("__call__", &Linear::operator(), "x (M, K) float -> (M, N) float");
  m.def("block_linear", &block_linear, "linear.h: a layer on a GGUF's blocks (q, d, m or None, bias or None)");
  m.def("int8_linear", &int8_linear, "linear.h: a two-level int8 layer (packed, scales, zero points, bias or None)");
  m.def("norm_linear", &norm_linear, "decode_layer.cpp: RMSNorm, then a linear layer");
  m.def("linear_add", &linear_add, "decode_layer.cpp: a linear layer, added into the residual");
  m.def("norm_swiglu", &norm_swiglu, "decode_layer.cpp: RMSNorm, gate|up, SiLU(gate)·up");
  m.def("decode_attention", &decode_attention, "decode_layer.cpp: rotary, KV append, attention of a decode step");
}
