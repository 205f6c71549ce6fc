// `llmctl eval --scoring llama-cpp`: llama-perplexity's chunks and second-half scoring.
// The plan against llama-perplexity's rule restated here over token positions; the
// perplexity of stories260K against a step-by-step computation over Forward logits; the
// output naming the scoring; and SmolLM2's perplexity against llama.cpp's own, from
// tests/fixtures/llamacpp_perplexity_smollm2.json (tools/llamacpp_perplexity.py, which runs
// llama-perplexity's algorithm through llama-cpp-python 0.3.36): within 0.1 % on an F16 copy
// of the weights and within 2.5 % on the Q4_1 file over a 1700-token text (measured 1.2 %; the
// test says why), and within the 0.5 % on the Q4_1 file over a 40k-token text
// (tests/fixtures/llamacpp_perplexity_smollm2_licenses.json; measured -0.04 %).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "backend/selection.h"
#include "core/error.h"
#include "diag/builtin_text.h"
#include "diag/eval.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

using namespace llmctl;
using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;
using nlohmann::json;

namespace {

constexpr int32_t kBos = -1;  // stands for BOS among text positions 0..n-1

// One scored prediction: the tokens seen (BOS = kBos) and the token predicted.
using Scored = std::pair<std::vector<int32_t>, int32_t>;

// llama-perplexity's perplexity(), restated over positions: tokens = [BOS] + text, chunks of
// ctx, BOS over each chunk's first token, positions ctx/2 .. ctx-2 predict the next one.
std::vector<Scored> llama_perplexity_scored(int32_t n_text, int32_t ctx, bool bos) {
  std::vector<int32_t> tokens;
  if (bos) tokens.push_back(kBos);
  for (int32_t t = 0; t < n_text; ++t) tokens.push_back(t);
  std::vector<Scored> out;
  const int32_t n_chunk = static_cast<int32_t>(tokens.size()) / ctx;
  for (int32_t i = 0; i < n_chunk; ++i) {
    std::vector<int32_t> chunk(tokens.begin() + i * ctx, tokens.begin() + (i + 1) * ctx);
    if (bos) chunk[0] = kBos;
    for (int32_t j = ctx / 2; j < ctx - 1; ++j)
      out.push_back({std::vector<int32_t>(chunk.begin(), chunk.begin() + j + 1),
                     chunk[static_cast<size_t>(j) + 1]});
  }
  return out;
}

// What run_windows scores for a window plan (eval.h: position i predicts seq[i + 1]).
std::vector<Scored> planned_scored(const std::vector<EvalWindow>& windows, bool bos) {
  std::vector<Scored> out;
  for (const EvalWindow& w : windows) {
    std::vector<int32_t> seq;
    if (bos) seq.push_back(kBos);
    for (int64_t t = w.begin; t < w.begin + w.n; ++t) seq.push_back(static_cast<int32_t>(t));
    for (size_t i = static_cast<size_t>(w.score_from); i + 1 < seq.size(); ++i)
      out.push_back({std::vector<int32_t>(seq.begin(), seq.begin() + static_cast<long>(i) + 1),
                     seq[i + 1]});
  }
  return out;
}

}  // namespace

TEST_CASE("plan_llamacpp_windows scores exactly what llama-perplexity scores", "[cpu]") {
  for (bool bos : {true, false}) {
    for (int32_t ctx : {3, 4, 7, 8, 16}) {
      for (int32_t n_text : {5, 6, 7, 8, 15, 16, 17, 31, 32, 33, 100}) {
        INFO("bos " << bos << " ctx " << ctx << " n_text " << n_text);
        if (n_text + (bos ? 1 : 0) < 2 * ctx) {
          CHECK_THROWS_AS(plan_llamacpp_windows(n_text, ctx, bos), Error);
          continue;
        }
        const std::vector<EvalWindow> w = plan_llamacpp_windows(n_text, ctx, bos);
        CHECK(planned_scored(w, bos) == llama_perplexity_scored(n_text, ctx, bos));
        for (const EvalWindow& x : w) {
          CHECK(x.n + (bos ? 1 : 0) == ctx);
          CHECK(n_scored(x, bos) == ctx - 1 - ctx / 2);
        }
      }
    }
  }
  CHECK_THROWS_AS(plan_llamacpp_windows(100, 2, true), Error);  // nothing in the second half
  CHECK(plan_windows(EvalScoring::Llmctl, 40, 8, true).size() == plan_windows(40, 8, true).size());
}

