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
  // With logits: 0 asks for all n_vocab logits; k > 0 for only the k largest (ids and values
  // in backend.h top_k order), which a model that samples on the device (max_device_top_k()
  // >= k) computes there, so that k pairs cross to the host instead of the whole row.
  int32_t top_k = 0;
};

// The rows a decode() answered with their top_k candidates (BatchToken::top_k > 0), in batch
// order, row r with k candidates (k the largest top_k asked for; a row that asked for fewer
// uses the first ones: top_k's order is total, so the first j of the k largest are the j
// largest).
struct DecodedTopK {
  int32_t k = 0;
  std::vector<int32_t> ids;      // (n_rows, k)
  std::vector<float> values;     // (n_rows, k)
  std::vector<int32_t> nan_inf;  // (n_rows, 2): lowest id with a NaN logit, with +inf; -1: none
  size_t n_rows() const { return k > 0 ? ids.size() / static_cast<size_t>(k) : 0; }
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
  // Rows with BatchToken::top_k > 0 are not in decode()'s result; for them:
  //   max_device_top_k()  the largest top_k the model computes on the device; 0 (the default):
  //                       none, every logits row comes back whole (top_k is ignored)
  //   decoded_top_k()     their candidates from the last decode()
  //   top_k_row_logits(r) all n_vocab logits of the r-th of them (a download; for the summary
  //                       line's logits hash), valid until the next decode()
  virtual int32_t max_device_top_k() const { return 0; }
  virtual const DecodedTopK& decoded_top_k() const { return no_top_k_; }
  virtual const std::vector<float>& top_k_row_logits(size_t /*r*/) { return no_logits_; }

 private:
  DecodedTopK no_top_k_;
  std::vector<float> no_logits_;
};

}  // namespace llmctl
