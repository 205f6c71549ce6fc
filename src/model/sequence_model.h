#pragma once
// SequenceModel: what the scheduler (scheduler.h) needs from a model: sequences with a KV
// cache, and one call that runs a batch of tokens from any of them. Forward implements it;
// tests drive the scheduler with scripted fakes.

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"

namespace llmctl {

// One token of a batch. Its position is its sequence's cache length plus the number of
// tokens of the same sequence before it in the batch.
struct BatchToken {
  int32_t seq = 0;
  int32_t token = 0;
  bool logits = false;  // whether the caller wants this position's logits
};

class SequenceModel {
 public:
  virtual ~SequenceModel() = default;
  virtual int32_t n_vocab() const = 0;
  // Tokens one decode() call computes together at most (larger batches are split).
  virtual int64_t max_batch_tokens() const = 0;
  virtual int32_t add_sequence(int64_t max_len) = 0;
  virtual void remove_sequence(int32_t seq) = 0;
  // Positions of `tokens` already in the cache (prefix sharing); see PagedKvCache.
  virtual int64_t attach_prefix(int32_t seq, const std::vector<int32_t>& tokens) = 0;
  virtual Reserve reserve(int32_t seq, int64_t n) = 0;
  // Runs the batch (positions reserved beforehand) and returns the logits of the tokens with
  // logits = true, in batch order: n_vocab floats each, valid until the next call.
  virtual const std::vector<float>& decode(const std::vector<BatchToken>& batch) = 0;
};

}  // namespace llmctl
