// The exponential race of sampler.py's sample(), one pass a row: each token's Exp(1) draw from its counter-based
// hash (sampler.race_noise: splitmix64 of the row's seed and position, murmur3's fmix32 of that key ^ the token's
// hash, 24 bits to u in (0, 1), E = -log u), the token's probability divided by it, and the running argmax, in
// vector registers. torch's ops write and read the (R, V) noise some twenty times instead (a few ms a step at 8
// rows of a 49152-token vocabulary).
// The same tokens as sampler.py's torch ops: the hashes are exact integer arithmetic, u the same float32 operations
// (the top bits' u, which rounds to 1, stopping at the largest float below it), the division IEEE, ties go to the
// first token as in torch.argmax, and a row with a NaN takes its first NaN, as torch.argmax does. The one
// difference: log is at::vec's (Sleef, within 1 ulp) on every token, where torch's log_ takes std::log for the few
// elements at the end of each thread's share; a token can differ only where its row's two best scores tie to the
// last bit.
// Rows are independent: each is one thread's loop over its own tokens.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace {

using Vec = at::vec::Vectorized<float>;
using Ints = at::vec::Vectorized<int32_t>;
constexpr int S = Vec::size();
constexpr float below_one = 1.0f - 1.0f / 16777216.0f;  // sampler.BELOW_ONE

uint64_t splitmix64(uint64_t z) {  // the finalizer of sampler.race_noise's key, on the row's seed·golden + position
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// murmur3's fmix32 on S lanes: at::vec's >> on int32 is arithmetic, so each shift is masked to a logical one.
Ints fmix32(Ints h) {
  h = h ^ ((h >> Ints(16)) & Ints(0xFFFF));
  h = h * Ints(static_cast<int32_t>(0x85ebca6bu));
  h = h ^ ((h >> Ints(13)) & Ints(0x7FFFF));
  h = h * Ints(static_cast<int32_t>(0xc2b2ae35u));
  return h ^ ((h >> Ints(16)) & Ints(0xFFFF));
}

// The running argmax of one row, lane by lane: each lane's best score so far, its token, and whether it saw a NaN.
struct Race {
  Vec best{-std::numeric_limits<float>::infinity()};
  Ints where{0}, nan{0};

  // Tokens t .. t + S - 1: their probabilities p and token hashes th, the row's key.
  // -log u >= 1 - u, so p / E <= p / (1 - u). A lane where p·(1 + 2^-10) < best·(1 - u) cannot beat its best (the
  // margin covers the roundings of E, the division and these products; a NaN p fails the test and is counted), so
  // where every lane is such, the log and the division, most of the work, are skipped: the same tokens.
  void add(const Vec& p, const Ints& th, int32_t key, int64_t t) {
    const Ints h = fmix32(th ^ Ints(key));
    const Vec u = at::vec::minimum((at::vec::convert<float>((h >> Ints(8)) & Ints(0xFFFFFF)) + Vec(0.5f)) *
                                       Vec(1.0f / 16777216.0f), Vec(below_one));  // in (0, 1)
    if ((p * Vec(1.0f + 1.0f / 1024) < best * (Vec(1.0f) - u)).zero_mask() == 0) return;
    const Vec score = p / u.log().neg();
    const Ints at = Ints::arange(static_cast<int32_t>(t), 1);
    const Ints better = at::vec::cast<int32_t>(score > best);  // strictly: a lane keeps its first maximum
    best = Vec::blendv(best, score, at::vec::cast<float>(better));
    where = Ints::blendv(where, at, better);
    nan = nan | at::vec::cast<int32_t>(score != score);
  }
};

// The token a row draws: argmax over t < V of probs[t] / E_t, E_t from (key, token_hash[t]).
int64_t race_row(const float* probs, const int32_t* token_hash, int64_t V, int32_t key) {
  Race race;
  const int64_t whole = V - V % S;
  for (int64_t t = 0; t < whole; t += S) race.add(Vec::loadu(probs + t), Ints::loadu(token_hash + t), key, t);
  if (whole < V) {  // the last part vector through full-width copies (at::vec's AVX2 partial int load goes through
    alignas(64) float p[S];  // memory lane by lane, a stalled store-to-load each vector, where it was in the loop);
    alignas(64) int32_t th[S] = {};  // lanes past the vocabulary score -inf / E = -inf and never win
    std::fill(p, p + S, -std::numeric_limits<float>::infinity());
    std::copy(probs + whole, probs + V, p);
    std::copy(token_hash + whole, token_hash + V, th);
    race.add(Vec::loadu(p), Ints::loadu(th), key, whole);
  }
  alignas(64) float b[S];
  alignas(64) int32_t w[S], n[S];
  race.best.store(b);
  race.where.store(w);
  race.nan.store(n);
  int lane = 0;
  bool any_nan = false;
  for (int i = 0; i < S; ++i) {  // the best lane; among equal ones, the first token
    any_nan = any_nan || n[i];
    if (b[i] > b[lane] || (b[i] == b[lane] && w[i] < w[lane])) lane = i;
  }
  if (any_nan) {  // as torch.argmax: the first NaN (a row whose logits were NaN)
    for (int64_t t = 0; t < V; ++t)
      if (std::isnan(probs[t])) return t;
    return 0;  // the division made it NaN: every probability was 0 and E infinite, which u in (0, 1) rules out
  }
  return w[lane];
}

}  // namespace

// probs (R, V) float, after softmax; seeds, positions (R,) int64; token_hash (V,) int32 (sampler._token_hashes)
// -> tokens (R,) int64: sampler.sample's race for every row.
at::Tensor race_sample(const at::Tensor& probs, const at::Tensor& seeds, const at::Tensor& positions,
                       const at::Tensor& token_hash) {
  TORCH_CHECK(probs.dim() == 2 && probs.scalar_type() == at::kFloat && probs.is_contiguous(),
              "probs: contiguous float (R, V)");
  const int64_t R = probs.size(0), V = probs.size(1);
  TORCH_CHECK(seeds.scalar_type() == at::kLong && positions.scalar_type() == at::kLong && seeds.numel() == R &&
                  positions.numel() == R,
              "seeds, positions: int64 (R,)");
  TORCH_CHECK(token_hash.scalar_type() == at::kInt && token_hash.is_contiguous() && token_hash.numel() == V,
              "token_hash: contiguous int32 (V,)");
  const auto s = seeds.contiguous(), p = positions.contiguous();
  auto tokens = at::empty({R}, seeds.options());
  const int64_t *sp = s.data_ptr<int64_t>(), *pp = p.data_ptr<int64_t>();
  int64_t* out = tokens.data_ptr<int64_t>();
  const float* pr = probs.data_ptr<float>();
  const int32_t* th = token_hash.data_ptr<int32_t>();
  at::parallel_for(0, R, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint64_t key = splitmix64(static_cast<uint64_t>(sp[r]) * 0x9e3779b97f4a7c15ULL +
                                      static_cast<uint64_t>(pp[r]));
      out[r] = race_row(pr + r * V, th, V, static_cast<int32_t>(static_cast<uint32_t>(key)));
    }
  });
  return tokens;
}
