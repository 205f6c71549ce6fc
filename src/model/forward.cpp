// The forward pass (forward.h). Math only through Backend; no loops over elements here.
#include "model/forward.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace llmctl {

namespace {

// `n_ctx`: the positions this Forward's cache holds, which choose LongRoPE's divisors.
ModelWeights bind_to_backend(const ModelWeights& host, const ModelConfig& c, Backend& b,
                             int64_t n_ctx) {
  require_implemented(c);  // refuse a config asking for math compute_chunk lacks
  MoeFfn::check_backend(b, c);
  ModelWeights w;
  w.token_embd = b.bind_weight(host.token_embd);
  w.output_norm = b.bind_weight(host.output_norm);
  w.output = host.output_tied ? w.token_embd : b.bind_weight(host.output);
  w.output_tied = host.output_tied;
  w.expert_share = host.expert_share;
  for (const LayerWeights& fused : host.layers) {
    const LayerWeights hl = split_fused_layer(fused, c);  // wq/wk/wv, w_gate/w_up always
    LayerWeights l;
    for (const LayerTensor& t : kLayerTensors)
      if ((hl.*t.member).present()) l.*t.member = b.bind_weight(hl.*t.member);
    for (const LayerWeights::Expert& e : hl.experts)
      l.experts.push_back({b.bind_weight(e.gate), b.bind_weight(e.up), b.bind_weight(e.down),
                           e.gate_b.present() ? b.bind_weight(e.gate_b) : WeightView{},
                           e.up_b.present() ? b.bind_weight(e.up_b) : WeightView{},
                           e.down_b.present() ? b.bind_weight(e.down_b) : WeightView{}});
    w.layers.push_back(std::move(l));
  }
  w.rope_freqs = b.bind_weight(rope_divisors_for(host, c, n_ctx));
  return w;
}

KvCacheOptions single_sequence_cache(int64_t n_ctx, KvType type, std::optional<KvType> v_type) {
  if (n_ctx < 1) throw Error(fmt::format("forward: context size {} must be >= 1", n_ctx));
  KvCacheOptions kv;
  kv.type = type;
  kv.v_type = v_type;
  kv.n_blocks = (n_ctx + kv.block_size - 1) / kv.block_size;
  kv.max_sequences = 1;
  return kv;
}

// The cache's options as this Forward runs it: its batch size bounds the positions of a
// sequence one forward pass maps.
KvCacheOptions resolved_cache(const ModelConfig& c, KvCacheOptions kv, int64_t max_batch) {
  check_kv_types_head_dim(kv, c.head_dim);  // Q8_0 / Q4_0: whole blocks per head
  if (kv.n_blocks == 0 && kv.block_size >= 1)
    kv.n_blocks = (c.n_ctx_train + kv.block_size - 1) / kv.block_size;
  kv.max_chunk = std::max<int64_t>(1, max_batch);  // allocate() refuses a bad batch size
  return kv;
}

int64_t cache_positions(const ModelConfig& c, const KvCacheOptions& kv, int64_t max_batch) {
  const KvCacheOptions r = resolved_cache(c, kv, max_batch);
  return r.n_blocks * r.block_size;
}

}  // namespace

Forward::Forward(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                 const ForwardOptions& opt)
    : config_(config),
      backend_(backend),
      weights_(bind_to_backend(weights, config, backend,
                               cache_positions(config, opt.kv, opt.max_batch_tokens))),
      max_batch_(opt.max_batch_tokens),
      cache_(backend, layer_windows(config), config.kv_dim(),
             resolved_cache(config, opt.kv, opt.max_batch_tokens)) {
  allocate(opt.max_device_top_k);
}

