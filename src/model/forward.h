#pragma once
// The Llama forward pass, written once against Backend& (it never constructs a backend).
// It reads the config's switches (arch.h), never an architecture name, and refuses at
// construction a config asking for math it does not compute yet (require_implemented).
//
// A batch of n tokens (one sequence's prompt chunk, or one token from each of several
// sequences, or both), token t at position p_t of its sequence:
//   x = token_embd[tokens] (* embd_scale)                   (n, n_embd)
//   for each layer:
//     h = rmsnorm(x) * attn_norm
//     q = h wq^T (+bq), k = h wk^T (+bk), v = h wv^T (+bv)  (n, q_dim), (n, kv_dim), (n, kv_dim)
//     (QK-norm per head: each head of q, k = rmsnorm(head) * attn_q_norm, attn_k_norm)
//     rope(q), rope(k) at p_t (the layer's base);  cache[layer][slot(seq_t, p_t)] = k_t, v_t
//       (the slot in the layer's group: windowed layers keep only their window, kv_cache.h)
//     a = attention(q_t over its sequence's positions 0..p_t, or the layer's window) wo^T
//     x += a   (norms Both: x += rmsnorm(a) * attn_post_norm)
//     h = rmsnorm(x) * ffn_norm
//     f = (act(h w_gate^T) * (h w_up^T)) w_down^T,  act silu or tanh-GELU
//       (a model with experts: the routed FFN of moe_ffn.h instead)
//     x += f   (norms Both: x += rmsnorm(f) * ffn_post_norm)
//   logits = rmsnorm(x[rows wanted]) * output_norm  output^T    (m, n_vocab)
// Only rows whose logits are wanted go through the output projection, a few at a time, so a
// long prefill never materializes (n, n_vocab).

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/forward_observer.h"
#include "model/kv_cache.h"
#include "model/moe_ffn.h"
#include "model/sequence_model.h"
#include "model/weights.h"

namespace llmctl {

// Rows of the output projection computed per pass (bounds the logits buffer).
constexpr int64_t kLogitsRows = 32;
// The largest BatchToken::top_k answered on the device (sampling needs small k: greedy is 1,
// top-k sampling 40 by default).
constexpr int32_t kMaxDeviceTopK = 256;

struct ForwardOptions {
  int64_t max_batch_tokens = 512;  // activation buffers hold this many tokens
  KvCacheOptions kv;               // kv.n_blocks 0: enough for one sequence of n_ctx_train
  // Rows asking for BatchToken::top_k <= this get only their top-k candidates (backend top_k
  // and find_nan_inf, then k pairs downloaded). -1: kMaxDeviceTopK when the backend's buffers
  // are in device memory (Backend::device_memory()), else 0 (the host reads logits directly,
  // so the CPU path is unchanged); 0: off. Tests set it on the CPU backend to check the path.
  int32_t max_device_top_k = -1;
};

// The positions RoPE rotates a sequence's tokens by, for experiments on positional encoding
// (rope-probe): the token at cache position p is rotated for position offset + p, or for 0
// when all_zero. Attention still covers cache positions 0 .. p; only the rotation changes.
struct RopePositions {
  int64_t offset = 0;
  bool all_zero = false;
};

class Forward final : public SequenceModel {
 public:
  // Binds the weights to `backend` and allocates activations and the KV pool. `backend` must
  // outlive this object.
  Forward(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
          const ForwardOptions& opt);
  // Single-sequence convenience: a cache of n_ctx positions (n_ctx >= 1; it may exceed the
  // training context), f32 unless kv_type (K, and V unless v_type) says otherwise, sequence 0
  // opened; use step().
  Forward(const ModelConfig& config, const ModelWeights& weights, Backend& backend, int64_t n_ctx,
          KvType kv_type = KvType::F32, std::optional<KvType> v_type = std::nullopt);

  // -- SequenceModel --------------------------------------------------------------------
  int32_t n_vocab() const override { return static_cast<int32_t>(config_.n_vocab); }
  int64_t max_batch_tokens() const override { return max_batch_; }
  int32_t add_sequence(int64_t max_len) override { return cache_.add_sequence(max_len); }
  void remove_sequence(int32_t seq) override { cache_.remove_sequence(seq); }
  int64_t attach_prefix(int32_t seq, const std::vector<int32_t>& tokens) override {
    return cache_.attach_prefix(seq, tokens);
  }
  Reserve reserve(int32_t seq, int64_t n) override { return cache_.reserve(seq, n); }
  // Throws Error for a token outside [0, n_vocab) or a position without a reserved slot.
  const std::vector<float>& decode(const std::vector<BatchToken>& batch) override;
  int32_t max_device_top_k() const override { return max_top_k_; }
  const DecodedTopK& decoded_top_k() const override { return top_k_; }
  const std::vector<float>& top_k_row_logits(size_t r) override;

