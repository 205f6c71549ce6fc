// The --batch JSONL protocol (see batch_io.h for the format and the decisions behind it).
#include "cli/batch_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <istream>
#include <limits>

#include "core/error.h"
#include "io/json_error.h"
#include "io/json_line.h"
#include "tokenizer/utf8.h"

namespace llmctl::cli {

namespace {

using json = nlohmann::json;

constexpr const char* kKnownKeys =
    "prompt, messages, id, n_predict, temperature, top_k, top_p, min_p, seed, stop";

// A field that is wrong: thrown inside one line's parse, caught there, never escapes.
struct LineError {
  std::string message;
};

// ---------------------------------------------------------------------------
// Reading lines
// ---------------------------------------------------------------------------

// Reads one line (without its "\n") into `line`, keeping at most max_bytes of it; sets
// too_long when the line had more, and newline when it ended with "\n" (not at the end of
// the input). Returns false at end of input with nothing read.
bool read_line(std::streambuf& sb, std::string& line, size_t max_bytes, bool& too_long,
               bool& newline) {
  line.clear();
  too_long = false;
  newline = false;
  using traits = std::streambuf::traits_type;
  int c = sb.sbumpc();
  if (traits::eq_int_type(c, traits::eof())) return false;
  for (; !traits::eq_int_type(c, traits::eof()); c = sb.sbumpc()) {
    if (c == '\n') {
      newline = true;
      return true;
    }
    if (line.size() < max_bytes) {
      line.push_back(traits::to_char_type(c));
    } else {
      too_long = true;
    }
  }
  return true;
}

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

const char* type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

// ---------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------

int64_t get_int(const json& v, const char* key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer())
    throw LineError{fmt::format("\"{}\" must be an integer, got {}", key, type_name(v))};
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    throw LineError{fmt::format("\"{}\" = {} is out of range [{}, {}]", key, v.dump(), lo, hi)};
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw LineError{fmt::format("\"{}\" = {} is out of range [{}, {}]", key, x, lo, hi)};
  return x;
}

// A number in [lo, hi]; lo_open excludes lo itself (top_p's (0, 1]).
float get_float(const json& v, const char* key, double lo, double hi, bool lo_open,
                const char* range) {
  if (!v.is_number())
    throw LineError{fmt::format("\"{}\" must be a number, got {}", key, type_name(v))};
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    throw LineError{fmt::format("\"{}\" = {} must be in {}", key, v.dump(), range)};
  return static_cast<float>(x);
}

const std::string& get_string(const json& v, const std::string& what) {
  if (!v.is_string())
    throw LineError{fmt::format("{} must be a string, got {}", what, type_name(v))};
  return v.get_ref<const std::string&>();
}

std::vector<ChatMessage> get_messages(const json& v) {
  if (!v.is_array())
    throw LineError{fmt::format("\"messages\" must be an array, got {}", type_name(v))};
  if (v.empty()) throw LineError{"\"messages\" is empty"};
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& m = v[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object())
      throw LineError{fmt::format("{} must be an object {{\"role\", \"content\"}}, got {}", where,
                                  type_name(m))};
    for (const auto& [k, unused] : m.items())
      if (k != "role" && k != "content")
        throw LineError{fmt::format("{}: unknown key \"{}\" (expected role, content)", where, k)};
    if (!m.contains("role")) throw LineError{where + ": \"role\" is missing"};
    if (!m.contains("content")) throw LineError{where + ": \"content\" is missing"};
    const std::string& role = get_string(m["role"], where + ".role");
    const auto r = chat_role_from_name(role);
    if (!r)
      throw LineError{fmt::format("{}.role = {} is not system, user or assistant", where,
                                  json(role).dump(-1, ' ', false, json::error_handler_t::replace))};
    out.push_back({*r, get_string(m["content"], where + ".content")});
  }
  return out;
}

BatchRequest parse_request(const json& obj) {
  BatchRequest r;
  for (const auto& [key, v] : obj.items()) {
    if (key == "id") {
      continue;  // read by the caller
    } else if (key == "prompt") {
      r.prompt = get_string(v, "\"prompt\"");
    } else if (key == "messages") {
      r.messages = get_messages(v);
    } else if (key == "n_predict") {
      r.n_predict = get_int(v, "n_predict", 0, std::numeric_limits<int32_t>::max());
    } else if (key == "temperature") {
      r.temperature = get_float(v, "temperature", 0.0, 1e30, false, "[0, inf) (0 = greedy)");
    } else if (key == "top_k") {
      r.top_k = static_cast<int32_t>(get_int(v, "top_k", 0, std::numeric_limits<int32_t>::max()));
    } else if (key == "top_p") {
      r.top_p = get_float(v, "top_p", 0.0, 1.0, true, "(0, 1]");
    } else if (key == "min_p") {
      r.min_p = get_float(v, "min_p", 0.0, 1.0, false, "[0, 1]");
    } else if (key == "seed") {
      if (v.is_number_unsigned()) {
        r.seed = v.get<uint64_t>();
      } else {
        r.seed = static_cast<uint64_t>(get_int(v, "seed", 0, std::numeric_limits<int64_t>::max()));
      }
    } else if (key == "stop") {
      if (!v.is_array())
        throw LineError{fmt::format("\"stop\" must be an array of strings, got {}", type_name(v))};
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string& s = get_string(v[i], fmt::format("stop[{}]", i));
        if (s.empty())
          throw LineError{fmt::format("stop[{}] is empty; a stop string cannot be empty", i)};
        r.stop.push_back(s);
      }
    } else {
      throw LineError{fmt::format("unknown key {} (known: {})",
                                  json(key).dump(-1, ' ', false, json::error_handler_t::replace),
                                  kKnownKeys)};
    }
  }
  if (r.prompt && !r.messages.empty())
    throw LineError{"give either \"prompt\" or \"messages\", not both"};
  if (!r.prompt && r.messages.empty())
    throw LineError{"\"prompt\" is missing (give \"prompt\" or \"messages\")"};
  return r;
}

