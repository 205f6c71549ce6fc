// llmctl quantize IN OUT --type MIX [--pure] [--tensor-type REGEX=T]... [--keep-embedding T]
//                 [--keep-output T] [--imatrix FILE] [--allow-requantize] [--dry-run] [--json]
//                 [--report N] [--force] [-t N]
//
// MIX is llama-quantize's name (Q4_K_M, Q8_0, ...): each matrix gets the type llama.cpp's rules
// give it (quant/quant_mix.h); --pure gives every matrix the mix's base type.
//
// IN is a GGUF file or a Hugging Face directory (converted in memory, model/hf_to_gguf.h).
// Plans the output type of every tensor (quant/quant_plan.h), then writes OUT through
// quant/quantize_gguf.h (a temporary file renamed when complete) and prints the size by type
// and the tensors that lost the most (SNR). With --imatrix (made by `llmctl eval --save-imatrix`),
// the block search of Q4_0/Q4_1/Q5_0/Q5_1 and the k-quants is weighted by each input column's
// mean squared activation (quant/importance.h). Warnings and progress go to stderr; the report (or
// the JSON document with --json) to stdout.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/selection.h"
#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/quantize_report.h"
#include "core/error.h"
#include "core/output_file.h"
#include "core/text_io.h"
#include "io/gguf.h"
#include "model/hf_to_gguf.h"
#include "model/model_loader.h"
#include "quant/imatrix.h"
#include "quant/importance.h"
#include "quant/quant_mix.h"
#include "quant/quant_plan.h"
#include "quant/quantize_gguf.h"
#include "tokenizer/sp_model_proto.h"

namespace llmctl::cli {

namespace {

struct QuantizeCliOptions {
  std::string input;
  std::string output;
  std::string model;  // -m IN: the input, as every subcommand takes it
  std::string type;
  std::vector<std::string> tensor_types;
  std::string keep_embedding;
  std::string keep_output;
  std::string imatrix;
  bool pure = false;
  bool allow_requantize = false;
  bool dry_run = false;
  bool json = false;
  bool force = false;
  size_t report = 10;
  int threads = 0;  // 0: every core
};

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

// Installs the Ctrl-C handler for the lifetime of the object: the writer then stops at the
// next chunk and removes its temporary file instead of leaving it behind.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = 0;
    old_int_ = std::signal(SIGINT, on_interrupt);
    old_term_ = std::signal(SIGTERM, on_interrupt);
  }
  ~InterruptGuard() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  void (*old_int_)(int) = SIG_DFL;
  void (*old_term_)(int) = SIG_DFL;
};

// Turns a parse error of an option value into a usage error (exit 2).
template <class F>
auto as_usage(const std::string& option, F&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw CLI::ValidationError(option, e.what());
  }
}

QuantOptions parse_options(const QuantizeCliOptions& o) {
  QuantOptions q;
  const QuantMix* mix = find_quant_mix(o.type);
  if (mix == nullptr)
    throw CLI::ValidationError(
        "--type", fmt::format("unknown type '{}' (expected one of {})", o.type, quant_mix_names()));
  q.type = mix->base;
  q.mix = mix;
  q.pure = o.pure;
  for (const auto& a : o.tensor_types)
    q.overrides.push_back(as_usage("--tensor-type", [&] { return parse_tensor_type_override(a); }));
  if (!o.keep_embedding.empty())
    q.keep_embedding = as_usage(
        "--keep-embedding", [&] { return parse_quant_type(o.keep_embedding, "--keep-embedding"); });
  if (!o.keep_output.empty())
    q.keep_output =
        as_usage("--keep-output", [&] { return parse_quant_type(o.keep_output, "--keep-output"); });
  return q;
}

// Refuses outputs that would destroy something.
void check_paths(const QuantizeCliOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(o.input, ec)) throw FileError(o.input, "no such file or directory");
  if (o.dry_run) return;
  if (const std::string kind = non_regular_kind(o.output); !kind.empty())
    throw Error(fmt::format("output {} is {}, not a file; refusing to replace it", o.output, kind),
                "give the path of a regular file (--force only ever replaces regular files)");
  if (fs::exists(o.output, ec)) {
    if (fs::equivalent(o.input, o.output, ec))
      throw Error(fmt::format("output {} is the input file; refusing to overwrite it", o.output),
                  "choose another output path");
    if (!o.force)
      throw Error(fmt::format("output {} exists", o.output), "pass --force to overwrite it");
    if (fs::is_directory(o.output, ec))
      throw Error(fmt::format("output {} is a directory", o.output));
  }
}

