#pragma once
// Scheduler: continuous batching of many generation requests over one SequenceModel.
//
// Every step builds one batch: first the pending token of each decoding sequence (one each),
// then prompt chunks of sequences still prefilling, up to max_batch_tokens in all. Waiting
// requests are admitted whenever fewer than max_sequences run and the KV pool can hold them;
// a finished sequence leaves at once and frees its blocks for the next. Because every op is
// batch invariant (backend.h), each request's tokens are bit-identical to running it alone.
//
// Admission reserves a request's whole budget up front: prompt + n_predict positions (or its
// full n_ctx when n_predict < 0), less what the prefix cache supplies. A running sequence can
// then never run out of blocks mid-generation, so nothing is preempted or recomputed.
//
// Per request, in order: prompt positions' logits (when on_prompt_logits is set), then each
// generated token (on_token), then on_done with the result. Timings are per request:
// prefill_ms from admission to the prompt's last logits, ttft_ms to the first pick, and one
// decode_ms entry per later token (the step that computed it, shared with the batch, plus the
// pick).
//
// Candidates (GenerateOptions::pick_top_k): a request whose picks need only the top candidates
// of their row gets those, computed by the model (on the device), instead of the whole row;
// top_k_for() holds the rule.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "model/generate.h"
#include "model/sequence_model.h"

namespace llmctl {

struct SchedulerOptions {
  int64_t max_sequences = 1;  // sequences decoded together at most
  // Called when a request is admitted, with the sequence id its tokens carry in every batch
  // from then on (BatchToken::seq, and ObservedBatch::seq for a ForwardObserver) until its
  // on_done; ids are reused after that. Lets diagnostics attribute tokens to requests. May be
  // empty.
  std::function<void(size_t request, int32_t seq)> on_admit = nullptr;
};

class Scheduler {
 public:
  using DoneFn = std::function<void(size_t request, GenerateResult&& result)>;

  Scheduler(SequenceModel& model, const SchedulerOptions& opt);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request and returns its index (0, 1, ... in submission order). Throws Error
  // for an empty prompt, a prompt longer than n_ctx or n_ctx < 1 (nothing is queued).
  size_t submit(const std::vector<int32_t>& prompt, const GenerateOptions& opt);

  // Runs until every queued request has finished, calling on_done as each one does.
  // Throws Error when one request alone does not fit the KV pool.
  void run(const DoneFn& on_done);

 private:
  struct Active;
  bool admit_one();
  void step();
  // Before each pick: whether n_predict or n_ctx ends the sequence here (then finished).
  bool must_stop(Active& a);
  // The candidates a logits row of `a` asks for (BatchToken::top_k); 0: the whole row.
  int32_t top_k_for(const Active& a, bool prompt_row) const;
  // From the whole row (`logits`), or from row `top_row` of the model's decoded_top_k().
  void pick(Active& a, const float* logits, int64_t top_row);
  // The hash of a's last logits when only its candidates came back (before the next decode).
  void settle_hash(Active& a);

  SequenceModel& model_;
  SchedulerOptions opt_;
  struct Waiting {
    size_t index;
    std::vector<int32_t> prompt;
    GenerateOptions opt;
  };
  std::deque<Waiting> waiting_;
  std::vector<std::unique_ptr<Active>> active_;
  size_t n_submitted_ = 0;
};

}  // namespace llmctl
