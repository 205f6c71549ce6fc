// llmctl quantize with Q5_0, Q5_1 and the k-quants on stories260K: the fallback table, the
// file type, the report (RMSE recomputed here from the written bytes), --help, --dry-run, a
// greedy `llmctl run` of every output, and --imatrix (weighted tensors, missing entries, a
// matrix from another model).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/gguf.h"
#include "quant/dequant.h"
#include "quant/imatrix.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using namespace llmctl;
using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

struct TypeCase {
  const char* name;
  GgmlType type;
  GgmlType fallback_32;  // for rows that are whole 32-blocks but not 256 (stories260K: 64)
  uint32_t file_type;
};

const TypeCase kCases[] = {
    {"q5_0", GgmlType::Q5_0, GgmlType::Q5_0, 8},  {"q5_1", GgmlType::Q5_1, GgmlType::Q5_1, 9},
    // q4_k and q5_k are llama-quantize's aliases of Q4_K_M and Q5_K_M (file types 15, 17)
    {"q4_k", GgmlType::Q4_K, GgmlType::Q5_0, 15}, {"q5_k", GgmlType::Q5_K, GgmlType::Q5_1, 17},
    {"q6_k", GgmlType::Q6_K, GgmlType::Q8_0, 18},
};

// The fallback table (quant_plan.h), written out independently.
GgmlType expected_type(const GgufTensorInfo& t, const TypeCase& c) {
  if (t.shape.size() == 1) return GgmlType::F32;
  if (t.shape[0] % ggml_traits(c.type).block_size == 0) return c.type;
  return t.shape[0] % 32 == 0 ? c.fallback_32 : GgmlType::F16;
}

std::vector<float> decode(const GgufTensorInfo& t) {
  std::vector<float> x(static_cast<size_t>(t.n_elements()));
  dequantize_row(t.type, t.data, x.data(), t.n_elements());
  return x;
}

}  // namespace

