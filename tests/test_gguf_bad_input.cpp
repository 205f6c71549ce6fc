// Malformed GGUF input: every file here is built byte by byte (gguf_bytes.h) so the test says
// what is wrong with it. Each must be rejected with a FileError naming the byte offset of the
// bad field; nothing may crash, hang, read out of bounds or allocate by a number in the file.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>

#include "gguf_bytes.h"
#include "io/gguf_writer.h"
#include "support/test_data.h"

using namespace llmctl;
using llmctl::test::Bytes;
using llmctl::test::parse_bytes;
using llmctl::test::parse_error;

namespace {

constexpr uint32_t kU8 = 0, kU32 = 4, kString = 8, kArray = 9;
constexpr uint32_t kF32 = 0, kQ4_0 = 2;  // ggml type numbers

// Fails unless `bytes` is rejected with a message containing `what` at byte `at`.
void expect_error(const Bytes& bytes, const std::string& what, uint64_t at) {
  const FileError e = parse_error(bytes.b);
  INFO(e.what());
  CHECK(std::string(e.what()).find(what) != std::string::npos);
  CHECK(e.offset() == at);
  CHECK(std::string(e.what()).find(fmt::format("(at byte {})", at)) != std::string::npos);
}

// A small valid v3 file with every metadata type, a nested array and three tensors whose
// last one ends exactly at the end of the file (so that every shorter prefix is invalid).
std::vector<uint8_t> small_valid_file() {
  namespace v = gguf_value;
  GgufBuilder b;
  b.set("general.architecture", v::string("llama"))
      .set("t.u8", v::u8(200)).set("t.i8", v::i8(-100)).set("t.u16", v::u16(60000))
      .set("t.i16", v::i16(-30000)).set("t.u32", v::u32(4000000000u)).set("t.i32", v::i32(-2000000000))
      .set("t.u64", v::u64(1ull << 63)).set("t.i64", v::i64(-(1ll << 62))).set("t.f32", v::f32(0.25f))
      .set("t.f64", v::f64(-1e300)).set("t.bool", v::boolean(true)).set("t.str", v::string("h\xC3\xA9llo"))
      .set("t.strs", v::string_array({"<unk>", "", "x"}))
      .set("t.nested", v::array(GgufValueType::ARRAY, {v::i32_array({1, 2}), v::i32_array({})}));
  std::vector<uint8_t> q(18 * 2, 0x88);
  b.add_tensor("q", GgmlType::Q4_0, {64}, q);
  b.add_tensor("w", GgmlType::F32, {2, 3}, std::vector<uint8_t>(24, 1));
  b.add_tensor("z", GgmlType::F32, {8}, std::vector<uint8_t>(32, 2));  // 32 bytes: no tail padding
  return b.build();
}

}  // namespace

TEST_CASE("the small test file is valid and ends with its last tensor", "[cpu]") {
  const auto bytes = small_valid_file();
  const GgufFile f = parse_bytes(bytes);
  REQUIRE(f.tensors().size() == 3);
  const GgufTensorInfo& z = f.tensors()[2];
  CHECK(f.data_offset() + z.offset + z.n_bytes == bytes.size());
}

TEST_CASE("every truncated prefix of a valid file is a FileError", "[cpu]") {
  const auto bytes = small_valid_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const FileError e = parse_error(prefix);
    CHECK(e.offset() <= n);  // never points past what was there
  }
}

TEST_CASE("truncating stories260K anywhere in its header or data is a FileError", "[cpu][slow]") {
  const std::string all = llmctl::test::read_file(llmctl::test::require_test_file("models/stories260K.gguf"));
  const std::vector<uint8_t> bytes(all.begin(), all.end());
  const size_t header_end = 14176 + 64;  // data section starts at 14176 (gguf-py)
  std::vector<size_t> cuts;
  for (size_t n = 0; n < header_end; ++n) cuts.push_back(n);
  for (size_t n = header_end; n < bytes.size(); n += 4099) cuts.push_back(n);
  cuts.push_back(bytes.size() - 1);
  for (const size_t n : cuts) {
    INFO("prefix of " << n << " bytes");
    (void)parse_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)));
  }
}

