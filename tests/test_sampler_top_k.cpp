// Sampling from a device's candidates (Sampler::sample_top_k, sampler.h "Sampling from
// candidates") against sampling from the whole row (Sampler::sample): the same ids, draw after
// draw, and the same errors. The candidates come from the CPU reference backend's top_k and the
// backend's find_nan_inf, the ops a device backend answers on the device (backend.h), so the
// test also pins the contract the two sides share (order, ties, NaN last).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/sampler_picker.h"
#include "core/error.h"
#include "sampler/sampler.h"

using llmctl::Buffer;
using llmctl::BufferType;
using llmctl::DecodedTopK;
using llmctl::Sampler;
using llmctl::SamplerParams;
using llmctl::TopLogits;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A row on a coarse grid (many exact ties, both zeros), some -inf (masked tokens).
std::vector<float> tied_row(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> level(-40, 12), what(0, 99);
  std::vector<float> v(n);
  for (float& x : v) {
    const int w = what(rng);
    if (w < 4)
      x = -kInf;
    else if (w < 8)
      x = w % 2 == 0 ? 0.0f : -0.0f;
    else
      x = static_cast<float>(level(rng)) * 0.125f;
  }
  return v;
}

// What a device hands the sampler for `row`: k candidates from the CPU backend's top_k and the
// row's first NaN / +inf from its find_nan_inf.
struct Candidates {
  DecodedTopK top;
  TopLogits row(int32_t n_vocab) const { return llmctl::cli::top_logits_row(top, 0, n_vocab); }
};

Candidates candidates_of(const std::vector<float>& row, int32_t k) {
  llmctl::cpu::CpuBackend b;
  const auto n = static_cast<int64_t>(row.size());
  Buffer logits = b.alloc(n);
  b.upload(logits, row.data(), n);
  Buffer ids = b.alloc(k, BufferType::I32), values = b.alloc(k),
         found = b.alloc(2, BufferType::I32);
  b.top_k(logits, 1, n, k, ids, values);
  b.find_nan_inf(logits, 1, n, found);
  Candidates c;
  c.top.k = k;
  c.top.ids.resize(static_cast<size_t>(k));
  c.top.values.resize(static_cast<size_t>(k));
  c.top.nan_inf.resize(2);
  b.download(ids, c.top.ids.data(), k);
  b.download(values, c.top.values.data(), k);
  b.download(found, c.top.nan_inf.data(), 2);
  return c;
}

SamplerParams params(float temperature, int32_t top_k, float top_p, float min_p, uint64_t seed) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = 1.0f;
  p.seed = seed;
  return p;
}

// The message of the Error `f` throws, or "" when it returns.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const llmctl::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sample_top_k draws what sample draws: seeds, temperatures, k, top-p, min-p", "[cpu]") {
  const int32_t n_vocab = 1000;
  int64_t compared = 0, differing_rows = 0;
  for (const float temp : {0.0f, 0.25f, 0.8f, 1.0f, 1.7f, 4.0f}) {
    for (const int32_t k : {1, 2, 7, 40, 256, 999}) {
      for (const float top_p : {1.0f, 0.9f, 0.3f}) {
        for (const float min_p : {0.0f, 0.05f}) {
          for (uint64_t seed = 1; seed <= 6; ++seed) {
            const SamplerParams p = params(temp, k, top_p, min_p, seed * 7919 + 13);
            Sampler whole(p), cand(p);
            REQUIRE(whole.candidates_needed(n_vocab) == (temp == 0.0f ? 1 : k));
            std::vector<int32_t> a, b;
            // 12 rows, one draw each: the RNG streams must stay in step too.
            for (uint64_t r = 0; r < 12; ++r) {
              const std::vector<float> row = tied_row(n_vocab, seed * 1000 + r);
              const Candidates c = candidates_of(row, cand.candidates_needed(n_vocab));
              a.push_back(whole.sample(row.data(), n_vocab));
              b.push_back(cand.sample_top_k(c.row(n_vocab)));
            }
            CAPTURE(temp, k, top_p, min_p, seed);
            REQUIRE(a == b);
            ++compared;
            // The draws are not all the argmax (else the test could not tell the paths apart).
            for (size_t i = 1; i < a.size(); ++i) differing_rows += a[i] != a[0] ? 1 : 0;
          }
        }
      }
    }
  }
  CHECK(compared == 6 * 6 * 3 * 2 * 6);
  CHECK(differing_rows > 1000);
}

