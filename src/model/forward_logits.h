#pragma once
// What decode() hands back of the rows whose logits are wanted (forward.h). The output pass
// (Forward::output_pass) computes logits (m, n_vocab) for kLogitsRows wanted rows at a time;
// this unit takes them from there:
//   whole rows        downloaded into whole_rows(), in order (the CPU path: the host reads
//                     logits directly)
//   candidate rows    rows asking for BatchToken::top_k when the device answers it
//                     (ForwardOptions::max_device_top_k): the backend's top_k and find_nan_inf
//                     on the device, then k (id, value) pairs and the NaN/Inf ids downloaded
//                     into top_k(); the row's whole logits stay where top_k_row_logits() finds
//                     them: the logits buffer, when the last pass of the decode() had the row,
//                     else a host copy taken before the next pass overwrote it.

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/sequence_model.h"

namespace llmctl {

// Rows of the output projection computed per pass (bounds the logits buffer).
constexpr int64_t kLogitsRows = 32;
// The largest BatchToken::top_k answered on the device (sampling needs small k: greedy is 1,
// top-k sampling 40 by default).
constexpr int32_t kMaxDeviceTopK = 256;

class ForwardLogits {
 public:
  // `backend` must outlive this object.
  ForwardLogits(Backend& backend, int64_t n_vocab);
  // The device answers top_k <= max_top_k(): max_device_top_k, or for -1 kMaxDeviceTopK when
  // the backend's buffers are in device memory, else 0 (ForwardOptions::max_device_top_k).
  // Throws Error for max_device_top_k outside [-1, kMaxDeviceTopK].
  void allocate(int32_t max_device_top_k);
  int32_t max_top_k() const { return max_top_k_; }

  // A decode() call begins: forgets what the last one returned and takes one k for the whole
  // call, the largest top_k asked for (rows that asked for fewer read a prefix). Throws Error
  // for a top_k above max_top_k().
  void begin(const std::vector<BatchToken>& batch);
  // A chunk begins: what each of its wanted rows asks for, candidates or whole logits.
  void begin_chunk(const BatchToken* batch, int64_t n);
  // Device work of an output pass over the chunk's wanted rows r0 .. r0 + m, whose logits
  // are rows 0 .. m of `logits`: top_k and find_nan_inf of those m rows when one of them asks
  // for candidates. No download (a backend may record it).
  void select(const Buffer& logits, int64_t r0, int64_t m);
  // Downloads what the wanted rows r0 .. r0 + m asked for (after select); `last`: `logits`
  // stays on the device until the next decode() (top_k_row_logits() reads it there).
  void collect(const Buffer& logits, int64_t r0, int64_t m, bool last);

  // -- what the last decode() returned ----------------------------------------------------
  const std::vector<float>& whole_rows() const { return logits_host_; }
  const DecodedTopK& top_k() const { return top_k_; }
  // Candidate row r's whole logits (n_vocab floats, valid until the next call); `logits` is
  // the buffer collect() was given. Throws Error for a row the last decode() did not have.
  const std::vector<float>& top_k_row_logits(const Buffer& logits, size_t r);

 private:
  bool wants_top_k(int64_t r) const { return host_logit_k_[static_cast<size_t>(r)] > 0; }

  Backend& backend_;
  int64_t n_vocab_;
  std::vector<float> logits_host_;
  // Candidates on the device (max_top_k_): the top_k asked for per wanted row of the current
  // chunk, its k (the largest asked for in this decode()), the results, and where each
  // candidate row's whole logits are: row j of the logits buffer (>= 0) or -1 - offset into
  // top_k_whole_ (rows of an earlier output pass, downloaded then).
  int32_t max_top_k_ = 0;
  int32_t decode_k_ = 0;
  std::vector<int32_t> host_logit_k_;
  Buffer top_k_ids_, top_k_values_, nan_inf_;  // (kLogitsRows, kMaxDeviceTopK), (kLogitsRows, 2)
  DecodedTopK top_k_;
  std::vector<int64_t> top_k_where_;
  std::vector<float> top_k_whole_, top_k_row_, chunk_host_;
  std::vector<int32_t> chunk_ids_, chunk_nan_inf_;
  std::vector<float> chunk_values_;
};

}  // namespace llmctl
