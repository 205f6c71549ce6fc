#pragma once
// Presenting a GgufFile to people and to scripts: metadata values as short text, per-type
// totals, and a JSON document. Used by `llmctl inspect`; no CLI or printing here.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf.h"

namespace llmctl {

struct GgufFormatOptions {
  // Arrays with more elements are summarised: text "[string x 512] "a", "b", "c", ..." with
  // `text_head` elements; JSON {"type", "count", "head"} with `json_head` elements.
  size_t max_array = 16;  // 0: never summarise
  size_t text_head = 3;
  size_t json_head = 8;
  size_t max_string = 160;  // text only: longer strings are cut, with their byte count
};

// "u32", "string", "array[string]", "array[array[i32]]" ...
std::string gguf_type_label(const GgufValue& v);
// A value as one line of text: numbers, true/false, strings quoted with C escapes.
std::string format_gguf_value(const GgufValue& v, const GgufFormatOptions& opt = {});
// A value as JSON; strings are kept byte for byte (dump with error_handler_t::replace for
// bytes that are not UTF-8).
nlohmann::ordered_json gguf_value_to_json(const GgufValue& v, const GgufFormatOptions& opt = {});
// "4096 x 32000" (ggml order, row length first).
std::string format_shape(const std::vector<int64_t>& shape);

struct GgufTypeTotal {
  GgmlType type = GgmlType::F32;
  int64_t n_tensors = 0;
  int64_t n_elements = 0;
  uint64_t n_bytes = 0;
};
// Tensor count, elements and bytes per ggml type, ordered by type number.
std::vector<GgufTypeTotal> gguf_type_totals(const GgufFile& f);
int64_t gguf_parameter_count(const GgufFile& f);

// The whole file as JSON: header fields, metadata (values and types), tensors, totals.
nlohmann::ordered_json gguf_to_json(const GgufFile& f, const GgufFormatOptions& opt = {});

}  // namespace llmctl
