#pragma once
// Generation: prefill a prompt, then pick and feed tokens one at a time until EOS,
// n_predict, a stop request or a full context. It knows ids and logits only (no tokenizer,
// no printing): the caller streams text from on_token and renders the result.
//
// The model is a SequenceModel (a Forward in the CLI, a scripted fake in tests); the token
// choice a TokenPicker, so the sampler (src/sampler/) plugs in without changing the loop.
// generate() runs one sequence through the Scheduler (scheduler.h), which runs many.
//
// Sequence rule: the whole sequence (prompt + generated tokens) fits in n_ctx positions.
// A token is only generated if its own position exists, so a 5-token prompt with n_ctx 8
// generates at most 3 tokens and finishes with "length".

#include <cstdint>
#include <functional>
#include <vector>

#include "model/config.h"
#include "model/sequence_model.h"

namespace llmctl {

// Chooses the next token from one row of logits.
using TokenPicker = std::function<int32_t(const float* logits, int32_t n_vocab)>;

// Chooses the next token from the row's top candidates: row `row` of `top` (sequence_model.h
// DecodedTopK), a row of n_vocab logits.
using TopKPicker = std::function<int32_t(const DecodedTopK& top, size_t row, int32_t n_vocab)>;

// argmax; the lowest id wins a tie (as llama.cpp's greedy sampler and numpy's argmax).
int32_t pick_greedy(const float* logits, int32_t n_vocab);

enum class FinishReason { Eos, Length, NPredict, Stop, Interrupted, Loop };
// "eos", "length", "n_predict", "stop", "interrupted", "loop": the names in --json and the
// summary line.
const char* finish_reason_name(FinishReason r);

struct GenerateOptions {
  int64_t n_ctx = 0;        // positions the sequence may hold: prompt + generated (>= 1)
  int64_t n_predict = 128;  // tokens to generate at most; < 0: until EOS or a full context
  int32_t eos_id = -1;      // -1: the vocabulary has none
  bool ignore_eos = false;  // keep going past EOS (the EOS id is then generated like any other)
  // More ids that end generation like EOS (a chat template's end of turn, e.g. <|eot_id|>);
  // they are not emitted. --ignore-eos does not apply to them.
  std::vector<int32_t> end_ids;
  TokenPicker pick;  // empty: pick_greedy
  // Picking from candidates computed on the device (SequenceModel::max_device_top_k()), so a
  // pick downloads top_k_candidates (id, logit) pairs instead of n_vocab logits. Both set
  // (top_k_candidates > 0): pick_top_k must choose exactly what `pick` would from the whole row
  // (sampler.h sample_top_k). The rule, per request: candidates whenever the model computes
  // that many on the device, except where something reads the whole row: on_pick_logits
  // (e.g. --acf's top-1 probability) and on_prompt_logits (e.g. --logits-out) keep the full
  // download; so does a sampler that needs the whole row (penalties, no top-k: the caller
  // leaves these unset). The summary's last_logits_hash still covers the whole last row
  // (downloaded once, when the request finishes).
  int32_t top_k_candidates = 0;
  TopKPicker pick_top_k;
  // Called with the logits of every prompt position, in order (BOS included); may be empty.
  std::function<void(int64_t pos, const std::vector<float>& logits)> on_prompt_logits;
  // Called with the logits (n_vocab floats) of every pick, right after it (also when the pick
  // is a stopping EOS), for diagnostics such as the top-1 probability series (diag/acf.h);
  // may be empty. Not called when n_predict or n_ctx ends the sequence before a pick.
  std::function<void(const float* logits, int32_t n_vocab)> on_pick_logits;
  // Called with each generated token as soon as it is picked (not for a stopping EOS).
  std::function<void(int32_t id)> on_token;
  // Asked after on_token; true ends generation with FinishReason::Stop (a stop string was
  // printed up to its start). May be empty.
  std::function<bool()> stop_requested;
  // Asked after stop_requested; true ends generation with FinishReason::Loop (the tokens so
  // far repeat, see diag/acf.h). May be empty.
  std::function<bool()> loop_detected;
  // Asked before every step; true ends the sequence with FinishReason::Interrupted (Ctrl-C),
  // and the scheduler admits no further request whose callback says so. May be empty.
  std::function<bool()> interrupted;
  // Reuse cached KV blocks of an identical prompt prefix (off when on_prompt_logits is set:
  // reused positions produce no logits).
  bool reuse_prefix = true;
};

struct GenerateResult {
  std::vector<int32_t> generated_ids;  // without the EOS that stopped generation
  FinishReason finish = FinishReason::NPredict;
  int64_t n_prompt = 0;
  int64_t n_reused = 0;   // prompt positions taken from the prefix cache, not computed
  double prefill_ms = 0;  // admission to the prompt's last logits
  double ttft_ms = 0;     // start of prefill to the first generated token picked (0 if none)
  // Per generated token after the first: its forward step plus the pick (callbacks excluded).
  std::vector<double> decode_ms;
  uint64_t last_logits_hash = 0;  // fnv1a_64 of the last logits the model returned
};

// One sequence. Throws Error for an empty prompt (no position to predict from) or one longer
// than n_ctx; errors from the model pass through.
GenerateResult generate(SequenceModel& model, const std::vector<int32_t>& prompt,
                        const GenerateOptions& opt);

// ---------------------------------------------------------------------------
// Statistics and accounting for the summary line
// ---------------------------------------------------------------------------

// FNV-1a 64-bit over the bytes of the floats (their in-memory, i.e. little-endian on every
// supported host, representation): equal logits give equal hashes across runs and builds.
uint64_t fnv1a_64(const float* data, size_t n);

// Nearest-rank percentile (p in [0, 100]) of `values`; 0 for an empty vector.
double percentile(std::vector<double> values, double p);

}  // namespace llmctl
