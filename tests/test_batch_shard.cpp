// `llmctl run --batch --shard K/N` and `run --merge` (batch_shard.h): N processes, each with
// its share of the lines, merged, give the records of one unsharded run; --resume per shard.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/batch_shard.h"
#include "core/error.h"
#include "support/cli_process.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::Error;
using llmctl::cli::BatchShard;
using llmctl::cli::merge_batch_outputs;
using llmctl::cli::parse_batch_shard;
using llmctl::cli::ShardOutput;
using llmctl::test::CliProcess;
using llmctl::test::read_file;
using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;
using llmctl::test::temp_dir;
using llmctl::test::write_file;
using nlohmann::json;

namespace {

// Nine physical lines: greedy and seeded sampled requests, two bad lines, one blank line.
// Shard K of 3 holds the indices K, K+3, K+6 (index 3 is the blank line: no record at all).
const char* const kInput =
    "{\"prompt\": \"Once upon a time\", \"n_predict\": 12, \"id\": \"a\"}\n"
    "{\"prompt\": \"Tim and Lily\", \"n_predict\": 10, \"temperature\": 0.8}\n"
    "not json\n"
    "\n"
    "{\"prompt\": \"The dog\", \"n_predict\": 8, \"temperature\": 0.9, \"top_p\": 0.9}\n"
    "{\"prompt\": \"Once upon a time there was\", \"n_predict\": 9}\n"
    "{\"prompt\": \"Lily\", \"n_predict\": 7, \"temperature\": 1.0, \"seed\": 3}\n"
    "{\"prompt\": \"Ben\", \"n_predict\": 6}\n"
    "{\"prompt\": \"x\", \"n_predic\": 6}\n";

// The run's deterministic options: --temp 0 for lines without their own temperature, and a
// fixed --seed so that seeded lines draw the same stream in any process (seed + index).
std::vector<std::string> batch_args(const std::string& model, const std::string& in) {
  return {"run", "-m", model, "--batch", in, "--parallel", "2", "-c", "64", "--temp", "0",
          "--seed", "11"};
}

// Records by index; each index once. The timings are measured and differ run to run.
std::map<int64_t, json> by_index(const std::string& jsonl) {
  std::map<int64_t, json> m;
  std::istringstream in(jsonl);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    j.erase("timings");
    const int64_t i = j["index"];
    CHECK(m.count(i) == 0);
    m[i] = j;
  }
  return m;
}

}  // namespace

TEST_CASE("parse_batch_shard takes K/N with 0 <= K < N and says what is wrong", "[cli]") {
  const BatchShard s = parse_batch_shard("2/5");
  CHECK(s.k == 2);
  CHECK(s.n == 5);
  CHECK(s.holds(7));
  CHECK_FALSE(s.holds(8));
  CHECK(parse_batch_shard("0/1").holds(41));
  for (const char* bad : {"3/3", "4/3", "1/0", "-1/3", "+1/3", "1/-3", "a/3", "1/", "/3", "1",
                          "1/3/4", " 1/3", "1/3 ", "99999999999999999999/3"})
    CHECK_THROWS_AS(parse_batch_shard(bad), Error);
  try {
    parse_batch_shard("3/3");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--shard 3/3: K must be below N (shards are numbered 0 to 2)");
  }
}

