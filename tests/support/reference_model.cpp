// The float64 reference forward pass (reference_model.h). Plain loops over whole sequences;
// every formula is the one in the header comment, nothing is fused or cached.
#include "support/reference_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "quant/dequant.h"

namespace llmctl::test {

namespace {

// ---- reading the file -----------------------------------------------------------------

int64_t required_int(const GgufFile& f, const std::string& key) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) throw FileError(f.path(), fmt::format("reference: missing metadata key '{}'", key));
  if (*v < 1)
    throw FileError(f.path(), fmt::format("reference: '{}' = {}, expected >= 1", key, *v));
  return *v;
}

int64_t optional_int(const GgufFile& f, const std::string& key, int64_t fallback) {
  return f.find(key) ? required_int(f, key) : fallback;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A tensor decoded to double in its stored (row-major) order, after checking its ggml-order
// shape. F32 is read directly; every other type goes through quant/dequant.h's
// dequantize_row: the reference ggml block decoding (checked against gguf-py in
// tests/test_dequant.cpp), the one piece of code this file shares with the engine.
std::vector<double> decode(const GgufFile& f, const std::string& name,
                           const std::vector<int64_t>& ggml_shape) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) throw FileError(f.path(), fmt::format("reference: missing tensor '{}'", name));
  if (t->shape != ggml_shape)
    throw FileError(f.path(), fmt::format("reference: tensor '{}': expected {}, got {}", name,
                                          shape_str(ggml_shape), shape_str(t->shape)));
  const int64_t n = t->n_elements();
  std::vector<double> out(static_cast<size_t>(n));
  if (t->type == GgmlType::F32) {
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, t->data + 4 * i, 4);
      out[static_cast<size_t>(i)] = v;
    }
    return out;
  }
  if (!can_dequantize(t->type))
    throw FileError(f.path(), fmt::format("reference: tensor '{}' has type {}, which the "
                                          "reference cannot decode",
                                          name, ggml_type_name(t->type)));
  std::vector<float> tmp(static_cast<size_t>(n));
  dequantize_row(t->type, t->data, tmp.data(), n);
  std::copy(tmp.begin(), tmp.end(), out.begin());
  return out;
}

// GGUF stores a matrix W (n_rows, n_cols) with ggml shape [n_cols, n_rows].
ReferenceMatrix matrix(const GgufFile& f, const std::string& name, int64_t n_rows, int64_t n_cols) {
  ReferenceMatrix m;
  m.n_rows = n_rows;
  m.n_cols = n_cols;
  m.w = decode(f, name, {n_cols, n_rows});
  m.from_blocks = ggml_traits(f.find_tensor(name)->type).block_size > 1;
  return m;
}

std::vector<double> vec(const GgufFile& f, const std::string& name, int64_t n) {
  return decode(f, name, {n});
}

ReferenceHparams read_hparams(const GgufFile& f) {
  ReferenceHparams hp;
  hp.arch = f.get_string_or("general.architecture", "");
  if (hp.arch != "llama" && hp.arch != "qwen2")
    throw FileError(f.path(),
                    fmt::format("reference: architecture '{}', expected llama or qwen2", hp.arch));
  hp.neox = hp.arch == "qwen2";  // llama.cpp: LLAMA_ROPE_TYPE_NEOX for qwen2
  const std::string a = hp.arch + ".";
  hp.n_embd = required_int(f, a + "embedding_length");
  hp.n_layers = required_int(f, a + "block_count");
  hp.n_heads = required_int(f, a + "attention.head_count");
  hp.n_kv_heads = optional_int(f, a + "attention.head_count_kv", hp.n_heads);
  hp.head_dim = optional_int(f, a + "attention.key_length", hp.n_embd / hp.n_heads);
  hp.n_ff = required_int(f, a + "feed_forward_length");
  hp.n_rot = optional_int(f, a + "rope.dimension_count", hp.head_dim);
  hp.rms_eps = f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
  hp.rope_base = f.get_float_or(a + "rope.freq_base", 10000.0);
  if (hp.n_heads % hp.n_kv_heads != 0 || hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim)
    throw FileError(f.path(), fmt::format("reference: expected n_kv_heads | n_heads and an even "
                                          "n_rot <= head_dim, got {} heads, {} kv heads, n_rot "
                                          "{}, head_dim {}",
                                          hp.n_heads, hp.n_kv_heads, hp.n_rot, hp.head_dim));

  // Linear rope scaling divides every angle by the factor. Both spellings llama.cpp reads.
  std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
  double factor = f.get_float_or(a + "rope.scaling.factor", 1.0);
  if (f.find(a + "rope.scale_linear")) {
    scaling = "linear";
    factor = f.get_float_or(a + "rope.scale_linear", 1.0);
  }
  if (scaling == "linear") {
    if (!(factor > 0.0))
      throw FileError(f.path(),
                      fmt::format("reference: rope scaling factor {}, expected > 0", factor));
    hp.rope_freq_scale = 1.0 / factor;
  } else if (scaling != "none") {
    throw FileError(f.path(),
                    fmt::format("reference: rope scaling '{}', expected none or linear", scaling));
  }
  if (f.find_tensor("rope_freqs.weight") != nullptr)
    hp.rope_freqs = vec(f, "rope_freqs.weight", hp.n_rot / 2);

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->shape.size() != 2)
    throw FileError(f.path(), "reference: expected a 2-D tensor 'token_embd.weight'");
  hp.n_vocab = embd->shape[1];
  return hp;
}

