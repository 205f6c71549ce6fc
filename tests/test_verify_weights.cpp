// --verify's NaN/Inf scan (model/verify_weights.h) on tensors built here: where a fault is
// reported (tensor, row, column, block, field) for every float and block type, and, for the
// block types the engine decodes, that "verify finds a fault" agrees with "the reference
// dequantizer (quant/dequant.h) produces a non-finite value" for a NaN written at every byte
// offset of a block. That second check is what justifies scanning scales instead of values.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "model/model_loader.h"
#include "model/verify_weights.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

constexpr int64_t kRowLen = 512;  // two K-quant super-blocks, sixteen 32-blocks
constexpr int64_t kRows = 6;

std::vector<float> random_values(uint32_t seed, int64_t n) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// A [kRows, kRowLen] tensor of `type` from random values, owning its bytes.
struct Owned {
  WeightTensorRef ref;
  std::vector<uint8_t> bytes;
  void rebind() {
    ref.data = bytes.data();
    ref.n_bytes = bytes.size();
  }
};

Owned make_tensor(const std::string& name, GgmlType type, uint32_t seed = 1) {
  Owned t;
  t.ref.name = name;
  t.ref.type = type;
  t.ref.shape = {kRowLen, kRows};
  const std::vector<float> v = random_values(seed, kRowLen * kRows);
  if (type == GgmlType::F64) {
    t.bytes.resize(v.size() * 8);
    for (size_t i = 0; i < v.size(); ++i) {
      const double x = v[i];
      std::memcpy(t.bytes.data() + 8 * i, &x, 8);
    }
  } else {
    t.bytes.resize(quantized_size(type, kRowLen * kRows));
    quantize_row(type, v.data(), t.bytes.data(), kRowLen * kRows);
  }
  t.rebind();
  return t;
}

// Writes a non-finite value of the tensor's float type at element e.
void poison_element(Owned& t, int64_t e, float bad) {
  const size_t i = static_cast<size_t>(e);
  switch (t.ref.type) {
    case GgmlType::F32:
      std::memcpy(t.bytes.data() + 4 * i, &bad, 4);
      break;
    case GgmlType::F16: {
      const uint16_t h = f32_to_fp16(bad);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
      break;
    }
    case GgmlType::BF16: {
      const uint16_t h = f32_to_bf16(bad);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
      break;
    }
    default: {
      const double d = bad;
      std::memcpy(t.bytes.data() + 8 * i, &d, 8);
    }
  }
}

VerifyResult verify_one(const Owned& t) { return verify_tensors({t.ref}); }

}  // namespace

TEST_CASE("verify: clean tensors of every checked type pass, counts add up", "[cpu]") {
  std::vector<Owned> ts;
  for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::F64,
                              GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                              GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    ts.push_back(make_tensor(std::string("t_") + ggml_type_name(type), type));
  std::vector<WeightTensorRef> refs;
  uint64_t bytes = 0;
  for (const auto& t : ts) {
    refs.push_back(t.ref);
    bytes += t.bytes.size();
  }
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  const VerifyResult r =
      verify_tensors(refs, [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); });
  CHECK_FALSE(r.fault.has_value());
  CHECK(r.n_tensors == ts.size());
  CHECK(r.n_bytes == bytes);
  CHECK(r.unchecked.empty());
  // 4 float types x n values; scales: Q8_0, Q4_0, Q5_0 one per 32; Q4_1, Q5_1 two per 32;
  // Q4_K, Q5_K two per 256; Q6_K one per 256.
  const uint64_t n = kRowLen * kRows;
  CHECK(r.n_values == 4 * n + 3 * (n / 32) + 2 * 2 * (n / 32) + 2 * 2 * (n / 256) + n / 256);
  REQUIRE(!calls.empty());
  CHECK(calls.back() == std::make_pair(bytes, bytes));
}

