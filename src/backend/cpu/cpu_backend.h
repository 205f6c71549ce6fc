#pragma once
// The scalar reference CPU backend: plain loops, one thread, written to be obviously right.
// It is the yardstick the SIMD paths and the CUDA backend are tested against.
//
// Precision: activations and products are f32, like the device backends will be. Sums that
// run over a whole vector in one accumulator are kept in double where it costs nothing next
// to the loop (rmsnorm's sum of squares, softmax's denominator); matmul dot products and
// attention scores accumulate in f32 (n_embd-long sums, relative error ~ n * 2^-24 at worst).

#include <memory>
#include <vector>

#include "backend/backend.h"

namespace llmctl::cpu {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

 protected:
  Buffer alloc_impl(int64_t n) override;
  void upload_impl(Buffer& dst, const float* src, int64_t n, int64_t offset) override;
  void download_impl(const Buffer& src, float* dst, int64_t n) override;
  WeightView bind_weight_impl(const WeightView& host) override { return host; }
  void sync_impl() override {}
  void get_rows_impl(const WeightView& table, int32_t id, Buffer& out) override;
  void rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, Buffer& out) override;
  void matmul_impl(const WeightView& w, const Buffer& x, Buffer& out) override;
  void add_bias_impl(Buffer& x, const WeightView& b) override;
  void rope_impl(Buffer& x, int64_t n_heads, int64_t pos, const RopeParams& p) override;
  void set_row_impl(const Buffer& src, Buffer& dst, int64_t row) override;
  void attention_impl(const Buffer& q, const Buffer& k_cache, const Buffer& v_cache, int64_t n_kv,
                      const AttentionShape& s, Buffer& out) override;
  void silu_mul_impl(const Buffer& gate, const Buffer& up, Buffer& out) override;
  void add_impl(Buffer& x, const Buffer& y) override;

 private:
  std::vector<float> row_scratch_;    // one dequantized weight row (matmul)
  std::vector<float> score_scratch_;  // attention scores for one head (n_kv)
};

}  // namespace llmctl::cpu
