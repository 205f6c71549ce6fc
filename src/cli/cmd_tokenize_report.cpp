// llmctl tokenize --report: the token-inflation table, JSON or CSV.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/tokenize_options.h"
#include "core/error.h"
#include "core/text_io.h"
#include "tokenizer/inflation.h"

namespace llmctl::cli {

namespace {

std::string fmt_opt(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("n/a");
}

nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json row_json(const InflationRow& r) {
  nlohmann::json cpt = nlohmann::json::array(), infl = nlohmann::json::array();
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    cpt.push_back(opt_json(r.chars_per_token(t)));
    infl.push_back(opt_json(r.inflation_pct(t)));
  }
  return {{"label", r.label}, {"chars", r.chars}, {"bytes", r.bytes}, {"tokens", r.tokens},
          {"chars_per_token", cpt}, {"inflation_pct", infl}, {"over_budget", r.over_budget}};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void print_json(const std::vector<Tokenizer>& toks, const std::vector<std::string>& names,
                const InflationReport& rep) {
  nlohmann::json jt = nlohmann::json::array();
  for (size_t t = 0; t < toks.size(); ++t)
    jt.push_back({{"name", names[t]}, {"path", toks[t].source()}, {"kind", toks[t].kind()},
                  {"n_vocab", toks[t].n_vocab()}});
  nlohmann::json rows = nlohmann::json::array();
  for (const InflationRow& r : rep.rows) rows.push_back(row_json(r));
  const nlohmann::json j{{"tokenizers", jt},
                         {"budget", rep.budget ? nlohmann::json(*rep.budget) : nlohmann::json(nullptr)},
                         {"n_prompts", rep.rows.size()},
                         {"n_over_budget", rep.n_over_budget},
                         {"prompts", rows},
                         {"total", row_json(rep.total)}};
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

void print_csv(const std::vector<std::string>& names, const InflationReport& rep) {
  std::string header = "label,chars,bytes";
  for (const auto& n : names) header += ",tokens_" + csv_field(n);
  for (const auto& n : names) header += ",chars_per_token_" + csv_field(n);
  for (size_t t = 1; t < names.size(); ++t) header += ",inflation_pct_" + csv_field(names[t]);
  fmt::print("{},over_budget\n", header);
  auto print_row = [&](const InflationRow& r) {
    std::string line = fmt::format("{},{},{}", csv_field(r.label), r.chars, r.bytes);
    for (const int64_t n : r.tokens) line += fmt::format(",{}", n);
    for (size_t t = 0; t < r.tokens.size(); ++t) line += "," + fmt_opt(r.chars_per_token(t), "{:.4f}");
    for (size_t t = 1; t < r.tokens.size(); ++t) line += "," + fmt_opt(r.inflation_pct(t), "{:.2f}");
    fmt::print("{},{}\n", line, r.over_budget ? 1 : 0);
  };
  for (const InflationRow& r : rep.rows) print_row(r);
  print_row(rep.total);
}

void print_table(const std::vector<std::string>& names, const InflationReport& rep) {
  for (size_t t = 0; t < names.size(); ++t)
    fmt::print("[{}] {}{}\n", static_cast<char>('A' + t), names[t], t == 0 ? " (base)" : "");
  std::vector<std::string> head{"prompt", "chars", "bytes"};
  for (size_t t = 0; t < names.size(); ++t) head.push_back(fmt::format("tok[{}]", static_cast<char>('A' + t)));
  for (size_t t = 0; t < names.size(); ++t) head.push_back(fmt::format("c/t[{}]", static_cast<char>('A' + t)));
  for (size_t t = 1; t < names.size(); ++t) head.push_back(fmt::format("infl[{}]", static_cast<char>('A' + t)));
  if (rep.budget) head.push_back("budget");
  std::vector<std::vector<std::string>> cells{head};
  auto add_row = [&](const InflationRow& r) {
    std::string label = r.label.size() > 24 ? r.label.substr(0, 21) + "..." : r.label;
    std::vector<std::string> c{label, std::to_string(r.chars), std::to_string(r.bytes)};
    for (const int64_t n : r.tokens) c.push_back(std::to_string(n));
    for (size_t t = 0; t < r.tokens.size(); ++t) c.push_back(fmt_opt(r.chars_per_token(t), "{:.2f}"));
    for (size_t t = 1; t < r.tokens.size(); ++t) c.push_back(fmt_opt(r.inflation_pct(t), "{:+.1f}%"));
    if (rep.budget) c.push_back(r.over_budget ? "OVER" : "ok");
    cells.push_back(std::move(c));
  };
  for (const InflationRow& r : rep.rows) add_row(r);
  add_row(rep.total);
  std::vector<size_t> width(head.size(), 0);
  for (const auto& row : cells)
    for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i + 1 == cells.size()) {  // a rule above the total
      std::string rule;
      for (size_t k = 0; k < width.size(); ++k) rule += std::string(width[k] + 2, '-');
      fmt::print("{}\n", rule);
    }
    std::string line;
    for (size_t k = 0; k < cells[i].size(); ++k)
      line += k == 0 ? fmt::format("{:<{}}  ", cells[i][k], width[k])
                     : fmt::format("{:>{}}  ", cells[i][k], width[k]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  }
  if (rep.budget)
    fmt::print("{} of {} prompts over the budget of {} tokens\n", rep.n_over_budget, rep.rows.size(),
               *rep.budget);
}

}  // namespace

int run_tokenize_report(const TokenizeOptions& opt) {
  std::vector<std::string> paths = opt.tokenizers;
  if (!opt.model.empty()) paths.insert(paths.begin(), opt.model);
  if (paths.empty())
    throw CLI::ValidationError("--tokenizer", "--report needs at least one --tokenizer (or -m)");
  if (opt.file.empty() == opt.jsonl.empty())
    throw CLI::ValidationError("--file/--jsonl", "--report needs exactly one of --file or --jsonl");
  if (opt.has_text || opt.decode || opt.count)
    throw CLI::ValidationError("--report", "--report reads prompts from --file/--jsonl; TEXT, --decode and --count do not apply");
  if (opt.json && opt.csv) throw CLI::ValidationError("--json/--csv", "choose one of --json or --csv");

  std::vector<Tokenizer> toks;
  std::vector<const Tokenizer*> ptrs;
  std::vector<std::string> names;
  toks.reserve(paths.size());
  for (const std::string& p : paths) {
    toks.push_back(Tokenizer::from_file(p));
    names.push_back(std::filesystem::path(p).filename().string());
  }
  for (const Tokenizer& t : toks) ptrs.push_back(&t);

  const std::vector<Prompt> prompts =
      opt.jsonl.empty() ? prompts_from_lines(read_whole_file(opt.file))
                        : prompts_from_jsonl(read_whole_file(opt.jsonl), opt.jsonl);
  if (prompts.empty())
    throw Error(fmt::format("{}: no prompts found", opt.jsonl.empty() ? opt.file : opt.jsonl));
  std::optional<int64_t> budget;
  if (opt.budget) budget = static_cast<int64_t>(*opt.budget);
  const InflationReport rep = measure_inflation(ptrs, prompts, budget);

  if (opt.json) print_json(toks, names, rep);
  else if (opt.csv) print_csv(names, rep);
  else print_table(names, rep);
  return kExitOk;
}

}  // namespace llmctl::cli
