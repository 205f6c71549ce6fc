// llmctl quantize: real model to Q8_0/Q4_0, golden bytes from gguf-py, determinism, dry run,
// the error report, and hostile inputs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/hf_to_gguf.h"
#include "model/model_loader.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using namespace llmctl;
using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// What the plan must choose, written out independently of quant_plan.cpp.
GgmlType expected_type(const GgufTensorInfo& t, GgmlType q) {
  if (t.shape.size() == 1) return GgmlType::F32;
  return t.shape[0] % 32 == 0 ? q : GgmlType::F16;
}

std::vector<float> decode(const GgufTensorInfo& t) {
  std::vector<float> x(static_cast<size_t>(t.n_elements()));
  dequantize_row(t.type, t.data, x.data(), t.n_elements());
  return x;
}

std::string quantize_to(const std::string& in, const std::string& type, const std::string& name,
                        const std::vector<std::string>& extra = {}) {
  const std::string out = test::temp_dir() + "/" + name;
  std::vector<std::string> args = {"quantize", in, out, "--type", type, "--pure", "--force"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_llmctl(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return out;
}

}  // namespace

TEST_CASE("quantize stories260K to q8_0 and q4_0: types, metadata, fallback warning", "[cli]") {
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const GgufFile in = GgufFile::open(in_path);
  for (const auto& [name, type, ftype] :
       {std::tuple{"q8_0", GgmlType::Q8_0, 7}, std::tuple{"q4_0", GgmlType::Q4_0, 2}}) {
    INFO(name);
    const std::string out_path = test::temp_dir() + "/s_" + name + ".gguf";
    const auto r = run_llmctl({"quantize", in_path, out_path, "--type", name, "--pure", "--force"});
    REQUIRE(r.code == 0);
    CHECK(has(r.err, "tensors: row length 172 is not a multiple"));  // one line for all of them
    CHECK(has(r.err, "(first: 'blk.0.ffn_down.weight')"));
    CHECK(has(r.err, "writing F16 instead"));
    CHECK(has(r.err, "[1/48] token_embd.weight F32 -> "));
    CHECK(has(r.out, "worst 10 tensors by SNR"));
    const GgufFile out = GgufFile::open(out_path);
    REQUIRE(out.tensors().size() == in.tensors().size());
    for (size_t i = 0; i < in.tensors().size(); ++i) {
      INFO(in.tensors()[i].name);
      CHECK(out.tensors()[i].name == in.tensors()[i].name);
      CHECK(out.tensors()[i].shape == in.tensors()[i].shape);
      CHECK(out.tensors()[i].type == expected_type(in.tensors()[i], type));
    }
    CHECK(out.get_int_or("general.file_type", -1) == ftype);
    CHECK(out.get_int_or("general.quantization_version", -1) == 2);
    CHECK(out.alignment() == in.alignment());
    for (const GgufKV& kv : in.metadata()) {
      INFO(kv.key);
      REQUIRE(out.find(kv.key) != nullptr);
      CHECK(out.find(kv.key)->type == kv.value.type);
    }
    CHECK(out.get_string_array("tokenizer.ggml.tokens") ==
          in.get_string_array("tokenizer.ggml.tokens"));
    // The written bytes of a tensor equal the library quantizer run on the input by itself.
    const GgufTensorInfo* src = in.find_tensor("blk.2.attn_q.weight");
    const GgufTensorInfo* dst = out.find_tensor("blk.2.attn_q.weight");
    std::vector<uint8_t> want(quantized_size(type, src->n_elements()));
    quantize_row(type, decode(*src).data(), want.data(), src->n_elements());
    REQUIRE(dst->n_bytes == want.size());
    CHECK(std::equal(want.begin(), want.end(), dst->data));
    // The F16 fallback holds the input rounded to fp16.
    const GgufTensorInfo* down = out.find_tensor("blk.3.ffn_down.weight");
    std::vector<uint8_t> f16(quantized_size(GgmlType::F16, down->n_elements()));
    quantize_row(GgmlType::F16, decode(*in.find_tensor("blk.3.ffn_down.weight")).data(), f16.data(),
                 down->n_elements());
    CHECK(std::equal(f16.begin(), f16.end(), down->data));
  }
}

TEST_CASE("quantize writes the bytes gguf-py writes (golden files)", "[cli][golden]") {
  const std::string in = test::fixture_path("gguf_py_input.gguf");
  for (const std::string type : {"q8_0", "q4_0"}) {
    INFO(type);
    const GgufFile want = GgufFile::open(test::fixture_path("gguf_py_" + type + ".gguf"));
    const GgufFile got = GgufFile::open(quantize_to(in, type, "py_" + type + ".gguf"));
    REQUIRE(got.tensors().size() == want.tensors().size());
    for (size_t i = 0; i < want.tensors().size(); ++i) {
      const GgufTensorInfo& w = want.tensors()[i];
      const GgufTensorInfo& g = got.tensors()[i];
      INFO(w.name);
      CHECK(g.name == w.name);
      CHECK(g.type == w.type);
      CHECK(g.shape == w.shape);
      REQUIRE(g.n_bytes == w.n_bytes);
      CHECK(std::equal(w.data, w.data + w.n_bytes, g.data));
    }
    CHECK(got.get_int_or("general.file_type", -1) == want.get_int_or("general.file_type", -2));
  }
}

TEST_CASE("quantizing the same input twice gives identical files", "[cli]") {
  const std::string in = require_test_file("models/stories260K.gguf");
  const std::string a = quantize_to(in, "q4_0", "twice_a.gguf");
  const std::string b = quantize_to(in, "q4_0", "twice_b.gguf");
  CHECK(std::system(("cmp -s '" + a + "' '" + b + "'").c_str()) == 0);
  CHECK(test::read_file(a) == test::read_file(b));
}

TEST_CASE("quantize a quantized file: same type copies the bytes, another type re-encodes",
          "[cli]") {
  const std::string in = require_test_file("models/stories260K.gguf");
  const std::string q4 = quantize_to(in, "q4_0", "q4.gguf");
  const GgufFile a = GgufFile::open(q4);
  const GgufFile b = GgufFile::open(quantize_to(q4, "q4_0", "q4_again.gguf"));
  const GgufFile c =
      GgufFile::open(quantize_to(q4, "q8_0", "q4_to_q8.gguf", {"--allow-requantize"}));
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensorInfo& t = a.tensors()[i];
    INFO(t.name);
    CHECK(b.tensors()[i].type == t.type);
    CHECK(std::equal(t.data, t.data + t.n_bytes, b.tensors()[i].data));
    if (t.type != GgmlType::Q4_0) continue;
    CHECK(c.tensors()[i].type == GgmlType::Q8_0);
    std::vector<uint8_t> want(quantized_size(GgmlType::Q8_0, t.n_elements()));
    quantize_row(GgmlType::Q8_0, decode(t).data(), want.data(), t.n_elements());
    CHECK(std::equal(want.begin(), want.end(), c.tensors()[i].data));
  }
}

