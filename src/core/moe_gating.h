#pragma once
// How a mixture-of-experts router turns its logits into the k chosen experts' weights: one
// small table (kMoeGatings) that the architecture rows name (model/arch_row.h MoeRow::gating)
// and the engine reads through moe_route_normalizes(), so no file branches on an architecture.
//
//   Softmax        p = softmax(all n_expert logits); the k largest p, weighted by p
//                  (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX: Mixtral, Qwen-MoE);
//                  divided by their sum when the row renormalises (norm_w)
//   SoftmaxWeight  the k largest logits, weighted by the softmax over those k logits alone
//                  (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT: gpt-oss)
//
// Why SoftmaxWeight needs no op of its own: ranking by logit and ranking by softmax
// probability choose the same experts, and the top-1 logit is the max of all of them, so
//   exp(x_i - max) / sum_{j in top k} exp(x_j - max) = p_i / sum_{j in top k} p_j,
// the renormalised softmax probabilities. Backend::moe_route with `normalize` computes the
// right-hand side (rounding differs by an ulp or two; its clamp of the sum at 6.1e-5 never
// acts: the top-k sum is at least k / n_expert). --moe-stats' top-k mass is the share of
// softmax(all logits) the chosen k hold, for both: the probabilities both rank by.

#include <cstdint>

namespace llmctl {

enum class MoeGating : uint8_t { Softmax, SoftmaxWeight };

struct MoeGatingRule {
  MoeGating gating;
  const char* name;            // llama.cpp's llama_expert_gating_func_name
  bool softmax_over_selected;  // the weights are a softmax over the k chosen logits
};

inline constexpr MoeGatingRule kMoeGatings[] = {
    {MoeGating::Softmax, "softmax", false},
    {MoeGating::SoftmaxWeight, "softmax_weight", true},
};

inline const MoeGatingRule& moe_gating_rule(MoeGating g) {
  return kMoeGatings[static_cast<uint8_t>(g)];
}

// moe_route's `normalize` for a gating and the row's norm_w (see above for SoftmaxWeight).
inline bool moe_route_normalizes(MoeGating g, bool norm_w) {
  return norm_w || moe_gating_rule(g).softmax_over_selected;
}

}  // namespace llmctl