// ---- math on vectors ------------------------------------------------------------------

// ReferenceOptions::int8_activations: x rounded per 32-block to d * round(x / d),
// d = max|x_b| / 127, with the float arithmetic of a SIMD kernel (x, d, 127/max in float).
std::vector<double> int8_round(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::abs(static_cast<float>(x[j])));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float d = amax / 127.0f;
    for (size_t j = b; j < b + 32; ++j)
      out[j] = static_cast<double>(d) * std::nearbyint(static_cast<float>(x[j]) * id);
  }
  return out;
}

// W (n_rows, n_cols) @ x (n_cols,) -> (n_rows,)
std::vector<double> matvec(const ReferenceMatrix& m, const std::vector<double>& x_in,
                           bool int8_activations = false) {
  const std::vector<double> x = int8_activations && m.from_blocks ? int8_round(x_in) : x_in;
  std::vector<double> y(static_cast<size_t>(m.n_rows), 0.0);
  for (int64_t r = 0; r < m.n_rows; ++r) {
    const double* w = m.row(r);
    double acc = 0.0;
    for (int64_t c = 0; c < m.n_cols; ++c) acc += w[c] * x[static_cast<size_t>(c)];
    y[static_cast<size_t>(r)] = acc;
  }
  return y;
}

// x / sqrt(mean(x^2) + eps) * g
std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& g,
                            double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * g[i];
  return y;
}

void add_into(std::vector<double>& x, const std::vector<double>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace

// ---- loading --------------------------------------------------------------------------

ReferenceModel ReferenceModel::load(const GgufFile& f) {
  ReferenceModel m;
  m.hp_ = read_hparams(f);
  const ReferenceHparams& hp = m.hp_;
  const int64_t q_dim = hp.n_heads * hp.head_dim;
  const int64_t kv_dim = hp.n_kv_heads * hp.head_dim;

  m.token_embd_ = matrix(f, "token_embd.weight", hp.n_vocab, hp.n_embd);
  m.output_ = f.find_tensor("output.weight") != nullptr
                  ? matrix(f, "output.weight", hp.n_vocab, hp.n_embd)
                  : m.token_embd_;  // tied embeddings
  m.output_norm_ = vec(f, "output_norm.weight", hp.n_embd);
  for (int64_t il = 0; il < hp.n_layers; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    Layer l;
    l.attn_norm = vec(f, p + "attn_norm.weight", hp.n_embd);
    l.wq = matrix(f, p + "attn_q.weight", q_dim, hp.n_embd);
    l.wk = matrix(f, p + "attn_k.weight", kv_dim, hp.n_embd);
    l.wv = matrix(f, p + "attn_v.weight", kv_dim, hp.n_embd);
    l.wo = matrix(f, p + "attn_output.weight", hp.n_embd, q_dim);
    // Q/K/V biases (qwen2) are used whenever the file has them.
    if (f.find_tensor(p + "attn_q.bias") != nullptr) {
      l.bq = vec(f, p + "attn_q.bias", q_dim);
      l.bk = vec(f, p + "attn_k.bias", kv_dim);
      l.bv = vec(f, p + "attn_v.bias", kv_dim);
    }
    l.ffn_norm = vec(f, p + "ffn_norm.weight", hp.n_embd);
    l.w_gate = matrix(f, p + "ffn_gate.weight", hp.n_ff, hp.n_embd);
    l.w_up = matrix(f, p + "ffn_up.weight", hp.n_ff, hp.n_embd);
    l.w_down = matrix(f, p + "ffn_down.weight", hp.n_embd, hp.n_ff);
    m.layers_.push_back(std::move(l));
  }
  return m;
}

// ---- the forward pass -----------------------------------------------------------------

// Rotates each of n_heads head vectors of v (n_heads * head_dim,) for position pos.
void ReferenceModel::rope(std::vector<double>& v, int64_t n_heads, int64_t pos) const {
  const int64_t half = hp_.n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* x = v.data() + h * hp_.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const double exponent = -2.0 * static_cast<double>(i) / static_cast<double>(hp_.n_rot);
      double theta =
          static_cast<double>(pos) * hp_.rope_freq_scale * std::pow(hp_.rope_base, exponent);
      if (!hp_.rope_freqs.empty()) theta /= hp_.rope_freqs[static_cast<size_t>(i)];
      const int64_t i0 = hp_.neox ? i : 2 * i;
      const int64_t i1 = hp_.neox ? i + half : 2 * i + 1;
      const double a = x[i0];
      const double b = x[i1];
      x[i0] = a * std::cos(theta) - b * std::sin(theta);
      x[i1] = a * std::sin(theta) + b * std::cos(theta);
    }
  }
}

