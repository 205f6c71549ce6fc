// llmctl rope-probe: does the model's positional encoding work, and does its RoPE metadata
// match its weights? Parses the options, runs diag/rope_probe.h's four probes on the chosen
// backend, prints tables (or --json), --check verdicts, --baseline drift and --svg charts.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "backend/selection.h"
#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/engine_options.h"
#include "cli/interrupt.h"
#include "cli/model_tokenizer.h"
#include "cli/rope_probe_report.h"
#include "core/error.h"
#include "core/stop_point.h"
#include "core/text_io.h"
#include "diag/rope_probe_check.h"
#include "io/json_error.h"
#include "model/model_loader.h"

namespace llmctl::cli {

namespace {

// The engine's -m, -t, --device, --cpu-reference (engine_options.h) and the probes' own.
struct RopeProbeCliOptions : EngineOptions {
  std::string pre_tokenizer;  // --pre-tokenizer NAME
  bool json = false;
  bool check = false;
  std::string svg;
  std::string baseline;
  std::string probes;  // --probes LIST; empty: all
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
    if (!j.is_object() || !j.contains("config") || !j.contains("thresholds"))
      throw FileError(path, "not a rope-probe --json output (no 'shift' member)");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw FileError(path, fmt::format("not valid JSON: {}", json_error_text(e.what())),
                    FileError::kNoOffset,
                    "save a baseline with: llmctl rope-probe -m MODEL --json > FILE");
  }
}

// What the probes ran on, for the report's header and "backend" member.
std::string backend_label(const Backend& b, const BackendChoice& choice) {
  if (std::string(b.name()) != "cpu") return b.name();
  return choice.cpu_reference ? "cpu (scalar reference)" : "cpu (f32 activations)";
}

int run_rope_probe_cli(RopeProbeCliOptions& opt) {
  if (!opt.probes.empty()) {
    try {
      opt.probe.probes = parse_rope_probe_set(opt.probes);
    } catch (const Error& e) {
      throw CLI::ValidationError("--probes", e.what());
    }
  }
  if (!opt.svg.empty() && !(opt.probe.probes.shift && opt.probe.probes.distance))
    throw CLI::ValidationError("--svg", "the charts need the shift and distance probes");
  if (!opt.rope_scale.empty()) opt.probe.linear_scale = parse_rope_scale(opt.rope_scale);
  opt.probe.theta = opt.rope_theta;
  if (!opt.text_file.empty()) opt.probe.reference = read_whole_file(opt.text_file);
  require_model_path(opt.model);
  // Ctrl-C: the probes stop at their next forward call (core/stop_point.h); no table, JSON
  // or chart is written, exit 130.
  install_interrupt_handler();
  // Read before the probes run, so a bad baseline fails fast.
  const std::optional<nlohmann::json> baseline =
      opt.baseline.empty() ? std::nullopt : std::optional(read_baseline(opt.baseline));
  const LoadedModel m = load_model(opt.model);
  if (!m.gguf && m.tokenizer_path.empty())
    throw FileError(opt.model, "no vocabulary: the directory has no tokenizer.model");
  const Tokenizer tok = *open_model_tokenizer(m, TokenizerOptions{opt.pre_tokenizer});
  BackendChoice choice = backend_choice(opt, opt.threads);
  // f32 activations: the shift probe looks for rounding-sized differences, and the fast CPU
  // path's int8 activations make a 1-ulp change of q or k into whole quantization steps
  // downstream (SmolLM2: shift KL 0.013 on the fast path, 1.6e-11 with f32 activations;
  // diag/rope_probe.h has the measurements). Costs ~1.2x on a Q4_1 model.
  choice.float_activations = true;
  const std::unique_ptr<Backend> backend = make_backend(choice);
  const std::string label = backend_label(*backend, choice);
  fmt::print(stderr, "llmctl: rope-probe {} on {}\n", opt.model, label);

  RopeProbeReport report = run_rope_probe(opt.model, m.config, m.weights, *backend, tok, opt.probe);
  stop_point();  // a Ctrl-C during the last forward call: no output
  report.backend = label;
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
      "              base x10, base /10 (with a local base: global and local base x10, /10\n"
      "              each), the other pair layout (normal/neox), linear scaling on (x2) or\n"
      "              off. The configured one should fit best.\n"
      "Checks (--check; exit 3 with one line per failure on stderr):\n"
      "  shift     every offset: max KL <= --max-shift-kl (1e-6), max |dlogit| <=\n"
      "            --max-shift-dlogit (1e-3)\n"
      "  ablation  KL(all positions 0) >= --min-ablation-kl (0.1)\n"
      "  sweep     configured NLL <= best variant's + --sweep-margin (0); else it names the\n"
      "            variant that fits better (the metadata may be wrong)\n"
      "  --baseline F  every number of F (a saved --json) within --drift-abs (1e-4) +\n"
      "            --drift-rel (0.02) x |baseline|, else exit 3 naming the number\n"
      "Precision: every forward pass uses an f32 KV cache and, on the CPU, f32 activations in\n"
      "every matmul (weights decoded to f32), not the int8/f16 activations of 'run': the\n"
      "shift check looks for rounding-sized differences, and int8 activations alone move\n"
      "SmolLM2's logits by |dlogit| ~1.3 under a shift (f32: 3e-5). --cpu-reference runs the\n"
      "scalar reference instead (same verdicts, ~30x slower). CUDA matvecs are f32 already.\n"
      "Layers: with a sliding-window pattern and a local RoPE base (Gemma 3) the header lists\n"
      "the layer groups, the sweep varies the global and the local base separately, and the\n"
      "angle table has rows per base. The shift moves RoPE positions only; windows count\n"
      "cache positions, so windowed layers see the same keys at every offset.\n"
      "--probes LIST runs some of shift, ablation, distance, sweep (checks judge those only).\n"
      "--svg F writes the distance curve to F and the angle precision to F's name without\n"
      ".svg + '-angles.svg' (needs the shift and distance probes).\n"
      "Examples:\n"
      "  llmctl rope-probe -m stories260K.gguf\n"
      "  llmctl rope-probe -m stories260K.gguf --check --json > base.json\n"
      "  llmctl rope-probe -m stories260K.gguf --baseline base.json --svg rope.svg\n"
      "  llmctl rope-probe -m model.gguf --rope-scale linear:4 --offsets 4096,65536\n"
      "Exit codes: 0 ok, 1 error, 2 usage error, 3 a check failed or drift, 130 stopped by Ctrl-C.");
  sub->add_option("--pre-tokenizer", opt.pre_tokenizer, kPreTokenizerHelp)
      ->type_name("NAME");
  add_engine_options(sub, opt, {kModel | kThreads | kDevice | kCpuReference});
  sub->get_option("--cpu-reference")
      ->description("CPU: the scalar reference backend (slow) instead of the fast one with f32 "
                    "activations");
  sub->add_flag("--json", opt.json, "Print one JSON object instead of tables");
  sub->add_option("--svg", opt.svg, "Write the distance curve (and F-angles.svg) as SVG")
      ->type_name("FILE");
  sub->add_flag("--check", opt.check, "Exit 3 when a check fails (thresholds below)");
  sub->add_option("--baseline", opt.baseline,
                  "Compare with a saved --json output; exit 3 on drift")
      ->type_name("FILE");
  sub->add_option("--probes", opt.probes,
                  "Probes to run, comma-separated: shift, ablation, distance, sweep (default: "
                  "all)")
      ->type_name("LIST");
  sub->add_option("--offsets", opt.probe.offsets,
                  "Shift offsets, comma-separated (default: 1024, 8192, 32768, n_ctx_train, "
                  "4 x n_ctx_train)")
      ->delimiter(',')
      ->check(at_least(int64_t{0}));
  sub->add_option("--prompt", opt.probe.prompt, "Prompt of the shift and ablation probes");
  sub->add_option("--text", opt.probe.reference, "Reference text of the sweep");
  sub->add_option("--text-file", opt.text_file, "Read the sweep's reference text from FILE")
      ->type_name("FILE");
  sub->add_option("--fact", opt.probe.fact, "Distance probe: the fact sentence");
  sub->add_option("--filler", opt.probe.filler, "Distance probe: filler text (repeated)");
  sub->add_option("--cue", opt.probe.cue, "Distance probe: the cue before the completion");
  sub->add_option("--expect", opt.probe.expected, "Distance probe: the expected completion");
  sub->add_option("--distance-ctx", opt.probe.distance_ctx,
                  "Longest distance sequence in tokens (0: n_ctx_train)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--rope-theta", opt.rope_theta, "Distance curve under this RoPE base too")
      ->check(positive_number());
  sub->add_option("--rope-scale", opt.rope_scale,
                  "Distance curve under linear RoPE scaling too: linear:F")
      ->type_name("SCALE");
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
      ->check(at_least(0.0));
  sub->add_option("--drift-abs", opt.drift.abs, "Baseline: absolute tolerance")
      ->capture_default_str()
      ->check(at_least(0.0));
  sub->callback([&action] { action = [] { return run_rope_probe_cli(opt); }; });
}

}  // namespace llmctl::cli
