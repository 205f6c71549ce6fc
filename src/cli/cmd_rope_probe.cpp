// llmctl rope-probe: does the model's positional encoding work, and does its RoPE metadata
// match its weights? Parses the options, runs diag/rope_probe.h's four probes on the chosen
// backend, prints tables (or --json), --check verdicts, --baseline drift and --svg charts.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "backend/registry.h"
#include "cli/model_tokenizer.h"
#include "cli/app.h"
#include "cli/rope_probe_report.h"
#include "cli/run_session.h"
#include "core/error.h"
#include "core/text_io.h"
#include "diag/rope_probe_check.h"
#include "io/json_error.h"
#include "model/model_loader.h"

namespace llmctl::cli {

namespace {

struct RopeProbeCliOptions {
  std::string pre_tokenizer;  // --pre-tokenizer NAME
  std::string model = kDefaultModel;
  bool json = false;
  bool check = false;
  std::string svg;
  std::string baseline;
  std::string device = "auto";
  int threads = 0;
  std::string text_file;
  std::string rope_scale;  // "linear:F"
  std::optional<double> rope_theta;
  RopeProbeOptions probe;
  RopeThresholds thresholds;
  DriftTolerance drift;
};

// "linear:F" -> F (> 0, finite). Throws CLI::ValidationError.
double parse_rope_scale(const std::string& s) {
  const std::string prefix = "linear:";
  size_t used = 0;
  double f = 0;
  bool ok = s.rfind(prefix, 0) == 0 && s.size() > prefix.size();
  if (ok) {
    try {
      f = std::stod(s.substr(prefix.size()), &used);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != s.size() - prefix.size() || !std::isfinite(f) || f <= 0)
    throw CLI::ValidationError("--rope-scale",
                               fmt::format("expected linear:F with a factor F > 0 (e.g. "
                                           "linear:4), got '{}'",
                                           s));
  return f;
}

nlohmann::json read_baseline(const std::string& path) {
  const std::string text = read_whole_file(path);
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object() || !j.contains("shift"))
      throw FileError(path, "not a rope-probe --json output (no 'shift' member)");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw FileError(path, fmt::format("not valid JSON: {}", json_error_text(e.what())), FileError::kNoOffset,
                    "save a baseline with: llmctl rope-probe -m MODEL --json > FILE");
  }
}

int run_rope_probe_cli(RopeProbeCliOptions& opt) {
  if (!opt.rope_scale.empty()) opt.probe.linear_scale = parse_rope_scale(opt.rope_scale);
  opt.probe.theta = opt.rope_theta;
  if (!opt.text_file.empty()) opt.probe.reference = read_whole_file(opt.text_file);
  if (!std::filesystem::exists(opt.model))
    throw Error(fmt::format("{}: no such model file or directory", opt.model),
                "pass -m MODEL.gguf (scripts/fetch-models.sh fetches stories260K)");
  // Read before the probes run, so a bad baseline fails fast.
  const std::optional<nlohmann::json> baseline =
      opt.baseline.empty() ? std::nullopt : std::optional(read_baseline(opt.baseline));
  const LoadedModel m = load_model(opt.model);
  if (!m.gguf && m.tokenizer_path.empty())
    throw FileError(opt.model, "no vocabulary: the directory has no tokenizer.model");
  const Tokenizer tok = *open_model_tokenizer(m, TokenizerOptions{opt.pre_tokenizer});
  BackendChoice choice;
  choice.device = opt.device;
  choice.n_threads = opt.threads;
  const std::unique_ptr<Backend> backend = make_backend(choice);
  fmt::print(stderr, "llmctl: rope-probe {} on {}\n", opt.model, backend->name());

  const RopeProbeReport report =
      run_rope_probe(opt.model, m.config, m.weights, *backend, tok, opt.probe);
  const nlohmann::json j = rope_probe_json(report, opt.thresholds);
  const std::vector<std::string> failures = check_rope_probe(report, opt.thresholds);
  if (opt.json)
    fmt::print("{}\n", j.dump(2));
  else
    print_rope_probe_tables(report, failures);
  if (!opt.svg.empty())
    for (const std::string& p : write_rope_probe_svgs(report, opt.svg))
      fmt::print(stderr, "llmctl: wrote {}\n", p);

  std::vector<std::string> failed = opt.check ? failures : std::vector<std::string>{};
  if (baseline)
    for (std::string& d : compare_rope_baseline(j, *baseline, opt.drift))
      failed.push_back(std::move(d));
  for (const std::string& f : failed) fmt::print(stderr, "{}\n", f);
  fmt::print(stderr, "llmctl-rope-probe: checks={} failed={}\n",
             opt.check || baseline ? "run" : "off", failed.size());
  return failed.empty() ? kExitOk : kExitCheckFailed;
}

}  // namespace

