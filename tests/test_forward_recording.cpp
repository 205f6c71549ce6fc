// Forward and Backend recording (backend.h begin_recording / end_recording / abort_recording,
// the seam CUDA graphs use), on a CPU backend that pretends to record: which steps are offered
// (decode steps: one token per sequence, no observer; never a prefill chunk), that nothing
// uploads or downloads while recording, and the fallbacks: when end_recording() fails or an op
// throws while recording, Forward issues the step again, plainly, with bit-identical logits.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/weights.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

class FakeRecorder final : public cpu::CpuBackend {
 public:
  enum class Mode { Succeed, FailAtEnd, ThrowInside };
  explicit FakeRecorder(Mode m) : mode_(m) {}
  bool begin_recording(int64_t n_tokens) override {
    offered.push_back(n_tokens);
    recording_ = true;
    return true;
  }
  bool end_recording() override {
    recording_ = false;
    ++ended;
    return mode_ != Mode::FailAtEnd;
  }
  void abort_recording(const char* why) override {
    recording_ = false;
    ++aborted;
    abort_why = why;
  }
  std::vector<int64_t> offered;  // n_tokens of each begin_recording()
  int ended = 0, aborted = 0, copies_while_recording = 0;
  int64_t get_rows_calls = 0;
  std::string abort_why;

 protected:
  void get_rows_impl(const WeightView& table, const Buffer& ids, int64_t n_tokens,
                     Buffer& out) override {
    ++get_rows_calls;
    if (recording_ && mode_ == Mode::ThrowInside) throw Error("this op cannot be recorded");
    CpuBackend::get_rows_impl(table, ids, n_tokens, out);
  }
  void upload_impl(Buffer& dst, const void* src, int64_t n, int64_t offset) override {
    copies_while_recording += recording_ ? 1 : 0;
    CpuBackend::upload_impl(dst, src, n, offset);
  }
  void download_impl(const Buffer& src, void* dst, int64_t n, int64_t offset) override {
    copies_while_recording += recording_ ? 1 : 0;
    CpuBackend::download_impl(src, dst, n, offset);
  }

 private:
  Mode mode_;
  bool recording_ = false;
};

const std::vector<int32_t> kPrompt{1, 365, 301, 285, 343, 260, 412};

// A 7-token prompt for each of n_seqs sequences in one chunk, then `steps` decode steps of one
// token per sequence; every logits row in order.
std::vector<float> run(Backend& b, const ModelConfig& c, const ModelWeights& w, int n_seqs,
                       int steps, ForwardObserver* observer = nullptr) {
  ForwardOptions fo;
  fo.kv.n_blocks = 32;
  fo.kv.block_size = 4;  // the block table grows during the steps
  Forward f(c, w, b, fo);
  f.set_observer(observer);
  std::vector<float> all;
  std::vector<BatchToken> batch;
  std::vector<int32_t> seqs;
  for (int s = 0; s < n_seqs; ++s) {
    const int32_t seq = f.add_sequence(64);
    seqs.push_back(seq);
    REQUIRE(f.reserve(seq, 7 + steps) == Reserve::Ok);
    for (size_t i = 0; i < kPrompt.size(); ++i)
      batch.push_back(BatchToken{seq, kPrompt[i], i + 1 == kPrompt.size()});
  }
  std::vector<float> logits = f.decode(batch);
  for (int t = 0; t < steps; ++t) {
    all.insert(all.end(), logits.begin(), logits.end());
    batch.clear();
    for (int s = 0; s < n_seqs; ++s) {
      const auto row = logits.begin() + static_cast<std::ptrdiff_t>(s * c.n_vocab);
      const auto id = static_cast<int32_t>(
          std::max_element(row, row + static_cast<std::ptrdiff_t>(c.n_vocab)) - row);
      batch.push_back(BatchToken{seqs[static_cast<size_t>(s)], id, true});
    }
    logits = f.decode(batch);
  }
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

struct NoOpObserver final : ForwardObserver {
  bool wants_residual() const override { return true; }
};

}  // namespace

TEST_CASE("Forward offers decode steps for recording and falls back to plain steps", "[cpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  for (const int n_seqs : {1, 3}) {
    cpu::CpuBackend plain;
    const std::vector<float> expect = run(plain, c, w, n_seqs, 6);
    const std::vector<int64_t> offered(6, n_seqs);  // not the prefill chunk

    FakeRecorder ok(FakeRecorder::Mode::Succeed);
    CHECK(run(ok, c, w, n_seqs, 6) == expect);
    CHECK(ok.offered == offered);
    CHECK(ok.ended == 6);
    CHECK(ok.aborted == 0);
    CHECK(ok.get_rows_calls == 7);  // one per forward call
    CHECK(ok.copies_while_recording == 0);

    FakeRecorder fail_end(FakeRecorder::Mode::FailAtEnd);
    CHECK(run(fail_end, c, w, n_seqs, 6) == expect);
    CHECK(fail_end.ended == 6);
    CHECK(fail_end.get_rows_calls == 1 + 2 * 6);  // each decode step issued again
    CHECK(fail_end.copies_while_recording == 0);

    FakeRecorder throws(FakeRecorder::Mode::ThrowInside);
    CHECK(run(throws, c, w, n_seqs, 6) == expect);
    CHECK(throws.aborted == 6);
    CHECK(throws.ended == 0);
    CHECK(throws.abort_why == "this op cannot be recorded");
    CHECK(throws.get_rows_calls == 1 + 2 * 6);
  }
}

TEST_CASE("Forward does not offer a step with an observer for recording", "[cpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  NoOpObserver obs;
  FakeRecorder rec(FakeRecorder::Mode::Succeed);
  cpu::CpuBackend plain;
  CHECK(run(rec, c, w, 2, 3, &obs) == run(plain, c, w, 2, 3));
  CHECK(rec.offered.empty());
}
