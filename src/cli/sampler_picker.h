#pragma once
// Hands a Sampler to generation (model/generate.h): the whole-row pick and, where the sampler's
// parameters allow it, the pick from the device's top candidates, which picks the same token
// (sampler.h "Sampling from candidates"). Every mode of `run` uses it, so they all sample on
// the device when the backend can.

#include <cstdint>

#include "model/generate.h"
#include "sampler/sampler.h"

namespace llmctl::cli {

// Sets g.pick, g.pick_top_k and g.top_k_candidates (Sampler::candidates_needed(n_vocab), 0
// when the sampler needs whole rows); each pick accept()s its token. `sampler` must outlive
// the generation.
// n_valid: the ids the vocabulary has ([0, n_valid), n_valid <= n_vocab). A model whose
// embedding is padded past its vocabulary (n_vocab > n_valid rows) never picks a padding id:
// the picker reads only the first n_valid logits (as if the rest were -inf), and the device's
// candidates, which may include padding, are not used.
void use_sampler(GenerateOptions& g, Sampler& sampler, int32_t n_vocab, int32_t n_valid);

// Row `row` of `top` as the sampler reads it.
TopLogits top_logits_row(const DecodedTopK& top, size_t row, int32_t n_vocab);

}  // namespace llmctl::cli
