// make_random_model: writes a random-weight Llama (or gpt-oss) GGUF of a named shape, for
// benchmarks and GPU checks where the weights' values do not matter but their sizes and layout
// do.
//
//   make_random_model --shape llama-3.2-1b|tinyllama-1.1b|llama-8b|tiny|gpt-oss-20b-4l|tiny-gpt-oss
//                     --vocab-from FILE.gguf [--seed N] [--type f32|f16] OUT.gguf
//
// The vocabulary (every tokenizer.* key) is copied from --vocab-from, and n_vocab follows it.
// Weights are deterministic in the seed: tensor i draws from its own xoshiro256** stream
// (sampler/rng.h) seeded with splitmix64(seed, i), so the same seed gives the same bytes on
// every machine. Matrices are normal-ish with std 0.02 (the usual Llama init: the sum of four
// 16-bit uniforms, Irwin-Hall, rescaled); norm weights are 1. Activations stay finite, and
// every matrix row (shape[0]) is a multiple of 32, so `llmctl quantize` can make Q8_0/Q4_0
// variants. The file is streamed to disk (io/gguf_stream_writer.h), never held in memory.
//
// Shapes (context_length is kept small so a default `llmctl run` allocates a small KV cache;
// no rope scaling tensor is written, the engine would refuse it):
//   name            n_embd layers heads kv n_ff   rope base  tied   context  default type
//   tiny                64      2     4  2   128      10000   no       512  f32
//   llama-3.2-1b      2048     16    32  8  8192     500000   yes     8192  f16
//   tinyllama-1.1b    2048     22    32  4  5632      10000   no      2048  f16
//   llama-8b          4096     32    32  8 14336     500000   no      8192  f16
//   gpt-oss-20b-4l    2880      4    64  8  2880     150000   no      8192  f16
//   tiny-gpt-oss        64      2     4  2    64     150000   no       512  f32
// gpt-oss-20b-4l is 4 of gpt-oss-20b's 24 layers with its shapes and rules (llama.cpp's gpt-oss
// loader, as tools/gen_gptoss_fixture.py writes them): head_dim 64 (q 4096 wide), q/k/v/o
// biases, attention sinks, a window of 128 on even layers, YaRN 32 over 4096 positions, 32
// experts of 2880 (n_ff above), 4 used, router and expert biases. Biases and sinks are F32
// (std 0.02), experts 3-D matrices of the file's type: `llama-quantize` or `llmctl quantize
// --type MXFP4_MOE` make the MXFP4-expert file that gpt-oss ships as. tiny-gpt-oss is the same
// layout at test size (head_dim 16, 4 experts, 2 used, window 8, YaRN 4 over 128 positions).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "io/gguf.h"
#include "io/gguf_stream_writer.h"
#include "io/gguf_writer.h"
#include "sampler/rng.h"

