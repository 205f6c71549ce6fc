// The safetensors reader on valid files and on every kind of hostile header: each must give
// a FileError with a message saying what is wrong (never a crash, never another exception).
// Files are built here byte by byte, so the expected values come from the test itself.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "io/safetensors.h"
#include "support/test_data.h"

using namespace llmctl;
using Catch::Matchers::Contains;

namespace {

using Bytes = std::vector<uint8_t>;

// u64 length + header + data.
Bytes make_file(const std::string& header, const Bytes& data = {}, uint64_t length_field = 0) {
  const uint64_t n = length_field != 0 ? length_field : header.size();
  Bytes out(8);
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

SafetensorsFile parse(const Bytes& bytes) {
  return SafetensorsFile::from_memory(std::make_shared<const Bytes>(bytes), "t.safetensors");
}

// The FileError message parse() gives, "no error" when it parses. Any other exception
// escapes and fails the test.
std::string error_of(const Bytes& bytes) {
  try {
    parse(bytes);
  } catch (const FileError& e) {
    return e.what();
  }
  return "no error";
}

std::string error_of_header(const std::string& header, const Bytes& data = {}) {
  return error_of(make_file(header, data));
}

Bytes f32_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A valid two-tensor file: "a" F32 (2, 3) = 0..5 and "b" BF16 (4,) = 1, -2, 0.5, 8.
Bytes valid_file() {
  Bytes data = f32_bytes({0, 1, 2, 3, 4, 5});
  for (const float f : {1.0f, -2.0f, 0.5f, 8.0f}) {
    const uint16_t h = f32_to_bf16(f);
    data.push_back(static_cast<uint8_t>(h & 0xff));
    data.push_back(static_cast<uint8_t>(h >> 8));
  }
  return make_file(R"({"__metadata__":{"format":"pt"},)"
                   R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
                   R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
                   data);
}

}  // namespace

TEST_CASE("safetensors: a valid file", "[cpu]") {
  const Bytes bytes = valid_file();
  const SafetensorsFile f = parse(bytes);
  REQUIRE(f.tensors().size() == 2);
  CHECK(f.metadata().at("format") == "pt");
  const SafetensorsTensor* a = f.find("a");
  REQUIRE(a != nullptr);
  CHECK(a->type == GgmlType::F32);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->n_elements() == 6);
  CHECK(a->n_bytes() == 24);
  float x[6];
  std::memcpy(x, a->data, sizeof x);
  CHECK(x[0] == 0.0f);
  CHECK(x[5] == 5.0f);
  const SafetensorsTensor* b = f.find("b");
  REQUIRE(b != nullptr);
  CHECK(b->type == GgmlType::BF16);
  uint16_t h;
  std::memcpy(&h, b->data + 2, 2);
  CHECK(bf16_to_f32(h) == -2.0f);
  CHECK(f.find("c") == nullptr);
  CHECK(f.data_offset() == 8 + f.header_size());

  // The same bytes through the file path and mmap.
  const std::string path = llmctl::test::temp_dir() + "/valid.safetensors";
  llmctl::test::write_file(path, std::string(bytes.begin(), bytes.end()));
  SafetensorsFile g = SafetensorsFile::open(path);
  REQUIRE(g.find("a") != nullptr);
  CHECK(std::memcmp(g.find("a")->data, a->data, 24) == 0);
  // Moving keeps the tensor pointers valid (the mapping is shared, not copied).
  const uint8_t* before = g.find("b")->data;
  const SafetensorsFile moved = std::move(g);
  CHECK(moved.find("b")->data == before);
}

TEST_CASE("safetensors: empty header and empty tensors are valid", "[cpu]") {
  CHECK(parse(make_file("{}")).tensors().empty());
  CHECK(parse(make_file("  {}  ")).tensors().empty());
  const SafetensorsFile f =
      parse(make_file(R"({"e":{"dtype":"F16","shape":[0,4],"data_offsets":[0,0]},)"
                      R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                      f32_bytes({7})));
  CHECK(f.find("e")->n_elements() == 0);
  CHECK(f.find("s")->n_elements() == 1);  // a scalar
}

