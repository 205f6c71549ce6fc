#pragma once
// Which tensor gets which format: the pure decision `llmctl quantize` makes before it touches
// any tensor data. No I/O here beyond reading tensor names, types and shapes.
//
// Rules, in order, for each tensor of the input:
//   1. One-dimensional tensors (norms, biases, rope_freqs) become F32: they are tiny, and the
//      engine (like llama.cpp) expects them in F32.
//   2. A tensor whose source type we cannot decode (K-quants, IQ*, integers ...) is copied
//      unchanged, with a warning.
//   3. With a mix (--type Q4_K_M ...), a tensor llama.cpp never quantizes keeps its type.
//   4. The first --tensor-type REGEX=TYPE whose regex is found in the GGUF tensor name
//      (std::regex_search, ECMAScript, as llama.cpp's --tensor-type: "attn_v" matches
//      "blk.0.attn_v.weight"; anchor with ^...$ for an exact name), else --keep-embedding for
//      token_embd.weight, --keep-output for output.weight, else the mix's rule (quant_mix.h),
//      else --type.
//   5. Row length (shape[0]) not a multiple of the wanted type's block size: fall back along
//      fallback_chain(wanted) to the first type that fits, with a warning naming the tensor,
//      the wanted and the chosen type:
//          wanted                          row length   chosen
//          Q4_K / Q5_K / Q6_K              % 256 != 0   Q5_0 / Q5_1 / Q8_0 (as llama.cpp)
//          Q2_K / Q3_K, IQ4_XS             % 256 != 0   Q4_0, IQ4_NL (as llama.cpp)
//                                          % 32 != 0    F16
//          Q8_0, Q4_0, Q4_1, Q5_0, Q5_1    % 32 != 0    F16 (llama.cpp stops with an error)
//          MXFP4 (the MXFP4_MOE experts)   % 32 != 0    F16 (as llama.cpp 0.3.36)
//      F16, BF16 and F32 always fit.
// A tensor whose chosen type equals its source type is copied byte for byte (never decoded
// and re-encoded), so quantizing a Q4_0 file to Q4_0 keeps its bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ggml_type.h"
#include "io/gguf.h"
#include "quant/quant_mix.h"

namespace llmctl {

// Parses a --type style name (case-insensitive): f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k
// q3_k q4_k q5_k q6_k iq4_nl iq4_xs mxfp4. Types ggml has but llmctl cannot write (iq1_*, iq2_*,
// iq3_* ...) and unknown names
// throw Error with the list of accepted names; `what` names the option in the message.
GgmlType parse_quant_type(const std::string& name, const std::string& what);

// ggml's llama_ftype number for general.file_type (llama.h): ALL_F32 = 0, MOSTLY_F16 = 1,
// MOSTLY_Q4_0 = 2, MOSTLY_Q4_1 = 3, MOSTLY_Q8_0 = 7, MOSTLY_Q5_0 = 8, MOSTLY_Q5_1 = 9,
// MOSTLY_Q2_K = 10, MOSTLY_Q3_K_S = 11, MOSTLY_Q4_K_S = 14, MOSTLY_Q5_K_S = 16, MOSTLY_Q6_K = 18,
// MOSTLY_IQ4_NL = 25, MOSTLY_IQ4_XS = 30, MOSTLY_BF16 = 32, MOSTLY_MXFP4_MOE = 38.
uint32_t llama_file_type(GgmlType type);

// Types tried, in order, when `wanted` does not fit a row length (wanted itself first).
std::vector<GgmlType> fallback_chain(GgmlType wanted);

struct TensorTypeOverride {
  std::string pattern;  // as given, for messages and the JSON report
  GgmlType type = GgmlType::F32;
};

struct QuantOptions {
  GgmlType type = GgmlType::Q8_0;             // --type (a mix: its base type)
  // llama.cpp's rules of this mix choose each matrix's type (quant_mix.h), and its file type
  // is written; nullptr or `pure`: every matrix is `type`. With a mix, tensors llama.cpp never
  // quantizes (routers, norms, position embeddings) keep their type, pure or not.
  const QuantMix* mix = nullptr;
  bool pure = false;                          // --pure
  MixModel model;                             // what the rules read (mix_model_from_gguf)
  bool has_imatrix = false;                   // --imatrix given (two mix rules depend on it)
  std::vector<TensorTypeOverride> overrides;  // --tensor-type, first match wins
  std::optional<GgmlType> keep_embedding;     // token_embd.weight
  std::optional<GgmlType> keep_output;        // output.weight
};

// Parses "REGEX=TYPE" (the last '=' splits, so a regex may contain '='). Throws Error on a
// missing '=', an empty regex, an invalid regex or type.
TensorTypeOverride parse_tensor_type_override(const std::string& arg);

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // ggml order
  GgmlType src_type = GgmlType::F32;
  GgmlType wanted = GgmlType::F32;  // what the rules asked for
  GgmlType chosen = GgmlType::F32;  // what will be written (differs after a fallback)
  std::string rule;                 // "1-D", "--type", "--tensor-type REGEX", "copied" ...
  uint64_t src_bytes = 0;
  uint64_t out_bytes = 0;
  int64_t n_elements = 0;
  bool copy = false;  // bytes copied unchanged (chosen == src_type)
};

struct QuantPlan {
  std::vector<TensorPlan> tensors;  // input order
  std::vector<std::string> warnings;
  GgmlType type = GgmlType::F32;  // options.type
  std::string mix;                // options.mix's name ("Q4_K_M"), empty without one
  bool pure = false;              // options.pure
  uint32_t file_type = 0;         // the mix's file type, else llama_file_type(options.type)
  uint64_t src_tensor_bytes = 0;
  uint64_t out_tensor_bytes = 0;  // sum of out_bytes (no alignment padding)
};

// Decides the output type of every tensor. Throws Error for an invalid regex (already checked
// by parse_tensor_type_override). Should a mix choose a type llmctl cannot write (none of the
// offered mixes does today), the plan holds it (a dry run shows it) and unwritable_types()
// names it.
QuantPlan plan_quantization(const std::vector<GgufTensorInfo>& tensors, const QuantOptions& opt);

// The chosen types of the plan that quantize_row cannot write, with how many tensors want each.
std::vector<std::pair<GgmlType, int>> unwritable_types(const QuantPlan& plan);

}  // namespace llmctl
