// Continuous batching over a SequenceModel (scheduler.h).
#include "model/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace llmctl {

namespace {
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

struct Scheduler::Active {
  size_t index = 0;
  std::vector<int32_t> prompt;
  GenerateOptions opt;
  int32_t seq = -1;
  int64_t fed = 0;        // prompt tokens in the cache (reused or computed)
  bool decoding = false;  // the prompt is done; `pending` waits to be fed
  int32_t pending = 0;
  bool finished = false;
  GenerateResult r;
  Clock::time_point t0;      // admission
  Clock::time_point t_step;  // start of the step that computed the current logits
  int64_t top_row = -1;      // >= 0: the last logits came as candidates, row of decoded_top_k()
};

Scheduler::Scheduler(SequenceModel& model, const SchedulerOptions& opt) : model_(model), opt_(opt) {
  if (opt_.max_sequences < 1)
    throw Error(
        fmt::format("scheduler: {} parallel sequences, expected at least 1", opt_.max_sequences));
  // Every decoding sequence needs one slot of each batch.
  opt_.max_sequences = std::min(opt_.max_sequences, model.max_batch_tokens());
}

Scheduler::~Scheduler() = default;

size_t Scheduler::submit(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt == 0)
    throw Error("generate: the prompt has no tokens, so there is no position to predict from",
                "give a non-empty prompt, or keep BOS (drop --no-bos)");
  if (opt.n_ctx < 1) throw Error(fmt::format("generate: context size {} must be >= 1", opt.n_ctx));
  if (n_prompt > opt.n_ctx)
    throw Error(
        fmt::format("the prompt has {} tokens but the context holds {}", n_prompt, opt.n_ctx),
        "raise -c/--ctx-size or shorten the prompt");
  waiting_.push_back(Waiting{n_submitted_, prompt, opt});
  return n_submitted_++;
}

bool Scheduler::admit_one() {
  Waiting& w = waiting_.front();
  const auto n_prompt = static_cast<int64_t>(w.prompt.size());
  const int64_t total =
      w.opt.n_predict >= 0 ? std::min(n_prompt + w.opt.n_predict, w.opt.n_ctx) : w.opt.n_ctx;
  const int32_t seq = model_.add_sequence(w.opt.n_ctx);
  const bool reuse = w.opt.reuse_prefix && !w.opt.on_prompt_logits;
  const int64_t reused = reuse ? model_.attach_prefix(seq, w.prompt) : 0;
  const Reserve res = model_.reserve(seq, std::max<int64_t>(total - reused, 0));
  if (res != Reserve::Ok) {
    model_.remove_sequence(seq);
    if (active_.empty())
      throw Error(fmt::format("request {} needs {} KV positions, more than the KV pool can hold",
                              w.index, total),
                  "lower -c/--ctx-size or -n, or give the pool more blocks");
    return false;
  }
  auto a = std::make_unique<Active>();
  a->index = w.index;
  a->prompt = std::move(w.prompt);
  a->opt = std::move(w.opt);
  if (!a->opt.pick) a->opt.pick = pick_greedy;
  a->seq = seq;
  a->fed = reused;
  a->r.n_prompt = n_prompt;
  a->r.n_reused = reused;
  a->t0 = Clock::now();
  waiting_.pop_front();
  if (opt_.on_admit) opt_.on_admit(a->index, seq);
  active_.push_back(std::move(a));
  return true;
}

bool Scheduler::must_stop(Active& a) {
  const auto n_gen = static_cast<int64_t>(a.r.generated_ids.size());
  if (a.opt.n_predict >= 0 && n_gen >= a.opt.n_predict) {
    a.r.finish = FinishReason::NPredict;
    a.finished = true;
  } else if (a.r.n_prompt + n_gen >= a.opt.n_ctx) {
    a.r.finish = FinishReason::Length;
    a.finished = true;
  }
  return a.finished;
}

