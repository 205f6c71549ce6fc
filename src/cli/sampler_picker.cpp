// The sampler as generation's picker (sampler_picker.h).
#include "cli/sampler_picker.h"

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

void use_sampler(GenerateOptions& g, Sampler& sampler, int32_t n_vocab) {
  g.pick = [&sampler](const float* logits, int32_t n) {
    const int32_t id = sampler.sample(logits, n);
    sampler.accept(id);
    return id;
  };
  g.top_k_candidates = sampler.candidates_needed(n_vocab);
  g.pick_top_k = nullptr;
  if (g.top_k_candidates > 0)
    g.pick_top_k = [&sampler](const DecodedTopK& top, size_t row, int32_t n) {
      const int32_t id = sampler.sample_top_k(top_logits_row(top, row, n));
      sampler.accept(id);
      return id;
    };
}

}  // namespace llmctl::cli
