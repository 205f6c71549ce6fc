#pragma once
// The CUDA backend: the Backend seam (backend.h) on one device and one stream, every op a
// launcher from kernels/kernels.h. The CPU reference backend (cpu/cpu_backend.cpp) is the
// oracle: each op mirrors its semantics; tests/gpu/ compares the two.
//
//   * Buffers are cudaMalloc'd (zeroed) device memory, checked against free device memory first
//     (memory.h). upload() is asynchronous on the stream; download() and sync() wait.
//   * bind_weight() uploads a weight once (keyed by its host address, shape and a fingerprint
//     of its first and last bytes) into an allocation the backend owns until it is destroyed;
//     no dequantized copies are made. Binding the same view twice (tied embeddings) reuses it.
//   * matmul is a warp-per-row matvec (kernels/matvec.cuh): batch-invariant. With
//     batch_invariant = false, batches of at least gemm_min_tokens() rows go through cuBLAS
//     instead (gemm.h: weights dequantized tile-wise to f16, f16 inputs, f32 accumulation),
//     whose results depend on the batch size (within f16 input rounding of the matvec's).
//   * attention_with_stats is attention's kernel with the statistics reduced beside it (out is
//     bit-identical); top_k is an argmax (k = 1) or radix select + bitonic sort per row.
//   * Uploads are staged through a pinned host arena (reset at each sync), so they are truly
//     asynchronous; one that does not fit goes from pageable memory.
//   * Recording (graphs = true, Backend::begin_recording): the ops of a forward step are
//     captured into a CUDA graph on the stream; the executable graph of the previous step is
//     updated in place (cudaGraphExecUpdate) when the topology matches, else instantiated
//     again, then launched. Any failure: one warning on stderr, and plain launches from then on.
//   * Bad device-resident indices (rope positions, kv slots, block tables, copy_rows rows) cannot
//     throw inside a kernel: they set a device error flag that download() and sync() turn into
//     llmctl::Error. get_rows checks its ids on the host before launching (as the CPU does).
//
// Use it from one host thread at a time (it holds one stream and some host scratch).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/buffer.h"

namespace llmctl::cuda {

class Gemm;

class CudaBackend : public Backend {
 public:
  // Makes `device` current, creates the stream and the error flag. Throws llmctl::Error when
  // the device cannot be used, or when batch_invariant is false and cuBLAS cannot be loaded.
  // graphs: record decode steps into CUDA graphs (Backend::begin_recording).
  explicit CudaBackend(int device = 0, bool batch_invariant = true, bool graphs = false);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const char* name() const override { return "cuda"; }
  // F32, F16, BF16, Q8_0, Q4_0, Q4_1, MXFP4: the dtypes with matvec and get_rows kernels.
  bool supports_weight_type(GgmlType type) const override;
  bool batch_invariant() const { return gemm_ == nullptr; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Bytes of weights uploaded by bind_weight().
  size_t weight_bytes() const { return weight_bytes_; }

  bool device_memory() const override { return true; }
  bool begin_recording(int64_t n_tokens) override;
  bool end_recording() override;
  void abort_recording(const char* why) override;
  // What recording did so far: steps captured, executable graphs updated in place, graphs
  // instantiated, graph launches; failed: recording gave up (it warned once).
  struct GraphStats {
    int64_t captured = 0, updated = 0, instantiated = 0, launched = 0;
    bool failed = false;
  };
  GraphStats graph_stats() const { return graph_stats_; }

 protected:
  Buffer alloc_impl(int64_t n, BufferType type) override;
  void upload_impl(Buffer& dst, const void* src, int64_t n, int64_t offset) override;
  void download_impl(const Buffer& src, void* dst, int64_t n, int64_t offset) override;
  WeightView bind_weight_impl(const WeightView& host) override;
  void sync_impl() override;
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
  void find_nan_inf_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols,
                         Buffer& out) override;
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
  // The mixture-of-experts ops (moe.cpp): one launcher each from kernels/moe_*.cu.
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
  // gram_eigen_f64 (gram_eigen_cuda.h) on this backend's device, a wide A transposed on the
  // host first (A and A^T have the same singular values). gram_eigen_checked: the default
  // (float64 products, milliseconds here).
  GramEigen gram_eigen_impl(const float* a, int64_t m, int64_t n, bool want_vectors) override;

 private:
  // Waits for the stream, then throws if a kernel raised the device error flag (and clears it).
  void sync_and_check();

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  int* error_flag_ = nullptr;  // device int, kernels.h DeviceError
  int* host_flag_ = nullptr;   // pinned copy of it read at each sync
  // Uploaded weights by (host address, type, n_cols, n_rows, fingerprint of the bytes) ->
  // device copy (owned until the backend is destroyed).
  std::map<std::tuple<const void*, int, int64_t, int64_t, uint64_t>, void*> weights_;
  size_t weight_bytes_ = 0;
  std::vector<int32_t> host_ids_;  // get_rows: ids checked on the host
  DeviceBuffer top_k_scratch_;     // top_k with k > kTopKSharedKeys
  std::unique_ptr<Gemm> gemm_;     // cuBLAS prefill path; null: batch-invariant matvec only

  // Pinned staging for uploads: [0, staged_) is in use by copies queued since the last sync.
  uint8_t* staging_ = nullptr;
  size_t staged_ = 0;
  // Recording (graph.cpp).
  void give_up_recording(const std::string& why);
  bool graphs_ = false;
  bool recording_ = false;
  cudaGraphExec_t graph_exec_ = nullptr;
  GraphStats graph_stats_;
};

}  // namespace llmctl::cuda