// One non-blank line -> its BatchLine.
BatchLine parse_line(int64_t index, const std::string& text) {
  BatchLine out;
  out.index = index;
  const auto fail = [&](const std::string& why) {
    // nlohmann quotes the bytes it read, which may be invalid UTF-8: keep messages printable.
    out.error = utf8_sanitize(fmt::format("line {}: {}", index + 1, why));
    return out;
  };
  const JsonLine line = parse_json_line(text);
  if (!line.not_json.empty()) return fail("not valid JSON: " + line.not_json);
  const json& obj = line.value;
  if (!obj.is_object())
    return fail(fmt::format("expected a JSON object {{\"prompt\": ...}}, got {}", type_name(obj)));
  if (!line.too_deep.empty()) return fail(line.too_deep);
  if (obj.contains("id")) out.id = obj["id"];
  if (!line.duplicate.empty()) return fail(line.duplicate);
  try {
    out.request = parse_request(obj);
  } catch (const LineError& e) {
    return fail(e.message);
  } catch (const json::exception& e) {  // not expected: every access is type-checked first
    return fail("bad value: " + json_error_text(e.what(), /*one_line=*/true));
  }
  return out;
}

std::string dump_line(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

// ---------------------------------------------------------------------------
// Public functions
// ---------------------------------------------------------------------------

std::vector<BatchLine> read_batch_requests(std::istream& in, const std::string& source_name) {
  std::vector<BatchLine> lines;
  std::streambuf* sb = in.rdbuf();
  if (sb == nullptr) throw FileError(source_name, "cannot read: no stream buffer");
  std::string line;
  bool too_long = false, newline = false;
  for (int64_t index = 0; read_line(*sb, line, kMaxBatchLineBytes, too_long, newline); ++index) {
    if (index == 0 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 BOM
    if (too_long) {
      BatchLine b;
      b.index = index;
      b.error =
          fmt::format("line {}: longer than {} MiB; skipped", index + 1, kMaxBatchLineBytes >> 20);
      lines.push_back(std::move(b));
      continue;
    }
    if (is_blank(line)) continue;
    if (line.back() == '\r') line.pop_back();
    lines.push_back(parse_line(index, line));
  }
  if (in.bad()) throw FileError(source_name, "read error");  // a stream the caller marked bad
  return lines;
}

std::vector<BatchLine> read_batch_file(const std::string& path) {
  if (path == "-") return read_batch_requests(std::cin, "<stdin>");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open");
  return read_batch_requests(in, path);
}

std::string batch_result_json(const BatchResult& r) {
  json j;
  j["index"] = r.index;
  if (r.id) j["id"] = *r.id;
  j["prompt_ids"] = r.prompt_ids;
  j["generated_ids"] = r.generated_ids;
  j["text"] = r.text;
  j["finish_reason"] = r.finish_reason;
  j["seed"] = r.seed;
  const BatchTimings& t = r.timings;
  j["timings"] = {{"prefill_ms", t.prefill_ms},
                  {"ttft_ms", t.ttft_ms},
                  {"decode_ms", t.decode_ms},
                  {"prefill_tok_s", t.prefill_tok_s},
                  {"decode_tok_s", t.decode_tok_s},
                  {"p50_ms", t.p50_ms},
                  {"p95_ms", t.p95_ms}};
  j["logits_hash"] = r.logits_hash;
  for (const auto& [key, value] : r.diagnostics.items()) j[key] = value;
  return dump_line(j);
}

std::string batch_error_json(int64_t index, const std::optional<nlohmann::json>& id,
                             const std::string& message) {
  json j;
  j["index"] = index;
  if (id) j["id"] = *id;
  j["error"] = message;
  return dump_line(j);
}

PreviousOutput scan_previous_output(std::istream& previous_output) {
  PreviousOutput out;
  std::streambuf* sb = previous_output.rdbuf();
  if (sb == nullptr) return out;
  std::string line;
  bool too_long = false, newline = false;
  while (read_line(*sb, line, kMaxBatchLineBytes, too_long, newline)) {
    out.ends_with_partial_line = !newline;
    if (!newline || too_long) continue;  // cut off while being written, or not a record
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    const auto it = j.find("index");
    if (it == j.end() || !it->is_number_integer()) continue;
    out.answered.insert(it->get<int64_t>());
  }
  return out;
}

std::set<int64_t> answered_indices(std::istream& previous_output) {
  return scan_previous_output(previous_output).answered;
}

}  // namespace llmctl::cli