TEST_CASE("quantize stories260K to q5_0 q5_1 q4_k q5_k q6_k: plan, report, run", "[cli]") {
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const GgufFile in = GgufFile::open(in_path);
  for (const TypeCase& c : kCases) {
    INFO(c.name);
    const std::string out_path = test::temp_dir() + "/k_" + std::string(c.name) + ".gguf";
    const auto r = run_llmctl(
        {"quantize", in_path, out_path, "--type", c.name, "--pure", "--json", "--force", "-t", "2"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["file_type"] == c.file_type);
    // ffn_down's rows of 172 fit no block type: F16, with a warning naming both types.
    CHECK(has(r.err, fmt::format("tensors: row length 172 is not a multiple of the {} block size",
                                 ggml_type_name(c.type))));
    CHECK(has(r.err, "(first: 'blk.0.ffn_down.weight')"));
    if (c.fallback_32 != c.type)
      CHECK(has(r.err, fmt::format("tensors: row length 64 is not a "
                                   "multiple of the {} block size 256; writing {}",
                                   ggml_type_name(c.type), ggml_type_name(c.fallback_32))));
    const GgufFile out = GgufFile::open(out_path);
    REQUIRE(out.tensors().size() == in.tensors().size());
    for (size_t i = 0; i < in.tensors().size(); ++i) {
      const GgufTensorInfo& a = in.tensors()[i];
      const GgufTensorInfo& b = out.tensors()[i];
      INFO(a.name);
      CHECK(b.type == expected_type(a, c));
      // The report's RMSE is that of the bytes in the file.
      const auto x = decode(a), y = decode(b);
      double se = 0;
      for (size_t k = 0; k < x.size(); ++k) se += std::pow(double{x[k]} - double{y[k]}, 2);
      const double rmse = std::sqrt(se / static_cast<double>(x.size()));
      const auto& t = j["tensors"][i];
      REQUIRE(t["name"] == a.name);
      if (t.contains("rmse")) CHECK(t["rmse"].get<double>() == Approx(rmse).epsilon(1e-9));
    }
    // The engine runs the file: a greedy continuation of the expected length.
    const auto g = run_llmctl(
        {"run", "-m", out_path, "-p", "Once upon a time", "-n", "16", "--temp", "0", "--json"});
    INFO(g.err);
    REQUIRE(g.code == 0);
    CHECK(nlohmann::json::parse(g.out)["generated_ids"].size() == 16);
  }
}

TEST_CASE("quantize --help lists every type with its bits per weight, --dry-run sizes", "[cli]") {
  const auto h = run_llmctl({"quantize", "--help"});
  CHECK(h.code == 0);
  for (const char* s : {"Q4_K_M", "Q5_K_M", "Q6_K (6.56)", "Q5_0 (5.5)", "Q5_1 (6)",
                        "Q8_0 (8.5", "Q4_0 (4.5)", "Q4_1 (5)", "--pure", "--imatrix"})
    CHECK(has(h.out, s));
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const GgufFile in = GgufFile::open(in_path);
  for (const TypeCase& c : kCases) {
    const auto r = run_llmctl({"quantize", in_path, test::temp_dir() + "/never.gguf", "--type",
                               c.name, "--pure", "--dry-run", "--json"});
    REQUIRE(r.code == 0);
    uint64_t expect = 0;
    for (const GgufTensorInfo& t : in.tensors()) {
      const GgmlTypeTraits tr = ggml_traits(expected_type(t, c));
      expect += static_cast<uint64_t>(t.n_elements()) / tr.block_size * tr.type_size;
    }
    CHECK(nlohmann::json::parse(r.out)["out_tensor_bytes"] == expect);
    CHECK_FALSE(std::filesystem::exists(test::temp_dir() + "/never.gguf"));
  }
}

TEST_CASE("quantize --imatrix: weighted tensors, missing entries, wrong column count", "[cli]") {
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir();
  // An importance matrix with entries for the attention weights of layer 0 only.
  ImportanceMatrix m;
  std::vector<float> x(4 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"})
    m.add(w, x.data(), 4, 64);
  save_imatrix(dir + "/part.imatrix", m);
  auto r = run_llmctl({"quantize", in_path, dir + "/w.gguf", "--type", "q4_0", "--pure",
                       "--imatrix", dir + "/part.imatrix", "--json", "--force"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["imatrix"]["weighted"] == 3);
  // 5 layers x (q k v o gate up) + output + token_embd are Q4_0; 3 weighted.
  CHECK(j["imatrix"]["missing"].size() == 5 * 6 + 2 - 3);
  CHECK(has(r.err, "29 tensor(s) have no entry"));
  for (const auto& t : j["tensors"])
    CHECK(t["imatrix"] ==
          (t["name"] == "blk.0.attn_q.weight" || t["name"] == "blk.0.attn_k.weight" ||
           t["name"] == "blk.0.attn_v.weight"));
  // A tensor without an entry is written exactly as without --imatrix.
  r = run_llmctl({"quantize", in_path, dir + "/p.gguf", "--type", "q4_0", "--pure", "--force"});
  REQUIRE(r.code == 0);
  const GgufFile a = GgufFile::open(dir + "/w.gguf"), b = GgufFile::open(dir + "/p.gguf");
  const GgufTensorInfo* ta = a.find_tensor("blk.1.attn_q.weight");
  const GgufTensorInfo* tb = b.find_tensor("blk.1.attn_q.weight");
  REQUIRE((ta && tb));
  CHECK(std::equal(ta->data, ta->data + ta->n_bytes, tb->data));

  // An importance matrix from another model (attn_q seen with 80 columns): a clear error.
  ImportanceMatrix bad;
  std::vector<float> y(2 * 80, 1.0f);
  bad.add("blk.0.attn_q.weight", y.data(), 2, 80);
  save_imatrix(dir + "/bad.imatrix", bad);
  r = run_llmctl(
      {"quantize", in_path, dir + "/o.gguf", "--type", "q4_k", "--imatrix", dir + "/bad.imatrix"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "blk.0.attn_q.weight"));
  CHECK(has(r.err, "has 80 columns, the weight has 64"));
  CHECK_FALSE(std::filesystem::exists(dir + "/o.gguf"));
  r = run_llmctl({"quantize", in_path, dir + "/o.gguf", "--type", "q4_0", "--imatrix",
                  dir + "/missing.imatrix"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "missing.imatrix"));
}
