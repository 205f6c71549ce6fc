#pragma once
// Autocorrelation of a generation (`llmctl run --acf`): does the output repeat itself, and
// with what period? Two series, both over the generated tokens only (not the prompt):
//
//   token ids    categorical, so "correlation" is agreement: for lag k, Cohen's kappa of the
//                pairs (id[t - k], id[t]), t = k .. n-1:
//                  kappa_k = (p_o - p_e) / (1 - p_e)
//                p_o the fraction of pairs with equal ids, p_e = sum_v a_v b_v the agreement
//                expected by chance from the two slices' id frequencies a, b. 1: every token
//                equals the one k before; ~0: no more than chance (frequent tokens such as
//                "." or " the" agree by chance, and kappa discounts that); < 0: less.
//   top-1 prob   the probability of the most likely next token under the model's raw logits
//                (softmax at temperature 1, before any sampling filter), one per pick; the
//                usual (biased) Pearson ACF  r_k = sum_t (x_t - m)(x_{t+k} - m) / sum_t (x_t -
//                m)^2.
//
// Dominant period: among the lags 1 .. n/2 where the ACF has a local maximum (at least its
// neighbours), the one with the largest ACF; when a divisor of it is such a peak too and
// within kPeriodTolerance of that value, the smallest such divisor is reported instead (a series
// with period P also correlates at 2P, 3P ...). Strength: the ACF at that lag.
//
// Loop test on the end of a token sequence, where a loop shows first: the smallest period P
// such that at least kLoopMatchRate of the last W = max(2P, kMinLoopSpan) tokens equal the
// token P before them. W >= 2P means the pattern has been repeated twice in full after its
// first occurrence; the floor of kMinLoopSpan keeps a few repeated tokens ("!!!") from
// counting. When a period passes, its smallest divisor that passes over the same window is
// reported (one stray token can let 2P pass before P, as a longer window tolerates more
// misses). --stop-on-loop runs it after every token (LoopDetector); the --acf report runs it
// the same way over the finished generation, so it names the loop --stop-on-loop would have
// stopped at even when the model later broke out of it, and says separately whether the
// generation still loops at its end.

#include <cstdint>
#include <vector>

namespace llmctl {

inline constexpr double kLoopMatchRate = 0.95;
inline constexpr int64_t kMinLoopSpan = 16;
inline constexpr double kPeriodTolerance = 0.05;

// kappa_k for k = 0 .. max_lag (acf[0] = 1); lags with fewer than 2 pairs, or where both
// slices hold one and the same id (p_e = 1), are 1 when every pair agrees, else NaN.
// max_lag >= n gives NaN for the lags >= n.
std::vector<double> token_acf(const std::vector<int32_t>& ids, int64_t max_lag);
// r_k for k = 0 .. max_lag; all NaN when the series is constant or holds a NaN.
std::vector<double> pearson_acf(const std::vector<double>& x, int64_t max_lag);

struct Period {
  int64_t lag = 0;        // 0: none (fewer than 2 lags, or every ACF value NaN)
  double strength = 0.0;  // the ACF at lag; NaN when lag is 0
};
// acf as returned above (index = lag).
Period dominant_period(const std::vector<double>& acf);

// Probability of the most likely token: 1 / sum_j exp(l_j - max l), in double; NaN when a
// logit is NaN.
double top1_probability(const float* logits, int32_t n_vocab);

struct LoopMatch {
  bool detected = false;
  int64_t period = 0;
  int64_t span = 0;         // W: the tokens tested at the end
  double match_rate = 0.0;  // of those, the fraction equal to the token `period` before
  int64_t start = 0;        // first token of the loop: where exact repetition begins
  int64_t at = 0;           // tokens seen when the test passed (ids.size() for find_loop)
};
// The loop test on the end of `ids` (see the header comment).
LoopMatch find_loop(const std::vector<int32_t>& ids);
// The test after each token of `ids` in turn: the first prefix that loops (what
// --stop-on-loop would stop at), or detected false.
LoopMatch first_loop(const std::vector<int32_t>& ids);

// find_loop() after every token, until it finds one (then it stays detected).
class LoopDetector {
 public:
  void push(int32_t id);
  bool detected() const { return match_.detected; }
  const LoopMatch& match() const { return match_; }

 private:
  std::vector<int32_t> ids_;
  LoopMatch match_;
};

}  // namespace llmctl
