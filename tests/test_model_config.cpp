// ModelConfig and weight binding on small synthetic GGUF files (GgufBuilder): the values read,
// and the error text for broken metadata and tensors. Also checks the qwen2 path (neox rope,
// q/k/v biases) against the llama path by an exact equivalence, see the last test.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/fp16.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "support/random_data.h"

using namespace llmctl;
namespace gv = llmctl::gguf_value;

namespace {

// A tiny random llama: n_embd 32, 4 heads of 8 (2 kv heads), n_ff 64, 2 layers, 16 tokens.
struct Tiny {
  int64_t n_embd = 32, n_heads = 4, n_kv_heads = 2, n_ff = 64, n_layers = 2, n_vocab = 16;
  int64_t head_dim() const { return n_embd / n_heads; }
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Tensor hook: may rewrite (name, type, shape, bytes) or drop a tensor by returning false.
using Edit = std::function<bool(GgufBuilder::Tensor&)>;

GgufBuilder tiny_llama(const Tiny& t = {}, const Edit& edit = nullptr, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  GgufBuilder b;
  b.set("general.architecture", gv::string("llama"));
  b.set("llama.embedding_length", gv::u32(static_cast<uint32_t>(t.n_embd)));
  b.set("llama.block_count", gv::u32(static_cast<uint32_t>(t.n_layers)));
  b.set("llama.attention.head_count", gv::u32(static_cast<uint32_t>(t.n_heads)));
  b.set("llama.attention.head_count_kv", gv::u32(static_cast<uint32_t>(t.n_kv_heads)));
  b.set("llama.feed_forward_length", gv::u32(static_cast<uint32_t>(t.n_ff)));
  b.set("llama.context_length", gv::u32(256));
  b.set("llama.attention.layer_norm_rms_epsilon", gv::f32(1e-5f));
  const int64_t q_dim = t.n_heads * t.head_dim(), kv_dim = t.n_kv_heads * t.head_dim();
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float mean) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v = test::random_floats(rng, static_cast<size_t>(n), scale);
    for (float& x : v) x += mean;
    GgufBuilder::Tensor tensor{name, GgmlType::F32, std::move(shape), f32_bytes(v)};
    if (edit && !edit(tensor)) return;
    b.add_tensor(tensor.name, tensor.type, tensor.shape, tensor.bytes);
  };
  add("token_embd.weight", {t.n_embd, t.n_vocab}, 1.0f, 0.0f);
  add("output_norm.weight", {t.n_embd}, 0.1f, 1.0f);
  add("output.weight", {t.n_embd, t.n_vocab}, 0.2f, 0.0f);
  for (int64_t il = 0; il < t.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {t.n_embd}, 0.1f, 1.0f);
    add(p + "attn_q.weight", {t.n_embd, q_dim}, 0.3f, 0.0f);
    add(p + "attn_k.weight", {t.n_embd, kv_dim}, 0.3f, 0.0f);
    add(p + "attn_v.weight", {t.n_embd, kv_dim}, 0.2f, 0.0f);
    add(p + "attn_output.weight", {q_dim, t.n_embd}, 0.2f, 0.0f);
    add(p + "ffn_norm.weight", {t.n_embd}, 0.1f, 1.0f);
    add(p + "ffn_gate.weight", {t.n_embd, t.n_ff}, 0.2f, 0.0f);
    add(p + "ffn_up.weight", {t.n_embd, t.n_ff}, 0.2f, 0.0f);
    add(p + "ffn_down.weight", {t.n_ff, t.n_embd}, 0.2f, 0.0f);
  }
  return b;
}

GgufFile open_built(const GgufBuilder& b, const std::string& name = "tiny.gguf") {
  return GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(b.build()), name);
}