TEST_CASE("verify: a NaN or Inf value is reported at its row and column", "[cpu]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::F64}) {
    for (const float bad : {nan, inf, -inf}) {
      Owned t = make_tensor("blk.1.attn_q.weight", type);
      const int64_t row = 4, col = 317;
      poison_element(t, row * kRowLen + col, bad);
      poison_element(t, 5 * kRowLen + 2, nan);  // a later one is not the first
      const VerifyResult r = verify_one(t);
      INFO(ggml_type_name(type) << " " << bad);
      REQUIRE(r.fault.has_value());
      CHECK(r.fault->tensor == "blk.1.attn_q.weight");
      CHECK(r.fault->row == row);
      CHECK(r.fault->column == col);
      CHECK(r.fault->block == -1);
      CHECK(r.fault->field == "value");
      const std::string kind = std::isnan(bad) ? "NaN" : (bad > 0 ? "+Inf" : "-Inf");
      CHECK(r.fault->describe() == std::string("tensor 'blk.1.attn_q.weight' (") +
                                       ggml_type_name(type) +
                                       " [512, 6]): row 4, column 317: value is " + kind);
    }
  }
  // The largest finite values are not faults.
  Owned t = make_tensor("t", GgmlType::F16);
  poison_element(t, 7, 65504.0f);
  poison_element(t, 8, -65504.0f);
  CHECK_FALSE(verify_one(t).fault.has_value());
}

TEST_CASE("verify: a NaN scale is a fault exactly when the dequantized block is not finite",
          "[cpu]") {
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                              GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const GgmlTypeTraits tr = ggml_traits(type);
    const Owned clean = make_tensor("w", type, 3);
    const int64_t block = 9;  // in row 9 * bs / kRowLen
    int faults = 0;
    for (uint32_t k = 0; k + 1 < tr.type_size; ++k) {
      Owned t = clean;
      t.rebind();
      uint8_t* b = t.bytes.data() + static_cast<size_t>(block) * tr.type_size;
      b[k] = 0x00;
      b[k + 1] = 0x7e;  // fp16 NaN, little-endian, if bytes k, k + 1 are a scale
      std::vector<float> out(tr.block_size);
      dequantize_block(type, b, out.data());
      bool nonfinite = false;
      for (const float x : out) nonfinite = nonfinite || !std::isfinite(x);
      const VerifyResult r = verify_one(t);
      INFO(ggml_type_name(type) << " NaN at byte " << k);
      CHECK(r.fault.has_value() == nonfinite);
      if (!r.fault) continue;
      ++faults;
      const int64_t first = block * tr.block_size;
      CHECK(r.fault->row == first / kRowLen);
      CHECK(r.fault->column == first % kRowLen);
      CHECK(r.fault->block == (first % kRowLen) / tr.block_size);
      CHECK(std::isnan(r.fault->value));
    }
    // Every format has at least its d; the ones with a min or dmin have two.
    INFO(ggml_type_name(type));
    const bool two = type == GgmlType::Q4_1 || type == GgmlType::Q5_1 || type == GgmlType::Q4_K ||
                     type == GgmlType::Q5_K;
    CHECK(faults == (two ? 2 : 1));
  }
}

TEST_CASE("verify: block scales of formats the engine does not decode, and unchecked types",
          "[cpu]") {
  // Q2_K {scales[16], qs[64], d, dmin}, Q3_K {hmask[32], qs[64], scales[12], d}: ggml-common.h.
  struct Case {
    GgmlType type;
    uint32_t offset;
    const char* field;
  };
  for (const Case& c : {Case{GgmlType::Q2_K, 80, "d"}, Case{GgmlType::Q2_K, 82, "dmin"},
                        Case{GgmlType::Q3_K, 108, "d"}, Case{GgmlType::IQ4_NL, 0, "d"},
                        Case{GgmlType::IQ4_XS, 0, "d"}}) {
    const GgmlTypeTraits tr = ggml_traits(c.type);
    Owned t;
    t.ref = {"x", c.type, {kRowLen, kRows}, nullptr, 0};
    t.bytes.assign(static_cast<size_t>(kRowLen * kRows / tr.block_size) * tr.type_size, 0);
    t.rebind();
    CHECK_FALSE(verify_one(t).fault.has_value());
    t.bytes[tr.type_size * 3 + c.offset + 1] = 0x7c;  // +Inf in block 3
    const VerifyResult r = verify_one(t);
    INFO(ggml_type_name(c.type) << " " << c.field);
    REQUIRE(r.fault.has_value());
    CHECK(r.fault->field == c.field);
    CHECK(r.fault->block == 3 % (kRowLen / tr.block_size));
    CHECK(r.fault->describe().find("scale " + std::string(c.field) + " is +Inf") !=
          std::string::npos);
  }
  std::vector<uint8_t> bytes(66 * 2, 0xff);  // IQ2_XXS: 66 bytes per 256; I32: 33 values
  const VerifyResult r = verify_tensors({{"iq", GgmlType::IQ2_XXS, {512}, bytes.data(), 132},
                                         {"ids", GgmlType::I32, {33}, bytes.data(), 132}});
  CHECK_FALSE(r.fault.has_value());
  CHECK(r.unchecked == std::vector<std::string>{"iq (IQ2_XXS)"});
}