TEST_CASE("quantize a Hugging Face directory: converted in F32, then planned as a GGUF", "[cli]") {
  const std::string hf = test::fixture_path("hf_tiny_llama");
  const GgufFile g = GgufFile::open(quantize_to(hf, "f32", "hf_f32.gguf"));
  CHECK(g.get_string("general.architecture") == "llama");
  CHECK(g.get_int_or("general.file_type", -1) == 0);
  CHECK(g.get_string_array("tokenizer.ggml.tokens").size() == 300);
  // The F32 file holds exactly what hf_to_gguf makes of the directory.
  const GgufBuilder want =
      hf_to_gguf(load_hf_model(hf), HfToGgufOptions{GgmlType::F32, "", nullptr});
  REQUIRE(g.tensors().size() == want.tensors().size());
  for (size_t i = 0; i < want.tensors().size(); ++i) {
    const auto& w = want.tensors()[i];
    INFO(w.name);
    CHECK(g.tensors()[i].name == w.name);
    CHECK(g.tensors()[i].type == GgmlType::F32);
    REQUIRE(g.tensors()[i].n_bytes == w.bytes.size());
    CHECK(std::equal(w.bytes.begin(), w.bytes.end(), g.tensors()[i].data));
  }
  // Quantized straight from the directory: rows of 172 fall back, 1-D tensors stay F32.
  const std::string q8 = test::temp_dir() + "/hf_q8.gguf";
  const auto r = run_llmctl({"quantize", hf, q8, "--type", "q8_0"});
  REQUIRE(r.code == 0);
  CHECK(has(r.err, "row length 172 is not a multiple of the Q8_0 block size 32; writing F16 instead "
                   "(first: 'blk.0.ffn_down.weight')"));
  const GgufFile q = GgufFile::open(q8);
  CHECK(q.find_tensor("blk.0.attn_q.weight")->type == GgmlType::Q8_0);
  CHECK(q.find_tensor("blk.0.ffn_down.weight")->type == GgmlType::F16);
  CHECK(q.find_tensor("rope_freqs.weight")->type == GgmlType::F32);
  CHECK(q.get_int_or("general.file_type", -1) == 7);
}

