// io/gguf_stream_writer.h: the same bytes as GgufBuilder for the same content, atomic output.
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/error.h"
#include "io/gguf_stream_writer.h"
#include "io/gguf_writer.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

GgufBuilder sample(uint32_t alignment) {
  GgufBuilder b;
  b.set("general.architecture", gguf_value::string("llama"));
  if (alignment != 32) b.set("general.alignment", gguf_value::u32(alignment));
  b.set("x.list", gguf_value::f32_array({1.5f, -2.0f}));
  b.add_tensor("a", GgmlType::F32, {3, 2}, pattern(24, 1));
  b.add_tensor("b", GgmlType::Q8_0, {64}, pattern(68, 2));
  b.add_tensor("c", GgmlType::F16, {5}, pattern(10, 3));
  return b;
}

std::vector<uint8_t> stream(const GgufBuilder& b, const std::string& path, size_t piece) {
  std::vector<GgufTensorDecl> decls;
  for (const auto& t : b.tensors()) decls.push_back({t.name, t.type, t.shape});
  GgufStreamWriter w(path, b, decls);
  for (const auto& t : b.tensors()) {
    for (size_t at = 0; at < t.bytes.size(); at += piece)
      w.write(t.bytes.data() + at, std::min(piece, t.bytes.size() - at));
    w.end_tensor();
  }
  w.commit();
  const std::string s = test::read_file(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

TEST_CASE("stream writer: byte-identical to GgufBuilder, any piece size and alignment", "[cpu]") {
  const std::string dir = test::temp_dir();
  for (const uint32_t align : {32u, 64u, 1024u}) {
    const GgufBuilder b = sample(align);
    for (const size_t piece : {size_t{1}, size_t{5}, size_t{1000}}) {
      INFO("alignment " << align << ", piece " << piece);
      CHECK(stream(b, dir + "/s.gguf", piece) == b.build());
      CHECK_FALSE(test::temp_file_beside(dir + "/s.gguf"));
    }
  }
  // No tensors: metadata only, as GgufBuilder writes it.
  GgufBuilder empty;
  empty.set("k", gguf_value::u8(1));
  CHECK(stream(empty, dir + "/e.gguf", 1) == empty.build());
}

TEST_CASE("stream writer: wrong byte counts throw, without commit nothing is left", "[cpu]") {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/w.gguf";
  const GgufBuilder b = sample(32);
  std::vector<GgufTensorDecl> decls;
  for (const auto& t : b.tensors()) decls.push_back({t.name, t.type, t.shape});
  {
    GgufStreamWriter w(path, b, decls);
    CHECK(test::temp_file_beside(path));
    const std::vector<uint8_t> big(100);
    CHECK_THROWS_WITH(w.write(big.data(), 25), Catch::Contains("'a': 25 bytes written"));
    w.write(big.data(), 20);
    CHECK_THROWS_WITH(w.end_tensor(), Catch::Contains("expected 24"));
    CHECK_THROWS_WITH(w.commit(), Catch::Contains("0 of 3 tensors"));
  }
  CHECK_FALSE(test::temp_file_beside(path));
  CHECK_FALSE(std::filesystem::exists(path));

  decls.push_back({"a", GgmlType::F32, {1}});
  CHECK_THROWS_WITH(GgufStreamWriter(path, b, decls), Catch::Contains("duplicate tensor name"));
  decls.back() = {"d", GgmlType::Q4_0, {33}};
  CHECK_THROWS_WITH(GgufStreamWriter(path, b, decls), Catch::Contains("not a multiple"));
  CHECK_THROWS_AS(GgufStreamWriter(dir + "/no/such/dir/x.gguf", b, {}), FileError);
}
