// Generation that picks from the top candidates computed by the backend (Forward with
// max_device_top_k, GenerateOptions::pick_top_k through cli::use_sampler) against picking from
// whole logits rows, on stories260K with the CPU reference backend standing in for a device
// (its top_k and find_nan_inf are the ops a GPU runs): identical ids, finish reasons and
// logits hashes for one sequence and for batches (3 sequences, and 40: more rows than one
// output pass holds), with the rule that keeps whole rows where they are needed.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/sampler_picker.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/scheduler.h"
#include "model/weights.h"
#include "sampler/sampler.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

struct Model {
  GgufFile f;
  ModelConfig c;
  ModelWeights w;
  Model()
      : f(GgufFile::open(test::require_test_file("models/stories260K.gguf"))),
        c(config_from_gguf(f)),
        w(bind_weights(f, c)) {}
};

SamplerParams params(float temp, int32_t top_k, float top_p, float min_p, uint64_t seed) {
  SamplerParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

struct Request {
  std::vector<int32_t> prompt;
  SamplerParams sampling;
  bool read_pick_logits = false;  // sets on_pick_logits (needs whole rows)
};

struct Outcome {
  GenerateResult r;
  int64_t candidate_picks = 0;       // picks made from candidates
  std::vector<int32_t> pick_argmax;  // what on_pick_logits saw
};

// Runs `requests` together (up to max_sequences at once) on a Forward whose device top-k limit
// is `max_top_k` (0: whole rows only).
std::vector<Outcome> generate_all(const Model& m, const std::vector<Request>& requests,
                                  int32_t max_top_k, int64_t max_sequences,
                                  const std::function<void(GenerateOptions&)>& tweak = nullptr) {
  cpu::CpuBackend backend;
  ForwardOptions fo;
  fo.kv.n_blocks = 128;
  fo.max_device_top_k = max_top_k;
  Forward fwd(m.c, m.w, backend, fo);
  Scheduler s(fwd, SchedulerOptions{max_sequences});
  std::vector<Outcome> out(requests.size());
  std::vector<Sampler> samplers;
  samplers.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    samplers.emplace_back(requests[i].sampling);
    GenerateOptions g;
    g.n_ctx = 64;
    g.n_predict = 24;
    g.ignore_eos = true;
    cli::use_sampler(g, samplers.back(), static_cast<int32_t>(m.c.n_vocab),
                     static_cast<int32_t>(m.c.n_vocab));
    const TopKPicker inner = g.pick_top_k;
    int64_t* count = &out[i].candidate_picks;
    if (inner)
      g.pick_top_k = [inner, count](const DecodedTopK& top, size_t row, int32_t n_vocab) {
        ++*count;
        return inner(top, row, n_vocab);
      };
    if (requests[i].read_pick_logits) {
      std::vector<int32_t>* seen = &out[i].pick_argmax;
      g.on_pick_logits = [seen](const float* logits, int32_t n_vocab) {
        seen->push_back(pick_greedy(logits, n_vocab));
      };
    }
    if (tweak) tweak(g);
    s.submit(requests[i].prompt, g);
  }
  s.run([&out](size_t i, GenerateResult&& r) { out[i].r = std::move(r); });
  return out;
}

void check_same(const std::vector<Outcome>& whole, const std::vector<Outcome>& cand) {
  REQUIRE(whole.size() == cand.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    CAPTURE(i);
    CHECK(whole[i].r.generated_ids == cand[i].r.generated_ids);
    CHECK(whole[i].r.finish == cand[i].r.finish);
    CHECK(whole[i].r.last_logits_hash == cand[i].r.last_logits_hash);
    CHECK(whole[i].candidate_picks == 0);
  }
}

const std::vector<int32_t> kPrompt{1, 365, 301, 285, 343, 260, 412};

}  // namespace

