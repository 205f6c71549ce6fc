#pragma once
// The fast CPU backend: the reference backend (cpu_backend.h) with its heavy ops replaced by
// threaded SIMD versions: matmul through matmul_fast (AVX2 kernels chosen at run time, int8
// activations for quantized weights) and attention split over (token, KV group) pairs, each run
// by attend_group_fast (AVX2/F16C, attention_fast.h) or, without AVX2, the reference code per
// (token, head); a prefill over (tile of tokens, KV group) pairs
// (attend_tile_fast, attention_prefill_tile.h: its rows decoded once per tile).
// The element-wise ops are the reference ones or 8-lane versions of them (SiLU and GELU with an
// 8-lane exp, tanh for the soft-cap: silu_mul_fast.h, gelu_mul_fast.h, softcap_fast.h; the
// store into an F16 KV cache: f16_store_fast.h), split over the threads when a batch is big
// enough to pay for waking them (prefill).
//
// Batch invariance holds as in the reference: matmul_fast gives bit-identical rows whatever
// the batch and thread count, and each (token, head) of attention and each element of the
// element-wise ops is computed the same way wherever it sits.
// The fast path differs from the reference by rounding (documented in matmul_fast.h); tests
// compare the two. MatmulPrecision::Float keeps the activations f32 in every matmul (the
// reference's precision at close to the fast path's speed; rope-probe runs on it).
//
// Repacked weights (weight_repack.h): a bound matrix whose type the chosen kernels read
// repacked (repack_active(): the types with a layout in weight_repack.h, with the AVX2 or AVX-512
// kernels, unless LLMCTL_MATMUL_REPACK=off; Fast precision only) is copied once into the
// repacked layout at its first matmul, or earlier when prepare_matmul asks (run and bench do,
// at load), and its original pages are released (repack_weight's release). The bound view
// itself keeps pointing at the original, so get_rows (a tied embedding table is both) and
// everything else that reads the GGUF layout are unchanged; only matmul reads the copy. A
// matrix never multiplied (an untied token_embd) is never copied.
// A matrix the kernels read in the GGUF layout (F16, BF16, F32; and every type under
// MatmulPrecision::Float) of at least one huge page, in a file's read-only
// mapping (4 KiB pages), is copied as it is into huge pages at its first matmul, the same way
// (copy_weight, copy_active(): weight_repack.h), unless LLMCTL_MATMUL_REPACK=off or the
// kernel gives no huge pages. A matrix in other memory is left where it is.

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/cpu/attention_split.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

class CpuFastBackend final : public CpuBackend {
 public:
  // precision: how matmul meets quantized and F16 weights (matmul_fast.h MatmulPrecision).
  explicit CpuFastBackend(int n_threads, MatmulPrecision precision = MatmulPrecision::Fast);
  const char* name() const override { return "cpu"; }
  int n_threads() const override { return pool_.size(); }
  // The repacked or plain copy of a bound weight, made now where its first matmul would make
  // it (nothing otherwise).
  void prepare_matmul(const WeightView& bound) override;
  uint64_t prepared_weight_bytes() const override { return repacked_bytes() + copied_bytes(); }
  // Bytes of the repacked copies made so far.
  size_t repacked_bytes() const;
  // Bytes of the plain copies (huge pages, the GGUF layout) made so far.
  size_t copied_bytes() const;

 protected:
  WeightView bind_weight_impl(const WeightView& host) override;
  void matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) override;
  // matmul_fast_shared: x converted once per activation format, one hand-off to the pool.
  void matmul_shared_impl(const WeightView* const* ws, Buffer* const* outs, int count,
                          const Buffer& x, int64_t n_tokens) override;
  void attention_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens, const AttentionShape& s,
                      Buffer& out) override;
  void attention_with_stats_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                 const AttentionShape& s, Buffer& out, Buffer& stats) override;
  void rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                    Buffer& out) override;
  void rope_impl(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
                 const RopeParams& p) override;
  void silu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) override;
  void gelu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) override;
  void swiglu_oai_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) override;
  void softcap_impl(Buffer& x, int64_t n, float cap) override;
  // F16 pools: rows converted 8 at a time (f16_store_fast.h, the reference's bits), split over
  // the threads in a prefill; other pool types: the reference's store.
  void kv_store_impl(const Buffer& k, const Buffer& v, const Buffer& slots, int64_t n_tokens,
                     int64_t kv_dim, Buffer& k_pool, Buffer& v_pool) override;

 private:
  // Elements [0, n) in chunks over the pool (or the calling thread for small n): run(i0, i1)
  // computes [i0, i1) with the SIMD function or the reference, as simd_ says.
  template <class Run>
  void elementwise(int64_t n, const Run& run);
  // Both attention ops: (token or tile, group) tasks over the pool; stats nullptr or
  // (n_tokens, n_heads, kAttnStatFields), each task writing its own row.
  void attention_tasks(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                       const AttentionShape& s, Buffer& out, float* stats);
  bool simd_;  // AVX2, FMA and F16C (attention_fast_available()): the SIMD attention and
               // element-wise ops
  bool wide_;  // attention's AVX-512 loops: the CPU has them and LLMCTL_MATMUL_ISA (the
               // process's kernel ISA, matmul_fast_auto_isa()) is avx512, so that avx2 holds
               // the whole forward to AVX2 (a stand-in for an AVX2-only CPU); same bits
  MatmulPrecision precision_;
  ThreadPool pool_;
  ThreadPool serial_{1};  // ops too small to be worth waking the other threads
  // matmul's conversions of x; matmul_shared's, one per weight (matmul_fast_shared)
  MatmulScratch scratch_[kMaxSharedMatmuls];
  // Bound matrices to repack or copy, keyed by the view's data pointer: the shape and a
  // fingerprint (core/fingerprint.h) say it is still the weight that was bound; copy is made at
  // the first matmul.
  struct Repack {
    GgmlType type;
    int64_t n_rows, n_cols;
    uint64_t fingerprint;
    bool repack;  // repacked layout (else a plain copy)
    RepackedWeight copy;
  };
  std::map<const void*, Repack> repacks_;
  // What matmul reads for w (its copy made now if it is due): w, or w on its plain copy;
  // *repacked: the repacked copy, or nullptr (none).
  WeightView matmul_view(const WeightView& w, const uint8_t** repacked);
  // Per thread: attention scores and one converted K/V head.
  std::vector<std::vector<float>> scores_, kv_rows_;
  SplitAttentionScratch split_;  // attention split over keys and dimensions (decode)
};

}  // namespace llmctl::cpu
