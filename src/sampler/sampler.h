#pragma once
// Token sampling: one fixed, documented order of steps, and our own seeded RNG (rng.h), so the
// same seed, parameters and logits give the same tokens, bit for bit, on the same machine.
//
// The order (each step sees the output of the one before):
//   0. check     The logits must be finite or -inf (a masked token). NaN or +inf is an Error
//                naming the first bad id: a silent pick from a broken forward pass would hide
//                the bug. All -inf is an Error too (nothing can be drawn).
//   1. penalties Repetition, presence and frequency penalties on the raw logits, over the last
//                `repeat_last_n` accepted tokens (see accept()). They come first because they
//                change the ranking: a repeated token must lose its place before top-k picks
//                the survivors, or it keeps a slot that a fresh token should have had.
//   2. greedy    temperature == 0: the argmax of the penalized logits, ties to the lowest id.
//                Steps 3-8 are skipped and the RNG is not advanced.
//   3. top-k     Keep the k largest logits (ties to the lower id). Before temperature because
//                dividing by T > 0 does not change the ranking, and cutting first means the
//                rest of the steps touch k values, not the whole vocabulary.
//   4. temperature + 5. softmax, as one step:
//                p_i = exp((l_i - l_max) / T) / sum_j exp((l_j - l_max) / T)
//                (equal to softmax(l / T); subtracting l_max before dividing keeps a tiny T from
//                overflowing l / T to inf). Before top-p and min-p, so those cut the
//                distribution that is actually drawn from: a higher temperature lets more
//                tokens into the nucleus. This is the order of Hugging Face transformers'
//                warpers; llama.cpp's default chain applies temperature after top-p and min-p
//                instead, so with T != 1 and top_p < 1 (or min_p > 0) the two can keep
//                different sets of tokens.
//   6. top-p     Keep the smallest prefix of the candidates, in descending probability, whose
//                cumulative probability is >= top_p (1 = off).
//   7. min-p     Keep the tokens with p >= min_p * p_max (0 = off). After top-p, on the
//                probabilities before top-p renormalizes them (the ratio p / p_max is the same
//                either way). With both on, the two cuts are prefixes of one sorted list and
//                the result is the shorter one; min-p alone needs no order and keeps id order.
//                Candidates left with p == 0 (-inf or underflowed logits) are dropped here.
//   8. draw      u = uniform_double() (exactly one RNG step per non-greedy sample, even when
//                one candidate is left, so the stream of draws does not depend on the logits)
//                times the kept mass; the first candidate whose running sum exceeds it wins.
//
// Penalties, as llama.cpp defines them. For each distinct id among the last `repeat_last_n`
// accepted tokens, seen `c` times there:
//   repetition  l = l > 0 ? l / repeat_penalty : l * repeat_penalty     (1 = off)
//   presence    l -= presence_penalty                                   (0 = off)
//   frequency   l -= c * frequency_penalty                              (0 = off)
// repeat_last_n: 0 turns all three off, -1 uses the whole history.
//
// Sampling from candidates (sample_top_k): a device backend computes the k largest logits of a
// row (backend.h top_k: descending, ties to the lower id) and where the row holds NaN or +inf
// (backend.h find_nan_inf), so that k pairs cross to the host instead of n_vocab floats. For
// the parameters where candidates_needed() says k, sample_top_k() returns exactly what sample()
// returns on the whole row (same id, same RNG step, same Error), because:
//   0. check     the row's lowest NaN / +inf id is given, so the same first bad id is named;
//   1. penalties are off (candidates_needed() is 0 otherwise: they can lift a token from
//                anywhere in the row into the top);
//   2. greedy    k = 1: top_k's first id is the argmax with ties to the lowest id, and it is -inf
//                only when every logit is;
//   3. top-k     1 <= top_k < n_vocab: sample() keeps the top_k largest logits in top_k's order
//                (build_candidates sorts by the same total order), which are the candidates;
//   4-8.         run on that list by the same code (the candidates, their order and values are
//                bit-identical to sample()'s cand_, so every sum, cut and the draw are too).
// Without top-k (0, or >= n_vocab) the draw runs over the whole row in id order, so the whole
// row is needed.
//
// Cost: O(n_vocab) to copy and check the logits; top-k uses nth_element and sorts only the k
// survivors. Without top-k, top-p partially sorts a growing prefix (256, 1024, ... candidates)
// until it holds top_p of the mass, so a full sort happens only when the nucleus is most of
// the vocabulary; with top_p == 1 nothing is sorted (min-p and the draw work in id order).

