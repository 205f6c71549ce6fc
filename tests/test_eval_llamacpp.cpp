// `llmctl eval --scoring llama-cpp`: llama-perplexity's chunks and second-half scoring.
// The plan against llama-perplexity's rule restated here over token positions; the
// perplexity of stories260K against a step-by-step computation over Forward logits; the
// output naming the scoring; and SmolLM2's perplexity within 0.5 % of llama.cpp's own, from
// tests/fixtures/llamacpp_perplexity_smollm2.json (tools/llamacpp_perplexity.py, which runs
// llama-perplexity's algorithm through llama-cpp-python 0.3.36).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "backend/registry.h"
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
