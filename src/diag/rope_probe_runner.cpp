// RopeRunner and the distribution metrics (rope_probe_runner.h).
#include "diag/rope_probe_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/stop_point.h"

namespace llmctl {

namespace {

// Tokens per decode() call: bounds the logits held at once to (kChunk, n_vocab).
constexpr int64_t kChunk = 64;

ForwardOptions runner_options(int64_t max_len) {
  if (max_len < 1) throw Error(fmt::format("rope-probe: sequence length {} must be >= 1", max_len));
  ForwardOptions fo;
  fo.max_batch_tokens = std::min<int64_t>(max_len, 512);
  fo.kv.type = KvType::F32;
  fo.kv.n_blocks = (max_len + fo.kv.block_size - 1) / fo.kv.block_size;
  return fo;
}

// log sum_i exp(x[i]) in double.
double log_sum_exp(const float* x, int64_t n) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  return m + std::log(s);
}

}  // namespace

RopeRunner::RopeRunner(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                       int64_t max_len)
    : max_len_(max_len),
      n_vocab_(config.n_vocab),
      fwd_(config, weights, backend, runner_options(max_len)) {}

void RopeRunner::run(const std::vector<int32_t>& ids, RopePositions pos, bool all_rows,
                     const std::function<void(int64_t, const float*)>& row) {
  const auto n = static_cast<int64_t>(ids.size());
  if (n < 1 || n > max_len_)
    throw Error(fmt::format("rope-probe: a sequence of {} tokens, expected 1 .. {}", n, max_len_));
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (pos.offset < 0 || pos.offset + n > kMax)
    throw Error(fmt::format("rope-probe: RoPE offset {} for {} positions is outside [0, {}]",
                            pos.offset, n, kMax - n));
  const int32_t seq = fwd_.add_sequence(n);
  RopePositionMap map(seq, pos);  // declared first: it outlives `release`, which unsets it
  // Released on every path: the cache holds one sequence at a time.
  struct Release {
    Forward& f;
    int32_t s;
    ~Release() {
      f.set_observer(nullptr);
      f.remove_sequence(s);
    }
  } release{fwd_, seq};
  if (fwd_.reserve(seq, n) != Reserve::Ok) throw Error("rope-probe: the KV pool is too small");
  // Unshifted positions need no map: that run is the plain forward pass.
  if (pos.offset != 0 || pos.all_zero) fwd_.set_observer(&map);
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    stop_point();  // Ctrl-C between forward calls
    const int64_t i1 = std::min(n, i0 + kChunk);
    std::vector<BatchToken> batch;
    for (int64_t i = i0; i < i1; ++i)
      batch.push_back(BatchToken{seq, ids[static_cast<size_t>(i)], all_rows || i + 1 == n});
    const std::vector<float>& out = fwd_.decode(batch);
    int64_t r = 0;
    for (int64_t i = i0; i < i1; ++i)
      if (all_rows || i + 1 == n) row(i, out.data() + (r++) * n_vocab_);
  }
}

std::vector<float> RopeRunner::logits(const std::vector<int32_t>& ids, RopePositions pos,
                                      bool all_rows) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>((all_rows ? static_cast<int64_t>(ids.size()) : 1) * n_vocab_));
  run(ids, pos, all_rows, [&](int64_t, const float* l) { out.insert(out.end(), l, l + n_vocab_); });
  return out;
}

double RopeRunner::mean_nll(const std::vector<int32_t>& ids) {
  if (ids.size() < 2) throw Error("rope-probe: the reference text needs at least 2 tokens");
  double sum = 0;
  run(ids, RopePositions{}, true, [&](int64_t i, const float* l) {
    if (i + 1 < static_cast<int64_t>(ids.size()))
      sum -= log_prob(l, n_vocab_, ids[static_cast<size_t>(i + 1)]);
  });
  return sum / static_cast<double>(ids.size() - 1);
}

double kl_nats(const float* p_logits, const float* q_logits, int64_t n) {
  const double lp = log_sum_exp(p_logits, n);
  const double lq = log_sum_exp(q_logits, n);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double log_p = static_cast<double>(p_logits[i]) - lp;
    const double log_q = static_cast<double>(q_logits[i]) - lq;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);  // rounding can give -1e-17 for equal distributions
}

double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

double log_prob(const float* logits, int64_t n, int32_t id) {
  return static_cast<double>(logits[id]) - log_sum_exp(logits, n);
}

int64_t rank_of(const float* logits, int64_t n, int32_t id) {
  int64_t r = 0;
  for (int64_t i = 0; i < n; ++i)
    if (logits[i] > logits[id]) ++r;
  return r;
}

}  // namespace llmctl
