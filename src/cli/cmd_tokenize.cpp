// llmctl tokenize: text -> ids/pieces, ids -> text, token counts, and (--report) token inflation.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/model_tokenizer.h"
#include "cli/tokenize_options.h"
#include "core/error.h"
#include "core/text_io.h"
#include "diag/embedding_norms.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

std::string printable_piece(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\\')
      out += "\\\\";
    else if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  return out;
}

void print_ids(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& format,
               nlohmann::json header) {
  if (format == "ids") {
    fmt::print("{}\n", fmt::join(ids, " "));
  } else if (format == "pieces") {
    for (const int32_t id : ids) fmt::print("{}\t{}\n", id, printable_piece(tok.piece(id)));
  } else {
    nlohmann::json pieces = nlohmann::json::array();
    for (const int32_t id : ids) pieces.push_back(tok.piece(id));
    header["n_tokens"] = ids.size();
    header["ids"] = ids;
    header["pieces"] = pieces;
    fmt::print("{}\n", header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = s.find_first_not_of(" \t\r\n,[]", i);
    if (start == std::string::npos) break;
    size_t end = s.find_first_of(" \t\r\n,[]", start);
    if (end == std::string::npos) end = s.size();
    const std::string tok = s.substr(start, end - start);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || v < INT32_MIN || v > INT32_MAX)
      throw Error(fmt::format("--decode: '{}' is not a token id", tok),
                  "give ids separated by spaces or commas, e.g. --decode \"1 403 407\"");
    ids.push_back(static_cast<int32_t>(v));
    i = end;
  }
  return ids;
}

Tokenizer open_tokenizer(const TokenizeOptions& opt) {
  const TokenizerOptions t{opt.pre_tokenizer};
  return open_tokenizer_file(opt.model.empty() ? opt.tokenizers.at(0) : opt.model, t);
}

std::string input_text(const TokenizeOptions& opt) {
  if (opt.has_text && !opt.file.empty())
    throw CLI::ValidationError("TEXT and --file",
                               "give the text either as TEXT or with --file, not both");
  if (opt.has_text) return opt.text;
  if (!opt.file.empty()) return read_whole_file(opt.file);
  if (stdin_is_terminal())
    throw CLI::ValidationError("TEXT",
                               "no text given: pass TEXT, --file FILE, or pipe text on stdin");
  return read_whole_file("-");
}