namespace llmctl {
namespace {

// The gpt-oss part of a shape (n_experts 0: a dense Llama).
struct MoeShape {
  int64_t head_dim = 0, n_experts = 0, n_used = 0, window = 0;
  double yarn_factor = 0;
  int64_t yarn_orig_ctx = 0;
};

struct Shape {
  const char* name;
  int64_t n_embd, n_layers, n_heads, n_kv_heads, n_ff;  // gpt-oss: n_ff is an expert's
  double rope_base;
  bool tied;
  int64_t n_ctx;
  GgmlType default_type;
  MoeShape moe;
  bool gpt_oss() const { return moe.n_experts > 0; }
  int64_t head_dim() const { return gpt_oss() ? moe.head_dim : n_embd / n_heads; }
};

// clang-format off
constexpr Shape kShapes[] = {
    {"tiny", 64, 2, 4, 2, 128, 10000.0, false, 512, GgmlType::F32, {}},
    {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 500000.0, true, 8192, GgmlType::F16, {}},
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 10000.0, false, 2048, GgmlType::F16, {}},
    {"llama-8b", 4096, 32, 32, 8, 14336, 500000.0, false, 8192, GgmlType::F16, {}},
    //                                                          head_dim experts used window yarn
    {"gpt-oss-20b-4l", 2880, 4, 64, 8, 2880, 150000.0, false, 8192, GgmlType::F16, {64, 32, 4, 128, 32.0, 4096}},
    {"tiny-gpt-oss", 64, 2, 4, 2, 64, 150000.0, false, 512, GgmlType::F32, {16, 4, 2, 8, 4.0, 128}},
};
// clang-format on

// How a tensor's values are drawn: a matrix of the file's type, a norm's ones, or an F32
// vector (a bias, the sinks) drawn as a matrix.
enum class Fill { Matrix, Ones, Vector };

struct PlannedTensor {
  GgufTensorDecl decl;
  Fill fill = Fill::Matrix;
};

void plan_gpt_oss_layer(const Shape& s, int64_t l, std::vector<PlannedTensor>& t, GgmlType type) {
  const std::string b = fmt::format("blk.{}.", l);
  const int64_t d = s.n_embd, q = s.n_heads * s.head_dim(), kv = s.n_kv_heads * s.head_dim();
  const int64_t e = s.moe.n_experts, ff = s.n_ff;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Fill fill) {
    t.push_back({{b + name, fill == Fill::Matrix ? type : GgmlType::F32, std::move(shape)}, fill});
  };
  add("attn_norm.weight", {d}, Fill::Ones);
  add("attn_q.weight", {d, q}, Fill::Matrix);
  add("attn_q.bias", {q}, Fill::Vector);
  add("attn_k.weight", {d, kv}, Fill::Matrix);
  add("attn_k.bias", {kv}, Fill::Vector);
  add("attn_v.weight", {d, kv}, Fill::Matrix);
  add("attn_v.bias", {kv}, Fill::Vector);
  add("attn_output.weight", {q, d}, Fill::Matrix);
  add("attn_output.bias", {d}, Fill::Vector);
  add("attn_sinks.weight", {s.n_heads}, Fill::Vector);
  add("post_attention_norm.weight", {d}, Fill::Ones);
  add("ffn_gate_inp.weight", {d, e}, Fill::Matrix);
  add("ffn_gate_inp.bias", {e}, Fill::Vector);
  add("ffn_gate_exps.weight", {d, ff, e}, Fill::Matrix);
  add("ffn_gate_exps.bias", {ff, e}, Fill::Vector);
  add("ffn_up_exps.weight", {d, ff, e}, Fill::Matrix);
  add("ffn_up_exps.bias", {ff, e}, Fill::Vector);
  add("ffn_down_exps.weight", {ff, d, e}, Fill::Matrix);
  add("ffn_down_exps.bias", {d, e}, Fill::Vector);
}

std::vector<PlannedTensor> plan_tensors(const Shape& s, int64_t n_vocab, GgmlType type) {
  const int64_t head_dim = s.n_embd / s.n_heads;
  const int64_t kv_dim = s.n_kv_heads * head_dim;
  std::vector<PlannedTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    const bool norm = shape.size() == 1;
    t.push_back({{std::move(name), norm ? GgmlType::F32 : type, std::move(shape)},
                 norm ? Fill::Ones : Fill::Matrix});
  };
  add("token_embd.weight", {s.n_embd, n_vocab});  // (n_embd, n_vocab)
  add("output_norm.weight", {s.n_embd});
  if (!s.tied) add("output.weight", {s.n_embd, n_vocab});
  for (int64_t l = 0; l < s.n_layers; ++l) {
    if (s.gpt_oss()) {
      plan_gpt_oss_layer(s, l, t, type);
      continue;
    }
    const std::string b = fmt::format("blk.{}.", l);
    add(b + "attn_norm.weight", {s.n_embd});
    add(b + "attn_q.weight", {s.n_embd, s.n_embd});  // (n_embd, n_heads * head_dim)
    add(b + "attn_k.weight", {s.n_embd, kv_dim});
    add(b + "attn_v.weight", {s.n_embd, kv_dim});
    add(b + "attn_output.weight", {s.n_embd, s.n_embd});
    add(b + "ffn_norm.weight", {s.n_embd});
    add(b + "ffn_gate.weight", {s.n_embd, s.n_ff});
    add(b + "ffn_up.weight", {s.n_embd, s.n_ff});
    add(b + "ffn_down.weight", {s.n_ff, s.n_embd});
  }
  return t;
}

