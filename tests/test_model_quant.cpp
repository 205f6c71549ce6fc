// The forward pass on quantized weights: stories260K rewritten with its matrices in F16, BF16,
// Q8_0 and Q4_0 (GgufBuilder), compared with the F32 original. Quantization changes the
// function, so the bounds are loose and per type; they catch a wrong block layout or row
// stride (which gives garbage, |dlogit| of several units), not rounding.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

// The library's reference quantizer (byte-identical to ggml's, tested in test_quantize.cpp).
std::vector<uint8_t> convert(const std::vector<float>& x, GgmlType type) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(quantized_size(type, n));
  quantize_row(type, x.data(), out.data(), n);
  return out;
}

// Every matrix whose rows are whole blocks becomes `type`; others stay F32 (ffn_down's rows
// of 172 are not whole blocks of 32, as llama.cpp's quantizer would also find). With
// `back_to_f32` the converted matrices are dequantized again and stored as F32: the same
// function computed by the F32 path.
GgufBuilder requantize(const GgufFile& f, GgmlType type, bool back_to_f32 = false) {
  const GgufBuilder src = GgufBuilder::from_file(f);
  GgufBuilder b;
  for (const GgufKV& kv : src.metadata()) b.set(kv.key, kv.value);
  const uint32_t block = ggml_traits(type).block_size;
  for (const GgufBuilder::Tensor& t : src.tensors()) {
    if (t.shape.size() != 2 || t.shape[0] % block != 0) {
      b.add_tensor(t.name, t.type, t.shape, t.bytes);
      continue;
    }
    std::vector<float> x(t.bytes.size() / 4);
    std::memcpy(x.data(), t.bytes.data(), t.bytes.size());
    const std::vector<uint8_t> q = convert(x, type);
    if (!back_to_f32) {
      b.add_tensor(t.name, type, t.shape, q);
      continue;
    }
    dequantize_row(type, q.data(), x.data(), static_cast<int64_t>(x.size()));
    std::vector<uint8_t> bytes(x.size() * 4);
    std::memcpy(bytes.data(), x.data(), bytes.size());
    b.add_tensor(t.name, GgmlType::F32, t.shape, bytes);
  }
  return b;
}

struct Run {
  std::vector<std::vector<float>> logits;  // per step
  std::vector<int32_t> greedy;             // argmax after each step
};

GgufFile open_built(const GgufBuilder& b) {
  return GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(b.build()), "q.gguf");
}

double max_abs_diff(const Run& a, const Run& b) {
  double m = 0.0;
  for (size_t p = 0; p < a.logits.size(); ++p)
    for (size_t i = 0; i < a.logits[p].size(); ++i)
      m = std::max(m, static_cast<double>(std::abs(a.logits[p][i] - b.logits[p][i])));
  return m;
}

Run run(const GgufFile& f, const std::vector<int32_t>& prompt, size_t n_gen) {
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend backend;
  Forward fwd(c, w, backend, 64);
  Run r;
  auto step = [&](int32_t tok) {
    r.logits.push_back(fwd.step(tok));
    const auto& l = r.logits.back();
    r.greedy.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
  };
  for (int32_t t : prompt) step(t);
  for (size_t i = 0; i < n_gen; ++i) step(r.greedy.back());
  return r;
}

}  // namespace

TEST_CASE("stories260K with F16/BF16/Q8_0/Q4_0 matrices: exact path, bounded drift", "[cpu]") {
  const GgufFile f32 = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const Run ref = run(f32, prompt, 0);

  struct Case {
    GgmlType type;
    double max_drift;  // bound on max |dlogit| vs the F32 model over the 5 prompt positions
  };
  // Measured drift (scalar CPU, these quantizers; logits up to ~19): F16 0.011, BF16 0.067,
  // Q8_0 0.21, Q4_0 4.5 (a 260K-parameter model has little redundancy). Bounds are ~2.5x:
  // they say "close", the exact check below says "right".
  const Case cases[] = {
      {GgmlType::F16, 0.03}, {GgmlType::BF16, 0.2}, {GgmlType::Q8_0, 0.5}, {GgmlType::Q4_0, 10.0}};
  for (const Case& cs : cases) {
    INFO(ggml_type_name(cs.type));
    const GgufFile q = open_built(requantize(f32, cs.type));
    REQUIRE(q.find_tensor("blk.2.attn_q.weight")->type == cs.type);
    REQUIRE(q.find_tensor("token_embd.weight")->type == cs.type);  // get_rows on it too
    const Run got = run(q, prompt, 0);

    // Exact path: the quantized model computes the same logits as the F32 model holding the
    // dequantized weights (the CPU backend dequantizes a row, then the same f32 dot product).
    const Run same = run(open_built(requantize(f32, cs.type, /*back_to_f32=*/true)), prompt, 0);
    CHECK(max_abs_diff(got, same) == 0.0);

    const double drift = max_abs_diff(got, ref);
    INFO("max |dlogit| vs F32 = " << drift);
    CHECK(drift < cs.max_drift);
    // The prediction after the prompt survives 8-bit and 16-bit weights.
    if (cs.type != GgmlType::Q4_0) CHECK(got.greedy.back() == ref.greedy.back());
    // Greedy decoding runs to the end with every type.
    CHECK(run(q, prompt, 16).greedy.size() == prompt.size() + 16);
  }
}
