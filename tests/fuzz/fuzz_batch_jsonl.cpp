// libFuzzer target for the --batch JSONL reader and the --resume scanner on arbitrary bytes.
//
// Properties checked: nothing throws; every BatchLine is either a request (no error) or an
// error starting with "line N: " for its own index; indices strictly increase; a request has
// exactly one of prompt and messages; every error record and a result record built from a
// request are single lines of valid JSON carrying the index.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cli/batch_io.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_batch_jsonl: property violated: %s\n", what);
  std::abort();
}

void check_record(const std::string& line, int64_t index) {
  if (line.find('\n') != std::string::npos) finding("record spans several lines");
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("index") || j["index"] != index)
    finding("record without its index");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  const auto lines = llmctl::cli::read_batch_requests(in, "fuzz.jsonl");
  int64_t last = -1;
  for (const auto& l : lines) {
    if (l.index <= last) finding("indices not increasing");
    last = l.index;
    if (l.request) {
      if (!l.error.empty()) finding("request with an error");
      if (l.request->prompt.has_value() == !l.request->messages.empty())
        finding("request needs exactly one of prompt and messages");
      llmctl::cli::BatchResult r;
      r.index = l.index;
      r.id = l.id;
      r.text = l.request->prompt.value_or("");
      check_record(llmctl::cli::batch_result_json(r), l.index);
    } else {
      if (l.error.rfind("line " + std::to_string(l.index + 1) + ": ", 0) != 0)
        finding("error does not name its line");
      check_record(llmctl::cli::batch_error_json(l.index, l.id, l.error), l.index);
    }
  }
  std::istringstream prev(text);
  (void)llmctl::cli::scan_previous_output(prev);
  return 0;
}
