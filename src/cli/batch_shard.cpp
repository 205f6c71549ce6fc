// --shard K/N and --merge of `llmctl run --batch` (batch_shard.h).
#include "cli/batch_shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <istream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace llmctl::cli {

namespace {

constexpr const char* kShardHint =
    "--shard K/N answers the lines whose index is K mod N, with 0 <= K < N (e.g. --shard 0/4 "
    "... --shard 3/4; Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)";

// A whole decimal integer, digits only (no sign, no spaces): "-1" or "+2" are refused here so
// that the message can say what a shard number is.
bool parse_count(std::string_view s, int64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Where a record was read, for the duplicate message.
struct Place {
  size_t output = 0;
  int64_t line = 0;  // 1-based
};

}  // namespace

BatchShard parse_batch_shard(const std::string& text) {
  const size_t slash = text.find('/');
  BatchShard s;
  if (slash == std::string::npos ||
      !parse_count(std::string_view(text).substr(0, slash), s.k) ||
      !parse_count(std::string_view(text).substr(slash + 1), s.n))
    throw Error(fmt::format("--shard '{}' is not K/N (two whole numbers, e.g. 2/8)", text),
                kShardHint);
  if (s.n < 1) throw Error(fmt::format("--shard {}: N must be at least 1", text), kShardHint);
  if (s.k >= s.n)
    throw Error(fmt::format("--shard {}: K must be below N (shards are numbered 0 to {})", text,
                            s.n - 1),
                kShardHint);
  return s;
}

void keep_shard_lines(std::vector<BatchLine>& lines, const BatchShard& shard) {
  lines.erase(std::remove_if(lines.begin(), lines.end(),
                             [&](const BatchLine& l) { return !shard.holds(l.index); }),
              lines.end());
}

MergedRecords merge_batch_outputs(const std::vector<ShardOutput>& outputs) {
  std::map<int64_t, std::pair<std::string, Place>> by_index;
  MergedRecords out;
  for (size_t o = 0; o < outputs.size(); ++o) {
    std::istream& in = *outputs[o].in;
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      // As --resume reads an output: a last line without its newline was cut off.
      const bool complete = !in.eof();
      const nlohmann::json j =
          complete ? nlohmann::json::parse(line, nullptr, false) : nlohmann::json();
      const auto it = j.is_object() ? j.find("index") : j.end();
      if (!complete || !j.is_object() || it == j.end() || !it->is_number_integer()) {
        ++out.n_not_records;
        continue;
      }
      const int64_t index = it->get<int64_t>();
      const auto [at, inserted] = by_index.try_emplace(index, std::move(line), Place{o, n});
      if (!inserted) {
        const Place& first = at->second.second;
        throw Error(fmt::format("index {} has two records: {} line {} and {} line {}", index,
                                outputs[first.output].name, first.line, outputs[o].name, n),
                    "every input line is answered by one shard: was a shard's output given "
                    "twice, or outputs of different --shard K/N counts merged?");
      }
    }
    if (in.bad()) throw FileError(outputs[o].name, "read error");
  }
  for (auto& [index, record] : by_index) {
    out.indices.push_back(index);
    out.lines.push_back(std::move(record.first));
  }
  return out;
}

void check_merge_complete(const MergedRecords& merged, const std::vector<BatchLine>& input,
                          const std::string& input_name) {
  std::set<int64_t> wanted;
  for (const BatchLine& l : input) wanted.insert(l.index);
  for (const int64_t index : merged.indices)
    if (wanted.count(index) == 0)
      throw Error(fmt::format("a record has index {}, but {} has no request on line {}", index,
                              input_name, index + 1),
                  "merge the outputs of this input file only");
  std::vector<int64_t> missing;
  const std::set<int64_t> have(merged.indices.begin(), merged.indices.end());
  for (const int64_t index : wanted)
    if (have.count(index) == 0) missing.push_back(index);
  if (missing.empty()) return;
  std::string lines;
  for (size_t i = 0; i < missing.size() && i < 5; ++i)
    lines += fmt::format("{}{}", i == 0 ? "" : ", ", missing[i] + 1);
  if (missing.size() > 5) lines += ", ...";
  throw Error(fmt::format("{} of {} request lines of {} have no record (line {})",
                          missing.size(), wanted.size(), input_name, lines),
              "a shard did not finish: run it again with --resume ITS_OUTPUT (line L belongs to "
              "shard (L-1) mod N), then merge again");
}

}  // namespace llmctl::cli
