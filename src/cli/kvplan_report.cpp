// kvplan text, sweep, JSON and SVG output.
#include "cli/kvplan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plan/explain.h"

namespace llmctl::cli {

using plan::kGiB;

namespace {

double gib(double bytes) { return bytes / kGiB; }
double gib(uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }
double gib(int64_t bytes) { return static_cast<double>(bytes) / kGiB; }

std::vector<int64_t> sweep_contexts(const plan::PlanInputs& in) {
  std::vector<int64_t> v;
  const int64_t top = std::max<int64_t>(in.ctx, in.model.max_ctx > 0 ? std::min<int64_t>(in.model.max_ctx, 131072) : 32768);
  for (int64_t c = 2048; c <= top; c *= 2) v.push_back(c);
  if (std::find(v.begin(), v.end(), in.ctx) == v.end()) v.push_back(in.ctx);
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> sweep_batches(const plan::PlanInputs& in) {
  std::vector<int64_t> v{1, 4, 16, 64, 256};
  if (std::find(v.begin(), v.end(), in.batch) == v.end()) v.push_back(in.batch);
  std::sort(v.begin(), v.end());
  return v;
}

struct SweepCell {
  int64_t ctx, batch;
  plan::MemoryPlan p;
  plan::Roofline r;
};

std::vector<SweepCell> run_sweep(const plan::PlanInputs& in) {
  std::vector<SweepCell> cells;
  for (const int64_t b : sweep_batches(in)) {
    for (const int64_t c : sweep_contexts(in)) {
      plan::PlanInputs alt = in;
      alt.ctx = c;
      alt.batch = b;
      plan::MemoryPlan p = plan::plan_memory(alt, false);
      plan::Roofline r = plan::roofline(alt, p);
      cells.push_back({c, b, std::move(p), r});
    }
  }
  return cells;
}

std::string verdict(const plan::MemoryPlan& p) {
  if (p.fits)
    return fmt::format("fits: {:.2f} of {:.2f} GiB per GPU; room for {} at this context", gib(p.needed_bytes),
                       gib(p.kv_budget_given ? p.needed_bytes - p.kv_bytes_needed + static_cast<uint64_t>(p.kv_budget_bytes)
                                             : p.requested_bytes),
                       plan::sequence_count(p.max_concurrency));
  std::string s = fmt::format("does not fit by {:.2f} GiB per GPU", gib(p.shortfall_bytes));
  if (!p.levers.empty())
    s += fmt::format("; largest lever: {} (saves {:.2f} GiB per GPU{})", p.levers.front().what,
                     gib(p.levers.front().saves_bytes), p.levers.front().fits_after ? ", then fits" : "");
  return s;
}

}  // namespace

void print_kvplan_text(const plan::PlanInputs& in, const plan::MemoryPlan& p, const plan::Roofline& r, bool sweep) {
  const plan::ModelConfig& m = in.model;
  const auto n_params = static_cast<double>(p.params.total());
  fmt::print("model   {}  ({} params, {} layers, {} heads / {} KV heads, head_dim {}{}{})\n", m.label,
             n_params >= 1e9 ? fmt::format("{:.2f} B", n_params / 1e9) : fmt::format("{:.2f} M", n_params / 1e6),
             m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim,
             m.is_mla() ? ", MLA" : "", m.is_moe() ? fmt::format(", MoE {}x top-{}", m.n_experts, m.n_experts_used) : "");
  fmt::print("gpu     {} x {}  ({:.2f} GiB usable, {:g} GB/s, {:g} TFLOPS), TP {}, {} replica(s)\n", in.n_gpus,
             in.gpu.label, gib(p.usable_bytes), in.gpu.bandwidth_gbs, in.gpu.tflops_16, in.tp, p.replicas);
  fmt::print("setup   engine {}, weights {}, KV {}, ctx {}, parallel {}, block {}, gpu-util {:g}\n\n",
             plan::engine_name(in.engine), in.weight.name, plan::kv_types_label(in), in.ctx, in.batch, p.block_size, in.gpu_util);

  fmt::print("memory per GPU                       GiB\n");
  fmt::print("  usable (cudaMemGetInfo)       {:>9.2f}\n", gib(p.usable_bytes));
  if (!p.kv_budget_given) fmt::print("  {:<30}{:>9.2f}\n", in.engine == plan::Engine::Llamacpp ? "budget (all of it)" : "budget (gpu-util x usable)", gib(p.requested_bytes));
  if (!p.kv_budget_given && in.engine != plan::Engine::Llamacpp)
    fmt::print("  reserve (1 - gpu-util)        {:>9.2f}   (CUDA context, fragmentation)\n",
               gib(p.usable_bytes - p.requested_bytes));
  fmt::print("  weights                       {:>9.2f}   (whole model {:.2f} GiB)\n", gib(p.weights_bytes_per_gpu),
             gib(p.weights_bytes));
  fmt::print("  activation / workspace        {:>9.2f}   (estimate)\n", gib(p.activation_bytes));
  fmt::print("  CUDA context / non-torch      {:>9.2f}\n", gib(p.overhead_bytes));
  fmt::print("  KV cache available            {:>9.2f}{}\n", gib(p.kv_budget_bytes), p.kv_budget_given ? "   (given)" : "");
  fmt::print("  KV cache needed               {:>9.2f}   ({} seq x {} tokens)\n\n", gib(p.kv_bytes_needed),
             p.batch_per_replica, in.ctx);

  fmt::print("KV per token     {} B whole model, {} B per GPU\n", p.kv.bytes_per_token, p.kv.bytes_per_token_per_gpu);
  if (p.kv.mla)
    fmt::print("                 = {} layers x (kv_lora_rank {} + rope {}) x {:g} B (MLA latent, not split by TP)\n",
               p.kv.n_layers, m.kv_lora_rank, m.qk_rope_dim, in.kv.bytes_per_elem());
  else if (plan::v_format(in).name != in.kv.name)
    fmt::print("                 = {} layers x {} KV heads x (K {} x {:g} B ({}) + V {} x {:g} B ({}))\n",
               p.kv.n_layers, p.kv.kv_heads, p.kv.k_dim, in.kv.bytes_per_elem(), in.kv.name, p.kv.v_dim,
               plan::v_format(in).bytes_per_elem(), plan::v_format(in).name);
  else
    fmt::print("                 = {} layers x {} KV heads x (K {} + V {}) x {:g} B ({})\n", p.kv.n_layers,
               p.kv.kv_heads, p.kv.k_dim, p.kv.v_dim, in.kv.bytes_per_elem(), in.kv.name);
  fmt::print("KV per sequence  {:.3f} GiB at {} tokens (per GPU)\n", gib(p.kv_bytes_per_seq), in.ctx);
  fmt::print("KV blocks        {} of {} tokens = {} tokens\n", p.kv_blocks, p.block_size, p.kv_tokens);
  fmt::print("concurrency      {} at {} tokens ({:.2f}x)\n", plan::sequence_count(p.max_concurrency), in.ctx, p.concurrency_ratio);
  fmt::print("max context      {} tokens for {}{}\n", p.max_context, plan::sequence_count(in.batch),
             m.max_ctx > 0 && p.max_context > m.max_ctx ? fmt::format(" (the model is trained for {})", m.max_ctx) : "");
  fmt::print("decode           {:.0f} tok/s total, {:.1f} tok/s per sequence ({}-bound roofline)\n", r.decode_tok_s,
             r.decode_tok_s_per_seq, r.decode_memory_bound ? "memory" : "compute");
  fmt::print("prefill          {:.3f} s for {} tokens (roofline at {:g} TFLOPS x {})\n", r.prefill_s, in.ctx,
             r.tflops_used, in.tp);
  fmt::print("verdict          {}\n", verdict(p));
  for (size_t i = 1; i < p.levers.size(); ++i)
    fmt::print("                 or {} (saves {:.2f} GiB{})\n", p.levers[i].what, gib(p.levers[i].saves_bytes),
               p.levers[i].fits_after ? ", then fits" : "");
  if (m.max_ctx > 0 && in.ctx > m.max_ctx)
    fmt::print("note             -c {} is beyond the model's configured context of {}\n", in.ctx, m.max_ctx);
  if (!sweep) return;

  const std::vector<SweepCell> cells = run_sweep(in);
  const std::vector<int64_t> ctxs = sweep_contexts(in);
  fmt::print("\nsweep: memory per GPU in GiB (! = does not fit) / decode tok/s total\n  {:>6}", "parallel");
  for (const int64_t c : ctxs) fmt::print(" {:>14}", fmt::format("ctx {}", c));
  fmt::print("\n");
  int64_t last_b = -1;
  for (const SweepCell& c : cells) {
    if (c.batch != last_b) {
      if (last_b >= 0) fmt::print("\n");
      fmt::print("  {:>6}", c.batch);
      last_b = c.batch;
    }
    fmt::print(" {:>14}", c.p.fits ? fmt::format("{:.1f}/{:.0f}", gib(c.p.needed_bytes), c.r.decode_tok_s)
                                   : fmt::format("{:.1f}!", gib(c.p.needed_bytes)));
  }
  fmt::print("\n");
}

nlohmann::ordered_json kvplan_json(const plan::PlanInputs& in, const plan::MemoryPlan& p, const plan::Roofline& r,
                                   bool sweep) {
  nlohmann::ordered_json j;
  j["model"] = in.model.label;
  j["gpu"] = in.gpu.name;
  j["engine"] = plan::engine_name(in.engine);
  j["n_gpus"] = in.n_gpus;
  j["tp"] = in.tp;
  j["ctx"] = in.ctx;
  j["parallel"] = in.batch;
  j["batch"] = in.batch;  // the old name of "parallel", kept for scripts that read it
  j["weight_type"] = in.weight.name;
  j["kv_type"] = plan::kv_types_label(in);
  j["kv_type_k"] = in.kv.name;
  j["kv_type_v"] = plan::v_format(in).name;
  j["block_size"] = p.block_size;
  j["params"] = p.params.total();
  j["active_params"] = p.params.active_matmul;
  j["usable_bytes"] = p.usable_bytes;
  j["requested_bytes"] = p.requested_bytes;
  j["weights_bytes"] = p.weights_bytes;
  j["weights_bytes_per_gpu"] = p.weights_bytes_per_gpu;
  j["activation_bytes"] = p.activation_bytes;
  j["overhead_bytes"] = p.overhead_bytes;
  j["kv_budget_bytes"] = p.kv_budget_bytes;
  j["kv_bytes_per_token"] = p.kv.bytes_per_token;
  j["kv_bytes_per_token_per_gpu"] = p.kv.bytes_per_token_per_gpu;
  j["kv_bytes_per_seq"] = p.kv_bytes_per_seq;
  j["kv_bytes_needed"] = p.kv_bytes_needed;
  j["kv_blocks"] = p.kv_blocks;
  j["kv_tokens"] = p.kv_tokens;
  j["max_concurrency"] = p.max_concurrency;
  j["concurrency_ratio"] = p.concurrency_ratio;
  j["max_context"] = p.max_context;
  j["needed_bytes"] = p.needed_bytes;
  j["decode_tok_s"] = r.decode_tok_s;
  j["decode_tok_s_per_seq"] = r.decode_tok_s_per_seq;
  j["prefill_s"] = r.prefill_s;
  j["fits"] = p.fits;
  j["shortfall_bytes"] = p.shortfall_bytes;
  j["verdict"] = verdict(p);
  nlohmann::ordered_json levers = nlohmann::ordered_json::array();
  for (const plan::Lever& l : p.levers) levers.push_back({{"what", l.what}, {"saves_bytes", l.saves_bytes}, {"fits_after", l.fits_after}});
  j["levers"] = levers;
  if (sweep) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const SweepCell& c : run_sweep(in))
      rows.push_back({{"ctx", c.ctx}, {"parallel", c.batch}, {"batch", c.batch},  // batch: old name
                      {"needed_bytes", c.p.needed_bytes}, {"fits", c.p.fits},
                      {"decode_tok_s", c.r.decode_tok_s}, {"prefill_s", c.r.prefill_s}});
    j["sweep"] = rows;
  }
  return j;
}