Forward::Forward(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                 int64_t n_ctx, KvType kv_type, std::optional<KvType> v_type)
    : config_(config),
      backend_(backend),
      weights_(bind_to_backend(weights, config, backend, n_ctx)),
      max_batch_(std::min<int64_t>(512, n_ctx)),
      cache_(backend, layer_windows(config), config.kv_dim(),
             resolved_cache(config, single_sequence_cache(n_ctx, kv_type, v_type), max_batch_)) {
  allocate(ForwardOptions{}.max_device_top_k);
  cache_.add_sequence(n_ctx);  // sequence 0, for step()
}

void Forward::allocate(int32_t max_device_top_k) {
  const ModelConfig& c = config_;
  LLMCTL_ASSERT(static_cast<int64_t>(weights_.layers.size()) == c.n_layers);
  if (max_batch_ < 1 || max_batch_ > 65536)
    throw Error(fmt::format("forward: batch size {} is outside [1, 65536]", max_batch_));
  // Per layer: RoPE base and scale, and the attention window (arch.h layer_window: local and
  // global layers of a sliding-window pattern differ in both).
  rope_.assign(static_cast<size_t>(c.n_layers), RopeParams{});
  attn_.assign(static_cast<size_t>(c.n_layers), AttentionShape{});
  for (int64_t il = 0; il < c.n_layers; ++il) {
    RopeParams& r = rope_[static_cast<size_t>(il)];
    r.type = c.rope_type;
    r.head_dim = c.head_dim;
    r.n_rot = c.n_rot;
    r.freq_base = layer_rope_base(c, il);
    r.freq_scale = layer_rope_freq_scale(c, il);
    r.freq_factors = weights_.rope_freqs;
    if (!layer_rope_local(c, il)) {  // YaRN where the file's scaling applies
      r.ext_factor = c.rope_ext_factor;
      r.yarn_low = c.rope_yarn_low;
      r.yarn_high = c.rope_yarn_high;
      r.mscale = c.rope_mscale;
    }
    AttentionShape& s = attn_[static_cast<size_t>(il)];
    s.n_heads = c.n_heads;
    s.n_kv_heads = c.n_kv_heads;
    s.head_dim = c.head_dim;
    s.window = layer_window(c, il);
    s.scale = static_cast<float>(c.attn_scale);  // 0: the op's 1/sqrt(head_dim)
    s.softcap = static_cast<float>(c.attn_softcap);
    if (c.has_attn_sinks) s.sinks = weights_.layers[static_cast<size_t>(il)].attn_sinks;
  }

  Backend& b = backend_;
  const int64_t n = max_batch_;
  x_ = b.alloc(n * c.n_embd);
  h_ = b.alloc(n * c.n_embd);
  proj_ = b.alloc(n * c.n_embd);
  ffn_ = b.alloc(n * c.n_embd);
  q_ = b.alloc(n * c.q_dim());
  att_ = b.alloc(n * c.q_dim());
  k_ = b.alloc(n * c.kv_dim());
  v_ = b.alloc(n * c.kv_dim());
  if (c.qk_norm != QkNorm::None) k_raw_ = b.alloc(n * c.kv_dim());
  const int64_t n_ff_dense = c.n_experts > 0 ? 0 : c.n_ff;
  if (n_ff_dense > 0) {
    gate_ = b.alloc(n * n_ff_dense);
    up_ = b.alloc(n * n_ff_dense);
  }
  moe_.allocate(b, c, n);
  x_out_ = b.alloc(kLogitsRows * c.n_embd);
  h_out_ = b.alloc(kLogitsRows * c.n_embd);
  logits_ = b.alloc(kLogitsRows * c.n_vocab);
  batch_.allocate(n);                   // ids, positions, rows, slots (forward_batch.h)
  results_.allocate(max_device_top_k);  // top-k candidates (forward_logits.h)
  const int64_t kv_bufs = c.qk_norm != QkNorm::None ? 3 : 2;  // k_, v_ (and k_raw_)
  const int64_t floats =
      n * (4 * c.n_embd + 2 * c.q_dim() + kv_bufs * c.kv_dim() + 2 * n_ff_dense) +
                         kLogitsRows * (2 * c.n_embd + c.n_vocab);
  const auto n_groups = static_cast<uint64_t>(cache_.n_groups());
  scratch_bytes_ = static_cast<uint64_t>(floats) * sizeof(float) +
                   (4 + n_groups) * static_cast<uint64_t>(n) * 4 + moe_.bytes();
}

