// `llmctl tokenize` as users and scripts call it; reference cases go through the CLI too.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

std::vector<int> parse_ids_line(const std::string& s) {
  std::istringstream in(s);
  std::vector<int> ids;
  int v = 0;
  while (in >> v) ids.push_back(v);
  return ids;
}

std::string write_temp(const std::string& name, const std::string& content) {
  const std::string path = llmctl::test::temp_dir() + "/" + name;
  llmctl::test::write_file(path, content);
  return path;
}

}  // namespace

TEST_CASE("tokenize a model's prompt to the golden ids", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"tokenize", "-m", model, "Once upon a time"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "1 403 407 261 378\n");
  r = run_llmctl({"tokenize", "-m", model, "--no-bos", "Once upon a time"});
  CHECK(r.out == "403 407 261 378\n");
  r = run_llmctl({"tokenize", "-m", model, "--count", "Once upon a time"});
  CHECK(r.out == "5\n");
}

TEST_CASE("tokenize output formats", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"tokenize", "-m", model, "--format", "json", "Once upon a time"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["ids"] == nlohmann::json::array({1, 403, 407, 261, 378}));
  CHECK(j["n_tokens"] == 5);
  CHECK(j["pieces"].size() == 5);
  CHECK(j["kind"] == "llama");
  r = run_llmctl({"tokenize", "-m", model, "--json", "Once upon a time"});
  CHECK(nlohmann::json::parse(r.out)["ids"] == j["ids"]);
  r = run_llmctl({"tokenize", "-m", model, "--format", "pieces", "--no-bos", "Once upon"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("403\t") == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2);
  r = run_llmctl({"tokenize", "-m", model, "--format", "xml", "x"});
  CHECK(r.code == 2);
}

TEST_CASE("tokenize --file reads verbatim and stdin is read when piped", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string with_nl = write_temp("nl.txt", "Once upon a time\n");
  auto a = run_llmctl({"tokenize", "-m", model, "--file", with_nl});
  auto b = run_llmctl({"tokenize", "-m", model, "Once upon a time"});
  REQUIRE(a.code == 0);
  CHECK(a.out != b.out);  // the newline is a token, not stripped
  CHECK(parse_ids_line(a.out).size() > parse_ids_line(b.out).size());
  auto c = run_llmctl({"tokenize", "-m", model}, "Once upon a time\n");
  CHECK(c.code == 0);
  CHECK(c.out == a.out);
  auto d = run_llmctl({"tokenize", "-m", model, "--file", "-"}, "Once upon a time\n");
  CHECK(d.out == a.out);
}

TEST_CASE("tokenize --decode", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"tokenize", "-m", model, "--decode", "1 403 407 261 378"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "Once upon a time");
  r = run_llmctl({"tokenize", "-m", model, "--decode", "[403, 407]", "--json"});
  CHECK(nlohmann::json::parse(r.out)["text"] == "Once upon");
  r = run_llmctl({"tokenize", "-m", model, "--decode", "1 abc"});
  CHECK(r.code == 1);
  CHECK(r.err.find("'abc' is not a token id") != std::string::npos);
  r = run_llmctl({"tokenize", "-m", model, "--decode", "1 512"});
  CHECK(r.code == 1);
  CHECK(r.err.find("512") != std::string::npos);
}

TEST_CASE("tokenize reports bad input with exit codes", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"tokenize", "-m", "/nonexistent/model.gguf", "x"});
  CHECK(r.code == 1);
  CHECK(r.err.find("llmctl: error: /nonexistent/model.gguf: cannot open") == 0);
  r = run_llmctl({"tokenize", "-m", model, "--tokenizer", model, "x"});
  CHECK(r.code == 2);
  r = run_llmctl({"tokenize", "x"});
  CHECK(r.code == 2);
  r = run_llmctl({"tokenize", "-m", model, "--file", "/nonexistent.txt"});
  CHECK(r.code == 1);
  const std::string junk = write_temp("junk.model", "this is not a tokenizer");
  r = run_llmctl({"tokenize", "--tokenizer", junk, "x"});
  CHECK(r.code == 1);
  CHECK(r.err.find(junk) != std::string::npos);
}

TEST_CASE("every reference case passes through the CLI", "[cli][golden][slow]") {
  for (const char* vocab :
       {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf",
        "vocab/ggml-vocab-starcoder.gguf", "vocab/ggml-vocab-deepseek-coder.gguf"}) {
    const std::string path = require_test_file(vocab);
    const auto cases = llmctl::test::load_vocab_cases(vocab);
    REQUIRE(cases.size() > 10);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO(vocab << " case " << i);
      const std::string f = write_temp("case.txt", cases[i].text);
      const auto r = run_llmctl({"tokenize", "--tokenizer", path, "--no-bos", "--file", f});
      REQUIRE(r.code == 0);
      std::vector<int> expected(cases[i].ids.begin(), cases[i].ids.end());
      CHECK(parse_ids_line(r.out) == expected);
    }
  }
}

