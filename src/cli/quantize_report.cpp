#include "cli/quantize_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace llmctl::cli {

namespace {

struct TypeTotal {
  int64_t n_tensors = 0;
  int64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

// Output totals per chosen type, ordered by type number (deterministic).
std::map<uint32_t, TypeTotal> totals_by_type(const QuantPlan& plan) {
  std::map<uint32_t, TypeTotal> by;
  for (const TensorPlan& p : plan.tensors) {
    TypeTotal& t = by[static_cast<uint32_t>(p.chosen)];
    ++t.n_tensors;
    t.n_elements += p.n_elements;
    t.n_bytes += p.out_bytes;
  }
  return by;
}

double bits_per_weight(const TensorPlan& p) {
  return p.n_elements > 0
             ? 8.0 * static_cast<double>(p.out_bytes) / static_cast<double>(p.n_elements)
             : 0.0;
}

double mib(uint64_t n) { return static_cast<double>(n) / (1024.0 * 1024.0); }

nlohmann::ordered_json snr_json(double snr) {
  if (std::isinf(snr)) return nullptr;
  return snr;
}

}  // namespace

std::vector<size_t> worst_tensors(const std::vector<TensorError>& errors, size_t n) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < errors.size(); ++i)
    if (errors[i].measured && errors[i].sum_sq_err > 0.0) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return errors[a].snr_db() < errors[b].snr_db(); });
  if (idx.size() > n) idx.resize(n);
  return idx;
}

std::vector<std::string> summarised_warnings(const std::vector<std::string>& warnings) {
  struct Group {
    std::string text, first;
    size_t count = 0;
  };
  std::vector<Group> groups;  // in the order of their first warning
  for (const std::string& w : warnings) {
    // "tensor 'NAME': TEXT"; anything else stands alone.
    std::string name, text = w;
    if (w.rfind("tensor '", 0) == 0)
      if (const size_t end = w.find("': "); end != std::string::npos) {
        name = w.substr(8, end - 8);
        text = w.substr(end + 3);
      }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return !name.empty() && g.text == text && !g.first.empty(); });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{text, name, 0});
    ++it->count;
  }
  std::vector<std::string> lines;
  for (const Group& g : groups)
    lines.push_back(g.first.empty() ? g.text
                    : g.count == 1  ? fmt::format("tensor '{}': {}", g.first, g.text)
                                    : fmt::format("{} tensors: {} (first: '{}')", g.count, g.text, g.first));
  return lines;
}

void print_size_by_type(const QuantPlan& plan) {
  fmt::print("{:<6} {:>8} {:>14} {:>16}\n", "type", "tensors", "elements", "bytes");
  for (const auto& [type, t] : totals_by_type(plan))
    fmt::print("{:<6} {:>8} {:>14} {:>16}  ({:.2f} MiB)\n",
               ggml_type_name(static_cast<GgmlType>(type)), t.n_tensors, t.n_elements, t.n_bytes,
               mib(t.n_bytes));
  const double ratio = plan.src_tensor_bytes > 0 ? static_cast<double>(plan.out_tensor_bytes) /
                                                       static_cast<double>(plan.src_tensor_bytes)
                                                 : 0.0;
  fmt::print("tensor data: {} bytes ({:.2f} MiB), input {} bytes ({:.2f} MiB), {:.1f}%\n",
             plan.out_tensor_bytes, mib(plan.out_tensor_bytes), plan.src_tensor_bytes,
             mib(plan.src_tensor_bytes), 100.0 * ratio);
}

void print_worst_tensors(const QuantPlan& plan, const std::vector<TensorError>& errors, size_t n) {
  const std::vector<size_t> worst = worst_tensors(errors, n);
  if (n == 0) return;
  if (worst.empty()) {
    fmt::print("no tensor lost precision\n");
    return;
  }
  fmt::print("worst {} tensors by SNR:\n", worst.size());
  fmt::print("  {:<32} {:<6} {:>12} {:>12} {:>9}\n", "tensor", "type", "rmse", "max_abs", "snr_db");
  for (const size_t i : worst)
    fmt::print("  {:<32} {:<6} {:>12.4e} {:>12.4e} {:>9.2f}\n", plan.tensors[i].name,
               ggml_type_name(plan.tensors[i].chosen), errors[i].rmse(), errors[i].max_abs,
               errors[i].snr_db());
}

nlohmann::ordered_json quantize_json(const QuantPlan& plan, const std::vector<TensorError>* errors,
                                     const std::string& input, const std::string& output,
                                     size_t n_worst, const ReportExtras* extras) {
  nlohmann::ordered_json j;
  j["input"] = input;
  j["output"] = output;
  j["dry_run"] = errors == nullptr;
  j["type"] = ggml_type_name(plan.type);
  if (!plan.mix.empty()) j["mix"] = plan.mix;
  j["pure"] = plan.pure;
  j["file_type"] = plan.file_type;
  j["src_tensor_bytes"] = plan.src_tensor_bytes;
  j["out_tensor_bytes"] = plan.out_tensor_bytes;
  nlohmann::ordered_json by = nlohmann::ordered_json::array();
  for (const auto& [type, t] : totals_by_type(plan))
    by.push_back({{"type", ggml_type_name(static_cast<GgmlType>(type))},
                  {"tensors", t.n_tensors},
                  {"elements", t.n_elements},
                  {"bytes", t.n_bytes}});
  j["by_type"] = by;
  j["warnings"] = plan.warnings;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorPlan& p = plan.tensors[i];
    nlohmann::ordered_json t{{"name", p.name},
                             {"shape", p.shape},
                             {"src_type", ggml_type_name(p.src_type)},
                             {"wanted", ggml_type_name(p.wanted)},
                             {"chosen", ggml_type_name(p.chosen)},
                             {"rule", p.rule},
                             {"src_bytes", p.src_bytes},
                             {"out_bytes", p.out_bytes},
                             {"bits_per_weight", bits_per_weight(p)}};
    if (errors != nullptr && (*errors)[i].measured) {
      const TensorError& e = (*errors)[i];
      t["rmse"] = e.rmse();
      t["max_abs"] = e.max_abs;
      t["snr_db"] = snr_json(e.snr_db());
    }
    if (extras != nullptr && !extras->imatrix.empty())
      t["imatrix"] = std::find(extras->imatrix_used.begin(), extras->imatrix_used.end(), p.name) !=
                     extras->imatrix_used.end();
    tensors.push_back(std::move(t));
  }
  j["tensors"] = tensors;
  if (errors != nullptr) {
    nlohmann::ordered_json worst = nlohmann::ordered_json::array();
    for (const size_t i : worst_tensors(*errors, n_worst)) worst.push_back(plan.tensors[i].name);
    j["worst"] = worst;
  }
  if (extras != nullptr && !extras->imatrix.empty())
    j["imatrix"] = {{"file", extras->imatrix},
                    {"weighted", extras->imatrix_used.size()},
                    {"missing", extras->imatrix_missing}};
  return j;
}

}  // namespace llmctl::cli
