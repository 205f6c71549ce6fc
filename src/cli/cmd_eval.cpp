// llmctl eval -m MODEL [-f FILE | --builtin-text NAME] [-c N] [--scoring llmctl|llama-cpp]
//             [--base BASE [--top-k K]] [--kv-type T | -ctk T -ctv T] [--save-imatrix FILE]
//             [--json] [--device D] [-t N]
//
// Perplexity of MODEL over a text, cut into windows of -c positions (diag/eval.h has the
// scoring rules: ours, or llama-perplexity's with --scoring llama-cpp); with --base, the KL
// divergence of MODEL's next-token distributions from
// BASE's (base first, keeping only its top-K log-probs and tail mass per position, then the
// model), top-1 agreement and the mean change of the base top token's probability; with
// --save-imatrix, the importance matrix of MODEL's matmul inputs over the text.
// The forward pass is the one `run` uses (Forward on the backend make_backend gives), with an
// f32 KV cache; with --kv-type (or -ctk/-ctv) the model's cache has that type and the base's is
// f16, so `eval -m M --base M --kv-type q8_0` prices the KV type alone (same weights). Result on stdout (text or --json); progress and one summary line on stderr:
//   llmctl-eval: ppl=F tokens=N windows=N scoring=NAME [kl_mean=F kl_median=F kl_p99=F top1=F dp=F] seconds=F
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "backend/selection.h"
#include "cli/model_tokenizer.h"
#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/engine_options.h"
#include "cli/interrupt.h"
#include "cli/run_session.h"
#include "core/error.h"
#include "core/stop_point.h"
#include "core/text_io.h"
#include "diag/builtin_text.h"
#include "diag/eval.h"
#include "diag/eval_report.h"
#include "diag/imatrix_collector.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "quant/imatrix.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