TEST_CASE("candidates from the backend pick the same tokens as whole rows, one sequence", "[cpu]") {
  const Model m;
  int64_t combos = 0;
  for (const float temp : {0.0f, 0.6f, 1.0f, 1.5f}) {
    for (const int32_t k : {1, 5, 40, 256}) {
      for (const float top_p : {1.0f, 0.9f}) {
        for (uint64_t seed = 1; seed <= 3; ++seed) {
          const std::vector<Request> req{{kPrompt, params(temp, k, top_p, 0.05f, seed * 31)}};
          const auto whole = generate_all(m, req, 0, 1);
          const auto cand = generate_all(m, req, kMaxDeviceTopK, 1);
          CAPTURE(temp, k, top_p, seed);
          check_same(whole, cand);
          // Every pick (24 tokens, the first from the prompt's last row) used candidates.
          CHECK(cand[0].candidate_picks == 24);
          ++combos;
        }
      }
    }
  }
  CHECK(combos == 96);
}

TEST_CASE("candidates in batches of 3 and 40 sequences (several output passes)", "[cpu]") {
  const Model m;
  for (const size_t n : {size_t{3}, size_t{40}}) {
    std::vector<Request> req;
    for (size_t i = 0; i < n; ++i) {
      std::vector<int32_t> prompt = kPrompt;
      prompt.resize(3 + i % 5);  // different lengths: prefill rows and decode rows mix
      Request r{prompt, params(i % 4 == 0 ? 0.0f : 0.9f, static_cast<int32_t>(2 + i % 50), 0.95f,
                               0.0f, 100 + i)};
      if (i % 7 == 3) r.sampling.repeat_penalty = 1.3f;  // needs whole rows
      if (i % 11 == 5) r.read_pick_logits = true;        // needs whole rows
      req.push_back(r);
    }
    const auto whole = generate_all(m, req, 0, static_cast<int64_t>(n));
    const auto cand = generate_all(m, req, kMaxDeviceTopK, static_cast<int64_t>(n));
    CAPTURE(n);
    check_same(whole, cand);
    int64_t with_candidates = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool whole_rows = req[i].sampling.repeat_penalty != 1.0f || req[i].read_pick_logits;
      CAPTURE(i);
      CHECK(cand[i].candidate_picks == (whole_rows ? 0 : 24));
      with_candidates += cand[i].candidate_picks > 0 ? 1 : 0;
      CHECK(cand[i].pick_argmax == whole[i].pick_argmax);
      if (req[i].read_pick_logits) CHECK(cand[i].pick_argmax.size() == 24);
    }
    CHECK(with_candidates >= static_cast<int64_t>(n / 2));
  }
}

