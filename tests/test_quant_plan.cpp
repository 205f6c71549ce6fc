// quant/quant_plan.h: which tensor gets which format, on hand-made tensor lists.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "quant/quant_plan.h"

using namespace llmctl;

namespace {

GgufTensorInfo tensor(const std::string& name, std::vector<int64_t> shape,
                      GgmlType type = GgmlType::F32) {
  GgufTensorInfo t;
  t.name = name;
  t.type = type;
  t.shape = std::move(shape);
  const GgmlTypeTraits tr = ggml_traits(type);
  t.n_bytes = static_cast<uint64_t>(t.n_elements()) / tr.block_size * tr.type_size;
  return t;
}

std::vector<GgufTensorInfo> llama_like() {
  return {tensor("token_embd.weight", {64, 512}),
          tensor("output_norm.weight", {64}),
          tensor("output.weight", {64, 512}),
          tensor("blk.0.attn_q.weight", {64, 64}),
          tensor("blk.0.attn_v.weight", {64, 32}),
          tensor("blk.0.ffn_down.weight", {172, 64}),
          tensor("blk.1.attn_v.weight", {64, 32}, GgmlType::F16)};
}

const TensorPlan& find(const QuantPlan& p, const std::string& name) {
  for (const auto& t : p.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  throw 0;
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("quant plan: --type for matrices, F32 for 1-D, F16 fallback for rows of 172", "[cpu]") {
  QuantOptions o;
  o.type = GgmlType::Q4_0;
  const QuantPlan p = plan_quantization(llama_like(), o);
  REQUIRE(p.tensors.size() == 7);
  CHECK(find(p, "token_embd.weight").chosen == GgmlType::Q4_0);
  CHECK(find(p, "output_norm.weight").chosen == GgmlType::F32);
  CHECK(find(p, "output_norm.weight").copy);
  CHECK(find(p, "blk.0.attn_q.weight").chosen == GgmlType::Q4_0);
  const TensorPlan& down = find(p, "blk.0.ffn_down.weight");
  CHECK(down.wanted == GgmlType::Q4_0);
  CHECK(down.chosen == GgmlType::F16);
  CHECK(down.out_bytes == 172 * 64 * 2);
  REQUIRE(p.warnings.size() == 1);
  CHECK(p.warnings[0].find("blk.0.ffn_down.weight") != std::string::npos);
  CHECK(p.warnings[0].find("Q4_0") != std::string::npos);
  CHECK(p.warnings[0].find("F16") != std::string::npos);
  // 64 x 64 Q4_0: 128 blocks of 18 bytes.
  CHECK(find(p, "blk.0.attn_q.weight").out_bytes == 128 * 18);
  uint64_t sum = 0;
  for (const auto& t : p.tensors) sum += t.out_bytes;
  CHECK(p.out_tensor_bytes == sum);
  CHECK(p.file_type == 2);
}

TEST_CASE("quant plan: overrides in order, first match wins, keep embedding and output", "[cpu]") {
  QuantOptions o;
  o.type = GgmlType::Q4_0;
  o.overrides.push_back(parse_tensor_type_override("blk\\.0\\.attn_v=q8_0"));
  o.overrides.push_back(parse_tensor_type_override("attn_v=q4_1"));
  o.overrides.push_back(parse_tensor_type_override("^output\\.weight$=bf16"));
  o.keep_embedding = GgmlType::F16;
  o.keep_output = GgmlType::F32;  // loses to the --tensor-type that matched first
  const QuantPlan p = plan_quantization(llama_like(), o);
  CHECK(find(p, "blk.0.attn_v.weight").chosen == GgmlType::Q8_0);
  CHECK(find(p, "blk.1.attn_v.weight").chosen == GgmlType::Q4_1);
  CHECK(find(p, "blk.1.attn_v.weight").rule == "--tensor-type attn_v");
  CHECK(find(p, "output.weight").chosen == GgmlType::BF16);
  CHECK(find(p, "token_embd.weight").chosen == GgmlType::F16);
  CHECK(find(p, "token_embd.weight").rule == "--keep-embedding");
  CHECK(find(p, "blk.0.attn_q.weight").chosen == GgmlType::Q4_0);
  // Overrides never turn a 1-D tensor into something else.
  o.overrides.insert(o.overrides.begin(), parse_tensor_type_override("norm=q8_0"));
  CHECK(find(plan_quantization(llama_like(), o), "output_norm.weight").chosen == GgmlType::F32);
}

TEST_CASE("quant plan: same type is copied, an undecodable source is copied with a warning",
          "[cpu]") {
  QuantOptions o;
  o.type = GgmlType::F16;
  std::vector<GgufTensorInfo> t = llama_like();
  t.push_back(tensor("blk.2.attn_q.weight", {256, 4}, GgmlType::IQ2_XXS));
  const QuantPlan p = plan_quantization(t, o);
  CHECK(find(p, "blk.1.attn_v.weight").copy);
  CHECK_FALSE(find(p, "blk.0.attn_v.weight").copy);
  const TensorPlan& k = find(p, "blk.2.attn_q.weight");
  CHECK(k.copy);
  CHECK(k.chosen == GgmlType::IQ2_XXS);
  CHECK(mentions(p.warnings, "blk.2.attn_q.weight"));
  CHECK(p.file_type == 1);
}

TEST_CASE("quant plan: type names, file types and bad options", "[cpu]") {
  CHECK(parse_quant_type("Q8_0", "--type") == GgmlType::Q8_0);
  CHECK(parse_quant_type("bf16", "--type") == GgmlType::BF16);
  CHECK(parse_quant_type("q5_0", "--type") == GgmlType::Q5_0);
  CHECK(parse_quant_type("Q5_1", "--type") == GgmlType::Q5_1);
  CHECK(parse_quant_type("q4_k", "--type") == GgmlType::Q4_K);
  CHECK(parse_quant_type("q5_K", "--type") == GgmlType::Q5_K);
  CHECK(parse_quant_type("q6_k", "--type") == GgmlType::Q6_K);
  CHECK(parse_quant_type("q2_k", "--type") == GgmlType::Q2_K);
  CHECK(parse_quant_type("Q3_K", "--type") == GgmlType::Q3_K);
  CHECK(parse_quant_type("iq4_nl", "--type") == GgmlType::IQ4_NL);
  CHECK(parse_quant_type("iq4_xs", "--type") == GgmlType::IQ4_XS);
  CHECK_THROWS_WITH(parse_quant_type("iq2_xxs", "--type"), Catch::Contains("not supported yet"));
  CHECK_THROWS_WITH(parse_quant_type("iq3_s", "--type"), Catch::Contains("q6_k"));
  CHECK_THROWS_WITH(parse_quant_type("q3", "--type"), Catch::Contains("unknown type 'q3'"));
  // llama.h's enum llama_ftype.
  CHECK(llama_file_type(GgmlType::F32) == 0);
  CHECK(llama_file_type(GgmlType::F16) == 1);
  CHECK(llama_file_type(GgmlType::Q4_0) == 2);
  CHECK(llama_file_type(GgmlType::Q4_1) == 3);
  CHECK(llama_file_type(GgmlType::Q8_0) == 7);
  CHECK(llama_file_type(GgmlType::BF16) == 32);
  CHECK(llama_file_type(GgmlType::Q5_0) == 8);
  CHECK(llama_file_type(GgmlType::Q5_1) == 9);
  CHECK(llama_file_type(GgmlType::Q4_K) == 14);  // LLAMA_FTYPE_MOSTLY_Q4_K_S
  CHECK(llama_file_type(GgmlType::Q5_K) == 16);  // LLAMA_FTYPE_MOSTLY_Q5_K_S
  CHECK(llama_file_type(GgmlType::Q6_K) == 18);
  CHECK(llama_file_type(GgmlType::Q2_K) == 10);
  CHECK(llama_file_type(GgmlType::Q3_K) == 11);  // LLAMA_FTYPE_MOSTLY_Q3_K_S
  CHECK(llama_file_type(GgmlType::IQ4_NL) == 25);
  CHECK(llama_file_type(GgmlType::IQ4_XS) == 30);
  CHECK_THROWS_WITH(parse_tensor_type_override("attn_v"), Catch::Contains("REGEX=TYPE"));
  CHECK_THROWS_WITH(parse_tensor_type_override("=q8_0"), Catch::Contains("REGEX=TYPE"));
  CHECK_THROWS_WITH(parse_tensor_type_override("attn_v="), Catch::Contains("REGEX=TYPE"));
  CHECK_THROWS_WITH(parse_tensor_type_override("attn_(v=q8_0"),
                    Catch::Contains("invalid regular expression"));
  CHECK_THROWS_WITH(parse_tensor_type_override("attn_v=q9"), Catch::Contains("unknown type"));
  // The last '=' splits, so a regex may hold one.
  CHECK(parse_tensor_type_override("a=b=f16").pattern == "a=b");
  CHECK(fallback_chain(GgmlType::Q8_0) == std::vector<GgmlType>{GgmlType::Q8_0, GgmlType::F16});
  CHECK(fallback_chain(GgmlType::BF16) == std::vector<GgmlType>{GgmlType::BF16});
}

// The fallback table of quant_plan.h, on rows of 64 (whole 32-blocks, not 256) and 172
// (neither), as in stories260K.
TEST_CASE("quant plan: k-quant fallback to the next 32-block type, then F16", "[cpu]") {
  struct Row {
    GgmlType wanted, for_64, for_172;
  };
  for (const Row& r : {Row{GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::F16},
                       Row{GgmlType::Q5_K, GgmlType::Q5_1, GgmlType::F16},
                       Row{GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16},
                       Row{GgmlType::Q5_0, GgmlType::Q5_0, GgmlType::F16},
                       Row{GgmlType::Q5_1, GgmlType::Q5_1, GgmlType::F16}}) {
    INFO(ggml_type_name(r.wanted));
    QuantOptions o;
    o.type = r.wanted;
    std::vector<GgufTensorInfo> t = llama_like();
    t.push_back(tensor("blk.3.ffn_up.weight", {512, 8}));
    const QuantPlan p = plan_quantization(t, o);
    CHECK(find(p, "blk.0.attn_q.weight").chosen == r.for_64);
    CHECK(find(p, "blk.0.ffn_down.weight").chosen == r.for_172);
    CHECK(find(p, "blk.3.ffn_up.weight").chosen == r.wanted);  // 512 = 2 super-blocks
    if (r.for_64 != r.wanted)
      CHECK(mentions(p.warnings, fmt::format("tensor 'blk.0.attn_q.weight': row length 64 is not "
                                             "a multiple of the {} block size 256; writing {}",
                                             ggml_type_name(r.wanted), ggml_type_name(r.for_64))));
    const TensorPlan& up = find(p, "blk.3.ffn_up.weight");
    const GgmlTypeTraits tr = ggml_traits(r.wanted);
    CHECK(up.out_bytes == 512 * 8 / tr.block_size * tr.type_size);
  }
}