TEST_CASE("merge_batch_outputs sorts by index, skips cut-off lines, refuses a duplicate",
          "[cli]") {
  std::istringstream a("{\"index\":4,\"text\":\"d\"}\n{\"index\":0,\"text\":\"a\"}\n{\"index\":6");
  std::istringstream b("{\"error\":\"line 2: x\",\"index\":1}\nnot a record\n{\"index\":3}\n");
  const auto m = merge_batch_outputs({ShardOutput{"a", &a}, ShardOutput{"b", &b}});
  CHECK(m.indices == std::vector<int64_t>{0, 1, 3, 4});
  CHECK(m.lines[1] == "{\"error\":\"line 2: x\",\"index\":1}");  // byte for byte
  CHECK(m.n_not_records == 2);
  std::istringstream c("{\"index\":1}\n"), d("{\"index\":2}\n{\"index\":1}\n");
  try {
    merge_batch_outputs({ShardOutput{"c.jsonl", &c}, ShardOutput{"d.jsonl", &d}});
    FAIL("a duplicate index was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "index 1 has two records: c.jsonl line 1 and d.jsonl line 2");
  }
}

TEST_CASE("run --batch --shard: 3 processes merged equal one unsharded run", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = temp_dir();
  const std::string in = dir + "/shard_in.jsonl";
  write_file(in, kInput);

  const auto whole = run_llmctl(batch_args(model, in));
  REQUIRE(whole.code == 1);  // lines 3 and 9 are bad
  const std::map<int64_t, json> want = by_index(whole.out);
  REQUIRE(want.size() == 8);

  // Three processes at once, as an array job runs them.
  std::vector<std::unique_ptr<CliProcess>> procs;
  for (int k = 0; k < 3; ++k) {
    auto args = batch_args(model, in);
    args.insert(args.end(), {"--shard", std::to_string(k) + "/3"});
    procs.push_back(std::make_unique<CliProcess>(args));
  }
  std::vector<std::string> outputs;
  for (int k = 0; k < 3; ++k) {
    const auto r = procs[static_cast<size_t>(k)]->wait(120);
    REQUIRE_FALSE(r.timed_out);
    CHECK(r.code == (k == 2 ? 1 : 0));  // shard 2 holds both bad lines (indices 2 and 8)
    const int64_t n_lines = k == 0 ? 2 : 3;  // shard 0: 0, 6 (3 is blank)
    CHECK(r.err.find(fmt::format("llmctl-batch: requests={} ", n_lines)) != std::string::npos);
    for (const auto& [index, rec] : by_index(r.out)) CHECK(index % 3 == k);
    outputs.push_back(dir + "/shard_out." + std::to_string(k) + ".jsonl");
    write_file(outputs.back(), r.out);
  }

  std::vector<std::string> merge = {"run", "--batch", in, "--merge"};
  merge.insert(merge.end(), {outputs[2], outputs[0], outputs[1]});  // any order
  const auto merged = run_llmctl(merge);
  REQUIRE(merged.code == 0);
  CHECK(merged.err.find("llmctl-merge: outputs=3 records=8 skipped_lines=0") != std::string::npos);
  const std::map<int64_t, json> got = by_index(merged.out);
  CHECK(got == want);  // every deterministic field: ids, text, seed, finish, logits_hash, errors
  std::vector<int64_t> order;
  std::istringstream lines(merged.out);
  for (std::string line; std::getline(lines, line);) order.push_back(json::parse(line)["index"]);
  CHECK(order == std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7, 8});

  // A missing shard is an error, and nothing is written.
  const auto partial = run_llmctl({"run", "--batch", in, "--merge", outputs[0], outputs[1]});
  CHECK(partial.code == 1);
  CHECK(partial.out.empty());
  CHECK(partial.err.find("3 of 8 request lines of " + in + " have no record (line 3, 6, 9)") !=
        std::string::npos);
  // The same shard twice.
  const auto twice = run_llmctl({"run", "--merge", outputs[0], outputs[0]});
  CHECK(twice.code == 1);
  CHECK(twice.err.find(" has two records: " + outputs[0] + " line 1 and " + outputs[0] + " line 1") !=
        std::string::npos);
}

TEST_CASE("run --batch --shard with --resume answers only that shard's missing lines",
          "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = temp_dir();
  const std::string in = dir + "/resume_in.jsonl";
  write_file(in, kInput);
  const auto whole = run_llmctl(batch_args(model, in));
  const std::map<int64_t, json> want = by_index(whole.out);

  // Shard 1/3 (indices 1, 4, 7) was interrupted after index 4's record, while writing 7's.
  std::string earlier;
  {
    std::istringstream recs(whole.out);
    for (std::string line; std::getline(recs, line);)
      if (json::parse(line)["index"] == 4) earlier = line + "\n";
  }
  REQUIRE(!earlier.empty());
  const std::string out1 = dir + "/resume_out.1.jsonl";
  write_file(out1, earlier + "{\"index\": 7, \"prompt_i");
  auto args = batch_args(model, in);
  args.insert(args.end(), {"--shard", "1/3", "--resume", out1});
  const auto r = run_llmctl(args);
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());  // records went to the file
  CHECK(r.err.find("requests=3 ok=2 errors=0 skipped=1") != std::string::npos);

  // The other shards, then the merge: the same records as one run, the cut-off line skipped.
  std::vector<std::string> merge = {"run", "--batch", in, "--merge", out1};
  for (const char* k : {"0", "2"}) {
    auto a = batch_args(model, in);
    a.insert(a.end(), {"--shard", std::string(k) + "/3"});
    const std::string path = dir + "/resume_out." + k + ".jsonl";
    write_file(path, run_llmctl(a).out);
    merge.push_back(path);
  }
  const auto merged = run_llmctl(merge);
  REQUIRE(merged.code == 0);
  CHECK(merged.err.find("skipped 1 line that is not a complete record") != std::string::npos);
  CHECK(by_index(merged.out) == want);
}

TEST_CASE("run --shard and --merge refuse what they cannot do, exit 2", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string in = temp_dir() + "/usage_in.jsonl";
  write_file(in, kInput);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "-m", model, "--batch", in, "--shard", "3/3"}, "K must be below N"},
      {{"run", "-m", model, "--batch", in, "--shard=-1/3"}, "is not K/N"},
      {{"run", "-m", model, "--batch", in, "--shard", "0/0"}, "N must be at least 1"},
      {{"run", "-m", model, "--batch", in, "--shard", "two/3"}, "is not K/N"},
      {{"run", "-m", model, "-p", "x", "--shard", "0/2"}, "--shard needs --batch"},
      {{"run", "--merge", in, "--resume", in, "--batch", in}, "--merge combines shard outputs"},
      {{"run", "--merge", in, "-p", "x"}, "--merge combines shard outputs"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args.back() << " " << message);
    const auto r = run_llmctl(args);
    CHECK(r.code == 2);
    CHECK(r.err.find("llmctl: error: ") != std::string::npos);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