std::string config_error(const GgufBuilder& b) {
  try {
    config_from_gguf(open_built(b));
  } catch (const FileError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string bind_error(const GgufBuilder& b) {
  try {
    const GgufFile f = open_built(b);
    bind_weights(f, config_from_gguf(f));
  } catch (const FileError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("config: values and defaults from a synthetic llama", "[cpu]") {
  GgufBuilder b = tiny_llama();
  ModelConfig c = config_from_gguf(open_built(b));
  CHECK(c.n_vocab == 16);
  CHECK(c.head_dim == 8);
  CHECK(c.n_rot == 8);                 // default: head_dim
  CHECK(c.rope_freq_base == 10000.0);  // default
  CHECK(c.rope_freq_scale == 1.0);

  b.set("llama.attention.key_length", gv::u32(16));
  b.set("llama.rope.dimension_count", gv::u32(8));
  b.set("llama.rope.freq_base", gv::f32(500000.0f));
  b.set("llama.rope.scaling.type", gv::string("linear"));
  b.set("llama.rope.scaling.factor", gv::f32(4.0f));
  c = config_from_gguf(open_built(b));
  CHECK(c.head_dim == 16);  // explicit key_length wins over n_embd / n_heads
  CHECK(c.q_dim() == 64);
  CHECK(c.n_rot == 8);
  CHECK(c.rope_freq_base == 500000.0);
  CHECK(c.rope_scaling_type == "linear");
  CHECK(c.rope_scaling_factor == 4.0);
  CHECK(c.rope_freq_scale == 0.25);
}

TEST_CASE("config: missing and invalid metadata are FileErrors naming the key", "[cpu]") {
  {
    GgufBuilder b;
    b.set("general.architecture", gv::string("gpt2"));
    CHECK(config_error(b) ==
          "tiny.gguf: architecture 'gpt2' is not supported (supported: llama, "
          "qwen2, qwen3, qwen2moe, qwen3moe, olmo2, gemma2, gemma3, mistral3, granite, phi3, "
          "gpt-oss)");
  }
  {
    GgufBuilder b = tiny_llama();
    GgufBuilder c;
    for (const GgufKV& kv : b.metadata())
      if (kv.key != "llama.block_count") c.set(kv.key, kv.value);
    CHECK(config_error(c) == "tiny.gguf: missing metadata key 'llama.block_count'");
  }
  {
    GgufBuilder b = tiny_llama();
    b.set("llama.attention.head_count_kv", gv::u32(3));
    CHECK(config_error(b) ==
          "tiny.gguf: llama.attention.head_count_kv = 3 does not divide "
          "head_count = 4");
  }
  {
    GgufBuilder b = tiny_llama();
    b.set("llama.attention.head_count", gv::u32(5));
    b.set("llama.attention.head_count_kv", gv::u32(5));
    CHECK(config_error(b) ==
          "tiny.gguf: llama.attention.head_count = 5 does not divide "
          "embedding_length = 32");
  }
  {
    GgufBuilder b = tiny_llama();
    b.set("llama.embedding_length", gv::u32(0));
    CHECK(config_error(b) ==
          "tiny.gguf: metadata 'llama.embedding_length' = 0 is outside [1, 16777216]");
  }
  {
    GgufBuilder b = tiny_llama();
    b.set("llama.rope.scaling.type", gv::string("longrope"));
    CHECK(config_error(b) ==
          "tiny.gguf: llama.rope.scaling.type 'longrope' is not supported "
          "(supported: none, linear, yarn)");
  }
  {
    // Llama 3.1 per-pair rope divisors: bound when their shape is (n_rot / 2,).
    GgufBuilder b = tiny_llama();
    const int64_t pairs = config_from_gguf(open_built(b)).n_rot / 2;
    b.add_tensor("rope_freqs.weight", GgmlType::F32, {pairs},
                 f32_bytes(std::vector<float>(static_cast<size_t>(pairs), 1.0f)));
    CHECK(bind_error(b) == "(no error)");
    GgufBuilder zero = tiny_llama();
    zero.add_tensor("rope_freqs.weight", GgmlType::F32, {pairs},
                    std::vector<uint8_t>(static_cast<size_t>(pairs) * 4, 0));
    CHECK(bind_error(zero) ==
          "tiny.gguf: tensor 'rope_freqs.weight': element 0 is 0, expected a "
          "positive finite divisor");
    GgufBuilder wrong = tiny_llama();
    wrong.add_tensor("rope_freqs.weight", GgmlType::F32, {pairs + 1},
                     std::vector<uint8_t>(static_cast<size_t>(pairs + 1) * 4, 0));
    CHECK(bind_error(wrong) == fmt::format("tiny.gguf: tensor 'rope_freqs.weight': expected [{}], "
                                           "got [{}]",
                                           pairs, pairs + 1));
  }
  {
    GgufBuilder b = tiny_llama();
    b.set("llama.block_count", gv::string("five"));  // wrong type: the reader's error
    CHECK_THROWS_AS(config_from_gguf(open_built(b)), FileError);
  }
}

TEST_CASE("weights: wrong shape, missing tensor, wrong dtype name the tensor", "[cpu]") {
  CHECK(bind_error(tiny_llama()) == "(no error)");

  const auto wrong_shape = [](GgufBuilder::Tensor& t) {
    if (t.name == "blk.1.attn_q.weight") {
      t.shape = {32, 16};
      t.bytes.resize(32 * 16 * 4);
    }
    return true;
  };
  CHECK(bind_error(tiny_llama({}, wrong_shape)) ==
        "tiny.gguf: tensor 'blk.1.attn_q.weight': expected [32, 32], got [32, 16]");

  const auto missing = [](GgufBuilder::Tensor& t) { return t.name != "blk.0.ffn_up.weight"; };
  CHECK(bind_error(tiny_llama({}, missing)) ==
        "tiny.gguf: missing tensor 'blk.0.ffn_up.weight' (expected [32, 64])");

  const auto f16_norm = [](GgufBuilder::Tensor& t) {
    if (t.name == "blk.1.ffn_norm.weight") {
      t.type = GgmlType::F16;
      t.bytes.resize(t.bytes.size() / 2);
    }
    return true;
  };
  CHECK(bind_error(tiny_llama({}, f16_norm)) ==
        "tiny.gguf: tensor 'blk.1.ffn_norm.weight': expected F32 [32], got F16 [32]");

  const auto q8_1_matrix = [](GgufBuilder::Tensor& t) {
    if (t.name == "blk.0.attn_v.weight") {
      t.type = GgmlType::Q8_1;  // 36 bytes per block of 32; a type the engine does not run
      t.bytes.assign(16 * 36, 0);
    }
    return true;
  };
  CHECK(bind_error(tiny_llama({}, q8_1_matrix)) ==
        "tiny.gguf: tensor 'blk.0.attn_v.weight': type Q8_1 is not supported (supported: F32, "
        "F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
        "IQ4_XS, MXFP4)");

  const auto i32_matrix = [](GgufBuilder::Tensor& t) {
    if (t.name == "blk.0.ffn_down.weight") t.type = GgmlType::I32;  // same byte count as F32
    return true;
  };
  CHECK(bind_error(tiny_llama({}, i32_matrix)) ==
        "tiny.gguf: tensor 'blk.0.ffn_down.weight': type I32 is not supported (supported: F32, "
        "F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
        "IQ4_XS, MXFP4)");
}

TEST_CASE("weights: absent output.weight ties the output to token_embd", "[cpu]") {
  const auto no_output = [](GgufBuilder::Tensor& t) { return t.name != "output.weight"; };
  const GgufFile f = open_built(tiny_llama({}, no_output));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  CHECK(w.output_tied);
  CHECK(w.output.data == w.token_embd.data);
  cpu::CpuBackend backend;
  Forward fwd(c, w, backend, 4);
  CHECK(fwd.step(3).size() == 16);
}

namespace {

// Within each head, rows in interleaved order (2i, 2i+1) -> halves order (i, i + head_dim/2):
// the inverse of the Q/K permutation llama.cpp's converter applies to Hugging Face weights.
std::vector<uint8_t> interleaved_to_halves(const std::vector<uint8_t>& bytes, int64_t n_cols,
                                           int64_t n_rows, int64_t head_dim) {
  std::vector<uint8_t> out(bytes.size());
  const size_t row_bytes = static_cast<size_t>(n_cols) * sizeof(float);
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t head = r / head_dim, j = r % head_dim;
    const int64_t src = head * head_dim + (j < head_dim / 2 ? 2 * j : 2 * (j - head_dim / 2) + 1);
    std::memcpy(out.data() + static_cast<size_t>(r) * row_bytes,
                bytes.data() + static_cast<size_t>(src) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace

// A llama model with normal (interleaved) rope and the same model with Q/K rows permuted to
// the halves layout, run as qwen2 (neox rope, zero q/k/v biases), compute the same function:
// q.k is invariant under the same permutation of both. So equal logits check the neox pairing
// and the qwen2 key names and bias binding.
TEST_CASE("qwen2 (neox rope, biases) equals llama with permuted Q/K", "[cpu]") {
  const Tiny t;
  const GgufBuilder llama = tiny_llama(t);
  GgufBuilder qwen;
  for (const GgufKV& kv : llama.metadata()) {
    std::string key = kv.key;
    if (key.rfind("llama.", 0) == 0) key = "qwen2." + key.substr(6);
    qwen.set(key, kv.key == "general.architecture" ? gv::string("qwen2") : kv.value);
  }
  for (const GgufBuilder::Tensor& tensor : llama.tensors()) {
    const bool is_qk = tensor.name.find("attn_q.weight") != std::string::npos ||
                       tensor.name.find("attn_k.weight") != std::string::npos;
    qwen.add_tensor(
        tensor.name, tensor.type, tensor.shape,
        is_qk ? interleaved_to_halves(tensor.bytes, tensor.shape[0], tensor.shape[1], t.head_dim())
              : tensor.bytes);
    if (tensor.name.find("attn_q.weight") != std::string::npos ||
        tensor.name.find("attn_k.weight") != std::string::npos ||
        tensor.name.find("attn_v.weight") != std::string::npos) {
      std::string bias = tensor.name.substr(0, tensor.name.size() - 6) + "bias";
      qwen.add_tensor(bias, GgmlType::F32, {tensor.shape[1]},
                      std::vector<uint8_t>(static_cast<size_t>(tensor.shape[1]) * 4, 0));
    }
  }
  const GgufFile lf = open_built(llama, "llama.gguf");
  const GgufFile qf = open_built(qwen, "qwen2.gguf");
  const ModelConfig lc = config_from_gguf(lf);
  const ModelConfig qc = config_from_gguf(qf);
  CHECK(qc.rope_type == RopeType::Neox);
  CHECK(qc.has_qkv_bias);
  const ModelWeights lw = bind_weights(lf, lc);
  const ModelWeights qw = bind_weights(qf, qc);
  CHECK(qw.layers[1].bk.present());
  CHECK(qw.layers[1].bk.n_cols == 16);

  cpu::CpuBackend backend;
  Forward lfwd(lc, lw, backend, 8);
  Forward qfwd(qc, qw, backend, 8);
  double max_diff = 0.0, max_abs = 0.0;
  for (int32_t token : {1, 5, 9, 2, 15, 7}) {
    const std::vector<float> a = lfwd.step(token);
    const std::vector<float>& b = qfwd.step(token);
    for (size_t i = 0; i < a.size(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(a[i] - b[i])));
      max_abs = std::max(max_abs, static_cast<double>(std::abs(a[i])));
    }
  }
  INFO("max |delta| " << max_diff << " on logits up to " << max_abs);
  CHECK(max_abs > 0.1);
  CHECK(max_diff < 1e-5);

  // A qwen2 file without its biases is refused.
  GgufBuilder no_bias;
  for (const GgufKV& kv : qwen.metadata()) no_bias.set(kv.key, kv.value);
  for (const GgufBuilder::Tensor& tensor : qwen.tensors())
    if (tensor.name != "blk.1.attn_v.bias")
      no_bias.add_tensor(tensor.name, tensor.type, tensor.shape, tensor.bytes);
  CHECK(bind_error(no_bias) == "tiny.gguf: missing tensor 'blk.1.attn_v.bias' (expected [16])");
}

TEST_CASE("forward: bad token ids and a full context are errors, reset starts over", "[cpu]") {
  const GgufFile f = open_built(tiny_llama());
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend backend;
  Forward fwd(c, w, backend, 2);
  CHECK_THROWS_WITH(fwd.step(16), "forward: token id 16 is outside the vocabulary [0, 16)");
  CHECK_THROWS_WITH(fwd.step(-1), "forward: token id -1 is outside the vocabulary [0, 16)");
  CHECK(fwd.n_past() == 0);  // a refused token leaves the cache as it was
  const std::vector<float> first = fwd.step(4);
  fwd.step(5);
  CHECK_THROWS_WITH(fwd.step(6), "forward: context full (2 positions)");
  fwd.reset();
  CHECK(fwd.step(4) == first);
}