TEST_CASE("stories260K: llama-cpp scoring equals a step-by-step computation over Forward logits",
          "[cpu]") {
  const LoadedModel m = load_model(require_test_file("models/stories260K.gguf"));
  const Tokenizer tok = Tokenizer::from_gguf(*m.gguf);
  const std::vector<int32_t> ids = tok.encode(builtin_text("stories"), false);
  const int64_t ctx = 40;
  const int32_t bos = tok.bos_id();
  REQUIRE(bos >= 0);
  REQUIRE(static_cast<int64_t>(ids.size()) > 4 * ctx);
  BackendChoice cpu;
  cpu.device = "cpu";
  const auto backend = make_backend(cpu);

  // Reference: llama-perplexity's chunks of [BOS] + ids, BOS over each chunk's first token,
  // one step() at a time, scoring from position ctx/2 on; log-softmax in long double.
  std::vector<int32_t> tokens = {bos};
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  long double nll = 0;
  int64_t count = 0;
  {
    Forward fwd(m.config, m.weights, *backend, ctx);
    for (size_t c = 0; c + static_cast<size_t>(ctx) <= tokens.size(); c += static_cast<size_t>(ctx)) {
      fwd.reset();
      for (int64_t j = 0; j + 1 < ctx; ++j) {
        const int32_t in = j == 0 ? bos : tokens[c + static_cast<size_t>(j)];
        const std::vector<float> logits = fwd.step(in);
        if (j < ctx / 2) continue;
        long double mx = logits[0], sum = 0;
        for (float v : logits) mx = std::max(mx, static_cast<long double>(v));
        for (float v : logits) sum += std::exp(static_cast<long double>(v) - mx);
        const int32_t target = tokens[c + static_cast<size_t>(j) + 1];
        nll -= static_cast<long double>(logits[static_cast<size_t>(target)]) - mx - std::log(sum);
        ++count;
      }
    }
  }
  Forward fwd(m.config, m.weights, *backend, ctx);
  const auto windows =
      plan_windows(EvalScoring::LlamaCpp, static_cast<int64_t>(ids.size()), ctx, true);
  const EvalResult r = evaluate(fwd, ids, bos, windows, nullptr, nullptr, {});
  CHECK(r.n_scored == count);
  CHECK(r.ppl == Approx(std::exp(static_cast<double>(nll / count))).epsilon(1e-5));
  // The same model and text scored our way: every token, the early ones with little context.
  const EvalResult ours = evaluate(fwd, ids, bos, plan_windows(static_cast<int64_t>(ids.size()), ctx, true),
                                   nullptr, nullptr, {});
  WARN("stories260K, ctx 40: llama-cpp scoring ppl " << r.ppl << ", llmctl scoring " << ours.ppl);
  CHECK(ours.n_scored == static_cast<int64_t>(ids.size()));
}

