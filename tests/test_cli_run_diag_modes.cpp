// `llmctl run --attn-stats/--acf/--stop-on-loop` with --batch and -i on stories260K: every
// batch record carries its own request's statistics, identical to the request run alone (the
// engine is batch invariant, so the routing to requests is checked bit for bit); a looping
// request stops with "loop" while the others run on; a chat prints per-turn lines whose
// counts add up with the turn's summary line, and --stop-on-loop ends a turn, not the chat.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;
using json = nlohmann::json;

namespace {

// Greedy stories260K (as tests/test_cli_run_diag.cpp): "Anna" repeats "They have a big box."
// and loops by generated token 58; "Once upon a time" tells a story without a loop.
const char* const kLoopPrompt = "Anna";
const char* const kStoryPrompt = "Once upon a time";

std::vector<std::string> run_args(std::initializer_list<std::string> more) {
  std::vector<std::string> a{
      "run", "-m", require_test_file("models/stories260K.gguf"), "--temp", "0", "-c", "512"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Records by index.
std::map<int64_t, json> records(const std::string& out) {
  std::map<int64_t, json> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    m[j.at("index").get<int64_t>()] = j;
  }
  return m;
}

std::string batch_input(const std::vector<std::string>& prompts) {
  std::string in;
  for (const std::string& p : prompts) in += json{{"prompt", p}}.dump() + "\n";
  return in;
}

// key=value from the last stderr line starting with `prefix`.
std::string value_in_line(const std::string& err, const std::string& prefix,
                          const std::string& key) {
  const size_t line = err.rfind(prefix);
  REQUIRE(line != std::string::npos);
  const size_t at = err.find(" " + key + "=", line);
  REQUIRE(at != std::string::npos);
  const size_t b = at + key.size() + 2;
  return err.substr(b, err.find_first_of(" \n", b) - b);
}

}  // namespace

TEST_CASE("run --batch --attn-stats --acf: each record equals its request run alone", "[cli]") {
  // Three sequences decoded together. The fourth request is admitted when one of them ends,
  // and its prompt shares the first one's prefix in blocks of 2 positions: a prefix-cache hit
  // would skip measuring the shared tokens. -b 5 splits the prompts into chunks batched with
  // the other sequences' decode tokens, unlike a run alone.
  const std::vector<std::string> prompts{kStoryPrompt, kLoopPrompt, "Once upon a time, Lily",
                                         "Once upon a time, Ben"};
  const auto b = run_llmctl(run_args({"--batch", "-", "--parallel", "3", "-n", "60", "--ignore-eos",
                                      "--attn-stats", "--acf", "--block-size", "2", "-b", "5"}),
                            batch_input(prompts));
  REQUIRE(b.code == 0);
  const auto recs = records(b.out);
  REQUIRE(recs.size() == prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO(prompts[i]);
    const auto alone =
        run_llmctl(run_args({"-p", prompts[i], "-n", "60", "--ignore-eos", "--attn-stats", "--acf",
                             "--json", "--block-size", "2"}));
    REQUIRE(alone.code == 0);
    const json a = json::parse(alone.out);
    const json& r = recs.at(static_cast<int64_t>(i));
    REQUIRE(r.contains("attn_stats"));
    REQUIRE(r.contains("acf"));
    CHECK(r["generated_ids"] == a["generated_ids"]);
    // Every query token of this request and no other: the prompt and the fed tokens.
    const auto n = static_cast<int64_t>(r["prompt_ids"].size() + r["generated_ids"].size()) - 1;
    CHECK(r["attn_stats"]["n_tokens"] == n);
    CHECK(r["attn_stats"] == a["attn_stats"]);  // bit for bit, alert included
    CHECK(r["acf"] == a["acf"]);
    CHECK(r["acf"]["n_tokens"] == 60);
    const bool alert = r["attn_stats"]["alert"].is_object();
    CHECK(alert == (b.err.find("llmctl: attn-alert: line " + std::to_string(i + 1) + ": ") !=
                    std::string::npos));
  }
  CHECK(b.err.find("llmctl-batch: requests=4 ok=4 errors=0 skipped=0 prompt_tokens=") !=
        std::string::npos);
  CHECK(b.err.find(" reused_tokens=0 ") != std::string::npos);
}

TEST_CASE("run --attn-stats: the same statistics and alert whatever the prefill chunk size",
          "[cli]") {
  // A threshold that the prompt passes in a higher layer while the lowest layer passes it
  // only later, in a generated token (greedy stories260K, 20 tokens, threshold 12): the
  // alert names the lowest layer that passed it, not what the first chunk happened to show.
  const std::vector<std::string> base{"-p",           kStoryPrompt,   "-n", "20",
                                      "--ignore-eos", "--attn-alert", "12", "--json"};
  auto args = [&](std::initializer_list<std::string> more) {
    std::vector<std::string> a = run_args({});
    a.insert(a.end(), base.begin(), base.end());
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const auto one = run_llmctl(args({}));
  const auto split = run_llmctl(args({"-b", "2"}));
  REQUIRE(one.code == 0);
  REQUIRE(split.code == 0);
  const json a = json::parse(one.out)["attn_stats"], s = json::parse(split.out)["attn_stats"];
  REQUIRE(a["alert"].is_object());
  CHECK(a == s);
  const auto layer = a["alert"]["layer"].get<size_t>();
  for (size_t l = 0; l < layer; ++l) CHECK(a["layers"][l]["max"].get<double>() <= 12.0);
  // Its earliest position: the prompt-only run shows whether that layer passed it there.
  const auto prompt =
      run_llmctl(run_args({"-p", kStoryPrompt, "-n", "0", "--attn-alert", "12", "--json"}));
  REQUIRE(prompt.code == 0);
  const json p = json::parse(prompt.out)["attn_stats"];
  const auto n_prompt = p["n_tokens"].get<int64_t>();
  CHECK((a["alert"]["position"].get<int64_t>() < n_prompt) ==
        (p["layers"][layer]["max"].get<double>() > 12.0));
}

TEST_CASE("run --batch --stop-on-loop stops the looping request only", "[cli]") {
  const auto b = run_llmctl(run_args({"--batch", "-", "--parallel", "2", "-n", "400",
                                      "--ignore-eos", "--stop-on-loop", "--acf"}),
                            batch_input({kLoopPrompt, kStoryPrompt}));
  REQUIRE(b.code == 0);
  const auto recs = records(b.out);
  REQUIRE(recs.size() == 2);
  const json& loop = recs.at(0);
  const json& story = recs.at(1);
  CHECK(loop["finish_reason"] == "loop");
  const auto ids = loop["generated_ids"].get<std::vector<int32_t>>();
  CHECK(ids.size() < 400);
  CHECK(loop["acf"]["loop"]["detected"] == true);
  CHECK(loop["acf"]["loop"]["detected_at"] == ids.size());
  CHECK(story["finish_reason"] == "n_predict");
  CHECK(story["generated_ids"].size() == 400);
  CHECK(story["acf"]["loop"]["detected"] == false);
  CHECK(b.err.find("llmctl: note: line 1: loop detected (period ") != std::string::npos);
  CHECK(b.err.find("line 2: loop") == std::string::npos);
  // Where a run alone stops.
  const auto alone = run_llmctl(
      run_args({"-p", kLoopPrompt, "-n", "400", "--ignore-eos", "--stop-on-loop", "--json"}));
  REQUIRE(alone.code == 0);
  const json a = json::parse(alone.out);
  CHECK(a["finish_reason"] == "loop");
  CHECK(a["generated_ids"] == loop["generated_ids"]);
}

TEST_CASE("run -i --attn-stats --acf: one line each per turn, counts from the turn", "[cli]") {
  const std::string turns = "Once upon a time\nThe dog ran\n";
  const auto plain = run_llmctl(run_args({"-i", "--chat-template", "chatml", "-n", "30"}), turns);
  const auto r = run_llmctl(
      run_args({"-i", "--chat-template", "chatml", "-n", "30", "--attn-alert", "1e9", "--acf"}),
      turns);
  REQUIRE(r.code == 0);
  CHECK(r.out == plain.out);  // measuring changes no answer
  for (int turn = 1; turn <= 2; ++turn) {
    INFO(turn);
    const std::string t = std::to_string(turn);
    const std::string summary = "llmctl-chat: turn=" + t + " ";
    const size_t at = r.err.find(summary);
    REQUIRE(at != std::string::npos);
    // The diagnostics come right before the turn's summary line.
    const size_t stats = r.err.find("llmctl: attn-stats: turn " + t + ": ");
    const size_t acf = r.err.find("llmctl: acf: turn " + t + ": ");
    REQUIRE(stats != std::string::npos);
    REQUIRE(acf != std::string::npos);
    CHECK(stats < acf);
    CHECK(acf < at);
    const std::string head = r.err.substr(0, r.err.find('\n', at));
    const auto prompt = std::stoll(value_in_line(head, summary, "prompt_tokens"));
    const auto reused = std::stoll(value_in_line(head, summary, "reused_tokens"));
    const auto gen = std::stoll(value_in_line(head, summary, "gen_tokens"));
    const std::string finish = value_in_line(head, summary, "finish");
    // Query tokens computed this turn: the prompt past the reused prefix, and every generated
    // token fed back (all of them when EOS ended the answer, all but the last otherwise).
    const long long fed = prompt - reused + gen - (finish == "eos" ? 0 : 1);
    const std::string line = r.err.substr(stats, r.err.find('\n', stats) - stats);
    CHECK(line.find(": " + std::to_string(fed) +
                    " query tokens, no alert (largest scaled "
                    "score ") != std::string::npos);
    const std::string acf_line = r.err.substr(acf, r.err.find('\n', acf) - acf);
    CHECK(acf_line.find(": " + std::to_string(gen) + " tokens, dominant period ") !=
          std::string::npos);
    if (turn == 2) CHECK(reused > 0);  // turn 1 comes from the cache and is not counted
  }

  const auto low = run_llmctl(
      run_args({"-i", "--chat-template", "chatml", "-n", "30", "--attn-alert", "2"}), turns);
  REQUIRE(low.code == 0);
  CHECK(low.err.find("llmctl: attn-alert: turn 1: layer ") != std::string::npos);
  CHECK(low.err.find("llmctl: attn-alert: turn 2: layer ") != std::string::npos);
  CHECK(low.err.find("llmctl: acf: ") == std::string::npos);
}

TEST_CASE("run -i --stop-on-loop ends the looping answer, the chat goes on", "[cli]") {
  // Greedy stories260K under the llama2 template: the answer to "Anna" falls into a loop
  // (period 8, found at generated token 143); the answer to "Bob" runs to -n.
  const std::string turns = "Anna\nBob\n";
  const auto r = run_llmctl(
      run_args({"-i", "--chat-template", "llama2", "-n", "300", "--stop-on-loop", "--acf"}), turns);
  REQUIRE(r.code == 0);
  const std::string t1 = "llmctl-chat: turn=1 ", t2 = "llmctl-chat: turn=2 ";
  REQUIRE(r.err.find(t2) != std::string::npos);
  const std::string head = r.err.substr(0, r.err.find(t2));
  CHECK(value_in_line(head, t1, "finish") == "loop");
  CHECK(value_in_line(r.err, t2, "finish") == "n_predict");
  CHECK(value_in_line(r.err, t2, "gen_tokens") == "300");
  const std::string gen = value_in_line(head, t1, "gen_tokens");
  CHECK(std::stoi(gen) < 300);
  CHECK(head.find("llmctl: note: turn 1: loop detected (period ") != std::string::npos);
  CHECK(head.find("answer stopped (--stop-on-loop), the chat goes on") != std::string::npos);
  CHECK(r.err.find("llmctl: note: turn 2:") == std::string::npos);
  // The answer stopped where the loop test first passed: its report agrees, and so does the
  // same turn run without --stop-on-loop (the loop is found at the same token, and the answer
  // goes on past it).
  CHECK(head.find("found at token " + gen + "\n") != std::string::npos);
  const auto free =
      run_llmctl(run_args({"-i", "--chat-template", "llama2", "-n", "300", "--acf"}), turns);
  REQUIRE(free.code == 0);
  const std::string free_head = free.err.substr(0, free.err.find(t2));
  CHECK(free_head.find("found at token " + gen + "\n") != std::string::npos);
  CHECK(value_in_line(free_head, t1, "finish") != "loop");
}
