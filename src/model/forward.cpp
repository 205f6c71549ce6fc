// The forward pass (forward.h). Math only through Backend; no loops over elements here.
#include "model/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace llmctl {

namespace {

// `n_ctx`: the positions this Forward's cache holds, which choose LongRoPE's divisors.
ModelWeights bind_to_backend(const ModelWeights& host, const ModelConfig& c, Backend& b,
                             int64_t n_ctx) {
  require_implemented(c);  // refuse a config asking for math compute_chunk lacks
  ModelWeights w;
  w.token_embd = b.bind_weight(host.token_embd);
  w.output_norm = b.bind_weight(host.output_norm);
  w.output = host.output_tied ? w.token_embd : b.bind_weight(host.output);
  w.output_tied = host.output_tied;
  for (const LayerWeights& fused : host.layers) {
    const LayerWeights hl = split_fused_layer(fused, c);  // wq/wk/wv, w_gate/w_up always
    LayerWeights l;
    for (const LayerTensor& t : kLayerTensors)
      if ((hl.*t.member).present()) l.*t.member = b.bind_weight(hl.*t.member);
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
  gate_ = b.alloc(n * c.n_ff);
  up_ = b.alloc(n * c.n_ff);
  x_out_ = b.alloc(kLogitsRows * c.n_embd);
  h_out_ = b.alloc(kLogitsRows * c.n_embd);
  logits_ = b.alloc(kLogitsRows * c.n_vocab);
  ids_ = b.alloc(n, BufferType::I32);
  pos_ = b.alloc(n, BufferType::I32);
  seq_rows_ = b.alloc(n, BufferType::I32);
  logit_rows_ = b.alloc(n, BufferType::I32);
  // slots_ and block_tables_: per layer group, allocated and grown by prepare_chunk.
  if (max_device_top_k < -1 || max_device_top_k > kMaxDeviceTopK)
    throw Error(fmt::format("forward: max_device_top_k {} is outside [-1, {}]", max_device_top_k,
                            kMaxDeviceTopK));
  max_top_k_ = max_device_top_k >= 0 ? max_device_top_k : b.device_memory() ? kMaxDeviceTopK : 0;
  if (max_top_k_ > 0) {
    top_k_ids_ = b.alloc(kLogitsRows * max_top_k_, BufferType::I32);
    top_k_values_ = b.alloc(kLogitsRows * max_top_k_);
    nan_inf_ = b.alloc(kLogitsRows * 2, BufferType::I32);
  }
  const int64_t floats = n * (4 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.n_ff) +
                         kLogitsRows * (2 * c.n_embd + c.n_vocab);
  const auto n_groups = static_cast<uint64_t>(cache_.n_groups());
  scratch_bytes_ =
      static_cast<uint64_t>(floats) * sizeof(float) + (4 + n_groups) * static_cast<uint64_t>(n) * 4;
}

const std::vector<float>& Forward::decode(const std::vector<BatchToken>& batch) {
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
  decode_k_ = std::min<int32_t>(decode_k_, static_cast<int32_t>(config_.n_vocab));
  top_k_.k = decode_k_;
  const auto n = static_cast<int64_t>(batch.size());
  for (int64_t i = 0; i < n; i += max_batch_)
    run_chunk(batch.data() + i, std::min(max_batch_, n - i), i + max_batch_ >= n);
  return logits_host_;
}

const std::vector<float>& Forward::top_k_row_logits(size_t r) {
  if (r >= top_k_where_.size())
    throw Error(fmt::format("forward: top-k row {} of the last decode, which had {}", r,
                            top_k_where_.size()));
  const auto n_vocab = static_cast<size_t>(config_.n_vocab);
  const int64_t where = top_k_where_[r];
  top_k_row_.resize(n_vocab);
  if (where >= 0) {
    backend_.download(logits_, top_k_row_.data(), config_.n_vocab, where * config_.n_vocab);
  } else {
    const auto off = static_cast<size_t>(-1 - where) * n_vocab;
    std::copy_n(top_k_whole_.begin() + static_cast<std::ptrdiff_t>(off), n_vocab,
                top_k_row_.begin());
  }
  return top_k_row_;
}

const std::vector<float>& Forward::step(int32_t token) {
  if (cache_.reserve(0, 1) != Reserve::Ok)
    throw Error(fmt::format("forward: context full ({} positions)", cache_.max_len(0)),
                "use a larger context size");
  return decode({BatchToken{0, token, true}});
}

void Forward::set_rope_positions(int32_t seq, RopePositions m) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (m.offset < 0 || m.offset + cache_.max_len(seq) > kMax)
    throw Error(fmt::format("forward: RoPE offset {} for a sequence of up to {} positions is "
                            "outside [0, {}]",
                            m.offset, cache_.max_len(seq), kMax - cache_.max_len(seq)));
  if (m.offset == 0 && !m.all_zero)
    rope_positions_.erase(seq);
  else
    rope_positions_[seq] = m;
}

void Forward::matmul(const WeightView& w, const Buffer& x, int64_t n, Buffer& out) {
  if (observer_ != nullptr && observer_->wants_matmul_inputs())
    observer_->on_matmul_input(w, observed_, observe(x, n * w.n_cols), n);
  backend_.matmul(w, x, n, out);
}

const float* Forward::observe(const Buffer& buf, int64_t n) {
  obs_host_.resize(static_cast<size_t>(n));
  backend_.download(buf, obs_host_.data(), n);
  return obs_host_.data();
}

void Forward::reset() {
  const int64_t max_len = cache_.max_len(0);
  cache_.remove_sequence(0);
  cache_.add_sequence(max_len);
}

// A chunk: host preparation and uploads, the device work (recorded as one unit when it is a
// decode step and the backend records, see Backend::begin_recording), then the downloads.
void Forward::run_chunk(const BatchToken* batch, int64_t n, bool last) {
  const int64_t max_blocks = prepare_chunk(batch, n);
  const auto n_rows = static_cast<int64_t>(host_logit_rows_.size());
  const bool one_pass = n_rows > 0 && n_rows <= kLogitsRows;
  // A decode step: one token of each sequence (the shape that repeats every step, so a
  // backend's recording can be updated in place), and nothing that downloads mid-step.
  const bool decode_step = static_cast<int64_t>(seqs_.size()) == n && observer_ == nullptr;
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

  for (size_t r = 0; r < seqs_.size(); ++r) {
    toks_.clear();
    for (int64_t t = 0; t < n; ++t)
      if (host_rows_[static_cast<size_t>(t)] == static_cast<int32_t>(r))
        toks_.push_back(batch[t].token);
    cache_.commit(seqs_[r], toks_.data(), static_cast<int64_t>(toks_.size()));
  }
  // Wanted rows, kLogitsRows at a time (the first pass ran above when it was the only one).
  for (int64_t r0 = 0; r0 < n_rows; r0 += kLogitsRows) {
    const int64_t m = std::min(kLogitsRows, n_rows - r0);
    if (!one_pass) {
      if (r0 > 0) backend_.upload(logit_rows_, host_logit_rows_.data() + r0, m);
      output_pass(r0, m);
    }
    collect_output(r0, m, last && r0 + m == n_rows);
  }
}

int64_t Forward::prepare_chunk(const BatchToken* batch, int64_t n) {
  const ModelConfig& c = config_;
  Backend& b = backend_;
  host_ids_.resize(static_cast<size_t>(n));
  host_pos_.resize(static_cast<size_t>(n));
  host_rows_.resize(static_cast<size_t>(n));
  host_logit_rows_.clear();
  host_logit_k_.clear();
  seqs_.clear();                   // distinct sequences, in order of first appearance
  std::vector<int64_t> seq_count;  // tokens of each in this chunk so far
  int64_t max_blocks = 1;
  for (int64_t t = 0; t < n; ++t) {
    const BatchToken& bt = batch[t];
    if (bt.token < 0 || bt.token >= c.n_vocab)
      throw Error(fmt::format("forward: token id {} is outside the vocabulary [0, {})", bt.token,
                              c.n_vocab));
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
    if (bt.logits) {
      host_logit_rows_.push_back(static_cast<int32_t>(t));
      host_logit_k_.push_back(decode_k_ > 0 && bt.top_k > 0 ? bt.top_k : 0);
    }
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
  if (n_rows > 0) b.upload(logit_rows_, host_logit_rows_.data(), std::min(n_rows, kLogitsRows));

  // RoPE positions: the cache positions, unless a sequence maps them (set_rope_positions).
  rope_pos_in_use_ = &pos_;
  if (!rope_positions_.empty()) {
    host_rope_pos_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const auto it = rope_positions_.find(batch[t].seq);
      const int32_t p = host_pos_[static_cast<size_t>(t)];
      host_rope_pos_[static_cast<size_t>(t)] =
          it == rope_positions_.end() ? p
          : it->second.all_zero       ? 0
                                      : static_cast<int32_t>(it->second.offset + p);
    }
    if (rope_pos_.size() == 0) rope_pos_ = b.alloc(max_batch_, BufferType::I32);
    b.upload(rope_pos_, host_rope_pos_.data(), n);
    rope_pos_in_use_ = &rope_pos_;
  }

  // What the observer sees of this chunk.
  if (observer_ != nullptr) {
    host_seq_ids_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) host_seq_ids_[static_cast<size_t>(t)] = batch[t].seq;
    observed_ = ObservedBatch{n, host_seq_ids_.data(), host_pos_.data(), host_ids_.data()};
    if (observer_->wants_attention_stats() && attn_stats_.size() == 0)
      attn_stats_ = b.alloc(max_batch_ * c.n_heads * kAttnStatFields);
  }
  return max_blocks;
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
      matmul(l.wq, in, n, att_);  // (n, q_dim)
      b.rmsnorm(att_, l.attn_q_norm, c.rms_eps, per_head ? n * c.n_heads : n, q_);
      matmul(l.wk, in, n, att_);  // (n, kv_dim)
      b.rmsnorm(att_, l.attn_k_norm, c.rms_eps, per_head ? n * c.n_kv_heads : n, k_);
    } else {
      matmul(l.wq, in, n, q_);  // (n, q_dim)
      matmul(l.wk, in, n, k_);  // (n, kv_dim)
    }
    matmul(l.wv, in, n, v_);  // (n, kv_dim)
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
    if (post_norm) b.rmsnorm(proj_, l.attn_post_norm, c.rms_eps, n, h_);
    add_residual(post_norm ? h_ : proj_, n);

    // ---- feed-forward block (SwiGLU or GeGLU) ------------------------------------------
    if (pre_norm) b.rmsnorm(x_, l.ffn_norm, c.rms_eps, n, h_);
    const Buffer& ffn_in = pre_norm ? h_ : x_;
    matmul(l.w_gate, ffn_in, n, gate_);  // (n, n_ff)
    matmul(l.w_up, ffn_in, n, up_);      // (n, n_ff)
    if (c.activation == Activation::GeluTanhGlu)
      b.gelu_mul(gate_, up_, n * c.n_ff, gate_);  // elementwise, in place is fine
    else
      b.silu_mul(gate_, up_, n * c.n_ff, gate_);
    matmul(l.w_down, gate_, n, ffn_);  // (n, n_embd)
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
  bool any = false;
  for (int64_t r = r0; r < r0 + m; ++r) any = any || wants_top_k(r);
  if (!any) return;
  b.top_k(logits_, m, c.n_vocab, decode_k_, top_k_ids_, top_k_values_);  // (m, k) each
  b.find_nan_inf(logits_, m, c.n_vocab, nan_inf_);                       // (m, 2)
}

// Whole rows go to logits_host_; candidate rows to top_k_, with where their whole logits stay.
void Forward::collect_output(int64_t r0, int64_t m, bool last) {
  Backend& b = backend_;
  const auto n_vocab = static_cast<size_t>(config_.n_vocab);
  bool any_whole = false, any_top = false;
  for (int64_t r = r0; r < r0 + m; ++r) {
    any_whole = any_whole || !wants_top_k(r);
    any_top = any_top || wants_top_k(r);
  }
  if (!any_top) {  // whole rows only (always on a host backend): straight into the result
    const size_t old = logits_host_.size();
    logits_host_.resize(old + static_cast<size_t>(m) * n_vocab);
    b.download(logits_, logits_host_.data() + old, m * config_.n_vocab);
    return;
  }
  // Candidate rows of an earlier pass lose logits_ to the next one: keep them on the host.
  const bool whole_pass = any_whole || !last;
  if (whole_pass) {
    chunk_host_.resize(static_cast<size_t>(m) * n_vocab);
    b.download(logits_, chunk_host_.data(), m * config_.n_vocab);
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
