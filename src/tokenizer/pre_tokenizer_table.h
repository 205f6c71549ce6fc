#pragma once
// Every tokenizer.ggml.pre name llama.cpp accepts (src/llama-vocab.cpp, load() and the
// llm_tokenizer_bpe constructor), as data: the list of regexes that splits the text before
// BPE, and the per-name flags llama.cpp sets. About 90 names share about 30 regex lists.
//
// The regexes are the original ones from each model's tokenizer.json where llama.cpp keeps
// a rewritten copy for its own engine ((?i:'s|...) rather than '[sS]|...): PCRE2 runs the
// originals, and the originals are what Hugging Face tokenizers (the reference) runs.

#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

struct PreTokenizerSpec {
  std::string name;                   // the tokenizer.ggml.pre value
  std::string list;                   // the regex list's id; names with equal lists share it
  std::vector<std::string> patterns;  // applied in turn (regex_split.h)
  bool ignore_merges = false;  // a whole piece that is a token is taken as is (Llama 3 style)
  bool add_bos = false;        // default when tokenizer.ggml.add_bos_token is absent
  bool clean_spaces = true;    // llama.cpp's clean_spaces (decode-side; kept for callers)
  bool byte_encode = true;     // GPT-2 byte-level pieces; false: raw UTF-8 (SPM-style BPE)
  bool escape_whitespaces = false;  // spaces become U+2581 before BPE (Gemma 4, Sarvam)
  bool add_sep = false;             // BERT-style SEP at the end (embedding models)
  bool no_bos = false;              // the vocabulary has no BOS token (ChatGLM 4)
};

// The whole table, in llama.cpp's order; "default" first.
const std::vector<PreTokenizerSpec>& pre_tokenizer_table();

}  // namespace llmctl
