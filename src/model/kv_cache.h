#pragma once
// KvCache: the keys and values of one sequence, contiguous per layer. A placeholder for the
// paged cache of issue 3: the forward pass only uses the methods below, so the paged cache can
// replace this class without touching forward.cpp's math.
//
//   keys(layer), values(layer): (n_ctx, n_kv_heads * head_dim) f32 backend buffers;
//   rows 0 .. n_past - 1 hold positions 0 .. n_past - 1.

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmctl {

class KvCache {
 public:
  KvCache(Backend& backend, int64_t n_layers, int64_t n_ctx, int64_t kv_dim);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_past() const { return n_past_; }  // positions stored (and committed)

  // Writes k, v (kv_dim,) of layer `layer` at row n_past(). Throws Error when the cache is full.
  void write(int64_t layer, const Buffer& k, const Buffer& v);
  // After every layer has written position n_past(): the position becomes part of the past.
  void commit();
  // Forgets every position (the buffers are kept).
  void clear() { n_past_ = 0; }

  const Buffer& keys(int64_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const Buffer& values(int64_t layer) const { return v_[static_cast<size_t>(layer)]; }

 private:
  Backend& backend_;
  int64_t n_ctx_ = 0;
  int64_t n_past_ = 0;
  std::vector<Buffer> k_, v_;
};

}  // namespace llmctl
