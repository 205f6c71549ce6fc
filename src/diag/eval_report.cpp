// Text and JSON output of `llmctl eval` (eval_report.h).
#include "diag/eval_report.h"

#include <fmt/format.h>

namespace llmctl {

std::string eval_text_report(const EvalSubject& s, const EvalResult& r) {
  std::string out;
  out += fmt::format("model       {} (KV cache {})\n", s.model, s.kv_type);
  out += fmt::format("text        {}: {} tokens, {} window{} of up to {} positions{}\n", s.text,
                     s.n_tokens, r.n_windows, r.n_windows == 1 ? "" : "s", s.ctx,
                     s.bos ? " (BOS first)" : " (no BOS)");
  out += fmt::format("scoring     {} ({})\n", eval_scoring_info(s.scoring).name,
                     eval_scoring_info(s.scoring).description);
  out += fmt::format("perplexity  {:.4f}  (mean NLL {:.5f} nats over {} scored tokens)\n", r.ppl,
                     r.mean_nll, r.n_scored);
  if (r.has_base) {
    out += fmt::format("base        {} (KV cache {}): perplexity {:.4f} (mean NLL {:.5f})\n",
                       s.base, s.base_kv_type, r.base_ppl, r.base_mean_nll);
    const bool exact = r.top_k >= s.n_vocab;
    out += fmt::format("KL(base||model) nats, top-{} + tail{}:\n", r.top_k,
                       exact ? " (exact: K = n_vocab)" : " (a lower bound of the full KL)");
    out += fmt::format("  mean {:.6f}  median {:.6f}  p99 {:.6f}  max {:.6f}\n", r.kl.mean,
                       r.kl.median, r.kl.p99, r.kl.max);
    out += fmt::format("top-1 agreement  {:.2f}%\n", 100.0 * r.top1_agreement);
    out += fmt::format("mean dp(base top token)  {:+.6f}\n", r.mean_delta_p);
  }
  if (!s.imatrix.empty()) out += fmt::format("imatrix     written to {}\n", s.imatrix);
  return out;
}

nlohmann::json eval_json(const EvalSubject& s, const EvalResult& r) {
  nlohmann::json j;
  j["model"] = s.model;
  j["kv_type"] = s.kv_type;
  j["text"] = s.text;
  j["n_tokens"] = s.n_tokens;
  j["ctx"] = s.ctx;
  j["bos"] = s.bos;
  j["scoring"] = eval_scoring_info(s.scoring).name;
  j["n_windows"] = r.n_windows;
  j["n_scored"] = r.n_scored;
  j["mean_nll"] = r.mean_nll;
  j["ppl"] = r.ppl;
  if (r.has_base) {
    j["base"] = s.base;
    j["base_kv_type"] = s.base_kv_type;
    j["base_ppl"] = r.base_ppl;
    j["base_mean_nll"] = r.base_mean_nll;
    j["top_k"] = r.top_k;
    j["kl_lower_bound"] = r.top_k < s.n_vocab;
    j["kl"] = {{"mean", r.kl.mean}, {"median", r.kl.median}, {"p99", r.kl.p99}, {"max", r.kl.max}};
    j["top1_agreement"] = r.top1_agreement;
    j["mean_delta_p"] = r.mean_delta_p;
  }
  if (!s.imatrix.empty()) j["imatrix"] = s.imatrix;
  return j;
}

}  // namespace llmctl
