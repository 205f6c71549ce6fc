// Text and JSON presentation of GGUF metadata values (io/gguf_format.h).
#include <catch2/catch.hpp>

#include "io/gguf_format.h"
#include "io/gguf_writer.h"

using namespace llmctl;
namespace v = llmctl::gguf_value;

TEST_CASE("metadata values as text", "[cpu]") {
  CHECK(format_gguf_value(v::u32(4294967295u)) == "4294967295");
  CHECK(format_gguf_value(v::i8(-128)) == "-128");
  CHECK(format_gguf_value(v::f32(1e-5f)) == "1e-05");
  CHECK(format_gguf_value(v::f64(0.1)) == "0.1");
  CHECK(format_gguf_value(v::boolean(true)) == "true");
  CHECK(format_gguf_value(v::string("a\"b\\c\nd\x01")) == "\"a\\\"b\\\\c\\nd\\x01\"");
  CHECK(format_gguf_value(v::string("\xE2\x96\x81the")) == "\"\xE2\x96\x81the\"");  // UTF-8 kept

  GgufFormatOptions opt;
  opt.max_string = 4;
  // Cut on a character boundary: "ab" + 3-byte char would cross byte 4.
  CHECK(format_gguf_value(v::string("ab\xE2\x96\x81xyz"), opt) == "\"ab\"... (8 bytes)");

  CHECK(format_gguf_value(v::i32_array({})) == "[]");
  CHECK(format_gguf_value(v::i32_array({1, 2, 3})) == "[1, 2, 3]");
  std::vector<std::string> many(17, "x");
  CHECK(format_gguf_value(v::string_array(many)) == "[string x 17] \"x\", \"x\", \"x\", ...");
  opt.max_array = 0;
  CHECK(format_gguf_value(v::i32_array(std::vector<int32_t>(20, 1)), opt).size() == 2 + 20 + 19 * 2);
  const GgufValue nested = v::array(GgufValueType::ARRAY, {v::i32_array({1}), v::i32_array({2, 3})});
  CHECK(format_gguf_value(nested) == "[[1], [2, 3]]");
  CHECK(gguf_type_label(nested) == "array[array[i32]]");
  CHECK(gguf_type_label(v::u8(1)) == "u8");
}

TEST_CASE("metadata values as JSON", "[cpu]") {
  CHECK(gguf_value_to_json(v::u64(UINT64_MAX)).dump() == "18446744073709551615");
  CHECK(gguf_value_to_json(v::i64(INT64_MIN)).dump() == "-9223372036854775808");
  CHECK(gguf_value_to_json(v::f32(1e-5f)).dump() == "1e-05");
  CHECK(gguf_value_to_json(v::boolean(false)).dump() == "false");
  CHECK(gguf_value_to_json(v::i32_array(std::vector<int32_t>(16, 7))).size() == 16);
  const auto s = gguf_value_to_json(v::i32_array(std::vector<int32_t>(17, 7)));
  CHECK(s.dump() == R"({"type":"i32","count":17,"head":[7,7,7,7,7,7,7,7]})");
  CHECK(format_shape({4096, 32000}) == "4096 x 32000");
}
