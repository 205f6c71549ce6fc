// What decode() hands back of the wanted rows (forward_logits.h).
#include "model/forward_logits.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace llmctl {

ForwardLogits::ForwardLogits(Backend& backend, int64_t n_vocab)
    : backend_(backend), n_vocab_(n_vocab) {}

void ForwardLogits::allocate(int32_t max_device_top_k) {
  Backend& b = backend_;
  if (max_device_top_k < -1 || max_device_top_k > kMaxDeviceTopK)
    throw Error(fmt::format("forward: max_device_top_k {} is outside [-1, {}]", max_device_top_k,
                            kMaxDeviceTopK));
  max_top_k_ = max_device_top_k >= 0 ? max_device_top_k : b.device_memory() ? kMaxDeviceTopK : 0;
  if (max_top_k_ > 0) {
    top_k_ids_ = b.alloc(kLogitsRows * max_top_k_, BufferType::I32);
    top_k_values_ = b.alloc(kLogitsRows * max_top_k_);
    nan_inf_ = b.alloc(kLogitsRows * 2, BufferType::I32);
  }
}

void ForwardLogits::begin(const std::vector<BatchToken>& batch) {
  logits_host_.clear();
  top_k_ = DecodedTopK{};
  top_k_where_.clear();
  top_k_whole_.clear();
  // One k for the whole call (the largest asked for): rows that asked for fewer read a prefix.
  decode_k_ = 0;
  if (max_top_k_ > 0)
    for (const BatchToken& bt : batch) {
      if (!bt.logits || bt.top_k <= 0) continue;
      if (bt.top_k > max_top_k_)
        throw Error(fmt::format("forward: top_k {} asked for, the device computes at most {}",
                                bt.top_k, max_top_k_));
      decode_k_ = std::max(decode_k_, bt.top_k);
    }
  decode_k_ = std::min<int32_t>(decode_k_, static_cast<int32_t>(n_vocab_));
  top_k_.k = decode_k_;
}

void ForwardLogits::begin_chunk(const BatchToken* batch, int64_t n) {
  host_logit_k_.clear();
  for (int64_t t = 0; t < n; ++t)
    if (batch[t].logits)
      host_logit_k_.push_back(decode_k_ > 0 && batch[t].top_k > 0 ? batch[t].top_k : 0);
}

const std::vector<float>& ForwardLogits::top_k_row_logits(const Buffer& logits, size_t r) {
  if (r >= top_k_where_.size())
    throw Error(fmt::format("forward: top-k row {} of the last decode, which had {}", r,
                            top_k_where_.size()));
  const auto n_vocab = static_cast<size_t>(n_vocab_);
  const int64_t where = top_k_where_[r];
  top_k_row_.resize(n_vocab);
  if (where >= 0) {
    backend_.download(logits, top_k_row_.data(), n_vocab_, where * n_vocab_);
  } else {
    const auto off = static_cast<size_t>(-1 - where) * n_vocab;
    std::copy_n(top_k_whole_.begin() + static_cast<std::ptrdiff_t>(off), n_vocab,
                top_k_row_.begin());
  }
  return top_k_row_;
}

void ForwardLogits::select(const Buffer& logits, int64_t r0, int64_t m) {
  Backend& b = backend_;
  bool any = false;
  for (int64_t r = r0; r < r0 + m; ++r) any = any || wants_top_k(r);
  if (!any) return;
  b.top_k(logits, m, n_vocab_, decode_k_, top_k_ids_, top_k_values_);  // (m, k) each
  b.find_nan_inf(logits, m, n_vocab_, nan_inf_);                       // (m, 2)
}

// Whole rows go to logits_host_; candidate rows to top_k_, with where their whole logits stay.
void ForwardLogits::collect(const Buffer& logits, int64_t r0, int64_t m, bool last) {
  Backend& b = backend_;
  const auto n_vocab = static_cast<size_t>(n_vocab_);
  bool any_whole = false, any_top = false;
  for (int64_t r = r0; r < r0 + m; ++r) {
    any_whole = any_whole || !wants_top_k(r);
    any_top = any_top || wants_top_k(r);
  }
  if (!any_top) {  // whole rows only (always on a host backend): straight into the result
    const size_t old = logits_host_.size();
    logits_host_.resize(old + static_cast<size_t>(m) * n_vocab);
    b.download(logits, logits_host_.data() + old, m * n_vocab_);
    return;
  }
  // Candidate rows of an earlier pass lose the logits buffer to the next one: keep them here.
  const bool whole_pass = any_whole || !last;
  if (whole_pass) {
    chunk_host_.resize(static_cast<size_t>(m) * n_vocab);
    b.download(logits, chunk_host_.data(), m * n_vocab_);
  }
  const auto k = static_cast<size_t>(decode_k_);
  chunk_ids_.resize(static_cast<size_t>(m) * k);
  chunk_values_.resize(static_cast<size_t>(m) * k);
  chunk_nan_inf_.resize(static_cast<size_t>(m) * 2);
  // top_k's rows are m rows of k (its buffers are laid out for the k it was called with).
  b.download(top_k_ids_, chunk_ids_.data(), m * decode_k_);
  b.download(top_k_values_, chunk_values_.data(), m * decode_k_);
  b.download(nan_inf_, chunk_nan_inf_.data(), m * 2);
  for (int64_t j = 0; j < m; ++j) {
    const auto ju = static_cast<size_t>(j);
    if (!wants_top_k(r0 + j)) {
      const auto row = chunk_host_.begin() + static_cast<std::ptrdiff_t>(ju * n_vocab);
      logits_host_.insert(logits_host_.end(), row, row + static_cast<std::ptrdiff_t>(n_vocab));
      continue;
    }
    const auto ids = chunk_ids_.begin() + static_cast<std::ptrdiff_t>(ju * k);
    const auto values = chunk_values_.begin() + static_cast<std::ptrdiff_t>(ju * k);
    top_k_.ids.insert(top_k_.ids.end(), ids, ids + static_cast<std::ptrdiff_t>(k));
    top_k_.values.insert(top_k_.values.end(), values, values + static_cast<std::ptrdiff_t>(k));
    top_k_.nan_inf.push_back(chunk_nan_inf_[2 * ju]);
    top_k_.nan_inf.push_back(chunk_nan_inf_[2 * ju + 1]);
    if (whole_pass) {
      const auto row = chunk_host_.begin() + static_cast<std::ptrdiff_t>(ju * n_vocab);
      top_k_where_.push_back(-1 - static_cast<int64_t>(top_k_whole_.size() / n_vocab));
      top_k_whole_.insert(top_k_whole_.end(), row, row + static_cast<std::ptrdiff_t>(n_vocab));
    } else {
      top_k_where_.push_back(j);
    }
  }
}

}  // namespace llmctl
