// CUDA graphs for the decode step and sampling from device candidates, on stories260K (linked
// into test_gpu_model: skipped, exit 77, without a GPU or the model file):
//   * 32 decode steps with graphs on and off give bit-identical logits, for 1 and for 3
//     sequences, and for candidate rows (top_k on the device inside the graph); the recording
//     was really used (steps captured, graphs updated in place and launched);
//   * a capture that fails (a sync while recording) turns recording off with one warning and
//     leaves the backend working;
//   * generation picking from device candidates chooses the ids that whole rows give.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cli/sampler_picker.h"
#include "io/gguf.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scheduler.h"
#include "model/weights.h"
#include "sampler/sampler.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

const std::vector<int32_t> kGraphPrompt{1, 365, 301, 285, 343, 260, 412};

struct Decoded {
  std::vector<float> logits;  // every whole row of every step
  std::vector<int32_t> ids;   // candidate ids of every step (top_k > 0)
  std::vector<float> values;  // their logits
};

// A prompt per sequence in one chunk, then `steps` decode steps of one token per sequence
// (greedy, from the whole row or from the first candidate).
Decoded decode_steps(cuda::CudaBackend& gpu, const ModelConfig& c, const ModelWeights& w,
                     int n_seqs, int steps, int32_t top_k) {
  ForwardOptions fo;
  fo.kv.block_size = 8;  // the block table grows every 8 steps: kernel arguments change
  fo.kv.n_blocks = 64;
  Forward f(c, w, gpu, fo);
  std::vector<int32_t> seqs;
  std::vector<BatchToken> batch;
  for (int s = 0; s < n_seqs; ++s) {
    seqs.push_back(f.add_sequence(128));
    REQUIRE(f.reserve(seqs.back(), static_cast<int64_t>(kGraphPrompt.size()) + steps) ==
            Reserve::Ok);
    for (size_t i = 0; i < kGraphPrompt.size(); ++i)
      batch.push_back(
          BatchToken{seqs.back(), kGraphPrompt[i], i + 1 == kGraphPrompt.size(), top_k});
  }
  Decoded d;
  for (int t = 0;; ++t) {
    const std::vector<float>& logits = f.decode(batch);
    const DecodedTopK& top = f.decoded_top_k();
    d.logits.insert(d.logits.end(), logits.begin(), logits.end());
    d.ids.insert(d.ids.end(), top.ids.begin(), top.ids.end());
    d.values.insert(d.values.end(), top.values.begin(), top.values.end());
    if (t == steps) break;
    batch.clear();
    for (int s = 0; s < n_seqs; ++s) {
      int32_t id = 0;
      if (top_k > 0) {
        id = top.ids[static_cast<size_t>(s * top.k)];
      } else {
        const float* row = logits.data() + s * c.n_vocab;
        id = static_cast<int32_t>(std::max_element(row, row + c.n_vocab) - row);
      }
      batch.push_back(BatchToken{seqs[static_cast<size_t>(s)], id, true, top_k});
    }
  }
  return d;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("CUDA graphs: 32 decode steps bit-identical with graphs on and off", "[gpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  for (const int n_seqs : {1, 3}) {
    for (const int32_t top_k : {0, 40}) {
      cuda::CudaBackend off(0, true, false), on(0, true, true);
      const Decoded plain = decode_steps(off, c, w, n_seqs, 32, top_k);
      const Decoded graph = decode_steps(on, c, w, n_seqs, 32, top_k);
      CAPTURE(n_seqs, top_k);
      CHECK(same_bits(graph.logits, plain.logits));
      CHECK(graph.ids == plain.ids);
      CHECK(same_bits(graph.values, plain.values));
      CHECK(plain.logits.size() + plain.ids.size() > 0);
      const cuda::CudaBackend::GraphStats st = on.graph_stats();
      CHECK_FALSE(st.failed);
      CHECK(st.captured == 32);  // every decode step, never the prefill chunk
      CHECK(st.launched == 32);
      CHECK(st.instantiated >= 1);
      CHECK(st.updated >= 1);
      CHECK(st.instantiated + st.updated == 32);
      CHECK(off.graph_stats().captured == 0);
    }
  }
}

TEST_CASE("CUDA graphs: a failed capture turns recording off and the backend works", "[gpu]") {
  cuda::CudaBackend gpu(0, true, true);
  const std::vector<float> host{1.0f, 2.0f, 3.0f};
  Buffer a = gpu.alloc(3), b = gpu.alloc(3);
  gpu.upload(a, host.data(), 3);
  gpu.sync();
  REQUIRE(gpu.begin_recording(1));
  gpu.add(b, a, 3);          // recorded, not run
  CHECK_THROWS(gpu.sync());  // a sync cannot be recorded
  gpu.abort_recording("a sync while recording");
  CHECK(gpu.graph_stats().failed);
  CHECK_FALSE(gpu.begin_recording(1));
  gpu.add(b, a, 3);  // plain now
  std::vector<float> out(3);
  gpu.download(b, out.data(), 3);
  CHECK(out == host);  // b was 0 + a once: the recorded add never ran
}

TEST_CASE("generation from device candidates picks the ids of whole rows on the GPU", "[gpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  const auto run = [&](int32_t max_top_k) {
    cuda::CudaBackend gpu(0, true, true);
    ForwardOptions fo;
    fo.kv.n_blocks = 64;
    fo.max_device_top_k = max_top_k;
    Forward fwd(c, w, gpu, fo);
    Scheduler s(fwd, SchedulerOptions{3});
    std::vector<Sampler> samplers;
    samplers.reserve(3);
    std::vector<GenerateResult> out(3);
    for (int i = 0; i < 3; ++i) {
      SamplerParams p;
      p.temperature = i == 0 ? 0.0f : 0.9f;
      p.top_k = 10 + 20 * i;
      p.seed = static_cast<uint64_t>(7 + i);
      samplers.emplace_back(p);
      GenerateOptions g;
      g.n_ctx = 96;
      g.n_predict = 40;
      g.ignore_eos = true;
      cli::use_sampler(g, samplers.back(), static_cast<int32_t>(c.n_vocab),
                       static_cast<int32_t>(c.n_vocab));
      s.submit(kGraphPrompt, g);
    }
    s.run([&out](size_t i, GenerateResult&& r) { out[i] = std::move(r); });
    return out;
  };
  const auto whole = run(0);
  const auto cand = run(kMaxDeviceTopK);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(cand[i].generated_ids == whole[i].generated_ids);
    CHECK(cand[i].last_logits_hash == whole[i].last_logits_hash);
    CHECK(cand[i].generated_ids.size() == 40);
  }
}