TEST_CASE("bad magic and unsupported versions", "[cpu]") {
  expect_error(Bytes{}, "unexpected end of file reading magic", 0);
  expect_error(Bytes{}.raw("GGML").u32(3).u64(0).u64(0), "not a GGUF file: magic is 47 47 4d 4c", 0);
  expect_error(Bytes{}.header(0, 0, 1), "GGUF version 1 is not supported", 4);
  expect_error(Bytes{}.header(0, 0, 0), "unknown GGUF version 0", 4);
  expect_error(Bytes{}.header(0, 0, 4), "unknown GGUF version 4", 4);
  const FileError be = parse_error(Bytes{}.header(0, 0, 0x03000000u).b);
  CHECK(be.hint().find("big-endian") != std::string::npos);
  // v2 and v3 share a layout.
  CHECK(parse_bytes(Bytes{}.header(0, 0, 2).b).version() == 2);
  CHECK(parse_bytes(Bytes{}.header(0, 0, 3).b).version() == 3);
}

TEST_CASE("counts larger than the file can hold are rejected before allocating", "[cpu]") {
  expect_error(Bytes{}.header(1ull << 60, 0), "tensor count 1152921504606846976 cannot fit", 8);
  expect_error(Bytes{}.header(0, UINT64_MAX), "metadata count 18446744073709551615 cannot fit", 16);
  // A count that fits the minimum encoding but not the actual entries: fails at the end.
  // (the second key is empty-length, u8-typed, and its value byte is missing)
  expect_error(Bytes{}.header(0, 2).kv_u32("a", 1).str("b").u32(kU8), "unexpected end of file reading u8 value", 24 + 17 + 13);
  expect_error(Bytes{}.header(0, 1).str("").u32(kU8).u8(0), "empty metadata key", 24);
}

TEST_CASE("string lengths past the end or absurdly large", "[cpu]") {
  expect_error(Bytes{}.header(0, 1).u64(1000).raw("abc").zeros(10), "metadata key length 1000 runs past the end", 24);
  expect_error(Bytes{}.header(0, 1).u64(UINT64_MAX).zeros(16), "metadata key length 18446744073709551615 exceeds", 24);
  expect_error(Bytes{}.header(0, 1).u64(70000).zeros(70020), "exceeds the limit of 65535", 24);
  Bytes b;
  b.header(0, 1).str("k").u32(kString);
  const size_t at = b.size();
  b.u64(1ull << 62).raw("short");
  expect_error(b, "string value length 4611686018427387904 runs past the end of the file (5 bytes left)", at);
  Bytes t;
  t.header(1, 0);
  t.u64(99).raw("x").zeros(40);
  expect_error(t, "tensor name length 99 runs past the end", 24);
}

TEST_CASE("array lengths past the end or absurdly large", "[cpu]") {
  for (const uint32_t elem : {kU8, kString, kArray}) {
    Bytes b;
    b.header(0, 1).str("arr").u32(kArray).u32(elem);
    const size_t at = b.size();
    b.u64(1ull << 60).zeros(64);
    INFO("element type " << elem);
    expect_error(b, "key 'arr': array of 1152921504606846976", at);
  }
  // Eight bytes left hold at most one string length: two strings cannot fit.
  Bytes s;
  s.header(0, 1).str("arr").u32(kArray).u32(kString);
  const size_t at = s.size();
  s.u64(2).u64(0);
  expect_error(s, "cannot fit in the 8 bytes left", at);
  // A u8 array the file can hold but above the element budget.
  Bytes big;
  big.header(0, 1).str("big").u32(kArray).u32(kU8);
  const size_t big_at = big.size();
  big.u64(kGgufMaxMetadataElements + 1).zeros(kGgufMaxMetadataElements + 1);
  expect_error(big, "array elements in total", big_at);
}

