// A GGUF tensor's weights expanded to float32 from the file's blocks (gguf_formats.h): all rows (gguf_dequantize),
// the rows of an embedding lookup (gguf_rows), or a tile of weight rows at a time handed to at::mm (MKL's sgemm) for
// a prefill's many rows (gguf_prefill_linear). The decode product, which expands each block once for a tile of
// activation rows, is gguf_linear.cpp's.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "gguf_formats.h"
#include "linear.h"

namespace {

// Weight rows [n0, n1) expanded to out (n1 - n0, K), each from its own blocks.
template <class F>
void expand_rows(const uint8_t* w, int64_t row, int64_t K, const int64_t* ids, int64_t n0, int64_t n1, float* out) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* src = w + (ids ? ids[n] : n) * row;
    float* dst = out + (n - n0) * K;
    for (int64_t b = 0; b < K / F::WEIGHTS; ++b) F::expand(src + b * F::BYTES, dst + b * F::WEIGHTS);
  }
}

// Rows of blocks expanded into out (n, K): rows id[0 .. n) of the blocks, or rows 0 .. n when id is null.
void expand_into(const at::Tensor& blocks, int64_t type, int64_t K, const int64_t* id, int64_t n, at::Tensor& out) {
  gguf::with_format(type, [&](auto f) {
    using F = decltype(f);
    const int64_t row = gguf::row_bytes<F>(K);
    TORCH_CHECK(blocks.size(1) == row, "blocks: ", blocks.size(1), " bytes a row, not ", row);
    const uint8_t* w = blocks.data_ptr<uint8_t>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, n, 16, [&](int64_t i0, int64_t i1) { expand_rows<F>(w, row, K, id, i0, i1, o + i0 * K); });
  });
}

}  // namespace

at::Tensor gguf_dequantize(const at::Tensor& blocks, int64_t type, int64_t K) {
  gguf_check_blocks(blocks);
  auto out = at::empty({blocks.size(0), K}, blocks.options().dtype(at::kFloat));
  expand_into(blocks, type, K, nullptr, blocks.size(0), out);
  return out;
}

at::Tensor gguf_rows(const at::Tensor& blocks, int64_t type, int64_t K, const at::Tensor& ids) {
  gguf_check_blocks(blocks);
  TORCH_CHECK(ids.scalar_type() == at::kLong, "ids: int64");
  const auto flat = ids.contiguous().view(-1);
  const int64_t N = blocks.size(0), n = flat.numel();
  const int64_t* id = flat.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) TORCH_CHECK(id[i] >= 0 && id[i] < N, "ids: ", id[i], " is not a row of ", N);
  auto shape = ids.sizes().vec();
  shape.push_back(K);
  auto out = at::empty(shape, blocks.options().dtype(at::kFloat));
  expand_into(blocks, type, K, id, n, out);
  return out;
}

// Prefill: each thread expands a tile of weight rows (about 1 MiB of float32, within L2) and multiplies it into
// its columns of the output with one-thread at::mm calls (MKL's sgemm), ROWS activation rows at a time, the last
// ones padded with zeros. Every call has the same shape, and MKL computes each row of such a product the same
// wherever it sits among the ROWS (checked for 8, 16 and 32 rows and this project's shapes: a row in any position
// gave bitwise the same outputs; a product of another M did not), so a prompt's rows do not depend on the prompts
// packed with it, as in decode. Measured at K = N = 2048, Q4_K, 2 threads, before the row tiles: 2.2-2.4 ms at
// M = 16 and 14.7-15.7 ms at M = 256, as fast as at::mm on float32 weights (2.4 and 15.8 ms); expanding each tile
// on both threads and letting at::mm use both took 3.8-5.4 and 16.6-22 ms. Row tiles of 32 cost ~10% at M = 256.
// A last tile of at most HALF rows is HALF wide, where MKL gives a row of an (n, HALF) product bitwise as of an
// (n, ROWS) one (`narrow_matches`, checked once per tile shape in the thread that multiplies, as nothing in its
// interface promises it): a 16-token prompt no longer pays for 32 rows (5632x2048 Q4_K, 2 threads: 5.9 -> 4.4 ms).
constexpr int64_t ROWS = 32, HALF = 16;

// Whether a row of an (n, K) weight tile times (K, HALF) activations comes out bitwise as in the (K, ROWS) product:
// MKL picks its kernel by shape, so it is checked for each shape once, on fixed numbers (not torch's generator).
bool narrow_matches(int64_t n, int64_t K, const at::TensorOptions& options) {
  static std::mutex lock;
  static std::map<std::pair<int64_t, int64_t>, bool> checked;
  std::lock_guard<std::mutex> guard(lock);
  auto [it, fresh] = checked.try_emplace({n, K}, false);
  if (fresh) {  // as the products below are made: at::mm_out into (n, ROWS) and (n, HALF) buffers
    const auto w = at::sin(at::arange(n * K, options).mul_(0.7071f)).view({n, K});
    const auto x = at::cos(at::arange(K * ROWS, options).mul_(1.3f)).view({K, ROWS});
    auto wide = at::empty({n, ROWS}, options), narrow = at::empty({n, HALF}, options);
    at::mm_out(wide, w, x);
    at::mm_out(narrow, w, x.narrow(1, 0, HALF).contiguous());
    it->second = at::equal(wide.narrow(1, 0, HALF), narrow);
  }
  return it->second;
}

