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
#include "backend/cpu/rope_table.h"

namespace llmctl::cpu {

// The statistics of one (token, head) of attention_with_stats() (AttnStat in backend.h), in
// three parts so a kernel computes them from the very scores it uses, without a second pass
// over K: attn_raw_score_stats() on the scaled scores before the soft-cap (RawMax, RawMin,
// RawNonFinite; called with or without a cap), attn_score_stats() on the scores s[0 .. n) the
// softmax receives (Max, Min, Sum, SumSq over the finite ones, Nan, Inf, Count),
// attn_softmax_entropy() on the softmax a[0 .. n) after it (Entropy). Sums run in double and
// are stored as float. Only reads its input, so the attention output cannot depend on whether
// statistics are asked for.
void attn_raw_score_stats(const float* scores, int64_t n, float* stats);
void attn_score_stats(const float* scores, int64_t n, float* stats);
void attn_softmax_entropy(const float* probs, int64_t n, float* stats);

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }

 protected:
  Buffer alloc_impl(int64_t n, BufferType type) override;
  void upload_impl(Buffer& dst, const void* src, int64_t n, int64_t offset) override;
  void download_impl(const Buffer& src, void* dst, int64_t n, int64_t offset) override;
  WeightView bind_weight_impl(const WeightView& host) override { return host; }
  void sync_impl() override {}
  void get_rows_impl(const WeightView& table, const Buffer& ids, int64_t n_tokens,
                     Buffer& out) override;
  void rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                    Buffer& out) override;
  void matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) override;
  void add_bias_impl(Buffer& x, const WeightView& b, int64_t n_tokens) override;
  void rope_impl(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
                 const RopeParams& p) override;
  void kv_store_impl(const Buffer& k, const Buffer& v, const Buffer& slots, int64_t n_tokens,
                     int64_t kv_dim, Buffer& k_pool, Buffer& v_pool) override;
  void attention_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens, const AttentionShape& s,
                      Buffer& out) override;
  void attention_with_stats_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                 const AttentionShape& s, Buffer& out, Buffer& stats) override;
  void top_k_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols, int64_t k, Buffer& ids,
                  Buffer& values) override;
  void silu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) override;
  void gelu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) override;
  void swiglu_oai_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) override;
  void softcap_impl(Buffer& x, int64_t n, float cap) override;
  void scale_impl(Buffer& x, int64_t n, float factor) override;
  void attn_temperature_impl(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_cols,
                             double beta, int64_t length) override;
  void add_impl(Buffer& x, const Buffer& y, int64_t n) override;
  void copy_rows_impl(const Buffer& x, int64_t row_len, const Buffer& rows, int64_t n_rows,
                      Buffer& out) override;
  // The mixture-of-experts ops (moe_cpu.cpp): plain loops, also the fast backend's.
  void moe_route_impl(const Buffer& logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                      bool normalize, Buffer& ids, Buffer& weights) override;
  void moe_gather_impl(const Buffer& x, int64_t n_cols, const Buffer& slots, int64_t offset,
                       int64_t m, int64_t k, Buffer& out) override;
  void moe_scatter_impl(const Buffer& y, int64_t n_cols, const Buffer& slots, int64_t offset,
                        int64_t m, Buffer& y_slots) override;
  void moe_combine_impl(const Buffer& y_slots, const Buffer& weights, int64_t n_tokens, int64_t k,
                        int64_t n_cols, Buffer& out) override;
  void sigmoid_scale_rows_impl(Buffer& x, const Buffer& gate, int64_t n_tokens,
                               int64_t n_cols) override;
  // BLAS/LAPACK on n_threads() threads (gram_eigen_cpu.h): float64 products, resp. float32
  // products checked and redone in float64 when their error is too large.
  GramEigen gram_eigen_impl(const float* a, int64_t m, int64_t n, bool want_vectors) override;
  GramEigen gram_eigen_checked_impl(const float* a, int64_t m, int64_t n, double tolerance,
                                    bool want_vectors) override;

  // Head h of query token t (row t of q/out) over its sequence's pages: the reference
  // attention, also run per (token, head) by the threaded backend. With `stats` non-null,
  // also writes that (token, head)'s kAttnStatFields statistics there (attn_score_stats,
  // attn_softmax_entropy); out is the same either way.
  // The element-wise ops on a range of rows / elements: the *_impl are these over the whole
  // batch; the threaded backend splits the range (every row or element is computed alone,
  // so the split cannot change a bit).
  static void rmsnorm_rows(const Buffer& x, const WeightView& w, float eps, int64_t t0, int64_t t1,
                           Buffer& out);
  // rope_rows reads the angles from `table` (rope_tables_.prepare over the whole batch).
  static void rope_rows(Buffer& x, const Buffer& positions, int64_t t0, int64_t t1, int64_t n_heads,
                        const RopeParams& p, const RopeTables::Table& table);
  static void silu_mul_range(const Buffer& gate, const Buffer& up, int64_t i0, int64_t i1,
                             Buffer& out);
  static void gelu_mul_range(const Buffer& gate, const Buffer& up, int64_t i0, int64_t i1,
                             Buffer& out);
  static void swiglu_oai_range(const Buffer& gate, const Buffer& up, int64_t i0, int64_t i1,
                               Buffer& out);  // swiglu_oai.cpp
  static void softcap_range(Buffer& x, int64_t i0, int64_t i1, float cap);

  static void attend_head(const Buffer& q, const PagedKv& kv, int64_t t, int64_t h,
                          const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                          std::vector<float>& kv_row, float* stats = nullptr);

 private:
  std::vector<float> row_scratch_;     // one dequantized weight row (matmul)
  std::vector<float> score_scratch_;   // attention scores of one head
  std::vector<float> kv_row_scratch_;  // one K or V head converted from f16

 protected:
  RopeTables rope_tables_;  // cos/sin per (position, pair), kept across layers and calls
};

}  // namespace llmctl::cpu
