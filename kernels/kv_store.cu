// kv_store: k_pool[slots[t]] = k[t], v_pool[slots[t]] = v[t] (rows of kv_dim), converted to
// the pools' type; one thread block per token. A slot outside the pool stores nothing and
// raises the device error flag (the backend reports it at its next sync). Pools of any types
// (kv_store_any_kernel): a thread per element for f32 / f16, a thread per 32-value block for
// Q8_0 / Q4_0 (kv_pool.cuh's quantizer, whose bytes the CPU's quantize_kv_row gives too).

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/kv_pool.cuh"

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

// Row `slot` of `pool` = src (kv_dim values), by the threads of the block.
__device__ void store_row(const float* __restrict__ src, KvPoolOut pool, int64_t slot,
                          int64_t kv_dim) {
  uint8_t* row = static_cast<uint8_t*>(pool.data) + slot * kv_row_bytes(pool.type, kv_dim);
  const int64_t step = blockDim.x;
  switch (pool.type) {
    case KvPoolType::F32:
      for (int64_t i = threadIdx.x; i < kv_dim; i += step) reinterpret_cast<float*>(row)[i] = src[i];
      break;
    case KvPoolType::F16:
      for (int64_t i = threadIdx.x; i < kv_dim; i += step)
        reinterpret_cast<uint16_t*>(row)[i] = kv_float_to_fp16(src[i]);
      break;
    case KvPoolType::Q8_0:
      for (int64_t b = threadIdx.x; b < kv_dim / 32; b += step)
        kv_quantize_q8_0(src + 32 * b, row + kKvQ8Bytes * b);
      break;
    case KvPoolType::Q4_0:
      for (int64_t b = threadIdx.x; b < kv_dim / 32; b += step)
        kv_quantize_q4_0(src + 32 * b, row + kKvQ4Bytes * b);
      break;
  }
}

static __global__ void kv_store_any_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                           const int32_t* __restrict__ slots, int64_t kv_dim,
                                           int64_t n_slots, KvPoolOut k_pool, KvPoolOut v_pool,
                                           int* error_flag) {
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= n_slots) {
    if (threadIdx.x == 0) atomicCAS(error_flag, 0, kDeviceErrorKvSlot);
    return;
  }
  store_row(k + t * kv_dim, k_pool, slot, kv_dim);
  store_row(v + t * kv_dim, v_pool, slot, kv_dim);
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

void launch_kv_store_any(const float* k, const float* v, const int32_t* slots, int64_t n_tokens,
                         int64_t kv_dim, int64_t n_slots, KvPoolOut k_pool, KvPoolOut v_pool,
                         int* error_flag, cudaStream_t stream) {
  if (n_tokens <= 0 || kv_dim <= 0) return;
  kv_store_any_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(
      k, v, slots, kv_dim, n_slots, k_pool, v_pool, error_flag);
}

}  // namespace llmctl::cuda
