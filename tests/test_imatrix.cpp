// The importance matrix (quant/imatrix.h): accumulation against a direct sum, the GGUF file
// round trip, the llama.cpp layout (keys, tensor names and shapes), and every malformed file
// the loader must refuse with a FileError that names the entry.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/imatrix.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A well-formed llama.cpp-style imatrix with one entry "w" of 3 columns and 2 rows.
GgufBuilder valid_builder() {
  GgufBuilder b;
  b.set("general.type", gguf_value::string("imatrix"));
  b.set("imatrix.datasets", gguf_value::string_array({"calib.txt"}));
  b.set("imatrix.chunk_count", gguf_value::u32(1));
  b.set("imatrix.chunk_size", gguf_value::u32(2));
  b.add_tensor("w.in_sum2", GgmlType::F32, {3, 1}, f32_bytes({1.0f, 4.0f, 9.0f}));
  b.add_tensor("w.counts", GgmlType::F32, {1, 1}, f32_bytes({2.0f}));
  return b;
}

std::string write_temp(const GgufBuilder& b, const std::string& name) {
  const std::string path = test::temp_dir() + "/" + name;
  b.write(path);
  return path;
}

// Loads `b` and expects a FileError whose message contains every string in `needles`.
void expect_load_error(const GgufBuilder& b, const std::vector<std::string>& needles) {
  const std::string path = write_temp(b, "bad.imatrix.gguf");
  try {
    (void)load_imatrix(path);
    FAIL("load_imatrix accepted a malformed file");
  } catch (const FileError& e) {
    const std::string msg = e.what();
    INFO(msg);
    for (const auto& n : needles) CHECK(msg.find(n) != std::string::npos);
  }
}

// A builder like valid_builder() with the "w" tensors replaced.
GgufBuilder with_entry(const std::vector<float>& sums, std::vector<int64_t> sum_shape,
                       const std::vector<float>& counts, bool with_counts = true) {
  GgufBuilder b;
  b.set("general.type", gguf_value::string("imatrix"));
  b.add_tensor("w.in_sum2", GgmlType::F32, std::move(sum_shape), f32_bytes(sums));
  if (with_counts)
    b.add_tensor("w.counts", GgmlType::F32, {static_cast<int64_t>(counts.size())},
                 f32_bytes(counts));
  return b;
}

}  // namespace

TEST_CASE("imatrix add sums squares per column and counts rows", "[cpu]") {
  ImportanceMatrix m;
  const std::vector<float> x1 = {1, -2, 3, 0.5f, 0, -1};  // 2 rows x 3 columns
  const std::vector<float> x2 = {2, 2, 2};                // 1 row
  m.add("blk.0.attn_q.weight", x1.data(), 2, 3);
  m.add("blk.0.attn_q.weight", x2.data(), 1, 3);
  const auto& e = m.entries.at("blk.0.attn_q.weight");
  CHECK(e.n_rows == 3);
  CHECK(e.sum_sq == std::vector<double>{1 + 0.25 + 4, 4 + 0 + 4, 9 + 1 + 4});
  const auto w = m.column_weights("blk.0.attn_q.weight", 3);
  REQUIRE(w.size() == 3);
  CHECK(w[0] == Approx(5.25 / 3));
  CHECK(w[1] == Approx(8.0 / 3));
  CHECK(w[2] == Approx(14.0 / 3));
  CHECK(m.column_weights("never.seen", 3).empty());
  CHECK_THROWS_AS(m.column_weights("blk.0.attn_q.weight", 4), Error);
  CHECK_THROWS_AS(m.add("blk.0.attn_q.weight", x1.data(), 1, 2), Error);
  const std::vector<float> bad = {std::numeric_limits<float>::infinity()};
  CHECK_THROWS_AS(m.add("other", bad.data(), 1, 1), Error);
}

