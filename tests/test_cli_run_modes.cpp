// `llmctl run` engine options and modes: thread counts, KV cache settings and prefill chunks
// change no token; --batch JSONL (continuous batching, error records, --resume); -i chat.
#include <signal.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;
using nlohmann::json;

namespace {

json golden() {
  return json::parse(llmctl::test::read_file(require_test_file("golden/stories260K-greedy.jsonl")));
}

std::string summary_value(const std::string& err, const std::string& key) {
  const size_t at = err.rfind(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t b = at + key.size() + 2;
  return err.substr(b, err.find_first_of(" \n", b) - b);
}

std::vector<json> records(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) v.push_back(json::parse(line));
  return v;
}

}  // namespace

TEST_CASE("run: threads, KV type, block size and prefill chunks keep the golden ids",
          "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const json g = golden();
  const std::vector<std::vector<std::string>> variants = {
      {"-t", "1"},           {"-t", "2"},           {"--cpu-reference"}, {"--kv-type", "f32"},
      {"--block-size", "1"}, {"--block-size", "7"}, {"-b", "2"},         {"-b", "1", "-t", "3"}};
  for (const auto& v : variants) {
    std::vector<std::string> args = {"run", "-m", model,    "-p", "Once upon a time",
                                     "-n",  "48", "--temp", "0",  "--json"};
    args.insert(args.end(), v.begin(), v.end());
    INFO(v[0] << " " << v.back());
    const auto r = run_llmctl(args);
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["generated_ids"] == g["generated_ids"]);
  }
}

TEST_CASE("run: the same seed gives the same bytes for any thread count", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  std::string out1, hash1;
  for (const char* t : {"1", "2", "3"}) {
    const auto r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-n", "40", "--temp",
                               "0.9", "--seed", "42", "-t", t});
    REQUIRE(r.code == 0);
    if (out1.empty()) {
      out1 = r.out;
      hash1 = summary_value(r.err, "logits_hash");
    }
    CHECK(r.out == out1);
    CHECK(summary_value(r.err, "logits_hash") == hash1);
  }
  CHECK(!out1.empty());
  const auto bad = run_llmctl({"run", "-m", model, "-p", "x", "--kv-type", "q5_1"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--kv-type wants one of f32, f16, q8_0, q4_0, got 'q5_1'") != std::string::npos);
  CHECK(run_llmctl({"run", "-m", model, "-p", "x", "-ctv", "q5_1"}).err.find(
            "--cache-type-v wants one of f32, f16, q8_0, q4_0, got 'q5_1'") != std::string::npos);
  // stories260K's heads of 8 values cannot hold a block of 32.
  const auto q8 = run_llmctl({"run", "-m", model, "-p", "x", "--kv-type", "q8_0"});
  CHECK(q8.code == 1);
  CHECK(q8.err.find("llmctl: error: KV cache type q8_0: the model's head_dim is 8, not a multiple "
                    "of 32") != std::string::npos);
}

TEST_CASE("run --batch: one record per line, errors in place, same ids as single runs",
          "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const json g = golden();
  const std::string in =
      "{\"prompt\": \"Once upon a time\", \"n_predict\": 48, \"temperature\": 0, \"id\": \"a\"}\n"
      "not json\n"
      "\n"
      "{\"prompt\": \"Once upon a time there was\", \"n_predict\": 20, \"temperature\": 0}\n"
      "{\"prompt\": \"Tim\", \"n_predic\": 3}\n"
      "{\"prompt\": \"Lily\", \"n_predict\": 5, \"temperature\": 0.8, \"seed\": 7}\n";
  std::map<int64_t, json> by_index_1;
  for (const char* parallel : {"1", "3"}) {
    const auto r =
        run_llmctl({"run", "-m", model, "--batch", "-", "--parallel", parallel, "-c", "128"}, in);
    REQUIRE(r.code == 1);  // two lines failed: their records say why, and the exit code too
    CHECK(r.err.find("llmctl: error: 2 of 5 requests failed") != std::string::npos);
    const auto recs = records(r.out);
    std::map<int64_t, json> by_index;
    for (const json& j : recs) {
      const int64_t i = j["index"];
      CHECK(by_index.count(i) == 0);  // exactly one record per line
      by_index[i] = j;
    }
    CHECK(recs.size() == 5);  // the blank line gets none
    REQUIRE(by_index.count(0) == 1);
    CHECK(by_index[0]["id"] == "a");
    CHECK(by_index[0]["generated_ids"] == g["generated_ids"]);
    CHECK(by_index[1]["error"].get<std::string>().rfind("line 2:", 0) == 0);
    CHECK(by_index[4]["error"].get<std::string>().find("n_predic") != std::string::npos);
    CHECK(by_index[3]["generated_ids"].size() == 20);
    CHECK(by_index[5]["seed"] == 7);
    CHECK(r.err.find("llmctl-batch: requests=5 ok=3 errors=2 skipped=0") != std::string::npos);
    if (by_index_1.empty()) {
      by_index_1 = by_index;
    } else {
      for (int64_t i : {0, 3, 5})
        CHECK(by_index[i]["generated_ids"] == by_index_1[i]["generated_ids"]);
    }
  }
}

TEST_CASE("run --batch --resume answers only what is missing and appends", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto dir = std::filesystem::temp_directory_path() / "llmctl_test_resume";
  std::filesystem::create_directories(dir);
  const std::string in_path = (dir / "in.jsonl").string(), out_path = (dir / "out.jsonl").string();
  {
    std::ofstream in(in_path);
    for (int i = 0; i < 4; ++i)
      in << "{\"prompt\": \"Tim went\", \"n_predict\": " << 3 + i << "}\n";
    std::ofstream out(out_path);
    out << "{\"index\": 1, \"error\": \"pretend\"}\n{\"index\": 3, \"generated";  // cut off
  }
  const auto r =
      run_llmctl({"run", "-m", model, "--batch", in_path, "--resume", out_path, "-c", "64"});
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());  // records went to the file
  CHECK(r.err.find("ok=3 errors=0 skipped=1") != std::string::npos);
  std::ifstream back(out_path);
  std::string line;
  std::set<int64_t> answered;
  int broken = 0;
  while (std::getline(back, line)) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      ++broken;
      continue;
    }
    answered.insert(j["index"].get<int64_t>());
  }
  CHECK(broken == 1);  // the cut-off line stays, alone on its line
  CHECK(answered == std::set<int64_t>{0, 1, 2, 3});
  std::filesystem::remove_all(dir);
}