TEST_CASE("nested arrays are bounded in depth", "[cpu]") {
  auto nested = [](uint32_t levels) {
    Bytes b;
    b.header(0, 1).str("n").u32(kArray);
    for (uint32_t i = 1; i < levels; ++i) b.u32(kArray).u64(1);
    b.u32(kU32).u64(1).u32(7);
    return b;
  };
  const GgufFile ok = parse_bytes(nested(kGgufMaxArrayDepth).b);
  const GgufValue* v = ok.find("n");
  REQUIRE(v != nullptr);
  for (uint32_t i = 1; i < kGgufMaxArrayDepth; ++i) {
    REQUIRE(v->arr.size() == 1);
    v = &v->arr.array_at(0);
  }
  REQUIRE(v->arr.size() == 1);
  CHECK(v->arr[0].u == 7);
  // One level deeper fails at the type field of the ninth array; 100000 levels the same way.
  // header 24, key "n" 9, value type 4, then 12 bytes (element type, count) per array.
  const size_t ninth = 24 + 9 + 4 + 12 * kGgufMaxArrayDepth;
  expect_error(nested(kGgufMaxArrayDepth + 1), "nested deeper than 8 levels", ninth);
  expect_error(nested(100000), "nested deeper than 8 levels", ninth);
}

TEST_CASE("unknown value types and bad bools", "[cpu]") {
  expect_error(Bytes{}.header(0, 1).str("k").u32(13).u32(0), "key 'k': unknown value type 13", 24 + 9);
  expect_error(Bytes{}.header(0, 1).str("k").u32(0xffffffffu).u32(0), "unknown value type 4294967295", 24 + 9);
  expect_error(Bytes{}.header(0, 1).str("k").u32(kArray).u32(42).u64(0), "unknown array element type 42", 24 + 13);
  expect_error(Bytes{}.header(0, 1).str("k").u32(7).u8(2), "bool value is 2, expected 0 or 1", 24 + 13);
}

TEST_CASE("duplicate keys and tensor names", "[cpu]") {
  Bytes k;
  k.header(0, 2).kv_u32("a.b", 1);
  const size_t at = k.size();
  k.kv_u32("a.b", 2);
  expect_error(k, "duplicate metadata key 'a.b'", at);

  Bytes t;
  t.header(2, 0).tensor("w", {8}, kF32, 0);
  const size_t t_at = t.size();
  t.tensor("w", {8}, kF32, 32).pad_to(32).zeros(64);
  expect_error(t, "duplicate tensor name 'w'", t_at);

  // Names from the file are shown with control bytes escaped and long ones cut.
  Bytes esc;
  esc.header(1, 0).tensor("a\x1b[31m", {8}, 99, 0);
  expect_error(esc, "tensor 'a\\x1b[31m': unknown ggml type 99", 24 + 8 + 6 + 4 + 8);
  Bytes long_key;
  long_key.header(0, 1).str(std::string(200, 'k')).u32(77);
  expect_error(long_key, "key '" + std::string(80, 'k') + "...': unknown value type 77", 24 + 208);
}

TEST_CASE("general.alignment of the wrong type, zero or not a power of two", "[cpu]") {
  // header 24, key "general.alignment" 8 + 17: the type field is at byte 49, the value at 53.
  expect_error(Bytes{}.header(0, 1).str("general.alignment").u32(10).u64(32),
               "general.alignment has type u64, expected u32", 49);
  expect_error(Bytes{}.header(0, 1).kv_string("general.alignment", "32"), "has type string", 49);
  expect_error(Bytes{}.header(0, 1).kv_u32("general.alignment", 0), "general.alignment is 0, expected a power of two", 53);
  expect_error(Bytes{}.header(0, 1).kv_u32("general.alignment", 48), "general.alignment is 48", 53);

  // A valid alignment of 64 moves the data section and constrains offsets.
  Bytes ok;
  ok.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {16}, kF32, 0).pad_to(64);
  const size_t data = ok.size();
  ok.zeros(64);
  const GgufFile f = parse_bytes(ok.b);
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() == data);
  Bytes mis;
  mis.header(1, 1).kv_u32("general.alignment", 64);
  const size_t off_at = mis.size() + 8 + 1 + 4 + 8 + 4;
  mis.tensor("w", {8}, kF32, 32).pad_to(64).zeros(128);
  expect_error(mis, "data offset 32 is not a multiple of the alignment 64", off_at);
}