void add_rope_probe_command(CLI::App& app, Action& action) {
  static RopeProbeCliOptions opt;
  CLI::App* sub = app.add_subcommand(
      "rope-probe",
      "Test that positional encoding (RoPE) works and matches the weights: shift invariance, "
      "position ablation, distance curve, configuration sweep");
  sub->footer(
      "What it reports (KL in nats between next-token distributions, softmax in double):\n"
      "  1 shift     the prompt with RoPE positions starting at 0 and at each offset (a RoPE\n"
      "              shift; no extra tokens run). RoPE is relative, so KL and max |dlogit| must\n"
      "              be rounding-small; offset 0 is a second identical run (KL exactly 0). The\n"
      "              angle table shows float32 angle arithmetic (p * theta_scale^i in float, as\n"
      "              ggml does) against llmctl's float64 angles as the position grows.\n"
      "  2 ablation  all positions 0 vs normal (mean KL over the prompt), and the prompt's middle\n"
      "              tokens shuffled (KL at the last position), with and without positions. A\n"
      "              model that uses positions shows a large KL.\n"
      "  3 distance  fact + N filler tokens + cue: P(expected token) and KL against N=0 for N\n"
      "              doubling up to the context; with --rope-theta/--rope-scale a second curve.\n"
      "  4 sweep     mean NLL per token of a reference text under the configured RoPE and under\n"
      "              base x10, base /10, the other pair layout (normal/neox), linear scaling\n"
      "              on (x2) or off. The configured one should fit best.\n"
      "Checks (--check; exit 3 with one line per failure on stderr):\n"
      "  shift     every offset: max KL <= --max-shift-kl (1e-6), max |dlogit| <=\n"
      "            --max-shift-dlogit (1e-3)\n"
      "  ablation  KL(all positions 0) >= --min-ablation-kl (0.1)\n"
      "  sweep     configured NLL <= best variant's + --sweep-margin (0); else it names the\n"
      "            variant that fits better (the metadata may be wrong)\n"
      "  --baseline F  every number of F (a saved --json) within --drift-abs (1e-4) +\n"
      "            --drift-rel (0.02) x |baseline|, else exit 3 naming the number\n"
      "Forward passes use an f32 KV cache. --svg F writes the distance curve to F and the\n"
      "angle precision to F's name without .svg + '-angles.svg'.\n"
      "Examples:\n"
      "  llmctl rope-probe -m stories260K.gguf\n"
      "  llmctl rope-probe -m stories260K.gguf --check --json > base.json\n"
      "  llmctl rope-probe -m stories260K.gguf --baseline base.json --svg rope.svg\n"
      "  llmctl rope-probe -m model.gguf --rope-scale linear:4 --offsets 4096,65536\n"
      "Exit codes: 0 ok, 1 error, 2 usage error, 3 a check failed or drift.");
  sub->add_option("--pre-tokenizer", opt.pre_tokenizer, kPreTokenizerHelp);
  sub->add_option("-m,--model", opt.model, "GGUF file or Hugging Face model directory")
      ->capture_default_str();
  sub->add_flag("--json", opt.json, "Print one JSON object instead of tables");
  sub->add_option("--svg", opt.svg, "Write the distance curve (and F-angles.svg) as SVG");
  sub->add_flag("--check", opt.check, "Exit 3 when a check fails (thresholds below)");
  sub->add_option("--baseline", opt.baseline,
                  "Compare with a saved --json output; exit 3 on drift");
  sub->add_option("--device", opt.device, "auto, cpu or cuda[:N]")->capture_default_str();
  sub->add_option("-t,--threads", opt.threads, "CPU threads (0 = every core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  sub->add_option("--offsets", opt.probe.offsets,
                  "Shift offsets, comma-separated (default: 1024, 8192, 32768, n_ctx_train, "
                  "4 x n_ctx_train)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.empty() || v[0] != '-'
                       ? std::string()
                       : fmt::format("offset {} is negative; offsets are >= 0", v);
          },
          "OFFSET>=0"));
  sub->add_option("--prompt", opt.probe.prompt, "Prompt of the shift and ablation probes");
  sub->add_option("--text", opt.probe.reference, "Reference text of the sweep");
  sub->add_option("--text-file", opt.text_file, "Read the sweep's reference text from FILE");
  sub->add_option("--fact", opt.probe.fact, "Distance probe: the fact sentence");
  sub->add_option("--filler", opt.probe.filler, "Distance probe: filler text (repeated)");
  sub->add_option("--cue", opt.probe.cue, "Distance probe: the cue before the completion");
  sub->add_option("--expect", opt.probe.expected, "Distance probe: the expected completion");
  sub->add_option("--distance-ctx", opt.probe.distance_ctx,
                  "Longest distance sequence in tokens (0: n_ctx_train)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--rope-theta", opt.rope_theta, "Distance curve under this RoPE base too")
      ->check(CLI::PositiveNumber);
  sub->add_option("--rope-scale", opt.rope_scale,
                  "Distance curve under linear RoPE scaling too: linear:F");
  sub->add_option("--seed", opt.probe.seed, "Seed of the ablation's shuffle")
      ->capture_default_str();
  sub->add_option("--max-shift-kl", opt.thresholds.max_shift_kl, "Shift check: max KL")
      ->capture_default_str();
  sub->add_option("--max-shift-dlogit", opt.thresholds.max_shift_dlogit,
                  "Shift check: max |dlogit|")
      ->capture_default_str();
  sub->add_option("--min-ablation-kl", opt.thresholds.min_ablation_kl,
                  "Ablation check: min KL of all-zero positions")
      ->capture_default_str();
  sub->add_option("--sweep-margin", opt.thresholds.sweep_margin,
                  "Sweep check: NLL margin the configured RoPE is allowed over the best variant")
      ->capture_default_str();
  sub->add_option("--drift-rel", opt.drift.rel, "Baseline: relative tolerance")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--drift-abs", opt.drift.abs, "Baseline: absolute tolerance")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->callback([&action] { action = [] { return run_rope_probe_cli(opt); }; });
}

}  // namespace llmctl::cli