  // -- single sequence (the n_ctx constructor's sequence 0) --------------------------------
  // Runs `token` at position n_past() and returns its logits (n_vocab floats, valid until
  // the next call). Throws Error for a token outside [0, n_vocab) or a full context.
  const std::vector<float>& step(int32_t token);
  int64_t n_past() const { return cache_.length(0); }
  // Starts sequence 0 again (its blocks are released; full ones stay cached).
  void reset();

  // Diagnostics (forward_observer.h); nullptr (the default) observes nothing. The observer
  // must outlive its use.
  void set_observer(ForwardObserver* observer) { observer_ = observer; }
  // RoPE positions of sequence `seq` from now on (the default is offset 0). Throws Error when
  // offset + position would not fit in 32 bits.
  void set_rope_positions(int32_t seq, RopePositions m);

  PagedKvCache& cache() { return cache_; }
  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  // Bytes of the activation buffers (the memory summary's "scratch").
  uint64_t scratch_bytes() const { return scratch_bytes_; }

 private:
  void allocate(int32_t max_device_top_k);
  // One chunk of at most max_batch_ tokens; appends wanted logits rows to logits_host_ (whole
  // rows) and top_k_ (candidates). `last`: no chunk follows in this decode().
  void run_chunk(const BatchToken* batch, int64_t n, bool last);
  // Host side of a chunk: checks, positions, slots, block table, and their uploads. Returns
  // the block table's width.
  int64_t prepare_chunk(const BatchToken* batch, int64_t n);
  // The device work of a chunk: embeddings and layers, and the output pass when all its
  // wanted rows fit one (`with_output`). No upload or download: a backend may record it.
  void compute_chunk(int64_t n, int64_t max_blocks, bool with_output);
  // x_ += residual_scale * block, for n tokens (block scaled in place when the scale is not 1).
  void add_residual(Buffer& block, int64_t n);
  // Output pass over wanted rows r0 .. r0 + m (rows uploaded to logit_rows_ before):
  //   logits_ (m, n_vocab) = rmsnorm(x[rows]) * output_norm  output^T, divided by
  //   logit_scale and soft-capped by final_softcap when the config has them, then, when one
  //   of them asks for candidates, top_k and find_nan_inf of those m rows.
  void output_pass(int64_t r0, int64_t m);
  // Downloads what the wanted rows r0 .. r0 + m asked for; `last`: logits_ stays on the
  // device until the next decode() (top_k_row_logits() reads it there).
  void collect_output(int64_t r0, int64_t m, bool last);
  bool wants_top_k(int64_t r) const { return host_logit_k_[static_cast<size_t>(r)] > 0; }
  // backend.matmul(), showing the input to the observer first when it asks for it.
  void matmul(const WeightView& w, const Buffer& x, int64_t n, Buffer& out);
  // Downloads `buf`'s first n floats into obs_host_ (for the observer).
  const float* observe(const Buffer& buf, int64_t n);

  ModelConfig config_;
  Backend& backend_;
  ModelWeights weights_;  // bound to backend_
  int64_t max_batch_ = 0;
  PagedKvCache cache_;
  std::vector<RopeParams> rope_;      // per layer (base and scale differ on windowed layers)
  std::vector<AttentionShape> attn_;  // per layer (window)
  uint64_t scratch_bytes_ = 0;
  // Activations, (max_batch_, dim) each.
  Buffer x_, h_, q_, k_, v_, att_, proj_, gate_, up_, ffn_;  // gate_, up_: dense FFN only
  MoeFfn moe_;  // the routed FFN and its scratch (n_experts > 0)
  // Output projection, kLogitsRows rows at a time.
  Buffer x_out_, h_out_, logits_;
  // Indices: token ids, positions, block-table rows, rows that want logits; per KV layer group
  // (kv_cache.h) the slots and block tables.
  Buffer ids_, pos_, seq_rows_, logit_rows_;
  std::vector<Buffer> slots_, block_tables_;
  std::vector<int32_t> host_ids_, host_pos_, host_rows_, host_logit_rows_;
  std::vector<std::vector<int32_t>> host_slots_, host_tables_;
  std::vector<float> logits_host_;

  // Candidates on the device (max_device_top_k): the top_k asked for per wanted row of the
  // current chunk, its k (the largest asked for in this decode()), the results, and where each
  // candidate row's whole logits are: row j of logits_ (>= 0) or -1 - offset into
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
  // The chunk being run (prepare_chunk): its sequences in block-table row order, the RoPE
  // positions it uses, scratch for the cache commit.
  std::vector<int32_t> seqs_, toks_;
  const Buffer* rope_pos_in_use_ = nullptr;

  // Diagnostics and RoPE experiments (set_observer, set_rope_positions).
  ForwardObserver* observer_ = nullptr;
  ObservedBatch observed_;
  std::vector<int32_t> host_seq_ids_;
  std::vector<float> obs_host_;
  Buffer attn_stats_;  // (max_batch_, n_heads, kAttnStatFields), allocated on first use
  std::unordered_map<int32_t, RopePositions> rope_positions_;
  Buffer rope_pos_;  // RoPE positions when some sequence maps them; else pos_ is used
  std::vector<int32_t> host_rope_pos_;
};

}  // namespace llmctl