TEST_CASE("safetensors: bad header length", "[cpu]") {
  CHECK_THAT(error_of({1, 2, 3}), Contains("3 bytes is too small for the 8-byte header length"));
  CHECK_THAT(error_of(make_file("{}", {}, 1000)),
             Contains("header length 1000 runs past the end of the file (2 bytes after"));
  CHECK_THAT(error_of(make_file("{}", {}, 200'000'000)),
             Contains("header length 200000000 exceeds the limit of 100000000 bytes"));
  CHECK_THAT(error_of(make_file("{}", {}, UINT64_MAX)), Contains("exceeds the limit"));
  CHECK_THAT(error_of(make_file("{", {}, 1)), Contains("too short for a JSON object"));
  // A GGUF file is not a safetensors file: its first 8 bytes read as a huge length.
  CHECK_THAT(error_of({'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0}), Contains("exceeds the limit"));
  try {
    parse(make_file("{}", {}, 1000));
    FAIL("no error");
  } catch (const FileError& e) {
    CHECK(e.offset() == 0);
    CHECK(e.path() == "t.safetensors");
  }
}

TEST_CASE("safetensors: the header must be a JSON object", "[cpu]") {
  CHECK_THAT(error_of_header("{\"a\": }"), Contains("header is not valid JSON"));
  CHECK_THAT(error_of_header("not json"), Contains("header is not valid JSON"));
  CHECK_THAT(error_of_header("{\"a\":1} trailing"), Contains("header is not valid JSON"));
  CHECK_THAT(error_of_header("[1, 2]"), Contains("header is a JSON array, expected an object"));
  CHECK_THAT(error_of_header("{\"\xff\":1}"), Contains("header is not valid JSON"));  // not UTF-8
  try {
    parse(make_file("{\"a\": }"));
    FAIL("no error");
  } catch (const FileError& e) {
    CHECK(e.offset() == 8 + 6);  // the '}' where a value should be
  }
}

TEST_CASE("safetensors: truncated data and offsets out of range", "[cpu]") {
  Bytes full = valid_file();
  full.resize(full.size() - 1);  // the last byte of "b" is gone
  CHECK_THAT(error_of(full),
             Contains("tensor 'b': data_offsets [24, 32] run past the end of the 31-byte data"));
  CHECK_THAT(error_of_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", Bytes(8)),
             Contains("tensor 'a': data_offsets [8, 4] end before they begin"));
  CHECK_THAT(
      error_of_header(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612, 18446744073709551615]}})"),
      Contains("expected a non-negative integer below 2^63"));
  CHECK_THAT(error_of_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", Bytes(4)),
             Contains("tensor 'a': data_offsets is [0], expected [begin, end]"));
  CHECK_THAT(
      error_of_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":["0","4"]}})", Bytes(4)),
      Contains("tensor 'a': data_offsets begin is \"0\", expected a non-negative integer"));
  CHECK_THAT(
      error_of_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", Bytes(4)),
      Contains("data_offsets begin is -4, expected a non-negative integer"));
}

TEST_CASE("safetensors: overlapping tensors", "[cpu]") {
  CHECK_THAT(error_of_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             Bytes(12)),
             Contains("tensor 'b': data [4, 12) overlaps tensor 'a' [0, 8)"));
  // Two names for the same bytes overlap too.
  CHECK_THAT(error_of_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                             Bytes(8)),
             Contains("overlaps tensor"));
  // Adjacent is fine, and so is a gap.
  CHECK(error_of_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                        Bytes(16)) == "no error");
}

TEST_CASE("safetensors: data size must match dtype and shape", "[cpu]") {
  CHECK_THAT(
      error_of_header(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", Bytes(24)),
      Contains("tensor 'a': data_offsets [0, 20] hold 20 bytes, but F32 [2,3] needs 24"));
  CHECK_THAT(
      error_of_header(R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,12]}})", Bytes(12)),
      Contains("hold 12 bytes, but F16 [3] needs 6"));
}

TEST_CASE("safetensors: unsupported and malformed dtypes", "[cpu]") {
  CHECK_THAT(error_of_header(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", Bytes(8)),
             Contains("tensor 'w': dtype I64 is not supported (supported: F32, F16, BF16)"));
  CHECK_THAT(
      error_of_header(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", Bytes(1)),
      Contains("dtype F8_E4M3 is not supported"));
  CHECK_THAT(error_of_header(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", Bytes(4)),
             Contains("dtype f32 is not supported"));
  CHECK_THAT(error_of_header(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", Bytes(4)),
             Contains("tensor 'w': dtype is 32, expected a string"));
  CHECK_THAT(error_of_header(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", Bytes(4)),
             Contains("tensor 'w': expected an object with dtype, shape and data_offsets"));
  CHECK_THAT(error_of_header(R"({"w":[1,2]})"), Contains("expected an object with dtype"));
}

TEST_CASE("safetensors: huge and malformed shapes", "[cpu]") {
  CHECK_THAT(
      error_of_header(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})"),
      Contains("tensor 'w': element count of shape [4294967296,4294967296] overflows int64"));
  CHECK_THAT(error_of_header(
                 R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})"),
             Contains("byte size of shape [4611686018427387904] overflows 64 bits"));
  CHECK_THAT(error_of_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})"),
             Contains("tensor 'w': shape entry is -1, expected a non-negative integer"));
  CHECK_THAT(error_of_header(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})"),
             Contains("shape entry is 1.5"));
  CHECK_THAT(
      error_of_header(R"({"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})"),
      Contains("expected an array of at most 8 sizes"));
  CHECK_THAT(error_of_header(R"({"w":{"dtype":"F32","shape":3,"data_offsets":[0,4]}})"),
             Contains("tensor 'w': shape is 3, expected an array"));
}

