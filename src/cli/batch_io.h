#pragma once
// The JSONL protocol of `llmctl run --batch IN.jsonl` (reading requests, writing records) and
// of `--resume OUTPUT` (which input lines an earlier, interrupted run already answered).
// No generation here: the run command feeds the requests to the engine.
//
// Input: one JSON object per line (UTF-8; "\r\n" line ends and a UTF-8 BOM are accepted):
//   {"prompt": "...",                     required unless "messages" is given (not both)
//    "messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]   chat
//    "id": <any JSON>,                    optional, echoed in the record as is
//    "n_predict": int >= 0, "temperature": number >= 0, "top_k": int >= 0,
//    "top_p": number in (0, 1], "min_p": number in [0, 1], "seed": int >= 0,
//    "stop": ["...", ...]}                non-empty strings
//   Absent keys: the command line's values. Unknown or repeated keys are errors (a typo such
//   as "n_predic" must not silently run with the default).
//
// Lines and indices: "index" is the 0-based physical line number, so index N is line N+1 of
// the input and an error message says "line N+1". Blank lines (only spaces, tabs, "\r") are
// skipped: they get no record, but they are counted, so the indices of the lines after them
// stay the line numbers. Every other line gets exactly one record. A line that is not JSON,
// not an object, has a wrong type, an unknown key, a value out of range, or neither prompt
// nor messages gets an error record; the lines around it are unaffected. Lines longer than
// kMaxBatchLineBytes are errors too (their bytes are skipped, not kept in memory).
//
// Output: one JSON object per line, always with "index" (and "id" when the input line gave
// one and it could be read), in the shape of `llmctl run --json`:
//   {"index", "id"?, "prompt_ids", "generated_ids", "text", "finish_reason", "seed",
//    "timings": {"prefill_ms", "ttft_ms", "decode_ms", "prefill_tok_s", "decode_tok_s",
//                "p50_ms", "p95_ms"}, "logits_hash",
//    "attn_stats"?, "acf"?}     with run --attn-stats / --acf: the request's own, as run --json
//   {"index", "id"?, "error": "line N: ..."}
// Records may come out of input order (continuous batching); "index" matches them up.
// Invalid UTF-8 in text becomes U+FFFD in the record.

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace llmctl::cli {

inline constexpr size_t kMaxBatchLineBytes = size_t{64} << 20;  // 64 MiB

struct BatchRequest {
  std::optional<std::string> prompt;  // set, or messages non-empty: exactly one of the two
  std::vector<ChatMessage> messages;
  std::optional<int64_t> n_predict;
  std::optional<float> temperature;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
};

struct BatchLine {
  int64_t index = 0;                    // 0-based line number
  std::optional<nlohmann::json> id;     // the line's "id" when it could be read
  std::optional<BatchRequest> request;  // set when the line is good
  std::string error;                    // "line N: ..." when it is not
};

// Every non-blank line of `in`, in order. Never throws on bad content (only on a stream that
// fails to read, as FileError naming source_name).
std::vector<BatchLine> read_batch_requests(std::istream& in, const std::string& source_name);
// The same for a file path, "-" being standard input (named "<stdin>"); throws FileError when
// the file cannot be opened.
std::vector<BatchLine> read_batch_file(const std::string& path);

// Per-sequence timings, as `run --json` reports them (milliseconds, tokens per second).
struct BatchTimings {
  double prefill_ms = 0, ttft_ms = 0, decode_ms = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  double p50_ms = 0, p95_ms = 0;
};

struct BatchResult {
  int64_t index = 0;
  std::optional<nlohmann::json> id;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string text;
  std::string finish_reason;  // eos | length | n_predict | stop | loop
  uint64_t seed = 0;
  BatchTimings timings;
  std::string logits_hash;  // 16 hex digits, as run's summary line
  // More keys of the record: "attn_stats" and "acf" with run --attn-stats / --acf (the
  // objects of run --json, over this request's tokens only).
  nlohmann::json diagnostics = nlohmann::json::object();
};

// One output line each, without the trailing newline.
std::string batch_result_json(const BatchResult& r);
std::string batch_error_json(int64_t index, const std::optional<nlohmann::json>& id,
                             const std::string& message);

// --resume: what an earlier output already holds. Every complete line that is a JSON object
// with an integer "index" (a result or an error record) answers that index. A last line
// without its newline is ignored (the run was cut off while writing it): the caller should
// write "\n" before appending (ends_with_partial_line) so the next record starts a new line.
struct PreviousOutput {
  std::set<int64_t> answered;
  bool ends_with_partial_line = false;
};
PreviousOutput scan_previous_output(std::istream& previous_output);
std::set<int64_t> answered_indices(std::istream& previous_output);

}  // namespace llmctl::cli
