// The forward pass (forward.h). Math only through Backend; no loops over elements here.
#include "model/forward.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmctl {

namespace {

ModelWeights bind_to_backend(const ModelWeights& host, Backend& b) {
  ModelWeights w;
  w.token_embd = b.bind_weight(host.token_embd);
  w.output_norm = b.bind_weight(host.output_norm);
  w.output = host.output_tied ? w.token_embd : b.bind_weight(host.output);
  w.output_tied = host.output_tied;
  for (const LayerWeights& hl : host.layers) {
    LayerWeights l;
    l.attn_norm = b.bind_weight(hl.attn_norm);
    l.wq = b.bind_weight(hl.wq);
    l.wk = b.bind_weight(hl.wk);
    l.wv = b.bind_weight(hl.wv);
    l.wo = b.bind_weight(hl.wo);
    l.bq = b.bind_weight(hl.bq);
    l.bk = b.bind_weight(hl.bk);
    l.bv = b.bind_weight(hl.bv);
    l.ffn_norm = b.bind_weight(hl.ffn_norm);
    l.w_gate = b.bind_weight(hl.w_gate);
    l.w_up = b.bind_weight(hl.w_up);
    l.w_down = b.bind_weight(hl.w_down);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace

Forward::Forward(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                 int64_t n_ctx)
    : config_(config),
      backend_(backend),
      weights_(bind_to_backend(weights, backend)),
      cache_(backend, config.n_layers, n_ctx, config.kv_dim()) {
  LLMCTL_ASSERT(static_cast<int64_t>(weights.layers.size()) == config.n_layers);
  rope_.type = config.rope_type;
  rope_.head_dim = config.head_dim;
  rope_.n_rot = config.n_rot;
  rope_.freq_base = config.rope_freq_base;
  rope_.freq_scale = config.rope_freq_scale;
  attn_.n_heads = config.n_heads;
  attn_.n_kv_heads = config.n_kv_heads;
  attn_.head_dim = config.head_dim;

  x_ = backend.alloc(config.n_embd);
  h_ = backend.alloc(config.n_embd);
  proj_ = backend.alloc(config.n_embd);
  ffn_ = backend.alloc(config.n_embd);
  q_ = backend.alloc(config.q_dim());
  att_ = backend.alloc(config.q_dim());
  k_ = backend.alloc(config.kv_dim());
  v_ = backend.alloc(config.kv_dim());
  gate_ = backend.alloc(config.n_ff);
  up_ = backend.alloc(config.n_ff);
  logits_ = backend.alloc(config.n_vocab);
  logits_host_.resize(static_cast<size_t>(config.n_vocab));
}

const std::vector<float>& Forward::step(int32_t token) {
  const ModelConfig& c = config_;
  Backend& b = backend_;
  if (token < 0 || token >= c.n_vocab)
    throw Error(
        fmt::format("forward: token id {} is outside the vocabulary [0, {})", token, c.n_vocab));
  if (cache_.n_past() >= cache_.n_ctx())
    throw Error(fmt::format("forward: context full ({} positions)", cache_.n_ctx()),
                "use a larger context size");
  const int64_t pos = cache_.n_past();

  b.get_rows(weights_.token_embd, token, x_);  // x (n_embd,)
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const LayerWeights& l = weights_.layers[static_cast<size_t>(il)];

    // ---- attention block -------------------------------------------------------------
    b.rmsnorm(x_, l.attn_norm, c.rms_eps, h_);
    b.matmul(l.wq, h_, q_);  // (q_dim,)
    b.matmul(l.wk, h_, k_);  // (kv_dim,)
    b.matmul(l.wv, h_, v_);  // (kv_dim,)
    if (l.bq.present()) b.add_bias(q_, l.bq);
    if (l.bk.present()) b.add_bias(k_, l.bk);
    if (l.bv.present()) b.add_bias(v_, l.bv);
    b.rope(q_, c.n_heads, pos, rope_);
    b.rope(k_, c.n_kv_heads, pos, rope_);
    cache_.write(il, k_, v_);
    b.attention(q_, cache_.keys(il), cache_.values(il), pos + 1, attn_, att_);
    b.matmul(l.wo, att_, proj_);  // (n_embd,)
    b.add(x_, proj_);

    // ---- feed-forward block (SwiGLU) ---------------------------------------------------
    b.rmsnorm(x_, l.ffn_norm, c.rms_eps, h_);
    b.matmul(l.w_gate, h_, gate_);    // (n_ff,)
    b.matmul(l.w_up, h_, up_);        // (n_ff,)
    b.silu_mul(gate_, up_, gate_);    // elementwise, in place is fine
    b.matmul(l.w_down, gate_, ffn_);  // (n_embd,)
    b.add(x_, ffn_);
  }
  cache_.commit();

  b.rmsnorm(x_, weights_.output_norm, c.rms_eps, h_);
  b.matmul(weights_.output, h_, logits_);  // (n_vocab,)
  b.download(logits_, logits_host_.data(), c.n_vocab);
  return logits_host_;
}

}  // namespace llmctl
