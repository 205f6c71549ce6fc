#pragma once
// Running a model the ways the family tests compare (test_model_moe.cpp,
// test_model_gptoss.cpp): one step per token then greedy steps, and several sequences decoded
// together in one batch, logits at every position.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/forward.h"
#include "model/model_loader.h"

namespace llmctl::test {

using Logits = std::vector<std::vector<float>>;  // [position][n_vocab]

inline int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

struct Run {
  Logits logits;
  std::vector<int32_t> greedy;
};

// One step per token, then n_greedy greedy steps.
inline Run run_steps(const LoadedModel& m, Backend& be, const std::vector<int32_t>& tokens,
                     size_t n_greedy) {
  Forward fwd(m.config, m.weights, be, static_cast<int64_t>(tokens.size() + n_greedy));
  Run r;
  for (const int32_t t : tokens) r.logits.push_back(fwd.step(t));
  std::vector<float> row = r.logits.back();
  for (size_t i = 0; i < n_greedy; ++i) {
    r.greedy.push_back(argmax(row));
    if (i + 1 < n_greedy) row = fwd.step(r.greedy.back());
  }
  return r;
}

// Sequences decoded together in one batch (their tokens interleaved), logits at every position:
// result[s][p] is sequence s's row at position p.
inline std::vector<Logits> run_batched(const LoadedModel& m, Backend& be,
                                       const std::vector<std::vector<int32_t>>& seqs) {
  ForwardOptions opt;
  opt.max_batch_tokens = 64;
  opt.kv.n_blocks = 16;
  opt.kv.type = KvType::F32;  // as run_steps' single-sequence cache
  opt.kv.max_sequences = static_cast<int32_t>(seqs.size());
  Forward fwd(m.config, m.weights, be, opt);
  std::vector<BatchToken> batch;
  size_t longest = 0;
  for (const auto& s : seqs) {
    const int32_t id = fwd.add_sequence(static_cast<int64_t>(s.size()));
    REQUIRE(fwd.reserve(id, static_cast<int64_t>(s.size())) == Reserve::Ok);
    longest = std::max(longest, s.size());
  }
  std::vector<std::pair<size_t, size_t>> where;  // (sequence, position) of each batch row
  for (size_t p = 0; p < longest; ++p)
    for (size_t s = 0; s < seqs.size(); ++s)
      if (p < seqs[s].size()) {
        batch.push_back(BatchToken{static_cast<int32_t>(s), seqs[s][p], true});
        where.emplace_back(s, p);
      }
  const std::vector<float>& flat = fwd.decode(batch);
  const auto n_vocab = static_cast<size_t>(m.config.n_vocab);
  std::vector<Logits> out(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) out[s].resize(seqs[s].size());
  for (size_t i = 0; i < where.size(); ++i)
    out[where[i].first][where[i].second].assign(
        flat.begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
        flat.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
  return out;
}

}  // namespace llmctl::test
