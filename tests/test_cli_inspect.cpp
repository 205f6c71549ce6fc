// llmctl inspect: text and JSON output on a real model, and clean failures on bad files.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/quantize.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {
bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}
}  // namespace

TEST_CASE("inspect prints header, metadata, tensors and totals", "[cli]") {
  const std::string path = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl({"inspect", path});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK(has(r.out,
            "GGUF v3, 19 metadata keys, 48 tensors, alignment 32, data section at byte 14176, "
            "1185376 bytes"));
  CHECK(has(r.out, "[string x 512] \"<unk>\", \"<s>\", \"</s>\", ..."));
  CHECK(has(r.out, "[f32 x 512] 0, 0, 0, ..."));
  CHECK(has(r.out, "llama.attention.layer_norm_rms_epsilon  f32            1e-05"));
  CHECK(has(r.out, "tokenizer.ggml.padding_token_id         u32            4294967295"));
  // name, type, shape (row length first), bytes, offset from the data section
  CHECK(has(r.out, "  blk.0.ffn_down.weight     F32      172 x 64         44032        355840\n"));
  CHECK(has(r.out,
            "  F32         48 tensors          292800 elements         1171200 bytes (1.12 MiB)"));
  CHECK(has(r.out, "parameters: 292800 (292.80 K), tensor data: 1171200 bytes"));
}

TEST_CASE("inspect --json is complete, machine-readable and summarises long arrays", "[cli]") {
  const std::string path = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl({"inspect", "--json", path});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["version"] == 3);
  CHECK(j["data_offset"] == 14176);
  CHECK(j["metadata"].size() == 19);
  CHECK(j["metadata"]["llama.block_count"] == 5);
  CHECK(j["metadata"]["llama.attention.layer_norm_rms_epsilon"] == 1e-05);
  CHECK(j["metadata_types"]["tokenizer.ggml.tokens"] == "array[string]");
  const auto& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  CHECK(tokens["type"] == "string");
  CHECK(tokens["count"] == 512);
  REQUIRE(tokens["head"].size() == 8);
  CHECK(tokens["head"][2] == "</s>");
  REQUIRE(j["tensors"].size() == 48);
  CHECK(j["tensors"][9]["name"] == "blk.0.ffn_down.weight");
  CHECK(j["tensors"][9]["shape"] == nlohmann::json::array({172, 64}));
  CHECK(j["tensors"][9]["bytes"] == 44032);
  CHECK(j["tensors"][9]["offset"] == 355840);
  CHECK(j["totals"][0]["type"] == "F32");
  CHECK(j["totals"][0]["tensors"] == 48);
  CHECK(j["n_params"] == 292800);
  CHECK(j["tensor_bytes"] == 1171200);

  const auto full = run_llmctl({"inspect", "--json", "--max-array", "0", path});
  REQUIRE(full.code == 0);
  const auto jf = nlohmann::json::parse(full.out);
  REQUIRE(jf["metadata"]["tokenizer.ggml.tokens"].is_array());
  CHECK(jf["metadata"]["tokenizer.ggml.tokens"].size() == 512);
}

TEST_CASE("inspect of a vocab-only file says it has no tensors", "[cli]") {
  const auto r = run_llmctl({"inspect", require_test_file("vocab/ggml-vocab-gpt-2.gguf")});
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "[string x 50000] \"\xC4\xA0 t\", \"\xC4\xA0 a\", \"h e\", ..."));
  CHECK(has(r.out, "GGUF v3, 16 metadata keys, 0 tensors, alignment 32, 1766807 bytes\n"));
  CHECK(has(r.out, "\nno tensors\n"));
}

TEST_CASE("inspect of a bad file gives one error line with the byte offset and exit 1", "[cli]") {
  const std::string original =
      llmctl::test::read_file(require_test_file("models/stories260K.gguf"));
  const std::string dir = llmctl::test::temp_dir();

  const std::string truncated = dir + "/truncated.gguf";
  llmctl::test::write_file(truncated, original.substr(0, 14000));
  auto r = run_llmctl({"inspect", truncated});
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("llmctl: error: " + truncated + ": ", 0) == 0);
  CHECK(has(r.err, "(at byte "));

  const std::string bad_magic = dir + "/magic.gguf";
  llmctl::test::write_file(bad_magic, "GGML" + original.substr(4, 100));
  r = run_llmctl({"inspect", "--json", bad_magic});
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(has(r.err,
            "not a GGUF file: magic is 47 47 4d 4c, expected 47 47 55 46 (\"GGUF\") (at byte 0)"));

  const std::string v1 = dir + "/v1.gguf";
  llmctl::test::write_file(v1, std::string("GGUF\x01\0\0\0", 8) + std::string(16, '\0'));
  r = run_llmctl({"inspect", v1});
  CHECK(r.code == 1);
  CHECK(has(r.err, "GGUF version 1 is not supported (only 2 and 3) (at byte 4)"));
  CHECK(has(r.err, "llmctl: hint: "));

  r = run_llmctl({"inspect", dir + "/missing.gguf"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "cannot open"));
  r = run_llmctl({"inspect", dir});
  CHECK(r.code == 1);
}

