#pragma once
// ReferenceModel: an independent float64 Llama / Qwen2 forward pass for tests, written for
// clarity, not speed. It shares no code with the engine's fast path (model/, backend/): its
// own reading of the hyperparameters from GGUF metadata, its own RoPE, attention, RMSNorm and
// SwiGLU, all in double over the whole sequence at once (no KV cache). The one shared piece
// is quant/dequant.h's dequantize_row, the reference ggml block decoding that
// tests/test_dequant.cpp checks against gguf-py; weights are decoded once at load.
//
// The function computed for tokens t[0..T) (W is (n_out, n_in), y = W x):
//   x_p = token_embd[t_p]                                            (n_embd,)
//   per layer:
//     h_p = rmsnorm(x_p) * attn_norm
//     q_p = Wq h_p + bq, k_p = Wk h_p + bk, v_p = Wv h_p + bv          biases: qwen2 only
//     rope(q_p, p), rope(k_p, p)        per head, pairs i < n_rot/2 rotate by
//                                       theta_i = p * freq_scale * base^(-2i/n_rot) / rope_freqs[i]
//                                       llama: (x[2i], x[2i+1]); qwen2 (neox): (x[i], x[i+n_rot/2])
//     query head h reads kv head h / (n_heads / n_kv_heads)                   (GQA)
//     a_p = sum_{s<=p} softmax_s(q_p . k_s / sqrt(head_dim)) v_s              (causal)
//     x_p += Wo a_p
//     h_p = rmsnorm(x_p) * ffn_norm
//     x_p += Wdown (silu(Wgate h_p) * (Wup h_p))
//   logits_p = output (rmsnorm(x_p) * output_norm)       output = token_embd when absent (tied)

#include <cstdint>
#include <string>
#include <vector>

namespace llmctl {
class GgufFile;
}

namespace llmctl::test {

// Hyperparameters as the reference reads them (keys "{arch}.…", llama.cpp's names).
struct ReferenceHparams {
  std::string arch;                // "llama" or "qwen2"
  int64_t n_vocab = 0;             // rows of token_embd
  int64_t n_embd = 0;              // {arch}.embedding_length
  int64_t n_layers = 0;            // {arch}.block_count
  int64_t n_heads = 0;             // {arch}.attention.head_count
  int64_t n_kv_heads = 0;          // {arch}.attention.head_count_kv (default n_heads)
  int64_t head_dim = 0;            // {arch}.attention.key_length (default n_embd / n_heads)
  int64_t n_ff = 0;                // {arch}.feed_forward_length
  int64_t n_rot = 0;               // {arch}.rope.dimension_count (default head_dim)
  double rms_eps = 1e-5;           // {arch}.attention.layer_norm_rms_epsilon
  double rope_base = 10000.0;      // {arch}.rope.freq_base
  double rope_freq_scale = 1.0;    // 1 / {arch}.rope.scaling.factor when the type is linear
  bool neox = false;               // qwen2 pairs (i, i + n_rot/2); llama pairs (2i, 2i+1)
  std::vector<double> rope_freqs;  // (n_rot/2,) divisors from 'rope_freqs.weight'; empty: none
};

// A dense row-major matrix (n_rows, n_cols): row r is the weights of output r.
struct ReferenceMatrix {
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  std::vector<double> w;     // n_rows * n_cols
  bool from_blocks = false;  // stored in the file in a block format (Q8_0, Q4_0, Q4_1)
  const double* row(int64_t r) const { return w.data() + r * n_cols; }
};

struct ReferenceOptions {
  // Off (default): the exact function. On: before every matmul whose weights are stored in a
  // block format, round the activation vector x the way ggml's SIMD dot products (and our
  // fast CPU path) quantize it: per 32-block, d = max|x_b| / 127, x_j -> d * round(x_j / d),
  // ties to even. Tests use it to measure the error such a correct fast path may have, so
  // that a tolerance is set from a measurement rather than a guess.
  bool int8_activations = false;
};

class ReferenceModel {
 public:
  // Reads hyperparameters and decodes every weight to double. Throws llmctl::Error naming
  // the key or tensor for a missing key, an unsupported architecture / rope scaling / type,
  // or a shape that disagrees with the hyperparameters (expected vs found).
  static ReferenceModel load(const GgufFile& file);

  // Logits at every position: result[p] (n_vocab,) after tokens[0..p]. Throws Error for an
  // id outside [0, n_vocab).
  std::vector<std::vector<double>> logits(const std::vector<int32_t>& tokens,
                                          const ReferenceOptions& options = {}) const;

  const ReferenceHparams& hparams() const { return hp_; }

 private:
  struct Layer {
    std::vector<double> attn_norm, ffn_norm;  // (n_embd,)
    ReferenceMatrix wq, wk, wv, wo;        // (q_dim, n_embd), (kv_dim, n_embd) x2, (n_embd, q_dim)
    std::vector<double> bq, bk, bv;        // empty unless qwen2
    ReferenceMatrix w_gate, w_up, w_down;  // (n_ff, n_embd) x2, (n_embd, n_ff)
  };
  // One sequence's activations: row p is position p.
  using Rows = std::vector<std::vector<double>>;

  void attention_block(const Layer& l, Rows& x, bool int8) const;
  void ffn_block(const Layer& l, Rows& x, bool int8) const;
  void rope(std::vector<double>& v, int64_t n_heads, int64_t pos) const;

  ReferenceHparams hp_;
  ReferenceMatrix token_embd_;       // (n_vocab, n_embd)
  ReferenceMatrix output_;           // (n_vocab, n_embd); a copy of token_embd_ when tied
  std::vector<double> output_norm_;  // (n_embd,)
  std::vector<Layer> layers_;
};

}  // namespace llmctl::test