GgufBuilder model_metadata(const Shape& s, const GgufFile& vocab, int64_t n_vocab, GgmlType type,
                           uint64_t seed) {
  GgufBuilder m;
  const std::string arch = s.gpt_oss() ? "gpt-oss" : "llama";
  auto u32 = [&](const char* key, int64_t v) {
    m.set(arch + key, gguf_value::u32(static_cast<uint32_t>(v)));
  };
  m.set("general.architecture", gguf_value::string(arch));
  m.set("general.name", gguf_value::string(fmt::format("random {} seed {}", s.name, seed)));
  m.set("general.file_type", gguf_value::u32(type == GgmlType::F16 ? 1 : 0));
  u32(".context_length", s.n_ctx);
  u32(".embedding_length", s.n_embd);
  u32(".block_count", s.n_layers);
  u32(".feed_forward_length", s.n_ff);
  u32(".attention.head_count", s.n_heads);
  u32(".attention.head_count_kv", s.n_kv_heads);
  u32(".rope.dimension_count", s.head_dim());
  m.set(arch + ".rope.freq_base", gguf_value::f32(static_cast<float>(s.rope_base)));
  m.set(arch + ".attention.layer_norm_rms_epsilon", gguf_value::f32(1e-5f));
  u32(".vocab_size", n_vocab);
  if (s.gpt_oss()) {
    u32(".attention.key_length", s.head_dim());
    u32(".attention.value_length", s.head_dim());
    u32(".attention.sliding_window", s.moe.window);
    u32(".expert_count", s.moe.n_experts);
    u32(".expert_used_count", s.moe.n_used);
    u32(".expert_feed_forward_length", s.n_ff);
    m.set(arch + ".rope.scaling.type", gguf_value::string("yarn"));
    m.set(arch + ".rope.scaling.factor", gguf_value::f32(static_cast<float>(s.moe.yarn_factor)));
    u32(".rope.scaling.original_context_length", s.moe.yarn_orig_ctx);
  }
  for (const GgufKV& kv : vocab.metadata())
    if (kv.key.rfind("tokenizer.", 0) == 0) m.set(kv.key, kv.value);
  return m;
}

// Fills x[0..n) with normal-ish values of standard deviation `std`: the sum of four 16-bit
// uniforms from one 64-bit draw (Irwin-Hall, n = 4: std of the sum = 65536 * sqrt(1/3)).
void fill_normalish(Rng& rng, float* x, size_t n, float std) {
  const float scale = std / (65536.0f * 0.57735027f);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng.next_u64();
    const int64_t sum = static_cast<int64_t>((r & 0xffff) + ((r >> 16) & 0xffff) +
                                             ((r >> 32) & 0xffff) + (r >> 48));
    x[i] = static_cast<float>(sum - 131070) * scale;  // 131070 = 4 * 65535 / 2, the mean
  }
}