TEST_CASE("sample_top_k with more candidates than needed uses the first ones", "[cpu]") {
  const int32_t n_vocab = 300;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const SamplerParams p = params(1.0f, 20, 0.95f, 0.0f, seed);
    Sampler whole(p), cand(p);
    const std::vector<float> row = tied_row(n_vocab, seed);
    const Candidates c = candidates_of(row, 64);  // another request in the batch asked for 64
    CHECK(whole.sample(row.data(), n_vocab) == cand.sample_top_k(c.row(n_vocab)));
  }
}

TEST_CASE("sample_top_k: ties at the k-th place keep the lower ids, as sample does", "[cpu]") {
  // 10 equal maxima and k = 4: both paths keep ids 3, 5, 8, 9 (the four lowest of them).
  std::vector<float> row(64, -1.0f);
  for (const int id : {3, 5, 8, 9, 12, 20, 33, 40, 41, 63}) row[static_cast<size_t>(id)] = 2.0f;
  row[7] = -0.0f;
  const auto n = static_cast<int32_t>(row.size());
  const Candidates c = candidates_of(row, 4);
  CHECK(c.top.ids == std::vector<int32_t>{3, 5, 8, 9});
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const SamplerParams p = params(2.0f, 4, 1.0f, 0.0f, seed);
    Sampler whole(p), cand(p);
    const int32_t id = whole.sample(row.data(), n);
    CHECK(id == cand.sample_top_k(c.row(n)));
    CHECK((id == 3 || id == 5 || id == 8 || id == 9));
  }
}

TEST_CASE("sample_top_k refuses NaN and +inf exactly where sample does", "[cpu]") {
  const int32_t n_vocab = 200;
  struct Case {
    const char* what;
    std::vector<std::pair<int, float>> set;
  };
  const std::vector<Case> cases{
      {"NaN outside the top-k", {{150, kNaN}}},
      {"NaN at id 0", {{0, kNaN}}},
      {"+inf (ranks first)", {{77, kInf}}},
      {"+inf before a NaN", {{10, kInf}, {11, kNaN}}},
      {"NaN before a +inf", {{10, kNaN}, {11, kInf}}},
      {"every logit NaN", {}},
  };
  for (const Case& cs : cases) {
    std::vector<float> row = tied_row(n_vocab, 5);
    if (cs.set.empty()) row.assign(row.size(), kNaN);
    for (const auto& [id, v] : cs.set) row[static_cast<size_t>(id)] = v;
    for (const float temp : {0.0f, 1.0f}) {
      const SamplerParams p = params(temp, 8, 1.0f, 0.0f, 3);
      Sampler whole(p), cand(p);
      const Candidates c = candidates_of(row, cand.candidates_needed(n_vocab));
      const std::string e_whole = error_of([&] { whole.sample(row.data(), n_vocab); });
      const std::string e_cand = error_of([&] { cand.sample_top_k(c.row(n_vocab)); });
      CAPTURE(cs.what, temp);
      CHECK_FALSE(e_whole.empty());
      CHECK(e_cand == e_whole);
    }
  }
}

TEST_CASE("sample_top_k: all -inf is the same error, partly -inf rows draw the same", "[cpu]") {
  const int32_t n_vocab = 50;
  std::vector<float> all(static_cast<size_t>(n_vocab), -kInf);
  for (const float temp : {0.0f, 0.7f}) {
    const SamplerParams p = params(temp, 5, 1.0f, 0.0f, 9);
    Sampler whole(p), cand(p);
    const Candidates c = candidates_of(all, cand.candidates_needed(n_vocab));
    const std::string e = error_of([&] { whole.sample(all.data(), n_vocab); });
    CHECK_FALSE(e.empty());
    CHECK(error_of([&] { cand.sample_top_k(c.row(n_vocab)); }) == e);
  }
  // Two finite logits and k = 5: three -inf candidates get p = 0 and are never drawn.
  std::vector<float> two = all;
  two[17] = 1.0f;
  two[42] = 0.5f;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const SamplerParams p = params(1.0f, 5, 1.0f, 0.0f, seed);
    Sampler whole(p), cand(p);
    const Candidates c = candidates_of(two, 5);
    const int32_t id = whole.sample(two.data(), n_vocab);
    CHECK(id == cand.sample_top_k(c.row(n_vocab)));
    CHECK((id == 17 || id == 42));
  }
}