#include <cstdint>
#include <vector>

#include "sampler/rng.h"

namespace llmctl {

// The k largest logits of one row of n_vocab and what the row holds that sample() refuses,
// as a device backend computes them (see above).
struct TopLogits {
  const int32_t* ids = nullptr;   // (k,) descending logit, equal logits: lower id first
  const float* values = nullptr;  // (k,) their logits
  int32_t k = 0;
  int32_t n_vocab = 0;
  int32_t first_nan = -1;  // lowest id whose logit is NaN in the whole row; -1: none
  int32_t first_inf = -1;  // lowest id whose logit is +inf in the whole row; -1: none
};

struct SamplerParams {
  float temperature = 0.8f;        // >= 0; 0 = greedy
  int32_t top_k = 40;              // >= 0; 0 = off
  float top_p = 0.95f;             // (0, 1]; 1 = off
  float min_p = 0.05f;             // [0, 1]; 0 = off
  float repeat_penalty = 1.0f;     // > 0; 1 = off
  int32_t repeat_last_n = 64;      // >= -1; 0 = penalties off, -1 = whole history
  float presence_penalty = 0.0f;   // finite; 0 = off
  float frequency_penalty = 0.0f;  // finite; 0 = off
  uint64_t seed = 0;
};

// Throws Error naming the first parameter out of range and its value.
void validate_sampler_params(const SamplerParams& params);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);  // validates

  // Picks a token id in [0, n_vocab) from `logits` (not modified). Does not call accept().
  int32_t sample(const float* logits, int32_t n_vocab);

  // How many of a row's largest logits sample_top_k() needs to pick what sample() would pick
  // from the whole row: 1 for greedy, top_k for 1 <= top_k < n_vocab, both only with the
  // penalties off; 0: sample() needs the whole row.
  int32_t candidates_needed(int32_t n_vocab) const;
  // sample() from the row's candidates: the same id (and RNG step, and Error) as sample() on
  // the whole row, given c.k >= candidates_needed(c.n_vocab) > 0 (else an Error). Uses the
  // first candidates_needed() candidates. Does not call accept().
  int32_t sample_top_k(const TopLogits& c);

  // Steps 0-7 without the draw: the tokens a sample() would choose from and their
  // probabilities, renormalized to sum to 1, in candidate order (descending when top-k or
  // top-p sorted them, else id order). Greedy gives the argmax with p = 1. Does not advance
  // the RNG.
  struct TokenProb {
    int32_t id;
    float p;
  };
  std::vector<TokenProb> probabilities(const float* logits, int32_t n_vocab);

  // Records a token the generator emitted (prompt tokens included, if they should count
  // toward the penalties). Negative ids are an Error; ids >= n_vocab are an Error at the next
  // sample() that applies penalties.
  void accept(int32_t token);

  // Forgets the history and restarts the RNG from the seed.
  void reset();

  const SamplerParams& params() const { return params_; }
  const std::vector<int32_t>& history() const { return history_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };

  // Steps 0-7 into cand_; returns the greedy argmax, or -1 when a draw is needed.
  int32_t prepare(const float* logits, int32_t n_vocab);
  // The same from candidates (sample_top_k).
  int32_t prepare_top_k(const TopLogits& c);
  // Steps 4-7 on cand_ (after top-k), then drops candidates with p == 0.
  void finish_candidates();
  // 8. One RNG step, scaled by the kept mass; the winner's id.
  int32_t draw();
  void apply_penalties(int32_t n_vocab);
  void build_candidates(int32_t n_vocab);
  void softmax_with_temperature();
  void cut_top_p_min_p();

  SamplerParams params_;
  Rng rng_;
  std::vector<int32_t> history_;
  // Scratch reused across calls: a 128k vocabulary is not reallocated per token.
  std::vector<float> logits_;
  std::vector<Candidate> cand_;
  std::vector<int32_t> window_;
  bool sorted_ = false;  // cand_ is in descending logit order
};

}  // namespace llmctl
