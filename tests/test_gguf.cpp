// GGUF reader on real files (facts cross-checked with gguf-py's GGUFReader 0.17: names, types,
// shapes, data offsets, kv counts), and the ggml type table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/ggml_type.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/test_data.h"

using namespace llmctl;
using llmctl::test::require_test_file;

TEST_CASE("ggml type table matches ggml's block sizes", "[cpu]") {
  struct Row { uint32_t id; const char* name; uint32_t block; uint32_t bytes; };
  // gguf-py GGML_QUANT_SIZES (Q8_1 from ggml-common.h, see ggml_type.cpp).
  const Row rows[] = {
      {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
      {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
      {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
      {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
      {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
      {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
      {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},        {25, "I16", 1, 2},
      {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},
      {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
      {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
  };
  for (const Row& r : rows) {
    INFO(r.name);
    const auto t = ggml_type_traits(r.id);
    REQUIRE(t.has_value());
    CHECK(std::string(t->name) == r.name);
    CHECK(t->block_size == r.block);
    CHECK(t->type_size == r.bytes);
    CHECK(ggml_type_from_name(r.name) == static_cast<GgmlType>(r.id));
  }
  for (uint32_t bad : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu})
    CHECK_FALSE(ggml_type_traits(bad).has_value());
  CHECK(ggml_type_from_name("q4_0") == GgmlType::Q4_0);
  CHECK(ggml_type_from_name("bf16") == GgmlType::BF16);
  CHECK_FALSE(ggml_type_from_name("q4_2").has_value());
  CHECK_FALSE(ggml_type_from_name("").has_value());
}

TEST_CASE("stories260K: metadata and tensor table as gguf-py reports them", "[cpu]") {
  const GgufFile f = GgufFile::open(require_test_file("models/stories260K.gguf"));
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 32);
  CHECK(f.file_size() == 1185376);
  CHECK(f.data_offset() == 14176);
  CHECK(f.metadata().size() == 19);
  REQUIRE(f.tensors().size() == 48);

  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_string("tokenizer.ggml.model") == "llama");
  CHECK(f.get_int_or("llama.embedding_length", 0) == 64);
  CHECK(f.get_int_or("llama.block_count", 0) == 5);
  CHECK(f.get_int_or("llama.feed_forward_length", 0) == 172);
  CHECK(f.get_int_or("llama.attention.head_count", 0) == 8);
  CHECK(f.get_int_or("llama.attention.head_count_kv", 0) == 4);
  CHECK(f.get_int_or("tokenizer.ggml.padding_token_id", 0) == 4294967295);
  CHECK(f.get_float_or("llama.attention.layer_norm_rms_epsilon", 0) == Approx(1e-5));
  CHECK(f.get_int_or("no.such.key", -7) == -7);
  CHECK_FALSE(f.get_int("no.such.key").has_value());

  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 512);
  CHECK(tokens[0] == "<unk>");
  CHECK(tokens[1] == "<s>");
  CHECK(tokens[2] == "</s>");
  CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == 512);
  const auto types = f.get_i32_array("tokenizer.ggml.token_type");
  REQUIRE(types.size() == 512);
  CHECK(types[0] == 2);
  CHECK(types[1] == 3);

  const GgufTensorInfo& first = f.tensors().front();
  CHECK(first.name == "token_embd.weight");
  CHECK(first.type == GgmlType::F32);
  CHECK(first.shape == std::vector<int64_t>{64, 512});
  CHECK(first.offset == 0);
  CHECK(first.n_bytes == 131072);
  CHECK(first.data != nullptr);

  const GgufTensorInfo* down = f.find_tensor("blk.0.ffn_down.weight");
  REQUIRE(down != nullptr);
  CHECK(down->shape == std::vector<int64_t>{172, 64});
  CHECK(down->offset == 355840);
  CHECK(down->n_bytes == 44032);
  CHECK(down->n_elements() == 172 * 64);

  const GgufTensorInfo& last = f.tensors().back();
  CHECK(last.name == "blk.4.ffn_norm.weight");
  CHECK(last.offset == 1170944);
  CHECK(f.data_offset() + last.offset + last.n_bytes == f.file_size());
  CHECK(f.find_tensor("nope") == nullptr);

  int64_t params = 0;
  for (const auto& t : f.tensors()) params += t.n_elements();
  CHECK(params == 292800);  // gguf-py: sum of n_elements
}

TEST_CASE("vocab-only files: no tensors, data section may be absent", "[cpu]") {
  const GgufFile spm = GgufFile::open(require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  CHECK(spm.metadata().size() == 22);
  CHECK(spm.tensors().empty());
  CHECK(spm.get_string_array("tokenizer.ggml.tokens").size() == 32000);
  CHECK(spm.get_bool_or("tokenizer.ggml.add_bos_token", false) == true);
  CHECK(spm.get_bool_or("tokenizer.ggml.add_eos_token", true) == false);
  CHECK(spm.get_string("tokenizer.ggml.pre") == "default");

  const GgufFile gpt2 = GgufFile::open(require_test_file("vocab/ggml-vocab-gpt-2.gguf"));
  CHECK(gpt2.metadata().size() == 16);
  const auto merges = gpt2.get_string_array("tokenizer.ggml.merges");
  REQUIRE(merges.size() == 50000);
  CHECK(merges[0] == "\xC4\xA0 t");  // "Ġ t"
  CHECK(gpt2.get_string_array("tokenizer.ggml.tokens").size() == 50257);
  CHECK(gpt2.get_int_or("tokenizer.ggml.bos_token_id", 0) == 50256);
}

TEST_CASE("typed getters name the key and the types on a mismatch", "[cpu]") {
  const GgufFile f = GgufFile::open(require_test_file("models/stories260K.gguf"));
  try {
    (void)f.get_string("llama.block_count");
    FAIL("expected FileError");
  } catch (const FileError& e) {
    CHECK(std::string(e.what()).find("'llama.block_count': expected string, got u32") != std::string::npos);
  }
  CHECK_THROWS_AS(f.get_string("missing.key"), FileError);
  CHECK_THROWS_AS(f.get_int_or("general.name", 0), FileError);
  CHECK_THROWS_AS(f.get_bool_or("llama.block_count", false), FileError);
  CHECK_THROWS_AS(f.get_string_array("tokenizer.ggml.scores"), FileError);
  CHECK_THROWS_AS(f.get_f32_array("tokenizer.ggml.tokens"), FileError);
  CHECK_THROWS_AS(f.get_i32_array("general.name"), FileError);
  CHECK(f.get_string_or("missing.key", "x") == "x");
  CHECK(f.get_string_array("missing.key").empty());
}

// ---------------------------------------------------------------------------
// Writer: read, write, read again gives the same metadata and tensor bytes.
// ---------------------------------------------------------------------------
namespace {

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || a.s != b.s) return false;
  // Compare floats by bits so that NaN payloads and -0.0 count too.
  if (std::memcmp(&a.f, &b.f, sizeof a.f) != 0) return false;
  if (a.type != GgufValueType::ARRAY) return true;
  if (a.arr.elem_type() != b.arr.elem_type() || a.arr.size() != b.arr.size()) return false;
  for (size_t k = 0; k < a.arr.size(); ++k)
    if (!same_value(a.arr[k], b.arr[k])) return false;
  return true;
}

void check_same_file(const GgufFile& a, const GgufFile& b) {
  REQUIRE(a.metadata().size() == b.metadata().size());
  for (size_t k = 0; k < a.metadata().size(); ++k) {
    INFO(a.metadata()[k].key);
    CHECK(a.metadata()[k].key == b.metadata()[k].key);
    CHECK(same_value(a.metadata()[k].value, b.metadata()[k].value));
  }
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (size_t k = 0; k < a.tensors().size(); ++k) {
    const GgufTensorInfo& x = a.tensors()[k];
    const GgufTensorInfo& y = b.tensors()[k];
    INFO(x.name);
    CHECK(x.name == y.name);
    CHECK(x.type == y.type);
    CHECK(x.shape == y.shape);
    REQUIRE(x.n_bytes == y.n_bytes);
    CHECK(std::memcmp(x.data, y.data, x.n_bytes) == 0);
  }
}

}  // namespace

TEST_CASE("writer round trip of stories260K is byte-identical", "[cpu]") {
  const std::string path = require_test_file("models/stories260K.gguf");
  const GgufFile a = GgufFile::open(path);
  const std::vector<uint8_t> image = GgufBuilder::from_file(a).build();
  const GgufFile b = GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(image), "rewritten");
  check_same_file(a, b);
  // gguf-py wrote the original with the same layout rules, so the bytes agree too.
  const std::string original = llmctl::test::read_file(path);
  CHECK(image.size() == original.size());
  CHECK(std::memcmp(image.data(), original.data(), std::min(image.size(), original.size())) == 0);
}

TEST_CASE("writer round trip of every value type, nested arrays and several tensor types", "[cpu]") {
  namespace v = gguf_value;
  GgufBuilder b;
  b.set("general.alignment", v::u32(64))
      .set("u8", v::u8(255)).set("i8", v::i8(-128)).set("u16", v::u16(65535)).set("i16", v::i16(-32768))
      .set("u32", v::u32(UINT32_MAX)).set("i32", v::i32(INT32_MIN)).set("u64", v::u64(UINT64_MAX))
      .set("i64", v::i64(INT64_MIN)).set("f32", v::f32(-0.0f)).set("f64", v::f64(1e-310))
      .set("bool", v::boolean(false)).set("str", v::string(std::string("a\0b", 3)))
      .set("empty", v::array(GgufValueType::FLOAT64, {}))
      .set("nested", v::array(GgufValueType::ARRAY, {v::string_array({"x", "y"}), v::f32_array({1.5f})}))
      .set("u8", v::u8(7));  // replaces, keeps the first position
  b.add_tensor("a", GgmlType::Q8_0, {64, 2}, std::vector<uint8_t>(34 * 4, 3));
  b.add_tensor("b", GgmlType::BF16, {3}, {1, 2, 3, 4, 5, 6});
  b.add_tensor("c", GgmlType::Q4_K, {256}, std::vector<uint8_t>(144, 9));
  CHECK(b.metadata()[1].key == "u8");
  CHECK(b.metadata()[1].value.u == 7);

  const auto image = b.build();
  const GgufFile f = GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(image), "built");
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  for (const auto& t : f.tensors()) CHECK(t.offset % 64 == 0);
  CHECK_THROWS_AS(f.get_int_or("u64", 0), FileError);  // UINT64_MAX does not fit in int64
  CHECK(f.get_int_or("i64", 0) == INT64_MIN);
  CHECK(f.get_string("str") == std::string("a\0b", 3));
  CHECK(f.find("nested")->arr[1].arr[0].f == 1.5);

  const GgufBuilder again = GgufBuilder::from_file(f);
  const auto image2 = again.build();
  CHECK(image2 == image);
  check_same_file(f, GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(image2), "again"));

  // write() then open() through mmap.
  const std::string path = llmctl::test::temp_dir() + "/roundtrip.gguf";
  b.write(path);
  check_same_file(f, GgufFile::open(path));
  CHECK_THROWS_AS(b.write(llmctl::test::temp_dir() + "/no/such/dir/x.gguf"), FileError);
}

