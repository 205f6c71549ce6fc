// The dequantizing matmul kernel (matmul_kernels.h: matmul_kernel_dequant): for weight types
// without an integer kernel. Rows are decoded with quant/dequant.h into a per-thread buffer,
// then the F32 tile kernel multiplies them with the f32 activations.
//
// The buffer is a cache keyed by (call, first row, row count): run_rows (matmul_fast.cpp)
// walks all token tiles of a row tile before moving on, so each row is decoded once per
// token chunk. The call id (new for every matmul_fast call) keeps a buffer from one call from
// ever being reused by another whose weight happens to live at the same address.
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "quant/dequant.h"

namespace llmctl::cpu {

namespace {

struct RowCache {
  uint64_t call_id = 0;
  const uint8_t* w = nullptr;
  int n_rows = 0;
  std::vector<float> rows;  // (n_rows, n)
};

template <bool kAvx2>
void dequant_tile(const TileArgs& a, int n_rows, int n_tokens) {
  thread_local RowCache cache;
  const auto n = static_cast<size_t>(a.n);
  if (cache.call_id != a.call_id || cache.w != a.w || cache.n_rows != n_rows) {
    if (cache.rows.size() < static_cast<size_t>(n_rows) * n)
      cache.rows.resize(static_cast<size_t>(n_rows) * n);
    for (int r = 0; r < n_rows; ++r)
      dequantize_row(a.type, a.w + static_cast<size_t>(r) * a.w_stride,
                     cache.rows.data() + static_cast<size_t>(r) * n, a.n);
    cache.call_id = a.call_id;
    cache.w = a.w;
    cache.n_rows = n_rows;
  }
  TileArgs f = a;
  f.w = reinterpret_cast<const uint8_t*>(cache.rows.data());
  f.w_stride = n * sizeof(float);
  f.type = GgmlType::F32;
  static const MatmulKernel f32 = matmul_kernel_f32(kAvx2);
  f32.tile(f, n_rows, n_tokens);
}

}  // namespace

MatmulKernel matmul_kernel_dequant(GgmlType type, bool avx2) {
  if (!can_dequantize(type) || ggml_traits(type).block_size == 1) return MatmulKernel{};
  const MatmulKernel f32 = matmul_kernel_f32(avx2);
  MatmulKernel k = f32;
  k.name = avx2 ? "dequant+f32 avx2" : "dequant+f32 scalar";
  k.tile = avx2 ? &dequant_tile<true> : &dequant_tile<false>;
  k.quantized = false;
  k.row_blocks = false;  // a tile's decoded rows are cached while the chunk's token tiles pass
  return k;
}

}  // namespace llmctl::cpu
