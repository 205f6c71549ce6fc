// `llmctl run --attn-stats` and `--acf [--stop-on-loop]` as a user calls them on stories260K:
// the tables on stderr, the --json objects checked against the run's own shape (tokens fed,
// scores per head), the loop found in a greedy continuation that repeats a sentence and none
// in one that does not, finish=loop, and the usage errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

// Greedy stories260K prompts: "Anna" says "They have a big box." three times by generated
// token 58 and, after a detour, ends (tokens ~250-400) repeating "They see the box."; "Once
// upon a time" tells a story without a loop for 400 tokens.
const char* const kLoopPrompt = "Anna";
const char* const kStoryPrompt = "Once upon a time";

std::vector<std::string> greedy(const std::string& prompt, const std::string& n) {
  return {"run",
          "-m",
          require_test_file("models/stories260K.gguf"),
          "-p",
          prompt,
          "-n",
          n,
          "--temp",
          "0",
          "--ignore-eos"};
}

std::vector<std::string> with(std::vector<std::string> args,
                              std::initializer_list<const char*> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// stderr's last line, which must be the summary line.
std::string last_line(const std::string& err) {
  REQUIRE(!err.empty());
  REQUIRE(err.back() == '\n');
  const std::string body = err.substr(0, err.size() - 1);
  const size_t nl = body.rfind('\n');
  const std::string line = nl == std::string::npos ? body : body.substr(nl + 1);
  REQUIRE(line.rfind("llmctl-run: ", 0) == 0);
  return line;
}

}  // namespace

TEST_CASE("run --attn-stats: table on stderr, same text, summary line last", "[cli]") {
  const auto plain = run_llmctl(greedy(kStoryPrompt, "40"));
  const auto r = run_llmctl(with(greedy(kStoryPrompt, "40"), {"--attn-stats"}));
  REQUIRE(r.code == 0);
  CHECK(r.out == plain.out);  // measuring changes nothing that is computed
  CHECK(r.err.find("attention statistics: 5 layers x 8 heads over 44 query tokens") !=
        std::string::npos);
  CHECK(r.err.find("layer       max head   pos") != std::string::npos);
  for (const char* row : {"\n  emb ", "\n    0 ", "\n    4 "})
    CHECK(r.err.find(row) != std::string::npos);
  CHECK(last_line(r.err).find("finish=n_predict") != std::string::npos);
}

TEST_CASE("run --attn-stats with 2>&1: the table starts on a line of its own", "[cli]") {
  const auto plain = run_llmctl(greedy(kStoryPrompt, "12"));
  REQUIRE(plain.code == 0);
  REQUIRE(!plain.out.empty());
  REQUIRE(plain.out.back() != '\n');  // piped text is exact: no newline of ours at its end
  const auto merged = run_llmctl(with(greedy(kStoryPrompt, "12"), {"--attn-stats"}), "", true);
  REQUIRE(merged.code == 0);
  CHECK(merged.out.find(plain.out + "\nattention statistics: ") != std::string::npos);
  // Separate files: stderr as before, no blank line of ours.
  const auto apart = run_llmctl(with(greedy(kStoryPrompt, "12"), {"--attn-stats"}));
  CHECK(apart.out == plain.out);
  CHECK(apart.err.find("\nattention statistics: ") != std::string::npos);
  CHECK(apart.err.find("\n\nattention statistics: ") == std::string::npos);
}

