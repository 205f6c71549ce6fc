// The fast CPU backend (cpu_fast_backend.h).
#include "backend/cpu/cpu_fast_backend.h"

#include <algorithm>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/attention_prefill_tile.h"
#include "backend/cpu/f16_store_fast.h"
#include "backend/cpu/gelu_mul_fast.h"
#include "backend/cpu/rmsnorm_fast.h"
#include "backend/cpu/silu_mul_fast.h"
#include "backend/cpu/softcap_fast.h"
#include "backend/cpu/swiglu_oai_fast.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/mapped_file.h"

namespace llmctl::cpu {

namespace {
// Below this much work an op runs on the calling thread alone: handing a job to the pool
// costs microseconds (and far more when the machine is oversubscribed and a worker is not
// running), which a small model's whole step can be. Thread count never changes results
// (batch and thread invariance), so the choice is free to make per op. Matmuls: from 32 KiB
// up a decode matmul splits (SmolLM2's k/v 69 KB, q/o 207 KB): its decode 1.04x to 1.10x
// over 256 KiB, 1.06x over 128 KiB (interleaved pairs, 2 threads; the hand-off is a few us).
constexpr int64_t kMinParallelWeightBytes = int64_t{1} << 15;  // matmul: weight bytes x tokens
constexpr int64_t kMinParallelScores = int64_t{1} << 14;       // attention: heads x positions
constexpr int64_t kMinParallelElements = int64_t{1} << 15;     // element-wise: floats touched
}  // namespace

CpuFastBackend::CpuFastBackend(int n_threads, MatmulPrecision precision)
    : simd_(attention_fast_available()),
      wide_(attention_fast_has_avx512() && matmul_fast_auto_isa() == MatmulIsa::Avx512),
      precision_(precision),
      pool_(n_threads, /*serial_fallback=*/true),
      scores_(static_cast<size_t>(n_threads)),
      kv_rows_(static_cast<size_t>(n_threads)) {}

WeightView CpuFastBackend::bind_weight_impl(const WeightView& host) {
  if (host.n_rows <= 1 || host.n_cols <= 0) return host;
  const size_t bytes = weight_row_bytes(host.type, host.n_cols) * static_cast<size_t>(host.n_rows);
  // repacked: a matrix of whole records (matmul refuses the rest before it looks here)
  const bool repack = precision_ == MatmulPrecision::Fast && repack_active(host.type) &&
                      host.n_cols % repack_record_cols(host.type) == 0;
  // copied: only from a file's pages (4 KiB); other memory is the caller's, and may already
  // sit in huge pages (transparent_hugepage=always)
  const bool copy = !repack && copy_active(bytes) && in_read_only_file_mapping(host.data, bytes);
  if (!repack && !copy) return host;
  const uint64_t fp = weight_fingerprint(host.data, bytes);
  const auto it = repacks_.find(host.data);
  const bool same = it != repacks_.end() && it->second.type == host.type &&
                    it->second.n_rows == host.n_rows && it->second.n_cols == host.n_cols &&
                    it->second.fingerprint == fp;
  if (!same) repacks_[host.data] = Repack{host.type, host.n_rows, host.n_cols, fp, repack, {}};
  return host;
}

WeightView CpuFastBackend::matmul_view(const WeightView& w, const uint8_t** repacked) {
  *repacked = nullptr;
  const auto it = repacks_.find(w.data);
  if (it == repacks_.end()) return w;
  Repack& r = it->second;
  if (r.type != w.type || r.n_rows != w.n_rows || r.n_cols != w.n_cols) return w;
  if (r.repack) {  // bound under MatmulPrecision::Fast only
    if (r.copy.empty()) r.copy = repack_weight(w, pool_, true);
    *repacked = r.copy.data();
    return w;
  }
  if (r.copy.empty()) r.copy = copy_weight(w, pool_, true);
  WeightView v = w;
  v.data = r.copy.data();
  return v;
}

void CpuFastBackend::prepare_matmul(const WeightView& bound) {
  const uint8_t* repacked = nullptr;
  (void)matmul_view(bound, &repacked);
}

size_t CpuFastBackend::repacked_bytes() const {
  size_t n = 0;
  for (const auto& [data, r] : repacks_) n += r.repack ? r.copy.bytes() : 0;
  return n;
}

size_t CpuFastBackend::copied_bytes() const {
  size_t n = 0;
  for (const auto& [data, r] : repacks_) n += r.repack ? 0 : r.copy.bytes();
  return n;
}

void CpuFastBackend::matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens,
                                 Buffer& out) {
  const auto bytes = static_cast<int64_t>(weight_row_bytes(w.type, w.n_cols)) * w.n_rows;
  ThreadPool& pool = bytes * n_tokens >= kMinParallelWeightBytes ? pool_ : serial_;
  const uint8_t* repacked = nullptr;
  const WeightView v = matmul_view(w, &repacked);
  matmul_fast(v, x.data(), n_tokens, out.data(), pool, scratch_[0], precision_, repacked);
}