int run_decode(const Tokenizer& tok, const TokenizeOptions& opt) {
  const std::vector<int32_t> ids = parse_ids(*opt.decode);
  const std::string text = tok.decode(ids);
  if (opt.json || opt.format == "json") {
    fmt::print("{}\n", nlohmann::json{{"ids", ids}, {"text", text}}.dump(
                           -1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", text);
    if (stdout_is_terminal()) fmt::print("\n");
  }
  return kExitOk;
}

// --norms: each token's embedding L2 norm (rows of token_embd.weight) and where the prompt's
// mean norm falls among the vocabulary's token norms.
void print_token_norms(const Tokenizer& tok, const std::vector<int32_t>& ids,
                       const TokenizeOptions& opt) {
  const GgufFile f = GgufFile::open(opt.model);
  const std::vector<double> norms = row_norms(require_matrix(
      f, "token_embd.weight", "--norms needs a model file with its embedding matrix"));
  const NormStats vocab = norm_statistics(norms);
  double sum = 0;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= norms.size())
      throw Error(
          fmt::format("token id {} is outside the embedding matrix's {} rows", id, norms.size()),
          "the tokenizer and the model's token_embd disagree on the vocabulary size");
    sum += norms[static_cast<size_t>(id)];
  }
  const double prompt_mean = ids.empty() ? 0.0 : sum / static_cast<double>(ids.size());
  const double prompt_pct = percentile_of(norms, prompt_mean);
  if (opt.json) {
    nlohmann::json tokens = nlohmann::json::array();
    for (const int32_t id : ids) {
      const double n = norms[static_cast<size_t>(id)];
      tokens.push_back({{"id", id},
                        {"piece", tok.piece(id)},
                        {"norm", n},
                        {"percentile", percentile_of(norms, n)}});
    }
    const nlohmann::json j{
        {"n_tokens", ids.size()},
        {"tokens", tokens},
        {"prompt_mean_norm", ids.empty() ? nlohmann::json(nullptr) : nlohmann::json(prompt_mean)},
        {"prompt_mean_percentile",
         ids.empty() ? nlohmann::json(nullptr) : nlohmann::json(prompt_pct)},
        {"vocab_size", vocab.n},
        {"vocab_mean_norm", vocab.mean},
        {"vocab_sd_norm", vocab.sd},
        {"vocab_median_norm", vocab.deciles[5]}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  fmt::print("{:>5}  {:>7}  {:>10}  {:>10}  {}\n", "pos", "id", "norm", "percentile", "piece");
  for (size_t i = 0; i < ids.size(); ++i) {
    const double n = norms[static_cast<size_t>(ids[i])];
    fmt::print("{:>5}  {:>7}  {:>10.5g}  {:>9.1f}%  {}\n", i, ids[i], n, percentile_of(norms, n),
               printable_piece(tok.piece(ids[i])));
  }
  if (ids.empty()) {
    fmt::print("prompt: no tokens\n");
  } else {
    fmt::print(
        "prompt: {} tokens, mean norm {:.5g}, at percentile {:.1f} of the vocabulary's token "
        "norms\n",
        ids.size(), prompt_mean, prompt_pct);
  }
  fmt::print("vocabulary: {} tokens, mean norm {:.5g} (sd {:.4g}, median {:.5g})\n", vocab.n,
             vocab.mean, vocab.sd, vocab.deciles[5]);
}

int run_encode(const Tokenizer& tok, const TokenizeOptions& opt) {
  const std::string text = input_text(opt);
  const bool add_bos = !opt.no_bos && tok.add_bos_default();
  const std::vector<int32_t> ids = tok.encode(text, add_bos, !opt.no_parse_special);
  if (opt.count) {
    if (opt.json)
      fmt::print("{}\n", nlohmann::json{{"n_tokens", ids.size()}}.dump());
    else
      fmt::print("{}\n", ids.size());
    return kExitOk;
  }
  if (opt.norms) {
    print_token_norms(tok, ids, opt);
    return kExitOk;
  }
  print_ids(tok, ids, opt.json ? "json" : opt.format,
            {{"tokenizer", tok.source()}, {"kind", tok.kind()}, {"n_vocab", tok.n_vocab()},
             {"add_bos", add_bos}});
  return kExitOk;
}

int run_tokenize(const TokenizeOptions& opt) {
  if (opt.norms && opt.report)
    throw CLI::ValidationError("--norms", "--norms does not combine with --report");
  if (opt.report) return run_tokenize_report(opt);
  if (opt.model.empty() == opt.tokenizers.empty())
    throw CLI::ValidationError("-m/--tokenizer",
                               "give exactly one of -m MODEL or --tokenizer FILE");
  if (opt.tokenizers.size() > 1)
    throw CLI::ValidationError("--tokenizer", "several tokenizers are only compared with --report");
  if (!opt.jsonl.empty()) throw CLI::ValidationError("--jsonl", "--jsonl is for --report");
  if (opt.csv) throw CLI::ValidationError("--csv", "--csv is for --report");
  if (opt.budget) throw CLI::ValidationError("--budget", "--budget is for --report");
  if (opt.norms && opt.model.empty())
    throw CLI::ValidationError("--norms",
                               "--norms reads the embedding matrix: give the model with -m MODEL");
  if (opt.norms && (opt.decode || opt.count))
    throw CLI::ValidationError("--norms", "--norms does not combine with --decode or --count");
  const Tokenizer tok = open_tokenizer(opt);
  if (!opt.chat_file.empty()) return run_tokenize_chat(tok, opt);
  if (!opt.chat_template.empty() || !opt.chat_template_file.empty() || opt.no_generation_prompt)
    throw CLI::ValidationError("--chat-template", "template options need --chat FILE.json");
  if (opt.format == "text")
    throw CLI::ValidationError("--format", "--format text shows a rendered chat: it needs --chat FILE.json");
  if (opt.decode) {
    if (opt.has_text || !opt.file.empty() || opt.count)
      throw CLI::ValidationError(
          "--decode", "--decode takes ids; it does not combine with TEXT, --file or --count");
    return run_decode(tok, opt);
  }
  return run_encode(tok, opt);
}

}  // namespace

void add_tokenize_command(CLI::App& app, Action& action) {
  static TokenizeOptions opt;
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Text to token ids and pieces, ids to text, and token-inflation reports");
  sub->footer(
      "Examples:\n"
      "  llmctl tokenize -m stories260K.gguf \"Once upon a time\"\n"
      "  llmctl tokenize --tokenizer llama2-tokenizer.model --file prompt.txt --format pieces\n"
      "  llmctl tokenize -m stories260K.gguf --decode \"1 403 407 261 378\"\n"
      "  llmctl tokenize -m stories260K.gguf --norms \"Once upon a time\"\n"
      "  llmctl tokenize -m SmolLM2-135M-Instruct.Q4_1.gguf --chat chat.json --format text\n"
      "  llmctl tokenize --report --tokenizer A.gguf --tokenizer B.model --jsonl prompts.jsonl "
      "--budget 4096\n"
      "\nWithout TEXT or --file, text is read from standard input when it is not a terminal.\n"
      "--report counts tokens without BOS/EOS; inflation is relative to the first --tokenizer.\n"
      "Special-token text (\"<|im_start|>\") becomes its token, as llama.cpp does; "
      "--no-parse-special keeps it text.\n"
      "--chat FILE.json renders an OpenAI-style messages array (or {\"messages\": [...], "
      "\"tools\": ...}) with the model's Jinja chat template; --format text prints the prompt "
      "exactly, ids the ids `run` prefills (BOS added as llama.cpp does).\n"
      "Exit codes: 0 ok, 1 bad input file or error, 2 usage error, 130 stopped by Ctrl-C.");
  sub->add_option("-m,--model", opt.model, "GGUF model whose embedded vocabulary to use")
      ->type_name("FILE");
  sub->add_option("--tokenizer", opt.tokenizers,
                  "Tokenizer file: GGUF, sentencepiece .model or Hugging Face tokenizer.json "
                  "(repeat with --report)")
      ->allow_extra_args(false)
      ->type_name("FILE");
  sub->add_option("text", opt.text, "Text to tokenize");
  sub->add_option(
      "-f,--file", opt.file,
      "Read the text (or --report prompts, one per line) verbatim from FILE; - is stdin")
      ->type_name("FILE");
  sub->add_option("--jsonl", opt.jsonl,
                  "--report prompts: one JSON string or {\"prompt\"|\"text\": ...} per line")
      ->type_name("FILE");
  sub->add_flag("--no-bos", opt.no_bos, "Do not prepend BOS (default: as the vocabulary says)");
  sub->add_option("--format", opt.format,
                  "Output: ids (one line), pieces (id<TAB>piece per line), json, text (--chat: the "
      "rendered prompt)")
      ->check(one_of({"ids", "pieces", "json", "text"}));
  sub->add_option("--pre-tokenizer", opt.pre_tokenizer, kPreTokenizerHelp)
      ->type_name("NAME");
  sub->add_flag("--no-parse-special", opt.no_parse_special,
                "Treat special-token text in the input as plain text");
  sub->add_option("--chat", opt.chat_file,
                  "Render a conversation (OpenAI-style messages JSON) with the chat template")
      ->type_name("FILE");
  sub->add_option("--chat-template", opt.chat_template,
                  "--chat: a built-in template (llama2, llama3, chatml, zephyr) instead of the "
                  "model's")
      ->type_name("NAME");
  sub->add_option("--chat-template-file", opt.chat_template_file,
                  "--chat: a Jinja template file instead of the model's")
      ->type_name("FILE");
  sub->add_flag("--no-generation-prompt", opt.no_generation_prompt,
                "--chat: do not append the assistant header (add_generation_prompt=false)");
  sub->add_flag("--json", opt.json, "JSON output (same as --format json; also for --report)");
  sub->add_flag("--csv", opt.csv, "CSV output for --report");
  sub->add_option("--decode", opt.decode, "Decode token ids (\"ID ID ...\") to text instead")
      ->type_name("IDS");
  sub->add_flag("--count", opt.count, "Print only the number of tokens");
  sub->add_flag(
      "--norms", opt.norms,
      "Each token's id, piece and embedding L2 norm (table, or --json), and the prompt's mean norm "
      "against the vocabulary's: their mean and the percentile of the prompt mean among all token "
      "norms "
      "(needs -m)");
  sub->add_flag("--report", opt.report, "Token-inflation report comparing the --tokenizer files");
  sub->add_option("--budget", opt.budget, "--report: flag prompts over N tokens")
      ->check(at_least(1LL));
  sub->callback([&action, sub] {
    opt.has_text = sub->count("text") > 0;
    action = [] { return run_tokenize(opt); };
  });
}

}  // namespace llmctl::cli
