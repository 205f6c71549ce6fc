#pragma once
// ggml tensor types as numbered in GGUF files, with their block geometry.
// CONTRACT (used by io/, quant/, tokenizer/, cli/): names and functions below are stable.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace llmctl {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  // 4 and 5 (Q4_2, Q4_3) were removed from ggml and are invalid in files.
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  // 31..33 were Q4_0_4_4 etc. (removed); 34, 35 are TQ1_0, TQ2_0; 39 is MXFP4.
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;       // "Q4_0"
  uint32_t block_size;    // elements per block (1 for plain types)
  uint32_t type_size;     // bytes per block
};

// Traits of a type number read from a file; nullopt when the number is not a known type.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type);
// Traits of a known type (never fails).
GgmlTypeTraits ggml_traits(GgmlType type);
const char* ggml_type_name(GgmlType type);
// The types llmctl computes with (reads in place, dequantizes, runs on the CPU): F32, F16,
// BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4. The one
// list every module asks. (The CPU backends run all of them; a backend may support fewer, see
// Backend::supports_weight_type; quantize writes fewer, see can_quantize.)
bool is_engine_type(GgmlType type);
// Parses "q4_0", "Q4_0", "f16" ...; nullopt when unknown.
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

}  // namespace llmctl