TEST_CASE("run --batch --resume on a full disk: exit 1 with the OS's reason, no record lost",
          "[cli]") {
  // The records were appended with an unchecked ofstream: a full disk lost them and exit 0.
  // A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes the append fail with EFBIG as a
  // full disk fails with ENOSPC: the first new record does not fit.
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto dir = std::filesystem::temp_directory_path() / "llmctl_test_resume_full";
  std::filesystem::create_directories(dir);
  const std::string in_path = (dir / "in.jsonl").string(), out_path = (dir / "out.jsonl").string();
  const std::string earlier = "{\"index\": 0, \"error\": \"" + std::string(4000, 'x') + "\"}\n";
  {
    std::ofstream in(in_path);
    for (int i = 0; i < 3; ++i) in << "{\"prompt\": \"Tim went\", \"n_predict\": 3}\n";
    std::ofstream(out_path) << earlier;
  }
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit small = old;
  small.rlim_cur = earlier.size() + 16;  // the child's stdout and stderr files stay under it
  void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const auto r =
      run_llmctl({"run", "-m", model, "--batch", in_path, "--resume", out_path, "-c", "64"});
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_xfsz);
  INFO("stderr: " << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("llmctl: error: " + out_path + ": cannot append: File too large") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("run -i: scripted chat turns, the earlier turns come from the prefix cache", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl({"run", "-m", model, "-i", "--chat-template", "chatml", "-n", "12",
                             "--temp", "0", "-c", "512"},
                            "Once upon a time\n\nThe dog ran\n");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("llmctl-chat: turn=1 ") != std::string::npos);
  CHECK(r.err.find("llmctl-chat: turn=2 ") != std::string::npos);
  CHECK(r.err.find("turn=3") == std::string::npos);  // the blank line is no turn
  CHECK(std::stoll(summary_value(r.err, "reused_tokens")) >= 16);
  REQUIRE(!r.out.empty());
  CHECK(r.out.back() == '\n');  // each answer ends its line

  const auto none = run_llmctl({"run", "-m", model, "-i"}, "hi\n");
  CHECK(none.code == 1);
  CHECK(none.err.find("--chat-template llama2|llama3|chatml|zephyr") != std::string::npos);
}

// A long -c on the real Gemma 3 270M: its 15 windowed layers keep 1040 positions (window 512 +
// -b 512, in blocks of 16), not 32768: 111.23 MiB where every layer at every position is 576 MiB.
TEST_CASE("run: the real Gemma 3 file at -c 32768 allocates the windowed KV cache", "[cli]") {
  const std::string model = llmctl::test::require_fetched_model("gemma-3-270m-q4_k_m.gguf");
  const auto r =
      run_llmctl({"run", "-m", model, "-p", "Hello", "-n", "2", "--temp", "0", "-c", "32768"});
  REQUIRE(r.code == 0);
  INFO(r.err);
  CHECK(r.err.find("KV cache 111.23 MiB (1 x 32768 positions; 15 layers windowed to 512: 1040 "
                   "positions, f16") != std::string::npos);
}
