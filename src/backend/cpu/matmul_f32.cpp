// F32 weights: the float tile (matmul_float_tile.h) with plain loads.
#include <cstring>

#include "backend/cpu/matmul_float_tile.h"
#include "backend/cpu/matmul_float_tile_avx512.h"

namespace llmctl::cpu {

namespace {

// memcpy loads: a GGUF tensor may sit at an address that is not float-aligned.
struct LoadF32 {
  static constexpr size_t kElemBytes = 4;
  static float load1(const uint8_t* row, int64_t i) {
    float v;
    std::memcpy(&v, row + static_cast<size_t>(i) * 4, sizeof v);
    return v;
  }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256 load8(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + static_cast<size_t>(i) * 4));
  }
  LLMCTL_AVX2 static __m256 load_tail(const uint8_t* row, int64_t i, int64_t m) {
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, row + static_cast<size_t>(i) * 4, static_cast<size_t>(m) * 4);
    return _mm256_loadu_ps(buf);
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_f32(bool avx2) {
  return make_float_kernel<LoadF32>(avx2, "f32 avx2", "f32 scalar");
}

MatmulKernel matmul_kernel_f32_avx512() { return make_float_kernel_avx512<LoadF32>("f32 avx512"); }

}  // namespace llmctl::cpu