TEST_CASE("safetensors: nesting, value counts, duplicates, metadata", "[cpu]") {
  CHECK_THAT(error_of_header("{\"a\":" + std::string(50, '[') + std::string(50, ']') + "}"),
             Contains("header JSON is nested deeper than 8 levels"));
  // 100,000 levels would overflow a recursive parser; the scan stops at level 9.
  CHECK_THAT(error_of_header(std::string(100'000, '[')), Contains("nested deeper"));
  std::string many = "{\"a\":[0";
  for (int i = 0; i < (1 << 22); ++i) many += ",0";
  many += "]}";
  CHECK_THAT(error_of_header(many), Contains("header JSON holds more than 4194304 values"));
  // Brackets and commas inside strings do not count.
  CHECK(error_of_header(R"({"__metadata__":{"x":"[[[[[[[[[[[[,,,,"}})") == "no error");
  CHECK_THAT(error_of_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             Bytes(8)),
             Contains("header names 'a' twice"));
  CHECK_THAT(error_of_header(R"({"__metadata__":{"n":3}})"),
             Contains("__metadata__ 'n' is a JSON number, expected a string"));
  CHECK_THAT(error_of_header(R"({"__metadata__":[]})"), Contains("__metadata__ is a JSON array"));
  // Control characters in a name are escaped in the message.
  CHECK_THAT(
      error_of_header("{\"a\\u001b[31m\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                      Bytes(1)),
      Contains("tensor 'a\\u001b[31m': dtype I8"));
}

TEST_CASE("safetensors: every truncation and random corruption gives FileError or a valid file",
          "[cpu]") {
  const Bytes good = valid_file();
  for (size_t n = 0; n < good.size(); ++n) {
    const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK(error_of(cut) != "no error");  // every proper prefix is missing something
  }
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = good;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    if (error_of(b) == "no error") ++parsed;  // e.g. a changed data byte: still valid
  }
  CHECK(parsed > 0);
  CHECK(parsed < 3000);
}

TEST_CASE("safetensors: sharded checkpoint through model.safetensors.index.json", "[cpu]") {
  namespace fs = std::filesystem;
  const std::string dir = llmctl::test::temp_dir() + "/sharded";
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const Bytes& b) {
    llmctl::test::write_file(dir + "/" + name, std::string(b.begin(), b.end()));
  };
  write("s1.safetensors",
        make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32_bytes({1})));
  write("s2.safetensors",
        make_file(R"({"y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32_bytes({2})));
  const auto index = [&](const std::string& text) {
    llmctl::test::write_file(dir + "/model.safetensors.index.json", text);
  };
  const auto error_of_dir = [&]() -> std::string {
    try {
      SafetensorsCheckpoint::open_dir(dir);
    } catch (const FileError& e) {
      return e.what();
    }
    return "no error";
  };

  index(R"({"metadata":{},"weight_map":{"x":"s1.safetensors","y":"s2.safetensors"}})");
  const SafetensorsCheckpoint c = SafetensorsCheckpoint::open_dir(dir);
  CHECK(c.files().size() == 2);
  const SafetensorsFile* file = nullptr;
  const SafetensorsTensor* y = c.find("y", &file);
  REQUIRE(y != nullptr);
  CHECK_THAT(file->path(), Contains("s2.safetensors"));
  float v;
  std::memcpy(&v, y->data, 4);
  CHECK(v == 2.0f);
  CHECK(c.find("z") == nullptr);
  CHECK_THAT(c.path_of("y"), Contains("s2.safetensors"));

  index(R"({"weight_map":{"x":"s2.safetensors"}})");
  CHECK_THAT(error_of_dir(), Contains("weight_map places tensor 'x' in s2.safetensors, which does "
                                      "not hold it"));
  index(R"({"weight_map":{"x":"../s1.safetensors"}})");
  CHECK_THAT(error_of_dir(), Contains("expected a file name in the model directory"));
  index(R"({"weight_map":{"x":"missing.safetensors"}})");
  CHECK_THAT(error_of_dir(), Contains("missing.safetensors: cannot open"));
  index(R"({"weight_map":[]})");
  CHECK_THAT(error_of_dir(), Contains("expected a JSON object with a \"weight_map\" object"));
  index(R"({"weight_map":{}})");
  CHECK_THAT(error_of_dir(), Contains("weight_map lists no tensors"));
  index("{");
  CHECK_THAT(error_of_dir(), Contains("model.safetensors.index.json: not valid JSON"));

  fs::remove(dir + "/model.safetensors.index.json");
  CHECK_THAT(error_of_dir(), Contains("no model.safetensors or model.safetensors.index.json"));
}
