#pragma once
// Options of `llmctl tokenize`, shared by its two files (cmd_tokenize.cpp,
// cmd_tokenize_report.cpp).

#include <cstdint>
#include <nlohmann/json.hpp>
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
  std::string pre_tokenizer;       // --pre-tokenizer NAME
  bool no_parse_special = false;  // --no-parse-special: special-token text stays text
  std::string chat_file;           // --chat FILE.json
  std::string chat_template;       // --chat-template NAME (built-in)
  std::string chat_template_file;  // --chat-template-file FILE.jinja
  bool no_generation_prompt = false;
};

}  // namespace llmctl::cli

namespace llmctl {
class Tokenizer;
}

namespace llmctl::cli {

int run_tokenize_report(const TokenizeOptions& opt);
int run_tokenize_chat(const Tokenizer& tok, const TokenizeOptions& opt);  // --chat
// A piece on one line: control bytes escaped (\n, \t, \xNN), everything else verbatim.
std::string printable_piece(const std::string& s);
// ids as --format asks: "ids" (one line), "pieces" (id<TAB>piece lines) or "json" (`header`
// plus n_tokens, ids and pieces).
void print_ids(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& format,
               nlohmann::json header);

}  // namespace llmctl::cli
