// kv_store: k_pool[slots[t]] = k[t], v_pool[slots[t]] = v[t] (rows of kv_dim), converted to
// the pools' type; one thread block per token. A slot outside the pool stores nothing and
// raises the device error flag (the backend reports it at its next sync).

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

// f32 -> IEEE binary16, round to nearest even (as core/fp16.h f32_to_fp16).
__device__ __forceinline__ uint16_t to_pool(float v, uint16_t*) {
  return __half_as_ushort(__float2half_rn(v));
}
__device__ __forceinline__ float to_pool(float v, float*) { return v; }

template <class T>
static __global__ void kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                       const int32_t* __restrict__ slots, int64_t kv_dim,
                                       int64_t n_slots, T* __restrict__ k_pool,
                                       T* __restrict__ v_pool, int* error_flag) {
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= n_slots) {
    if (threadIdx.x == 0) atomicCAS(error_flag, 0, kDeviceErrorKvSlot);
    return;
  }
  T* kd = k_pool + static_cast<int64_t>(slot) * kv_dim;
  T* vd = v_pool + static_cast<int64_t>(slot) * kv_dim;
  const float* ks = k + t * kv_dim;
  const float* vs = v + t * kv_dim;
  for (int64_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    kd[i] = to_pool(ks[i], kd);
    vd[i] = to_pool(vs[i], vd);
  }
}

template <class T>
void launch(const float* k, const float* v, const int32_t* slots, int64_t n_tokens, int64_t kv_dim,
            int64_t n_slots, T* k_pool, T* v_pool, int* error_flag, cudaStream_t stream) {
  if (n_tokens <= 0 || kv_dim <= 0) return;
  kv_store_kernel<T><<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(
      k, v, slots, kv_dim, n_slots, k_pool, v_pool, error_flag);
}

}  // namespace

void launch_kv_store_f32_f32(const float* k, const float* v, const int32_t* slots, int64_t n_tokens,
                             int64_t kv_dim, int64_t n_slots, float* k_pool, float* v_pool,
                             int* error_flag, cudaStream_t stream) {
  launch(k, v, slots, n_tokens, kv_dim, n_slots, k_pool, v_pool, error_flag, stream);
}

void launch_kv_store_f32_f16(const float* k, const float* v, const int32_t* slots, int64_t n_tokens,
                             int64_t kv_dim, int64_t n_slots, uint16_t* k_pool, uint16_t* v_pool,
                             int* error_flag, cudaStream_t stream) {
  launch(k, v, slots, n_tokens, kv_dim, n_slots, k_pool, v_pool, error_flag, stream);
}

}  // namespace llmctl::cuda