namespace {

constexpr int64_t kDefaultCtx = 512;

// The engine's -m, -t, --device, -c (engine_options.h) and eval's own.
struct EvalOptions : EngineOptions {
  std::string pre_tokenizer;  // --pre-tokenizer NAME (model and --base)
  std::string text;                      // file, "-" = stdin; "" = built-in text
  std::string builtin_text = "stories";  // --builtin-text
  EvalScoring scoring = EvalScoring::Llmctl;  // --scoring
  std::string base;
  int top_k = 32;
  std::string save_imatrix;
  bool no_bos = false;
  bool json = false;
};

// A loaded model with its tokenizer.
struct EvalModel {
  LoadedModel m;
  std::optional<Tokenizer> tok;
};

EvalModel open_model(const std::string& path, const char* role, const std::string& pre_tokenizer) {
  require_model_path(path, role);
  EvalModel e;
  e.m = load_model(path);
  e.tok = open_model_tokenizer(e.m, TokenizerOptions{pre_tokenizer});
  return e;
}

// KL and agreement compare distributions over token ids, so both models must give each id
// the same meaning.
void check_same_vocabulary(const EvalModel& model, const EvalModel& base) {
  const int64_t nm = model.m.config.n_vocab, nb = base.m.config.n_vocab;
  if (nm != nb)
    throw Error(fmt::format("vocabulary mismatch: {} has n_vocab {}, the base {} has {}",
                            model.m.path, nm, base.m.path, nb),
                "KL divergence needs two models with the same vocabulary (e.g. a model and its "
                "quantized copy)");
  if (!model.tok || !base.tok) return;  // the n_vocab check is all that can be done
  const int32_t n = std::min(model.tok->n_vocab(), base.tok->n_vocab());
  if (model.tok->n_vocab() != base.tok->n_vocab())
    throw Error(fmt::format("vocabulary mismatch: {} has {} tokens, the base {} has {}",
                            model.m.path, model.tok->n_vocab(), base.m.path, base.tok->n_vocab()));
  for (int32_t id = 0; id < n; ++id)
    if (model.tok->piece(id) != base.tok->piece(id))
      throw Error(fmt::format("vocabulary mismatch: token {} is '{}' in {} but '{}' in the base {}",
                              id, model.tok->piece(id), model.m.path, base.tok->piece(id),
                              base.m.path));
}

std::string read_text(const EvalOptions& opt, std::string& label) {
  if (opt.text.empty()) {
    label = "builtin:" + opt.builtin_text;
    return std::string(builtin_text(opt.builtin_text));
  }
  label = opt.text;
  if (opt.text == "-" && stdin_is_terminal())
    throw Error("eval: -f - reads standard input, which is a terminal",
                "pipe the text in (llmctl eval -f - < FILE) or pass -f FILE");
  return read_whole_file(opt.text);
}

// "\reval: model 3/12 windows" on a terminal; nothing otherwise (no log noise in files).
ProgressFn progress_printer(const char* what) {
  if (isatty(STDERR_FILENO) == 0) return {};
  return [what](int64_t done, int64_t total) {
    fmt::print(stderr, "\reval: {} window {}/{}", what, done, total);
    if (done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
  };
}

std::unique_ptr<Backend> backend_for(const EvalOptions& opt) {
  return make_backend(backend_choice(opt, opt.threads));
}

int run_eval(const EvalOptions& opt) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  // Ctrl-C: the windows stop at their next forward call (core/stop_point.h), nothing is
  // printed or saved, exit 130.
  install_interrupt_handler();
  EvalSubject subj;
  std::string text = read_text(opt, subj.text);
  // llama-perplexity's -f drops one final newline (common/arg.cpp); its scoring reads the
  // text as it does.
  if (opt.scoring == EvalScoring::LlamaCpp && !text.empty() && text.back() == '\n')
    text.pop_back();

  EvalModel model = open_model(opt.model, "model", opt.pre_tokenizer);
  if (!model.tok)
    throw FileError(opt.model, "no vocabulary to tokenize the text with", FileError::kNoOffset,
                    "eval needs a GGUF file with its vocabulary or a directory with "
                    "tokenizer.model");
  const Tokenizer& tok = *model.tok;
  const std::vector<int32_t> ids = tok.encode(text, false);
  const int32_t bos = (!opt.no_bos && tok.add_bos_default()) ? tok.bos_id() : -1;
  const ModelConfig& cfg = model.m.config;
  const int64_t ctx =
      opt.ctx_size.value_or(cfg.n_ctx_train > 0 ? std::min(kDefaultCtx, cfg.n_ctx_train) : kDefaultCtx);
  const std::vector<EvalWindow> windows =
      plan_windows(opt.scoring, static_cast<int64_t>(ids.size()), ctx, bos >= 0);
  if (cfg.n_ctx_train > 0 && ctx > cfg.n_ctx_train)
    fmt::print(stderr, "llmctl: note: -c {} exceeds the model's training context {}\n", ctx,
               cfg.n_ctx_train);
  subj.model = opt.model;
  subj.n_tokens = static_cast<int64_t>(ids.size());
  subj.ctx = ctx;
  subj.bos = bos >= 0;
  subj.n_vocab = cfg.n_vocab;
  subj.scoring = opt.scoring;

  // KV types: f32 for both, or with --kv-type/-ctk/-ctv the given ones for the model and f16
  // for the base (the reference the KV type is priced against).
  const bool kv_given = opt.kv_type_given || opt.cache_type_k || opt.cache_type_v;
  KvCacheOptions model_kv;
  model_kv.type = KvType::F32;
  if (kv_given) apply_kv_types(opt, model_kv);
  const KvType base_kv = kv_given ? KvType::F16 : KvType::F32;
  subj.kv_type = kv_types_label(model_kv);
  subj.base_kv_type = kv_type_name(base_kv);

  // The base pass first; only its top-K summary outlives it.
  BaseTopK base_top;
  EvalResult base_result;
  if (!opt.base.empty()) {
    EvalModel base = open_model(opt.base, "base model", opt.pre_tokenizer);
    check_same_vocabulary(model, base);
    if (opt.top_k < 1 || opt.top_k > cfg.n_vocab)
      throw Error(fmt::format("--top-k {} is outside [1, n_vocab = {}]", opt.top_k, cfg.n_vocab));
    const std::unique_ptr<Backend> backend = backend_for(opt);
    Forward fwd(base.m.config, base.m.weights, *backend, ctx, base_kv);
    base_result =
        collect_base(fwd, ids, bos, windows, opt.top_k, base_top, progress_printer("base"));
    subj.base = opt.base;
  }

  ImportanceMatrix imatrix;
  ImatrixCollector collector(imatrix);
  const std::unique_ptr<Backend> backend = backend_for(opt);
  Forward fwd(cfg, model.m.weights, *backend, ctx, model_kv.type, model_kv.v_type);
  if (!opt.save_imatrix.empty()) fwd.set_observer(&collector);
  const EvalResult r =
      evaluate(fwd, ids, bos, windows, opt.base.empty() ? nullptr : &base_top,
               opt.base.empty() ? nullptr : &base_result, progress_printer("model"));
  stop_point();  // a Ctrl-C during the last window: no partial imatrix or report
  if (!opt.save_imatrix.empty()) {
    imatrix.datasets = {subj.text};
    imatrix.chunk_count = r.n_windows;
    imatrix.chunk_size = ctx;
    save_imatrix(opt.save_imatrix, imatrix);
    subj.imatrix = opt.save_imatrix;
  }

  if (opt.json)
    fmt::print("{}\n", eval_json(subj, r).dump(2));
  else
    fmt::print("{}", eval_text_report(subj, r));
  flush_out();  // the report before the timing line on stderr
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::string extra;
  if (r.has_base)
    extra = fmt::format(" kl_mean={:.6g} kl_median={:.6g} kl_p99={:.6g} top1={:.6g} dp={:.6g}",
                        r.kl.mean, r.kl.median, r.kl.p99, r.top1_agreement, r.mean_delta_p);
  fmt::print(stderr, "llmctl-eval: ppl={:.6g} tokens={} windows={} scoring={}{} seconds={:.3f}\n",
             r.ppl, r.n_scored, r.n_windows, eval_scoring_info(opt.scoring).name, extra, secs);
  return kExitOk;
}

constexpr const char* kFooter = R"(
Scoring (--scoring llmctl, the default): the text is tokenized without BOS and cut into
consecutive windows of -c positions, each run from an empty cache. With BOS (when the
vocabulary asks for it and --no-bos is not given) a window is BOS + up to ctx-1 text tokens
and every text token is scored once, predicted from BOS and the window's earlier tokens.
Without BOS a window's first token is context only and the next window starts at the
previous one's last token. perplexity = exp(mean -log q(token)).
--scoring llama-cpp: llama-perplexity's rule, to compare with the numbers published for
llama.cpp quantizations: [BOS] + text (one final newline dropped, as its -f does) in
floor(tokens / ctx) chunks of exactly ctx tokens, BOS replacing each chunk's first token,
only the second half of each chunk scored (positions ctx/2 .. ctx-2 predicting the next
token); at least 2 x ctx tokens are needed. Its default ctx is 512 too. It scores fewer,
better-predicted tokens, so its perplexity is lower than ours: the two are not comparable.
The output names the scoring. The KV cache is f32 (run's default is f16), so differences
between models come from their weights. With --kv-type T (or -ctk/-ctv) the model's cache
is T and the base's f16: `eval -m M --base M --kv-type q8_0` measures what the KV type
costs, the same weights on both sides.

KL(base||model) per scored token uses the base's top-K tokens plus one bucket for the rest:
sum_top p log(p/q) + P_tail log(P_tail/Q_tail). By the log-sum inequality this is a LOWER
BOUND of the full KL, exact when --top-k equals n_vocab. Reported: mean, median, p99, max;
top-1 agreement; mean of q(t) - p(t) for the base's top token t.
Exit codes: 0 ok, 1 bad input file or error (a text too short for the windows, another
vocabulary in --base), 2 usage error, 130 stopped by Ctrl-C (no --save-imatrix file written).
)";

}  // namespace