TEST_CASE("bad tensor infos: types, dims, shapes", "[cpu]") {
  // Tensor info of tensor "w" right after the 24-byte header: name 9 bytes, n_dims at 33.
  auto one = [](const std::vector<int64_t>& dims, uint32_t type, uint64_t offset = 0) {
    Bytes b;
    b.header(1, 0).tensor("w", dims, type, offset).pad_to(32).zeros(256);
    return b;
  };
  const size_t n_dims_at = 24 + 9, dim0_at = n_dims_at + 4;
  for (const uint32_t type : {4u, 5u, 31u, 32u, 33u}) {
    INFO("type " << type);
    expect_error(one({32}, type), fmt::format("unknown ggml type {} (removed from ggml)", type), dim0_at + 8);
  }
  expect_error(one({32}, 40), "unknown ggml type 40", dim0_at + 8);
  expect_error(one({32}, 0xffffffffu), "unknown ggml type 4294967295", dim0_at + 8);
  expect_error(one({}, kF32), "n_dims is 0, expected 1..4", n_dims_at);
  expect_error(one({1, 1, 1, 1, 1}, kF32), "n_dims is 5, expected 1..4", n_dims_at);
  expect_error(one({0}, kF32), "dimension 0 is 0, expected > 0", dim0_at);
  expect_error(one({4, -1}, kF32), "dimension 1 is -1, expected > 0", dim0_at + 8);
  expect_error(one({1ll << 32, 1ll << 32}, kF32), "element count overflows int64 at dimension 1", dim0_at + 8);
  expect_error(one({std::numeric_limits<int64_t>::max(), 2}, kF32), "overflows int64", dim0_at + 8);
  expect_error(one({33}, kQ4_0), "row length 33 is not a multiple of the Q4_0 block size 32", dim0_at);
  expect_error(one({1ll << 31, 1ll << 31}, 28 /* F64 */), "byte size overflows 64 bits", n_dims_at);
}

TEST_CASE("bad tensor offsets: misaligned, overlapping, past the end, overflowing", "[cpu]") {
  const size_t off_at = 24 + 9 + 4 + 8 + 4;  // first tensor "w" with one dimension
  auto one = [](uint64_t offset, size_t data_bytes) {
    Bytes b;
    b.header(1, 0).tensor("w", {8}, kF32, offset).pad_to(32).zeros(data_bytes);
    return b;
  };
  expect_error(one(1, 64), "data offset 1 is not a multiple of the alignment 32", off_at);
  expect_error(one(0, 31), "tensor 'w': data [0, +32) runs past the end of the 31-byte data section", off_at);
  expect_error(one(32, 63), "runs past the end", off_at);
  expect_error(one(1ull << 63, 64), "runs past the end", off_at);
  expect_error(one(UINT64_MAX - 31, 64), "runs past the end", off_at);  // offset + size overflows
  CHECK(parse_bytes(one(32, 64).b).tensors()[0].offset == 32);

  Bytes overlap;
  overlap.header(2, 0).tensor("a", {16}, kF32, 0);
  const size_t b_off_at = overlap.size() + 9 + 4 + 8 + 4;
  overlap.tensor("b", {8}, kF32, 32).pad_to(32).zeros(128);
  expect_error(overlap, "tensor 'b': data [32, +32) overlaps tensor 'a' [0, +64)", b_off_at);

  // Tensors exist but the file ends inside the padding before the data section.
  Bytes no_data;
  no_data.header(1, 0).tensor("w", {8}, kF32, 0);
  const size_t end = no_data.size();
  expect_error(no_data, "data section would start at byte 64", end);
}

