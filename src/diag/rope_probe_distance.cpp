// rope-probe's distance curve (rope_probe.h): BOS + fact + N filler tokens + cue, and the
// probability of the expected completion's first token after the cue as N doubles.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "diag/rope_probe.h"
#include "diag/rope_probe_runner.h"

namespace llmctl {

namespace {

// The first token `expected` adds after `cue` (encoded alone and together, without BOS).
int32_t expected_token(const Tokenizer& tok, const std::string& cue, const std::string& expected) {
  const std::vector<int32_t> a = tok.encode(cue, false);
  const std::vector<int32_t> ab = tok.encode(cue + expected, false);
  if (ab.size() <= a.size() || !std::equal(a.begin(), a.end(), ab.begin()))
    throw Error(fmt::format("rope-probe: the expected completion '{}' does not start a new token "
                            "after the cue '{}'",
                            expected, cue),
                "start the completion with a space, e.g. --expect ' Sue'");
  return ab[a.size()];
}

// The filler counts: 0, 1, 2, 4 ... while the sequence fits in n_ctx, and the largest that fits.
std::vector<int64_t> filler_counts(int64_t fixed, int64_t n_ctx) {
  std::vector<int64_t> v = {0};
  for (int64_t n = 1; fixed + n <= n_ctx; n *= 2) v.push_back(n);
  if (n_ctx - fixed > v.back()) v.push_back(n_ctx - fixed);
  return v;
}

DistanceCurve curve(const ModelConfig& c, const ModelWeights& w, Backend& b,
                    const std::vector<int32_t>& fact, const std::vector<int32_t>& filler,
                    const std::vector<int32_t>& cue, int32_t expected,
                    const std::vector<int64_t>& counts) {
  const auto fixed = static_cast<int64_t>(fact.size() + cue.size());
  RopeRunner run(c, w, b, fixed + counts.back());
  DistanceCurve out;
  std::vector<float> first;
  for (const int64_t n : counts) {
    std::vector<int32_t> ids = fact;
    for (int64_t i = 0; i < n; ++i) ids.push_back(filler[static_cast<size_t>(i) % filler.size()]);
    ids.insert(ids.end(), cue.begin(), cue.end());
    const std::vector<float> l = run.logits(ids, RopePositions{}, false);
    if (first.empty()) first = l;
    DistancePoint p;
    p.n_filler = n;
    p.n_tokens = static_cast<int64_t>(ids.size());
    p.p_expected = std::exp(log_prob(l.data(), c.n_vocab, expected));
    p.rank = rank_of(l.data(), c.n_vocab, expected);
    p.kl_vs_0 = kl_nats(first.data(), l.data(), c.n_vocab);
    out.points.push_back(p);
  }
  return out;
}

}  // namespace

DistanceResult probe_distance(const ModelConfig& c, const ModelWeights& w, Backend& b,
                              const Tokenizer& tok, const RopeProbeOptions& opt) {
  const bool bos = tok.bos_id() >= 0 && tok.add_bos_default();
  const std::vector<int32_t> fact = tok.encode(opt.fact, bos);
  const std::vector<int32_t> filler = tok.encode(opt.filler, false);
  const std::vector<int32_t> cue = tok.encode(opt.cue, false);
  if (fact.empty() || filler.empty() || cue.empty())
    throw Error("rope-probe: the distance probe's fact, filler and cue must each be non-empty");
  const int64_t n_ctx = opt.distance_ctx > 0 ? opt.distance_ctx : c.n_ctx_train;
  const auto fixed = static_cast<int64_t>(fact.size() + cue.size());
  if (fixed > n_ctx)
    throw Error(
        fmt::format("rope-probe: fact and cue take {} tokens, more than the distance "
                    "context {}",
                    fixed, n_ctx));
  DistanceResult r;
  r.expected_id = expected_token(tok, opt.cue, opt.expected);
  r.expected_piece = tok.piece(r.expected_id);
  const std::vector<int64_t> counts = filler_counts(fixed, n_ctx);
  r.curves.push_back(curve(c, w, b, fact, filler, cue, r.expected_id, counts));
  r.curves.back().label = "configured";
  if (opt.theta || opt.linear_scale) {
    ModelConfig v = c;
    std::string label;
    if (opt.theta) {
      v.rope_freq_base = *opt.theta;
      label = fmt::format("theta {:g}", *opt.theta);
    }
    if (opt.linear_scale) {
      v.rope_scaling_type = "linear";
      v.rope_scaling_factor = *opt.linear_scale;
      v.rope_freq_scale = 1.0 / *opt.linear_scale;
      label += fmt::format("{}linear x{:g}", label.empty() ? "" : ", ", *opt.linear_scale);
    }
    r.curves.push_back(curve(v, w, b, fact, filler, cue, r.expected_id, counts));
    r.curves.back().label = label;
  }
  return r;
}

}  // namespace llmctl