// The input as a GGUF file. A Hugging Face directory is converted in memory first
// (model/hf_to_gguf.h) with F32 matrices, which hold F32, F16 and BF16 checkpoints exactly,
// so the quantizer sees the original values. Costs about twice the F32 model in memory.
GgufFile open_input(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return GgufFile::open(path);
  const LoadedModel model = load_hf_model(path);
  GgufVocab vocab;
  HfToGgufOptions options;
  options.type = GgmlType::F32;
  if (!model.tokenizer_path.empty()) {
    const SpModelInfo sp = parse_sp_model(read_whole_file(model.tokenizer_path));
    for (const SpPiece& p : sp.pieces) {
      vocab.tokens.push_back(p.piece);
      vocab.scores.push_back(p.score);
      vocab.types.push_back(static_cast<int32_t>(p.type));
    }
    vocab.add_space_prefix = sp.add_dummy_prefix;
    vocab.remove_extra_whitespaces = sp.remove_extra_whitespaces;
    options.vocab = &vocab;
  }
  auto image = std::make_shared<const std::vector<uint8_t>>(hf_to_gguf(model, options).build());
  return GgufFile::from_memory(std::move(image), path);
}

// Progress on stderr: a redrawn bar with ETA on a terminal, one line per tensor otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(const QuantPlan& plan)
      : plan_(plan), tty_(isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}
  ~ProgressPrinter() {
    if (tty_ && drawn_) fmt::print(stderr, "\n");
  }
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  void operator()(const QuantizeProgress& p) {
    if (g_interrupted) throw Error("interrupted; the output file was not written");
    const TensorPlan& t = plan_.tensors[p.tensor];
    if (!tty_) {
      if (p.tensor_start)
        fmt::print(stderr, "[{}/{}] {} {} -> {}\n", p.tensor + 1, p.n_tensors, t.name,
                   ggml_type_name(t.src_type), ggml_type_name(t.chosen));
      return;
    }
    const double frac = p.elements_total > 0 ? static_cast<double>(p.elements_done) /
                                                   static_cast<double>(p.elements_total)
                                             : 1.0;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const std::string eta =
        frac > 0.01 ? fmt::format("{:.0f}s", elapsed / frac - elapsed) : std::string("?");
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    fmt::print(stderr, "\r[{:=<{}}{: <{}}] {:3.0f}% {}/{} ETA {:>5} {:<32.32}", "", filled, "",
               kWidth - filled, 100.0 * frac, p.tensor + 1, p.n_tensors, eta, t.name);
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const QuantPlan& plan_;
  bool tty_;
  Clock::time_point start_;
  bool drawn_ = false;
};

// Tensor names and paths are bytes from the file system and the GGUF file, not always UTF-8.
std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Decoding a block-quantized tensor and encoding it again compounds two roundings, and the
// error report would measure the second against the already-quantized input: llama-quantize
// refuses it too unless --allow-requantize. Tensors copied unchanged are not requantized.
void refuse_requantize(const QuantPlan& plan) {
  int count = 0;
  const TensorPlan* first = nullptr;
  for (const TensorPlan& t : plan.tensors) {
    if (t.copy || ggml_traits(t.src_type).block_size == 1) continue;
    if (first == nullptr) first = &t;
    ++count;
  }
  if (first == nullptr) return;
  throw Error(fmt::format("the input is already quantized: {} tensors would be decoded and "
                          "quantized again (first: {}, {} -> {}); that compounds both roundings, "
                          "and the error report would be measured against the quantized input, "
                          "not the original weights",
                          count, first->name, ggml_type_name(first->src_type),
                          ggml_type_name(first->chosen)),
              "quantize from the F16/BF16/F32 original, or pass --allow-requantize to do it anyway");
}