TEST_CASE("token-inflation report in table, json and csv", "[cli]") {
  const std::string spm = require_test_file("models/llama2-tokenizer.model");
  const std::string gpt2 = require_test_file("vocab/ggml-vocab-gpt-2.gguf");
  const std::string jsonl = write_temp(
      "p.jsonl", "{\"id\": \"hello\", \"prompt\": \"Hello world\"}\n\"\\u00c4pfel und Birnen\"\n");
  auto r = run_llmctl({"tokenize", "--report", "--tokenizer", spm, "--tokenizer", gpt2, "--jsonl",
                       jsonl, "--budget", "3", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["prompts"].size() == 2);
  CHECK(j["prompts"][0]["label"] == "hello");
  CHECK(j["prompts"][0]["chars"] == 11);
  CHECK(j["prompts"][1]["chars"] == 16);
  CHECK(j["prompts"][1]["bytes"] == 17);
  const auto& t0 = j["prompts"][0]["tokens"];
  CHECK(j["total"]["tokens"][0] == t0[0].get<int>() + j["prompts"][1]["tokens"][0].get<int>());
  CHECK(j["budget"] == 3);
  CHECK(j["tokenizers"][1]["kind"] == "gpt2");

  r = run_llmctl(
      {"tokenize", "--report", "--tokenizer", spm, "--tokenizer", gpt2, "--jsonl", jsonl, "--csv"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("label,chars,bytes,tokens_") == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 4);  // header, 2 prompts, total

  const std::string txt = write_temp("p.txt", "Hello world\n\nsecond prompt\n");
  r = run_llmctl({"tokenize", "--report", "--tokenizer", spm, "--tokenizer", gpt2, "--file", txt,
                  "--budget", "1"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(base)") != std::string::npos);
  CHECK(r.out.find("total") != std::string::npos);
  CHECK(r.out.find("OVER") != std::string::npos);

  const std::string bad = write_temp("bad.jsonl", "\"ok\"\n{oops\n");
  r = run_llmctl({"tokenize", "--report", "--tokenizer", spm, "--jsonl", bad});
  CHECK(r.code == 1);
  CHECK(r.err.find("bad.jsonl:2: invalid JSON") != std::string::npos);
  // a deeply nested "id" (the label) is that line's error, not a stack overflow (exit 139)
  const std::string deep = write_temp(
      "deep.jsonl", "\"ok\"\n{\"prompt\": \"x\", \"id\": " + std::string(300000, '[') +
                        std::string(300000, ']') + "}\n");
  r = run_llmctl({"tokenize", "--report", "--tokenizer", spm, "--jsonl", deep});
  CHECK(r.code == 1);
  CHECK(r.err.find("deep.jsonl:2: nested deeper than 64 levels") != std::string::npos);
  r = run_llmctl({"tokenize", "--report", "--tokenizer", spm});
  CHECK(r.code == 2);
}

TEST_CASE("tokenize --norms: each token's embedding norm against numpy's", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  // Per-token norms of token_embd from tools/gen_svd_embed_fixture.py (gguf-py + numpy).
  const auto golden = nlohmann::json::parse(llmctl::test::read_file(
      llmctl::test::fixture_path("svd_embed_stories260K.json")))["token_embd"]["norms"];
  const std::vector<int> ids = {1, 403, 407, 261, 378};  // "Once upon a time" (golden ids above)
  auto r = run_llmctl({"tokenize", "-m", model, "--norms", "--json", "Once upon a time"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["tokens"].size() == ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double g = golden[static_cast<size_t>(ids[i])].get<double>();
    CHECK(j["tokens"][i]["id"] == ids[i]);
    CHECK(j["tokens"][i]["norm"].get<double>() == Approx(g).epsilon(1e-9));
    sum += g;
  }
  CHECK(j["tokens"][1]["piece"] == "\u2581Once");
  const double mean = sum / static_cast<double>(ids.size());
  CHECK(j["prompt_mean_norm"].get<double>() == Approx(mean).epsilon(1e-9));
  double vocab_mean = 0, below = 0;
  for (const auto& g : golden) {
    vocab_mean += g.get<double>();
    below += g.get<double>() <= mean ? 1 : 0;
  }
  CHECK(j["vocab_size"] == golden.size());
  CHECK(j["vocab_mean_norm"].get<double>() ==
        Approx(vocab_mean / static_cast<double>(golden.size())).epsilon(1e-9));
  CHECK(j["prompt_mean_percentile"].get<double>() ==
        Approx(100 * below / static_cast<double>(golden.size())));

  r = run_llmctl({"tokenize", "-m", model, "--norms", "Once upon a time"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("percentile") != std::string::npos);
  CHECK(r.out.find("prompt: 5 tokens, mean norm") != std::string::npos);
  CHECK(r.out.find("vocabulary: 512 tokens") != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1 + 5 + 2);

  const std::string spm = require_test_file("vocab/ggml-vocab-llama-spm.gguf");
  r = run_llmctl({"tokenize", "--tokenizer", spm, "--norms", "x"});
  CHECK(r.code == 2);  // no model
  r = run_llmctl({"tokenize", "-m", spm, "--norms", "x"});
  CHECK(r.code == 1);  // a vocabulary without an embedding matrix
  CHECK(r.err.find("token_embd.weight") != std::string::npos);
  r = run_llmctl({"tokenize", "-m", model, "--norms", "--count", "x"});
  CHECK(r.code == 2);
}
