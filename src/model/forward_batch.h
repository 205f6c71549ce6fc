#pragma once
// The batch indexing of a forward chunk (forward.h): what the math reads about which token
// goes where. From a chunk of BatchToken rows and the paged KV cache (kv_cache.h) it builds,
// on the host and uploaded to the device:
//   ids, positions   each token's id and cache position (its sequence's length so far, plus
//                    its place among that sequence's tokens in the chunk)
//   seq_rows         each token's row of the block tables: its sequence's index in the chunk
//   logit_rows       the tokens whose logits are wanted, in order
//   per KV layer group: slots (where each token's K and V go) and the block tables
//                    (n_sequences, max_blocks), after a windowed group took its blocks
//   RoPE positions   the cache positions, unless the observer maps them (forward_observer.h)
// and what the observer sees of the chunk (ObservedBatch). The checks a chunk must pass live
// here: token ids in the vocabulary, positions reserved beforehand.

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/forward_observer.h"
#include "model/kv_cache.h"
#include "model/sequence_model.h"

namespace llmctl {

class ForwardBatch {
 public:
  // `backend` and `cache` must outlive this object.
  ForwardBatch(Backend& backend, PagedKvCache& cache, int64_t n_vocab);
  ForwardBatch(const ForwardBatch&) = delete;  // rope_pos_in_use_ points into this object
  ForwardBatch& operator=(const ForwardBatch&) = delete;
  // Device buffers for chunks of up to max_batch tokens (the per-group ones grow in prepare).
  void allocate(int64_t max_batch);

  // Indexes batch[0 .. n) (n <= max_batch) and uploads it, with the first `first_logit_rows`
  // logit rows at most. `observer` may be nullptr. Returns the block tables' width
  // (max_blocks). Throws Error for a token outside [0, n_vocab), a position without a reserved
  // slot, or a mapped RoPE position outside [0, 2^31).
  int64_t prepare(const BatchToken* batch, int64_t n, int64_t first_logit_rows,
                  const ForwardObserver* observer);
  // Uploads logit rows r0 .. r0 + m into logit_rows() (for a later output pass).
  void upload_logit_rows(int64_t r0, int64_t m);
  // Appends the chunk's tokens to their sequences (after the device work wrote their K, V).
  void commit(const BatchToken* batch, int64_t n);

  // -- the chunk last prepared ------------------------------------------------------------
  int64_t n_sequences() const { return static_cast<int64_t>(seqs_.size()); }
  const std::vector<int32_t>& host_logit_rows() const { return host_logit_rows_; }
  const Buffer& ids() const { return ids_; }
  const Buffer& positions() const { return pos_; }
  const Buffer& seq_rows() const { return seq_rows_; }
  const Buffer& logit_rows() const { return logit_rows_; }
  const Buffer& rope_positions() const { return *rope_pos_in_use_; }
  // Per KV layer group (PagedKvCache::layer_group); a group without layers has empty ones.
  const std::vector<Buffer>& slots() const { return slots_; }
  const std::vector<Buffer>& block_tables() const { return block_tables_; }
  // Valid after a prepare() with an observer.
  const ObservedBatch& observed() const { return observed_; }

 private:
  Backend& backend_;
  PagedKvCache& cache_;
  int64_t n_vocab_;
  int64_t max_batch_ = 0;
  Buffer ids_, pos_, seq_rows_, logit_rows_;
  std::vector<Buffer> slots_, block_tables_;
  std::vector<int32_t> host_ids_, host_pos_, host_rows_, host_logit_rows_;
  std::vector<std::vector<int32_t>> host_slots_, host_tables_;
  // The chunk's sequences in block-table row order; scratch for the cache commit.
  std::vector<int32_t> seqs_, toks_;
  // RoPE positions when the observer maps them; else pos_ is used.
  Buffer rope_pos_;
  std::vector<int32_t> host_rope_pos_;
  const Buffer* rope_pos_in_use_ = &pos_;
  std::vector<int32_t> host_seq_ids_;
  ObservedBatch observed_;
};

}  // namespace llmctl
