#include "plan/formats.h"

#include "core/error.h"
#include "plan/model_config.h"

namespace llmctl::plan {

WeightFormat parse_weight_format(const std::string& name_in, int64_t group_size) {
  const std::string name = lowercase(name_in);
  WeightFormat w;
  w.name = name;
  if (name == "f32" || name == "fp32") {
    w.bytes_per_param = 4;
  } else if (name == "f16" || name == "fp16" || name == "bf16") {
    w.bytes_per_param = 2;
  } else if (name == "fp8" || name == "f8" || name == "fp8_e4m3") {
    w.bytes_per_param = 1;  // per-tensor or per-channel scales: negligible
    w.embeddings_16bit = true;
    w.fp8_compute = true;
  } else if (name == "int8" || name == "w8a16") {
    w.bytes_per_param = 1;
    w.embeddings_16bit = true;
  } else if (name == "q8_0") {
    w.bytes_per_param = 34.0 / 32.0;  // 32 int8 + one f16 scale
  } else if (name == "q4_0") {
    w.bytes_per_param = 18.0 / 32.0;  // 32 nibbles + one f16 scale
  } else if (name == "q4_k") {
    w.bytes_per_param = 144.0 / 256.0;  // super-block of 256: 4.5 bits per weight
  } else if (name == "int4" || name == "gptq" || name == "awq" || name.rfind("int4-g", 0) == 0) {
    int64_t g = group_size;
    if (name.rfind("int4-g", 0) == 0) {
      try {
        g = std::stoll(name.substr(6));
      } catch (const std::exception&) {
        g = 0;
      }
    }
    if (g <= 0) throw Error(fmt::format("weight type '{}': bad group size", name_in), "e.g. int4-g128");
    // 4-bit weights + per group and output column an f16 scale and a 4-bit zero point
    // (GPTQ and AWQ pack qzeros as int4).
    w.bytes_per_param = 0.5 + 2.5 / static_cast<double>(g);
    w.embeddings_16bit = true;
    w.group_size = g;
    w.name = fmt::format("{}-g{}", name.rfind("int4-g", 0) == 0 ? "int4" : name, g);
  } else if (name == "gguf" || name == "file") {
    w.from_file = true;
    w.name = "gguf";
  } else {
    throw Error(fmt::format("unknown weight type '{}'", name_in),
                "use f32, f16, bf16, fp8, int8, q8_0, q4_0, q4_k, int4 (gptq), awq, int4-gN or gguf");
  }
  return w;
}

KvFormat parse_kv_format(const std::string& name_in) {
  const std::string name = lowercase(name_in);
  if (name == "f32" || name == "fp32") return {"f32", 1, 4};
  if (name == "f16" || name == "fp16") return {"f16", 1, 2};
  if (name == "bf16") return {"bf16", 1, 2};
  if (name == "fp8" || name == "fp8_e4m3" || name == "fp8_e5m2") return {"fp8", 1, 1};
  if (name == "q8_0") return {"q8_0", 32, 34};
  if (name == "q4_0") return {"q4_0", 32, 18};
  throw Error(fmt::format("unknown KV type '{}'", name_in), "use f32, f16, bf16, fp8, q8_0 or q4_0");
}

}  // namespace llmctl::plan
