// The CUDA backend (cuda_backend.h). Arguments arrive checked (backend.cpp); each op unpacks
// its views and calls one launcher from kernels/kernels.h, then checks the launch.
#include "backend/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/get_rows.h"
#include "backend/cuda/memory.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

size_t to_size(int64_t n) { return static_cast<size_t>(n); }

const float* f32(const WeightView& w) { return static_cast<const float*>(w.data); }

using MatvecLauncher = void (*)(const void*, int64_t, int64_t, const float*, int64_t, float*,
                                cudaStream_t);

MatvecLauncher matvec_launcher(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return launch_matvec_f32_f32;
    case GgmlType::F16:
      return launch_matvec_f16_f32;
    case GgmlType::BF16:
      return launch_matvec_bf16_f32;
    case GgmlType::Q8_0:
      return launch_matvec_q8_0_f32;
    case GgmlType::Q4_0:
      return launch_matvec_q4_0_f32;
    case GgmlType::Q4_1:
      return launch_matvec_q4_1_f32;
    case GgmlType::MXFP4:
      return launch_matvec_mxfp4_f32;
    default:
      throw Error(fmt::format("cuda matmul: no kernel for {} weights", ggml_type_name(type)));
  }
}

const char* device_error_text(int code) {
  switch (code) {
    case kDeviceErrorRopePosition:
      return "rope got a negative position";
    case kDeviceErrorKvSlot:
      return "kv_store got a slot outside the KV pool";
    case kDeviceErrorAttentionIndex:
      return "attention got a sequence row, position or block outside the block table or pool";
    case kDeviceErrorCopyRow:
      return "copy_rows got a row outside its input";
    case kDeviceErrorMoeSlot:
      return "moe_gather or moe_scatter got a slot outside its rows";
    default:
      return "a kernel reported an unknown error code";
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Lifetime
// ---------------------------------------------------------------------------
// Pinned bytes for staging uploads: a decode step uploads a few hundred bytes (ids, positions,
// slots, block table); a prefill chunk of 512 tokens about 10 KiB.
constexpr size_t kStagingBytes = size_t{1} << 20;

CudaBackend::CudaBackend(int device, bool batch_invariant, bool graphs)
    : device_(device), graphs_(graphs) {
  LLMCTL_CUDA_CHECK(cudaSetDevice(device));
  LLMCTL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    error_flag_ = static_cast<int*>(checked_device_alloc(sizeof(int), "the device error flag"));
    LLMCTL_CUDA_CHECK(cudaMemsetAsync(error_flag_, 0, sizeof(int), stream_));
    void* pinned = nullptr;
    LLMCTL_CUDA_CHECK(cudaMallocHost(&pinned, sizeof(int)));
    host_flag_ = static_cast<int*>(pinned);
    *host_flag_ = 0;
    LLMCTL_CUDA_CHECK(cudaMallocHost(&pinned, kStagingBytes));
    staging_ = static_cast<uint8_t*>(pinned);
    if (!batch_invariant) gemm_ = std::make_unique<Gemm>(stream_);
  } catch (...) {
    if (staging_ != nullptr) cudaFreeHost(staging_);
    if (host_flag_ != nullptr) cudaFreeHost(host_flag_);
    if (error_flag_ != nullptr) cudaFree(error_flag_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

// Destructors must not throw: failures here mean the context is already broken.
CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
  gemm_.reset();  // its cuBLAS handle is bound to stream_
  for (auto& entry : weights_) cudaFree(entry.second);
  cudaFreeHost(staging_);
  cudaFreeHost(host_flag_);
  cudaFree(error_flag_);
  cudaStreamDestroy(stream_);
}

void CudaBackend::sync_and_check() {
  LLMCTL_CUDA_CHECK(
      cudaMemcpyAsync(host_flag_, error_flag_, sizeof(int), cudaMemcpyDeviceToHost, stream_));
  LLMCTL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  staged_ = 0;  // every queued upload has been read
  const int code = *host_flag_;
  if (code == kDeviceErrorNone) return;
  *host_flag_ = 0;
  LLMCTL_CUDA_CHECK(cudaMemsetAsync(error_flag_, 0, sizeof(int), stream_));
  throw Error(fmt::format("cuda backend: {} (detected on the device, reported at the next sync)",
                          device_error_text(code)));
}

// The dtypes matvec_launcher() and get_rows have kernels for (the same list); not the engine's
// whole list (is_engine_type grows with CPU-only formats).
bool CudaBackend::supports_weight_type(GgmlType type) const { return get_rows_supports(type); }

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------
Buffer CudaBackend::alloc_impl(int64_t n, BufferType type) {
  const size_t bytes = buffer_bytes(type, n);
  void* p = checked_device_alloc(
      bytes, fmt::format("a buffer of {} {} elements", n, buffer_type_name(type)));
  const cudaError_t err = cudaMemsetAsync(p, 0, bytes, stream_);
  if (err != cudaSuccess) {
    cudaFree(p);
    LLMCTL_CUDA_CHECK(err);
  }
  // cudaFree waits for the device, so work still queued on the buffer finishes first.
  return Buffer(p, n, type, [](void* q) { cudaFree(q); });
}

// The source is copied into the pinned arena first, so the caller may reuse it at once and the
// copy is a plain DMA ordered with the ops on the stream (a pageable source may make
// cudaMemcpyAsync wait for the stream). The arena is reused only after a sync, when every copy
// queued from it has run. Too large for what is left: from pageable memory, which
// cudaMemcpyAsync stages itself before returning.
void CudaBackend::upload_impl(Buffer& dst, const void* src, int64_t n, int64_t offset) {
  const size_t es = buffer_type_size(dst.type());
  const size_t bytes = to_size(n) * es;
  void* to = static_cast<uint8_t*>(dst.raw()) + to_size(offset) * es;
  constexpr size_t kAlign = 16;
  if (bytes <= kStagingBytes - staged_) {
    uint8_t* at = staging_ + staged_;
    std::memcpy(at, src, bytes);
    staged_ = std::min(kStagingBytes, staged_ + (bytes + kAlign - 1) / kAlign * kAlign);
    LLMCTL_CUDA_CHECK(cudaMemcpyAsync(to, at, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  LLMCTL_CUDA_CHECK(cudaMemcpyAsync(to, src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::download_impl(const Buffer& src, void* dst, int64_t n, int64_t offset) {
  const size_t es = buffer_type_size(src.type());
  LLMCTL_CUDA_CHECK(cudaMemcpyAsync(dst,
                                    static_cast<const uint8_t*>(src.raw()) + to_size(offset) * es,
                                    to_size(n) * es, cudaMemcpyDeviceToHost, stream_));
  sync_and_check();
}

void CudaBackend::sync_impl() { sync_and_check(); }

WeightView CudaBackend::bind_weight_impl(const WeightView& host) {
  const size_t bytes = weight_row_bytes(host.type, host.n_cols) * to_size(host.n_rows);
  const auto key = std::make_tuple(host.data, static_cast<int>(host.type), host.n_cols, host.n_rows,
                                   weight_fingerprint(host.data, bytes));
  WeightView bound = host;
  if (const auto it = weights_.find(key); it != weights_.end()) {
    bound.data = it->second;  // tied embeddings and repeated binds share one upload
    return bound;
  }
  void* p = checked_device_alloc(bytes, fmt::format("weight '{}'", host.name));
  try {
    LLMCTL_CUDA_CHECK(cudaMemcpyAsync(p, host.data, bytes, cudaMemcpyHostToDevice, stream_));
  } catch (...) {
    cudaFree(p);
    throw;
  }
  weights_.emplace(key, p);
  weight_bytes_ += bytes;
  bound.data = p;
  return bound;
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------
// The ids are checked on the host, with the CPU reference's message, before anything is read:
// one small copy and a wait at the start of a forward step, when the stream is nearly idle.
// While recording (a decode step captured into a graph) there can be no copy back and no wait:
// the check is skipped then, because the ids are the ones the caller (Forward) checked against
// the vocabulary on the host before uploading them.
void CudaBackend::get_rows_impl(const WeightView& table, const Buffer& ids, int64_t n_tokens,
                                Buffer& out) {
  if (!recording_) {
    host_ids_.resize(to_size(n_tokens));
    LLMCTL_CUDA_CHECK(cudaMemcpyAsync(host_ids_.data(), ids.i32(),
                                      to_size(n_tokens) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                      stream_));
    sync_and_check();
    for (const int32_t id : host_ids_)
      if (id < 0 || id >= table.n_rows)
        throw Error(fmt::format("backend get_rows: id {} is outside '{}' rows [0, {})", id,
                                table.name, table.n_rows));
  }
  launch_get_rows_device_ids(DeviceTable{table.type, table.data, table.n_rows, table.n_cols},
                             ids.i32(), n_tokens, out.data(), stream_);
}

void CudaBackend::rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                               Buffer& out) {
  launch_rmsnorm_f32(x.data(), f32(w), eps, n_tokens, w.n_cols, out.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) {
  if (gemm_ != nullptr && Gemm::worth_it(w.type, n_tokens)) {
    gemm_->matmul(w, x.data(), n_tokens, out.data());
    return;
  }
  matvec_launcher(w.type)(w.data, w.n_rows, w.n_cols, x.data(), n_tokens, out.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::add_bias_impl(Buffer& x, const WeightView& b, int64_t n_tokens) {
  launch_add_bias_f32(x.data(), f32(b), n_tokens, b.n_cols, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::rope_impl(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
                            const RopeParams& p) {
  const float* factors = p.freq_factors.present() ? f32(p.freq_factors) : nullptr;
  launch_rope_f32(x.data(), positions.i32(), n_tokens, n_heads, p.head_dim, p.n_rot,
                  p.type == RopeType::Neox, p.freq_base, p.freq_scale, factors,
                  RopeYarnArgs{p.ext_factor, p.yarn_low, p.yarn_high, p.mscale}, error_flag_,
                  stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

namespace {

// How the kernels name a pool's type (kernels.h KvPoolType; backend.cpp admits these four).
KvPoolType kv_pool_type(const Buffer& pool) {
  switch (pool.type()) {
    case BufferType::F32: return KvPoolType::F32;
    case BufferType::F16: return KvPoolType::F16;
    case BufferType::Q8_0: return KvPoolType::Q8_0;
    case BufferType::Q4_0: return KvPoolType::Q4_0;
    case BufferType::I32: break;
  }
  throw Error(fmt::format("cuda: a KV pool of type {}", buffer_type_name(pool.type())));
}
KvPoolView kv_view(const Buffer& pool) { return {pool.raw(), kv_pool_type(pool)}; }

// Which kernels read a K and V pool pair: the typed ones when both are f32 or both f16 (the
// common case, as before quantized pools), else the ones that choose per pool at run time.
enum class PoolPair { F32, F16, Any };
PoolPair pool_pair(const Buffer& k_pool, const Buffer& v_pool) {
  if (k_pool.type() == v_pool.type() && k_pool.type() == BufferType::F32) return PoolPair::F32;
  if (k_pool.type() == v_pool.type() && k_pool.type() == BufferType::F16) return PoolPair::F16;
  return PoolPair::Any;
}

}  // namespace

void CudaBackend::kv_store_impl(const Buffer& k, const Buffer& v, const Buffer& slots,
                                int64_t n_tokens, int64_t kv_dim, Buffer& k_pool, Buffer& v_pool) {
  const int64_t n_slots = k_pool.size() / kv_dim;
  switch (pool_pair(k_pool, v_pool)) {
    case PoolPair::F32:
      launch_kv_store_f32_f32(k.data(), v.data(), slots.i32(), n_tokens, kv_dim, n_slots,
                              k_pool.data(), v_pool.data(), error_flag_, stream_);
      break;
    case PoolPair::F16:
      launch_kv_store_f32_f16(k.data(), v.data(), slots.i32(), n_tokens, kv_dim, n_slots,
                              k_pool.f16(), v_pool.f16(), error_flag_, stream_);
      break;
    case PoolPair::Any:
      launch_kv_store_any(k.data(), v.data(), slots.i32(), n_tokens, kv_dim, n_slots,
                          KvPoolOut{k_pool.raw(), kv_pool_type(k_pool)},
                          KvPoolOut{v_pool.raw(), kv_pool_type(v_pool)}, error_flag_, stream_);
      break;
  }
  LLMCTL_CUDA_CHECK_LAUNCH();
}

namespace {

// The kernel's view of a checked PagedKv (backend.cpp check_attention).
PagedAttentionArgs attention_args(const PagedKv& kv, int64_t n_tokens, const AttentionShape& s) {
  if (s.head_dim > kAttentionMaxHeadDim)
    throw Error(fmt::format("cuda attention: head_dim {} is larger than the kernel's {}",
                            s.head_dim, kAttentionMaxHeadDim),
                "use --device cpu for this model");
  PagedAttentionArgs a;
  a.n_tokens = n_tokens;
  a.n_heads = s.n_heads;
  a.n_kv_heads = s.n_kv_heads;
  a.head_dim = s.head_dim;
  a.n_slots = kv.k_pool->size() / (s.n_kv_heads * s.head_dim);
  a.block_size = kv.block_size;
  a.block_table = kv.block_table->i32();
  a.max_blocks = kv.max_blocks;
  a.n_seq_rows = kv.block_table->size() / kv.max_blocks;
  a.token_seq = kv.token_seq->i32();
  a.positions = kv.positions->i32();
  a.scale = attention_scale(s);  // as the CPU
  a.softcap = s.softcap;
  a.window = s.window;
  a.sinks = s.sinks.present() ? static_cast<const float*>(s.sinks.data) : nullptr;  // bound
  return a;
}

// The kernel writes backend.h's AttnStat fields in their order.
constexpr bool same_field(AttentionStatField kernel, AttnStat backend) {
  return static_cast<int>(kernel) == static_cast<int>(backend);
}
static_assert(same_field(kAttnFieldsPerHead, kAttnStatFields) &&
                  same_field(kAttnFieldMax, kAttnStatMax) &&
                  same_field(kAttnFieldMin, kAttnStatMin) &&
                  same_field(kAttnFieldSum, kAttnStatSum) &&
                  same_field(kAttnFieldSumSq, kAttnStatSumSq) &&
                  same_field(kAttnFieldNan, kAttnStatNan) &&
                  same_field(kAttnFieldInf, kAttnStatInf) &&
                  same_field(kAttnFieldEntropy, kAttnStatEntropy) &&
                  same_field(kAttnFieldCount, kAttnStatCount) &&
                  same_field(kAttnFieldRawMax, kAttnStatRawMax) &&
                  same_field(kAttnFieldRawMin, kAttnStatRawMin) &&
                  same_field(kAttnFieldRawNonFinite, kAttnStatRawNonFinite),
              "kernels.h AttentionStatField must list backend.h AttnStat in the same order");

}  // namespace

void CudaBackend::attention_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                 const AttentionShape& s, Buffer& out) {
  // Both kernels give the same bits per token (kernels/attention_tile_math.cuh), so batch
  // invariance and attention_with_stats()'s bit-identical `out` hold whichever runs; the choice
  // is speed only. The prefill kernel (K/V staged per tile of one sequence's tokens) gives each
  // (token, head) one warp, the paged kernel four, so the prefill kernel pays off where tiles
  // share K/V: several tokens per sequence row (more tokens than rows; spare rows in the table
  // only err towards the paged kernel) and enough tokens to fill the GPU. Decode steps, one
  // token per sequence, stay on the paged kernel. Untuned: no GPU measurement yet.
  constexpr int64_t kPrefillMinTokens = 16;
  const PagedAttentionArgs a = attention_args(kv, n_tokens, s);
  const bool prefill = n_tokens >= kPrefillMinTokens && n_tokens > a.n_seq_rows;
  switch (pool_pair(*kv.k_pool, *kv.v_pool)) {
    case PoolPair::F32:
      (prefill ? launch_attention_prefill_f32 : launch_attention_paged_f32)(
          q.data(), kv.k_pool->data(), kv.v_pool->data(), a, out.data(), error_flag_, stream_);
      break;
    case PoolPair::F16:
      (prefill ? launch_attention_prefill_f16 : launch_attention_paged_f16)(
          q.data(), kv.k_pool->f16(), kv.v_pool->f16(), a, out.data(), error_flag_, stream_);
      break;
    case PoolPair::Any:
      (prefill ? launch_attention_prefill_any : launch_attention_paged_any)(
          q.data(), kv_view(*kv.k_pool), kv_view(*kv.v_pool), a, out.data(), error_flag_, stream_);
      break;
  }
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::attention_with_stats_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                            const AttentionShape& s, Buffer& out, Buffer& stats) {
  const PagedAttentionArgs a = attention_args(kv, n_tokens, s);
  switch (pool_pair(*kv.k_pool, *kv.v_pool)) {
    case PoolPair::F32:
      launch_attention_paged_stats_f32(q.data(), kv.k_pool->data(), kv.v_pool->data(), a,
                                       out.data(), stats.data(), error_flag_, stream_);
      break;
    case PoolPair::F16:
      launch_attention_paged_stats_f16(q.data(), kv.k_pool->f16(), kv.v_pool->f16(), a,
                                       out.data(), stats.data(), error_flag_, stream_);
      break;
    case PoolPair::Any:
      launch_attention_paged_stats_any(q.data(), kv_view(*kv.k_pool), kv_view(*kv.v_pool), a,
                                       out.data(), stats.data(), error_flag_, stream_);
      break;
  }
  LLMCTL_CUDA_CHECK_LAUNCH();
}

// Large k sorts in global scratch, kept and grown across calls.
void CudaBackend::top_k_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols, int64_t k,
                             Buffer& ids, Buffer& values) {
  const size_t scratch = top_k_scratch_bytes(n_rows, k);
  if (scratch > top_k_scratch_.size()) top_k_scratch_ = DeviceBuffer(scratch);
  launch_top_k_f32(logits.data(), n_rows, n_cols, k, top_k_scratch_.data(), ids.i32(),
                   values.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::find_nan_inf_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols,
                                    Buffer& out) {
  launch_find_nan_inf_f32(logits.data(), n_rows, n_cols, out.i32(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::silu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  launch_silu_mul_f32(gate.data(), up.data(), n, out.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::gelu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  launch_gelu_mul_f32(gate.data(), up.data(), n, out.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::swiglu_oai_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  launch_swiglu_oai_f32(gate.data(), up.data(), n, out.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::softcap_impl(Buffer& x, int64_t n, float cap) {
  launch_softcap_f32(x.data(), n, cap, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::scale_impl(Buffer& x, int64_t n, float factor) {
  launch_scale_f32(x.data(), n, factor, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::attn_temperature_impl(Buffer& x, const Buffer& positions, int64_t n_tokens,
                                        int64_t n_cols, double beta, int64_t length) {
  launch_attn_temperature_f32(x.data(), positions.i32(), n_tokens, n_cols, beta, length, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::add_impl(Buffer& x, const Buffer& y, int64_t n) {
  launch_add_f32(x.data(), y.data(), n, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::copy_rows_impl(const Buffer& x, int64_t row_len, const Buffer& rows,
                                 int64_t n_rows, Buffer& out) {
  launch_copy_rows_f32(x.data(), x.size() / row_len, row_len, rows.i32(), n_rows, out.data(),
                       error_flag_, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
