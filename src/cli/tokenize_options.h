#pragma once
// Options of `llmctl tokenize`, shared by its two files (cmd_tokenize.cpp,
// cmd_tokenize_report.cpp).

#include <optional>
#include <string>
#include <vector>

namespace llmctl::cli {

struct TokenizeOptions {
  std::string model;                    // -m: a GGUF model (its embedded vocabulary)
  std::vector<std::string> tokenizers;  // --tokenizer: .model or .gguf files
  std::string text;                     // positional TEXT
  bool has_text = false;
  std::string file;   // --file: read verbatim ("-" = stdin)
  std::string jsonl;  // --jsonl: prompts for --report
  bool no_bos = false;
  std::string format = "ids";         // ids | pieces | json
  bool json = false;                  // --json (same as --format json; for --report too)
  bool csv = false;                   // --csv (report only)
  std::optional<std::string> decode;  // --decode "ID ID ..."
  bool count = false;
  bool report = false;
  std::optional<long long> budget;
  bool norms = false;  // --norms: each token's embedding norm (needs -m)
};

int run_tokenize_report(const TokenizeOptions& opt);

}  // namespace llmctl::cli