TEST_CASE("arrays of every element type keep their values through the packed store", "[cpu]") {
  namespace v = gguf_value;
  auto ints = [](GgufValueType t, std::initializer_list<int64_t> xs) {
    std::vector<GgufValue> e;
    for (const int64_t x : xs) {
      GgufValue g;
      g.type = t;
      g.i = x;
      g.u = static_cast<uint64_t>(x);
      e.push_back(g);
    }
    return v::array(t, std::move(e));
  };
  GgufBuilder b;
  b.set("u8", ints(GgufValueType::UINT8, {0, 255}))
      .set("i8", ints(GgufValueType::INT8, {-128, 127}))
      .set("u16", ints(GgufValueType::UINT16, {0, 65535}))
      .set("i16", ints(GgufValueType::INT16, {-32768, 32767}))
      .set("u32", ints(GgufValueType::UINT32, {0, 4294967295}))
      .set("i32", v::i32_array({INT32_MIN, -1, INT32_MAX}))
      .set("i64", ints(GgufValueType::INT64, {INT64_MIN, INT64_MAX}))
      .set("u64", v::array(GgufValueType::UINT64, {v::u64(UINT64_MAX)}))
      .set("bool", v::array(GgufValueType::BOOL, {v::boolean(true), v::boolean(false)}))
      .set("f32", v::f32_array({-0.0f, 3.5f}))
      .set("f64", v::array(GgufValueType::FLOAT64, {v::f64(1e-310)}))
      .set("str", v::string_array({"", std::string("a\0b", 3), "Ġthe", ""}));
  const auto image = b.build();
  const GgufFile f = GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(image), "built");

  CHECK(f.find("u8")->arr.int_at(1) == 255);
  CHECK(f.find("i8")->arr.int_at(0) == -128);
  CHECK(f.find("u16")->arr.int_at(1) == 65535);
  CHECK(f.find("i16")->arr.int_at(0) == -32768);
  CHECK(f.find("u32")->arr.int_at(1) == 4294967295);
  CHECK(f.find("i64")->arr.int_at(0) == INT64_MIN);
  CHECK(f.find("i64")->arr[1].i == INT64_MAX);
  CHECK(f.find("u64")->arr[0].u == UINT64_MAX);
  CHECK_THROWS_AS(f.find("u64")->arr.int_at(0), Error);  // does not fit int64
  CHECK(f.find("bool")->arr.int_at(0) == 1);
  CHECK(f.find("bool")->arr[1].type == GgufValueType::BOOL);
  CHECK(std::signbit(f.find("f32")->arr.float_at(0)));
  CHECK(f.find("f64")->arr.float_at(0) == 1e-310);
  CHECK(f.get_i32_array("i32") == std::vector<int32_t>{INT32_MIN, -1, INT32_MAX});
  CHECK(f.get_i32_array("u8") == std::vector<int32_t>{0, 255});
  CHECK_THROWS_AS(f.get_i32_array("u32"), FileError);  // 4294967295 does not fit i32
  CHECK(f.get_f32_array("f32") == std::vector<float>{-0.0f, 3.5f});
  const std::vector<std::string> strs{"", std::string("a\0b", 3), "Ġthe", ""};
  CHECK(f.get_string_array("str") == strs);
  const std::vector<std::string_view> views = f.get_string_array_views("str");
  REQUIRE(views.size() == 4);
  CHECK(views[1] == std::string_view("a\0b", 3));
  CHECK(views[3].empty());

  // Editing an array as the hostile-input tests do: drop the last, append a changed copy.
  GgufValue strings = *f.find("str");
  strings.arr.pop_back();
  strings.arr.pop_back();
  GgufValue extra = strings.arr.back();
  extra.s = "new";
  strings.arr.push_back(extra);
  REQUIRE(strings.arr.size() == 3);
  CHECK(strings.arr.string_at(1) == std::string_view("a\0b", 3));
  CHECK(strings.arr.string_at(2) == "new");
  GgufValue numbers = *f.find("i16");
  numbers.arr.pop_back();
  numbers.arr.push_back(numbers.arr.front());
  CHECK(numbers.arr.int_at(1) == -32768);
  CHECK_THROWS_AS(numbers.arr.push_back(v::string("x")), Error);
}