std::string kvplan_svg(const plan::PlanInputs& in, const plan::MemoryPlan& p) {
  constexpr double W = 720, H = 420, L = 70, R = 20, T = 40, B = 50;
  const int64_t top = std::max<int64_t>(in.ctx * 2, in.model.max_ctx > 0 ? in.model.max_ctx : 32768);
  std::vector<int64_t> xs;
  for (int64_t c = 256; c <= top; c *= 2) xs.push_back(c);
  auto total_at = [&](int64_t ctx, int64_t batch) {
    plan::PlanInputs alt = in;
    alt.ctx = ctx;
    alt.batch = batch;
    return gib(plan::plan_memory(alt, false).needed_bytes);
  };
  const double budget = gib(p.kv_budget_given ? p.weights_bytes_per_gpu + p.activation_bytes + p.overhead_bytes +
                                                    static_cast<uint64_t>(std::max<int64_t>(0, p.kv_budget_bytes))
                                              : p.requested_bytes);
  double ymax = budget * 1.2;
  ymax = std::max(ymax, std::min(total_at(xs.back(), in.batch), budget * 3));
  const double lx0 = std::log2(static_cast<double>(xs.front())), lx1 = std::log2(static_cast<double>(xs.back()));
  auto px = [&](int64_t c) { return L + (std::log2(static_cast<double>(c)) - lx0) / (lx1 - lx0) * (W - L - R); };
  auto py = [&](double g) { return H - B - std::min(g, ymax) / ymax * (H - T - B); };
  std::string s = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
  s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"14\">{} on {} x {} (TP {}): memory per GPU vs context</text>\n",
                   L, in.model.label, in.n_gpus, in.gpu.label, in.tp);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, T, L, H - B);
  for (const int64_t c : xs)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(c), H - B + 16,
                     c >= 1024 ? fmt::format("{}k", c / 1024) : fmt::format("{}", c));
  for (int i = 0; i <= 4; ++i) {
    const double g = ymax * i / 4;
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.0f}</text>\n", L - 6, py(g) + 4, g);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">context (tokens, log scale)</text>\n", (W + L) / 2, H - 12);
  s += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">GiB per GPU</text>\n", (H) / 2, H / 2);
  s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"red\" stroke-dasharray=\"6 4\"/>\n", L, py(budget), W - R, py(budget));
  s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"red\" text-anchor=\"end\">budget {:.1f} GiB</text>\n", W - R, py(budget) - 4, budget);
  const double fixed = gib(p.weights_bytes_per_gpu + p.activation_bytes + p.overhead_bytes);
  s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"gray\"/>\n", L, py(fixed), W - R, py(fixed));
  s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"gray\">weights + workspace {:.1f} GiB</text>\n", L + 4, py(fixed) - 4, fixed);
  const std::pair<int64_t, const char*> series[] = {{1, "#1f77b4"}, {in.batch, "#2ca02c"}};
  for (const auto& [batch, color] : series) {
    std::string pts;
    for (const int64_t c : xs) pts += fmt::format("{:.1f},{:.1f} ", px(c), py(total_at(c, batch)));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" text-anchor=\"end\">batch {}</text>\n", W - R,
                     py(total_at(xs.back(), batch)) + 14, color, batch);
    if (in.batch == 1) break;
  }
  s += "</svg>\n";
  return s;
}

