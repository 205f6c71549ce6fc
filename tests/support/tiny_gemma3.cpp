// Tiny random-weight gemma3 GGUF files (tiny_gemma3.h).
#include "support/tiny_gemma3.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "io/gguf_writer.h"

namespace llmctl::test {

namespace gv = llmctl::gguf_value;

namespace {
constexpr int64_t kEmbd = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFf = 96;
constexpr int64_t kVocab = kTinyGemmaVocab;
}  // namespace

// A random-weight gemma3 file in memory (the same weights for the same n_layers).
GgufFile build_tiny_gemma3(const TinyGemma& s) {
  std::mt19937 rng(3);
  GgufBuilder b;
  const std::string a = "gemma3.";
  b.set("general.architecture", gv::string("gemma3"));
  b.set(a + "embedding_length", gv::u32(kEmbd));
  b.set(a + "block_count", gv::u32(static_cast<uint32_t>(s.n_layers)));
  b.set(a + "attention.head_count", gv::u32(kHeads));
  b.set(a + "attention.head_count_kv", gv::u32(kKvHeads));
  b.set(a + "attention.key_length", gv::u32(kHeadDim));
  b.set(a + "attention.value_length", gv::u32(kHeadDim));
  b.set(a + "feed_forward_length", gv::u32(kFf));
  b.set(a + "context_length", gv::u32(256));
  b.set(a + "attention.layer_norm_rms_epsilon", gv::f32(1e-6f));
  b.set(a + "rope.freq_base", gv::f32(1e6f));
  if (s.window > 0) b.set(a + "attention.sliding_window", gv::u32(static_cast<uint32_t>(s.window)));
  if (s.period > 0)
    b.set(a + "attention.sliding_window_pattern", gv::u32(static_cast<uint32_t>(s.period)));
  if (s.final_softcap > 0.0f) b.set(a + "final_logit_softcapping", gv::f32(s.final_softcap));
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    b.add_tensor(name, GgmlType::F32, std::move(shape), std::move(bytes));
  };
  const auto matrix = [&](const std::string& name, int64_t n_out, int64_t n_in, float gain) {
    const float r = gain * std::sqrt(3.0f / static_cast<float>(n_in));
    add(name, {n_in, n_out}, -r, r);
  };
  // Embeddings of rms ~0.05, as Gemma's (scaled by sqrt(64) = 8 on the way in).
  add("token_embd.weight", {kEmbd, kVocab}, -0.1f, 0.1f);
  add("output_norm.weight", {kEmbd}, 0.8f, 1.2f);
  for (int64_t il = 0; il < s.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {kEmbd}, 0.8f, 1.2f);
    matrix(p + "attn_q.weight", kHeads * kHeadDim, kEmbd, 1.0f);
    matrix(p + "attn_k.weight", kKvHeads * kHeadDim, kEmbd, 1.0f);
    matrix(p + "attn_v.weight", kKvHeads * kHeadDim, kEmbd, 1.0f);
    add(p + "attn_q_norm.weight", {kHeadDim}, 1.5f, 2.5f);  // sharp attention
    add(p + "attn_k_norm.weight", {kHeadDim}, 1.5f, 2.5f);
    matrix(p + "attn_output.weight", kEmbd, kHeads * kHeadDim, 1.0f);
    add(p + "post_attention_norm.weight", {kEmbd}, 0.3f, 0.6f);
    add(p + "ffn_norm.weight", {kEmbd}, 0.8f, 1.2f);
    matrix(p + "ffn_gate.weight", kFf, kEmbd, 1.5f);
    matrix(p + "ffn_up.weight", kFf, kEmbd, 1.0f);
    matrix(p + "ffn_down.weight", kEmbd, kFf, 1.0f);
    add(p + "post_ffw_norm.weight", {kEmbd}, 0.3f, 0.6f);
  }
  return GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(b.build()),
                               "tiny-gemma3.gguf");
}

std::vector<int32_t> tiny_gemma3_prompt(size_t n) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> d(0, kVocab - 1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = d(rng);
  return t;
}

}  // namespace llmctl::test