// x_p += Wo attention(q_p, k_0..p, v_0..p) for every position p (causal, GQA).
void ReferenceModel::attention_block(const Layer& l, Rows& x, bool int8) const {
  const size_t n_pos = x.size();
  const int64_t hd = hp_.head_dim;
  Rows q(n_pos), k(n_pos), v(n_pos);
  for (size_t p = 0; p < n_pos; ++p) {
    const std::vector<double> h = rmsnorm(x[p], l.attn_norm, hp_.rms_eps);
    q[p] = matvec(l.wq, h, int8);  // (n_heads * head_dim,)
    k[p] = matvec(l.wk, h, int8);  // (n_kv_heads * head_dim,)
    v[p] = matvec(l.wv, h, int8);
    if (!l.bq.empty()) {
      add_into(q[p], l.bq);
      add_into(k[p], l.bk);
      add_into(v[p], l.bv);
    }
    rope(q[p], hp_.n_heads, static_cast<int64_t>(p));
    rope(k[p], hp_.n_kv_heads, static_cast<int64_t>(p));
  }
  const int64_t group = hp_.n_heads / hp_.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (size_t p = 0; p < n_pos; ++p) {
    std::vector<double> att(static_cast<size_t>(hp_.n_heads * hd), 0.0);
    for (int64_t h = 0; h < hp_.n_heads; ++h) {
      const int64_t qo = h * hd;            // this query head in q[p]
      const int64_t ko = (h / group) * hd;  // its kv head in k[s], v[s]
      std::vector<double> score(p + 1);
      for (size_t s = 0; s <= p; ++s) {
        double dot = 0.0;
        for (int64_t d = 0; d < hd; ++d)
          dot += q[p][static_cast<size_t>(qo + d)] * k[s][static_cast<size_t>(ko + d)];
        score[s] = dot * scale;
      }
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0.0;
      for (double& sc : score) sum += (sc = std::exp(sc - mx));
      for (size_t s = 0; s <= p; ++s)
        for (int64_t d = 0; d < hd; ++d)
          att[static_cast<size_t>(qo + d)] += score[s] / sum * v[s][static_cast<size_t>(ko + d)];
    }
    add_into(x[p], matvec(l.wo, att, int8));
  }
}

// x_p += Wdown (silu(Wgate h_p) * (Wup h_p)), h_p = rmsnorm(x_p) * ffn_norm.
void ReferenceModel::ffn_block(const Layer& l, Rows& x, bool int8) const {
  for (std::vector<double>& xp : x) {
    const std::vector<double> h = rmsnorm(xp, l.ffn_norm, hp_.rms_eps);
    std::vector<double> g = matvec(l.w_gate, h, int8);  // (n_ff,)
    const std::vector<double> u = matvec(l.w_up, h, int8);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    add_into(xp, matvec(l.w_down, g, int8));
  }
}

std::vector<std::vector<double>> ReferenceModel::logits(const std::vector<int32_t>& tokens,
                                                        const ReferenceOptions& options) const {
  const bool int8 = options.int8_activations;
  Rows x;
  for (int32_t t : tokens) {
    if (t < 0 || t >= hp_.n_vocab)
      throw Error(fmt::format("reference: token id {}, expected [0, {})", t, hp_.n_vocab));
    const double* e = token_embd_.row(t);
    x.emplace_back(e, e + hp_.n_embd);
  }
  for (const Layer& l : layers_) {
    attention_block(l, x, int8);
    ffn_block(l, x, int8);
  }
  Rows out;
  for (const std::vector<double>& xp : x)
    out.push_back(matvec(output_, rmsnorm(xp, output_norm_, hp_.rms_eps), int8));
  return out;
}

}  // namespace llmctl::test
