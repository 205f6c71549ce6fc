// quant/quantize_gguf.h: the same bytes and statistics for any chunk size and thread count,
// progress calls, and errors from a chunk that is not the first.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/quantize_gguf.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

std::string run(const GgufFile& in, const QuantPlan& plan, const std::string& path,
                QuantizeRunOptions opt, std::vector<TensorError>* errors = nullptr,
                int* calls = nullptr) {
  const auto e = quantize_gguf(
      in, plan, path, [&](const QuantizeProgress&) { calls != nullptr ? ++*calls : 0; }, opt);
  if (errors != nullptr) *errors = e;
  return test::read_file(path);
}

}  // namespace

TEST_CASE("quantize_gguf: chunk size and thread count change neither bytes nor statistics",
          "[cpu]") {
  const GgufFile in = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  QuantOptions o;
  o.type = GgmlType::Q4_1;
  const QuantPlan plan = plan_quantization(in.tensors(), o);
  const std::string dir = test::temp_dir();
  std::vector<TensorError> base_err;
  int base_calls = 0;
  const std::string base = run(in, plan, dir + "/base.gguf", {}, &base_err, &base_calls);
  CHECK(base_calls == 48);  // one per tensor: every tensor fits one chunk
  for (const auto& [threads, chunk] :
       {std::pair{1, 1000}, std::pair{2, 1000}, std::pair{3, 64}, std::pair{4, 100000}}) {
    INFO("threads " << threads << ", chunk " << chunk);
    std::vector<TensorError> err;
    int calls = 0;
    CHECK(run(in, plan, dir + "/t.gguf", {threads, chunk}, &err, &calls) == base);
    CHECK(calls > (chunk < 100000 ? 48 : 47));
    REQUIRE(err.size() == base_err.size());
    for (size_t i = 0; i < err.size(); ++i) {
      CHECK(err[i].n == base_err[i].n);
      CHECK(err[i].max_abs == base_err[i].max_abs);
      CHECK(err[i].sum_sq_err == Approx(base_err[i].sum_sq_err).epsilon(1e-12));
      CHECK(err[i].sum_sq_x == Approx(base_err[i].sum_sq_x).epsilon(1e-12));
    }
  }
}

TEST_CASE("quantize_gguf: a NaN in a later chunk names its row, leaves no file", "[cpu]") {
  std::vector<float> w(64 * 40, 0.25f);
  w[33 * 64 + 7] = INFINITY;
  std::vector<uint8_t> bytes(w.size() * sizeof(float));
  std::memcpy(bytes.data(), w.data(), bytes.size());
  GgufBuilder b;
  b.add_tensor("blk.0.ffn_up.weight", GgmlType::F32, {64, 40}, bytes);
  const auto image = std::make_shared<const std::vector<uint8_t>>(b.build());
  const GgufFile in = GgufFile::from_memory(image, "mem.gguf");
  QuantOptions o;
  o.type = GgmlType::Q8_0;
  const QuantPlan plan = plan_quantization(in.tensors(), o);
  const std::string path = test::temp_dir() + "/nan.gguf";
  CHECK_THROWS_WITH(quantize_gguf(in, plan, path, nullptr, {2, 64 * 4}),
                    Catch::Contains("tensor 'blk.0.ffn_up.weight' has inf at row 33, column 7"));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(test::temp_file_beside(path));
}