TEST_CASE("the writer refuses what the reader would reject", "[cpu]") {
  namespace v = gguf_value;
  GgufBuilder b;
  CHECK_THROWS_AS(b.add_tensor("q", GgmlType::Q4_0, {33}, std::vector<uint8_t>(18)), Error);
  CHECK_THROWS_AS(b.add_tensor("w", GgmlType::F32, {4}, std::vector<uint8_t>(15)), Error);
  CHECK_THROWS_AS(b.add_tensor("w", GgmlType::F32, {}, {}), Error);
  b.add_tensor("w", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  CHECK_THROWS_AS(b.add_tensor("w", GgmlType::F32, {4}, std::vector<uint8_t>(16)), Error);
  // An array holds one element type: a mixed one cannot even be made, so no file gets one.
  CHECK_THROWS_WITH(v::array(GgufValueType::INT32, {v::i32(1), v::u32(2)}),
                    "an array of i32 cannot hold a u32 element");
  GgufValue too_big = v::u8(0);
  too_big.u = 256;
  CHECK_THROWS_WITH(v::array(GgufValueType::UINT8, {v::u8(1), too_big}),
                    "value 256 does not fit an array of u8");
  GgufBuilder bad_align;
  bad_align.set("general.alignment", v::u32(24));
  CHECK_THROWS_AS(bad_align.build(), Error);
}

// Writes the fuzzer's seed corpus (tests/fuzz/corpus/gguf) when LLMCTL_WRITE_FUZZ_CORPUS names
// a directory:  LLMCTL_WRITE_FUZZ_CORPUS=tests/fuzz/corpus/gguf build/tests/test_gguf_bad_input "write*"
TEST_CASE("write the fuzz seed corpus on request", "[cpu]") {
  const char* dir = std::getenv("LLMCTL_WRITE_FUZZ_CORPUS");
  if (dir == nullptr || *dir == '\0') return;
  namespace v = gguf_value;
  auto save = [&](const std::string& name, const std::vector<uint8_t>& b) {
    REQUIRE(b.size() < 10000);
    llmctl::test::write_file(std::string(dir) + "/" + name, std::string(b.begin(), b.end()));
  };
  const auto valid = small_valid_file();
  save("valid_all_types", valid);
  save("truncated", std::vector<uint8_t>(valid.begin(), valid.begin() + 200));
  GgufBuilder vocab;
  vocab.set("general.architecture", v::string("llama"))
      .set("tokenizer.ggml.tokens", v::string_array({"<unk>", "<s>", "</s>", "\xE2\x96\x81the", "a"}))
      .set("tokenizer.ggml.scores", v::f32_array({0.f, 0.f, 0.f, -1.5f, -2.f}))
      .set("tokenizer.ggml.token_type", v::i32_array({2, 3, 3, 1, 1}));
  save("vocab_only", vocab.build());
  GgufBuilder aligned;
  aligned.set("general.alignment", v::u32(64))
      .set("deep", v::array(GgufValueType::ARRAY, {v::array(GgufValueType::ARRAY, {v::i32_array({1})})}));
  aligned.add_tensor("q8", GgmlType::Q8_0, {32}, std::vector<uint8_t>(34, 1));
  aligned.add_tensor("q41", GgmlType::Q4_1, {32, 2}, std::vector<uint8_t>(40, 2));
  aligned.add_tensor("k", GgmlType::Q6_K, {256}, std::vector<uint8_t>(210, 3));
  save("aligned64_quant", aligned.build());
  Bytes v2;
  v2.header(1, 1, 2).kv_string("general.name", "v2").tensor("w", {2, 2}, kF32, 0).pad_to(32).zeros(16);
  save("v2", v2.b);
  Bytes bad;
  bad.header(1, 0).tensor("w", {33}, kQ4_0, 0).pad_to(32).zeros(64);
  save("bad_row", bad.b);
}
