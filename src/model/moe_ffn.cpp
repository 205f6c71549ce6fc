// The routed FFN of a mixture-of-experts layer (moe_ffn.h). Math only through Backend; the
// host work is the grouping of the batch's slots by expert.
#include "model/moe_ffn.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmctl {

void MoeFfn::check_backend(const Backend& b, const ModelConfig& c) {
  if (c.n_experts > 0 && !b.supports_moe())
    throw Error(fmt::format("forward: the {} backend has no mixture-of-experts ops, which "
                            "architecture '{}' ({} experts) needs",
                            b.name(), c.arch, c.n_experts),
                "run it on the CPU (--device cpu)");
}

void MoeFfn::allocate(Backend& b, const ModelConfig& c, int64_t max_batch) {
  c_ = c;
  if (c.n_experts < 1) return;
  const int64_t n = max_batch;
  const int64_t k = c.n_experts_used;
  logits_ = b.alloc(n * c.n_experts);
  ids_ = b.alloc(n * k, BufferType::I32);
  weights_ = b.alloc(n * k);
  slots_ = b.alloc(n * k, BufferType::I32);
  // An expert takes a token at most once (a token's k ids differ), so at most n rows.
  x_ = b.alloc(n * c.n_embd);
  gate_ = b.alloc(n * c.n_ff_expert);
  up_ = b.alloc(n * c.n_ff_expert);
  y_ = b.alloc(n * c.n_embd);
  y_slots_ = b.alloc(n * k * c.n_embd);
  int64_t floats = n * (c.n_experts + 2 * k + 2 * c.n_embd + 2 * c.n_ff_expert + k * c.n_embd);
  if (c.moe_gated_shared_expert) {
    shared_gate_ = b.alloc(n * c.n_ff_shared);
    shared_up_ = b.alloc(n * c.n_ff_shared);
    shared_out_ = b.alloc(n * c.n_embd);
    shared_scale_ = b.alloc(n);
    floats += n * (2 * c.n_ff_shared + c.n_embd + 1);
  }
  bytes_ = static_cast<uint64_t>(floats) * sizeof(float);
}

void MoeFfn::run(Backend& b, const Matmul& matmul, const LayerWeights& l, const Buffer& h,
                 int64_t n, Buffer& out, int64_t layer, ForwardObserver* observer,
                 const ObservedBatch& batch) {
  const ModelConfig& c = c_;
  const int64_t k = c.n_experts_used;
  const int64_t n_slots = n * k;
  LLMCTL_ASSERT(static_cast<int64_t>(l.experts.size()) == c.n_experts);

  // ---- router ---------------------------------------------------------------------------
  matmul(l.ffn_gate_inp, h, n, logits_);                      // (n, n_experts)
  if (c.moe_router_bias) b.add_bias(logits_, l.ffn_gate_inp_b, n);  // gpt-oss
  b.moe_route(logits_, n, c.n_experts, k, moe_route_normalizes(c.moe_gating, c.moe_renormalize),
              ids_, weights_);
  host_ids_.resize(static_cast<size_t>(n_slots));
  b.download(ids_, host_ids_.data(), n_slots);
  if (observer != nullptr && observer->wants_moe_routing()) {
    host_logits_.resize(static_cast<size_t>(n * c.n_experts));
    host_weights_.resize(static_cast<size_t>(n_slots));
    b.download(logits_, host_logits_.data(), n * c.n_experts);
    b.download(weights_, host_weights_.data(), n_slots);
    observer->on_moe_routing(layer, batch, host_logits_.data(), c.n_experts, host_ids_.data(),
                             host_weights_.data(), k);
  }

  // ---- the slots grouped by expert (a counting sort, slot order kept within an expert) ----
  expert_begin_.assign(static_cast<size_t>(c.n_experts + 1), 0);
  for (const int32_t e : host_ids_) {
    if (e < 0 || e >= c.n_experts)  // moe_route's contract; a broken backend must not index out
      throw Error(fmt::format("forward: layer {}: the router chose expert {} of {}", layer, e,
                              c.n_experts));
    ++expert_begin_[static_cast<size_t>(e) + 1];
  }
  for (size_t e = 1; e < expert_begin_.size(); ++e) expert_begin_[e] += expert_begin_[e - 1];
  host_slots_.resize(static_cast<size_t>(n_slots));
  expert_next_.assign(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t s = 0; s < n_slots; ++s) {
    int64_t& at = expert_next_[static_cast<size_t>(host_ids_[static_cast<size_t>(s)])];
    host_slots_[static_cast<size_t>(at++)] = static_cast<int32_t>(s);
  }
  b.upload(slots_, host_slots_.data(), n_slots);

  // ---- each chosen expert once, on the rows of its tokens --------------------------------
  for (int64_t e = 0; e < c.n_experts; ++e) {
    const int64_t begin = expert_begin_[static_cast<size_t>(e)];
    const int64_t m = expert_begin_[static_cast<size_t>(e) + 1] - begin;
    if (m == 0) continue;
    const LayerWeights::Expert& x = l.experts[static_cast<size_t>(e)];
    b.moe_gather(h, c.n_embd, slots_, begin, m, k, x_);  // (m, n_embd)
    b.matmul(x.gate, x_, m, gate_);                      // (m, n_ff_expert)
    b.matmul(x.up, x_, m, up_);
    if (c.moe_expert_biases) {
      b.add_bias(gate_, x.gate_b, m);
      b.add_bias(up_, x.up_b, m);
    }
    if (c.activation == Activation::SwiGluOai)
      b.swiglu_oai(gate_, up_, m * c.n_ff_expert, gate_);
    else
      b.silu_mul(gate_, up_, m * c.n_ff_expert, gate_);
    b.matmul(x.down, gate_, m, y_);  // (m, n_embd)
    if (c.moe_expert_biases) b.add_bias(y_, x.down_b, m);
    b.moe_scatter(y_, c.n_embd, slots_, begin, m, y_slots_);
  }
  b.moe_combine(y_slots_, weights_, n, k, c.n_embd, out);  // (n, n_embd)

  // ---- the gated shared expert (qwen2moe) ------------------------------------------------
  if (!c.moe_gated_shared_expert) return;
  matmul(l.ffn_gate_shexp, h, n, shared_gate_);  // (n, n_ff_shared)
  matmul(l.ffn_up_shexp, h, n, shared_up_);
  b.silu_mul(shared_gate_, shared_up_, n * c.n_ff_shared, shared_gate_);
  matmul(l.ffn_down_shexp, shared_gate_, n, shared_out_);  // (n, n_embd)
  matmul(l.ffn_gate_inp_shexp, h, n, shared_scale_);       // (n, 1)
  b.sigmoid_scale_rows(shared_out_, shared_scale_, n, c.n_embd);
  b.add(out, shared_out_, n * c.n_embd);
}

}  // namespace llmctl