TEST_CASE("candidates_needed: whole rows for penalties and without top-k", "[cpu]") {
  const int32_t n_vocab = 100;
  SamplerParams p = params(0.8f, 40, 0.95f, 0.05f, 1);
  CHECK(Sampler(p).candidates_needed(n_vocab) == 40);
  CHECK(Sampler(p).candidates_needed(40) == 0);  // top_k >= n_vocab: no cut, id-order draw
  p.top_k = 0;
  CHECK(Sampler(p).candidates_needed(n_vocab) == 0);
  p.temperature = 0.0f;
  CHECK(Sampler(p).candidates_needed(n_vocab) == 1);  // greedy ignores top-k
  p.repeat_penalty = 1.1f;
  CHECK(Sampler(p).candidates_needed(n_vocab) == 0);
  p.repeat_last_n = 0;  // penalties off after all
  CHECK(Sampler(p).candidates_needed(n_vocab) == 1);
  p.repeat_last_n = 64;
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  CHECK(Sampler(p).candidates_needed(n_vocab) == 0);
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.5f;
  CHECK(Sampler(p).candidates_needed(n_vocab) == 0);
}

TEST_CASE("sample_top_k refuses too few candidates and parameters needing whole rows", "[cpu]") {
  const int32_t n_vocab = 100;
  const std::vector<float> row = tied_row(n_vocab, 1);
  Sampler s(params(1.0f, 10, 1.0f, 0.0f, 1));
  const Candidates few = candidates_of(row, 9);
  CHECK_THROWS_WITH(s.sample_top_k(few.row(n_vocab)), Catch::Contains("need 10"));
  Sampler no_top_k(params(1.0f, 0, 0.9f, 0.0f, 1));
  const Candidates c = candidates_of(row, 10);
  CHECK_THROWS_WITH(no_top_k.sample_top_k(c.row(n_vocab)), Catch::Contains("the whole row"));
}

TEST_CASE("find_nan_inf (the host default) finds the lowest NaN and +inf per row", "[cpu]") {
  llmctl::cpu::CpuBackend b;
  const std::vector<float> rows{1.0f, kNaN, kInf, kNaN,  -kInf, 0.0f, -0.0f, 3.0f,
                                kInf, 2.0f, kInf, -kInf, 5.0f,  6.0f, 7.0f,  8.0f};
  Buffer logits = b.alloc(16), out = b.alloc(8, BufferType::I32);
  b.upload(logits, rows.data(), 16);
  b.find_nan_inf(logits, 4, 4, out);
  std::vector<int32_t> got(8);
  b.download(out, got.data(), 8);
  CHECK(got == std::vector<int32_t>{1, 2, -1, -1, -1, 0, -1, -1});
  CHECK_THROWS_WITH(b.find_nan_inf(logits, 5, 4, out), Catch::Contains("expected at least"));
}

// A model whose embedding is padded past its vocabulary: the padding ids never come out, even
// when their logits are the largest; the device candidates (which may hold padding) are off.
TEST_CASE("use_sampler never picks the padding ids of a padded embedding", "[cpu]") {
  const int32_t n_vocab = 10, n_valid = 6;
  std::vector<float> logits = {0.1f, 0.5f, 0.3f, 2.0f, -1.0f, 1.5f, 0.0f, 0.2f, 9.0f, 8.0f};
  for (float temperature : {0.0f, 0.8f}) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      Sampler s(params(temperature, 40, 1.0f, 0.0f, seed));
      llmctl::GenerateOptions g;
      llmctl::cli::use_sampler(g, s, n_vocab, n_valid);
      CHECK(g.top_k_candidates == 0);
      CHECK(g.pick_top_k == nullptr);
      const int32_t id = g.pick(logits.data(), n_vocab);
      CHECK(id >= 0);
      CHECK(id < n_valid);
      if (temperature == 0.0f) CHECK(id == 3);  // the argmax of the first n_valid
    }
  }
  Sampler greedy(params(0.0f, 40, 1.0f, 0.0f, 1));
  llmctl::GenerateOptions g;
  llmctl::cli::use_sampler(g, greedy, n_vocab, n_vocab);  // no padding: the whole row
  CHECK(g.top_k_candidates == 1);
  CHECK(g.pick(logits.data(), n_vocab) == 8);
  CHECK_THROWS_WITH(llmctl::cli::use_sampler(g, greedy, n_vocab, n_vocab + 1),
                    Catch::Contains("expected 1 to n_vocab = 10"));
}
