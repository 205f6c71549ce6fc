#pragma once
// Sliding-window attention as data and arithmetic, shared by the engine (model/arch.h rows,
// model/kv_cache.h) and kvplan (plan/), which may not include each other: which layers of an
// architecture attend through a window, and how many KV-cache blocks a windowed layer needs per
// sequence. Header-only, no dependencies.

#include <algorithm>
#include <cstdint>

namespace llmctl {

// Which layers attend through a sliding window (of the file's window length). GGUF files carry
// the window (`{arch}.attention.sliding_window`) but usually not the pattern, so the pattern is
// a column of the architecture table (model/arch.h).
enum class WindowLayers : uint8_t {
  None,               // every layer attends to every earlier position
  All,                // every layer is windowed (Mistral v0.1: config.json sliding_window)
  AllButEveryPeriod,  // layer il is global when (il + 1) % period == 0, else windowed
                      // (gemma2: period 2, gemma3: period 6)
};

struct WindowPattern {
  WindowLayers layers = WindowLayers::None;
  int32_t period = 0;            // AllButEveryPeriod only
  double local_rope_base = 0.0;  // RoPE base of the windowed layers; 0: the global base
  // The window of a GGUF file without {arch}.attention.sliding_window, as llama.cpp assumes it
  // (gemma2: 4096); 0: such a file attends globally on every layer (gemma3).
  int64_t default_length = 0;
  // A GGUF file must give {arch}.attention.sliding_window (llama.cpp's gpt-oss loader requires
  // it): a file without it is refused rather than run globally.
  bool length_required = false;
};

// Whether layer il is one of the pattern's windowed layers (given a window at all).
inline bool window_pattern_has(const WindowPattern& p, int64_t il) {
  switch (p.layers) {
    case WindowLayers::None:
      return false;
    case WindowLayers::All:
      return true;
    case WindowLayers::AllButEveryPeriod:
      return p.period > 0 && (il + 1) % p.period != 0;
  }
  return false;
}

// The most KV blocks a windowed layer holds for one sequence at any time (model/kv_cache.h):
// a forward pass writes at most `max_chunk` new positions L .. L + n - 1 of a sequence of
// length L, and its queries read back to L - window + 1, so at most window + max_chunk - 1
// consecutive positions are live, and m consecutive positions touch at most
// ceil((m - 1) / block_size) + 1 blocks. Never more than the sequence's own
// ceil(max_len / block_size) blocks. Arguments >= 1.
inline int64_t window_blocks_per_sequence(int64_t window, int64_t block_size, int64_t max_chunk,
                                          int64_t max_len) {
  const int64_t live = window + max_chunk - 1;
  const int64_t touched = (live - 1 + block_size - 1) / block_size + 1;
  return std::min(touched, (max_len + block_size - 1) / block_size);
}

}  // namespace llmctl