TEST_CASE("quantize --dry-run writes nothing and predicts the tensor bytes", "[cli]") {
  const std::string in = require_test_file("models/stories260K.gguf");
  const std::string out = test::temp_dir() + "/dry.gguf";
  const auto r = run_llmctl({"quantize", in, out, "--type", "q8_0", "--dry-run", "--json"});
  REQUIRE(r.code == 0);
  CHECK_FALSE(std::filesystem::exists(out));
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["dry_run"] == true);
  const auto text = run_llmctl({"quantize", in, out, "--type", "q8_0", "--dry-run"});
  CHECK(has(text.out, "Q8_0 "));
  CHECK(has(text.out, fmt::format("tensor data: {} bytes", j["out_tensor_bytes"].get<uint64_t>())));
  const GgufFile real = GgufFile::open(quantize_to(in, "q8_0", "real.gguf"));
  uint64_t bytes = 0;
  for (const auto& t : real.tensors()) bytes += t.n_bytes;
  CHECK(j["out_tensor_bytes"] == bytes);
  CHECK(j["src_tensor_bytes"] == 1171200);
}

TEST_CASE("quantize --json reports per-tensor errors computed from the written bytes", "[cli]") {
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const std::string out_path = test::temp_dir() + "/json.gguf";
  const auto r = run_llmctl({"quantize", in_path, out_path, "--type", "q4_0", "--pure", "--json", "--report",
                             "3", "--keep-embedding", "f16", "--tensor-type", "attn_v=q8_0"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["type"] == "Q4_0");
  CHECK(j["file_type"] == 2);
  CHECK(j["worst"].size() == 3);
  CHECK(j["warnings"].size() == 5);
  const GgufFile in = GgufFile::open(in_path);
  const GgufFile out = GgufFile::open(out_path);
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    INFO(name);
    if (name == "token_embd.weight") CHECK(t["chosen"] == "F16");
    if (has(name, "attn_v")) CHECK(t["chosen"] == "Q8_0");
    if (t["chosen"] == "F32") CHECK(t["snr_db"].is_null());  // nothing lost
    if (name != "blk.1.attn_q.weight") continue;
    const std::vector<float> x = decode(*in.find_tensor(name));
    const std::vector<float> y = decode(*out.find_tensor(name));
    double sx = 0, se = 0, mx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double xi = x[i];
      const double d = xi - static_cast<double>(y[i]);
      sx += xi * xi;
      se += d * d;
      mx = std::max(mx, std::fabs(d));
    }
    CHECK(t["snr_db"].get<double>() == Approx(10 * std::log10(sx / se)).epsilon(1e-9));
    CHECK(t["rmse"].get<double>() ==
          Approx(std::sqrt(se / static_cast<double>(x.size()))).epsilon(1e-9));
    CHECK(t["max_abs"].get<double>() == Approx(mx).epsilon(1e-9));
  }
  // The worst tensors are the ones with the lowest SNR.
  double lowest = 1e300;
  for (const auto& t : j["tensors"])
    if (t.contains("snr_db") && !t["snr_db"].is_null())
      lowest = std::min(lowest, t["snr_db"].get<double>());
  for (const auto& t : j["tensors"])
    if (t["name"] == j["worst"][0]) CHECK(t["snr_db"].get<double>() == lowest);
}

