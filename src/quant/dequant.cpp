#include "quant/dequant.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmctl {

bool can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_1:
    case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q2_K: case GgmlType::Q3_K:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

void dequantize_block(GgmlType type, const uint8_t* block, float* out) {
  switch (type) {
    case GgmlType::Q8_0: dequantize_block_q8_0(block, out); break;
    case GgmlType::Q4_0: dequantize_block_q4_0(block, out); break;
    case GgmlType::Q4_1: dequantize_block_q4_1(block, out); break;
    case GgmlType::Q5_0: dequantize_block_q5_0(block, out); break;
    case GgmlType::Q5_1: dequantize_block_q5_1(block, out); break;
    case GgmlType::Q2_K: dequantize_block_q2_k(block, out); break;
    case GgmlType::Q3_K: dequantize_block_q3_k(block, out); break;
    case GgmlType::Q4_K: dequantize_block_q4_k(block, out); break;
    case GgmlType::Q5_K: dequantize_block_q5_k(block, out); break;
    case GgmlType::Q6_K: dequantize_block_q6_k(block, out); break;
    case GgmlType::IQ4_NL: dequantize_block_iq4_nl(block, out); break;
    case GgmlType::IQ4_XS: dequantize_block_iq4_xs(block, out); break;
    case GgmlType::MXFP4: dequantize_block_mxfp4(block, out); break;
    default: LLMCTL_ASSERT(false && "dequantize_block: not a block type");
  }
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  if (!can_dequantize(type))
    throw Error(fmt::format("dequantize: type {} is not supported (supported: F32, F16, BF16, "
                            "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
                            "IQ4_NL, IQ4_XS, MXFP4)",
                            ggml_type_name(type)));
  const GgmlTypeTraits tr = ggml_traits(type);
  if (n < 0 || n % tr.block_size != 0)
    throw Error(fmt::format("dequantize: {} elements is not a whole number of {} blocks of {}", n,
                            tr.name, tr.block_size));
  const auto* p = static_cast<const uint8_t*>(src);
  const auto count = static_cast<size_t>(n);
  switch (type) {
    case GgmlType::F32:
      if (count > 0) std::memcpy(dst, p, count * sizeof(float));
      break;
    case GgmlType::F16:
      for (size_t i = 0; i < count; ++i) dst[i] = fp16_to_f32(load_u16_le(p + 2 * i));
      break;
    case GgmlType::BF16:
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(load_u16_le(p + 2 * i));
      break;
    default: {
      const size_t blocks = count / tr.block_size;
      for (size_t b = 0; b < blocks; ++b) {
        const uint8_t* block = p + b * tr.type_size;
        float* out = dst + b * tr.block_size;
        dequantize_block(type, block, out);
      }
      break;
    }
  }
}

}  // namespace llmctl
