// llmctl inspect FILE: a GGUF file's header, metadata, tensor table and totals, as text or JSON;
// with --verify, also a NaN/Inf scan of every tensor (model/verify_weights.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/app.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "model/verify_weights.h"

namespace llmctl::cli {

namespace {

struct InspectOptions {
  std::string file;
  std::string model;  // -m FILE, the same as the positional
  bool json = false;
  size_t max_array = 16;
  bool no_tensors = false;
  bool verify = false;
};

// 1234567 -> "1.23 M"
std::string human_count(int64_t n) {
  const auto x = static_cast<double>(n);
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", x / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f} M", x / 1e6);
  if (n >= 1'000) return fmt::format("{:.2f} K", x / 1e3);
  return fmt::format("{}", n);
}

void print_text(const GgufFile& f, const InspectOptions& opt) {
  GgufFormatOptions fo;
  fo.max_array = opt.max_array;
  fmt::print("file: {}\n", f.path());
  // A file without tensors need not have a data section (gguf-py ends it after the metadata).
  const std::string data = f.tensors().empty()
                               ? std::string()
                               : fmt::format(", data section at byte {}", f.data_offset());
  fmt::print("GGUF v{}, {} metadata keys, {} tensors, alignment {}{}, {} bytes\n", f.version(),
             f.metadata().size(), f.tensors().size(), f.alignment(), data, f.file_size());

  fmt::print("\nmetadata:\n");
  size_t key_w = 0;
  for (const auto& kv : f.metadata()) key_w = std::max(key_w, kv.key.size());
  for (const auto& kv : f.metadata())
    fmt::print("  {:<{}}  {:<14} {}\n", kv.key, key_w, gguf_type_label(kv.value),
               format_gguf_value(kv.value, fo));

  if (!opt.no_tensors && !f.tensors().empty()) {
    fmt::print("\ntensors (offset from the data section):\n");
    size_t name_w = 4, shape_w = 5;
    for (const auto& t : f.tensors()) {
      name_w = std::max(name_w, t.name.size());
      shape_w = std::max(shape_w, format_shape(t.shape).size());
    }
    fmt::print("  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}\n", "name", name_w, "type", "shape",
               shape_w, "bytes", "offset");
    for (const auto& t : f.tensors())
      fmt::print("  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}\n", t.name, name_w,
                 ggml_type_name(t.type), format_shape(t.shape), shape_w, t.n_bytes, t.offset);
  }

  if (f.tensors().empty()) {
    fmt::print("\nno tensors\n");
    return;
  }
  fmt::print("\ntotals by type:\n");
  uint64_t total_bytes = 0;
  for (const auto& tot : gguf_type_totals(f)) {
    fmt::print("  {:<7}  {:>5} tensors  {:>14} elements  {:>14} bytes ({})\n",
               ggml_type_name(tot.type), tot.n_tensors, tot.n_elements, tot.n_bytes,
               format_bytes(tot.n_bytes));
    total_bytes += tot.n_bytes;
  }
  const int64_t params = gguf_parameter_count(f);
  fmt::print("parameters: {} ({}), tensor data: {} bytes ({})\n", params, human_count(params),
             total_bytes, format_bytes(total_bytes));
}

// The --verify pass, with a progress line on stderr when it is a terminal.
VerifyResult verify_file(const GgufFile& f) {
  VerifyProgress progress;
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (tty)
    progress = [](uint64_t done, uint64_t total) {
      const double pct =
          total == 0 ? 100.0 : 100.0 * static_cast<double>(done) / static_cast<double>(total);
      fmt::print(stderr, "\rverify: {:5.1f}% of {}", pct, format_bytes(total));
      std::fflush(stderr);
    };
  VerifyResult r = verify_tensors(gguf_tensor_refs(f), progress);
  if (tty) fmt::print(stderr, "\r\033[K");
  return r;
}

nlohmann::ordered_json verify_json(const VerifyResult& r) {
  nlohmann::ordered_json j;
  j["ok"] = !r.fault.has_value();
  j["tensors"] = r.n_tensors;
  j["bytes"] = r.n_bytes;
  j["values"] = r.n_values;
  j["unchecked"] = r.unchecked;
  if (r.fault) {
    const WeightFault& w = *r.fault;
    j["fault"] = {{"tensor", w.tensor},     {"type", ggml_type_name(w.type)},
                  {"row", w.row},           {"column", w.column},
                  {"block", w.block},       {"field", w.field},
                  {"message", w.describe()}};
  } else {
    j["fault"] = nullptr;
  }
  return j;
}

void print_verify_text(const VerifyResult& r) {
  fmt::print("\nverify: {} tensors, {} ({} values or scales): {}\n", r.n_tensors,
             format_bytes(r.n_bytes), r.n_values,
             r.fault ? "NOT FINITE (see the error)" : "all finite");
  if (!r.unchecked.empty())
    fmt::print("verify: not checked ({} tensors of types without a NaN test): {}{}\n",
               r.unchecked.size(), r.unchecked.front(), r.unchecked.size() > 1 ? ", ..." : "");
}

int run_inspect(const InspectOptions& opt) {
  const GgufFile f = GgufFile::open(opt.file);
  std::optional<VerifyResult> verified;
  if (opt.verify) verified = verify_file(f);
  if (opt.json) {
    GgufFormatOptions fo;
    fo.max_array = opt.max_array;
    nlohmann::ordered_json j = gguf_to_json(f, fo);
    if (verified) j["verify"] = verify_json(*verified);
    // Metadata strings are bytes; ones that are not UTF-8 are written with U+FFFD.
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  } else {
    print_text(f, opt);
    if (verified) print_verify_text(*verified);
  }
  if (verified && verified->fault) {
    // A check that finds a problem exits 3 (core/error.h), so scripts can tell "weights hold
    // NaN/Inf" from "the file could not be read" (1).
    fmt::print(stderr, "llmctl: error: {}: {}\n", f.path(), verified->fault->describe());
    return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, Action& action) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "Show a GGUF file's metadata and tensors");
  sub->footer(
      "Text output: header line, metadata (type and value; arrays longer than --max-array are\n"
      "shown as [TYPE x COUNT] and their first 3 elements), the tensor table (name, ggml type,\n"
      "shape in ggml order with the row length first, bytes, offset from the data section),\n"
      "totals per type and the parameter count.\n"
      "--json: one object with file, version, file_size, alignment, data_offset, metadata\n"
      "(key -> value; an array longer than --max-array becomes {\"type\": ELEMENT_TYPE,\n"
      "\"count\": N, \"head\": [first 8 elements]}), metadata_types (key -> \"u32\",\n"
      "\"array[string]\" ...), tensors [{name, type, shape, n_elements, bytes, offset}],\n"
      "totals [{type, tensors, n_elements, bytes}], n_params and tensor_bytes.\n"
      "A malformed file is reported as 'FILE: WHAT (at byte N)' with exit code 1.\n"
      "--verify scans every tensor for NaN and Inf (float values; the fp16 scales of quantized\n"
      "blocks, which decide whether the block's values are finite) and reports the first one as\n"
      "'FILE: tensor NAME (TYPE SHAPE): row R, column C: value is NaN' (or '..., block B\n"
      "(elements A..Z): scale d is +Inf') with exit code 3; --json adds a \"verify\" object\n"
      "{ok, tensors, bytes, values, unchecked, fault}.\n"
      "Exit codes: 0 ok, 1 bad input file or error, 2 usage error, 3 --verify found NaN/Inf,\n"
      "130 stopped by Ctrl-C.");
  sub->add_option("file", opt->file, "GGUF file to inspect (or give it with -m)")
      ->type_name("FILE");
  sub->add_option("-m,--model", opt->model, "GGUF file to inspect, as every subcommand takes it")
      ->type_name("FILE");
  sub->add_flag("--json", opt->json, "Print JSON instead of text");
  sub->add_option("--max-array", opt->max_array,
                  "Summarise metadata arrays with more elements than this (0: print them whole)")
      ->capture_default_str();
  sub->add_flag("--no-tensors", opt->no_tensors, "Leave out the tensor table (text output)");
  sub->add_flag("--verify", opt->verify,
                "Scan every tensor for NaN/Inf values and quantization scales (exit 3 if found)");
  sub->callback([&action, opt] {
    if (!opt->model.empty() && !opt->file.empty() && opt->model != opt->file)
      throw CLI::ValidationError("-m", fmt::format("two files given: -m {} and {}; inspect reads one",
                                                   opt->model, opt->file));
    if (!opt->model.empty()) opt->file = opt->model;
    if (opt->file.empty()) throw CLI::RequiredError("the GGUF file (FILE or -m FILE)");
    action = [opt] { return run_inspect(*opt); };
  });
}

}  // namespace llmctl::cli
