// The sampler as generation's picker (sampler_picker.h).
#include "cli/sampler_picker.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace llmctl::cli {

TopLogits top_logits_row(const DecodedTopK& top, size_t row, int32_t n_vocab) {
  const auto k = static_cast<size_t>(top.k);
  TopLogits t;
  t.ids = top.ids.data() + row * k;
  t.values = top.values.data() + row * k;
  t.k = top.k;
  t.n_vocab = n_vocab;
  t.first_nan = top.nan_inf[2 * row];
  t.first_inf = top.nan_inf[2 * row + 1];
  return t;
}

void use_sampler(GenerateOptions& g, Sampler& sampler, int32_t n_vocab, int32_t n_valid) {
  if (n_valid < 1 || n_valid > n_vocab)
    throw Error(fmt::format("sampler: the vocabulary has {} ids, expected 1 to n_vocab = {}",
                            n_valid, n_vocab));
  g.pick = [&sampler, n_valid](const float* logits, int32_t n) {
    const int32_t id = sampler.sample(logits, std::min(n, n_valid));
    sampler.accept(id);
    return id;
  };
  g.top_k_candidates = n_valid == n_vocab ? sampler.candidates_needed(n_vocab) : 0;
  g.pick_top_k = nullptr;
  if (g.top_k_candidates > 0)
    g.pick_top_k = [&sampler](const DecodedTopK& top, size_t row, int32_t n) {
      const int32_t id = sampler.sample_top_k(top_logits_row(top, row, n));
      sampler.accept(id);
      return id;
    };
}

}  // namespace llmctl::cli