int run_quantize(const QuantizeCliOptions& o) {
  const QuantOptions qopt = parse_options(o);
  check_paths(o);
  const GgufFile in = open_input(o.input);
  QuantOptions planned = qopt;
  planned.model = mix_model_from_gguf(in);
  planned.has_imatrix = !o.imatrix.empty();
  const QuantPlan plan = plan_quantization(in.tensors(), planned);
  for (const std::string& w : summarised_warnings(plan.warnings))
    fmt::print(stderr, "llmctl: warning: {}\n", w);
  if (!o.allow_requantize && !o.dry_run) refuse_requantize(plan);
  const auto unwritable = unwritable_types(plan);
  if (!unwritable.empty() && !o.dry_run) {
    std::string list;
    for (const auto& [type, count] : unwritable)
      list += fmt::format("{}{} ({} tensors)", list.empty() ? "" : ", ", ggml_type_name(type), count);
    throw Error(fmt::format("--type {} needs {}, which llmctl does not write yet", o.type, list),
                "--dry-run shows the whole plan; choose another mix (Q4_K_M, Q5_K_M, Q6_K, "
                "Q8_0, ...) or set those tensors with --tensor-type REGEX=TYPE");
  }
  std::optional<ImportancePlan> importance;
  if (!o.imatrix.empty()) {
    importance = importance_for_plan(plan, load_imatrix(o.imatrix));
    if (!importance->missing.empty())
      fmt::print(stderr,
                 "llmctl: warning: {} tensor(s) have no entry in {} and are quantized without "
                 "importance weights (first: {})\n",
                 importance->missing.size(), o.imatrix, importance->missing.front());
  }
  ReportExtras extras;
  if (importance) {
    extras.imatrix = o.imatrix;
    extras.imatrix_missing = importance->missing;
    for (const auto& [name, w] : importance->weights) extras.imatrix_used.push_back(name);
  }

  if (o.dry_run) {
    if (o.json)
      fmt::print("{}\n",
                 dump_json(quantize_json(plan, nullptr, o.input, o.output, o.report, &extras)));
    else
      print_size_by_type(plan);
    return kExitOk;
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TensorError> errors;
  {
    InterruptGuard guard;
    ProgressPrinter progress(plan);
    try {
      errors = quantize_gguf(
          in, plan, o.output, [&progress](const QuantizeProgress& p) { progress(p); },
          QuantizeRunOptions{o.threads, int64_t{1} << 22,
                             importance ? &importance->weights : nullptr});
    } catch (const Error& e) {
      if (!g_interrupted) throw;
      // Ctrl-C (or SIGTERM): the writer has removed its temporary file; 130 as in every
      // subcommand, so a script can tell an interruption from a failure.
      fmt::print(stderr, "llmctl: {}\n", e.what());
      return kExitInterrupted;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    fmt::print("{}\n",
               dump_json(quantize_json(plan, &errors, o.input, o.output, o.report, &extras)));
  } else {
    fmt::print("wrote {} ({} tensors)\n", o.output, plan.tensors.size());
    print_size_by_type(plan);
    print_worst_tensors(plan, errors, o.report);
    if (importance)
      fmt::print("importance matrix {}: {} tensors weighted, {} without an entry\n", o.imatrix,
                 extras.imatrix_used.size(), extras.imatrix_missing.size());
  }
  fmt::print(stderr,
             "quantize: mix={} pure={} type={} tensors={} out_bytes={} threads={} seconds={:.3f}\n",
             plan.mix, plan.pure ? 1 : 0, ggml_type_name(plan.type), plan.tensors.size(),
             plan.out_tensor_bytes, o.threads, seconds);
  return kExitOk;
}

}  // namespace

void add_quantize_command(CLI::App& app, Action& action) {
  auto opt = std::make_shared<QuantizeCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Convert a GGUF model to another weight format, measuring what each tensor loses");
  sub->footer(
      "Examples:\n"
      "  llmctl quantize model-f16.gguf model-q4_k_m.gguf --type Q4_K_M\n"
      "  llmctl quantize model-f16.gguf out.gguf --type Q8_0 --dry-run     # sizes only\n"
      "  llmctl eval -m model-f16.gguf -f calib.txt --save-imatrix im.gguf\n"
      "  llmctl quantize model-f16.gguf model-q4_0.gguf --type q4_0 --imatrix im.gguf\n"
      "\n"
      "Progress ([i/N] per tensor) and warnings go to stderr; the report (size by type, the\n"
      "--report worst tensors by SNR) to stdout, or --json. OUT is written beside itself as\n"
      "OUT.tmp-XXXXXX and renamed when complete, removed on failure; an existing OUT is kept\n"
      "unless --force, which replaces regular files only.\n"
      "Exit codes: 0 ok, 1 bad input file or error (an existing OUT without --force, an\n"
      "already-quantized input without --allow-requantize), 2 usage error,\n"
      "130 stopped by Ctrl-C (nothing written).");
  sub->add_option("input", opt->input,
                  "Input GGUF file or Hugging Face model directory (or give it with -m)")
      ->type_name("IN");
  sub->add_option("output", opt->output, "Output GGUF file")->type_name("OUT");
  sub->add_option("-m,--model", opt->model, "The input (then the one positional is the output)")
      ->type_name("FILE");
  sub->add_option("--type", opt->type,
                  "Mix, by llama-quantize's names, case-insensitive: F32, F16, BF16, Q8_0 "
                  "(8.5 bits per weight), Q6_K (6.56), Q5_K_M, Q5_K_S, Q5_1 (6), Q5_0 (5.5), "
                  "Q4_K_M, Q4_K_S, Q4_1 (5), Q4_0 (4.5), IQ4_NL, IQ4_XS, Q3_K_L, Q3_K_M, Q3_K_S, "
                  "Q2_K, Q2_K_S; Q4_K = Q4_K_M, Q5_K = Q5_K_M, Q3_K = Q3_K_M. Each matrix gets "
                  "the type llama.cpp's rules give it (output and attn_v upgrades, first and last "
                  "layers); MXFP4_MOE (= MXFP4): experts MXFP4, other matrices Q8_0, as for "
                  "gpt-oss")
      ->required()
      ->type_name("TYPE");
  sub->add_flag("--pure", opt->pure,
                "Every matrix gets the mix's base type (no llama.cpp upgrades), as llama-quantize "
                "--pure");
  sub->add_option("--tensor-type", opt->tensor_types,
                  "REGEX=TYPE for tensors whose name matches REGEX (repeatable; first match wins)")
      ->allow_extra_args(false)
      ->type_name("REGEX=TYPE");
  sub->add_option("--keep-embedding,--token-embedding-type", opt->keep_embedding,
                  "Type for token_embd.weight")
      ->type_name("TYPE");
  sub->add_option("--keep-output,--output-tensor-type", opt->keep_output,
                  "Type for output.weight")
      ->type_name("TYPE");
  sub->add_option("--imatrix", opt->imatrix,
                  "Importance matrix (GGUF, from `llmctl eval --save-imatrix` or llama.cpp) "
                  "weighting the block search of q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k")
      ->type_name("FILE");
  sub->add_flag("--allow-requantize", opt->allow_requantize,
                "Allow tensors that are already quantized to be decoded and quantized again");
  sub->add_flag("--dry-run", opt->dry_run, "Write nothing; print the resulting size by type");
  sub->add_flag("--json", opt->json, "Print the plan and the error report as JSON on stdout");
  sub->add_option("--report", opt->report, "How many worst tensors (by SNR) to list")
      ->capture_default_str();
  sub->add_flag("--force", opt->force, "Overwrite an existing output file");
  sub->add_option("-t,--threads", opt->threads,
                  "CPU threads, up to 1024 (0: every core this process may use); the output does "
                  "not depend on it")
      ->check(in_range(0, 1024))
      ->capture_default_str();
  sub->callback([&action, opt] {
    // IN OUT, or -m IN OUT (CLI11 puts the one positional into `input`).
    if (!opt->model.empty()) {
      if (!opt->output.empty())
        throw CLI::ValidationError("-m", fmt::format("the input is given twice: -m {} and {}",
                                                     opt->model, opt->input));
      opt->output = std::exchange(opt->input, opt->model);
    }
    if (opt->input.empty()) throw CLI::RequiredError("the input model (IN or -m IN)");
    if (opt->output.empty()) throw CLI::RequiredError("the output file OUT");
    if (opt->threads == 0) opt->threads = default_cpu_threads();
    action = [opt] { return run_quantize(*opt); };
  });
}

}  // namespace llmctl::cli