// The rule of GenerateOptions::pick_top_k: candidates when the request can pick from them, no
// callback reads the whole row, and the model computes that many on the device.
int32_t Scheduler::top_k_for(const Active& a, bool prompt_row) const {
  const GenerateOptions& o = a.opt;
  const int32_t k = o.top_k_candidates;
  if (k <= 0 || !o.pick_top_k || o.on_pick_logits || (prompt_row && o.on_prompt_logits)) return 0;
  return k <= model_.max_device_top_k() && k <= model_.n_vocab() ? k : 0;
}

void Scheduler::settle_hash(Active& a) {
  if (a.top_row < 0) return;
  const std::vector<float>& row = model_.top_k_row_logits(static_cast<size_t>(a.top_row));
  a.r.last_logits_hash = fnv1a_64(row.data(), row.size());
  a.top_row = -1;
}

void Scheduler::pick(Active& a, const float* logits, int64_t top_row) {
  const int32_t n_vocab = model_.n_vocab();
  a.top_row = top_row;
  if (logits != nullptr) a.r.last_logits_hash = fnv1a_64(logits, static_cast<size_t>(n_vocab));
  if (must_stop(a)) return;
  const bool first = a.r.generated_ids.empty();
  const int32_t id = logits != nullptr ? a.opt.pick(logits, n_vocab)
                                       : a.opt.pick_top_k(model_.decoded_top_k(),
                                                          static_cast<size_t>(top_row), n_vocab);
  if (first)
    a.r.ttft_ms = ms_since(a.t0);
  else
    a.r.decode_ms.push_back(ms_since(a.t_step));
  // After the timings, which exclude callbacks; the picker took the logits as const (with
  // on_pick_logits set, top_k_for() asked for the whole row).
  if (a.opt.on_pick_logits && logits != nullptr) a.opt.on_pick_logits(logits, n_vocab);
  if (id < 0 || id >= n_vocab)
    throw Error(fmt::format("generate: the picker chose id {} outside [0, {})", id, n_vocab));
  const bool end_id =
      std::find(a.opt.end_ids.begin(), a.opt.end_ids.end(), id) != a.opt.end_ids.end();
  if ((!a.opt.ignore_eos && id == a.opt.eos_id) || end_id) {
    a.r.finish = FinishReason::Eos;
    a.finished = true;
    return;
  }
  a.r.generated_ids.push_back(id);
  if (a.opt.on_token) a.opt.on_token(id);
  if (a.opt.stop_requested && a.opt.stop_requested()) {
    a.r.finish = FinishReason::Stop;
    a.finished = true;
    return;
  }
  if (a.opt.loop_detected && a.opt.loop_detected()) {
    a.r.finish = FinishReason::Loop;
    a.finished = true;
    return;
  }
  // The token just picked is fed next step unless the sequence ends here (it then never
  // goes through the model, as in a single-sequence loop).
  if (!must_stop(a)) {
    a.decoding = true;
    a.pending = id;
  }
}