TEST_CASE("imatrix file round trip keeps entries, counts and metadata", "[cpu]") {
  ImportanceMatrix m;
  std::vector<float> x(5 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * double(i)));
  m.add("blk.0.ffn_down.weight", x.data(), 5, 64);
  m.add("output.weight", x.data(), 10, 32);
  m.datasets = {"calibration.txt"};
  m.chunk_count = 3;
  m.chunk_size = 128;
  const std::string path = test::temp_dir() + "/rt.imatrix.gguf";
  save_imatrix(path, m);

  // The layout llama.cpp reads: keys, tensor names, F32, [n, 1] and [1, 1].
  const GgufFile f = GgufFile::open(path);
  CHECK(f.get_string("general.type") == "imatrix");
  CHECK(f.get_string_array("imatrix.datasets") == std::vector<std::string>{"calibration.txt"});
  CHECK(f.get_int_or("imatrix.chunk_count", -1) == 3);
  CHECK(f.get_int_or("imatrix.chunk_size", -1) == 128);
  const GgufTensorInfo* s = f.find_tensor("blk.0.ffn_down.weight.in_sum2");
  const GgufTensorInfo* c = f.find_tensor("blk.0.ffn_down.weight.counts");
  REQUIRE(s != nullptr);
  REQUIRE(c != nullptr);
  CHECK(s->type == GgmlType::F32);
  CHECK(s->shape == std::vector<int64_t>{64, 1});
  CHECK(c->shape == std::vector<int64_t>{1, 1});

  const ImportanceMatrix r = load_imatrix(path);
  CHECK(r.datasets == m.datasets);
  CHECK(r.chunk_count == 3);
  CHECK(r.chunk_size == 128);
  REQUIRE(r.entries.size() == 2);
  for (const auto& [name, e] : m.entries) {
    const auto& got = r.entries.at(name);
    CHECK(got.n_rows == e.n_rows);
    REQUIRE(got.sum_sq.size() == e.sum_sq.size());
    // Stored as F32: equal to the double sums rounded to float.
    for (size_t j = 0; j < e.sum_sq.size(); ++j)
      CHECK(got.sum_sq[j] == static_cast<double>(static_cast<float>(e.sum_sq[j])));
  }
}

TEST_CASE("imatrix loader reads 1-D tensors and a file without optional keys", "[cpu]") {
  GgufBuilder b;
  b.add_tensor("w.in_sum2", GgmlType::F32, {2}, f32_bytes({3.0f, 6.0f}));
  b.add_tensor("w.counts", GgmlType::F32, {1}, f32_bytes({3.0f}));
  const ImportanceMatrix m = load_imatrix(write_temp(b, "plain.imatrix.gguf"));
  CHECK(m.datasets.empty());
  CHECK(m.chunk_count == 0);
  CHECK(m.column_weights("w", 2) == std::vector<float>{1.0f, 2.0f});
  CHECK(load_imatrix(write_temp(valid_builder(), "valid.imatrix.gguf")).entries.size() == 1);
}

