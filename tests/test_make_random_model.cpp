// tools/make_random_model: the tiny shapes (Llama, gpt-oss) run in the engine, and the seed fixes
// every byte.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "io/gguf.h"
#include "quant/dequant.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

// The tool is built beside the tests: BUILD/tests/test_make_random_model and
// BUILD/tools/make_random_model.
std::string tool_path() {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const auto p = self.parent_path().parent_path() / "tools" / "make_random_model";
  if (!std::filesystem::exists(p))
    FAIL("make_random_model is not built (" << p.string() << "); build the target first");
  return p.string();
}

int make(const std::string& vocab, const std::string& seed, const std::string& out,
         const std::string& extra = "", const std::string& shape = "tiny") {
  const std::string cmd =
      fmt::format("'{}' --shape {} --vocab-from '{}' --seed {} {} '{}' 2>/dev/null", tool_path(),
                  shape, vocab, seed, extra, out);
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("make_random_model tiny: deterministic bytes, loads and runs in the engine", "[cli]") {
  const std::string vocab = test::require_test_file("vocab/ggml-vocab-llama-spm.gguf");
  const std::string dir = test::temp_dir();
  REQUIRE(make(vocab, "7", dir + "/a.gguf") == 0);
  REQUIRE(make(vocab, "7", dir + "/b.gguf") == 0);
  REQUIRE(make(vocab, "8", dir + "/c.gguf") == 0);
  const std::string a = test::read_file(dir + "/a.gguf");
  CHECK(a == test::read_file(dir + "/b.gguf"));
  CHECK(a != test::read_file(dir + "/c.gguf"));

  const GgufFile f = GgufFile::open(dir + "/a.gguf");
  const GgufFile vf = GgufFile::open(vocab);
  CHECK(f.get_string_array("tokenizer.ggml.tokens") ==
        vf.get_string_array("tokenizer.ggml.tokens"));
  CHECK(f.get_int_or("llama.embedding_length", 0) == 64);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->shape == std::vector<int64_t>{64, 32000});
  // Weights: mean ~0, std ~0.02, bounded (Irwin-Hall of 4 reaches at most ~3.5 sigma); norms 1.
  std::vector<float> x(static_cast<size_t>(embd->n_elements()));
  dequantize_row(embd->type, embd->data, x.data(), embd->n_elements());
  double s = 0, s2 = 0, mx = 0;
  for (const float v : x) {
    const double e = v;
    s += e;
    s2 += e * e;
    mx = std::max(mx, std::fabs(e));
  }
  const double n = static_cast<double>(x.size());
  CHECK(std::fabs(s / n) < 1e-3);
  CHECK(std::sqrt(s2 / n) == Approx(0.02).epsilon(0.01));
  CHECK(mx < 0.0705);
  const GgufTensorInfo* norm = f.find_tensor("blk.1.ffn_norm.weight");
  REQUIRE(norm != nullptr);
  float one = 0;
  dequantize_row(norm->type, norm->data, &one, 1);
  CHECK(one == 1.0f);

  const auto r =
      test::run_llmctl({"run", "-m", dir + "/a.gguf", "-p", "hi", "-n", "4", "--temp", "0"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("gen_tokens=4") != std::string::npos);

  // F16 variant, and a bad shape.
  REQUIRE(make(vocab, "7", dir + "/h.gguf", "--type f16") == 0);
  CHECK(GgufFile::open(dir + "/h.gguf").find_tensor("blk.0.attn_q.weight")->type == GgmlType::F16);
  CHECK(make(vocab, "7", dir + "/x.gguf", "--shape nope") != 0);
}

// The gpt-oss layout (the gpt-oss-20b-4l benchmark shape's, at test size): the keys and tensors
// the engine's gpt-oss reader takes (it refuses a missing one), and it runs.
TEST_CASE("make_random_model tiny-gpt-oss: a gpt-oss file the engine runs", "[cli]") {
  const std::string vocab = test::require_test_file("vocab/ggml-vocab-llama-spm.gguf");
  const std::string path = test::temp_dir() + "/tiny-gpt-oss.gguf";
  REQUIRE(make(vocab, "3", path, "", "tiny-gpt-oss") == 0);
  const GgufFile f = GgufFile::open(path);
  CHECK(f.get_string("general.architecture") == "gpt-oss");
  CHECK(f.get_int_or("gpt-oss.expert_count", 0) == 4);
  const GgufTensorInfo* gate = f.find_tensor("blk.1.ffn_gate_exps.weight");
  REQUIRE(gate != nullptr);
  CHECK(gate->shape == std::vector<int64_t>{64, 64, 4});
  const GgufTensorInfo* sinks = f.find_tensor("blk.0.attn_sinks.weight");
  REQUIRE(sinks != nullptr);
  CHECK(sinks->type == GgmlType::F32);
  const auto r = test::run_llmctl({"run", "-m", path, "-p", "hi", "-n", "4", "--temp", "0"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("gen_tokens=4") != std::string::npos);
}
