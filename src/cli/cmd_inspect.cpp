// llmctl inspect FILE: a GGUF file's header, metadata, tensor table and totals, as text or JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/app.h"
#include "io/gguf.h"
#include "io/gguf_format.h"

namespace llmctl::cli {

namespace {

struct InspectOptions {
  std::string file;
  bool json = false;
  size_t max_array = 16;
  bool no_tensors = false;
};

// 1234567 -> "1.23 M"
std::string human_count(int64_t n) {
  const auto x = static_cast<double>(n);
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", x / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f} M", x / 1e6);
  if (n >= 1'000) return fmt::format("{:.2f} K", x / 1e3);
  return fmt::format("{}", n);
}

std::string human_bytes(uint64_t n) {
  const auto x = static_cast<double>(n);
  if (n >= (1ull << 30)) return fmt::format("{:.2f} GiB", x / static_cast<double>(1ull << 30));
  if (n >= (1ull << 20)) return fmt::format("{:.2f} MiB", x / static_cast<double>(1ull << 20));
  if (n >= (1ull << 10)) return fmt::format("{:.2f} KiB", x / 1024.0);
  return fmt::format("{} B", n);
}

void print_text(const GgufFile& f, const InspectOptions& opt) {
  GgufFormatOptions fo;
  fo.max_array = opt.max_array;
  fmt::print("file: {}\n", f.path());
  // A file without tensors need not have a data section (gguf-py ends it after the metadata).
  const std::string data =
      f.tensors().empty() ? std::string() : fmt::format(", data section at byte {}", f.data_offset());
  fmt::print("GGUF v{}, {} metadata keys, {} tensors, alignment {}{}, {} bytes\n", f.version(),
             f.metadata().size(), f.tensors().size(), f.alignment(), data, f.file_size());

  fmt::print("\nmetadata:\n");
  size_t key_w = 0;
  for (const auto& kv : f.metadata()) key_w = std::max(key_w, kv.key.size());
  for (const auto& kv : f.metadata())
    fmt::print("  {:<{}}  {:<14} {}\n", kv.key, key_w, gguf_type_label(kv.value), format_gguf_value(kv.value, fo));

  if (!opt.no_tensors && !f.tensors().empty()) {
    fmt::print("\ntensors (offset from the data section):\n");
    size_t name_w = 4, shape_w = 5;
    for (const auto& t : f.tensors()) {
      name_w = std::max(name_w, t.name.size());
      shape_w = std::max(shape_w, format_shape(t.shape).size());
    }
    fmt::print("  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}\n", "name", name_w, "type", "shape", shape_w,
               "bytes", "offset");
    for (const auto& t : f.tensors())
      fmt::print("  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}\n", t.name, name_w, ggml_type_name(t.type),
                 format_shape(t.shape), shape_w, t.n_bytes, t.offset);
  }

  if (f.tensors().empty()) {
    fmt::print("\nno tensors\n");
    return;
  }
  fmt::print("\ntotals by type:\n");
  uint64_t total_bytes = 0;
  for (const auto& tot : gguf_type_totals(f)) {
    fmt::print("  {:<7}  {:>5} tensors  {:>14} elements  {:>14} bytes ({})\n", ggml_type_name(tot.type),
               tot.n_tensors, tot.n_elements, tot.n_bytes, human_bytes(tot.n_bytes));
    total_bytes += tot.n_bytes;
  }
  const int64_t params = gguf_parameter_count(f);
  fmt::print("parameters: {} ({}), tensor data: {} bytes ({})\n", params, human_count(params), total_bytes,
             human_bytes(total_bytes));
}

int run_inspect(const InspectOptions& opt) {
  const GgufFile f = GgufFile::open(opt.file);
  if (opt.json) {
    GgufFormatOptions fo;
    fo.max_array = opt.max_array;
    // Metadata strings are bytes; ones that are not UTF-8 are written with U+FFFD.
    fmt::print("{}\n", gguf_to_json(f, fo).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  } else {
    print_text(f, opt);
  }
  return 0;
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
      "A malformed file is reported as 'FILE: WHAT (at byte N)' with exit code 1.");
  sub->add_option("file", opt->file, "GGUF file to inspect")->required();
  sub->add_flag("--json", opt->json, "Print JSON instead of text");
  sub->add_option("--max-array", opt->max_array,
                  "Summarise metadata arrays with more elements than this (0: print them whole)")
      ->capture_default_str();
  sub->add_flag("--no-tensors", opt->no_tensors, "Leave out the tensor table (text output)");
  sub->callback([&action, opt] { action = [opt] { return run_inspect(*opt); }; });
}

}  // namespace llmctl::cli