TEST_CASE("quantize refuses hostile input with a clear message", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir();
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  test::write_file(dir + "/not.gguf", "this is not a gguf file at all");
  test::write_file(dir + "/exists.gguf", "old");
  std::filesystem::create_directories(dir + "/hf_dir");
  const std::vector<Case> cases = {
      {{"quantize", dir + "/missing.gguf", dir + "/o.gguf", "--type", "q8_0"},
       1,
       "no such file or directory"},
      {{"quantize", dir + "/not.gguf", dir + "/o.gguf", "--type", "q8_0"}, 1, "not.gguf"},
      {{"quantize", model, model, "--type", "q8_0", "--force"}, 1, "is the input file"},
      {{"quantize", model, dir + "/exists.gguf", "--type", "q8_0"}, 1, "--force"},
      {{"quantize", dir + "/hf_dir", dir + "/o.gguf", "--type", "q8_0"}, 1, "no config.json"},
      {{"quantize", model, dir + "/o.gguf", "--type", "q7"}, 2, "unknown type 'q7'"},
      {{"quantize", model, dir + "/o.gguf", "--type", "q8_0", "--tensor-type", "a(b=f16"},
       2,
       "invalid regular expression"},
      {{"quantize", model, dir + "/o.gguf"}, 2, "--type"},
  };
  for (const Case& c : cases) {
    INFO(fmt::format("{}", fmt::join(c.args, " ")));
    const auto r = run_llmctl(c.args);
    INFO(r.err);
    CHECK(r.code == c.code);
    CHECK(has(r.err, c.message));
    CHECK_FALSE(std::filesystem::exists(dir + "/o.gguf"));
  }
  CHECK(test::read_file(dir + "/exists.gguf") == "old");
  CHECK(test::read_file(model).size() == 1185376);
}

TEST_CASE("quantize names the tensor and row of a NaN and leaves no file", "[cli]") {
  const std::string dir = test::temp_dir();
  std::vector<float> w(64 * 4, 0.5f);
  w[2 * 64 + 5] = std::nanf("");
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  GgufBuilder b;
  b.set("general.architecture", llmctl::gguf_value::string("llama"));
  b.add_tensor("blk.0.ok.weight", GgmlType::F32, {64, 4}, bytes);
  w[2 * 64 + 5] = 0.0f;
  b.add_tensor("blk.0.attn_k.weight", GgmlType::F32, {64, 4}, bytes);
  b.write(dir + "/nan.gguf");
  const auto r = run_llmctl({"quantize", dir + "/nan.gguf", dir + "/o.gguf", "--type", "q8_0"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "tensor 'blk.0.ok.weight' has nan at row 2, column 5"));
  CHECK_FALSE(std::filesystem::exists(dir + "/o.gguf"));
  CHECK_FALSE(llmctl::test::temp_file_beside(dir + "/o.gguf"));
}

