#pragma once
// llama.cpp's quantization mixes ("file types" such as Q4_K_M): which type each weight tensor
// of a model gets, by llama.cpp's rules (llama_tensor_get_type in its src/llama-quant.cpp), so
// that `llmctl quantize --type Q4_K_M` gives the tensor types llama-quantize gives for the same
// input. The whole of that knowledge lives in quant_mix.cpp: the table of mixes and the rules.
//
// The rules, in the order llama.cpp applies them to each tensor that may be quantized (a
// tensor of two or more dimensions whose name ends in "weight", not a norm, not a router
// "ffn_gate_inp", not a position or token-type embedding; the others keep their type):
//   - output.weight, and token_embd.weight when the model has no output.weight (tied):
//     Q6_K, or Q8_0 when the mix's base type is Q8_0 or its block size does not divide the row
//     (or for falcon).
//   - attn_v (and fused attn_qkv): upgrades per mix, e.g. Q4_K_M/Q5_K_M give Q6_K to the
//     first and last eighth of the layers and every third one in between ("use_more_bits"),
//     Q3_K_M gives Q5_K to the first two and Q4_K to the rest, Q2_K gives Q4_K when n_head /
//     n_head_kv >= 4 else Q3_K; 70B Llama (80 layers, grouped KV) lifts Q3_K/Q4_K to Q5_K;
//     eight experts give Q8_0.
//   - ffn_down: per mix and layer (Q4_K_M: Q6_K on use_more_bits layers; Q4_K_S: Q5_K on the
//     first eighth; Q3_K_M: Q5_K on the first sixteenth, then Q4_K; ...). Two rules depend on
//     whether an importance matrix is given (llama.cpp's has_imatrix): with one, Q4_0 / Q5_0
//     give Q4_1 / Q5_1 to the first eighth; without one, IQ4_NL / IQ4_XS give it Q5_K.
//   - attn_output: Q2_K -> Q3_K, Q3_K_M -> Q4_K, Q3_K_L -> Q5_K; eight experts -> Q5_K.
//   - attn_k: eight experts -> Q8_0.
//   - MXFP4_MOE (llama_ftype 38; the mix gpt-oss files use): output.weight (and a tied
//     token_embd) Q8_0; then, before every rule above, a tensor with a third dimension > 1
//     (ffn_{gate,up,down}_exps: the experts) MXFP4, every other matrix Q8_0.
//   - Then a row length the chosen type's block does not divide falls back (quant_plan.h).
// Layer numbers of ffn_down (and attn_v's counter) count the tensors of that kind in the order
// llama.cpp visits them, whatever the file's order: by the N of "blk.N." (tensors without one
// first), then by name (its llama_model_loader keeps the weights in that order). So blk.10
// comes after blk.9, not after blk.1 as in a file sorted by name. With experts llama.cpp reads
// the ffn_down layer from "blk.N." instead.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ggml_type.h"
#include "io/gguf.h"

namespace llmctl {

struct QuantMix {
  const char* name = "";        // "Q4_K_M"
  uint32_t file_type = 0;       // general.file_type (llama.cpp's llama_ftype)
  GgmlType base = GgmlType::F32;  // the type of every tensor no rule changes; the rules apply
                                  // to block-quantized bases only (F32/F16/BF16: every matrix)
};

// A mix by llama-quantize's name (case-insensitive; "Q4_K" is Q4_K_M, "Q5_K" Q5_K_M, "Q3_K"
// Q3_K_M, as there; "MXFP4" is MXFP4_MOE); nullptr when unknown.
const QuantMix* find_quant_mix(std::string_view name);
// Every accepted name, comma-separated, for help and error messages.
std::string quant_mix_names();

// What the rules read from the model besides the tensors.
struct MixModel {
  std::string arch;      // general.architecture
  int64_t n_layer = 0;   // {arch}.block_count
  int64_t n_head = 0;    // {arch}.attention.head_count
  int64_t n_head_kv = 0; // {arch}.attention.head_count_kv (0: same as n_head)
  int64_t n_expert = 0;  // {arch}.expert_count
};
MixModel mix_model_from_gguf(const GgufFile& file);

// Whether llama.cpp quantizes this tensor at all (the list above); shape in ggml order, its
// trailing dimensions of 1 not counted (ggml_n_dims).
bool mix_allows_quantization(const std::string& name, const std::vector<int64_t>& shape);

// The rules over one file: construct with all its tensors (the counts and the order the rules
// need), then ask type_for() for any quantizable tensor, in any order. The result is before
// the row-length fallback.
class MixRules {
 public:
  // has_imatrix: an importance matrix is given (whatever its entries), as llama.cpp's
  // has_imatrix.
  MixRules(const QuantMix& mix, const MixModel& model, const std::vector<GgufTensorInfo>& tensors,
           bool has_imatrix = false);
  GgmlType type_for(const GgufTensorInfo& tensor);

 private:
  int rank_of(const std::string& name) const;

  const QuantMix& mix_;
  MixModel model_;
  bool has_imatrix_ = false;
  bool tied_ = true;  // no output.weight: token_embd.weight is also the output
  int n_attn_v_ = 0;
  // Each quantizable attn_v / attn_qkv and ffn_down tensor's place among its kind in
  // llama.cpp's order: its counters i_attention_wv, i_ffn_down.
  std::unordered_map<std::string, int> rank_;
};

}  // namespace llmctl
