// The batch indexing of a forward chunk (forward_batch.h).
#include "model/forward_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace llmctl {

ForwardBatch::ForwardBatch(Backend& backend, PagedKvCache& cache, int64_t n_vocab)
    : backend_(backend), cache_(cache), n_vocab_(n_vocab) {}

void ForwardBatch::allocate(int64_t max_batch) {
  Backend& b = backend_;
  const int64_t n = max_batch;
  max_batch_ = max_batch;
  ids_ = b.alloc(n, BufferType::I32);
  pos_ = b.alloc(n, BufferType::I32);
  seq_rows_ = b.alloc(n, BufferType::I32);
  logit_rows_ = b.alloc(n, BufferType::I32);
  // slots_ and block_tables_: per layer group, allocated and grown by prepare.
}

int64_t ForwardBatch::prepare(const BatchToken* batch, int64_t n, int64_t first_logit_rows,
                              const ForwardObserver* observer) {
  Backend& b = backend_;
  host_ids_.resize(static_cast<size_t>(n));
  host_pos_.resize(static_cast<size_t>(n));
  host_rows_.resize(static_cast<size_t>(n));
  host_logit_rows_.clear();
  seqs_.clear();                   // distinct sequences, in order of first appearance
  std::vector<int64_t> seq_count;  // tokens of each in this chunk so far
  int64_t max_blocks = 1;
  for (int64_t t = 0; t < n; ++t) {
    const BatchToken& bt = batch[t];
    if (bt.token < 0 || bt.token >= n_vocab_)
      throw Error(fmt::format("forward: token id {} is outside the vocabulary [0, {})", bt.token,
                              n_vocab_));
    const auto it = std::find(seqs_.begin(), seqs_.end(), bt.seq);
    const auto row = static_cast<size_t>(it - seqs_.begin());
    if (it == seqs_.end()) {
      seqs_.push_back(bt.seq);
      seq_count.push_back(0);
      max_blocks =
          std::max<int64_t>(max_blocks, static_cast<int64_t>(cache_.block_table(bt.seq).size()));
    }
    const int64_t pos = cache_.length(bt.seq) + seq_count[row]++;
    if (pos >= cache_.capacity(bt.seq))
      throw Error(fmt::format("forward: position {} of sequence {} was not reserved (context {})",
                              pos, bt.seq, cache_.max_len(bt.seq)),
                  "use a larger context size");
    host_ids_[static_cast<size_t>(t)] = bt.token;
    host_pos_[static_cast<size_t>(t)] = static_cast<int32_t>(pos);
    host_rows_[static_cast<size_t>(t)] = static_cast<int32_t>(row);
    if (bt.logits) host_logit_rows_.push_back(static_cast<int32_t>(t));
  }
  // Windowed layer groups take their blocks for these positions now (kv_cache.h); then each
  // group's slots and block tables (a windowed table's released entries are kNoBlock, -1).
  const auto n_seqs = static_cast<int64_t>(seqs_.size());
  for (int64_t r = 0; r < n_seqs; ++r)
    cache_.map_positions(seqs_[static_cast<size_t>(r)], seq_count[static_cast<size_t>(r)]);
  const int n_groups = cache_.n_groups();
  host_slots_.resize(static_cast<size_t>(n_groups));
  host_tables_.resize(static_cast<size_t>(n_groups));
  slots_.resize(static_cast<size_t>(n_groups));
  block_tables_.resize(static_cast<size_t>(n_groups));
  for (int g = 0; g < n_groups; ++g) {
    const auto gu = static_cast<size_t>(g);
    if (cache_.group_layers(g) == 0) continue;  // a full group without layers
    std::vector<int32_t>& slots = host_slots_[gu];
    slots.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      slots[static_cast<size_t>(t)] =
          cache_.slot(batch[t].seq, host_pos_[static_cast<size_t>(t)], g);
    std::vector<int32_t>& table = host_tables_[gu];
    table.assign(static_cast<size_t>(n_seqs * max_blocks), g == 0 ? 0 : PagedKvCache::kNoBlock);
    for (int64_t r = 0; r < n_seqs; ++r) {
      const std::vector<int32_t>& blocks = cache_.block_table(seqs_[static_cast<size_t>(r)], g);
      std::copy(blocks.begin(), blocks.end(), table.begin() + r * max_blocks);
    }
    if (slots_[gu].size() == 0) slots_[gu] = b.alloc(max_batch_, BufferType::I32);
    if (block_tables_[gu].size() < n_seqs * max_blocks)
      block_tables_[gu] = b.alloc(n_seqs * max_blocks, BufferType::I32);
    b.upload(slots_[gu], slots.data(), n);
    b.upload(block_tables_[gu], table.data(), n_seqs * max_blocks);
  }
  b.upload(ids_, host_ids_.data(), n);
  b.upload(pos_, host_pos_.data(), n);
  b.upload(seq_rows_, host_rows_.data(), n);
  const auto n_rows = static_cast<int64_t>(host_logit_rows_.size());
  if (n_rows > 0)
    b.upload(logit_rows_, host_logit_rows_.data(), std::min(n_rows, first_logit_rows));

  // RoPE positions: the cache positions, unless the observer maps them (rope-probe).
  rope_pos_in_use_ = &pos_;
  if (observer != nullptr && observer->maps_rope_positions()) {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    host_rope_pos_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const int32_t p = host_pos_[static_cast<size_t>(t)];
      const int64_t mapped = observer->rope_position(batch[t].seq, p);
      if (mapped < 0 || mapped > kMax)
        throw Error(fmt::format("forward: RoPE position {} of sequence {} is outside [0, {}]",
                                mapped, batch[t].seq, kMax));
      host_rope_pos_[static_cast<size_t>(t)] = static_cast<int32_t>(mapped);
    }
    if (rope_pos_.size() == 0) rope_pos_ = b.alloc(max_batch_, BufferType::I32);
    b.upload(rope_pos_, host_rope_pos_.data(), n);
    rope_pos_in_use_ = &rope_pos_;
  }

  // What the observer sees of this chunk.
  if (observer != nullptr) {
    host_seq_ids_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) host_seq_ids_[static_cast<size_t>(t)] = batch[t].seq;
    observed_ = ObservedBatch{n, host_seq_ids_.data(), host_pos_.data(), host_ids_.data()};
  }
  return max_blocks;
}

void ForwardBatch::upload_logit_rows(int64_t r0, int64_t m) {
  backend_.upload(logit_rows_, host_logit_rows_.data() + r0, m);
}

void ForwardBatch::commit(const BatchToken* batch, int64_t n) {
  for (size_t r = 0; r < seqs_.size(); ++r) {
    toks_.clear();
    for (int64_t t = 0; t < n; ++t)
      if (host_rows_[static_cast<size_t>(t)] == static_cast<int32_t>(r))
        toks_.push_back(batch[t].token);
    cache_.commit(seqs_[r], toks_.data(), static_cast<int64_t>(toks_.size()));
  }
}

}  // namespace llmctl