TEST_CASE("inspect usage: a missing file is a usage error, help documents the JSON summary",
          "[cli]") {
  CHECK(run_llmctl({"inspect"}).code == 2);
  const auto h = run_llmctl({"inspect", "--help"});
  CHECK(h.code == 0);
  CHECK(has(h.out, "--json"));
  CHECK(has(h.out, "\"head\""));
  CHECK(has(h.out, "--max-array"));
}

// --- inspect --verify -----------------------------------------------------------------
// stories260K rewritten with blk.0.ffn_up.weight as Q8_0 and `poison` applied to the bytes
// of one tensor.
namespace {
std::string rewritten_model(const std::string& out, const std::string& target,
                            const std::function<void(std::vector<uint8_t>&)>& poison) {
  using namespace llmctl;
  const GgufFile f = GgufFile::open(require_test_file("models/stories260K.gguf"));
  GgufBuilder b;
  for (const auto& kv : f.metadata()) b.set(kv.key, kv.value);
  for (const auto& t : f.tensors()) {
    GgmlType type = t.type;
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    if (t.name == "blk.0.ffn_up.weight" && t.type == GgmlType::F32) {
      type = GgmlType::Q8_0;
      std::vector<uint8_t> q(quantized_size(type, t.n_elements()));
      quantize_row(type, reinterpret_cast<const float*>(t.data), q.data(), t.n_elements());
      bytes = std::move(q);
    }
    if (t.name == target) poison(bytes);
    b.add_tensor(t.name, type, t.shape, std::move(bytes));
  }
  const std::string path = test::temp_dir() + "/" + out;
  b.write(path);
  return path;
}
}  // namespace

TEST_CASE("inspect --verify: clean model passes, NaN weight and Inf scale exit 3 naming them",
          "[cli]") {
  const std::string clean = rewritten_model("clean.gguf", "", nullptr);
  auto r = run_llmctl({"inspect", clean, "--verify", "--no-tensors"});
  CHECK(r.code == 0);
  CHECK(has(r.out, "verify: "));
  CHECK(has(r.out, "all finite"));
  CHECK(r.err.empty());

  // F32 [64, 64] blk.2.attn_q.weight: NaN at row 3, column 5.
  const std::string nan_path = rewritten_model("nan.gguf", "blk.2.attn_q.weight", [](auto& b) {
    const float nan = std::nanf("");
    std::memcpy(b.data() + 4 * (3 * 64 + 5), &nan, 4);
  });
  r = run_llmctl({"inspect", nan_path, "--verify", "--no-tensors"});
  CHECK(r.code == 3);
  CHECK(has(r.out, "NOT FINITE"));
  CHECK(has(r.err, "llmctl: error: " + nan_path +
                       ": tensor 'blk.2.attn_q.weight' (F32 [64, 64]): row 3, column 5: value "
                       "is NaN"));
  // Without --verify the file is only parsed: exit 0.
  CHECK(run_llmctl({"inspect", nan_path, "--no-tensors"}).code == 0);

  // Q8_0 blk.0.ffn_up.weight [64, n_ff]: block 1 of row 2 (34 bytes a block, 2 a row) d = +Inf.
  const std::string inf_path = rewritten_model("inf.gguf", "blk.0.ffn_up.weight", [](auto& b) {
    b[34 * (2 * 2 + 1)] = 0x00;
    b[34 * (2 * 2 + 1) + 1] = 0x7c;
  });
  r = run_llmctl({"inspect", inf_path, "--verify", "--json"});
  CHECK(r.code == 3);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["verify"]["ok"] == false);
  CHECK(j["verify"]["fault"]["tensor"] == "blk.0.ffn_up.weight");
  CHECK(j["verify"]["fault"]["row"] == 2);
  CHECK(j["verify"]["fault"]["block"] == 1);
  CHECK(j["verify"]["fault"]["field"] == "d");
  CHECK(has(r.err, "row 2, block 1 (elements 32..63): scale d is +Inf"));
}