const std::vector<float>& Forward::decode(const std::vector<BatchToken>& batch) {
  results_.begin(batch);
  const auto n = static_cast<int64_t>(batch.size());
  for (int64_t i = 0; i < n; i += max_batch_)
    run_chunk(batch.data() + i, std::min(max_batch_, n - i), i + max_batch_ >= n);
  return results_.whole_rows();
}

const std::vector<float>& Forward::step(int32_t token) {
  if (cache_.reserve(0, 1) != Reserve::Ok)
    throw Error(fmt::format("forward: context full ({} positions)", cache_.max_len(0)),
                "use a larger context size");
  return decode({BatchToken{0, token, true}});
}

void Forward::matmul(const WeightView& w, const Buffer& x, int64_t n, Buffer& out) {
  if (observer_ != nullptr && observer_->wants_matmul_inputs())
    observer_->on_matmul_input(w, observed_, observe(x, n * w.n_cols), n);
  backend_.matmul(w, x, n, out);
}

void Forward::matmul_shared(std::initializer_list<const WeightView*> ws,
                            std::initializer_list<Buffer*> outs, const Buffer& x, int64_t n) {
  if (observer_ != nullptr && observer_->wants_matmul_inputs()) {
    const float* input = observe(x, n * (*ws.begin())->n_cols);  // one row length: one download
    for (const WeightView* w : ws) observer_->on_matmul_input(*w, observed_, input, n);
  }
  backend_.matmul_shared(ws.begin(), outs.begin(), static_cast<int>(ws.size()), x, n);
}

const float* Forward::observe(const Buffer& buf, int64_t n) {
  obs_host_.resize(static_cast<size_t>(n));
  backend_.download(buf, obs_host_.data(), n);
  return obs_host_.data();
}

void Forward::prepare_matmuls() {
  backend_.prepare_matmul(weights_.output);
  for (const LayerWeights& l : weights_.layers) {
    for (const LayerTensor& t : kLayerTensors)
      if (t.kind == TensorKind::Matrix && (l.*t.member).present())
        backend_.prepare_matmul(l.*t.member);
    for (const LayerWeights::Expert& e : l.experts)
      for (const WeightView* w : {&e.gate, &e.up, &e.down}) backend_.prepare_matmul(*w);
  }
}

void Forward::reset() {
  const int64_t max_len = cache_.max_len(0);
  cache_.remove_sequence(0);
  cache_.add_sequence(max_len);
}

// A chunk: host preparation and uploads, the device work (recorded as one unit when it is a
// decode step and the backend records, see Backend::begin_recording), then the downloads.
void Forward::run_chunk(const BatchToken* batch, int64_t n, bool last) {
  results_.begin_chunk(batch, n);
  const int64_t max_blocks = batch_.prepare(batch, n, kLogitsRows, observer_);
  rope_pos_in_use_ = &batch_.rope_positions();
  if (observer_ != nullptr && observer_->wants_attention_stats() && attn_stats_.size() == 0)
    attn_stats_ = backend_.alloc(max_batch_ * config_.n_heads * kAttnStatFields);
  const auto n_rows = static_cast<int64_t>(host_logit_rows_.size());
  const bool one_pass = n_rows > 0 && n_rows <= kLogitsRows;
  // A decode step: one token of each sequence (the shape that repeats every step, so a
  // backend's recording can be updated in place), and nothing that downloads mid-step (an
  // observer; the experts' routing, moe_ffn.h).
  const bool decode_step =
      batch_.n_sequences() == n && observer_ == nullptr && config_.n_experts == 0;
  bool done = false;
  if (decode_step && backend_.begin_recording(n)) {
    try {
      compute_chunk(n, max_blocks, one_pass);
      done = backend_.end_recording();
    } catch (const std::exception& e) {
      // A launch that failed only because it was being recorded; a real error comes back
      // from the plain run below.
      backend_.abort_recording(e.what());
    }
  }
  if (!done) compute_chunk(n, max_blocks, one_pass);

  batch_.commit(batch, n);
  // Wanted rows, kLogitsRows at a time (the first pass ran above when it was the only one).
  for (int64_t r0 = 0; r0 < n_rows; r0 += kLogitsRows) {
    const int64_t m = std::min(kLogitsRows, n_rows - r0);
    if (!one_pass) {
      if (r0 > 0) batch_.upload_logit_rows(r0, m);
      output_pass(r0, m);
    }
    results_.collect(logits_, r0, m, last && r0 + m == n_rows);
  }
}