TEST_CASE("verify: MXFP4's E8M0 scale 0xFF is a NaN fault, 0xFE is not (as ggml)", "[cpu]") {
  const GgmlTypeTraits tr = ggml_traits(GgmlType::MXFP4);  // {u8 e; u8 qs[16]}
  Owned t;
  t.ref = {"x", GgmlType::MXFP4, {kRowLen, kRows}, nullptr, 0};
  t.bytes.assign(static_cast<size_t>(kRowLen * kRows / tr.block_size) * tr.type_size, 0xfe);
  t.rebind();
  CHECK_FALSE(verify_one(t).fault.has_value());  // 0xFE everywhere: e 254, valid in ggml
  const size_t block = static_cast<size_t>(kRowLen) / tr.block_size + 5;  // row 1, block 5
  t.bytes[tr.type_size * block] = 0xff;
  const VerifyResult r = verify_one(t);
  REQUIRE(r.fault.has_value());
  CHECK(r.fault->field == "e");
  CHECK(r.fault->row == 1);
  CHECK(r.fault->block == 5);
  CHECK(r.fault->describe() ==
        "tensor 'x' (MXFP4 [512, 6]): row 1, block 5 (elements 160..191): scale e is NaN");
  t.bytes[tr.type_size * block + 1] = 0xff;  // a quant byte 0xFF is no fault
  t.bytes[tr.type_size * block] = 0x7f;
  CHECK_FALSE(verify_one(t).fault.has_value());
}

TEST_CASE("verify: the first faulty tensor stops the scan", "[cpu]") {
  Owned a = make_tensor("a", GgmlType::F32), b = make_tensor("b", GgmlType::Q8_0),
        c = make_tensor("c", GgmlType::F32);
  b.bytes[1] = 0x7c;  // block 0's d = +Inf (0x7c00 little-endian)
  b.bytes[0] = 0x00;
  poison_element(c, 0, std::nanf(""));
  const VerifyResult r = verify_tensors({a.ref, b.ref, c.ref});
  REQUIRE(r.fault.has_value());
  CHECK(r.fault->tensor == "b");
  CHECK(r.n_tensors == 2);
  CHECK(r.fault->describe() ==
        "tensor 'b' (Q8_0 [512, 6]): row 0, block 0 (elements 0..31): "
        "scale d is +Inf");
}

TEST_CASE("verify: a Hugging Face checkpoint, clean and with a NaN weight", "[cpu]") {
  namespace fs = std::filesystem;
  const std::string src = test::fixture_path("hf_tiny_qwen2");
  const LoadedModel clean = load_model(src);
  CHECK_NOTHROW(verify_model_weights(clean));
  const VerifyResult all = verify_tensors(model_tensor_refs(clean));
  CHECK(all.n_tensors == clean.safetensors->files()[0].tensors().size());

  // A copy whose 'model.norm.weight' (F32 [64]) holds a NaN at element 10.
  const std::string dir = test::temp_dir() + "/hf_nan";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src))
    fs::copy_file(e.path(), dir / e.path().filename());
  const SafetensorsTensor* norm = clean.safetensors->find("model.norm.weight");
  REQUIRE(norm != nullptr);
  REQUIRE(norm->type == GgmlType::F32);
  std::string bytes = test::read_file(dir + "/model.safetensors");
  const size_t at =
      static_cast<size_t>(8 + clean.safetensors->files()[0].header_size() + norm->begin + 4 * 10);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + at, &nan, 4);
  test::write_file(dir + "/model.safetensors", bytes);
  const LoadedModel bad = load_model(dir);
  try {
    verify_model_weights(bad);
    FAIL("no fault found");
  } catch (const FileError& e) {
    CHECK(std::string(e.what()) ==
          dir + ": tensor 'model.norm.weight' (F32 [64]): row 0, column 10: value is NaN");
  }
}
