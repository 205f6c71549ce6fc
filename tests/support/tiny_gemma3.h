#pragma once
// Tiny random-weight gemma3 GGUF files, built in memory, for the gemma3 row and the sliding
// window (test_model_gemma3.cpp, test_kv_window.cpp): n_embd 64, 4 heads of 16 (2 kv heads),
// n_ff 96, 100 tokens, tied output, context 256.

#include <cstdint>
#include <vector>

#include "io/gguf.h"

namespace llmctl::test {

constexpr int64_t kTinyGemmaVocab = 100;

struct TinyGemma {
  int64_t n_layers = 6;        // 5 windowed, the 6th global
  int64_t window = 8;          // 0: no sliding_window key
  int64_t period = 0;          // > 0: gemma3.attention.sliding_window_pattern
  float final_softcap = 0.0f;  // > 0: gemma3.final_logit_softcapping
};

// A random-weight gemma3 file in memory (the same weights for the same n_layers).
GgufFile build_tiny_gemma3(const TinyGemma& s);
// n random token ids (the same ones for the same n).
std::vector<int32_t> tiny_gemma3_prompt(size_t n);

}  // namespace llmctl::test