TEST_CASE("imatrix loader refuses malformed files naming the entry", "[cpu]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  SECTION("sums without counts") {
    expect_load_error(with_entry({1, 2}, {2}, {}, false), {"'w'", "w.counts"});
  }
  SECTION("counts without sums") {
    GgufBuilder b = valid_builder();
    b.add_tensor("v.counts", GgmlType::F32, {1}, f32_bytes({1.0f}));
    expect_load_error(b, {"'v'", "v.in_sum2"});
  }
  SECTION("negative sum") { expect_load_error(with_entry({1, -2}, {2}, {1}), {"'w'", "column 1"}); }
  SECTION("NaN sum") { expect_load_error(with_entry({nan, 2}, {2}, {1}), {"'w'", "column 0"}); }
  SECTION("infinite sum") { expect_load_error(with_entry({1, inf}, {2}, {1}), {"'w'"}); }
  SECTION("negative count") { expect_load_error(with_entry({1, 2}, {2}, {-1}), {"w.counts"}); }
  SECTION("fractional count") { expect_load_error(with_entry({1, 2}, {2}, {1.5f}), {"w.counts"}); }
  SECTION("NaN count") { expect_load_error(with_entry({1, 2}, {2}, {nan}), {"w.counts"}); }
  SECTION("two counts") { expect_load_error(with_entry({1, 2}, {2}, {1, 1}), {"w.counts"}); }
  SECTION("zero rows with non-zero sums") {
    expect_load_error(with_entry({1, 2}, {2}, {0}), {"'w'", "0 rows"});
  }
  SECTION("expert slices") {
    expect_load_error(with_entry({1, 2, 3, 4}, {2, 2}, {1}), {"w.in_sum2", "expert"});
  }
  SECTION("sums stored as F16") {
    GgufBuilder b;
    b.add_tensor("w.in_sum2", GgmlType::F16, {2}, {0, 0x3c, 0, 0x3c});
    b.add_tensor("w.counts", GgmlType::F32, {1}, f32_bytes({1.0f}));
    expect_load_error(b, {"w.in_sum2", "F32"});
  }
  SECTION("a model tensor") {
    GgufBuilder b = valid_builder();
    b.add_tensor("token_embd.weight", GgmlType::F32, {2}, f32_bytes({1, 1}));
    expect_load_error(b, {"token_embd.weight"});
  }
  SECTION("general.type of a model") {
    GgufBuilder b = valid_builder();
    b.set("general.type", gguf_value::string("model"));
    expect_load_error(b, {"general.type", "model"});
  }
  SECTION("datasets not strings") {
    GgufBuilder b = valid_builder();
    b.set("imatrix.datasets", gguf_value::u32(3));
    expect_load_error(b, {"imatrix.datasets"});
  }
  SECTION("negative chunk count") {
    GgufBuilder b = valid_builder();
    b.set("imatrix.chunk_count", gguf_value::i32(-4));
    expect_load_error(b, {"imatrix.chunk_count"});
  }
  SECTION("no entries") {
    GgufBuilder b;
    b.set("general.type", gguf_value::string("imatrix"));
    expect_load_error(b, {"no imatrix entries"});
  }
  SECTION("not a GGUF file") {
    const std::string path = test::temp_dir() + "/text.imatrix";
    test::write_file(path, "hello, this is not gguf\n");
    CHECK_THROWS_AS(load_imatrix(path), FileError);
  }
}

TEST_CASE("imatrix save refuses sums that do not fit F32", "[cpu]") {
  ImportanceMatrix m;
  m.entries["w"].sum_sq = {1e300};
  m.entries["w"].n_rows = 1;
  CHECK_THROWS_AS(save_imatrix(test::temp_dir() + "/big.imatrix.gguf", m), FileError);
}

TEST_CASE("imatrix loader reads a file laid out as llama-imatrix writes it (gguf-py fixture)",
          "[cpu][golden]") {
  // tools/gen_imatrix_fixture.py: written by gguf-py, values also in the JSON beside it.
  const ImportanceMatrix m = load_imatrix(test::fixture_path("llamacpp_imatrix.gguf"));
  const auto want =
      nlohmann::json::parse(test::read_file(test::fixture_path("llamacpp_imatrix.json")));
  CHECK(m.datasets == std::vector<std::string>{"wiki.train.raw"});
  CHECK(m.chunk_count == 7);
  CHECK(m.chunk_size == 512);
  REQUIRE(m.entries.size() == want.size());
  for (const auto& [name, w] : want.items()) {
    INFO(name);
    REQUIRE(m.entries.count(name) == 1);
    const auto& e = m.entries.at(name);
    CHECK(e.n_rows == w["count"].get<int64_t>());
    const auto sums = w["sums"].get<std::vector<double>>();
    REQUIRE(e.sum_sq.size() == sums.size());
    for (size_t j = 0; j < sums.size(); ++j) CHECK(e.sum_sq[j] == sums[j]);
    const auto cw = m.column_weights(name, static_cast<int64_t>(sums.size()));
    CHECK(cw[0] == Approx(sums[0] / static_cast<double>(e.n_rows)));
  }
}