void Forward::compute_chunk(int64_t n, int64_t max_blocks, bool with_output) {
  const ModelConfig& c = config_;
  Backend& b = backend_;
  ForwardObserver* obs = observer_;
  const bool want_stats = obs != nullptr && obs->wants_attention_stats();
  const bool want_residual = obs != nullptr && obs->wants_residual();
  const Buffer& rope_pos = *rope_pos_in_use_;

  b.get_rows(weights_.token_embd, ids_, n, x_);  // x (n, n_embd)
  if (c.embd_scale != 1.0) b.scale(x_, n * c.n_embd, static_cast<float>(c.embd_scale));
  const bool pre_norm = c.norms != NormPlacement::Post;
  const bool post_norm = c.norms != NormPlacement::Pre;
  if (want_residual) obs->on_residual(-1, observed_, observe(x_, n * c.n_embd), c.n_embd);
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const LayerWeights& l = weights_.layers[static_cast<size_t>(il)];
    Buffer& k_pool = cache_.keys(il);
    Buffer& v_pool = cache_.values(il);
    const auto group = static_cast<size_t>(cache_.layer_group(il));  // its pool and table
    const PagedKv kv{&k_pool,    &v_pool, cache_.block_size(), &block_tables_[group], max_blocks,
                     &seq_rows_, &pos_};

    const RopeParams& rope = rope_[static_cast<size_t>(il)];
    const AttentionShape& attn = attn_[static_cast<size_t>(il)];

    // ---- attention block -------------------------------------------------------------
    if (pre_norm) b.rmsnorm(x_, l.attn_norm, c.rms_eps, n, h_);
    const Buffer& in = pre_norm ? h_ : x_;
    if (c.qk_norm != QkNorm::None) {
      // Projections into att_ (free until attention writes it), then normed: per head, rows
      // of head_dim ((n * n_heads) and (n * n_kv_heads) of them); whole vector, n rows of
      // q_dim and of kv_dim.
      const bool per_head = c.qk_norm == QkNorm::PerHead;
      matmul_shared({&l.wq, &l.wk, &l.wv}, {&att_, &k_raw_, &v_}, in, n);
      b.rmsnorm(att_, l.attn_q_norm, c.rms_eps, per_head ? n * c.n_heads : n, q_);
      b.rmsnorm(k_raw_, l.attn_k_norm, c.rms_eps, per_head ? n * c.n_kv_heads : n, k_);
    } else {
      // q (n, q_dim), k and v (n, kv_dim)
      matmul_shared({&l.wq, &l.wk, &l.wv}, {&q_, &k_, &v_}, in, n);
    }
    if (c.has_qkv_bias) {
      b.add_bias(q_, l.bq, n);
      b.add_bias(k_, l.bk, n);
      b.add_bias(v_, l.bv, n);
    }
    b.rope(q_, rope_pos, n, c.n_heads, rope);
    if (c.attn_temp_beta != 0.0)  // Mistral 3: q times its position's temperature
      b.attn_temperature(q_, rope_pos, n, c.q_dim(), c.attn_temp_beta, c.attn_temp_length);
    b.rope(k_, rope_pos, n, c.n_kv_heads, rope);
    b.kv_store(k_, v_, slots_[group], n, c.kv_dim(), k_pool, v_pool);
    if (want_stats) {
      b.attention_with_stats(q_, kv, n, attn, att_, attn_stats_);
      obs->on_attention_stats(il, observed_, observe(attn_stats_, n * c.n_heads * kAttnStatFields),
                              c.n_heads);
    } else {
      b.attention(q_, kv, n, attn, att_);
    }
    matmul(l.wo, att_, n, proj_);  // (n, n_embd)
    if (c.has_out_bias) b.add_bias(proj_, l.bo, n);
    if (post_norm) b.rmsnorm(proj_, l.attn_post_norm, c.rms_eps, n, h_);
    add_residual(post_norm ? h_ : proj_, n);

    // ---- feed-forward block (SwiGLU or GeGLU; routed experts, moe_ffn.h) ----------------
    if (pre_norm) b.rmsnorm(x_, l.ffn_norm, c.rms_eps, n, h_);
    const Buffer& ffn_in = pre_norm ? h_ : x_;
    if (c.n_experts > 0) {
      moe_.run(
          b,
          [this](const WeightView& w, const Buffer& x, int64_t m, Buffer& out) {
            matmul(w, x, m, out);
          },
          l, ffn_in, n, ffn_, il, obs, observed_);
    } else {
      matmul_shared({&l.w_gate, &l.w_up}, {&gate_, &up_}, ffn_in, n);  // (n, n_ff) each
      if (c.activation == Activation::GeluTanhGlu)
        b.gelu_mul(gate_, up_, n * c.n_ff, gate_);  // elementwise, in place is fine
      else if (c.activation == Activation::SwiGluOai)
        b.swiglu_oai(gate_, up_, n * c.n_ff, gate_);
      else
        b.silu_mul(gate_, up_, n * c.n_ff, gate_);
      matmul(l.w_down, gate_, n, ffn_);  // (n, n_embd)
    }
    if (post_norm) b.rmsnorm(ffn_, l.ffn_post_norm, c.rms_eps, n, h_);
    add_residual(post_norm ? h_ : ffn_, n);
    if (want_residual) obs->on_residual(il, observed_, observe(x_, n * c.n_embd), c.n_embd);
  }
  if (with_output) output_pass(0, static_cast<int64_t>(host_logit_rows_.size()));
}

// x (n, n_embd) += residual_scale * block (n, n_embd); `block` is scratch, scaled in place.
void Forward::add_residual(Buffer& block, int64_t n) {
  const ModelConfig& c = config_;
  if (c.residual_scale != 1.0)
    backend_.scale(block, n * c.n_embd, static_cast<float>(c.residual_scale));
  backend_.add(x_, block, n * c.n_embd);
}

void Forward::output_pass(int64_t r0, int64_t m) {
  const ModelConfig& c = config_;
  Backend& b = backend_;
  b.copy_rows(x_, c.n_embd, logit_rows_, m, x_out_);
  b.rmsnorm(x_out_, weights_.output_norm, c.rms_eps, m, h_out_);
  matmul(weights_.output, h_out_, m, logits_);  // (m, n_vocab)
  // Granite divides the logits by its logit scale; Gemma 2 caps them (no family does both).
  if (c.logit_scale != 1.0)
    b.scale(logits_, m * c.n_vocab, static_cast<float>(1.0 / c.logit_scale));
  if (c.final_softcap > 0.0) b.softcap(logits_, m * c.n_vocab, static_cast<float>(c.final_softcap));
  results_.select(logits_, r0, m);  // top-k candidates, when a row asks for them
}

}  // namespace llmctl