TEST_CASE("run --attn-stats --json: per layer and head, counts that add up", "[cli]") {
  const auto r = run_llmctl(with(greedy(kStoryPrompt, "20"), {"--attn-stats", "--json"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& a = j.at("attn_stats");
  // Tokens fed: the prompt and every generated token but the last; query p sees p + 1 keys.
  const auto n = static_cast<int64_t>(j["prompt_ids"].size() + j["generated_ids"].size()) - 1;
  CHECK(a["n_tokens"] == n);
  CHECK(a["alert_threshold"].is_null());  // no score threshold unless --attn-alert T
  REQUIRE(a["layers"].size() == 5);
  double layer_max = -1e300;
  for (const auto& l : a["layers"]) {
    REQUIRE(l["heads"].size() == 8);
    double head_max = -1e300;
    for (const auto& h : l["heads"]) {
      CHECK(h["queries"] == n);
      CHECK(h["nan"] == 0);
      CHECK(h["min"].get<double>() <= h["mean"].get<double>());
      CHECK(h["mean"].get<double>() <= h["max"].get<double>());
      CHECK(h["std"].get<double>() >= 0.0);
      CHECK(h["entropy"].get<double>() <= h["uniform_entropy"].get<double>() + 1e-6);
      CHECK(h["max_position"].get<int64_t>() < n);
      head_max = std::max(head_max, h["max"].get<double>());
    }
    CHECK(l["max"].get<double>() == head_max);
    CHECK(l["heads"][l["max_head"].get<size_t>()]["max"] == l["max"]);
    CHECK(l["residual_abs_max"].get<double>() > 0.0);
    layer_max = std::max(layer_max, head_max);
  }
  CHECK(a["first_nonfinite_residual_layer"].is_null());
  CHECK(a["embeddings_abs_max"].get<double>() > 0.0);
  // Nothing is non-finite, so no alert; the fp16 risk counts rows over ln(65504).
  CHECK(a["alert"].is_null());
  CHECK(a["fp16_risk"]["limit"].get<double>() == Approx(std::log(65504.0)));
  CHECK((a["fp16_risk"]["rows"].get<int64_t>() > 0) == (layer_max > std::log(65504.0)));
  CHECK(a["fp16_risk"]["of_rows"] == n * 8 * 5);
}

TEST_CASE("run --attn-stats on SmolLM2: no alert by default, the fp16 risk as information",
          "[cli]") {
  // SmolLM2-135M's layer 7 reaches scaled scores of ~16.5: normal for a real model (the old
  // default threshold of 15 alerted on it), above ln(65504) = 11.09 (the fp16 risk).
  const std::vector<std::string> args = {
      "run",
      "-m",
      require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
      "-p",
      "The capital of France is",
      "-n",
      "4",
      "--temp",
      "0",
      "--attn-stats"};
  const auto r = run_llmctl(args);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("attn-alert") == std::string::npos);
  CHECK(r.err.find("info: ") != std::string::npos);
  CHECK(r.err.find("rows have a max score above ln(65504) = 11.09") != std::string::npos);
  CHECK(last_line(r.err).find("finish=n_predict") != std::string::npos);
  const auto j = run_llmctl(with(args, {"--json"}));
  REQUIRE(j.code == 0);
  const auto a = nlohmann::json::parse(j.out).at("attn_stats");
  CHECK(a["alert"].is_null());
  const auto& risk = a["fp16_risk"];
  REQUIRE(risk["rows"].get<int64_t>() > 0);
  CHECK(risk["largest"].get<double>() > std::log(65504.0));
  const auto& first = a["layers"][risk["layer"].get<size_t>()];
  CHECK(first["fp16_risk_rows"].get<int64_t>() > 0);
  for (size_t l = 0; l < risk["layer"].get<size_t>(); ++l)
    CHECK(a["layers"][l]["max"].get<double>() <= std::log(65504.0));
  // Opting in to a threshold still alerts on the same run.
  const auto t = run_llmctl(with(args, {"--attn-alert", "12", "--json"}));
  REQUIRE(t.code == 0);
  const auto ta = nlohmann::json::parse(t.out).at("attn_stats");
  CHECK(ta["alert"]["kind"] == "score_max");
  CHECK(ta["alert_threshold"] == 12.0);
}

TEST_CASE("run --attn-alert: the first score over the threshold is named, exit code 0", "[cli]") {
  const auto r = run_llmctl(with(greedy(kStoryPrompt, "8"), {"--attn-alert", "2", "--json"}));
  REQUIRE(r.code == 0);
  const auto a = nlohmann::json::parse(r.out).at("attn_stats");  // --attn-alert implies it
  const auto& al = a.at("alert");
  REQUIRE(al.is_object());
  CHECK(al["kind"] == "score_max");
  CHECK(al["value"].get<double>() > 2.0);
  const auto& head = a["layers"][al["layer"].get<size_t>()]["heads"][al["head"].get<size_t>()];
  CHECK(al["value"].get<double>() <= head["max"].get<double>());
  // No earlier layer can hold a score over 2 at the first chunk's positions (the prompt),
  // or the alert would name it: prompt-only runs make this checkable.
  const auto p = run_llmctl(with(greedy(kStoryPrompt, "0"), {"--attn-alert", "2", "--json"}));
  REQUIRE(p.code == 0);
  const auto pa = nlohmann::json::parse(p.out).at("attn_stats");
  for (size_t l = 0; l < al["layer"].get<size_t>(); ++l) CHECK(pa["layers"][l]["max"] <= 2.0);
  CHECK(r.err.find("llmctl: attn-alert: layer " + std::to_string(al["layer"].get<int>()) +
                   " head " + std::to_string(al["head"].get<int>())) != std::string::npos);
}

TEST_CASE("run --acf finds the loop of a sentence-repeating continuation and none otherwise",
          "[cli]") {
  const auto r = run_llmctl(with(greedy(kLoopPrompt, "400"), {"--acf", "--json"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& loop = j.at("acf").at("loop");
  REQUIRE(loop["detected"] == true);
  CHECK(loop["at_end"] == true);
  // Check the claim on the ids themselves: at detected_at, the last two periods repeat.
  const auto ids = j["generated_ids"].get<std::vector<int32_t>>();
  const auto p = loop["period"].get<size_t>(), at = loop["detected_at"].get<size_t>();
  REQUIRE(p >= 2);
  REQUIRE(at >= 3 * p);
  REQUIRE(at <= ids.size());
  for (size_t t = at - 2 * p; t < at; ++t) CHECK(ids[t] == ids[t - p]);
  CHECK(j["acf"]["tokens"]["acf"].size() == 200);
  // By the end the repetition dominates the whole series: the ACF's period is the loop's.
  CHECK(j["acf"]["tokens"]["period"] == p);
  CHECK(j["acf"]["top1_prob"]["mean"].get<double>() > 0.0);
  CHECK(j["acf"]["top1_prob"]["mean"].get<double>() <= 1.0);

  const auto text = run_llmctl(with(greedy(kLoopPrompt, "400"), {"--acf"}));
  REQUIRE(text.code == 0);
  CHECK(text.err.find("autocorrelation of 400 generated tokens") != std::string::npos);
  CHECK(text.err.find("  loop: detected: period " + std::to_string(p) + " tokens") !=
        std::string::npos);

  const auto story = run_llmctl(with(greedy(kStoryPrompt, "400"), {"--acf", "--json"}));
  REQUIRE(story.code == 0);
  const auto s = nlohmann::json::parse(story.out).at("acf");
  CHECK(s["loop"]["detected"] == false);
  CHECK(s["loop"]["at_end"] == false);
  CHECK(s["n_tokens"] == 400);
}

TEST_CASE("run --stop-on-loop ends with finish=loop, a story runs to n_predict", "[cli]") {
  const auto r = run_llmctl(with(greedy(kLoopPrompt, "400"), {"--stop-on-loop", "--json"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["finish_reason"] == "loop");
  const auto ids = j["generated_ids"].get<std::vector<int32_t>>();
  CHECK(ids.size() < 400);
  CHECK(last_line(r.err).find(" finish=loop ") != std::string::npos);
  CHECK(r.err.find("llmctl: note: loop detected (period ") != std::string::npos);
  // The same test offline agrees on where it fired.
  const auto a = run_llmctl(with(greedy(kLoopPrompt, "400"), {"--acf", "--json"}));
  REQUIRE(a.code == 0);
  CHECK(nlohmann::json::parse(a.out)["acf"]["loop"]["detected_at"] == ids.size());

  const auto story = run_llmctl(with(greedy(kStoryPrompt, "120"), {"--stop-on-loop"}));
  REQUIRE(story.code == 0);
  CHECK(last_line(story.err).find(" finish=n_predict ") != std::string::npos);
}

TEST_CASE("run diagnostics: bad values are usage errors, every mode takes them", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  for (const char* bad : {"nan", "inf", "-inf", "abc"}) {
    INFO(bad);
    const auto r = run_llmctl({"run", "-m", model, "-p", "x", "-n", "1", "--attn-alert", bad});
    CHECK(r.code == 2);
    CHECK(r.err.find("--attn-alert") != std::string::npos);
  }
  // --batch and -i take them (tests/test_cli_run_diag_modes.cpp checks what they report).
  for (const char* flag : {"--attn-stats", "--acf", "--stop-on-loop"}) {
    INFO(flag);
    const auto b =
        run_llmctl({"run", "-m", model, "--batch", "-", "-n", "4", flag}, "{\"prompt\": \"x\"}\n");
    CHECK(b.code == 0);
    const auto i = run_llmctl(
        {"run", "-m", model, "-i", "--chat-template", "chatml", "-n", "4", flag}, "hi\n");
    CHECK(i.code == 0);
  }
  const auto help = run_llmctl({"run", "--help"});
  CHECK(help.code == 0);
  for (const char* s : {"--attn-stats", "--attn-alert", "--acf", "--stop-on-loop", "uniform",
                        "Cohen's kappa", "finish=loop"})
    CHECK(help.out.find(s) != std::string::npos);
}
