#pragma once
// --verify: one pass over every weight of a model file looking for NaN and Inf, so that a
// corrupt download or a broken conversion is reported by name before it turns the logits
// into NaN somewhere in the middle of a forward pass.
//
// What is checked, per ggml type:
//   F32, F16, BF16, F64   every value (an exponent of all ones is Inf or NaN);
//   block types           the fp16 scales of every block: d (and m, dmin or s where the format
//                         has them). The values a block produces are q * d (+ m) with small
//                         integer q and sub-scales (|q * sc| < 2^13 in every format below), so
//                         they are finite exactly when the block's scales are: checking the
//                         scales checks the values, without dequantizing.
//                         Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS;
//                         MXFP4: its E8M0 scale byte e, where 0xFF (NaN) is the fault, as in
//                         ggml's row validation (e 253, 254 can still give Inf values);
//   I8 .. I64             nothing to check (integers are finite);
//   anything else         not checked, counted and named in VerifyResult::unchecked.
// Cost: one sequential read of the tensor data (scales only for block types: the pages are
// still touched, so the pass is bound by reading the file; see docs/reliability.md).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/ggml_type.h"

namespace llmctl {

class GgufFile;
struct LoadedModel;

// One tensor's bytes in place (a GGUF or safetensors mapping). Shape in ggml order:
// shape[0] is the row length.
struct WeightTensorRef {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
};

// The first non-finite value or scale found.
struct WeightFault {
  std::string tensor;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;
  int64_t row = 0;     // flat row index (all dims after the first)
  int64_t column = 0;  // element within the row (for a block: its first element)
  int64_t block = -1;  // block within the row; -1 for a plain float type
  std::string field;   // "value", "d", "m", "dmin", "s", "e" (MXFP4)
  float value = 0.0f;  // the NaN or Inf found (as float)
  // "tensor 'blk.0.attn_q.weight' (Q4_0 [64, 64]): row 5, block 1 (elements 32..63):
  //  scale d is NaN"
  std::string describe() const;
};

struct VerifyResult {
  uint64_t n_tensors = 0;              // tensors scanned (up to and including a faulty one)
  uint64_t n_bytes = 0;                // bytes of tensor data scanned
  uint64_t n_values = 0;               // floats or scales tested
  std::vector<std::string> unchecked;  // "name (TYPE)" for types this pass cannot check
  std::optional<WeightFault> fault;    // the first one; the scan stops there
};

// Called after each chunk with (bytes done, bytes in total); at most every 64 MiB or so.
using VerifyProgress = std::function<void(uint64_t done, uint64_t total)>;

// Scans the tensors in order and stops at the first fault.
VerifyResult verify_tensors(const std::vector<WeightTensorRef>& tensors,
                            const VerifyProgress& progress = nullptr);

// Every tensor of a GGUF file, in file order.
std::vector<WeightTensorRef> gguf_tensor_refs(const GgufFile& file);
// Every tensor of the files behind a loaded model (the GGUF, or all safetensors shards).
std::vector<WeightTensorRef> model_tensor_refs(const LoadedModel& model);

// For `run --verify`: scans model_tensor_refs(model) and throws Error with
// WeightFault::describe() (prefixed with the model path) at the first fault.
void verify_model_weights(const LoadedModel& model, const VerifyProgress& progress = nullptr);

}  // namespace llmctl