void CpuFastBackend::matmul_shared_impl(const WeightView* const* ws, Buffer* const* outs,
                                        int count, const Buffer& x, int64_t n_tokens) {
  MatmulJob jobs[kMaxSharedMatmuls];
  WeightView views[kMaxSharedMatmuls];
  int64_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    const WeightView& w = *ws[i];
    const uint8_t* repacked = nullptr;
    views[i] = matmul_view(w, &repacked);
    jobs[i] = MatmulJob{&views[i], outs[i]->data(), repacked};
    bytes += static_cast<int64_t>(weight_row_bytes(w.type, w.n_cols)) * w.n_rows;
  }
  ThreadPool& pool = bytes * n_tokens >= kMinParallelWeightBytes ? pool_ : serial_;
  matmul_fast_shared(jobs, count, x.data(), n_tokens, pool, scratch_, precision_);
}

// Tasks are (token, KV group) pairs for the fast kernel, (token, head) pairs for the reference. The
// statistics of a (token, head) come from the task that computes its scores, so they are as thread-
// and batch-invariant as the output.
void CpuFastBackend::attention_tasks(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                     const AttentionShape& s, Buffer& out, float* stats) {
  // Work estimate from the last token's position (positions grow along a prefill chunk).
  const int64_t positions = int64_t{kv.positions->i32()[n_tokens - 1]} + 1;
  ThreadPool& pool = n_tokens * s.n_heads * positions >= kMinParallelScores ? pool_ : serial_;
  // Causal attention costs more for later tokens, and the pool hands each thread one
  // contiguous range of tasks: take the tokens alternately from both ends (0, N-1, 1, N-2,
  // ...; all tasks of a token together, as they share the K/V rows) so that every range holds
  // early and late tokens alike. A fast task is a whole KV group (its heads read each K/V row
  // once), a reference task one head. A fast prefill's unit is a tile of tokens instead of one
  // (attention_prefill_tile.h: it reads, or decodes, the rows once per tile), taken from both
  // ends the same way.
  const int64_t per_token = simd_ ? s.n_kv_heads : s.n_heads;
  int64_t max_keys = 0;  // the tile's score memory: any token's keys (sequences differ)
  if (simd_ && n_tokens > 1)
    for (int64_t t = 0; t < n_tokens; ++t)
      max_keys = std::max<int64_t>(max_keys, int64_t{kv.positions->i32()[t]} + 1);
  const int64_t tile = simd_ && n_tokens > 1
                           ? attention_tile_tokens(n_tokens, s.n_kv_heads, pool.size(),
                                                   s.n_heads / s.n_kv_heads, max_keys)
                           : 1;
  if (simd_ && tile == 1 && attention_split_pays(n_tokens, s, pool.size())) {
    attend_split(q, kv, n_tokens, s, out, stats, wide_, pool, split_);
    return;
  }
  const int64_t n_units = (n_tokens + tile - 1) / tile;
  pool.parallel_for(n_units * per_token, [&](int64_t begin, int64_t end, int thread) {
    auto& scores = scores_[static_cast<size_t>(thread)];
    auto& kv_row = kv_rows_[static_cast<size_t>(thread)];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t k = task / per_token;
      const int64_t t = k % 2 == 0 ? k / 2 : n_units - 1 - k / 2;  // a token, or a tile
      const int64_t sub = task % per_token;
      if (tile > 1) {
        attend_tile_fast(q, kv, t * tile, std::min(tile, n_tokens - t * tile), sub, s, out,
                         scores, stats, wide_);
      } else if (simd_) {
        attend_group_fast(q, kv, t, sub, s, out, scores,
                          stats != nullptr ? stats + t * s.n_heads * kAttnStatFields : nullptr,
                          wide_);
      } else {
        float* st = stats != nullptr ? stats + (t * s.n_heads + sub) * kAttnStatFields : nullptr;
        attend_head(q, kv, t, sub, s, out, scores, kv_row, st);
      }
    }
  });
}