void write_tensor(GgufStreamWriter& out, const PlannedTensor& t, uint64_t seed, size_t index) {
  uint64_t sm = seed ^ (0x9E3779B97F4A7C15ull * (index + 1));
  Rng rng(splitmix64_next(sm));
  int64_t n = 1;
  for (const int64_t d : t.decl.shape) n *= d;
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<float> x(static_cast<size_t>(std::min(n, kChunk)));
  std::vector<uint16_t> h(x.size());
  for (int64_t done = 0; done < n; done += kChunk) {
    const size_t m = static_cast<size_t>(std::min(kChunk, n - done));
    if (t.fill == Fill::Ones)
      std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(m), 1.0f);
    else
      fill_normalish(rng, x.data(), m, 0.02f);
    if (t.decl.type == GgmlType::F32) {
      out.write(x.data(), m * sizeof(float));
    } else {
      for (size_t i = 0; i < m; ++i) h[i] = f32_to_fp16(x[i]);  // GGUF is little-endian, as x86
      out.write(h.data(), m * sizeof(uint16_t));
    }
  }
  out.end_tensor();
}

const Shape& find_shape(const std::string& name) {
  for (const Shape& s : kShapes)
    if (name == s.name) return s;
  throw Error(
      fmt::format("unknown shape '{}' (expected tiny, llama-3.2-1b, tinyllama-1.1b, llama-8b, "
                  "gpt-oss-20b-4l or tiny-gpt-oss)",
                  name));
}

int run(const std::string& shape_name, const std::string& vocab_path, uint64_t seed,
        const std::string& type_name, const std::string& out_path) {
  const auto t0 = std::chrono::steady_clock::now();
  const Shape& s = find_shape(shape_name);
  GgmlType type = s.default_type;
  if (type_name == "f32")
    type = GgmlType::F32;
  else if (type_name == "f16")
    type = GgmlType::F16;
  else if (!type_name.empty())
    throw Error(fmt::format("--type '{}': expected f32 or f16", type_name),
                "make quantized variants with `llmctl quantize`");
  const GgufFile vocab = GgufFile::open(vocab_path);
  const auto tokens = vocab.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::ARRAY || tokens->arr.empty())
    throw FileError(vocab_path, "no tokenizer.ggml.tokens array (expected a vocabulary GGUF)");
  const auto n_vocab = static_cast<int64_t>(tokens->arr.size());

  const std::vector<PlannedTensor> tensors = plan_tensors(s, n_vocab, type);
  std::vector<GgufTensorDecl> decls;
  for (const auto& t : tensors) decls.push_back(t.decl);
  GgufStreamWriter out(out_path, model_metadata(s, vocab, n_vocab, type, seed), std::move(decls));
  uint64_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    write_tensor(out, tensors[i], seed, i);
    bytes += out.tensor_bytes(i);
  }
  out.commit();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(stderr,
             "make_random_model: shape={} n_vocab={} type={} tensors={} tensor_bytes={} "
             "seconds={:.2f} out={}\n",
             s.name, n_vocab, ggml_type_name(type), tensors.size(), bytes, secs, out_path);
  return 0;
}

}  // namespace
}  // namespace llmctl

int main(int argc, char** argv) {
  CLI::App app{
      "Write a random-weight Llama or gpt-oss GGUF of a named shape (deterministic by seed)"};
  std::string shape, vocab, type, out;
  uint64_t seed = 0;
  app.add_option("--shape", shape,
                 "tiny, llama-3.2-1b, tinyllama-1.1b, llama-8b, gpt-oss-20b-4l or tiny-gpt-oss")
      ->required();
  app.add_option("--vocab-from", vocab, "GGUF whose tokenizer.* metadata is copied")->required();
  app.add_option("--seed", seed, "Seed of the weights")->capture_default_str();
  app.add_option("--type", type, "f32 or f16 (default: f32 for tiny, f16 otherwise)");
  app.add_option("output", out, "Output GGUF")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    return llmctl::run(shape, vocab, seed, type, out);
  } catch (const llmctl::Error& e) {
    fmt::print(stderr, "make_random_model: error: {}\n", e.what());
    if (!e.hint().empty()) fmt::print(stderr, "make_random_model: hint: {}\n", e.hint());
    return 1;
  }
}