void Scheduler::step() {
  // ---- build the batch: decode tokens first, then prompt chunks ---------------------------
  struct Owner {
    Active* a;
    int64_t prompt_pos;  // -1: a decode token
    bool top_k;          // answered with candidates (decoded_top_k()), not in the logits
  };
  std::vector<BatchToken> batch;
  std::vector<Owner> owners;                        // one per token with logits
  std::vector<std::pair<Active*, int64_t>> chunks;  // prefill progress of this step
  const int64_t budget = model_.max_batch_tokens();
  for (auto& a : active_)
    if (a->decoding && !a->finished) {
      const int32_t k = top_k_for(*a, false);
      batch.push_back(BatchToken{a->seq, a->pending, true, k});
      owners.push_back(Owner{a.get(), -1, k > 0});
    }
  for (auto& a : active_) {
    if (a->decoding || a->finished) continue;
    const auto n_prompt = static_cast<int64_t>(a->prompt.size());
    const int64_t k = std::min(n_prompt - a->fed, budget - static_cast<int64_t>(batch.size()));
    if (k <= 0) continue;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t p = a->fed + i;
      const bool want = p == n_prompt - 1 || static_cast<bool>(a->opt.on_prompt_logits);
      const int32_t top_k = want ? top_k_for(*a, true) : 0;
      batch.push_back(BatchToken{a->seq, a->prompt[static_cast<size_t>(p)], want, top_k});
      if (want) owners.push_back(Owner{a.get(), p, top_k > 0});
    }
    chunks.emplace_back(a.get(), k);
  }
  LLMCTL_ASSERT(!batch.empty());

  // ---- run it and hand out the logits --------------------------------------------------
  const Clock::time_point t_step = Clock::now();
  for (auto& a : active_) a->t_step = t_step;
  const std::vector<float>& logits = model_.decode(batch);
  const auto n_vocab = static_cast<size_t>(model_.n_vocab());
  const size_t n_top = static_cast<size_t>(
      std::count_if(owners.begin(), owners.end(), [](const Owner& o) { return o.top_k; }));
  LLMCTL_ASSERT(logits.size() == (owners.size() - n_top) * n_vocab);
  LLMCTL_ASSERT(model_.decoded_top_k().n_rows() == n_top);
  for (auto& [a, k] : chunks) a->fed += k;
  size_t whole = 0, top = 0;  // rows of each kind so far
  for (size_t i = 0; i < owners.size(); ++i) {
    Active& a = *owners[i].a;
    const int64_t p = owners[i].prompt_pos;
    if (owners[i].top_k) {  // a decode row, or a prompt's last row (top_k_for)
      if (p >= 0) a.r.prefill_ms = ms_since(a.t0);
      pick(a, nullptr, static_cast<int64_t>(top++));
      continue;
    }
    const float* row = logits.data() + whole++ * n_vocab;
    if (p >= 0 && a.opt.on_prompt_logits)
      a.opt.on_prompt_logits(p, std::vector<float>(row, row + n_vocab));
    if (p >= 0 && p + 1 < a.r.n_prompt) continue;  // not the prompt's last position
    if (p >= 0) a.r.prefill_ms = ms_since(a.t0);
    pick(a, row, -1);
  }
}

void Scheduler::run(const DoneFn& on_done) {
  const auto interrupted = [](const GenerateOptions& o) {
    return o.interrupted && o.interrupted();
  };
  while (!waiting_.empty() || !active_.empty()) {
    // An interrupted request is never admitted; the rest of the queue stays unanswered.
    if (!waiting_.empty() && interrupted(waiting_.front().opt)) waiting_.clear();
    while (static_cast<int64_t>(active_.size()) < opt_.max_sequences && !waiting_.empty())
      if (!admit_one()) break;
    bool any_running = false;
    for (auto& a : active_) {
      if (interrupted(a->opt)) {
        a->r.finish = FinishReason::Interrupted;
        a->finished = true;
        settle_hash(*a);  // before the step below replaces the model's last logits
      }
      any_running = any_running || !a->finished;
    }
    if (any_running) step();
    // Finished sequences leave now, in batch order, freeing their blocks for the next.
    for (auto it = active_.begin(); it != active_.end();) {
      if (!(*it)->finished) {
        ++it;
        continue;
      }
      std::unique_ptr<Active> a = std::move(*it);
      it = active_.erase(it);
      settle_hash(*a);
      model_.remove_sequence(a->seq);
      if (on_done) on_done(a->index, std::move(a->r));
    }
  }
}

GenerateResult generate(SequenceModel& model, const std::vector<int32_t>& prompt,
                        const GenerateOptions& opt) {
  Scheduler s(model, SchedulerOptions{1});
  s.submit(prompt, opt);
  GenerateResult out;
  s.run([&out](size_t, GenerateResult&& r) { out = std::move(r); });
  return out;
}

}  // namespace llmctl
