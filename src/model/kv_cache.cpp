#include "model/kv_cache.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmctl {

KvCache::KvCache(Backend& backend, int64_t n_layers, int64_t n_ctx, int64_t kv_dim)
    : backend_(backend), n_ctx_(n_ctx) {
  if (n_layers < 1 || n_ctx < 1 || kv_dim < 1)
    throw Error(fmt::format("kv cache: n_layers {}, n_ctx {}, kv_dim {} must be positive", n_layers,
                            n_ctx, kv_dim));
  for (int64_t il = 0; il < n_layers; ++il) {
    k_.push_back(backend.alloc(n_ctx * kv_dim));
    v_.push_back(backend.alloc(n_ctx * kv_dim));
  }
}

void KvCache::write(int64_t layer, const Buffer& k, const Buffer& v) {
  LLMCTL_ASSERT(layer >= 0 && layer < static_cast<int64_t>(k_.size()));
  if (n_past_ >= n_ctx_)
    throw Error(fmt::format("kv cache: full at {} positions (n_ctx {})", n_past_, n_ctx_),
                "use a larger context size");
  backend_.set_row(k, k_[static_cast<size_t>(layer)], n_past_);
  backend_.set_row(v, v_[static_cast<size_t>(layer)], n_past_);
}

void KvCache::commit() {
  LLMCTL_ASSERT(n_past_ < n_ctx_);
  ++n_past_;
}

}  // namespace llmctl
