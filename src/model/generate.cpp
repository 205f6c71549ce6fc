// The generation loop and its statistics (generate.h).
#include "model/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace llmctl {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int32_t pick_greedy(const float* logits, int32_t n_vocab) {
  LLMCTL_ASSERT(n_vocab > 0);
  // Strict > keeps the lowest id on ties. NaN never compares greater, so a NaN row gives 0
  // rather than a random id; diagnosing NaN logits is the caller's job (logits hash, diag/).
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Eos:
      return "eos";
    case FinishReason::Length:
      return "length";
    case FinishReason::NPredict:
      return "n_predict";
    case FinishReason::Stop:
      return "stop";
  }
  return "unknown";
}

GenerateResult generate(const StepFn& step, const std::vector<int32_t>& prompt,
                        const GenerateOptions& opt) {
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt == 0)
    throw Error("generate: the prompt has no tokens, so there is no position to predict from",
                "give a non-empty prompt, or keep BOS (drop --no-bos)");
  if (opt.n_ctx < 1) throw Error(fmt::format("generate: context size {} must be >= 1", opt.n_ctx));
  if (n_prompt > opt.n_ctx)
    throw Error(
        fmt::format("the prompt has {} tokens but the context holds {}", n_prompt, opt.n_ctx),
        "raise -c/--ctx-size or shorten the prompt");
  const TokenPicker pick = opt.pick ? opt.pick : TokenPicker(pick_greedy);

  GenerateResult r;
  r.n_prompt = n_prompt;
  const Clock::time_point t0 = Clock::now();
  const std::vector<float>* logits = &step(prompt[0]);
  for (int64_t i = 0;; ++i) {
    if (opt.on_prompt_logits) opt.on_prompt_logits(i, *logits);
    if (i + 1 == n_prompt) break;
    logits = &step(prompt[static_cast<size_t>(i + 1)]);
  }
  r.prefill_ms = ms_since(t0);
  if (logits->empty() || logits->size() > static_cast<size_t>(INT32_MAX))
    throw Error(fmt::format("generate: the model returned {} logits", logits->size()));
  const auto n_vocab = static_cast<int32_t>(logits->size());

  // n_seq: tokens in the sequence; the next generated token would sit at position n_seq.
  int64_t n_seq = n_prompt;
  for (bool first = true;; first = false) {
    if (opt.n_predict >= 0 && static_cast<int64_t>(r.generated_ids.size()) >= opt.n_predict) {
      r.finish = FinishReason::NPredict;
      break;
    }
    if (n_seq >= opt.n_ctx) {
      r.finish = FinishReason::Length;
      break;
    }
    const Clock::time_point t_step = Clock::now();
    // The last generated token has not been through the model yet; the prompt's last has.
    if (!first) logits = &step(r.generated_ids.back());
    const int32_t id = pick(logits->data(), n_vocab);
    if (first)
      r.ttft_ms = ms_since(t0);
    else
      r.decode_ms.push_back(ms_since(t_step));
    if (id < 0 || id >= n_vocab)
      throw Error(fmt::format("generate: the picker chose id {} outside [0, {})", id, n_vocab));
    if (!opt.ignore_eos && id == opt.eos_id) {
      r.finish = FinishReason::Eos;
      break;
    }
    r.generated_ids.push_back(id);
    ++n_seq;
    if (opt.on_token) opt.on_token(id);
    if (opt.stop_requested && opt.stop_requested()) {
      r.finish = FinishReason::Stop;
      break;
    }
  }
  r.last_logits_hash = fnv1a_64(logits->data(), logits->size());
  return r;
}

uint64_t fnv1a_64(const float* data, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ULL;
  }
  return h;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least p% of the values at or below it.
  const double rank =
      std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size()));
  const size_t idx = rank < 1.0 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(idx, values.size() - 1)];
}

uint64_t kv_cache_bytes(const ModelConfig& c, int64_t n_ctx) {
  return 2ULL * static_cast<uint64_t>(c.n_layers) * static_cast<uint64_t>(n_ctx) *
         static_cast<uint64_t>(c.kv_dim()) * sizeof(float);
}

uint64_t forward_scratch_bytes(const ModelConfig& c) {
  // x, h, proj, ffn (n_embd); q, att (q_dim); k, v (kv_dim); gate, up (n_ff); logits on the
  // backend and on the host (n_vocab).
  const int64_t floats = 4 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.n_ff + 2 * c.n_vocab;
  return static_cast<uint64_t>(floats) * sizeof(float);
}

}  // namespace llmctl
