// The generation loop (model/generate.h): stop rules on a scripted fake model, the statistics
// helpers, and the real stories260K model against llama.cpp's greedy ids.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/weights.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

// A fake model over a vocabulary of 8: after being fed token t it predicts (t + 1) % 8, so
// from prompt {.., t} the greedy continuation is t+1, t+2, ... It records every token fed, in
// order, like a cache would.
struct FakeModel final : SequenceModel {
  static constexpr int32_t kVocab = 8;
  std::vector<float> logits;
  std::vector<int32_t> fed;
  int64_t max_batch = 512;
  int32_t n_vocab() const override { return kVocab; }
  int64_t max_batch_tokens() const override { return max_batch; }
  int32_t add_sequence(int64_t) override { return 0; }
  void remove_sequence(int32_t) override {}
  int64_t attach_prefix(int32_t, const std::vector<int32_t>&) override { return 0; }
  Reserve reserve(int32_t, int64_t) override { return Reserve::Ok; }
  const std::vector<float>& decode(const std::vector<BatchToken>& batch) override {
    logits.clear();
    for (const BatchToken& b : batch) {
      fed.push_back(b.token);
      if (!b.logits) continue;
      std::vector<float> row(kVocab, 0.0f);
      row[static_cast<size_t>((b.token + 1) % kVocab)] = 1.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }
};

GenerateOptions opts(int64_t n_ctx, int64_t n_predict, int32_t eos = -1) {
  GenerateOptions o;
  o.n_ctx = n_ctx;
  o.n_predict = n_predict;
  o.eos_id = eos;
  return o;
}

}  // namespace

TEST_CASE("pick_greedy is argmax with the lowest id winning ties", "[cpu]") {
  const float a[] = {0.5f, 2.0f, -1.0f, 2.0f};
  CHECK(pick_greedy(a, 4) == 1);
  const float b[] = {-3.0f};
  CHECK(pick_greedy(b, 1) == 0);
}

TEST_CASE("generate stops at n_predict and feeds every token but the last", "[cpu]") {
  FakeModel m;
  std::vector<int32_t> streamed;
  std::vector<int64_t> prompt_pos;
  GenerateOptions o = opts(100, 4);
  o.on_token = [&](int32_t id) { streamed.push_back(id); };
  o.on_prompt_logits = [&](int64_t pos, const std::vector<float>& l) {
    prompt_pos.push_back(pos);
    CHECK(l.size() == 8);
  };
  const GenerateResult r = generate(m, {1, 2}, o);
  CHECK(r.generated_ids == std::vector<int32_t>{3, 4, 5, 6});
  CHECK(streamed == r.generated_ids);
  CHECK(prompt_pos == std::vector<int64_t>{0, 1});
  CHECK(r.finish == FinishReason::NPredict);
  CHECK(m.fed == std::vector<int32_t>{1, 2, 3, 4, 5});  // 6 is never run
  CHECK(r.n_prompt == 2);
  CHECK(r.decode_ms.size() == 3);
  CHECK(r.last_logits_hash == fnv1a_64(m.logits.data(), m.logits.size()));

  FakeModel z;
  const GenerateResult none = generate(z, {1, 2}, opts(100, 0));
  CHECK(none.generated_ids.empty());
  CHECK(none.finish == FinishReason::NPredict);
  CHECK(none.ttft_ms == 0.0);
}

TEST_CASE("generate stops at EOS without emitting it, unless told to ignore it", "[cpu]") {
  FakeModel m;
  std::vector<int32_t> streamed;
  GenerateOptions o = opts(100, 50, /*eos=*/5);
  o.on_token = [&](int32_t id) { streamed.push_back(id); };
  GenerateResult r = generate(m, {2}, o);
  CHECK(r.generated_ids == std::vector<int32_t>{3, 4});
  CHECK(streamed == r.generated_ids);
  CHECK(r.finish == FinishReason::Eos);

  o.ignore_eos = true;
  o.n_predict = 5;
  FakeModel m2;
  r = generate(m2, {2}, o);
  CHECK(r.generated_ids == std::vector<int32_t>{3, 4, 5, 6, 7});
  CHECK(r.finish == FinishReason::NPredict);
}

TEST_CASE("a stop request ends generation after the token that caused it", "[cpu]") {
  FakeModel m;
  GenerateOptions o = opts(100, 50);
  std::vector<int32_t> streamed;
  o.on_token = [&](int32_t id) { streamed.push_back(id); };
  o.stop_requested = [&] { return !streamed.empty() && streamed.back() == 4; };
  const GenerateResult r = generate(m, {1}, o);
  CHECK(r.generated_ids == std::vector<int32_t>{2, 3, 4});
  CHECK(r.finish == FinishReason::Stop);
  CHECK(std::string(finish_reason_name(r.finish)) == "stop");
  CHECK(m.fed == std::vector<int32_t>{1, 2, 3});  // the stopping token is never run
}