TEST_CASE("quantize --type Q4_K_M: the mix rules of llama.cpp; Q2_K and Q3_K are written", "[cli]") {
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir();
  // output.weight gets the Q6_K rule (rows of 64 are no whole super-block: Q8_0); the other
  // matrices, the untied embedding too, want Q4_K and fall back to Q5_0 (rows of 64) or F16
  // (rows of 172).
  auto r = run_llmctl({"quantize", in_path, dir + "/m.gguf", "--type", "Q4_K_M", "--dry-run",
                       "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["mix"] == "Q4_K_M");
  CHECK(j["file_type"] == 15);
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    INFO(name);
    if (name == "output.weight") CHECK(t["chosen"] == "Q8_0");
    if (name == "token_embd.weight" || has(name, "attn_q.weight")) CHECK(t["chosen"] == "Q5_0");
  }
  // --pure: the output is Q4_K's fallback like every other matrix
  r = run_llmctl({"quantize", in_path, dir + "/m.gguf", "--type", "q4_k_m", "--pure", "--dry-run",
                  "--json"});
  REQUIRE(r.code == 0);
  for (const auto& t : nlohmann::json::parse(r.out)["tensors"])
    if (t["name"] == "output.weight") CHECK(t["chosen"] == "Q5_0");
  // Q2_K is written (llama.cpp's encoder, quant/quantize_k.cpp): a file of 256-long rows.
  // (stories260K's rows of 64 fall back to Q4_0.)
  GgufBuilder b;
  b.set("general.architecture", llmctl::gguf_value::string("llama"));
  b.add_tensor("blk.0.attn_q.weight", GgmlType::F32, {256, 4}, std::vector<uint8_t>(256 * 4 * 4));
  b.write(dir + "/wide.gguf");
  r = run_llmctl({"quantize", dir + "/wide.gguf", dir + "/q2.gguf", "--type", "Q2_K"});
  INFO(r.err);
  CHECK(r.code == 0);
  REQUIRE(std::filesystem::exists(dir + "/q2.gguf"));
  CHECK(GgufFile::open(dir + "/q2.gguf").tensors().at(0).type == GgmlType::Q2_K);
  r = run_llmctl({"quantize", dir + "/wide.gguf", dir + "/q2.gguf", "--type", "Q2_K", "--dry-run",
                  "--json"});
  CHECK(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["tensors"][0]["chosen"] == "Q2_K");
  // stories260K under Q3_K_M: every Q3_K/Q4_K/Q5_K wish falls back to a written type
  r = run_llmctl({"quantize", in_path, dir + "/q3.gguf", "--type", "q3_k"});
  CHECK(r.code == 0);
  r = run_llmctl({"quantize", in_path, dir + "/x.gguf", "--type", "iq2_xxs"});
  CHECK(r.code == 2);
  CHECK(has(r.err, "Q4_K_M"));
}

TEST_CASE("quantize refuses to requantize a quantized input without --allow-requantize", "[cli]") {
  const std::string in_path = require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir();
  const std::string q8 = quantize_to(in_path, "q8_0", "rq_q8.gguf");
  auto r = run_llmctl({"quantize", q8, dir + "/rq_q4.gguf", "--type", "q4_0", "--pure"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "the input is already quantized"));
  CHECK(has(r.err, "Q8_0 -> Q4_0"));
  CHECK(has(r.err, "--allow-requantize"));
  CHECK_FALSE(std::filesystem::exists(dir + "/rq_q4.gguf"));
  r = run_llmctl(
      {"quantize", q8, dir + "/rq_q4.gguf", "--type", "q4_0", "--pure", "--allow-requantize"});
  CHECK(r.code == 0);
  CHECK(std::filesystem::exists(dir + "/rq_q4.gguf"));
  // the same type again copies every quantized tensor's bytes: nothing is requantized
  r = run_llmctl({"quantize", q8, dir + "/rq_same.gguf", "--type", "q8_0", "--pure"});
  CHECK(r.code == 0);
}
