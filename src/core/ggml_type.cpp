#include "core/ggml_type.h"

#include <array>
#include <cctype>

#include "core/error.h"

namespace llmctl {

namespace {

// Block geometry per type number, from ggml's type_traits table (ggml.c) and the block
// structs in ggml-common.h. Q8_1 is 36 bytes there ({fp16 d, fp16 s, int8 qs[32]});
// gguf-py's GGML_QUANT_SIZES still says 40 from an older float layout, but Q8_1 is a
// scratch type that does not occur in files. A null name marks an invalid number
// (4, 5: Q4_2/Q4_3 and 31..33: Q4_0_4_4 etc., removed; 36..38: never assigned in files).
constexpr uint32_t kQK = 256;  // super-block size of the k-quants and most IQ types
constexpr std::array<GgmlTypeTraits, 40> kTraits = {{
    {"F32", 1, 4},          // 0
    {"F16", 1, 2},          // 1
    {"Q4_0", 32, 18},       // 2  fp16 d + 16 nibble bytes
    {"Q4_1", 32, 20},       // 3  fp16 d, m + 16
    {nullptr, 0, 0},        // 4  Q4_2 (removed)
    {nullptr, 0, 0},        // 5  Q4_3 (removed)
    {"Q5_0", 32, 22},       // 6  fp16 d + 4 high bits + 16
    {"Q5_1", 32, 24},       // 7
    {"Q8_0", 32, 34},       // 8  fp16 d + 32 int8
    {"Q8_1", 32, 36},       // 9
    {"Q2_K", kQK, 84},      // 10
    {"Q3_K", kQK, 110},     // 11
    {"Q4_K", kQK, 144},     // 12
    {"Q5_K", kQK, 176},     // 13
    {"Q6_K", kQK, 210},     // 14
    {"Q8_K", kQK, 292},     // 15 float d + 256 int8 + 16 int16 sums
    {"IQ2_XXS", kQK, 66},   // 16
    {"IQ2_XS", kQK, 74},    // 17
    {"IQ3_XXS", kQK, 98},   // 18
    {"IQ1_S", kQK, 50},     // 19
    {"IQ4_NL", 32, 18},     // 20
    {"IQ3_S", kQK, 110},    // 21
    {"IQ2_S", kQK, 82},     // 22
    {"IQ4_XS", kQK, 136},   // 23
    {"I8", 1, 1},           // 24
    {"I16", 1, 2},          // 25
    {"I32", 1, 4},          // 26
    {"I64", 1, 8},          // 27
    {"F64", 1, 8},          // 28
    {"IQ1_M", kQK, 56},     // 29
    {"BF16", 1, 2},         // 30
    {nullptr, 0, 0},        // 31 Q4_0_4_4 (removed)
    {nullptr, 0, 0},        // 32 Q4_0_4_8 (removed)
    {nullptr, 0, 0},        // 33 Q4_0_8_8 (removed)
    {"TQ1_0", kQK, 54},     // 34
    {"TQ2_0", kQK, 66},     // 35
    {nullptr, 0, 0},        // 36 IQ4_NL_4_4 (removed)
    {nullptr, 0, 0},        // 37 IQ4_NL_4_8 (removed)
    {nullptr, 0, 0},        // 38 IQ4_NL_8_8 (removed)
    {"MXFP4", 32, 17},      // 39 e8m0 scale + 16 nibble bytes
}};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type) {
  if (type >= kTraits.size() || kTraits[type].name == nullptr) return std::nullopt;
  return kTraits[type];
}

GgmlTypeTraits ggml_traits(GgmlType type) {
  const auto t = ggml_type_traits(static_cast<uint32_t>(type));
  LLMCTL_ASSERT(t.has_value());
  return *t;
}

const char* ggml_type_name(GgmlType type) { return ggml_traits(type).name; }

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (uint32_t i = 0; i < kTraits.size(); ++i) {
    const char* n = kTraits[i].name;
    if (n == nullptr) continue;
    const std::string_view sv(n);
    if (sv.size() != name.size()) continue;
    bool same = true;
    for (size_t k = 0; k < sv.size() && same; ++k)
      same = std::toupper(static_cast<unsigned char>(name[k])) == static_cast<unsigned char>(sv[k]);
    if (same) return static_cast<GgmlType>(i);
  }
  return std::nullopt;
}

bool is_engine_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

}  // namespace llmctl
