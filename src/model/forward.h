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
//
// The units: this file and forward.cpp hold the math above (compute_chunk, output_pass) and
// run a decode() chunk by chunk; forward_batch.h turns a chunk and the KV cache into the
// indices the math reads (ids, positions, slots, block tables, logit rows, RoPE positions);
// forward_logits.h collects what the wanted rows asked for (whole logits, or device top-k
// candidates); forward_observer.h is the hook diagnostics see the pass through, and through
// which rope-probe maps RoPE positions.

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/forward_logits.h"
#include "model/forward_observer.h"
#include "model/kv_cache.h"
#include "model/moe_ffn.h"
#include "model/sequence_model.h"
#include "model/weights.h"

namespace llmctl {

struct ForwardOptions {
  int64_t max_batch_tokens = 512;  // activation buffers hold this many tokens
  KvCacheOptions kv;               // kv.n_blocks 0: enough for one sequence of n_ctx_train
  // Rows asking for BatchToken::top_k <= this get only their top-k candidates (backend top_k
  // and find_nan_inf, then k pairs downloaded). -1: kMaxDeviceTopK when the backend's buffers
  // are in device memory (Backend::device_memory()), else 0 (the host reads logits directly,
  // so the CPU path is unchanged); 0: off. Tests set it on the CPU backend to check the path.
  int32_t max_device_top_k = -1;
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
  int32_t max_device_top_k() const override { return results_.max_top_k(); }
  const DecodedTopK& decoded_top_k() const override { return results_.top_k(); }
  const std::vector<float>& top_k_row_logits(size_t r) override {
    return results_.top_k_row_logits(logits_, r);
  }

  // -- single sequence (the n_ctx constructor's sequence 0) --------------------------------
  // Runs `token` at position n_past() and returns its logits (n_vocab floats, valid until
  // the next call). Throws Error for a token outside [0, n_vocab) or a full context.
  const std::vector<float>& step(int32_t token);
  int64_t n_past() const { return cache_.length(0); }
  // Starts sequence 0 again (its blocks are released; full ones stay cached).
  void reset();

  // Diagnostics and RoPE position experiments (forward_observer.h); nullptr (the default)
  // observes nothing. The observer must outlive its use.
  void set_observer(ForwardObserver* observer) { observer_ = observer; }

  // Backend::prepare_matmul for every weight a forward pass multiplies (the output, each
  // layer's matrices, every expert's), so that no run pays a first matmul's preparation: a
  // mixture of experts otherwise meets some experts first in a timed run (bench), or in a
  // later request.
  void prepare_matmuls();

  PagedKvCache& cache() { return cache_; }
  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  // Bytes of the activation buffers (the memory summary's "scratch").
  uint64_t scratch_bytes() const { return scratch_bytes_; }

 private:
  void allocate(int32_t max_device_top_k);
  // One chunk of at most max_batch_ tokens; appends what its wanted rows asked for to
  // results_. `last`: no chunk follows in this decode().
  void run_chunk(const BatchToken* batch, int64_t n, bool last);
  // The device work of a chunk: embeddings and layers, and the output pass when all its
  // wanted rows fit one (`with_output`). No upload or download: a backend may record it.
  void compute_chunk(int64_t n, int64_t max_blocks, bool with_output);
  // x_ += residual_scale * block, for n tokens (block scaled in place when the scale is not 1).
  void add_residual(Buffer& block, int64_t n);
  // Output pass over wanted rows r0 .. r0 + m (rows uploaded to logit_rows_ before):
  //   logits_ (m, n_vocab) = rmsnorm(x[rows]) * output_norm  output^T, divided by
  //   logit_scale and soft-capped by final_softcap when the config has them, then, when one
  //   of them asks for candidates, top_k and find_nan_inf of those m rows (results_.select).
  void output_pass(int64_t r0, int64_t m);
  // backend.matmul(), showing the input to the observer first when it asks for it.
  void matmul(const WeightView& w, const Buffer& x, int64_t n, Buffer& out);
  // backend.matmul_shared() over the weights of one input (q, k, v; gate, up), the observer
  // shown the input once per weight as with matmul().
  void matmul_shared(std::initializer_list<const WeightView*> ws,
                     std::initializer_list<Buffer*> outs, const Buffer& x, int64_t n);
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
  Buffer k_raw_;  // the k projection before its norm (qk_norm only; q's goes to att_)
  MoeFfn moe_;  // the routed FFN and its scratch (n_experts > 0)
  // Output projection, kLogitsRows rows at a time.
  Buffer x_out_, h_out_, logits_;
  // The chunk being run: its indices (forward_batch.h), which compute_chunk and output_pass
  // read under the names below, and the RoPE positions it uses (set by run_chunk).
  ForwardBatch batch_{backend_, cache_, config_.n_vocab};
  const Buffer& ids_ = batch_.ids();
  const Buffer& pos_ = batch_.positions();
  const Buffer& seq_rows_ = batch_.seq_rows();
  const Buffer& logit_rows_ = batch_.logit_rows();
  const std::vector<Buffer>& slots_ = batch_.slots();  // per KV layer group (kv_cache.h)
  const std::vector<Buffer>& block_tables_ = batch_.block_tables();
  const std::vector<int32_t>& host_logit_rows_ = batch_.host_logit_rows();
  const ObservedBatch& observed_ = batch_.observed();
  const Buffer* rope_pos_in_use_ = nullptr;
  // What decode() returns: whole logits rows and device top-k candidates (forward_logits.h).
  ForwardLogits results_{backend_, config_.n_vocab};

  // Diagnostics and RoPE experiments (set_observer).
  ForwardObserver* observer_ = nullptr;
  std::vector<float> obs_host_;
  Buffer attn_stats_;  // (max_batch_, n_heads, kAttnStatFields), allocated on first use
};

}  // namespace llmctl