void print_model_list() {
  fmt::print("{:<18} {:<20} {:>8} {:>7} {:>6} {:>4} {:>5}  {}\n", "name", "model", "params", "layers", "heads", "kv",
             "hdim", "notes");
  for (const plan::ModelConfig& m : plan::model_catalog()) {
    std::string notes;
    if (m.is_mla()) notes += "MLA ";
    if (m.is_moe()) notes += fmt::format("MoE {}x top-{} ", m.n_experts, m.n_experts_used);
    if (m.sliding_window > 0) notes += fmt::format("SWA {}{} ", m.sliding_window, m.swa_period ? " alternating" : "");
    fmt::print("{:<18} {:<20} {:>7.2f}B {:>7} {:>6} {:>4} {:>5}  {}\n", m.name, m.label,
               static_cast<double>(plan::count_params(m).total()) / 1e9, m.n_layers, m.n_heads, m.n_kv_heads,
               m.head_dim, notes);
  }
}

void print_gpu_list() {
  fmt::print("{:<15} {:<24} {:>10} {:>8} {:>9} {:>8}\n", "name", "gpu", "usable GiB", "GB/s", "TF 16bit", "TF fp8");
  for (const plan::GpuSpec& g : plan::gpu_catalog())
    fmt::print("{:<15} {:<24} {:>10.2f} {:>8g} {:>9g} {:>8g}\n", g.name, g.label, gib(g.usable_bytes), g.bandwidth_gbs,
               g.tflops_16, g.tflops_8);
}

}  // namespace llmctl::cli