TEST_CASE("Forward: candidate rows and whole rows in one decode, and whole logits", "[cpu]") {
  const Model m;
  const auto n_vocab = static_cast<size_t>(m.c.n_vocab);
  cpu::CpuBackend backend;
  ForwardOptions fo;
  fo.kv.n_blocks = 16;
  ForwardOptions fo_top = fo;
  fo_top.max_device_top_k = 64;
  Forward whole(m.c, m.w, backend, fo), top(m.c, m.w, backend, fo_top);
  CHECK(whole.max_device_top_k() == 0);  // the CPU default: whole rows
  CHECK(top.max_device_top_k() == 64);
  std::vector<BatchToken> batch;
  for (Forward* f : {&whole, &top}) {
    const int32_t seq = f->add_sequence(32);
    REQUIRE(f->reserve(seq, 7) == Reserve::Ok);
  }
  // Rows 1, 3 and 6 want logits: candidates (k 10 and 64) for 1 and 6, the whole row for 3.
  for (size_t i = 0; i < kPrompt.size(); ++i) {
    const bool want = i == 1 || i == 3 || i == 6;
    const int32_t k = i == 1 ? 10 : i == 6 ? 64 : 0;
    batch.push_back(BatchToken{0, kPrompt[i], want, k});
  }
  const std::vector<float> all = whole.decode(batch);  // every wanted row whole
  REQUIRE(all.size() == 3 * n_vocab);
  const std::vector<float> rest = top.decode(batch);
  REQUIRE(rest.size() == n_vocab);
  CHECK(std::equal(rest.begin(), rest.end(), all.begin() + static_cast<std::ptrdiff_t>(n_vocab)));
  const DecodedTopK& d = top.decoded_top_k();
  REQUIRE(d.k == 64);
  REQUIRE(d.n_rows() == 2);
  for (size_t r = 0; r < 2; ++r) {
    const size_t whole_row = r == 0 ? 0 : 2;
    const float* expect = all.data() + whole_row * n_vocab;
    const std::vector<float>& got = top.top_k_row_logits(r);
    CHECK(std::equal(got.begin(), got.end(), expect));
    // The candidates are the 64 largest, descending, ties to the lower id.
    for (size_t j = 0; j < 64; ++j) {
      const int32_t id = d.ids[r * 64 + j];
      CHECK(d.values[r * 64 + j] == expect[id]);
      if (j > 0) {
        const int32_t prev = d.ids[r * 64 + j - 1];
        CHECK((expect[prev] > expect[id] || (expect[prev] == expect[id] && prev < id)));
      }
    }
    const float kth = d.values[r * 64 + 63];
    int64_t above = 0;
    for (size_t i = 0; i < n_vocab; ++i) above += expect[i] > kth ? 1 : 0;
    CHECK(above <= 63);
    CHECK(d.nan_inf[2 * r] == -1);
    CHECK(d.nan_inf[2 * r + 1] == -1);
  }
  CHECK_THROWS_WITH(top.top_k_row_logits(2), Catch::Contains("which had 2"));
  batch.assign(1, BatchToken{0, 5, true, 65});
  CHECK_THROWS_WITH(top.decode(batch), Catch::Contains("at most 64"));
}

TEST_CASE("candidates: the same finish and logits hash at EOS and at an interrupt", "[cpu]") {
  const Model m;
  const std::vector<Request> req{{kPrompt, params(1.0f, 40, 1.0f, 0.0f, 5)},
                                 {kPrompt, params(0.0f, 0, 1.0f, 0.0f, 6)}};
  // EOS: the 6th token the first request generates without one ends it there.
  const int32_t eos = generate_all(m, req, 0, 2)[0].r.generated_ids.at(5);
  const auto with_eos = [eos](GenerateOptions& g) {
    g.eos_id = eos;
    g.ignore_eos = false;
  };
  const auto whole_eos = generate_all(m, req, 0, 2, with_eos);
  const auto cand_eos = generate_all(m, req, kMaxDeviceTopK, 2, with_eos);
  check_same(whole_eos, cand_eos);
  CHECK(cand_eos[0].r.finish == FinishReason::Eos);
  CHECK(cand_eos[0].r.generated_ids.size() <= 5);
  CHECK(cand_eos[0].candidate_picks > 0);
  // Interrupt: the second request stops at its 10th check while the first goes on (so the
  // next step replaces the logits its hash must come from).
  int tweaked = 0, checks = 0;
  const auto interrupt = [&tweaked, &checks](GenerateOptions& g) {
    if (tweaked++ % 2 == 1) g.interrupted = [&checks] { return ++checks >= 10; };
  };
  const auto whole_int = generate_all(m, req, 0, 2, interrupt);
  checks = 0;
  const auto cand_int = generate_all(m, req, kMaxDeviceTopK, 2, interrupt);
  check_same(whole_int, cand_int);
  CHECK(cand_int[0].r.finish == FinishReason::NPredict);
  CHECK(cand_int[1].r.finish == FinishReason::Interrupted);
  CHECK(cand_int[1].r.generated_ids.size() < 24);
  CHECK(cand_int[1].candidate_picks > 0);
  CHECK(cand_int[1].r.last_logits_hash != 0);
}