TEST_CASE("generate keeps prompt plus output within n_ctx and finishes with length", "[cpu]") {
  FakeModel m;
  GenerateResult r = generate(m, {0, 1, 2, 3, 4}, opts(8, 100));
  CHECK(r.generated_ids.size() == 3);
  CHECK(r.finish == FinishReason::Length);
  CHECK(m.fed.size() == 7);  // positions 0..6 run; the token at position 7 is picked, not run

  FakeModel unlimited;  // n_predict -1: until the context is full
  r = generate(unlimited, {0}, opts(6, -1));
  CHECK(r.generated_ids.size() == 5);
  CHECK(r.finish == FinishReason::Length);

  FakeModel exact;  // a prompt that fills the context leaves no room
  r = generate(exact, {0, 1, 2}, opts(3, 10));
  CHECK(r.generated_ids.empty());
  CHECK(r.finish == FinishReason::Length);

  FakeModel both;  // n_predict reached exactly as the context fills: n_predict wins
  r = generate(both, {0}, opts(3, 2));
  CHECK(r.finish == FinishReason::NPredict);
}

TEST_CASE("generate refuses an empty or too long prompt and a bad picker", "[cpu]") {
  FakeModel m;
  CHECK_THROWS_AS(generate(m, {}, opts(8, 1)), Error);
  CHECK_THROWS_WITH(generate(m, {0, 1, 2}, opts(2, 1)),
                    Catch::Contains("prompt has 3 tokens but the context holds 2"));
  CHECK(m.fed.empty());
  GenerateOptions o = opts(8, 3);
  o.pick = [](const float*, int32_t n) { return n; };
  CHECK_THROWS_WITH(generate(m, {0}, o), Catch::Contains("outside [0, 8)"));
}

TEST_CASE("a plugged-in picker replaces greedy", "[cpu]") {
  FakeModel m;
  GenerateOptions o = opts(16, 3);
  o.pick = [](const float*, int32_t) { return int32_t{7}; };
  const GenerateResult r = generate(m, {0}, o);
  CHECK(r.generated_ids == std::vector<int32_t>{7, 7, 7});
}

TEST_CASE("percentile and fnv1a", "[cpu]") {
  CHECK(percentile({}, 50) == 0.0);
  CHECK(percentile({3.0}, 95) == 3.0);
  const std::vector<double> v{5, 1, 4, 2, 3, 10, 9, 8, 7, 6};
  CHECK(percentile(v, 50) == 5.0);  // nearest rank: ceil(0.5 * 10) = 5th smallest
  CHECK(percentile(v, 95) == 10.0);
  CHECK(percentile(v, 90) == 9.0);
  CHECK(percentile(v, 0) == 1.0);
  CHECK(percentile(v, 100) == 10.0);

  CHECK(fnv1a_64(nullptr, 0) == 0xcbf29ce484222325ULL);
  const float f[] = {1.0f, -2.5f, 0.0f};  // python: FNV-1a over struct.pack('<3f', ...)
  CHECK(fnv1a_64(f, 3) == 0x00f3a969ef350f78ULL);
}

TEST_CASE("generate on stories260K reproduces llama.cpp's 48 greedy ids", "[cpu][golden]") {
  const GgufFile f = GgufFile::open(llmctl::test::require_test_file("models/stories260K.gguf"));
  const auto golden = nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::require_test_file("golden/stories260K-greedy.jsonl")));
  const auto prompt = golden["prompt_ids"].get<std::vector<int32_t>>();
  const auto expected = golden["generated_ids"].get<std::vector<int32_t>>();
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend backend;
  ForwardOptions fo;
  fo.kv.n_blocks = 8;  // 128 positions
  Forward fwd(c, w, backend, fo);
  const GenerateResult r = generate(fwd, prompt, opts(128, static_cast<int64_t>(expected.size())));
  CHECK(r.generated_ids == expected);
  CHECK(r.finish == FinishReason::NPredict);
  CHECK(r.decode_ms.size() == expected.size() - 1);
  CHECK(fwd.cache().n_free_blocks() == 8);  // the finished sequence gave its blocks back
}

TEST_CASE("loop_detected ends with finish reason loop: on_pick_logits sees picks", "[cpu]") {
  FakeModel m;
  GenerateOptions o = opts(64, 20);
  std::vector<int32_t> seen;  // argmax of the logits handed to on_pick_logits
  o.on_pick_logits = [&seen](const float* logits, int32_t n_vocab) {
    seen.push_back(pick_greedy(logits, n_vocab));
  };
  int64_t asked = 0;
  o.loop_detected = [&asked] { return ++asked == 4; };  // "detected" after the 4th token
  const GenerateResult r = generate(m, {2}, o);
  CHECK(r.finish == FinishReason::Loop);
  CHECK(std::string(finish_reason_name(r.finish)) == "loop");
  CHECK(r.generated_ids == std::vector<int32_t>{3, 4, 5, 6});
  CHECK(seen == r.generated_ids);
  // The 4th token ends the sequence there: it is never fed back.
  CHECK(m.fed == std::vector<int32_t>{2, 3, 4, 5});
}
