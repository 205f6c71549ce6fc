// PLACEHOLDER: byte-level BPE (tokenizer.ggml.model = gpt2) is being written; see tokenizer_impl.h.
#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace llmctl {
std::unique_ptr<TokenizerImpl> make_gpt2_gguf_tokenizer(const GgufFile&) {
  throw Error("gpt2 byte-level BPE tokenizer not built yet");
}
}  // namespace llmctl