TEST_CASE("eval names its scoring in text, --json and the summary line", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto ours = run_llmctl({"eval", "-m", model, "--ctx", "32", "--device", "cpu"});
  REQUIRE(ours.code == 0);
  CHECK(ours.out.find("scoring     llmctl (every text token once)\n") != std::string::npos);
  CHECK(ours.err.find(" scoring=llmctl ") != std::string::npos);
  const auto ll = run_llmctl(
      {"eval", "-m", model, "--ctx", "32", "--device", "cpu", "--scoring", "llama-cpp", "--json"});
  REQUIRE(ll.code == 0);
  const json j = json::parse(ll.out);
  CHECK(j["scoring"] == "llama-cpp");
  CHECK(j["n_scored"] == j["n_windows"].get<int64_t>() * (32 - 1 - 16));
  CHECK(ll.err.find(" scoring=llama-cpp ") != std::string::npos);
  // Fewer tokens than two windows: llama-perplexity refuses, so do we.
  const auto few = run_llmctl(
      {"eval", "-m", model, "--ctx", "4096", "--device", "cpu", "--scoring", "llama-cpp"});
  CHECK(few.code == 1);
  CHECK(few.err.find("llama-perplexity's scoring needs at least 2 x ctx = 8192") !=
        std::string::npos);
  const auto bad = run_llmctl({"eval", "-m", model, "--scoring", "llamacpp"});
  CHECK(bad.code == 2);
}

// Measured (llama.cpp 0c1e570 through llama-cpp-python 0.3.36, AVX-512 EPYC, 1700-token text,
// 819 and 762 scored tokens at n_ctx 128 and 256):
//   F16 copy of the Q4_1 weights: llmctl 22.0496 / 21.6268, llama.cpp 22.0539 / 21.6271
//     (-0.02 %, -0.001 %): the scoring rule is the same to the last token.
//   The Q4_1 file itself: llmctl 22.0172 / 21.7716, llama.cpp 22.2760 / 21.5337 (-1.2 %,
//     +1.1 %). Both engines' Q4_1 matmuls round the activations to 8 bits (llama.cpp's Q8_1,
//     our int8 kernels), each its own way: on chunk 0 both are 0.175 logits (centered mean
//     |d|) from a float64 computation of the same weights (tools/reference_forward.py), the
//     per-token NLL of the two engines differs by std 0.22 nats, so a mean over ~800 tokens
//     differs by about 0.008 nats (0.8 %) by chance alone; llmctl's reference kernels
//     (--cpu-reference in run) give exactly the float64 value there.
// So on this short text the F16 copy is held to 0.1 % and the Q4_1 file to 2.5 % (3 sigma of
// that noise): a wrong chunking, BOS or half moves either far more. The 0.5 % on the
// Q4_1 file is the next test's, over a text 23 times longer.
TEST_CASE("SmolLM2: eval --scoring llama-cpp agrees with llama.cpp's perplexity",
          "[cli][golden]") {
  const std::string q4_1 = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const json ref = json::parse(
      test::read_file(test::fixture_path("llamacpp_perplexity_smollm2.json")));
  const std::string text = test::fixture_path(
      std::filesystem::path(ref["text"].get<std::string>()).filename().string());

  // Both tokenize alike: llmctl's ids of the text as llama-perplexity reads it (one final
  // newline dropped) are llama.cpp's, BOS included when the vocabulary wants it.
  std::string body = test::read_file(text);
  if (!body.empty() && body.back() == '\n') body.pop_back();
  const std::string stripped = test::temp_dir() + "/ppl_text.txt";
  test::write_file(stripped, body);
  const auto t = run_llmctl({"tokenize", "-m", q4_1, "--no-parse-special", "--file", stripped});
  REQUIRE(t.code == 0);
  std::vector<int32_t> ids;
  std::istringstream in(t.out);
  for (int32_t id = 0; in >> id;) ids.push_back(id);
  CHECK(ids == ref["token_ids"].get<std::vector<int32_t>>());

  // The F16 copy, as the generator's instructions make it.
  const std::string f16 = test::temp_dir() + "/SmolLM2-135M-Instruct.F16-from-Q4_1.gguf";
  const auto q = run_llmctl({"quantize", q4_1, f16, "--type", "f16", "--allow-requantize"});
  REQUIRE(q.code == 0);

  for (const json& m : ref["models"]) {
    const bool is_f16 = m["model"] == "SmolLM2-135M-Instruct.F16-from-Q4_1.gguf";
    const double tolerance = is_f16 ? 0.001 : 0.025;
    for (const json& r : m["results"]) {
      const int64_t n_ctx = r["n_ctx"];
      INFO(m["model"].get<std::string>() << " n_ctx " << n_ctx);
      const auto e = run_llmctl({"eval", "-m", is_f16 ? f16 : q4_1, "--text", text, "--ctx",
                                 std::to_string(n_ctx), "--scoring", "llama-cpp", "--json"});
      INFO(e.err);
      REQUIRE(e.code == 0);
      const json j = json::parse(e.out);
      CHECK(j["scoring"] == "llama-cpp");
      CHECK(j["n_windows"] == r["n_chunks"]);
      CHECK(j["n_scored"] == r["n_scored"]);
      const double ppl = j["ppl"], want = r["ppl"];
      WARN(m["model"].get<std::string>() << " n_ctx " << n_ctx << ": llmctl " << ppl
                                         << ", llama.cpp " << want << " ("
                                         << 100.0 * (ppl - want) / want << " %)");
      CHECK(std::abs(ppl - want) <= tolerance * want);
    }
  }
}