void CpuFastBackend::attention_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                    const AttentionShape& s, Buffer& out) {
  attention_tasks(q, kv, n_tokens, s, out, nullptr);
}

void CpuFastBackend::attention_with_stats_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                               const AttentionShape& s, Buffer& out,
                                               Buffer& stats) {
  attention_tasks(q, kv, n_tokens, s, out, stats.data());
}

void CpuFastBackend::rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                                  Buffer& out) {
  ThreadPool& pool = n_tokens * w.n_cols >= kMinParallelElements ? pool_ : serial_;
  const int64_t n = w.n_cols;
  pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
    if (!simd_) return rmsnorm_rows(x, w, eps, t0, t1, out);
    for (int64_t t = t0; t < t1; ++t)  // w is an f32 vector (Backend::rmsnorm checks it)
      rmsnorm_fast(x.data() + t * n, static_cast<const float*>(w.data), n, eps,
                   out.data() + t * n);
  });
}

void CpuFastBackend::rope_impl(Buffer& x, const Buffer& positions, int64_t n_tokens,
                               int64_t n_heads, const RopeParams& p) {
  ThreadPool& pool = n_tokens * n_heads * p.head_dim >= kMinParallelElements ? pool_ : serial_;
  const RopeTables::Table& table = rope_tables_.prepare(p, positions.i32(), n_tokens);
  pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
    rope_rows(x, positions, t0, t1, n_heads, p, table);
  });
}

void CpuFastBackend::kv_store_impl(const Buffer& k, const Buffer& v, const Buffer& slots,
                                   int64_t n_tokens, int64_t kv_dim, Buffer& k_pool,
                                   Buffer& v_pool) {
  if (!simd_ || k_pool.type() != BufferType::F16 || v_pool.type() != BufferType::F16) {
    CpuBackend::kv_store_impl(k, v, slots, n_tokens, kv_dim, k_pool, v_pool);
    return;
  }
  const int64_t n_slots = k_pool.size() / kv_dim;
  ThreadPool& pool = 2 * n_tokens * kv_dim >= kMinParallelElements ? pool_ : serial_;
  pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t slot = slots.i32()[t];
      LLMCTL_ASSERT(slot >= 0 && slot < n_slots);
      f32_to_f16_fast(k.data() + t * kv_dim, kv_dim, k_pool.f16() + slot * kv_dim);
      f32_to_f16_fast(v.data() + t * kv_dim, kv_dim, v_pool.f16() + slot * kv_dim);
    }
  });
}

template <class Run>
void CpuFastBackend::elementwise(int64_t n, const Run& run) {
  // tasks of 4096 elements: whole cache lines per thread, balanced shares
  constexpr int64_t kChunk = 4096;
  ThreadPool& pool = n >= kMinParallelElements ? pool_ : serial_;
  pool.parallel_for((n + kChunk - 1) / kChunk,
                    [&](int64_t b, int64_t e, int) { run(b * kChunk, std::min(n, e * kChunk)); });
}

void CpuFastBackend::silu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  elementwise(n, [&](int64_t i0, int64_t i1) {
    if (simd_)
      silu_mul_fast(gate.data() + i0, up.data() + i0, i1 - i0, out.data() + i0);
    else
      silu_mul_range(gate, up, i0, i1, out);
  });
}

void CpuFastBackend::swiglu_oai_impl(const Buffer& gate, const Buffer& up, int64_t n,
                                     Buffer& out) {
  elementwise(n, [&](int64_t i0, int64_t i1) {
    if (simd_)
      swiglu_oai_fast(gate.data() + i0, up.data() + i0, i1 - i0, out.data() + i0);
    else
      swiglu_oai_range(gate, up, i0, i1, out);
  });
}

void CpuFastBackend::gelu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  elementwise(n, [&](int64_t i0, int64_t i1) {
    if (simd_)
      gelu_mul_fast(gate.data() + i0, up.data() + i0, i1 - i0, out.data() + i0);
    else
      gelu_mul_range(gate, up, i0, i1, out);
  });
}

void CpuFastBackend::softcap_impl(Buffer& x, int64_t n, float cap) {
  elementwise(n, [&](int64_t i0, int64_t i1) {
    if (simd_)
      softcap_fast(x.data() + i0, i1 - i0, cap);
    else
      softcap_range(x, i0, i1, cap);
  });
}

}  // namespace llmctl::cpu
