// Sampler: the steps in the order sampler.h documents, one function per step.
#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace llmctl {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending logit, ties to the lower id: the one total order every step uses, so the result
// never depends on what std::sort or std::nth_element do with equal keys.
struct Before {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    if (a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
  }
};

// The errors of step 0 and of an all -inf row, shared by both paths so they say the same.
[[noreturn]] void throw_bad_logit(int32_t id, bool nan) {
  throw Error(fmt::format("sampler: logits contain {} at id {}", nan ? "NaN" : "+inf", id));
}

[[noreturn]] void throw_all_neg_inf(int32_t n_vocab) {
  throw Error(
      fmt::format("sampler: all {} logits are -inf (after penalties); nothing to sample", n_vocab));
}

}  // namespace

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------
// Written as !(x >= lo) rather than x < lo so that NaN fails every check.
void validate_sampler_params(const SamplerParams& p) {
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    throw Error(fmt::format("sampler: temperature must be finite and >= 0 (0 = greedy), got {}",
                            p.temperature));
  if (p.top_k < 0)
    throw Error(fmt::format("sampler: top_k must be >= 0 (0 = off), got {}", p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    throw Error(fmt::format("sampler: top_p must be in (0, 1] (1 = off), got {}", p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    throw Error(fmt::format("sampler: min_p must be in [0, 1] (0 = off), got {}", p.min_p));
  if (!(p.repeat_penalty > 0.0f) || std::isinf(p.repeat_penalty))
    throw Error(fmt::format("sampler: repeat_penalty must be finite and > 0 (1 = off), got {}",
                            p.repeat_penalty));
  if (p.repeat_last_n < -1)
    throw Error(fmt::format(
        "sampler: repeat_last_n must be >= -1 (0 = penalties off, -1 = whole history), got {}",
        p.repeat_last_n));
  if (!std::isfinite(p.presence_penalty))
    throw Error(
        fmt::format("sampler: presence_penalty must be finite, got {}", p.presence_penalty));
  if (!std::isfinite(p.frequency_penalty))
    throw Error(
        fmt::format("sampler: frequency_penalty must be finite, got {}", p.frequency_penalty));
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
  validate_sampler_params(params_);
}

void Sampler::accept(int32_t token) {
  if (token < 0) throw Error(fmt::format("sampler: accepted token id {} is negative", token));
  history_.push_back(token);
}

void Sampler::reset() {
  history_.clear();
  rng_.reseed(params_.seed);
}

// ---------------------------------------------------------------------------
// 1. Penalties, on logits_ indexed by id
// ---------------------------------------------------------------------------
void Sampler::apply_penalties(int32_t n_vocab) {
  const SamplerParams& p = params_;
  if (p.repeat_last_n == 0 || history_.empty()) return;
  if (p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  const size_t n = p.repeat_last_n < 0
                       ? history_.size()
                       : std::min(history_.size(), static_cast<size_t>(p.repeat_last_n));
  // Count each distinct id in the window by sorting a copy: the window is small (64 by
  // default) and this needs no hash map whose iteration order could vary.
  window_.assign(history_.end() - static_cast<std::ptrdiff_t>(n), history_.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    const int32_t id = window_[i];
    size_t j = i;
    while (j < window_.size() && window_[j] == id) ++j;
    const auto count = static_cast<float>(j - i);
    i = j;
    if (id >= n_vocab)
      throw Error(fmt::format(
          "sampler: token id {} in the penalty history is outside the vocabulary (n_vocab {})", id,
          n_vocab));
    float& l = logits_[static_cast<size_t>(id)];
    l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= count * p.frequency_penalty + p.presence_penalty;
  }
}

// ---------------------------------------------------------------------------
// 3. Candidates, cut to top-k (and sorted) when top-k is on
// ---------------------------------------------------------------------------
void Sampler::build_candidates(int32_t n_vocab) {
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i)
    cand_[static_cast<size_t>(i)] = {i, logits_[static_cast<size_t>(i)], 0.0f};
  sorted_ = false;
  const int32_t k = params_.top_k;
  if (k > 0 && k < n_vocab) {
    // nth_element puts the k best first in O(n); only those k are then sorted.
    const auto kth = cand_.begin() + k;
    std::nth_element(cand_.begin(), kth - 1, cand_.end(), Before{});
    cand_.resize(static_cast<size_t>(k));
    std::sort(cand_.begin(), cand_.end(), Before{});
    sorted_ = true;
  }
}

// ---------------------------------------------------------------------------
// 4 + 5. Temperature and softmax: p_i = exp((l_i - l_max) / T) / sum
// ---------------------------------------------------------------------------
void Sampler::softmax_with_temperature() {
  float l_max = kNegInf;
  for (const Candidate& c : cand_) l_max = std::max(l_max, c.logit);
  const float t = params_.temperature;
  double sum = 0.0;  // many small terms over a large vocabulary: accumulate in double
  for (Candidate& c : cand_) {
    c.p = std::exp((c.logit - l_max) / t);
    sum += static_cast<double>(c.p);
  }
  // The l_max term is exp(0) = 1, so sum >= 1.
  const auto inv = static_cast<float>(1.0 / sum);
  for (Candidate& c : cand_) c.p *= inv;
}

// ---------------------------------------------------------------------------
// 6 + 7. top-p, then min-p
// ---------------------------------------------------------------------------
void Sampler::cut_top_p_min_p() {
  if (params_.top_p < 1.0f) {
    const auto target = static_cast<double>(params_.top_p);
    // Without top-k the candidates are unsorted. The nucleus is usually a small part of the
    // vocabulary, so sort only a growing prefix (256, 1024, ... candidates) until its mass
    // reaches top_p, instead of sorting all 128k. Each round sorts only the new part: the
    // prefix already sorted holds the best candidates, so the next ones come from the rest.
    // The order is total (ties go to the lower id), so the result equals a full sort's.
    const size_t n = cand_.size();
    size_t sorted_n = sorted_ ? n : 0;
    size_t keep = 0;
    double cum = 0.0;
    for (size_t m = 256;; m *= 4) {
      if (sorted_n < n) {
        // nth_element + sort rather than partial_sort: partial_sort is a heap, several times
        // slower than introsort once the prefix is thousands long.
        const auto first = cand_.begin() + static_cast<std::ptrdiff_t>(sorted_n);
        const auto last = cand_.begin() + static_cast<std::ptrdiff_t>(std::min(m, n));
        std::nth_element(first, last - 1, cand_.end(), Before{});
        std::sort(first, last, Before{});
        sorted_n = std::min(m, n);
      }
      while (keep < sorted_n && cum < target) cum += static_cast<double>(cand_[keep++].p);
      // Stop once the prefix reaches top_p, or when everything is sorted (rounding can keep the
      // total just below top_p; then every candidate stays).
      if (cum >= target || sorted_n == n) break;
    }
    cand_.resize(keep);
    sorted_ = true;
  }
  if (params_.min_p > 0.0f) {
    float p_max = 0.0f;
    for (const Candidate& c : cand_) p_max = std::max(p_max, c.p);
    const float threshold = params_.min_p * p_max;
    // remove_if keeps the survivors' order (sorted or id order); the p_max token always stays.
    cand_.erase(std::remove_if(cand_.begin(), cand_.end(),
                               [threshold](const Candidate& c) { return c.p < threshold; }),
                cand_.end());
  }
}

// ---------------------------------------------------------------------------
// prepare(): 0. check, 1. penalties, 2. greedy, 3-7 above
// ---------------------------------------------------------------------------
int32_t Sampler::prepare(const float* logits, int32_t n_vocab) {
  if (n_vocab <= 0) throw Error(fmt::format("sampler: n_vocab must be > 0, got {}", n_vocab));
  if (logits == nullptr) throw Error("sampler: logits is null");
  logits_.assign(logits, logits + n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float l = logits_[static_cast<size_t>(i)];
    if (std::isnan(l)) throw_bad_logit(i, true);
    if (l == std::numeric_limits<float>::infinity()) throw_bad_logit(i, false);
  }

  apply_penalties(n_vocab);

  // Greedy argmax (also the check that something is finite): strict > keeps the lowest id.
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; ++i)
    if (logits_[static_cast<size_t>(i)] > logits_[static_cast<size_t>(best)]) best = i;
  if (logits_[static_cast<size_t>(best)] == kNegInf) throw_all_neg_inf(n_vocab);
  if (params_.temperature == 0.0f) return best;

  build_candidates(n_vocab);
  finish_candidates();
  return -1;
}

void Sampler::finish_candidates() {
  softmax_with_temperature();
  cut_top_p_min_p();
  // A -inf logit, or one that underflowed, has p = 0: it can never be drawn, so drop it.
  cand_.erase(
      std::remove_if(cand_.begin(), cand_.end(), [](const Candidate& c) { return !(c.p > 0.0f); }),
      cand_.end());
  LLMCTL_ASSERT(!cand_.empty());  // the l_max token has p > 0 and survives every cut
}

// ---------------------------------------------------------------------------
// From candidates (sampler.h "Sampling from candidates" gives the step-by-step argument)
// ---------------------------------------------------------------------------
int32_t Sampler::candidates_needed(int32_t n_vocab) const {
  const SamplerParams& p = params_;
  const bool penalties =
      p.repeat_last_n != 0 &&
      (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
  if (penalties || n_vocab <= 0) return 0;
  if (p.temperature == 0.0f) return 1;
  return p.top_k > 0 && p.top_k < n_vocab ? p.top_k : 0;
}

int32_t Sampler::prepare_top_k(const TopLogits& c) {
  const int32_t need = candidates_needed(c.n_vocab);
  if (need == 0 || c.k < need || c.ids == nullptr || c.values == nullptr)
    throw Error(fmt::format("sampler: {} candidates of a row of {} given, these parameters need {}",
                            c.k, c.n_vocab, need == 0 ? "the whole row" : std::to_string(need)));
  // 0. The first bad id in id order, as prepare()'s scan meets it.
  if (c.first_nan >= 0 && (c.first_inf < 0 || c.first_nan < c.first_inf))
    throw_bad_logit(c.first_nan, true);
  if (c.first_inf >= 0) throw_bad_logit(c.first_inf, false);
  for (int32_t i = 0; i < need; ++i)
    if (c.ids[i] < 0 || c.ids[i] >= c.n_vocab || std::isnan(c.values[i]) ||
        c.values[i] == std::numeric_limits<float>::infinity())
      throw Error(
          fmt::format("sampler: candidate {} (id {}, logit {}) is not a finite or -inf "
                      "logit of the row of {}, though the row was said to hold none",
                      i, c.ids[i], c.values[i], c.n_vocab));
  // 1. Penalties: off (candidates_needed). 2. Greedy: the first candidate is the argmax.
  if (c.values[0] == kNegInf) throw_all_neg_inf(c.n_vocab);
  if (params_.temperature == 0.0f) return c.ids[0];
  // 3. top-k: the candidates are build_candidates()' cand_, in its order.
  cand_.resize(static_cast<size_t>(need));
  for (int32_t i = 0; i < need; ++i) cand_[static_cast<size_t>(i)] = {c.ids[i], c.values[i], 0.0f};
  sorted_ = true;
  finish_candidates();
  return -1;
}

int32_t Sampler::sample_top_k(const TopLogits& c) {
  const int32_t greedy = prepare_top_k(c);
  return greedy >= 0 ? greedy : draw();
}

std::vector<Sampler::TokenProb> Sampler::probabilities(const float* logits, int32_t n_vocab) {
  const int32_t greedy = prepare(logits, n_vocab);
  if (greedy >= 0) return {{greedy, 1.0f}};
  double total = 0.0;
  for (const Candidate& c : cand_) total += static_cast<double>(c.p);
  std::vector<TokenProb> out;
  out.reserve(cand_.size());
  for (const Candidate& c : cand_)
    out.push_back({c.id, static_cast<float>(static_cast<double>(c.p) / total)});
  return out;
}

// ---------------------------------------------------------------------------
// sample(): prepare, then 8. draw
// ---------------------------------------------------------------------------
int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
  const int32_t greedy = prepare(logits, n_vocab);
  return greedy >= 0 ? greedy : draw();
}

int32_t Sampler::draw() {
  // One RNG step, scaled by the kept mass (this is the renormalization after the cuts).
  double total = 0.0;
  for (const Candidate& c : cand_) total += static_cast<double>(c.p);
  const double target = rng_.uniform_double() * total;
  double cum = 0.0;
  for (const Candidate& c : cand_) {
    cum += static_cast<double>(c.p);
    if (cum > target) return c.id;
  }
  // Only reached if rounding leaves cum <= target at the very end.
  return cand_.back().id;
}

}  // namespace llmctl