namespace {
// dst[j·ld_dst + i] = src[i·ld_src + j] for i < n, j < m: at::vec's blocked transposes (16 x 16 on AVX-512, 8 x 8
// on AVX2, plain loops at the edges and elsewhere), where ATen's copy_ of a transposed view took some 10 us a tile.
void transpose(const float* src, int64_t ld_src, float* dst, int64_t ld_dst, int64_t n, int64_t m) {
#if defined(CPU_CAPABILITY_AVX512)
  at::vec::transpose_mxn<float>(src, ld_src, dst, ld_dst, n, m);
#else
  constexpr int B = 8;
  for (int64_t i = 0; i < n; i += B)
    for (int64_t j = 0; j < m; j += B) {
      const float* s = src + i * ld_src + j;
      float* d = dst + j * ld_dst + i;
      if (i + B <= n && j + B <= m) {
        at::vec::transpose_mxn<float, B, B>(s, ld_src, d, ld_dst);
      } else {
        const int rows = std::min<int64_t>(B, n - i), cols = std::min<int64_t>(B, m - j);
        at::vec::transpose_mxn<float>(s, ld_src, d, ld_dst, rows, cols);
      }
    }
#endif
}
}  // namespace

at::Tensor gguf_prefill_linear(const at::Tensor& x, const at::Tensor& blocks, int64_t type,
                               const c10::optional<at::Tensor>& bias) {
  gguf_check_x(x, blocks, type, bias);
  const int64_t M = x.size(0), K = x.size(1), N = blocks.size(0), tiles = (M + ROWS - 1) / ROWS;
  const int64_t T = std::max<int64_t>(16, (1 << 18) / K / 16 * 16);  // weight rows a tile
  const at::Tensor xp = M % ROWS ? at::cat({x, at::zeros({tiles * ROWS - M, K}, x.options())}) : x;
  // Each tile of rows transposed, (tiles, K, ROWS): MKL's product of a weight tile (n, K) with it runs 2-3x as fast
  // as the same product the other way round (activations (ROWS, K) times the tile transposed), one thread each.
  const at::Tensor xt = xp.view({tiles, ROWS, K}).transpose(1, 2).contiguous();
  const bool half_last = M % ROWS && M % ROWS <= HALF;  // the last tile's rows fit HALF columns
  const at::Tensor xh = half_last ? xt[tiles - 1].narrow(1, 0, HALF).contiguous() : at::Tensor();  // (K, HALF)
  auto y = at::empty({M, N}, x.options());
  gguf::with_format(type, [&](auto f) {
    using F = decltype(f);
    const int64_t row = gguf::row_bytes<F>(K);
    const uint8_t* w = blocks.data_ptr<uint8_t>();
    // InferenceMode is thread-local: the pool's threads take the caller's, or at::mm_out would refuse to write into
    // an inference tensor when the caller runs in it.
    const bool inference = c10::InferenceMode::is_enabled();
    at::parallel_for(0, (N + T - 1) / T, 1, [&](int64_t t0, int64_t t1) {
      c10::InferenceMode guard(inference);
      auto tile = at::empty({T, K}, x.options());
      auto out = at::empty({T, ROWS}, x.options());  // one product (n, ROWS), its row stride (ldc) always ROWS
      // or (n, HALF), for a last tile of at most HALF rows: allocated only where there is one
      auto out_half = half_last ? at::empty({T, HALF}, x.options()) : at::Tensor();
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n0 = t * T, n = std::min(T, N - n0);
        expand_rows<F>(w, row, K, nullptr, n0, n0 + n, tile.data_ptr<float>());
        const bool half = half_last && narrow_matches(n, K, x.options());
        for (int64_t r = 0; r < tiles; ++r) {
          const bool narrow = half && r == tiles - 1;
          auto product = (narrow ? out_half : out).narrow(0, 0, n);
          at::mm_out(product, tile.narrow(0, 0, n), narrow ? xh : xt[r]);
          const int64_t m = std::min(ROWS, M - r * ROWS);  // the product's columns are y's rows
          transpose(product.data_ptr<float>(), product.stride(0), y.data_ptr<float>() + r * ROWS * N + n0, N, n, m);
        }
      }
    });
  });
  if (bias.has_value()) y.add_(*bias);
  return y;
}