void add_eval_command(CLI::App& app, Action& action) {
  auto opt = std::make_shared<EvalOptions>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Perplexity over a text; KL divergence, top-1 agreement against a base model");
  sub->add_option("--pre-tokenizer", opt->pre_tokenizer, kPreTokenizerHelp)
      ->type_name("NAME");
  add_engine_options(sub, *opt,
                     {kModel | kThreads | kDevice | kCtxSize | kKvType, "-c,--ctx-size,--ctx",
                      "Positions per window (default: min(512, the model's training context))"});
  sub->add_option("-f,--file,--text", opt->text,
                  "Text file to evaluate; - is stdin (default: the built-in text)")
      ->type_name("FILE");
  sub->add_option("--builtin-text", opt->builtin_text,
                  "Built-in text when -f is not given: stories or calibration")
      ->check(one_of(builtin_text_names()))
      ->capture_default_str();
  sub->add_option_function<std::string>(
         "--scoring",
         [opt](const std::string& v) { opt->scoring = *eval_scoring_from_name(v); },
         "Which tokens the perplexity scores: llmctl (default: every token once) or llama-cpp "
         "(llama-perplexity's: the second half of each window)")
      ->check(one_of(eval_scoring_names()));
  sub->add_option("--base", opt->base, "Base model to compare with (same vocabulary)")
      ->type_name("FILE");
  sub->add_option("--top-k", opt->top_k,
                  "Base tokens kept per position for KL (KL is a lower bound unless = n_vocab)")
      ->capture_default_str();
  sub->add_option("--save-imatrix", opt->save_imatrix,
                  "Write the model's importance matrix over the text (GGUF, llama.cpp's layout)")
      ->type_name("FILE");
  sub->add_flag("--no-bos", opt->no_bos, "Do not start windows with BOS");
  sub->add_flag("--json", opt->json, "Print the result as one JSON object");
  sub->footer(kFooter);
  sub->callback([&action, opt] {
    action = [opt] {
      check_engine_options(*opt);
      return run_eval(*opt);
    };
  });
}

}  // namespace llmctl::cli