// The 0.5 % on the Q4_1 file itself, over a text long enough that the 8-bit activation
// rounding noise above averages out (per-token NLL differences of std ~0.2 nats over ~20,000
// scored tokens: about 0.15 % by chance), as llama.cpp's published perplexities are taken over
// long texts too (wikitext-2). The text is eight licence texts every Debian system carries in
// /usr/share/common-licenses (base-files), concatenated in the fixture's order: about 40,000
// tokens at llama-perplexity's default -c 512. The token ids in the fixture prove the text is
// the one llama.cpp scored.
TEST_CASE("SmolLM2 Q4_1: eval --scoring llama-cpp within 0.5 % of llama.cpp on a 40k-token text",
          "[cli][golden][slow]") {
  const std::string q4_1 = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const json ref = json::parse(
      test::read_file(test::fixture_path("llamacpp_perplexity_smollm2_licenses.json")));
  std::string raw;  // the files concatenated, as `cat` gives them
  for (const json& part : ref["text"]) {
    const std::string path = part.get<std::string>();
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "SKIPPED: %s is missing (Debian's base-files installs it)\n",
                   path.c_str());
      std::_Exit(77);
    }
    raw += test::read_file(path);
  }
  REQUIRE(!raw.empty());
  // Tokenized as llama-perplexity's -f reads it: one final newline dropped.
  const std::string stripped = test::temp_dir() + "/licenses_stripped.txt";
  test::write_file(stripped, raw.substr(0, raw.size() - (raw.back() == '\n' ? 1 : 0)));
  const auto t = run_llmctl({"tokenize", "-m", q4_1, "--no-parse-special", "--file", stripped});
  REQUIRE(t.code == 0);
  std::vector<int32_t> ids;
  std::istringstream in(t.out);
  for (int32_t id = 0; in >> id;) ids.push_back(id);
  INFO("a different text (another base-files version?) or a tokenizer difference");
  REQUIRE(ids == ref["token_ids"].get<std::vector<int32_t>>());

  const json& r = ref["models"][0]["results"][0];
  REQUIRE(ref["models"][0]["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string text = test::temp_dir() + "/licenses.txt";
  test::write_file(text, raw);  // eval --scoring llama-cpp drops the newline itself
  const auto e = run_llmctl({"eval", "-m", q4_1, "--text", text, "--ctx",
                             std::to_string(r["n_ctx"].get<int64_t>()), "--scoring", "llama-cpp",
                             "--json"});
  INFO(e.err);
  REQUIRE(e.code == 0);
  const json j = json::parse(e.out);
  CHECK(j["n_windows"] == r["n_chunks"]);
  CHECK(j["n_scored"] == r["n_scored"]);
  const double ppl = j["ppl"], want = r["ppl"];
  WARN("Q4_1, 40k-token text, n_ctx " << r["n_ctx"] << ": llmctl " << ppl << ", llama.cpp "
                                      << want << " (" << 100.0 * (ppl - want) / want << " %)");
  CHECK(std::abs(ppl - want) <= 0.005 * want);
}
